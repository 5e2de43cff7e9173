//! Contacts: enrollment in a campaign (batches streamed into one transaction, duplicates counted
//! and left alone) and their reads, always through a campaign of the caller's workspace.

use chrono::{DateTime, Utc};
use serde::Serialize;
use switchboard_actors::campaign::AuditEvent;
use switchboard_actors::contact::{CallOutcome, ContactState, ExclusionReason};
use switchboard_actors::ids::{AgentId, ApiKeyId, CampaignId, ContactId, LeadId, WorkspaceId};
use utoipa::ToSchema;

use super::campaigns::insert_event;
use super::counts::contact_counts;
use super::db::{Exec, Row, begin_write, query};
use super::{Engine, Page, Paged, Store, StoreResult, coded, corrupt, opt_coded, opt_id, ts};

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
    #[schema(value_type = String)]
    pub state: ContactState,
    pub attempts: i64,
    pub infra_retries: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    #[schema(value_type = Option<String>)]
    pub last_outcome: Option<CallOutcome>,
    pub last_disposition_id: Option<uuid::Uuid>,
    pub last_call_id: Option<uuid::Uuid>,
    #[schema(value_type = Option<String>)]
    pub excluded_reason: Option<ExclusionReason>,
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

fn contact_row(r: Row) -> StoreResult<Contact> {
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
        state: coded(&r, "state", ContactState::parse)?,
        attempts: r.try_get("attempts")?,
        infra_retries: r.try_get("infra_retries")?,
        next_attempt_at: r.try_get("next_attempt_at")?,
        last_outcome: opt_coded(&r, "last_outcome", CallOutcome::parse)?,
        last_disposition_id: r.try_get("last_disposition_id")?,
        last_call_id: r.try_get("last_call_id")?,
        excluded_reason: opt_coded(&r, "excluded_reason", ExclusionReason::parse)?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Contacts in the order they were submitted, ready for [`Store::enroll_batches`]: a JSON array
/// of `[phone_number, timezone, lead_id (32 hex digits), variables (JSON text), metadata (JSON
/// text), excluded_reason]`, each but the number possibly `null`.
#[derive(Debug, Default, Clone)]
pub struct ContactBatch {
    json: String,
    rows: usize,
}

impl ContactBatch {
    /// Contacts per batch: one statement inserts a batch.
    pub const ROWS: usize = 10_000;

    pub fn len(&self) -> usize {
        self.rows
    }

    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// Adds a contact whose `phone_number` is E.164; `variables` and `metadata` are JSON
    /// objects' text. `excluded` enrolls it as excluded whatever the do-not-call list says.
    pub fn push(
        &mut self,
        phone_number: &str,
        timezone: Option<&str>,
        lead_id: Option<LeadId>,
        variables: &str,
        metadata: &str,
        excluded: Option<ExclusionReason>,
    ) {
        self.json.push(if self.rows == 0 { '[' } else { ',' });
        let lead = lead_id.map(|l| l.as_uuid().simple().to_string());
        let row = (
            phone_number,
            timezone,
            lead,
            variables,
            metadata,
            excluded.map(|r| r.as_str()),
        );
        // Serializing strings and options into a String cannot fail.
        self.json
            .push_str(&serde_json::to_string(&row).unwrap_or_default());
        self.rows += 1;
    }
}

/// Whether enrollment looks numbers up on the do-not-call list.
#[derive(Debug, Clone, Copy)]
pub enum DncCheck {
    /// The batches say which contacts are excluded.
    AsGiven,
    /// A number the list blocks for the campaign's agent (or for every agent) now is enrolled
    /// as excluded (`do_not_call`), as [`Store::blocked_numbers`] reads the list.
    Blocked { agent: Option<AgentId> },
}

/// One step of an enrollment, applied in order inside its transaction.
#[derive(Debug)]
pub enum EnrollStep {
    /// Contacts to insert.
    Batch(ContactBatch),
    /// Which of `ids` are live leads of the workspace, answered on `reply`.
    Leads {
        ids: Vec<LeadId>,
        reply: tokio::sync::oneshot::Sender<std::collections::HashSet<LeadId>>,
    },
}

/// The statement that inserts a batch of contacts (`?1`, a JSON array of rows: number, time
/// zone, lead id in hex, variables, metadata, exclusion reason); each id is 16 bytes of `?2`,
/// taken by the row's position. Rows go in the batch's order: a number already in the
/// campaign, or earlier in the enrollment, is left alone (`DO NOTHING` on the campaign's
/// unique number). How a JSON array is walked and its items read as ids and documents is each
/// database's own; the rest is one text.
fn insert_contacts(engine: Engine, dnc: DncCheck) -> String {
    let (row, from) = match engine {
        Engine::Sqlite => (
            "substr(?2, j.key * 16 + 1, 16), ?3, unhex(j.value ->> 2), j.value ->> 0, j.value ->> 1, \
             j.value ->> 3, j.value ->> 4",
            "jsonb_each(?1) j",
        ),
        Engine::Postgres => (
            "CAST(encode(substring(?2 FROM CAST(j.key AS INTEGER) * 16 - 15 FOR 16), 'hex') AS UUID), ?3, \
             CAST(j.value ->> 2 AS UUID), j.value ->> 0, j.value ->> 1, \
             CAST(j.value ->> 3 AS JSONB), CAST(j.value ->> 4 AS JSONB)",
            "jsonb_array_elements(CAST(?1 AS JSONB)) WITH ORDINALITY AS j(value, key)",
        ),
    };
    let rest = match dnc {
        // The batch's own exclusion reason.
        DncCheck::AsGiven => format!(
            "CASE WHEN j.value ->> 5 IS NULL THEN 'pending' ELSE 'excluded' END, j.value ->> 5, \
             CASE WHEN j.value ->> 5 IS NULL THEN ?4 END, ?4, ?4 FROM {from}"
        ),
        // The do-not-call list as [`Store::blocked_numbers`] reads it, for the workspace `?5`
        // at `?6` and the agent `?7` (its unique number index finds at most one entry).
        DncCheck::Blocked { .. } => format!(
            "CASE WHEN e.id IS NULL THEN 'pending' ELSE 'excluded' END, CASE WHEN e.id IS NOT NULL THEN 'do_not_call' END, \
             CASE WHEN e.id IS NULL THEN ?4 END, ?4, ?4 \
             FROM {from} LEFT JOIN dnc_entries e ON e.workspace_id = ?5 AND e.phone_number = j.value ->> 0 \
               AND (e.expires_at IS NULL OR e.expires_at > ?6) \
               AND (NOT EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id) \
                    OR EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id AND ea.agent_id = ?7))"
        ),
    };
    // `WHERE true` keeps SQLite from reading `ON CONFLICT` as the join's `ON`.
    format!(
        "INSERT INTO contacts (id, campaign_id, lead_id, phone_number, timezone, variables, metadata, state, \
         excluded_reason, next_attempt_at, created_at, updated_at) SELECT {row}, {rest} \
         WHERE true ON CONFLICT DO NOTHING"
    )
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
        let batches = contacts.chunks(ContactBatch::ROWS).map(|chunk| {
            let mut batch = ContactBatch::default();
            for c in chunk {
                batch.push(
                    &c.phone_number,
                    c.timezone.as_deref(),
                    c.lead_id,
                    &c.variables.to_string(),
                    &c.metadata.to_string(),
                    c.excluded,
                );
            }
            Ok(EnrollStep::Batch(batch))
        });
        self.enroll_batches(
            ws,
            campaign,
            futures_util::stream::iter(batches),
            DncCheck::AsGiven,
            actor,
        )
        .await
    }

    /// Enrolls the contacts of `steps`' batches, in their order, in one write transaction: all
    /// of them or, on any error (an error item of `steps` included), none. A number already in
    /// the campaign, or earlier in the batches, is a duplicate and left alone. Holds no contact in
    /// memory beyond the batch being inserted. `None` when the campaign is not one of `ws`'s.
    pub async fn enroll_batches<S>(
        &self,
        ws: WorkspaceId,
        campaign: CampaignId,
        mut steps: S,
        dnc: DncCheck,
        actor: ApiKeyId,
    ) -> StoreResult<Option<EnrollCounts>>
    where
        S: futures_util::Stream<Item = std::io::Result<EnrollStep>> + Unpin,
    {
        use futures_util::StreamExt;
        let now = self.now();
        let at = ts(now);
        let insert = insert_contacts(self.engine(), dnc);
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let owned: Option<i64> = query("SELECT 1 FROM campaigns WHERE id = ? AND workspace_id = ?")
            .bind(campaign.as_uuid())
            .bind(ws.as_uuid())
            .scalar_optional(&mut tx)
            .await?;
        if owned.is_none() {
            return Ok(None);
        }
        const EXCLUDED: &str = "SELECT COUNT(*) FROM contacts WHERE campaign_id = ? AND state = ?";
        let excluded_before: i64 = query(EXCLUDED)
            .bind(campaign.as_uuid())
            .bind(ContactState::Excluded.as_str())
            .scalar(&mut tx)
            .await?;
        let mut submitted = 0i64;
        let mut inserted = 0i64;
        let mut ids = Vec::new();
        while let Some(step) = steps.next().await {
            let batch = match step.map_err(sqlx::Error::Io)? {
                EnrollStep::Batch(batch) => batch,
                EnrollStep::Leads { ids, reply } => {
                    let _ = reply.send(live_leads(&mut tx, ws, &ids).await?);
                    continue;
                }
            };
            if batch.is_empty() {
                continue;
            }
            ids.clear();
            for _ in 0..batch.rows {
                ids.extend_from_slice(uuid::Uuid::now_v7().as_bytes());
            }
            let rows = batch.rows;
            let mut json = batch.json;
            json.push(']');
            let mut q = query(insert.as_str())
                .bind(json)
                .bind(&ids[..])
                .bind(campaign.as_uuid())
                .bind(at);
            if let DncCheck::Blocked { agent } = dnc {
                q = q
                    .bind(ws.as_uuid())
                    .bind(at)
                    .bind(agent.map(|a| a.as_uuid()));
            }
            let done = q.execute(&mut tx).await?;
            submitted += rows as i64;
            inserted += done.rows_affected() as i64;
        }
        let excluded_after: i64 = query(EXCLUDED)
            .bind(campaign.as_uuid())
            .bind(ContactState::Excluded.as_str())
            .scalar(&mut tx)
            .await?;
        let excluded = excluded_after - excluded_before;
        let counts = EnrollCounts {
            enrolled: inserted - excluded,
            excluded,
            duplicates: submitted - inserted,
        };
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
            now,
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
        let total: i64 = query(
            "SELECT COUNT(*) FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) AND (? IS NULL OR state = ?)",
        )
        .bind(campaign.as_uuid())
        .bind(ws.as_uuid())
        .bind(state)
        .bind(state)
        .scalar(&mut self.conn().await?)
        .await?;
        let rows = query("SELECT * FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) AND (? IS NULL OR state = ?) ORDER BY id LIMIT ? OFFSET ?")
            .bind(campaign.as_uuid())
            .bind(ws.as_uuid())
            .bind(state)
            .bind(state)
            .bind(page.limit)
            .bind(page.offset)
            .fetch_all(&mut self.conn().await?)
            .await?;
        let items = rows
            .into_iter()
            .map(contact_row)
            .collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// A page of a campaign's contacts in the order they were enrolled, after `after` (the
    /// cursor the previous page ended at): the contacts, the cursor of the last one, and how
    /// many there are in all (from the kept counts). Reads only the page's rows, however deep.
    pub async fn contacts_after(
        &self,
        ws: WorkspaceId,
        campaign: CampaignId,
        state: Option<ContactState>,
        after: Option<i64>,
        limit: i64,
    ) -> StoreResult<(Vec<Contact>, Option<i64>, i64)> {
        let mut conn = self.read_conn().await?;
        let total: i64 = query(concat!(
            "SELECT CAST(COALESCE(SUM(contacts), 0) AS BIGINT) FROM ",
            contact_counts!(),
            " WHERE (?3 IS NULL OR state = ?4)"
        ))
        .bind(campaign.as_uuid())
        .bind(ws.as_uuid())
        .bind(state.map(|s| s.as_str()))
        .bind(state.map(|s| s.as_str()))
        .scalar(&mut conn)
        .await?;
        // One statement per shape, so that each walks its own index in rowid order.
        let sql = match state {
            Some(_) => {
                "SELECT rowid AS cursor, * FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) \
                        AND state = ? AND rowid > ? ORDER BY rowid LIMIT ?"
            }
            None => {
                "SELECT rowid AS cursor, * FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) \
                     AND rowid > ? ORDER BY rowid LIMIT ?"
            }
        };
        let mut q = query(sql).bind(campaign.as_uuid()).bind(ws.as_uuid());
        if let Some(state) = state {
            q = q.bind(state.as_str());
        }
        let rows = q
            .bind(after.unwrap_or(0))
            .bind(limit)
            .fetch_all(&mut conn)
            .await?;
        let mut last = None;
        let mut items = Vec::with_capacity(rows.len());
        for r in rows {
            last = Some(r.try_get::<i64, _>("cursor")?);
            items.push(contact_row(r)?);
        }
        Ok((items, last, total))
    }

    /// A contact of a campaign of `ws`.
    pub async fn contact(
        &self,
        ws: WorkspaceId,
        campaign: CampaignId,
        id: ContactId,
    ) -> StoreResult<Option<Contact>> {
        let row = query("SELECT * FROM contacts WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) AND id = ?")
            .bind(campaign.as_uuid())
            .bind(ws.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&mut self.conn().await?)
            .await?;
        row.map(contact_row).transpose()
    }
}

/// Which of `ids` name live leads of the workspace.
pub(super) async fn live_leads(
    conn: &mut (impl Exec + ?Sized),
    ws: WorkspaceId,
    ids: &[LeadId],
) -> StoreResult<std::collections::HashSet<LeadId>> {
    let mut found = std::collections::HashSet::new();
    for chunk in ids.chunks(500) {
        let mut q = query("SELECT id FROM leads WHERE deleted_at IS NULL AND workspace_id = ");
        q.push_bind(ws.as_uuid()).push(" AND id IN (");
        let mut sep = q.separated(", ");
        for id in chunk {
            sep.push_bind(id.as_uuid());
        }
        q.push(")");
        let rows: Vec<uuid::Uuid> = q.scalars(&mut *conn).await?;
        found.extend(rows.into_iter().map(LeadId::from_uuid));
    }
    Ok(found)
}
