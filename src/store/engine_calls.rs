//! The engine's reads and writes: the SQL behind the engine's store port (admission, a call's
//! end, redial, cancellation, settlement), run as guarded scripts.
//!
//! **Invariant:** an attempt, its queued call and the campaign's counters and reservation are
//! written in one transaction; so are a call's end, the release of its reservation, the
//! campaign's spend and the workspace's ledger entry. Every engine write is guarded by the state
//! it was decided from, so a stale actor cannot undo a newer decision.
//!
//! The file is long on purpose: the scripts' statements and the guards they share (`Ending`,
//! `SETTLE_SQL`, `AWAIT_SQL`) are checked against each other, so they are kept in one place.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{Column, Connection, Row};
use switchboard_actors::call::{CallStatus, END_INTERRUPTED};
use switchboard_actors::campaign::{AgentFacts, AuditEvent, CampaignStatus, NumberFacts};
use switchboard_actors::contact::{CallOutcome, ContactState, ExclusionReason};
use switchboard_actors::ids::{AgentId, CallId, CampaignId, ContactId, DispositionId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::policy::country_zone;
use switchboard_actors::ports::{
    Admission, AdmitResult, CallEnd, CallSpec, CampaignRules, ContactCounts, DueContact, DueScan,
    EngineCampaign, Funds, OpenAttempt, Settlement, StoredCall, TickRecord,
};
use switchboard_actors::window::CallingWindow;

use super::campaigns::{CAMPAIGN_COLUMNS, CampaignSettings, campaign_row, insert_event};
use super::{Script, ScriptQuery, Store, StoreResult, atomic_sql, corrupt, opt_id, sql, ts};

use super::calls::{CALL_COLUMNS, CALL_VALUES, SqliteQuery, bind_call, funds_in, spec_row};

const OPEN_STATES: &str = "('pending', 'scheduled')";

/// Whether the `contacts` row at hand is on its workspace's do-not-call list for the agent
/// that would call it. Binds: the current time, the agent's id.
const BLOCKED: &str = "EXISTS (SELECT 1 FROM dnc_entries e \
     WHERE e.workspace_id = (SELECT k.workspace_id FROM campaigns k WHERE k.id = contacts.campaign_id) \
     AND e.phone_number = contacts.phone_number AND (e.expires_at IS NULL OR e.expires_at > ?) \
     AND (NOT EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id) \
          OR EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id AND ea.agent_id = ?)))";

const OPEN_ATTEMPT_SELECT: &str = "SELECT c.id, c.state, c.attempts, c.infra_retries, k.id AS call_id, k.status AS call_status, k.outcome, \
     k.end_reason, k.ended_at, k.disposition_id FROM contacts c LEFT JOIN calls k ON k.id = c.last_call_id";

/// The end of a call as script statements: its end; its charge in the ledger (with the balance
/// it leaves) and on the balance; its campaign's money. Each write follows only if the one before
/// it happened (`changes() = 1`), starting with the call's end, so ending a call twice charges
/// once. A settlement of the call's contact may follow in the same script.
struct Ending<'a> {
    spec: &'a CallSpec,
    end: &'a CallEnd,
    description: String,
}

impl<'a> Ending<'a> {
    fn new(spec: &'a CallSpec, end: &'a CallEnd, description: &str) -> Self {
        Self {
            spec,
            end,
            description: description.to_owned(),
        }
    }

    /// A campaign or direct call's end.
    fn outbound(spec: &'a CallSpec, end: &'a CallEnd) -> Self {
        Self::new(spec, end, &outbound_description(spec, end))
    }

    fn charged(&self) -> bool {
        self.end.cost_cents > Cents::ZERO
    }

    /// The whole script: the end's statements, then `then` (if any), then the auto top-up check
    /// when the call was charged (read it back with [`low_balance`]).
    fn script(&self, then: Option<&str>) -> sqlx::AssertSqlSafe<String> {
        let mut body = self.statements();
        if let Some(then) = then {
            body.push_str(then);
            body.push_str("; ");
        }
        if self.charged() {
            body.push_str(
                "SELECT auto_topup_enabled AND balance_cents < low_balance_threshold_cents AS low_balance FROM workspaces WHERE id = ?",
            );
        }
        atomic_sql(body.trim_end_matches("; "))
    }

