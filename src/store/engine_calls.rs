//! The engine's reads and writes: the SQL behind the engine's store port (admission, a call's
//! end, redial, cancellation, settlement), run as guarded scripts.
//!
//! **Invariant:** an attempt, its queued call and the campaign's counters and reservation are
//! written in one transaction; so are a call's end, the release of its reservation, the
//! campaign's spend and the workspace's ledger entry; and so is each change of a call's life
//! (placed, answered, ended) and its agent's webhook event. Every engine write is guarded by
//! the state it was decided from, so a stale actor cannot undo a newer decision.
//!
//! The file is long on purpose: the scripts' statements and the guards they share (`Ending`,
//! `SETTLE_SQL`, `AWAIT_SQL`) are checked against each other, so they are kept in one place.

use chrono::{DateTime, Utc};
use switchboard_actors::call::EndReason;
use switchboard_actors::campaign::{AuditEvent, CampaignStatus};
use switchboard_actors::contact::ExclusionReason;
use switchboard_actors::events::EventKind;
use switchboard_actors::ids::{CallId, CampaignId, ContactId, DispositionId};
use switchboard_actors::money::Cents;
use switchboard_actors::ports::{
    Admission, AdmitResult, CallEnd, CallSpec, Settlement, TickRecord,
};
use switchboard_sip::amd::AnsweredBy;
use switchboard_sip::sdp::Codec;

use super::campaigns::insert_event;
use super::db::{Exec, Json, Query, Row, begin_write, query};
use super::group::Binder;
use super::webhooks::{CALL_EVENT_SQL, bind_call_event};
use super::{
    AnalysisStatus, Engine, Lane, Script, ScriptQuery, Store, StoreResult, StoredConversation,
    atomic_sql, open_sql, ts,
};

use super::calls::{CALL_COLUMNS, CALL_VALUES, bind_call, funds_in};

const OPEN_STATES: &str = "('pending', 'scheduled')";

/// Whether the `contacts` row at hand is on its workspace's do-not-call list for the agent
/// that would call it. Binds: the current time, the agent's id.
pub(super) const BLOCKED: &str = "EXISTS (SELECT 1 FROM dnc_entries e \
     WHERE e.workspace_id = (SELECT k.workspace_id FROM campaigns k WHERE k.id = contacts.campaign_id) \
     AND e.phone_number = contacts.phone_number AND (e.expires_at IS NULL OR e.expires_at > ?) \
     AND (NOT EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id) \
          OR EXISTS (SELECT 1 FROM dnc_entry_agents ea WHERE ea.entry_id = e.id AND ea.agent_id = ?)))";

/// The end of a call as script statements: its end; what its conversation left and its
/// end-of-call analysis (when it conversed); its charge in the ledger (with the balance it
/// leaves) and on the balance; its campaign's money. Each write follows only if the one before
/// it happened (`changes() = 1`), starting with the call's end, so ending a call twice charges
/// once. A settlement of the call's contact may follow in the same script.
struct Ending<'a> {
    spec: &'a CallSpec,
    end: &'a CallEnd,
    description: String,
    /// The conversation as stored, and the analysis it starts; `None` when nothing was said
    /// or run (no row: the call detail shows it empty, its analysis skipped).
    detail: Option<(StoredConversation, AnalysisStatus)>,
}

impl<'a> Ending<'a> {
    /// `analysis`: whether answered calls get an end-of-call analysis.
    fn new(spec: &'a CallSpec, end: &'a CallEnd, description: &str, analysis: bool) -> Self {
        let detail = (!end.conversation.is_empty()).then(|| {
            (
                StoredConversation::of(&end.conversation),
                AnalysisStatus::at_end(analysis, end.outcome, &end.conversation),
            )
        });
        Self {
            spec,
            end,
            description: description.to_owned(),
            detail,
        }
    }

    /// A campaign or direct call's end.
    fn outbound(spec: &'a CallSpec, end: &'a CallEnd, analysis: bool) -> Self {
        Self::new(spec, end, &outbound_description(spec, end), analysis)
    }

    fn charged(&self) -> bool {
        self.end.cost_cents > Cents::ZERO
    }

    /// The whole script, for [`Store::atomic_emitting_in`]: the end's statements, then `then` (if
    /// any), then the auto top-up check when the call was charged (read it back with
    /// [`low_balance`]), then the `call.ended` event's lookup.
    fn script(&self, then: Option<&str>) -> String {
        open_sql(&self.body(then))
    }

