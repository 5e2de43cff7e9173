//! The engine's reads: what a campaign actor rebuilds from and decides on (the campaign with
//! its agent, number and window, contact counts, due contacts, funds, open attempts) and what
//! the call queue rebuilds from (queued and live calls). The writes are in `engine_calls.rs`.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use switchboard_actors::call::{CallStatus, EndReason};
use switchboard_actors::campaign::{AgentFacts, NumberFacts, NumberStatus};
use switchboard_actors::contact::{CallOutcome, ContactState};
use switchboard_actors::ids::{AgentId, CallId, CampaignId, ContactId, DispositionId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::policy::country_zone;
use switchboard_actors::ports::{
    CallSpec, ContactCounts, DueContact, DueScan, EngineCampaign, Funds, OpenAttempt, StoredCall,
};
use switchboard_actors::window::CallingWindow;

use super::CampaignSettings;
use super::calls::{funds_in, spec_row};
use super::campaigns::{campaign_columns, campaign_row};
use super::db::{Row, query};
use super::engine_calls::BLOCKED;
use super::{Store, StoreResult, TRUNK_COLUMNS, TRUNK_JOIN, coded, corrupt, opt_coded, opt_id, ts};

const OPEN_ATTEMPT_SELECT: &str = "SELECT c.id, c.state, c.attempts, c.infra_retries, k.id AS call_id, k.status AS call_status, k.outcome, \
     k.end_reason, k.ended_at, k.disposition_id FROM contacts c LEFT JOIN calls k ON k.id = c.last_call_id";

fn open_attempt_row(r: &Row) -> StoreResult<OpenAttempt> {
    let state: String = r.try_get("state")?;
    let call = match r.try_get::<Option<uuid::Uuid>, _>("call_id")? {
        None => None,
        Some(id) => {
            let status: String = r.try_get("call_status")?;
            let outcome: Option<String> = r.try_get("outcome")?;
            Some(StoredCall {
                id: CallId::from_uuid(id),
                status: CallStatus::parse(&status)
                    .ok_or_else(|| corrupt("call status", &status))?,
                outcome: outcome
                    .as_deref()
                    .map(|o| {
                        CallOutcome::ALL
                            .into_iter()
                            .find(|x| x.as_str() == o)
                            .ok_or_else(|| corrupt("call outcome", o))
                    })
                    .transpose()?,
                end_reason: opt_coded(r, "end_reason", EndReason::parse)?,
                ended_at: r.try_get("ended_at")?,
                disposition_id: opt_id(r, "disposition_id")?,
            })
        }
    };
    Ok(OpenAttempt {
        contact_id: ContactId::from_uuid(r.try_get("id")?),
        state: ContactState::parse(&state).ok_or_else(|| corrupt("contact state", &state))?,
        attempts: r.try_get("attempts")?,
        infra_retries: r.try_get("infra_retries")?,
        call,
    })
}

impl Store {
    /// The workspace's calling hours: the saved ones, else the built-in default in the zone of
    /// its default country (`true` when it is the default). `None` if there is no workspace.
    pub async fn workspace_window(
        &self,
        ws: WorkspaceId,
    ) -> StoreResult<Option<(CallingWindow, bool)>> {
        if let Some(window) = self.call_window(ws).await? {
            return Ok(Some((window, false)));
        }
        Ok(self.workspace(ws).await?.map(|w| {
            (
                CallingWindow::default_in(country_zone(&w.default_country)),
                true,
            )
        }))
    }

    /// The window a campaign runs in: its own, else the workspace's calling hours. `None` if
    /// there is no workspace.
    pub async fn campaign_window(
        &self,
        ws: WorkspaceId,
        settings: &CampaignSettings,
    ) -> StoreResult<Option<CallingWindow>> {
        if let Some(w) = &settings.calling_window {
            return Ok(Some(w.clone()));
        }
        Ok(self.workspace_window(ws).await?.map(|(w, _)| w))
    }

    // ---- the engine's port ----

    pub async fn live_campaigns(&self) -> StoreResult<Vec<CampaignId>> {
        let ids: Vec<uuid::Uuid> = query(
            "SELECT id FROM campaigns WHERE status IN ('scheduled', 'running', 'paused', 'paused_insufficient_credit', 'paused_budget', 'paused_infra', 'paused_config') ORDER BY created_at",
        )
        .scalars(&mut self.read_conn().await?)
        .await?;
        Ok(ids.into_iter().map(CampaignId::from_uuid).collect())
    }

    pub async fn engine_campaign(&self, id: CampaignId) -> StoreResult<Option<EngineCampaign>> {
        // One read: the campaign with the facts of its agent and from-number (same workspace;
        // a released number counts as none).
        static QUERY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let text = QUERY.get_or_init(|| {
            let columns: Vec<String> = campaign_columns()
                .split(',')
                .map(|c| format!("c.{}", c.trim()))
                .collect();
            format!(
                "SELECT {}, a.id AS agent_found, a.is_active AS agent_is_active, \
                 a.max_call_duration_secs AS agent_max_secs, n.id AS number_found, \
                 n.is_active AS number_is_active, n.status AS number_status, n.number AS number_number, \
                 {TRUNK_COLUMNS} \
                 FROM campaigns c \
                 LEFT JOIN agents a ON a.id = c.agent_id AND a.workspace_id = c.workspace_id \
                 LEFT JOIN phone_numbers n ON n.id = c.from_phone_number_id AND n.workspace_id = c.workspace_id \
                 AND n.released_at IS NULL {TRUNK_JOIN} WHERE c.id = ?",
                columns.join(", ")
            )
        });
        let row = query(text.as_str())
            .bind(id.as_uuid())
            .fetch_optional(&mut self.read_conn().await?)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let c = campaign_row(&row)?;
        let ws = c.workspace_id;
        let s = &c.settings;
        let agent_found: Option<uuid::Uuid> = row.try_get("agent_found")?;
        let agent = match agent_found {
            Some(_) => Some(AgentFacts {
                is_active: row.try_get("agent_is_active")?,
                max_call_duration_secs: row.try_get("agent_max_secs")?,
            }),
            None => None,
        };
        let number_found: Option<uuid::Uuid> = row.try_get("number_found")?;
        let from_number = match number_found {
            Some(_) => Some(NumberFacts {
                is_active: row.try_get("number_is_active")?,
                status: coded(&row, "number_status", NumberStatus::parse)?,
                number: row.try_get("number_number")?,
                trunk: self.trunk_of(&row)?,
            }),
            None => None,
        };
        let Some(window) = self.campaign_window(ws, s).await? else {
            return Ok(None);
        };
        Ok(Some(EngineCampaign {
            id,
            workspace_id: ws,
            status: c.status,
            rules: s.rules.clone(),
            window,
            agent_id: s.agent_id,
            agent,
            from_phone_number_id: s.from_phone_number_id,
            from_number,
            daily_admitted_count: c.daily_admitted_count,
            daily_window_date: c.daily_window_date,
            last_admitted_at: c.last_admitted_at,
            spent_cents: Cents::new(c.spent_cents),
            reserved_cents: Cents::new(c.reserved_cents),
        }))
    }

    pub async fn contact_counts(&self, id: CampaignId) -> StoreResult<ContactCounts> {
        let rows: Vec<(String, i64, i64)> = query(
            "SELECT state, COUNT(*), CAST(COALESCE(SUM(attempts), 0) AS BIGINT) FROM contacts WHERE campaign_id = ? GROUP BY state",
        )
        .bind(id.as_uuid())
        .fetch_all_as(&mut self.read_conn().await?)
        .await?;
        let mut counts = ContactCounts::default();
        for (state, n, attempts) in rows {
            let state =
                ContactState::parse(&state).ok_or_else(|| corrupt("contact state", &state))?;
            counts.by_state.insert(state, n);
            if !state.is_terminal() {
                counts.open_attempts += attempts;
            }
        }
        Ok(counts)
    }

    /// How many of the campaign's contacts are not terminal yet (read from the state index
    /// alone, so it stays cheap for a large campaign).
    pub async fn open_contacts(&self, id: CampaignId) -> StoreResult<i64> {
        static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let text = SQL.get_or_init(|| {
            let open: Vec<String> = ContactState::ALL
                .iter()
                .filter(|s| !s.is_terminal())
                .map(|s| format!("'{}'", s.as_str()))
                .collect();
            format!(
                "SELECT COUNT(*) FROM contacts WHERE campaign_id = ? AND state IN ({})",
                open.join(", ")
            )
        });
        Ok(query(text.as_str())
            .bind(id.as_uuid())
            .scalar(&mut self.read_conn().await?)
            .await?)
    }

    pub async fn due_contacts(
        &self,
        id: CampaignId,
        agent: Option<AgentId>,
        now: DateTime<Utc>,
        limit: i64,
    ) -> StoreResult<DueScan> {
        let at = ts(now);
        // The due contacts and, after them, the first one not yet due: one read, two index
        // range scans. The limit is bound through CAST: SQLite re-prepares a statement for each
        // new value bound to a bare `LIMIT ?`, and this one runs at every evaluation.
        const COLUMNS: &str =
            "id, campaign_id, phone_number, timezone, state, attempts, next_attempt_at";
        let rows = query(format!(
            "SELECT id, phone_number, timezone, state, attempts, next_attempt_at, {BLOCKED} AS blocked FROM ( \
               SELECT * FROM (SELECT {COLUMNS} FROM contacts \
                 WHERE campaign_id = ? AND next_attempt_at IS NOT NULL AND next_attempt_at <= ? \
                 ORDER BY next_attempt_at LIMIT CAST(? AS INTEGER)) AS due \
               UNION ALL \
               SELECT * FROM (SELECT {COLUMNS} FROM contacts \
                 WHERE campaign_id = ? AND next_attempt_at > ? ORDER BY next_attempt_at LIMIT 1) AS next_due \
             ) AS contacts"
        ))
        .bind(at)
        .bind(agent.map(|a| a.as_uuid()))
        .bind(id.as_uuid())
        .bind(at)
        .bind(limit)
        .bind(id.as_uuid())
        .bind(at)
        .fetch_all(&mut self.read_conn().await?)
        .await?;
        let mut scan = DueScan::default();
        for r in &rows {
            let next: DateTime<Utc> = r.try_get("next_attempt_at")?;
            if next > now {
                scan.next_due_at = Some(next);
                continue;
            }
            let state: String = r.try_get("state")?;
            scan.due.push(DueContact {
                id: ContactId::from_uuid(r.try_get("id")?),
                phone_number: r.try_get("phone_number")?,
                timezone: r.try_get("timezone")?,
                state: ContactState::parse(&state)
                    .ok_or_else(|| corrupt("contact state", &state))?,
                attempts: r.try_get("attempts")?,
                blocked: r.try_get("blocked")?,
            });
        }
        Ok(scan)
    }

    pub async fn funds(&self, ws: WorkspaceId) -> StoreResult<Funds> {
        let mut conn = self.conn().await?;
        funds_in(&mut conn, ws).await
    }

    pub async fn open_attempts(&self, id: CampaignId) -> StoreResult<Vec<OpenAttempt>> {
        let rows = query(format!(
            "{OPEN_ATTEMPT_SELECT} WHERE c.campaign_id = ? AND c.state IN ('dialing', 'awaiting_disposition')"
        ))
        .bind(id.as_uuid())
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter().map(open_attempt_row).collect()
    }

    pub async fn open_attempt(&self, contact: ContactId) -> StoreResult<Option<OpenAttempt>> {
        let row = query(format!(
            "{OPEN_ATTEMPT_SELECT} WHERE c.id = ? AND c.state IN ('dialing', 'awaiting_disposition')"
        ))
        .bind(contact.as_uuid())
        .fetch_optional(&mut self.conn().await?)
        .await?;
        row.as_ref().map(open_attempt_row).transpose()
    }

    pub async fn queued_calls(&self) -> StoreResult<Vec<CallSpec>> {
        let rows = query(format!(
            "SELECT c.*, {TRUNK_COLUMNS} FROM calls c \
             LEFT JOIN phone_numbers n ON n.id = c.from_phone_number_id AND n.workspace_id = c.workspace_id {TRUNK_JOIN} \
             WHERE c.status = 'queued' ORDER BY c.priority DESC, c.queued_at, c.id"
        ))
        .fetch_all(&mut self.conn().await?)
        .await?;
        rows.iter()
            .map(|r| {
                let mut spec = spec_row(r)?;
                spec.trunk = self.trunk_of(r)?;
                Ok(spec)
            })
            .collect()
    }

    pub async fn live_calls(&self) -> StoreResult<HashMap<WorkspaceId, usize>> {
        let rows: Vec<(uuid::Uuid, i64)> = query(
            "SELECT workspace_id, COUNT(*) FROM calls WHERE status IN ('dialing', 'ringing', 'in_progress') GROUP BY workspace_id",
        )
        .fetch_all_as(&mut self.conn().await?)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(ws, n)| (WorkspaceId::from_uuid(ws), n as usize))
            .collect())
    }

    pub async fn call_disposition(&self, call: CallId) -> StoreResult<Option<DispositionId>> {
        let d: Option<Option<uuid::Uuid>> = query("SELECT disposition_id FROM calls WHERE id = ?")
            .bind(call.as_uuid())
            .scalar_optional(&mut self.conn().await?)
            .await?;
        Ok(d.flatten().map(DispositionId::from_uuid))
    }
}