    /// The statements (each followed by `; `).
    fn statements(&self) -> String {
        let mut body = String::from(
            "UPDATE calls SET status = 'ended', outcome = ?, end_reason = ?, started_at = COALESCE(?, started_at), answered_at = ?, \
             ended_at = ?, duration_secs = ?, cost_cents = ?, updated_at = ?, \
             disposition_id = COALESCE(disposition_id, (SELECT d.id FROM dispositions d WHERE d.workspace_id = calls.workspace_id AND d.label = ?)), \
             disposition_source = CASE WHEN disposition_id IS NULL AND ? IS NOT NULL THEN 'agent' ELSE disposition_source END \
             WHERE id = ? AND status IN ('queued', 'dialing'); ",
        );
        if self.charged() {
            body.push_str(
                "INSERT INTO ledger_entries (id, workspace_id, amount_cents, balance_after_cents, kind, description, reference, created_at) \
                 SELECT ?, id, ?, balance_cents + ?, 'call', ?, ?, ? FROM workspaces WHERE id = ? AND changes() = 1; \
                 UPDATE workspaces SET balance_cents = balance_cents + ?, updated_at = ? WHERE id = ? AND changes() = 1; ",
            );
        }
        if self.spec.campaign_id.is_some() {
            body.push_str(
                "UPDATE campaigns SET reserved_cents = MAX(0, reserved_cents - ?), spent_cents = spent_cents + ? \
                 WHERE id = ? AND changes() = 1; ",
            );
        }
        body
    }

    /// How many statements [`Ending::statements`] has.
    fn statement_count(&self) -> usize {
        1 + if self.charged() { 2 } else { 0 } + usize::from(self.spec.campaign_id.is_some())
    }

    /// Binds the statements' values, in order.
    fn bind(&self, q: ScriptQuery) -> ScriptQuery {
        let (spec, end) = (self.spec, self.end);
        let at = ts(end.ended_at);
        let mut q = q
            .bind(end.outcome.as_str())
            .bind(end.end_reason.clone())
            .bind(end.started_at.map(ts))
            .bind(end.answered_at.map(ts))
            .bind(at.clone())
            .bind(end.billable_secs)
            .bind(end.cost_cents.get())
            .bind(at.clone())
            .bind(end.disposition_label.clone())
            .bind(end.disposition_label.clone())
            .bind(spec.id.as_uuid());
        if self.charged() {
            let amount = (-end.cost_cents).get();
            q = q
                .bind(uuid::Uuid::now_v7())
                .bind(amount)
                .bind(amount)
                .bind(self.description.clone())
                .bind(spec.id.to_string())
                .bind(at.clone())
                .bind(spec.workspace_id.as_uuid())
                .bind(amount)
                .bind(at)
                .bind(spec.workspace_id.as_uuid());
        }
        if let Some(campaign) = spec.campaign_id {
            q = q
                .bind(spec.reserved_cents.get())
                .bind(end.cost_cents.get())
                .bind(campaign.as_uuid());
        }
        q
    }

    /// Binds the auto top-up check of [`Ending::script`].
    fn bind_low_balance_check(&self, q: ScriptQuery) -> ScriptQuery {
        if self.charged() {
            q.bind(self.spec.workspace_id.as_uuid())
        } else {
            q
        }
    }
}

fn outbound_description(spec: &CallSpec, end: &CallEnd) -> String {
    format!(
        "Call to {} ({} s at the outbound rate)",
        spec.to_number, end.billable_secs
    )
}

/// Whether a script's auto top-up check (see [`Ending::script`]) found auto top-up due.
fn low_balance(done: &Script) -> StoreResult<bool> {
    for row in &done.rows {
        if row
            .columns()
            .first()
            .is_some_and(|c| c.name() == "low_balance")
        {
            return Ok(row.try_get::<bool, _>(0)?);
        }
    }
    Ok(false)
}

/// Settles an attempt: applied only while the contact is still in the attempt of `last_call_id`
/// and, when the last bind is 1, only while that call has no disposition (an unclassified
/// answer whose disposition did not land meanwhile).
const SETTLE_SQL: &str = "UPDATE contacts SET state = ?, next_attempt_at = ?, attempts = attempts - ?, infra_retries = infra_retries + ?, \
     last_outcome = ?, last_disposition_id = ?, excluded_reason = ?, updated_at = ? \
     WHERE id = ? AND last_call_id = ? AND state IN ('dialing', 'awaiting_disposition') \
     AND (? = 0 OR (SELECT disposition_id FROM calls WHERE calls.id = contacts.last_call_id) IS NULL)";