    /// [`Ending::script`]'s statements, without the transaction's start.
    fn body(&self, then: Option<&str>) -> String {
        let mut body = self.statements();
        if let Some(then) = then {
            body.push_str(then);
            body.push_str("; ");
        }
        if self.charged() {
            body.push_str(
                "SELECT auto_topup_enabled AND balance_cents < low_balance_threshold_cents AS low_balance FROM workspaces WHERE id = ?; ",
            );
        }
        body.push_str(CALL_EVENT_SQL);
        body
    }

    /// Binds the whole of [`Ending::body`] (without `then`), as often as it is asked.
    fn binder(&self) -> Binder {
        let (spec, end) = (self.spec.clone(), self.end.clone());
        let (description, detail) = (self.description.clone(), self.detail.clone());
        Box::new(move |q| {
            let ending = Ending {
                spec: &spec,
                end: &end,
                description: description.clone(),
                detail: detail.clone(),
            };
            ending.bind_tail(ending.bind(q))
        })
    }

    /// The statements (each followed by `; `).
    fn statements(&self) -> String {
        let mut body = String::from(
            "UPDATE calls SET status = 'ended', outcome = ?, end_reason = ?, started_at = COALESCE(?, started_at), answered_at = COALESCE(answered_at, ?), \
             ended_at = ?, duration_secs = ?, cost_cents = ?, updated_at = ?, \
             sip_code = ?, sip_reason = ?, q850_cause = ?, answered_by = ?, codec = COALESCE(?, codec), recorded = (recorded OR ?), \
             disposition_id = COALESCE(disposition_id, (SELECT d.id FROM dispositions d WHERE d.workspace_id = calls.workspace_id AND d.label = ?)), \
             disposition_source = CASE WHEN disposition_id IS NULL AND ? IS NOT NULL THEN 'agent' ELSE disposition_source END \
             WHERE id = ? AND status IN ('queued', 'dialing', 'ringing', 'in_progress'); ",
        );
        if self.detail.is_some() {
            body.push_str(
                "INSERT INTO call_details (call_id, workspace_id, transcript, events, vendor_failures, flow_path, omitted_turns, omitted_events, \
                 analysis_status, analysis_due_at, created_at, updated_at) \
                 SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE changes() = 1; ",
            );
        }
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
        1 + usize::from(self.detail.is_some())
            + if self.charged() { 2 } else { 0 }
            + usize::from(self.spec.campaign_id.is_some())
    }

