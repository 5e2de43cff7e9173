//! Leads and lead tags. A deleted lead is hidden from every read (and frees its number); a
//! deleted tag leaves the leads it was on.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use switchboard_actors::ids::{LeadId, LeadTagId, WorkspaceId};
use utoipa::ToSchema;

use super::db::{Json, Query, Row, query};
use super::{Page, Paged, Store, StoreResult, classify, corrupt, ts};

#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct LeadTag {
    #[schema(value_type = uuid::Uuid)]
    pub id: LeadTagId,
    /// 1-50 characters, unique in the workspace (ignoring case).
    pub name: String,
    /// `#rrggbb`.
    pub color: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Lead {
    #[schema(value_type = uuid::Uuid)]
    pub id: LeadId,
    #[serde(flatten)]
    pub fields: LeadFields,
    pub tags: Vec<LeadTag>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A lead's writable fields (for create, all; for update, the merged result).
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub struct LeadFields {
    /// E.164; unique among the workspace's leads.
    pub phone_number: String,
    pub first_name: String,
    pub last_name: String,
    pub email: Option<String>,
    pub company: String,
    /// IANA time zone.
    pub timezone: Option<String>,
    pub notes: String,
    #[schema(value_type = Object)]
    pub metadata: Value,
}

/// Filters of the lead list.
#[derive(Debug, Clone, Default)]
pub struct LeadFilter {
    pub tag: Option<LeadTagId>,
    /// Part of a name, email, company or number.
    pub search: Option<String>,
    pub phone_number: Option<String>,
}

fn tag_row(r: &Row) -> StoreResult<LeadTag> {
    Ok(LeadTag {
        id: LeadTagId::from_uuid(r.try_get("id")?),
        name: r.try_get("name")?,
        color: r.try_get("color")?,
        created_at: r.try_get("created_at")?,
    })
}

const LEAD_COLUMNS: &str = "id, phone_number, first_name, last_name, email, company, timezone, notes, metadata, created_at, updated_at";

fn lead_row(r: &Row) -> StoreResult<Lead> {
    let metadata: String = r.try_get("metadata")?;
    Ok(Lead {
        id: LeadId::from_uuid(r.try_get("id")?),
        fields: LeadFields {
            phone_number: r.try_get("phone_number")?,
            first_name: r.try_get("first_name")?,
            last_name: r.try_get("last_name")?,
            email: r.try_get("email")?,
            company: r.try_get("company")?,
            timezone: r.try_get("timezone")?,
            notes: r.try_get("notes")?,
            metadata: serde_json::from_str(&metadata).map_err(|e| corrupt("leads.metadata", e))?,
        },
        tags: Vec::new(),
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Binds a lead's fields, in column order: phone_number, first_name, last_name, email,
/// company, timezone, notes, metadata.
fn bind_fields<'q>(q: Query<'q>, f: &'q LeadFields) -> Query<'q> {
    q.bind(&f.phone_number)
        .bind(&f.first_name)
        .bind(&f.last_name)
        .bind(&f.email)
        .bind(&f.company)
        .bind(&f.timezone)
        .bind(&f.notes)
        .bind(Json(f.metadata.to_string()))
}

impl Store {
    pub async fn create_lead(&self, ws: WorkspaceId, f: &LeadFields) -> StoreResult<Lead> {
        let id = LeadId::new();
        let now = ts(self.now());
        let q = query(
            "INSERT INTO leads (id, workspace_id, phone_number, first_name, last_name, email, company, timezone, notes, metadata, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid());
        bind_fields(q, f)
            .bind(now)
            .bind(now)
            .execute(&mut self.conn().await?)
            .await
            .map_err(classify)?;
        self.lead(ws, id)
            .await?
            .ok_or_else(|| corrupt("leads", "vanished after insert"))
    }

    pub async fn lead(&self, ws: WorkspaceId, id: LeadId) -> StoreResult<Option<Lead>> {
        let row = query(format!(
            "SELECT {LEAD_COLUMNS} FROM leads WHERE workspace_id = ? AND id = ? AND deleted_at IS NULL"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let mut lead = lead_row(&row)?;
        lead.tags = self
            .tags_of(&[lead.id])
            .await?
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        Ok(Some(lead))
    }

    /// Tags of several leads, as (lead, tag) pairs ordered by tag name.
    async fn tags_of(&self, leads: &[LeadId]) -> StoreResult<Vec<(LeadId, LeadTag)>> {
        if leads.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = query(
            "SELECT g.lead_id, t.id, t.name, t.color, t.created_at FROM lead_taggings g \
             JOIN lead_tags t ON t.id = g.tag_id WHERE g.lead_id IN (",
        );
        for (i, id) in leads.iter().enumerate() {
            q.push(if i == 0 { "" } else { ", " })
                .push_bind(id.as_uuid());
        }
        q.push(") ORDER BY lower(t.name), t.name");
        let rows = q.fetch_all(&mut self.conn().await?).await?;
        rows.iter()
            .map(|r| Ok((LeadId::from_uuid(r.try_get("lead_id")?), tag_row(r)?)))
            .collect()
    }

    pub async fn list_leads(
        &self,
        ws: WorkspaceId,
        filter: &LeadFilter,
        page: Page,
    ) -> StoreResult<Paged<Lead>> {
        let build = |select: &str| {
            let mut q = query(select);
            q.push(" FROM leads l WHERE l.workspace_id = ")
                .push_bind(ws.as_uuid())
                .push(" AND l.deleted_at IS NULL");
            if let Some(tag) = filter.tag {
                q.push(" AND EXISTS (SELECT 1 FROM lead_taggings g WHERE g.lead_id = l.id AND g.tag_id = ")
                    .push_bind(tag.as_uuid())
                    .push(")");
            }
            if let Some(phone) = &filter.phone_number {
                q.push(" AND l.phone_number = ").push_bind(phone.clone());
            }
            if let Some(s) = &filter.search {
                let like = format!(
                    "%{}%",
                    s.replace('\\', "\\\\")
                        .replace('%', "\\%")
                        .replace('_', "\\_")
                );
                q.push(" AND (");
                for (i, col) in [
                    "first_name",
                    "last_name",
                    "email",
                    "company",
                    "phone_number",
                ]
                .iter()
                .enumerate()
                {
                    if i > 0 {
                        q.push(" OR ");
                    }
                    // Case folded on both sides: SQLite's LIKE ignores ASCII case,
                    // PostgreSQL's does not.
                    q.push(format!("lower(l.{col}) LIKE lower("))
                        .push_bind(like.clone())
                        .push(") ESCAPE '\\'");
                }
                q.push(")");
            }
            q
        };
        let mut conn = self.conn().await?;
        let total: i64 = build("SELECT COUNT(*)").scalar(&mut conn).await?;
        let mut q = build(&format!(
            "SELECT {}",
            LEAD_COLUMNS
                .split(", ")
                .map(|c| format!("l.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        q.push(" ORDER BY l.created_at DESC, l.id DESC LIMIT ")
            .push_bind(page.limit)
            .push(" OFFSET ")
            .push_bind(page.offset);
        let rows = q.fetch_all(&mut conn).await?;
        drop(conn);
        let mut items: Vec<Lead> = rows.iter().map(lead_row).collect::<StoreResult<_>>()?;
        let ids: Vec<LeadId> = items.iter().map(|l| l.id).collect();
        for (lead, tag) in self.tags_of(&ids).await? {
            if let Some(l) = items.iter_mut().find(|l| l.id == lead) {
                l.tags.push(tag);
            }
        }
        Ok(Paged { items, total })
    }

    pub async fn update_lead(
        &self,
        ws: WorkspaceId,
        id: LeadId,
        f: &LeadFields,
    ) -> StoreResult<Option<Lead>> {
        let q = query(
            "UPDATE leads SET phone_number = ?, first_name = ?, last_name = ?, email = ?, company = ?, timezone = ?, \
             notes = ?, metadata = ?, updated_at = ? WHERE workspace_id = ? AND id = ? AND deleted_at IS NULL",
        );
        let done = bind_fields(q, f)
            .bind(ts(self.now()))
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .execute(&mut self.conn().await?)
            .await
            .map_err(classify)?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.lead(ws, id).await
    }

    pub async fn delete_lead(&self, ws: WorkspaceId, id: LeadId) -> StoreResult<bool> {
        let at = ts(self.now());
        let done = query(
            "UPDATE leads SET deleted_at = ?, updated_at = ? WHERE workspace_id = ? AND id = ? AND deleted_at IS NULL",
        )
        .bind(at)
        .bind(at)
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Which of `ids` name live leads of the workspace.
    pub async fn existing_leads(
        &self,
        ws: WorkspaceId,
        ids: &[LeadId],
    ) -> StoreResult<std::collections::HashSet<LeadId>> {
        super::contacts::live_leads(&mut self.conn().await?, ws, ids).await
    }

    pub async fn create_lead_tag(
        &self,
        ws: WorkspaceId,
        name: &str,
        color: &str,
    ) -> StoreResult<LeadTag> {
        let id = LeadTagId::new();
        let row = query(
            "INSERT INTO lead_tags (id, workspace_id, name, color, created_at) VALUES (?, ?, ?, ?, ?) \
             RETURNING id, name, color, created_at",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(name)
        .bind(color)
        .bind(ts(self.now()))
        .fetch_one(&mut self.conn().await?)
        .await
        .map_err(classify)?;
        tag_row(&row)
    }

    pub async fn lead_tag(&self, ws: WorkspaceId, id: LeadTagId) -> StoreResult<Option<LeadTag>> {
        let row = query(
            "SELECT id, name, color, created_at FROM lead_tags WHERE workspace_id = ? AND id = ?",
        )
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(tag_row).transpose()
    }

    pub async fn list_lead_tags(&self, ws: WorkspaceId) -> StoreResult<Vec<LeadTag>> {
        let rows = query(
            "SELECT id, name, color, created_at FROM lead_tags WHERE workspace_id = ? ORDER BY lower(name), name",
        )
        .bind(ws.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter().map(tag_row).collect()
    }

    pub async fn update_lead_tag(
        &self,
        ws: WorkspaceId,
        id: LeadTagId,
        name: Option<&str>,
        color: Option<&str>,
    ) -> StoreResult<Option<LeadTag>> {
        let row = query(
            "UPDATE lead_tags SET name = COALESCE(?, name), color = COALESCE(?, color) \
             WHERE workspace_id = ? AND id = ? RETURNING id, name, color, created_at",
        )
        .bind(name)
        .bind(color)
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await
        .map_err(classify)?;
        row.as_ref().map(tag_row).transpose()
    }

    /// Deletes a tag and takes it off every lead.
    pub async fn delete_lead_tag(&self, ws: WorkspaceId, id: LeadTagId) -> StoreResult<bool> {
        let done = self
            .atomic(
                query(super::atomic_sql(
                    "DELETE FROM lead_taggings WHERE tag_id = (SELECT id FROM lead_tags WHERE workspace_id = ? AND id = ?); \
                     DELETE FROM lead_tags WHERE workspace_id = ? AND id = ?",
                ))
                .bind(ws.as_uuid())
                .bind(id.as_uuid())
                .bind(ws.as_uuid())
                .bind(id.as_uuid()),
            )
            .await?;
        Ok(done.changed(1) > 0)
    }

    /// Puts tags on a lead (already there: unchanged); `false` if the lead or a tag is not the
    /// workspace's.
    pub async fn tag_lead(
        &self,
        ws: WorkspaceId,
        lead: LeadId,
        tags: &[LeadTagId],
    ) -> StoreResult<bool> {
        if self.lead(ws, lead).await?.is_none() {
            return Ok(false);
        }
        for tag in tags {
            if self.lead_tag(ws, *tag).await?.is_none() {
                return Ok(false);
            }
        }
        let now = ts(self.now());
        let mut conn = self.conn().await?;
        for tag in tags {
            query(
                "INSERT INTO lead_taggings (lead_id, tag_id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            )
            .bind(lead.as_uuid())
            .bind(tag.as_uuid())
            .bind(now)
            .execute(&mut conn)
            .await?;
        }
        Ok(true)
    }

    pub async fn untag_lead(
        &self,
        ws: WorkspaceId,
        lead: LeadId,
        tag: LeadTagId,
    ) -> StoreResult<bool> {
        let done = query(
            "DELETE FROM lead_taggings WHERE lead_id = (SELECT id FROM leads WHERE workspace_id = ? AND id = ? AND deleted_at IS NULL) \
             AND tag_id = ?",
        )
        .bind(ws.as_uuid())
        .bind(lead.as_uuid())
        .bind(tag.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