fn bind_settlement<'q>(q: SqliteQuery<'q>, s: &Settlement) -> SqliteQuery<'q> {
    q.bind(s.state.as_str())
        .bind(s.next_attempt_at.map(ts))
        .bind(i64::from(s.refund_attempt))
        .bind(i64::from(s.infra_retry))
        .bind(s.outcome.as_str())
        .bind(s.disposition_id.map(|d| d.as_uuid()))
        .bind(s.excluded_reason.map(|r| r.as_str()))
        .bind(ts(s.now))
        .bind(s.contact_id.as_uuid())
        .bind(s.call_id.as_uuid())
        .bind(s.require_no_disposition)
}

/// Moves an answered attempt to `awaiting_disposition`, answering the call's disposition (a row
/// only if the contact was still dialing that call).
const AWAIT_SQL: &str = "UPDATE contacts SET state = 'awaiting_disposition', last_outcome = 'answered', updated_at = ? \
     WHERE id = ? AND state = 'dialing' AND last_call_id = ? \
     RETURNING (SELECT disposition_id FROM calls WHERE calls.id = contacts.last_call_id) AS awaited_disposition";

fn awaited_disposition(row: Option<&SqliteRow>) -> StoreResult<Option<Option<DispositionId>>> {
    let Some(row) = row else {
        return Ok(None);
    };
    let d: Option<uuid::Uuid> = row.try_get(0)?;
    Ok(Some(d.map(DispositionId::from_uuid)))
}

