//! Campaigns and their audit events (their contacts are in `contacts`).
//!
//! **Invariant:** a status change and its audit event are written in one transaction, and only
//! if the campaign is still in the status the change was decided from (optimistic check), so
//! two concurrent commands cannot both apply.

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use switchboard_actors::campaign::{self, AuditEvent, CampaignStatus, Closing, RegulatoryBasis};
use switchboard_actors::ids::{ApiKeyId, CampaignId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::pacing::TickResult;
use utoipa::ToSchema;

use super::db::{Exec, Json, Query, Row, begin_write, query};
use super::{
    CampaignSettings, Page, Paged, Store, StoreResult, classify, coded, corrupt, opt_coded, opt_id,
    ts,
};

/// A stored campaign: settings plus engine-owned fields.
#[derive(Debug, Clone)]
pub struct CampaignRecord {
    pub id: CampaignId,
    pub workspace_id: WorkspaceId,
    pub status: CampaignStatus,
    pub settings: CampaignSettings,
    pub from_number: Option<String>,
    pub daily_admitted_count: i64,
    pub daily_window_date: Option<NaiveDate>,
    pub last_admitted_at: Option<DateTime<Utc>>,
    pub estimate_cents: i64,
    pub spent_cents: i64,
    pub reserved_cents: i64,
    pub last_tick_at: Option<DateTime<Utc>>,
    pub last_tick_result: Option<TickResult>,
    pub last_error: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub created_by: Option<ApiKeyId>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An audit event.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CampaignEvent {
    pub id: uuid::Uuid,
    #[schema(value_type = uuid::Uuid)]
    pub campaign_id: CampaignId,
    /// `created`, `updated`, `launched`, `resumed`, `paused`, `stopped`, `archived`, `contacts_enrolled`, ...
    #[schema(value_type = String)]
    pub kind: AuditEvent,
    #[schema(value_type = Option<String>)]
    pub from_status: Option<CampaignStatus>,
    #[schema(value_type = Option<String>)]
    pub to_status: Option<CampaignStatus>,
    pub message: Option<String>,
    /// The API key that caused it; null for the engine.
    pub actor_key_id: Option<uuid::Uuid>,
    pub created_at: DateTime<Utc>,
}

/// The engine's own columns of a campaign, beside its settings'.
const ENGINE_COLUMNS: &str = "id, workspace_id, status, from_number, daily_admitted_count, daily_window_date, \
    last_admitted_at, estimate_cents, spent_cents, reserved_cents, last_tick_at, last_tick_result, last_error, \
    started_at, completed_at, created_by, created_at, updated_at";

/// Every column a campaign's row is read from: the engine's, and one per setting of the
/// settings table (`campaign::SETTINGS`), named as the setting.
pub(crate) fn campaign_columns() -> &'static str {
    static COLUMNS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    COLUMNS.get_or_init(|| {
        let mut columns = ENGINE_COLUMNS.to_string();
        for field in campaign::WRITABLE_FIELDS {
            columns.push_str(", ");
            columns.push_str(field);
        }
        columns
    })
}

pub(crate) fn campaign_row(r: &Row) -> StoreResult<CampaignRecord> {
    let status: String = r.try_get("status")?;
    let window: Option<String> = r.try_get("calling_window")?;
    let stop_ids: String = r.try_get("stop_disposition_ids")?;
    let basis: Option<String> = r.try_get("regulatory_basis")?;
    let date: Option<String> = r.try_get("daily_window_date")?;
    let mut settings = CampaignSettings::defaults(r.try_get("name")?);
    settings.description = r.try_get("description")?;
    settings.agent_id = opt_id(r, "agent_id")?;
    settings.from_phone_number_id = opt_id(r, "from_phone_number_id")?;
    settings.regulatory_basis = basis
        .as_deref()
        .map(|b| RegulatoryBasis::parse(b).ok_or_else(|| corrupt("regulatory_basis", b)))
        .transpose()?;
    settings.calling_window = window
        .map(|w| serde_json::from_str(&w).map_err(|e| corrupt("calling_window", e)))
        .transpose()?;
    settings.rules.stop_disposition_ids =
        serde_json::from_str(&stop_ids).map_err(|e| corrupt("stop_disposition_ids", e))?;
    settings.rules.budget_cents = r.try_get::<Option<i64>, _>("budget_cents")?.map(Cents::new);
    // The flags, the integers and the times, each in its column of the same name, as
    // `bind_settings` writes them.
    for field in campaign::BOOL_FIELDS {
        if let Some(slot) = settings.rules.flag_mut(field) {
            *slot = r.try_get(field)?;
        }
    }
    for rule in campaign::INT_RULES {
        if let Some(slot) = settings.rules.int_mut(rule.field) {
            *slot = r.try_get(rule.field)?;
        }
    }
    for field in campaign::TIME_FIELDS {
        if let Some(slot) = settings.rules.time_mut(field) {
            *slot = r.try_get(field)?;
        }
    }
    Ok(CampaignRecord {
        id: CampaignId::from_uuid(r.try_get("id")?),
        workspace_id: WorkspaceId::from_uuid(r.try_get("workspace_id")?),
        status: CampaignStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?,
        settings,
        from_number: r.try_get("from_number")?,
        daily_admitted_count: r.try_get("daily_admitted_count")?,
        daily_window_date: date
            .map(|d| d.parse().map_err(|e| corrupt("daily_window_date", e)))
            .transpose()?,
        last_admitted_at: r.try_get("last_admitted_at")?,
        estimate_cents: r.try_get("estimate_cents")?,
        spent_cents: r.try_get("spent_cents")?,
        reserved_cents: r.try_get("reserved_cents")?,
        last_tick_at: r.try_get("last_tick_at")?,
        last_tick_result: opt_coded(r, "last_tick_result", TickResult::parse)?,
        last_error: r.try_get("last_error")?,
        started_at: r.try_get("started_at")?,
        completed_at: r.try_get("completed_at")?,
        created_by: opt_id(r, "created_by")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn bind_settings(q: &mut Query<'_>, s: &CampaignSettings, at: DateTime<Utc>) -> StoreResult<()> {
    let window = s.calling_window.as_ref().map(|w| w.to_json().to_string());
    let stop_ids = serde_json::to_string(&s.rules.stop_disposition_ids)
        .map_err(|e| corrupt("stop_disposition_ids", e))?;
    let mut sep = q.separated(", ");
    sep.push("name = ").push_bind_unseparated(s.name.clone());
    sep.push("description = ")
        .push_bind_unseparated(s.description.clone());
    sep.push("agent_id = ")
        .push_bind_unseparated(s.agent_id.map(|a| a.as_uuid()));
    sep.push("from_phone_number_id = ")
        .push_bind_unseparated(s.from_phone_number_id.map(|p| p.as_uuid()));
    sep.push("regulatory_basis = ")
        .push_bind_unseparated(s.regulatory_basis.map(|b| b.as_str()));
    sep.push("calling_window = ")
        .push_bind_unseparated(window.map(Json));
    sep.push("stop_disposition_ids = ")
        .push_bind_unseparated(Json(stop_ids));
    for field in campaign::BOOL_FIELDS {
        sep.push(format_args!("{field} = "))
            .push_bind_unseparated(s.rules.flag(field));
    }
    for rule in campaign::INT_RULES {
        sep.push(format_args!("{} = ", rule.field))
            .push_bind_unseparated(s.rules.int(rule.field));
    }
    sep.push("budget_cents = ")
        .push_bind_unseparated(s.rules.budget_cents.map(|b| b.get()));
    for field in campaign::TIME_FIELDS {
        sep.push(format_args!("{field} = "))
            .push_bind_unseparated(s.rules.time(field).flatten().map(ts));
    }
    sep.push("updated_at = ").push_bind_unseparated(ts(at));
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn insert_event(
    tx: &mut (impl Exec + ?Sized),
    campaign: CampaignId,
    kind: AuditEvent,
    from: Option<CampaignStatus>,
    to: Option<CampaignStatus>,
    message: Option<&str>,
    actor: Option<ApiKeyId>,
    at: DateTime<Utc>,
) -> StoreResult<()> {
    query("INSERT INTO campaign_events (id, campaign_id, kind, from_status, to_status, message, actor_key_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(uuid::Uuid::now_v7())
        .bind(campaign.as_uuid())
        .bind(kind.as_str())
        .bind(from.map(|s| s.as_str()))
        .bind(to.map(|s| s.as_str()))
        .bind(message)
        .bind(actor.map(|a| a.as_uuid()))
        .bind(ts(at))
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// A status change decided by a command.
#[derive(Debug, Clone)]
pub struct StatusChange {
    pub from: CampaignStatus,
    pub to: CampaignStatus,
    pub event: AuditEvent,
    pub actor: Option<ApiKeyId>,
    /// Snapshot of the from-number taken at start.
    pub from_number: Option<String>,
}

impl Store {
    pub async fn create_campaign(
        &self,
        ws: WorkspaceId,
        settings: &CampaignSettings,
        actor: ApiKeyId,
    ) -> StoreResult<CampaignRecord> {
        let id = CampaignId::new();
        let at = ts(self.now());
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        query(
            "INSERT INTO campaigns (id, workspace_id, name, status, max_attempts, max_infra_retries, retry_no_answer_seconds, retry_completed_seconds, \
             double_dial_gap_seconds, max_calls_per_day, min_seconds_between_calls, max_in_flight, created_by, created_at, updated_at) \
             VALUES (?, ?, ?, 'draft', 0, 0, 0, 0, 0, 0, 0, 0, ?, ?, ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(&settings.name)
        .bind(actor.as_uuid())
        .bind(at)
        .bind(at)
        .execute(&mut tx)
        .await
        .map_err(classify)?;
        let mut q = query("UPDATE campaigns SET ");
        bind_settings(&mut q, settings, self.now())?;
        q.push(" WHERE id = ").push_bind(id.as_uuid());
        q.execute(&mut tx).await.map_err(classify)?;
        insert_event(
            &mut tx,
            id,
            AuditEvent::Created,
            None,
            Some(CampaignStatus::Draft),
            None,
            Some(actor),
            self.now(),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        self.campaign_any(ws, id)
            .await?
            .ok_or_else(|| corrupt("campaign", "vanished after insert"))
    }

    /// A campaign in any status, archived included.
    pub async fn campaign_any(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
    ) -> StoreResult<Option<CampaignRecord>> {
        let row = query(format!(
            "SELECT {} FROM campaigns WHERE workspace_id = ? AND id = ?",
            campaign_columns()
        ))
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(campaign_row).transpose()
    }

    /// A campaign that is not archived.
    pub async fn campaign(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
    ) -> StoreResult<Option<CampaignRecord>> {
        Ok(self
            .campaign_any(ws, id)
            .await?
            .filter(|c| c.status != CampaignStatus::Archived))
    }

    /// Non-archived campaigns, newest first, optionally of one status.
    pub async fn list_campaigns(
        &self,
        ws: WorkspaceId,
        status: Option<CampaignStatus>,
        page: Page,
    ) -> StoreResult<Paged<CampaignRecord>> {
        let status = status.map(|s| s.as_str());
        let total: i64 = query("SELECT COUNT(*) FROM campaigns WHERE workspace_id = ? AND status <> 'archived' AND (? IS NULL OR status = ?)")
            .bind(ws.as_uuid())
            .bind(status)
            .bind(status)
            .scalar(&mut self.conn().await?)
            .await?;
        let rows = query(format!(
            "SELECT {} FROM campaigns WHERE workspace_id = ? AND status <> 'archived' AND (? IS NULL OR status = ?) \
             ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
            campaign_columns()
        ))
        .bind(ws.as_uuid())
        .bind(status)
        .bind(status)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut self.conn().await?)
        .await?;
        let items = rows.iter().map(campaign_row).collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }

    /// Writes the settings if the campaign is still in `expected` status; `false` otherwise.
    pub async fn update_campaign_settings(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
        expected: CampaignStatus,
        settings: &CampaignSettings,
        changed: &[&str],
        actor: ApiKeyId,
    ) -> StoreResult<bool> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let mut q = query("UPDATE campaigns SET ");
        bind_settings(&mut q, settings, self.now())?;
        q.push(" WHERE workspace_id = ").push_bind(ws.as_uuid());
        q.push(" AND id = ").push_bind(id.as_uuid());
        q.push(" AND status = ").push_bind(expected.as_str());
        let done = q.execute(&mut tx).await.map_err(classify)?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        let message = format!("changed: {}", changed.join(", "));
        insert_event(
            &mut tx,
            id,
            AuditEvent::Updated,
            None,
            None,
            Some(&message),
            Some(actor),
            self.now(),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(true)
    }

    /// Applies a status change if the campaign is still in `change.from`; `false` otherwise.
    pub async fn change_campaign_status(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
        change: &StatusChange,
    ) -> StoreResult<bool> {
        let at = self.now();
        let closing = change.to.closing().is_some();
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let started = matches!(
            change.to,
            CampaignStatus::Running | CampaignStatus::Scheduled
        );
        let done = query(
            "UPDATE campaigns SET status = ?, updated_at = ?, \
             started_at = CASE WHEN ? AND started_at IS NULL THEN ? ELSE started_at END, \
             from_number = COALESCE(?, from_number), \
             archived_at = CASE WHEN ? = 'archived' THEN ? ELSE archived_at END, \
             last_error = CASE WHEN ? THEN NULL ELSE last_error END \
             WHERE workspace_id = ? AND id = ? AND status = ?",
        )
        .bind(change.to.as_str())
        .bind(ts(at))
        .bind(started)
        .bind(ts(at))
        .bind(change.from_number.as_deref())
        .bind(change.to.as_str())
        .bind(ts(at))
        .bind(started)
        .bind(ws.as_uuid())
        .bind(id.as_uuid())
        .bind(change.from.as_str())
        .execute(&mut tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        // A stop or an archive takes the open contacts out, by the one rule of `closing`.
        if let Some(Closing {
            excludes: states,
            reason,
        }) = change.to.closing()
        {
            let mut q = query("UPDATE contacts SET state = 'excluded', excluded_reason = ");
            q.push_bind(reason.as_str());
            q.push(", next_attempt_at = NULL, updated_at = ")
                .push_bind(ts(at));
            q.push(" WHERE campaign_id = ").push_bind(id.as_uuid());
            q.push(" AND state IN (");
            let mut sep = q.separated(", ");
            for state in states {
                sep.push_bind(state.as_str());
            }
            q.push(")");
            q.execute(&mut tx).await?;
        }
        insert_event(
            &mut tx,
            id,
            change.event,
            Some(change.from),
            Some(change.to),
            None,
            change.actor,
            self.now(),
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        // Closing logged every open contact's move: fold them now rather than have each look
        // at the campaign read them until the next fold.
        if closing {
            self.fold_counts_or_later().await;
        }
        Ok(true)
    }

    /// The events of a campaign of `ws` (none for another workspace's campaign).
    pub async fn campaign_events(
        &self,
        ws: WorkspaceId,
        id: CampaignId,
        page: Page,
    ) -> StoreResult<Paged<CampaignEvent>> {
        let total: i64 = query(
            "SELECT COUNT(*) FROM campaign_events WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?)",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .scalar(&mut self.conn().await?)
        .await?;
        let rows = query(
            "SELECT id, campaign_id, kind, from_status, to_status, message, actor_key_id, created_at FROM campaign_events \
             WHERE campaign_id = (SELECT id FROM campaigns WHERE id = ? AND workspace_id = ?) ORDER BY created_at, id LIMIT ? OFFSET ?",
        )
        .bind(id.as_uuid())
        .bind(ws.as_uuid())
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&mut self.conn().await?)
        .await?;
        let items = rows
            .into_iter()
            .map(|r| {
                Ok(CampaignEvent {
                    id: r.try_get("id")?,
                    campaign_id: CampaignId::from_uuid(r.try_get("campaign_id")?),
                    kind: coded(&r, "kind", AuditEvent::parse)?,
                    from_status: opt_coded(&r, "from_status", CampaignStatus::parse)?,
                    to_status: opt_coded(&r, "to_status", CampaignStatus::parse)?,
                    message: r.try_get("message")?,
                    actor_key_id: r.try_get("actor_key_id")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect::<StoreResult<_>>()?;
        Ok(Paged { items, total })
    }
}
