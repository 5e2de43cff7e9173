//! SIP endpoints: `sip:<slug>@host` addresses that route inbound calls to an agent. Deleting
//! one is final: the row stays for the calls that refer to it, but no lookup finds it again.

use chrono::{DateTime, Duration, Utc};
use switchboard_actors::ids::{AgentId, SipEndpointId, WorkspaceId};

use super::db::{Json, Row, query};
use super::{Page, Paged, Store, StoreResult, corrupt, opt_id, ts};

/// A stored endpoint (the API adds `sip_uri`).
#[derive(Debug, Clone, PartialEq)]
pub struct SipEndpoint {
    pub id: SipEndpointId,
    pub workspace_id: WorkspaceId,
    pub name: String,
    pub slug: String,
    pub inbound_agent_id: Option<AgentId>,
    pub is_active: bool,
    /// Canonical addresses and CIDR blocks; `None` accepts any source.
    pub allowed_source_ips: Option<Vec<String>>,
    pub last_call_at: Option<DateTime<Utc>>,
    /// Calls at once, ringing or answered; `None`: no cap of its own.
    pub max_concurrent_calls: Option<i64>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A new endpoint's fields.
#[derive(Debug, Clone)]
pub struct NewSipEndpoint<'a> {
    pub name: &'a str,
    pub slug: &'a str,
    pub inbound_agent_id: Option<AgentId>,
    pub allowed_source_ips: Option<&'a [String]>,
    pub max_concurrent_calls: Option<i64>,
}

/// A change to an endpoint; `None` leaves a field as it is. The inner `Option`s set NULL.
#[derive(Debug, Clone, Default)]
pub struct SipEndpointUpdate<'a> {
    pub name: Option<&'a str>,
    pub inbound_agent_id: Option<Option<AgentId>>,
    pub is_active: Option<bool>,
    pub allowed_source_ips: Option<Option<&'a [String]>>,
    pub max_concurrent_calls: Option<Option<i64>>,
}

/// What creating an endpoint did.
#[derive(Debug)]
pub enum SipEndpointCreation {
    Created(SipEndpoint),
    /// The workspace created `limit` endpoints in the last day already.
    DailyLimit,
    /// The generated slug is taken (never in practice: 24 random characters); try another.
    SlugTaken,
}

const COLUMNS: &str = "id, workspace_id, name, slug, inbound_agent_id, is_active, allowed_source_ips, last_call_at, max_concurrent_calls, created_at, updated_at";