fn open_attempt_row(r: &SqliteRow) -> StoreResult<OpenAttempt> {
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
                end_reason: r.try_get("end_reason")?,
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
        let ids: Vec<uuid::Uuid> = sqlx::query_scalar(
            "SELECT id FROM campaigns WHERE status IN ('scheduled', 'running', 'paused', 'paused_insufficient_credit', 'paused_budget', 'paused_infra', 'paused_config') ORDER BY created_at",
        )
        .fetch_all(&mut *self.conn().await?)
        .await?;
        Ok(ids.into_iter().map(CampaignId::from_uuid).collect())
    }

    pub async fn engine_campaign(&self, id: CampaignId) -> StoreResult<Option<EngineCampaign>> {
        // One read: the campaign with the facts of its agent and from-number (same workspace;
        // a released number counts as none).
        static QUERY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        let query = QUERY.get_or_init(|| {
            let columns: Vec<String> = CAMPAIGN_COLUMNS
                .split(',')
                .map(|c| format!("c.{}", c.trim()))
                .collect();
            format!(
                "SELECT {}, a.id AS agent_found, a.is_active AS agent_is_active, \
                 a.max_call_duration_secs AS agent_max_secs, n.id AS number_found, \
                 n.is_active AS number_is_active, n.status AS number_status, n.number AS number_number \
                 FROM campaigns c \
                 LEFT JOIN agents a ON a.id = c.agent_id AND a.workspace_id = c.workspace_id \
                 LEFT JOIN phone_numbers n ON n.id = c.from_phone_number_id AND n.workspace_id = c.workspace_id \
                 AND n.released_at IS NULL WHERE c.id = ?",
                columns.join(", ")
            )
        });
        let row = sqlx::query(sql(query.clone()))
            .bind(id.as_uuid())
            .fetch_optional(&mut *self.conn().await?)
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
                status: row.try_get("number_status")?,
                number: row.try_get("number_number")?,
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
            rules: CampaignRules {
                max_attempts: s.max_attempts,
                max_infra_retries: s.max_infra_retries,
                retry_no_answer_seconds: s.retry_no_answer_seconds,
                retry_completed_seconds: s.retry_completed_seconds,
                randomize_retry_time: s.randomize_retry_time,
                double_dial_enabled: s.double_dial_enabled,
                double_dial_gap_seconds: s.double_dial_gap_seconds,
                max_calls_per_day: s.max_calls_per_day,
                min_seconds_between_calls: s.min_seconds_between_calls,
                max_in_flight: s.max_in_flight,
                budget_cents: s.budget_cents.map(Cents::new),
                stop_disposition_ids: s.stop_disposition_ids.clone(),
                stop_on_no_answer: s.stop_on_no_answer,
                stop_on_voicemail: s.stop_on_voicemail,
                stop_on_unclassified: s.stop_on_unclassified,
                starts_at: s.starts_at,
                ends_at: s.ends_at,
            },
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
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT state, COUNT(*), COALESCE(SUM(attempts), 0) FROM contacts WHERE campaign_id = ? GROUP BY state",
        )
        .bind(id.as_uuid())
        .fetch_all(&mut *self.conn().await?)
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
        Ok(sqlx::query_scalar(sqlx::AssertSqlSafe(text.as_str()))
            .bind(id.as_uuid())
            .fetch_one(&mut *self.conn().await?)
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
        let rows = sqlx::query(sql(format!(
            "SELECT id, phone_number, timezone, state, attempts, next_attempt_at, {BLOCKED} AS blocked FROM ( \
               SELECT * FROM (SELECT {COLUMNS} FROM contacts \
                 WHERE campaign_id = ? AND next_attempt_at IS NOT NULL AND next_attempt_at <= ? \
                 ORDER BY next_attempt_at LIMIT CAST(? AS INTEGER)) \
               UNION ALL \
               SELECT * FROM (SELECT {COLUMNS} FROM contacts \
                 WHERE campaign_id = ? AND next_attempt_at > ? ORDER BY next_attempt_at LIMIT 1) \
             ) AS contacts"
        )))
        .bind(at.clone())
        .bind(agent.map(|a| a.as_uuid()))
        .bind(id.as_uuid())
        .bind(at.clone())
        .bind(limit)
        .bind(id.as_uuid())
        .bind(at)
        .fetch_all(&mut *self.conn().await?)
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

    pub async fn defer_contacts(
        &self,
        deferrals: &[(ContactId, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut conn = self.conn().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        for (id, at) in deferrals {
            sqlx::query(sql(format!(
                "UPDATE contacts SET next_attempt_at = ?, updated_at = ? WHERE id = ? AND state IN {OPEN_STATES}"
            )))
            .bind(ts(*at))
            .bind(ts(now))
            .bind(id.as_uuid())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        drop(conn);
        Ok(())
    }

    pub async fn exclude_contact(
        &self,
        id: ContactId,
        reason: ExclusionReason,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = sqlx::query(sql(format!(
            "UPDATE contacts SET state = 'excluded', excluded_reason = ?, next_attempt_at = NULL, updated_at = ? WHERE id = ? AND state IN {OPEN_STATES}"
        )))
        .bind(reason.as_str())
        .bind(ts(now))
        .bind(id.as_uuid())
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    pub async fn funds(&self, ws: WorkspaceId) -> StoreResult<Funds> {
        let mut conn = self.conn().await?;
        funds_in(&mut conn, ws).await
    }

    /// One round trip for the three writes: the contact moves to `dialing` only if the campaign
    /// is running within its daily cap and budget and the balance covers the reservation; the
    /// campaign's counters and the call row follow only if it did (`changes() = 1`).
    pub async fn admit(&self, a: &Admission) -> StoreResult<AdmitResult> {
        let spec = &a.call;
        let date = a.daily_date.to_string();
        let now = ts(a.now);
        let script = atomic_sql(&format!(
            "UPDATE contacts SET state = 'dialing', attempts = attempts + 1, next_attempt_at = NULL, last_call_id = ?, updated_at = ? \
             WHERE id = ? AND campaign_id = ? AND phone_number = ? AND state IN {OPEN_STATES} AND EXISTS ( \
               SELECT 1 FROM campaigns k JOIN workspaces w ON w.id = k.workspace_id \
               WHERE k.id = contacts.campaign_id AND k.status = 'running' \
               AND (CASE WHEN k.daily_window_date = ? THEN k.daily_admitted_count ELSE 0 END) < ? \
               AND (? IS NULL OR k.spent_cents + k.reserved_cents + ? <= ?) \
               AND NOT w.is_suspended \
               AND w.balance_cents - (SELECT COALESCE(SUM(c.reserved_cents), 0) FROM calls c \
                                      WHERE c.workspace_id = w.id AND c.status IN ('queued', 'dialing')) >= ?) \
             AND NOT {BLOCKED}; \
             UPDATE campaigns SET \
               daily_admitted_count = CASE WHEN daily_window_date = ? THEN daily_admitted_count + 1 ELSE 1 END, \
               daily_window_date = ?, last_admitted_at = ?, reserved_cents = reserved_cents + ?, \
               last_tick_at = ?, last_tick_result = ?, estimate_cents = ? \
             WHERE id = ? AND changes() = 1; \
             INSERT INTO calls ({CALL_COLUMNS}) SELECT {CALL_VALUES} WHERE changes() = 1"
        ));
        let q = sqlx::query(script)
            .bind(spec.id.as_uuid())
            .bind(now.clone())
            .bind(a.contact_id.as_uuid())
            .bind(a.campaign_id.as_uuid())
            .bind(spec.to_number.clone())
            .bind(date.clone())
            .bind(a.max_calls_per_day)
            .bind(a.budget_cents.map(Cents::get))
            .bind(spec.reserved_cents.get())
            .bind(a.budget_cents.map(Cents::get))
            .bind(spec.reserved_cents.get())
            .bind(now.clone())
            .bind(spec.agent_id.as_uuid())
            .bind(date.clone())
            .bind(date.clone())
            .bind(now.clone())
            .bind(spec.reserved_cents.get())
            .bind(ts(a.tick.at))
            .bind(a.tick.result.to_string())
            .bind(a.tick.estimate_cents.get())
            .bind(a.campaign_id.as_uuid());
        let done = self
            .atomic(bind_call(q, spec, "{}", "{}", (None, None), a.dialing))
            .await?;
        if done.changed(2) == 1 {
            return Ok(AdmitResult::Admitted);
        }
        // Nothing was written; say why.
        let mut conn = self.conn().await?;
        // status, daily_window_date, daily_admitted_count, the contact's state (if its number
        // is unchanged), whether the number is blocked.
        type Why = (String, Option<String>, i64, Option<String>, Option<bool>);
        let row: Option<Why> = sqlx::query_as(sql(format!(
            "SELECT k.status, k.daily_window_date, k.daily_admitted_count, \
                 (SELECT state FROM contacts WHERE id = ? AND phone_number = ?), \
                 (SELECT {BLOCKED} FROM contacts WHERE id = ?) \
                 FROM campaigns k WHERE k.id = ?"
        )))
        .bind(a.contact_id.as_uuid())
        .bind(spec.to_number.clone())
        .bind(now.clone())
        .bind(spec.agent_id.as_uuid())
        .bind(a.contact_id.as_uuid())
        .bind(a.campaign_id.as_uuid())
        .fetch_optional(&mut *conn)
        .await?;
        let funds = funds_in(&mut conn, spec.workspace_id).await?;
        drop(conn);
        Ok(match row {
            None => AdmitResult::NotRunning,
            Some((status, ..)) if status != "running" => AdmitResult::NotRunning,
            Some((_, _, _, state, _))
                if !matches!(state.as_deref(), Some("pending") | Some("scheduled")) =>
            {
                AdmitResult::ContactGone
            }
            Some((.., Some(true))) => AdmitResult::DoNotCall,
            Some((_, Some(d), n, _, _)) if d == date && n >= a.max_calls_per_day => {
                AdmitResult::DailyCap
            }
            Some(_) if !funds.covers(spec.reserved_cents) => AdmitResult::InsufficientCredit,
            Some(_) => AdmitResult::OverBudget,
        })
    }

    pub async fn record_tick(&self, id: CampaignId, tick: &TickRecord) -> StoreResult<()> {
        sqlx::query(
            "UPDATE campaigns SET last_tick_at = ?, last_tick_result = ?, last_error = COALESCE(?, last_error), estimate_cents = ? WHERE id = ?",
        )
        .bind(ts(tick.at))
        .bind(tick.result.to_string())
        .bind(tick.last_error.as_deref())
        .bind(tick.estimate_cents.get())
        .bind(id.as_uuid())
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(())
    }

    pub async fn engine_transition(
        &self,
        id: CampaignId,
        from: CampaignStatus,
        to: CampaignStatus,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let at = ts(now);
        let mut conn = self.conn().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        let done = sqlx::query(
            "UPDATE campaigns SET status = ?, updated_at = ?, \
             started_at = CASE WHEN ? = 'running' AND started_at IS NULL THEN ? ELSE started_at END, \
             completed_at = CASE WHEN ? = 'completed' THEN ? ELSE completed_at END, \
             last_error = CASE WHEN ? = 'running' THEN NULL ELSE last_error END \
             WHERE id = ? AND status = ?",
        )
        .bind(to.as_str())
        .bind(&at)
        .bind(to.as_str())
        .bind(&at)
        .bind(to.as_str())
        .bind(&at)
        .bind(to.as_str())
        .bind(id.as_uuid())
        .bind(from.as_str())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(false);
        }
        let kind = AuditEvent::of_engine_move(from, to);
        insert_event(
            &mut tx,
            id,
            kind,
            Some(from),
            Some(to),
            Some(reason),
            None,
            now,
        )
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(true)
    }

    pub async fn open_attempts(&self, id: CampaignId) -> StoreResult<Vec<OpenAttempt>> {
        let rows = sqlx::query(sql(format!(
            "{OPEN_ATTEMPT_SELECT} WHERE c.campaign_id = ? AND c.state IN ('dialing', 'awaiting_disposition')"
        )))
        .bind(id.as_uuid())
        .fetch_all(&mut *self.conn().await?)
        .await?;
        rows.iter().map(open_attempt_row).collect()
    }

    pub async fn open_attempt(&self, contact: ContactId) -> StoreResult<Option<OpenAttempt>> {
        let row = sqlx::query(sql(format!(
            "{OPEN_ATTEMPT_SELECT} WHERE c.id = ? AND c.state IN ('dialing', 'awaiting_disposition')"
        )))
        .bind(contact.as_uuid())
        .fetch_optional(&mut *self.conn().await?)
        .await?;
        row.as_ref().map(open_attempt_row).transpose()
    }

    pub async fn queued_calls(&self) -> StoreResult<Vec<CallSpec>> {
        let rows = sqlx::query(
            "SELECT * FROM calls WHERE status = 'queued' ORDER BY priority DESC, queued_at, id",
        )
        .fetch_all(&mut *self.conn().await?)
        .await?;
        rows.iter().map(spec_row).collect()
    }

    pub async fn live_calls(&self) -> StoreResult<HashMap<WorkspaceId, usize>> {
        let rows: Vec<(uuid::Uuid, i64)> = sqlx::query_as(
            "SELECT workspace_id, COUNT(*) FROM calls WHERE status = 'dialing' GROUP BY workspace_id",
        )
        .fetch_all(&mut *self.conn().await?)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(ws, n)| (WorkspaceId::from_uuid(ws), n as usize))
            .collect())
    }

    pub async fn interrupt_live_calls(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        let at = ts(now);
        let mut conn = self.conn().await?;
        let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
        sqlx::query(
            "UPDATE campaigns SET reserved_cents = MAX(0, reserved_cents - \
             (SELECT COALESCE(SUM(k.reserved_cents), 0) FROM calls k WHERE k.campaign_id = campaigns.id AND k.status = 'dialing')) \
             WHERE id IN (SELECT campaign_id FROM calls WHERE status = 'dialing' AND campaign_id IS NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        let done = sqlx::query(
            "UPDATE calls SET status = 'ended', outcome = 'infra_error', end_reason = ?, ended_at = ?, updated_at = ? WHERE status = 'dialing'",
        )
        .bind(END_INTERRUPTED)
        .bind(&at)
        .bind(&at)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        drop(conn);
        Ok(done.rows_affected())
    }

    pub async fn mark_dialing(&self, call: CallId, now: DateTime<Utc>) -> StoreResult<bool> {
        let at = ts(now);
        let done = sqlx::query(
            "UPDATE calls SET status = 'dialing', started_at = ?, updated_at = ? WHERE id = ? AND status = 'queued'",
        )
        .bind(&at)
        .bind(&at)
        .bind(call.as_uuid())
        .execute(&mut *self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Ends a call; `None` when it had already ended, else whether the charge took the balance
    /// below the workspace's auto top-up threshold.
    pub async fn finish_call(&self, spec: &CallSpec, end: &CallEnd) -> StoreResult<Option<bool>> {
        self.end_call(spec, end, &outbound_description(spec, end))
            .await
    }

    /// Ends a live call as [`Store::finish_call`] does, with `description` on its ledger entry.
    pub(crate) async fn end_call(
        &self,
        spec: &CallSpec,
        end: &CallEnd,
        description: &str,
    ) -> StoreResult<Option<bool>> {
        let ending = Ending::new(spec, end, description);
        let q = ending.bind(sqlx::query(ending.script(None)));
        let done = self.atomic(ending.bind_low_balance_check(q)).await?;
        if done.changed(0) == 0 {
            return Ok(None);
        }
        Ok(Some(low_balance(&done)?))
    }

    pub async fn cancel_call(
        &self,
        spec: &CallSpec,
        reason: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let at = ts(now);
        let done = self
            .atomic(
                sqlx::query(atomic_sql(
                    "UPDATE calls SET status = 'cancelled', end_reason = ?, ended_at = ?, updated_at = ? WHERE id = ? AND status = 'queued'; \
                     UPDATE campaigns SET reserved_cents = MAX(0, reserved_cents - ?) WHERE id = ? AND changes() = 1",
                ))
                .bind(reason.to_owned())
                .bind(at.clone())
                .bind(at)
                .bind(spec.id.as_uuid())
                .bind(spec.reserved_cents.get())
                .bind(spec.campaign_id.map(|c| c.as_uuid())),
            )
            .await?;
        Ok(done.changed(0) == 1)
    }

    pub async fn redial(&self, spec: &CallSpec, contact: ContactId) -> StoreResult<bool> {
        let q = sqlx::query(atomic_sql(&format!(
            "UPDATE contacts SET last_call_id = ?, updated_at = ? WHERE id = ? AND state = 'dialing'; \
             INSERT INTO calls ({CALL_COLUMNS}) SELECT {CALL_VALUES} WHERE changes() = 1; \
             UPDATE campaigns SET reserved_cents = reserved_cents + ? WHERE id = ? AND changes() = 1"
        )))
        .bind(spec.id.as_uuid())
        .bind(ts(spec.queued_at))
        .bind(contact.as_uuid());
        let q = bind_call(q, spec, "{}", "{}", (None, None), false)
            .bind(spec.reserved_cents.get())
            .bind(spec.campaign_id.map(|c| c.as_uuid()));
        Ok(self.atomic(q).await?.changed(0) == 1)
    }

    /// Moves an answered attempt to `awaiting_disposition`: `None` when the contact left the
    /// attempt, else the disposition the call already has, if any. With `ending`, the call's end
    /// is committed in the same transaction (the second value: whether auto top-up is due).
    pub async fn await_disposition(
        &self,
        contact: ContactId,
        call: CallId,
        now: DateTime<Utc>,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> StoreResult<(Option<Option<DispositionId>>, bool)> {
        let bind =
            |q: SqliteQuery<'static>| q.bind(ts(now)).bind(contact.as_uuid()).bind(call.as_uuid());
        let Some((spec, end)) = ending else {
            let row = bind(sqlx::query(AWAIT_SQL))
                .fetch_optional(&mut *self.conn().await?)
                .await?;
            return Ok((awaited_disposition(row.as_ref())?, false));
        };
        let ending = Ending::outbound(spec, end);
        let q = bind(ending.bind(sqlx::query(ending.script(Some(AWAIT_SQL)))));
        let done = self.atomic(ending.bind_low_balance_check(q)).await?;
        let row = done.rows.iter().find(|r| {
            r.columns()
                .first()
                .is_some_and(|c| c.name() == "awaited_disposition")
        });
        Ok((awaited_disposition(row)?, low_balance(&done)?))
    }

    pub async fn call_disposition(&self, call: CallId) -> StoreResult<Option<DispositionId>> {
        let d: Option<Option<uuid::Uuid>> =
            sqlx::query_scalar("SELECT disposition_id FROM calls WHERE id = ?")
                .bind(call.as_uuid())
                .fetch_optional(&mut *self.conn().await?)
                .await?;
        Ok(d.flatten().map(DispositionId::from_uuid))
    }

    /// Writes a settlement: whether it applied (see [`SETTLE_SQL`]). With `ending`, the call's
    /// end is committed in the same transaction (the second value: whether auto top-up is due).
    pub async fn settle_contact(
        &self,
        s: &Settlement,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> StoreResult<(bool, bool)> {
        let Some((spec, end)) = ending else {
            let done = bind_settlement(sqlx::query(SETTLE_SQL), s)
                .execute(&mut *self.conn().await?)
                .await?;
            return Ok((done.rows_affected() > 0, false));
        };
        let ending = Ending::outbound(spec, end);
        let q = bind_settlement(ending.bind(sqlx::query(ending.script(Some(SETTLE_SQL)))), s);
        let done = self.atomic(ending.bind_low_balance_check(q)).await?;
        Ok((
            done.changed(ending.statement_count()) > 0,
            low_balance(&done)?,
        ))
    }
}
