//! Contacts: enrollment in a campaign (one transaction, duplicates counted and left alone) and
//! their reads, always through a campaign of the caller's workspace.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::sqlite::SqliteRow;
use sqlx::{Connection, QueryBuilder, Row, Sqlite};
use switchboard_actors::campaign::AuditEvent;
use switchboard_actors::contact::{ContactState, ExclusionReason};
use switchboard_actors::ids::{ApiKeyId, CampaignId, ContactId, LeadId, WorkspaceId};
use utoipa::ToSchema;

use super::campaigns::insert_event;
use super::{Page, Paged, Store, StoreResult, corrupt, opt_id, ts};

/// A contact enrolled in a campaign.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Contact {
    #[schema(value_type = uuid::Uuid)]
    pub id: ContactId,
    #[schema(value_type = uuid::Uuid)]
    pub campaign_id: CampaignId,
    #[schema(value_type = Option<uuid::Uuid>)]
    pub lead_id: Option<LeadId>,
    pub phone_number: String,
    pub timezone: Option<String>,
    #[schema(value_type = Object)]
    pub variables: serde_json::Value,
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    pub state: String,
    pub attempts: i64,
    pub infra_retries: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub last_outcome: Option<String>,
    pub last_disposition_id: Option<uuid::Uuid>,
    pub last_call_id: Option<uuid::Uuid>,
    pub excluded_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A contact ready to insert.
#[derive(Debug, Clone)]
pub struct NewContact {
    pub phone_number: String,
    pub timezone: Option<String>,
    pub lead_id: Option<LeadId>,
    pub variables: serde_json::Value,
    pub metadata: serde_json::Value,
    /// Set for numbers on the do-not-call list: enrolled as `excluded`.
    pub excluded: Option<ExclusionReason>,
}

/// What an insert of contacts did.
#[derive(Debug, Default, Clone, Copy)]
pub struct EnrollCounts {
    pub enrolled: i64,
    pub excluded: i64,
    pub duplicates: i64,
}

fn contact_row(r: SqliteRow) -> StoreResult<Contact> {
    let variables: String = r.try_get("variables")?;
    let metadata: String = r.try_get("metadata")?;
    Ok(Contact {
        id: ContactId::from_uuid(r.try_get("id")?),
        campaign_id: CampaignId::from_uuid(r.try_get("campaign_id")?),
        lead_id: opt_id(&r, "lead_id")?,
        phone_number: r.try_get("phone_number")?,
        timezone: r.try_get("timezone")?,
        variables: serde_json::from_str(&variables).map_err(|e| corrupt("variables", e))?,
        metadata: serde_json::from_str(&metadata).map_err(|e| corrupt("metadata", e))?,
        state: r.try_get("state")?,
        attempts: r.try_get("attempts")?,
        infra_retries: r.try_get("infra_retries")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        last_outcome: r.try_get("last_outcome")?,
        last_disposition_id: r.try_get("last_disposition_id")?,
        last_call_id: r.try_get("last_call_id")?,
        excluded_reason: r.try_get("excluded_reason")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

impl Store {
    /// Inserts contacts in large batches inside one transaction; numbers already enrolled in
    /// the campaign are counted as duplicates and left untouched. `None` when the campaign is
    /// not one of `ws`'s.
    pub async fn enroll_contacts(
        &self,
        ws: WorkspaceId,
        campaign: CampaignId,
        contacts: &[NewContact],
        actor: ApiKeyId,
    ) -> StoreResult<Option<EnrollCounts>> {
        const BATCH: usize = 500;
        let at = ts(self.now());
        let mut counts = EnrollCounts::default();
        let mut conn = self.conn().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        let owned: Option<i64> =
            sqlx::query_scalar("SELECT 1 FROM campaigns WHERE id = ? AND workspace_id = ?")
                .bind(campaign.as_uuid())
                .bind(ws.as_uuid())
                .fetch_optional(&mut *tx)
                .await?;
        if owned.is_none() {
            return Ok(None);
        }
        for chunk in contacts.chunks(BATCH) {
            let mut q = QueryBuilder::<Sqlite>::new(
                "INSERT OR IGNORE INTO contacts (id, campaign_id, lead_id, phone_number, timezone, variables, metadata, state, excluded_reason, next_attempt_at, created_at, updated_at) ",
            );
            q.push_values(chunk, |mut b, c| {
                b.push_bind(uuid::Uuid::now_v7())
                    .push_bind(campaign.as_uuid())
                    .push_bind(c.lead_id.map(|l| l.as_uuid()))
                    .push_bind(c.phone_number.clone())
                    .push_bind(c.timezone.clone())
                    .push_bind(c.variables.to_string())
                    .push_bind(c.metadata.to_string())
                    .push_bind(if c.excluded.is_some() {
                        ContactState::Excluded.as_str()
                    } else {
                        ContactState::Pending.as_str()
                    })
                    .push_bind(c.excluded.map(|r| r.as_str()))
                    .push_bind(c.excluded.is_none().then(|| at.clone()))
                    .push_bind(at.clone())
                    .push_bind(at.clone());
            });
            q.push(" RETURNING state");
            let inserted: Vec<String> = q.build_query_scalar().fetch_all(&mut *tx).await?;
            let excluded = inserted
                .iter()
                .filter(|s| s.as_str() == ContactState::Excluded.as_str())
                .count() as i64;
            counts.excluded += excluded;
            counts.enrolled += inserted.len() as i64 - excluded;
            counts.duplicates += (chunk.len() - inserted.len()) as i64;
        }
        let message = format!(
            "enrolled {}, excluded {}, duplicates {}",
            counts.enrolled, counts.excluded, counts.duplicates
        );
        insert_event(
            &mut tx,
            campaign,
            AuditEvent::ContactsEnrolled,
            None,
            None,
            Some(&message),
            Some(actor),
            self.now(),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(Some(counts))
    }

    /// The contacts of a campaign of `ws` (none for another workspace's campaign).
    pub async fn list_contacts(
        &self,
        ws: WorkspaceId,
        campaign: CampaignId,
        state: Option<ContactState>,
        page: Page,
    ) -> StoreResult<Paged<Contact>> {
        let state = state.map(|s| s.as_str());
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) AND (? IS NULL OR state = ?)",
        )
        .bind(campaign.as_uuid())
        .bind(ws.as_uuid())
        .bind(state)
        .bind(state)
        .fetch_one(&mut *self.conn().await?)
        .await?;
        let rows = sqlx::query("SELECT * FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) AND (? IS NULL OR state = ?) ORDER BY id LIMIT ? OFFSET ?")
            .bind(campaign.as_uuid())
            .bind(ws.as_uuid())
            .bind(state)
            .bind(state)
            .bind(page.limit)
            .bind(page.offset)
            .fetch_all(&mut *self.conn().await?)
            .await?;
        let items = rows
            .into_iter()
            .map(contact_row)
            .collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// A contact of a campaign of `ws`.
    pub async fn contact(
        &self,
        ws: WorkspaceId,
        campaign: CampaignId,
        id: ContactId,
    ) -> StoreResult<Option<Contact>> {
        let row = sqlx::query("SELECT * FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) AND id = ?")
            .bind(campaign.as_uuid())
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&mut *self.conn().await?)
            .await?;
        row.map(contact_row).transpose()
    }
}