fn endpoint_row(r: Row) -> StoreResult<SipEndpoint> {
    let ips: Option<String> = r.try_get("allowed_source_ips")?;
    let allowed_source_ips = ips
        .map(|text| serde_json::from_str(&text).map_err(|e| corrupt("allowed_source_ips", e)))
        .transpose()?;
    Ok(SipEndpoint {
        id: SipEndpointId::from_uuid(r.try_get("id")?),
        workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
        name: r.try_get("name")?,
        slug: r.try_get("slug")?,
        inbound_agent_id: opt_id(&r, "inbound_agent_id")?,
        is_active: r.try_get("is_active")?,
        allowed_source_ips,
        last_call_at: r.try_get("last_call_at")?,
        max_concurrent_calls: r.try_get("max_concurrent_calls")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn ips_json(ips: Option<&[String]>) -> Option<String> {
    ips.map(|list| serde_json::Value::from(list.to_vec()).to_string())
}

impl Store {
    /// Creates an endpoint unless the workspace created `daily_limit` in the last 24 hours
    /// (deleted ones count: deleting does not give a creation back).
    pub async fn create_sip_endpoint(
        &self,
        ws: WorkspaceId,
        new: &NewSipEndpoint<'_>,
        daily_limit: i64,
    ) -> StoreResult<SipEndpointCreation> {
        let now = self.now();
        let id = SipEndpointId::new();
        let at = ts(now);
        let script = super::atomic_sql(&format!(
            "INSERT INTO sip_endpoints (id, workspace_id, name, slug, inbound_agent_id, is_active, allowed_source_ips, max_concurrent_calls, created_at, updated_at) \
             SELECT ?, ?, ?, ?, ?, TRUE, ?, ?, ?, ? \
             WHERE (SELECT COUNT(*) FROM sip_endpoints WHERE workspace_id = ? AND created_at > ?) < ? \
             AND NOT EXISTS (SELECT 1 FROM sip_endpoints WHERE slug = ?); \
             SELECT {COLUMNS} FROM sip_endpoints WHERE id = ? AND changes() = 1"
        ));
        let done = self
            .atomic(
                query(script)
                    .bind(id.as_uuid())
                    .bind(ws.as_uuid())
                    .bind(new.name.to_owned())
                    .bind(new.slug.to_owned())
                    .bind(new.inbound_agent_id.map(|a| a.as_uuid()))
                    .bind(ips_json(new.allowed_source_ips).map(Json))
                    .bind(new.max_concurrent_calls)
                    .bind(at)
                    .bind(at)
                    .bind(ws.as_uuid())
                    .bind(ts(now - Duration::days(1)))
                    .bind(daily_limit)
                    .bind(new.slug.to_owned())
                    .bind(id.as_uuid()),
            )
            .await?;
        if let Some(row) = done.rows.into_iter().next() {
            return Ok(SipEndpointCreation::Created(endpoint_row(row)?));
        }
        let taken: bool = query("SELECT EXISTS (SELECT 1 FROM sip_endpoints WHERE slug = ?)")
            .bind(new.slug)
            .scalar(&mut self.conn().await?)
            .await?;
        Ok(if taken {
            SipEndpointCreation::SlugTaken
        } else {
            SipEndpointCreation::DailyLimit
        })
    }

    pub async fn sip_endpoint(
        &self,
        ws: WorkspaceId,
        id: SipEndpointId,
    ) -> StoreResult<Option<SipEndpoint>> {
        let row = query(format!(
            "SELECT {COLUMNS} FROM sip_endpoints WHERE workspace_id = ? AND id = ? AND deleted_at IS NULL"
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.map(endpoint_row).transpose()
    }

    /// The workspace's endpoints, oldest first.
    pub async fn list_sip_endpoints(
        &self,
        ws: WorkspaceId,
        page: Page,
    ) -> StoreResult<Paged<SipEndpoint>> {
        let mut conn = self.conn().await?;
        let rows = query(format!(
            "SELECT {COLUMNS} FROM sip_endpoints WHERE workspace_id = ? AND deleted_at IS NULL \
             ORDER BY created_at, id LIMIT ? OFFSET ?"
        ))
        .bind(ws.as_uuid())
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut conn)
        .await?;
        let total: i64 = query(
            "SELECT COUNT(*) FROM sip_endpoints WHERE workspace_id = ? AND deleted_at IS NULL",
        )
        .bind(ws.as_uuid())
        .scalar(&mut conn)
        .await?;
        drop(conn);
        Ok(Paged {
            items: rows
                .into_iter()
                .map(endpoint_row)
                .collect::<Result<_, _>>()?,
            total,
        })
    }

    pub async fn update_sip_endpoint(
        &self,
        ws: WorkspaceId,
        id: SipEndpointId,
        change: &SipEndpointUpdate<'_>,
    ) -> StoreResult<Option<SipEndpoint>> {
        let row = query(format!(
            "UPDATE sip_endpoints SET \
               name = CASE WHEN ? THEN ? ELSE name END, \
               inbound_agent_id = CASE WHEN ? THEN ? ELSE inbound_agent_id END, \
               is_active = COALESCE(?, is_active), \
               allowed_source_ips = CASE WHEN ? THEN ? ELSE allowed_source_ips END, \
               max_concurrent_calls = CASE WHEN ? THEN ? ELSE max_concurrent_calls END, \
               updated_at = ? \
             WHERE workspace_id = ? AND id = ? AND deleted_at IS NULL RETURNING {COLUMNS}"
        ))
        .bind(change.name.is_some())
        .bind(change.name)
        .bind(change.inbound_agent_id.is_some())
        .bind(change.inbound_agent_id.flatten().map(|a| a.as_uuid()))
        .bind(change.is_active)
        .bind(change.allowed_source_ips.is_some())
        .bind(change.allowed_source_ips.and_then(ips_json).map(Json))
        .bind(change.max_concurrent_calls.is_some())
        .bind(change.max_concurrent_calls.flatten())
        .bind(ts(self.now()))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.map(endpoint_row).transpose()
    }

    /// Deletes an endpoint for good; `false` if there was none.
    pub async fn delete_sip_endpoint(
        &self,
        ws: WorkspaceId,
        id: SipEndpointId,
    ) -> StoreResult<bool> {
        self.retire_row("sip_endpoints", "deleted_at", ws, id.as_uuid())
            .await
    }
}