    /// Binds the statements' values, in order.
    fn bind(&self, q: ScriptQuery) -> ScriptQuery {
        let (spec, end) = (self.spec, self.end);
        let at = ts(end.ended_at);
        let mut q = q
            .bind(end.outcome.as_str())
            .bind(end.end_reason.as_str())
            .bind(end.started_at.map(ts))
            .bind(end.answered_at.map(ts))
            .bind(at)
            .bind(end.billable_secs)
            .bind(end.cost_cents.get())
            .bind(at)
            .bind(end.network.sip_code.map(i64::from))
            .bind(end.network.sip_reason.clone())
            .bind(end.network.q850_cause.map(i64::from))
            .bind(end.network.answered_by.map(AnsweredBy::as_str))
            .bind(end.network.codec.map(Codec::name))
            .bind(end.network.recorded)
            .bind(end.disposition_label.clone())
            .bind(end.disposition_label.clone())
            .bind(spec.id.as_uuid());
        if let Some((stored, analysis)) = &self.detail {
            // A pending analysis is due at once: the job runner takes it up after the commit.
            let due = (*analysis == AnalysisStatus::Pending).then_some(at);
            q = q
                .bind(spec.id.as_uuid())
                .bind(spec.workspace_id.as_uuid())
                .bind(Json(stored.transcript.clone()))
                .bind(Json(stored.events.clone()))
                .bind(Json(stored.vendor_failures.clone()))
                .bind(Json(stored.flow_path.clone()))
                .bind(stored.omitted_turns)
                .bind(stored.omitted_events)
                .bind(analysis.as_str())
                .bind(due)
                .bind(at)
                .bind(at);
        }
        if self.charged() {
            let amount = (-end.cost_cents).get();
            q = q
                .bind(uuid::Uuid::now_v7())
                .bind(amount)
                .bind(amount)
                .bind(self.description.clone())
                .bind(spec.id.to_string())
                .bind(at)
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

    /// Binds what [`Ending::script`] has after `then`: the auto top-up check and the event's
    /// lookup.
    fn bind_tail(&self, q: ScriptQuery) -> ScriptQuery {
        let q = if self.charged() {
            q.bind(self.spec.workspace_id.as_uuid())
        } else {
            q
        };
        bind_call_event(q, self.spec.id, EventKind::CallEnded)
    }

    /// Commits the script (`q`, bound): the `call.ended` event is written when the call's end
    /// was (its first statement changed the call).
    async fn commit(&self, store: &Store, q: ScriptQuery, lane: Lane) -> StoreResult<Script> {
        store
            .atomic_emitting_in(lane, self.bind_tail(q), |done| done.changed(0) == 1)
            .await
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
        if row.first_column() == Some("low_balance") {
            return Ok(row.try_get::<bool, _>(0)?);
        }
    }
    Ok(false)
}

/// Settles an attempt: applied only while the contact is still in the attempt of `last_call_id`
/// and, when the last bind is true, only while that call has no disposition (an unclassified
/// answer whose disposition did not land meanwhile).
const SETTLE_SQL: &str = "UPDATE contacts SET state = ?, next_attempt_at = ?, attempts = attempts - ?, infra_retries = infra_retries + ?, \
     last_outcome = ?, last_disposition_id = ?, excluded_reason = ?, updated_at = ? \
     WHERE id = ? AND last_call_id = ? AND state IN ('dialing', 'awaiting_disposition') \
     AND (NOT ? OR (SELECT disposition_id FROM calls WHERE calls.id = contacts.last_call_id) IS NULL)";

fn bind_settlement<'q>(q: Query<'q>, s: &Settlement) -> Query<'q> {
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

fn awaited_disposition(row: Option<&Row>) -> StoreResult<Option<Option<DispositionId>>> {
    let Some(row) = row else {
        return Ok(None);
    };
    let d: Option<uuid::Uuid> = row.try_get(0)?;
    Ok(Some(d.map(DispositionId::from_uuid)))
}

/// Writes an evaluation's record on its campaign.
async fn write_tick(
    conn: &mut (impl Exec + ?Sized),
    id: CampaignId,
    tick: &TickRecord,
) -> StoreResult<()> {
    query(
        "UPDATE campaigns SET last_tick_at = ?, last_tick_result = ?, last_error = COALESCE(?, last_error), estimate_cents = ? WHERE id = ?",
    )
    .bind(ts(tick.at))
    .bind(tick.result.to_string())
    .bind(tick.last_error.as_deref())
    .bind(tick.estimate_cents.get())
    .bind(id.as_uuid())
    .execute(conn)
    .await?;
    Ok(())
}

impl Store {
    pub async fn defer_contacts(
        &self,
        deferrals: &[(ContactId, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        for (id, at) in deferrals {
            query(format!(
                "UPDATE contacts SET next_attempt_at = ?, updated_at = ? WHERE id = ? AND state IN {OPEN_STATES}"
            ))
            .bind(ts(*at))
            .bind(ts(now))
            .bind(id.as_uuid())
            .execute(&mut tx)
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
        let done = query(format!(
            "UPDATE contacts SET state = 'excluded', excluded_reason = ?, next_attempt_at = NULL, updated_at = ? WHERE id = ? AND state IN {OPEN_STATES}"
        ))
        .bind(reason.as_str())
        .bind(ts(now))
        .bind(id.as_uuid())
        .execute(&mut self.conn().await?)
        .await?;
        Ok(done.rows_affected() > 0)
    }

    /// One round trip for the three writes: the contact moves to `dialing` only if the campaign
    /// is running within its daily cap and budget and the balance covers the reservation; the
    /// campaign's counters and the call row follow only if it did (`changes() = 1`).
    pub async fn admit(&self, a: &Admission) -> StoreResult<AdmitResult> {
        let spec = &a.call;
        let date = a.daily_date.to_string();
        let now = ts(a.now);
        // SQLite's single writer makes admissions take turns; on PostgreSQL those of one
        // workspace take turns on its row, so that each reads the balance, caps and budget the
        // ones before it committed (a statement reads what was committed when it began).
        let lock = match self.engine() {
            Engine::Postgres => "SELECT id FROM workspaces WHERE id = ? FOR UPDATE; ",
            Engine::Sqlite => "",
        };
        // The statement that inserts the call, in the script's changes.
        let call_insert = 2 + usize::from(!lock.is_empty());
        let script = format!(
            "{lock}UPDATE contacts SET state = 'dialing', attempts = attempts + 1, next_attempt_at = NULL, last_call_id = ?, updated_at = ? \
             WHERE id = ? AND campaign_id = ? AND phone_number = ? AND state IN {OPEN_STATES} AND EXISTS ( \
               SELECT 1 FROM campaigns k JOIN workspaces w ON w.id = k.workspace_id \
               WHERE k.id = contacts.campaign_id AND k.status = 'running' \
               AND (CASE WHEN k.daily_window_date = ? THEN k.daily_admitted_count ELSE 0 END) < ? \
               AND (? IS NULL OR k.spent_cents + k.reserved_cents + ? <= ?) \
               AND NOT w.is_suspended \
               AND w.balance_cents - (SELECT CAST(COALESCE(SUM(c.reserved_cents), 0) AS BIGINT) FROM calls c \
                                      WHERE c.workspace_id = w.id AND c.status IN ('queued', 'dialing', 'ringing', 'in_progress')) >= ?) \
             AND NOT {BLOCKED}; \
             UPDATE campaigns SET \
               daily_admitted_count = CASE WHEN daily_window_date = ? THEN daily_admitted_count + 1 ELSE 1 END, \
               daily_window_date = ?, last_admitted_at = ?, reserved_cents = reserved_cents + ?, \
               last_tick_at = ?, last_tick_result = ?, estimate_cents = ? \
             WHERE id = ? AND changes() = 1; \
             INSERT INTO calls ({CALL_COLUMNS}) SELECT {CALL_VALUES} WHERE changes() = 1"
        );
        // A call committed as dialing is placed now: its `call.started` event commits with it.
        let script = if a.dialing {
            open_sql(&format!("{script}; {CALL_EVENT_SQL}"))
        } else {
            atomic_sql(&script)
        };
        let q = query(script);
        let q = if lock.is_empty() {
            q
        } else {
            q.bind(spec.workspace_id.as_uuid())
        };
        let q = q
            .bind(spec.id.as_uuid())
            .bind(now)
            .bind(a.contact_id.as_uuid())
            .bind(a.campaign_id.as_uuid())
            .bind(spec.to_number.clone())
            .bind(date.clone())
            .bind(a.max_calls_per_day)
            .bind(a.budget_cents.map(Cents::get))
            .bind(spec.reserved_cents.get())
            .bind(a.budget_cents.map(Cents::get))
            .bind(spec.reserved_cents.get())
            .bind(now)
            .bind(spec.agent_id.as_uuid())
            .bind(date.clone())
            .bind(date.clone())
            .bind(now)
            .bind(spec.reserved_cents.get())
            .bind(ts(a.tick.at))
            .bind(a.tick.result.to_string())
            .bind(a.tick.estimate_cents.get())
            .bind(a.campaign_id.as_uuid());
        let q = bind_call(
            q,
            spec,
            "{}",
            "{}",
            (None, None),
            a.dialing.then_some(self.node()),
        );
        // A campaign's call is placed by it: before inbound calls' records, as an API call is.
        let done = if a.dialing {
            let q = bind_call_event(q, spec.id, EventKind::CallStarted);
            self.atomic_emitting_in(Lane::Urgent, q, move |done| done.changed(call_insert) == 1)
                .await?
        } else {
            self.atomic_in(Lane::Urgent, q).await?
        };
        if done.changed(call_insert) == 1 {
            self.admitted();
            return Ok(AdmitResult::Admitted);
        }
        // Nothing was written; say why.
        let mut conn = self.conn().await?;
        // status, daily_window_date, daily_admitted_count, the contact's state (if its number
        // is unchanged), whether the number is blocked.
        type Why = (String, Option<String>, i64, Option<String>, Option<bool>);
        let row: Option<Why> = query(format!(
            "SELECT k.status, k.daily_window_date, k.daily_admitted_count, \
                 (SELECT state FROM contacts WHERE id = ? AND phone_number = ?), \
                 (SELECT {BLOCKED} FROM contacts WHERE id = ?) \
                 FROM campaigns k WHERE k.id = ?"
        ))
        .bind(a.contact_id.as_uuid())
        .bind(spec.to_number.clone())
        .bind(now)
        .bind(spec.agent_id.as_uuid())
        .bind(a.contact_id.as_uuid())
        .bind(a.campaign_id.as_uuid())
        .fetch_optional_as(&mut conn)
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
        write_tick(&mut self.conn().await?, id, tick).await
    }

    /// An engine-decided status change from `from`, with its audit event and, when given, the
    /// evaluation that decided it, in one transaction: nobody sees the new status with the
    /// old evaluation.
    pub async fn engine_transition(
        &self,
        id: CampaignId,
        from: CampaignStatus,
        to: CampaignStatus,
        reason: &str,
        tick: Option<&TickRecord>,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let at = ts(now);
        let mut conn = self.conn().await?;
        let mut tx = begin_write(&mut conn).await?;
        let done = query(
            "UPDATE campaigns SET status = ?, updated_at = ?, \
             started_at = CASE WHEN ? = 'running' AND started_at IS NULL THEN ? ELSE started_at END, \
             completed_at = CASE WHEN ? = 'completed' THEN ? ELSE completed_at END, \
             last_error = CASE WHEN ? = 'running' THEN NULL ELSE last_error END \
             WHERE id = ? AND status = ?",
        )
        .bind(to.as_str())
        .bind(at)
        .bind(to.as_str())
        .bind(at)
        .bind(to.as_str())
        .bind(at)
        .bind(to.as_str())
        .bind(id.as_uuid())
        .bind(from.as_str())
        .execute(&mut tx)
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
        if let Some(tick) = tick {
            write_tick(&mut tx, id, tick).await?;
        }
        tx.commit().await?;
        drop(conn);
        Ok(true)
    }

    /// `queued` -> `dialing`, with the call's `call.started` event.
    pub async fn mark_dialing(&self, call: CallId, now: DateTime<Utc>) -> StoreResult<bool> {
        self.change_call(
            (call, EventKind::CallStarted),
            ("status = 'dialing', started_at = ?, node_id = ?", true),
            "status = 'queued'",
            now,
        )
        .await
    }

    /// Records a live call's answer (`in_progress`), with its `call.answered` event; `false`
    /// if the call was not live or already answered.
    pub async fn call_answered(&self, call: CallId, now: DateTime<Utc>) -> StoreResult<bool> {
        self.change_call(
            (call, EventKind::CallAnswered),
            ("status = 'in_progress', answered_at = ?", false),
            "status IN ('dialing', 'ringing') AND answered_at IS NULL",
            now,
        )
        .await
    }

    /// `dialing` -> `ringing`: the far end said it rings (180/183); `false` if the call was
    /// no longer dialing. No webhook event carries it.
    pub async fn call_ringing(&self, call: CallId, now: DateTime<Utc>) -> StoreResult<bool> {
        let q = query(super::atomic_sql(
            "UPDATE calls SET status = 'ringing', updated_at = ? WHERE id = ? AND status = 'dialing'",
        ))
        .bind(ts(now))
        .bind(call.as_uuid());
        let done = self.atomic_in(Lane::Urgent, q).await?;
        Ok(done.changed(0) == 1)
    }

    /// Applies `set` (SQL with one `?`, bound to `now`, and a second one bound to this store's
    /// node when `on_node`) and `updated_at` to the call where `guard` holds, with its event
    /// `kind` in the same transaction; whether the call changed. `set` and `guard` are
    /// constants of the caller.
    async fn change_call(
        &self,
        (call, kind): (CallId, EventKind),
        (set, on_node): (&str, bool),
        guard: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let at = ts(now);
        let q = query(open_sql(&format!(
            "UPDATE calls SET {set}, updated_at = ? WHERE id = ? AND {guard}; {CALL_EVENT_SQL}"
        )))
        .bind(at);
        let q = if on_node {
            q.bind(self.node().map(str::to_owned))
        } else {
            q
        };
        let q = q.bind(at).bind(call.as_uuid());
        let q = bind_call_event(q, call, kind);
        // An outbound call's dial and answer wait on it: before inbound calls' records.
        let done = self
            .atomic_emitting_in(Lane::Urgent, q, |done| done.changed(0) == 1)
            .await?;
        Ok(done.changed(0) == 1)
    }

    /// Ends a call; `None` when it had already ended, else whether the charge took the balance
    /// below the workspace's auto top-up threshold.
    pub async fn finish_call(&self, spec: &CallSpec, end: &CallEnd) -> StoreResult<Option<bool>> {
        // An outbound call's end frees its campaign's slot for the next call.
        let description = outbound_description(spec, end);
        self.end_call(spec, end, &description, Lane::Urgent).await
    }

    /// Ends a live call as [`Store::finish_call`] does, with `description` on its ledger entry,
    /// waiting for the write lock in `lane`.
    pub(crate) async fn end_call(
        &self,
        spec: &CallSpec,
        end: &CallEnd,
        description: &str,
        lane: Lane,
    ) -> StoreResult<Option<bool>> {
        let ending = Ending::new(spec, end, description, self.analysis());
        let (body, bind) = (ending.body(None), ending.binder());
        let done = self
            .emitting_write(lane, body, bind, |done| done.changed(0) == 1)
            .await?;
        if done.changed(0) == 0 {
            return Ok(None);
        }
        Ok(Some(low_balance(&done)?))
    }

    pub async fn cancel_call(
        &self,
        spec: &CallSpec,
        reason: EndReason,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let at = ts(now);
        let done = self
            .atomic(
                query(atomic_sql(
                    "UPDATE calls SET status = 'cancelled', end_reason = ?, ended_at = ?, updated_at = ? WHERE id = ? AND status = 'queued'; \
                     UPDATE campaigns SET reserved_cents = MAX(0, reserved_cents - ?) WHERE id = ? AND changes() = 1",
                ))
                .bind(reason.as_str())
                .bind(at)
                .bind(at)
                .bind(spec.id.as_uuid())
                .bind(spec.reserved_cents.get())
                .bind(spec.campaign_id.map(|c| c.as_uuid())),
            )
            .await?;
        Ok(done.changed(0) == 1)
    }

    pub async fn redial(&self, spec: &CallSpec, contact: ContactId) -> StoreResult<bool> {
        let q = query(atomic_sql(&format!(
            "UPDATE contacts SET last_call_id = ?, updated_at = ? WHERE id = ? AND state = 'dialing'; \
             INSERT INTO calls ({CALL_COLUMNS}) SELECT {CALL_VALUES} WHERE changes() = 1; \
             UPDATE campaigns SET reserved_cents = reserved_cents + ? WHERE id = ? AND changes() = 1"
        )))
        .bind(spec.id.as_uuid())
        .bind(ts(spec.queued_at))
        .bind(contact.as_uuid());
        let q = bind_call(q, spec, "{}", "{}", (None, None), None)
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
        let bind = |q: Query<'static>| q.bind(ts(now)).bind(contact.as_uuid()).bind(call.as_uuid());
        let Some((spec, end)) = ending else {
            let row = bind(query(AWAIT_SQL))
                .fetch_optional(&mut self.conn().await?)
                .await?;
            return Ok((awaited_disposition(row.as_ref())?, false));
        };
        let ending = Ending::outbound(spec, end, self.analysis());
        let q = bind(ending.bind(query(ending.script(Some(AWAIT_SQL)))));
        let done = ending.commit(self, q, Lane::Urgent).await?;
        let row = done
            .rows
            .iter()
            .find(|r| r.first_column() == Some("awaited_disposition"));
        Ok((awaited_disposition(row)?, low_balance(&done)?))
    }

    /// Writes a settlement: whether it applied (see [`SETTLE_SQL`]). With `ending`, the call's
    /// end is committed in the same transaction (the second value: whether auto top-up is due).
    pub async fn settle_contact(
        &self,
        s: &Settlement,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> StoreResult<(bool, bool)> {
        let Some((spec, end)) = ending else {
            let done = bind_settlement(query(SETTLE_SQL), s)
                .execute(&mut self.conn().await?)
                .await?;
            return Ok((done.rows_affected() > 0, false));
        };
        let ending = Ending::outbound(spec, end, self.analysis());
        let q = bind_settlement(ending.bind(query(ending.script(Some(SETTLE_SQL)))), s);
        let done = ending.commit(self, q, Lane::Urgent).await?;
        Ok((
            done.changed(ending.statement_count()) > 0,
            low_balance(&done)?,
        ))
    }
}
