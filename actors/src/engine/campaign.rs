//! `CampaignActor`: one per launched, non-terminal campaign. It evaluates ("ticks") every
//! `evaluation_interval`, right after any of its calls ends, and when the API changes the
//! campaign. An evaluation reads the campaign (PATCHes apply here), checks that it can still
//! run (agent, from-number, reachable hours, credit, budget), then admits due contacts within the
//! pacing limits: `max_in_flight`, `min_seconds_between_calls`, `max_calls_per_day` (per
//! calendar day of the window's zone), and each contact's calling hours in its own zone.
//!
//! **Invariant:** the work of one evaluation does not grow with the number of contacts: it
//! reads at most `scan_batch` due contacts through an index, and keeps per-state counts in
//! memory (recounted only when the API changes the campaign's contacts).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::messages::{
    Activation, AttemptStart, CampaignMsg, ContactMsg, Placed, QueueMsg, Settled,
};
use super::shared::{Shared, Timer};
use crate::call::{END_INTERRUPTED, PRIORITY_DEFAULT};
use crate::campaign::{CampaignStatus, Preflight};
use crate::clock::until;
use crate::contact::{CallOutcome, ContactState, ExclusionReason};
use crate::ids::{CallId, CampaignId, ContactId};
use crate::policy::{contact_zone, cost_cents, local_date, next_local_midnight};
use crate::ports::{
    Admission, AdmitResult, CallSpec, ContactCounts, DueContact, EngineCampaign, OpenAttempt,
    TickRecord,
};

pub struct CampaignArgs {
    pub shared: Arc<Shared>,
    pub id: CampaignId,
}

/// A contact with an open attempt, and its actor.
struct Active {
    actor: ActorRef<ContactMsg>,
    dialing: bool,
    queued: bool,
}

pub struct CampaignState {
    shared: Arc<Shared>,
    id: CampaignId,
    campaign: Option<EngineCampaign>,
    loaded_at: Option<DateTime<Utc>>,
    counts: ContactCounts,
    active: HashMap<ContactId, Active>,
    cells: HashMap<ActorId, ContactId>,
    last_dial_at: Option<DateTime<Utc>>,
    consecutive_infra: u32,
    dirty: bool,
    counts_dirty: bool,
    eval_pending: bool,
    wake: Option<(DateTime<Utc>, Timer<CampaignMsg>)>,
    rng: StdRng,
    closed: Option<ExclusionReason>,
    cancelled_queue: bool,
    /// The last evaluation written: repeats within a second of it are not rewritten.
    last_record: Option<(DateTime<Utc>, String)>,
    /// Due contacts read ahead, earliest first: evaluations admit from here and read again
    /// only when it runs dry. Emptied whenever the campaign is reloaded, so nothing in it is
    /// older than an evaluation interval; admission re-checks each contact in the store.
    due: VecDeque<DueContact>,
    /// Admissions since the last reload, and in the interval before it: a read of due
    /// contacts asks for about what the next interval will use.
    admitted_since_load: i64,
    admitted_last_interval: i64,
}

impl CampaignState {
    fn in_flight(&self) -> i64 {
        self.active.values().filter(|a| a.dialing).count() as i64
    }

    fn queued(&self) -> i64 {
        self.active.values().filter(|a| a.queued).count() as i64
    }

    fn remove_active(&mut self, contact: ContactId) {
        if let Some(a) = self.active.remove(&contact) {
            self.cells.remove(&a.actor.get_id());
        }
    }
}

pub struct CampaignActor;

type Res<T> = Result<T, ActorProcessingErr>;

impl CampaignActor {
    /// Stops this actor; it is unrouted first, so later messages start a fresh one.
    fn retire(myself: &ActorRef<CampaignMsg>, state: &CampaignState) {
        state.shared.unregister_campaign(state.id, myself.get_id());
        myself.stop(None);
    }

    fn request_eval(myself: &ActorRef<CampaignMsg>, state: &mut CampaignState) {
        if !state.eval_pending {
            state.eval_pending = true;
            let _ = myself.cast(CampaignMsg::Evaluate);
        }
    }

    /// Makes sure an evaluation happens at `at` at the latest.
    fn wake_at(myself: &ActorRef<CampaignMsg>, state: &mut CampaignState, at: DateTime<Utc>) {
        let now = state.shared.clock.now();
        if let Some((current, handle)) = &state.wake
            && *current <= at
            && *current > now
            && !handle.is_finished()
        {
            return;
        }
        if let Some((_, handle)) = state.wake.take() {
            handle.abort();
        }
        let handle = myself.send_after(until(now, at), || CampaignMsg::Evaluate);
        state.wake = Some((at, handle));
    }

    async fn spawn_contact(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        contact: ContactId,
        attempts: i64,
        infra_retries: i64,
        activation: Activation,
    ) -> Res<()> {
        let Some(c) = &state.campaign else {
            return Ok(());
        };
        let (dialing, queued) = match &activation {
            Activation::Admitted { placed, .. } => (true, *placed == Placed::Queued),
            Activation::Resumed { open } => (
                open.state == ContactState::Dialing,
                open.call
                    .as_ref()
                    .is_some_and(|call| call.status == crate::call::CallStatus::Queued),
            ),
        };
        let start = AttemptStart {
            campaign: state.id,
            contact,
            rules: c.rules.clone(),
            attempts,
            infra_retries,
            closed: state.closed,
            seed: state.rng.random(),
            activation,
        };
        let actor = state.shared.spawn_contact(start, myself.get_cell()).await?;
        state.cells.insert(actor.get_id(), contact);
        state.active.insert(
            contact,
            Active {
                actor,
                dialing,
                queued,
            },
        );
        Ok(())
    }

    async fn resume_contact(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        open: OpenAttempt,
    ) -> Res<()> {
        if state.active.contains_key(&open.contact_id) {
            return Ok(());
        }
        Self::spawn_contact(
            myself,
            state,
            open.contact_id,
            open.attempts,
            open.infra_retries,
            Activation::Resumed { open },
        )
        .await
    }

    async fn resume_from_store(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        contact: ContactId,
    ) -> Res<()> {
        if state.active.contains_key(&contact) {
            return Ok(());
        }
        if let Some(open) = state.shared.store.open_attempt(contact).await? {
            Self::resume_contact(myself, state, open).await?;
        }
        Ok(())
    }

    async fn reload(state: &mut CampaignState, now: DateTime<Utc>) -> Res<bool> {
        state.campaign = state.shared.store.campaign(state.id).await?;
        state.loaded_at = Some(now);
        state.dirty = false;
        state.due.clear();
        state.admitted_last_interval = std::mem::take(&mut state.admitted_since_load);
        if state.counts_dirty {
            state.counts = state.shared.store.contact_counts(state.id).await?;
            state.counts_dirty = false;
        }
        Ok(state.campaign.is_some())
    }

    /// An evaluation's record: its result and the projected cost of the remaining attempts.
    fn tick(
        state: &CampaignState,
        c: &EngineCampaign,
        at: DateTime<Utc>,
        result: &str,
        last_error: Option<String>,
    ) -> TickRecord {
        let reservation = reservation_of(c, state.shared.config.outbound_cents_per_minute);
        let remaining =
            (state.counts.open() * c.rules.max_attempts - state.counts.open_attempts).max(0);
        TickRecord {
            at,
            result: result.to_owned(),
            last_error,
            estimate_cents: remaining.saturating_mul(reservation),
        }
    }

    async fn record(
        state: &mut CampaignState,
        result: &str,
        last_error: Option<String>,
    ) -> Res<()> {
        let Some(c) = &state.campaign else {
            return Ok(());
        };
        let now = state.shared.clock.now();
        if last_error.is_none()
            && let Some((at, previous)) = &state.last_record
            && previous == result
            && now - *at < Duration::seconds(1)
        {
            return Ok(());
        }
        let tick = Self::tick(state, c, now, result, last_error);
        state.shared.store.record_tick(state.id, &tick).await?;
        state.last_record = Some((now, tick.result));
        Ok(())
    }

    /// An engine status change; on success the tick records `reason` (and `error`).
    async fn transition(
        state: &mut CampaignState,
        to: CampaignStatus,
        reason: &str,
        error: Option<String>,
    ) -> Res<bool> {
        let Some(c) = &state.campaign else {
            return Ok(false);
        };
        let now = state.shared.clock.now();
        let from = c.status;
        let moved = state
            .shared
            .store
            .engine_transition(state.id, from, to, reason, now)
            .await?;
        if moved {
            tracing::info!(campaign = %state.id, from = from.as_str(), to = to.as_str(), reason, "campaign status changed by the engine");
            if let Some(c) = &mut state.campaign {
                c.status = to;
            }
            Self::record(state, reason, error).await?;
        } else {
            state.dirty = true;
        }
        Ok(moved)
    }

    /// The balance does not cover a reservation: pause until a top-up clears it (checked on
    /// fresh numbers; `false` if the balance covers it after all).
    async fn pause_for_credit(state: &mut CampaignState, reservation: i64) -> Res<bool> {
        let Some(ws) = state.campaign.as_ref().map(|c| c.workspace_id) else {
            return Ok(false);
        };
        let funds = state.shared.store.funds(ws).await?;
        if funds.covers(reservation) {
            return Ok(false);
        }
        Self::transition(
            state,
            CampaignStatus::PausedInsufficientCredit,
            "insufficient_credit",
            Some(format!(
                "workspace balance {} cents (less {} reserved by queued and live calls) does not cover one call's reservation of {} cents; top up to resume",
                funds.balance_cents, funds.reserved_cents, reservation
            )),
        )
        .await
    }

    /// Stopped, archived or completed: cancel what is queued, let live calls finish, then stop.
    fn close(myself: &ActorRef<CampaignMsg>, state: &mut CampaignState, status: CampaignStatus) {
        let reason = match status {
            CampaignStatus::Archived => Some(ExclusionReason::CampaignArchived),
            CampaignStatus::Stopped => Some(ExclusionReason::CampaignStopped),
            _ => None,
        };
        if state.closed.is_none()
            && let Some(reason) = reason
        {
            state.closed = Some(reason);
            for a in state.active.values() {
                let _ = a.actor.cast(ContactMsg::Closed { reason });
            }
        }
        if !state.cancelled_queue && reason.is_some() {
            state.cancelled_queue = true;
            state
                .shared
                .to_queue(QueueMsg::CancelCampaign { campaign: state.id });
        }
        if state.active.is_empty() {
            Self::retire(myself, state);
        }
    }

    /// A due contact whose number is on the do-not-call list leaves the campaign, `excluded`.
    async fn exclude_blocked(
        state: &mut CampaignState,
        d: &DueContact,
        now: DateTime<Utc>,
    ) -> Res<()> {
        if state
            .shared
            .store
            .exclude_contact(d.id, ExclusionReason::DoNotCall, now)
            .await?
        {
            state
                .counts
                .shift(d.state, ContactState::Excluded, d.attempts);
        }
        Ok(())
    }

    async fn evaluate(myself: &ActorRef<CampaignMsg>, state: &mut CampaignState) -> Res<()> {
        let shared = state.shared.clone();
        let config = &shared.config;
        let now = shared.clock.now();
        let interval =
            Duration::from_std(config.evaluation_interval).unwrap_or(Duration::seconds(60));
        let stale = state.loaded_at.is_none_or(|at| now - at >= interval);
        if (state.dirty || stale || state.campaign.is_none()) && !Self::reload(state, now).await? {
            Self::retire(myself, state);
            return Ok(());
        }
        let Some(c) = state.campaign.clone() else {
            return Ok(());
        };
        let mut next_wake = now + interval;
        match c.status {
            CampaignStatus::Draft => {
                Self::retire(myself, state);
                return Ok(());
            }
            s if s.is_terminal() => {
                Self::close(myself, state, s);
                return Ok(());
            }
            CampaignStatus::Scheduled => match c.rules.starts_at {
                Some(starts) if starts > now => {
                    Self::record(state, "waiting_for_starts_at", None).await?;
                    Self::wake_at(myself, state, starts.min(next_wake));
                    return Ok(());
                }
                _ => {
                    if !Self::transition(state, CampaignStatus::Running, "starts_at_reached", None)
                        .await?
                    {
                        Self::request_eval(myself, state);
                        return Ok(());
                    }
                }
            },
            CampaignStatus::PausedInsufficientCredit => {
                let reservation = reservation_of(&c, config.outbound_cents_per_minute);
                let funds = shared.store.funds(c.workspace_id).await?;
                if !funds.covers(reservation)
                    || !Self::transition(state, CampaignStatus::Running, "credit_restored", None)
                        .await?
                {
                    Self::wake_at(myself, state, next_wake);
                    return Ok(());
                }
            }
            CampaignStatus::Running => {}
            // Paused by a person or for a cause a person fixes: calls in flight settle, nothing
            // is admitted, and the pause reason stays in last_tick_result.
            _ => {
                Self::wake_at(myself, state, next_wake);
                return Ok(());
            }
        }
        let Some(c) = state.campaign.clone() else {
            return Ok(());
        };
        let rules = &c.rules;

        // Still runnable? The same checks as the launch preflight.
        let check = Preflight {
            agent_id_set: c.agent_id.is_some(),
            agent: c.agent,
            from_number_id_set: c.from_phone_number_id.is_some(),
            from_number: c.from_number.clone(),
            window: &c.window,
            now,
            starts_at: None,
            ends_at: rules.ends_at,
        };
        if let Err(problem) = check.check() {
            Self::transition(
                state,
                CampaignStatus::PausedConfig,
                problem.machine_reason(),
                Some(problem.to_string()),
            )
            .await?;
            return Ok(());
        }

        // Done when every enrolled contact is terminal; a campaign without contacts waits for
        // some to be enrolled.
        if state.counts.open() == 0 && state.active.is_empty() {
            // Recount before declaring the campaign done.
            state.counts = shared.store.contact_counts(state.id).await?;
            if state.counts.total() > 0 && state.counts.open() == 0 {
                Self::transition(state, CampaignStatus::Completed, "all_contacts_done", None)
                    .await?;
                Self::retire(myself, state);
                return Ok(());
            }
        }

        let zone = c.window.timezone;
        let today = local_date(now, zone);
        let admitted_today = if c.daily_window_date == Some(today) {
            c.daily_admitted_count
        } else {
            0
        };
        let in_flight = state.in_flight();
        let gap = Duration::seconds(rules.min_seconds_between_calls);
        let gap_anchor = state.last_dial_at.max(c.last_admitted_at);
        let reservation = reservation_of(&c, config.outbound_cents_per_minute);

        let blocked: Option<(&str, Option<DateTime<Utc>>)> =
            if admitted_today >= rules.max_calls_per_day {
                Some(("daily_cap_reached", Some(next_local_midnight(now, zone))))
            } else if in_flight >= rules.max_in_flight {
                Some(("max_in_flight", None))
            } else if gap > Duration::zero() && state.queued() > 0 {
                Some(("waiting_for_queue", None))
            } else if gap > Duration::zero()
                && let Some(anchor) = gap_anchor
                && anchor + gap > now
            {
                Some(("min_seconds_between_calls", Some(anchor + gap)))
            } else if !c.window.use_contact_timezone && !c.window.is_open_at(now, zone) {
                let horizon = rules.ends_at.unwrap_or(now + Duration::days(8));
                Some((
                    "outside_calling_window",
                    c.window.next_open(now, horizon, zone),
                ))
            } else {
                None
            };
        if let Some((reason, wake)) = blocked {
            Self::record(state, reason, None).await?;
            if let Some(at) = wake {
                next_wake = next_wake.min(at);
            }
            Self::wake_at(myself, state, next_wake);
            return Ok(());
        }

        if let Some(budget) = rules.budget_cents
            && c.spent_cents + c.reserved_cents + reservation > budget
        {
            // Decide on fresh money, not the cache.
            if !Self::reload(state, now).await? {
                return Ok(());
            }
            let fresh = state
                .campaign
                .as_ref()
                .is_some_and(|f| f.spent_cents + f.reserved_cents + reservation > budget);
            if !fresh {
                Self::request_eval(myself, state);
                return Ok(());
            }
            if in_flight == 0 && state.queued() == 0 {
                Self::transition(
                    state,
                    CampaignStatus::PausedBudget,
                    "budget_reached",
                    Some(format!(
                        "spent {} cents of a {} cent budget; one more call reserves {} cents; raise or remove budget_cents, then resume",
                        c.spent_cents, budget, reservation
                    )),
                )
                .await?;
            } else {
                Self::record(state, "budget_reserved_by_calls_in_flight", None).await?;
            }
            Self::wake_at(myself, state, next_wake);
            return Ok(());
        }

        let mut slots =
            (rules.max_in_flight - in_flight).min(rules.max_calls_per_day - admitted_today);
        if gap > Duration::zero() {
            slots = slots.min(1);
        }
        let (Some(agent_id), Some(number), Some(cap)) = (
            c.agent_id,
            c.from_number.as_ref(),
            c.agent.and_then(|a| a.max_call_duration_secs),
        ) else {
            return Ok(());
        };

        let horizon = rules.ends_at.unwrap_or(now + Duration::days(8));
        let mut deferrals = Vec::new();
        let mut admitted = 0i64;
        let mut outcome: Option<&str> = None;
        // Whether this evaluation read the store, what it found was everything due, and when
        // the next contact falls due.
        let mut read: Option<(bool, Option<DateTime<Utc>>)> = None;
        while admitted < slots {
            let Some(d) = state.due.pop_front() else {
                if read.is_some() {
                    break;
                }
                // A few more than the free slots (some may be outside their hours or blocked),
                // and about as many as the last interval admitted.
                let limit =
                    (slots * 2 + 8 + state.admitted_last_interval * 5 / 4).min(config.scan_batch);
                let scan = shared
                    .store
                    .due_contacts(state.id, Some(agent_id), now, limit)
                    .await?;
                read = Some(((scan.due.len() as i64) < limit, scan.next_due_at));
                if scan.due.is_empty() {
                    break;
                }
                state.due = scan.due.into();
                continue;
            };
            let contact_tz = contact_zone(&c.window, d.timezone.as_deref(), &d.phone_number);
            if !c.window.is_open_at(now, contact_tz) {
                let next = c
                    .window
                    .next_open(now, horizon, contact_tz)
                    .unwrap_or(now + Duration::days(1));
                deferrals.push((d.id, next));
                continue;
            }
            if d.blocked {
                Self::exclude_blocked(state, &d, now).await?;
                continue;
            }
            let spec = CallSpec {
                id: CallId::new(),
                workspace_id: c.workspace_id,
                campaign_id: Some(state.id),
                contact_id: Some(d.id),
                agent_id,
                from_phone_number_id: c.from_phone_number_id,
                from_number: number.number.clone(),
                to_number: d.phone_number.clone(),
                priority: PRIORITY_DEFAULT,
                attempt: d.attempts + 1,
                max_duration_secs: cap,
                reserved_cents: reservation,
                queued_at: now,
            };
            // The evaluation is recorded with each admission; the last one has the final count.
            let tick = Self::tick(state, &c, now, &format!("admitted:{}", admitted + 1), None);
            // A free slot is taken now, so the call is committed as `dialing` with the attempt;
            // it is given back if the admission does not happen.
            let claimed = shared.claim_slot(c.workspace_id);
            let admission = Admission {
                call: spec.clone(),
                contact_id: d.id,
                campaign_id: state.id,
                daily_date: today,
                max_calls_per_day: rules.max_calls_per_day,
                budget_cents: rules.budget_cents,
                now,
                tick,
                dialing: claimed,
            };
            let admitted_now = shared.store.admit(&admission).await;
            if claimed && !matches!(admitted_now, Ok(AdmitResult::Admitted)) {
                shared.free_slot(c.workspace_id);
            }
            let result = admitted_now?;
            match result {
                AdmitResult::Admitted => {
                    admitted += 1;
                    state.admitted_since_load += 1;
                    state
                        .counts
                        .shift(d.state, ContactState::Dialing, d.attempts + 1);
                    state.counts.open_attempts += 1;
                    if let Some(c) = &mut state.campaign {
                        if c.daily_window_date == Some(today) {
                            c.daily_admitted_count += 1;
                        } else {
                            c.daily_window_date = Some(today);
                            c.daily_admitted_count = 1;
                        }
                        c.last_admitted_at = Some(now);
                        c.reserved_cents += reservation;
                    }
                    Self::spawn_contact(
                        myself,
                        state,
                        d.id,
                        d.attempts + 1,
                        0,
                        Activation::Admitted {
                            call: spec,
                            placed: if claimed {
                                Placed::Dialing
                            } else {
                                Placed::Queued
                            },
                        },
                    )
                    .await?;
                }
                AdmitResult::ContactGone => {}
                AdmitResult::DoNotCall => Self::exclude_blocked(state, &d, now).await?,
                // The contact is still due: it stays first in line.
                _ => state.due.push_front(d),
            }
            match result {
                AdmitResult::Admitted | AdmitResult::ContactGone | AdmitResult::DoNotCall => {}
                AdmitResult::NotRunning => {
                    state.dirty = true;
                    outcome = Some("status_changed");
                    break;
                }
                AdmitResult::DailyCap => {
                    outcome = Some("daily_cap_reached");
                    break;
                }
                AdmitResult::InsufficientCredit => {
                    if admitted == 0 && Self::pause_for_credit(state, reservation).await? {
                        Self::wake_at(myself, state, next_wake);
                        return Ok(());
                    }
                    outcome = Some("insufficient_credit_for_more");
                    break;
                }
                AdmitResult::OverBudget => {
                    // Re-read money and decide at once.
                    state.dirty = true;
                    outcome = Some("funds_changed");
                    break;
                }
            }
        }
        if !deferrals.is_empty() {
            shared.store.defer_contacts(&deferrals, now).await?;
        }
        let result = if admitted > 0 {
            // Written with the last admission.
            let result = format!("admitted:{admitted}");
            state.last_record = Some((now, result.clone()));
            result
        } else if let Some(reason) = outcome {
            reason.to_owned()
        } else if !deferrals.is_empty() {
            "outside_calling_window".to_owned()
        } else if !state.active.is_empty() {
            "waiting_for_calls".to_owned()
        } else {
            "no_contacts_due".to_owned()
        };
        if admitted == 0 {
            Self::record(state, &result, None).await?;
        }
        let dry = admitted < slots && state.due.is_empty();
        if outcome.is_some() || (dry && matches!(read, Some((false, _)))) {
            // More contacts to look at, or something changed under us: look again now.
            Self::request_eval(myself, state);
        } else if dry && let Some((true, Some(at))) = read {
            // Slots are free but nobody is due yet: wake when the next contact is.
            next_wake = next_wake.min(at.max(now + Duration::seconds(1)));
        }
        Self::wake_at(myself, state, next_wake);
        Ok(())
    }
}

fn reservation_of(c: &EngineCampaign, cents_per_minute: i64) -> i64 {
    let cap = c.agent.and_then(|a| a.max_call_duration_secs).unwrap_or(0);
    cost_cents(cap, cents_per_minute)
}

impl Actor for CampaignActor {
    type Msg = CampaignMsg;
    type State = CampaignState;
    type Arguments = CampaignArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        CampaignArgs { shared, id }: CampaignArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let seed = shared
            .config
            .seed
            .map_or_else(rand::random, |s| s ^ id.as_uuid().as_u128() as u64);
        Ok(CampaignState {
            shared,
            id,
            campaign: None,
            loaded_at: None,
            counts: ContactCounts::default(),
            active: HashMap::new(),
            cells: HashMap::new(),
            last_dial_at: None,
            consecutive_infra: 0,
            dirty: true,
            counts_dirty: true,
            eval_pending: false,
            wake: None,
            rng: StdRng::seed_from_u64(seed),
            closed: None,
            cancelled_queue: false,
            last_record: None,
            due: VecDeque::new(),
            admitted_since_load: 0,
            admitted_last_interval: 0,
        })
    }

    /// Rebuilds from the store: the campaign, its counts, and an actor for every open attempt.
    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let now = state.shared.clock.now();
        if !Self::reload(state, now).await? {
            Self::retire(&myself, state);
            return Ok(());
        }
        if let Some(status) = state.campaign.as_ref().map(|c| c.status)
            && let Some(reason) = match status {
                CampaignStatus::Archived => Some(ExclusionReason::CampaignArchived),
                CampaignStatus::Stopped => Some(ExclusionReason::CampaignStopped),
                _ => None,
            }
        {
            state.closed = Some(reason);
        }
        for open in state.shared.store.open_attempts(state.id).await? {
            Self::resume_contact(&myself, state, open).await?;
        }
        Self::request_eval(&myself, state);
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            CampaignMsg::Evaluate => {
                state.eval_pending = false;
                let started = std::time::Instant::now();
                Self::evaluate(&myself, state).await?;
                state.shared.stats.record_evaluation(started.elapsed());
            }
            CampaignMsg::Changed => {
                state.dirty = true;
                state.counts_dirty = true;
                Self::request_eval(&myself, state);
            }
            CampaignMsg::FundsChanged { workspace: ws } => {
                if state
                    .campaign
                    .as_ref()
                    .is_some_and(|c| c.workspace_id == ws)
                {
                    state.dirty = true;
                    Self::request_eval(&myself, state);
                }
            }
            CampaignMsg::CallStarted { contact, at } => {
                state.last_dial_at = Some(state.last_dial_at.map_or(at, |t| t.max(at)));
                if let Some(a) = state.active.get_mut(&contact) {
                    a.queued = false;
                }
            }
            CampaignMsg::CallFinished {
                contact,
                call,
                end,
                handover,
                counted,
            } => {
                if !counted {
                    // Keep the cached money close; each evaluation re-reads it anyway.
                    if let Some(c) = &mut state.campaign {
                        let reservation =
                            reservation_of(c, state.shared.config.outbound_cents_per_minute);
                        c.spent_cents += end.cost_cents;
                        c.reserved_cents = (c.reserved_cents - reservation).max(0);
                    }
                    if end.end_reason != END_INTERRUPTED {
                        if end.outcome == CallOutcome::InfraError {
                            state.consecutive_infra += 1;
                        } else {
                            state.consecutive_infra = 0;
                        }
                    }
                }
                if let Some(a) = state.active.get_mut(&contact) {
                    a.queued = false;
                    // Should the actor be gone, the handover drops with the message.
                    let _ = a.actor.cast(ContactMsg::CallFinished {
                        call,
                        end,
                        handover,
                    });
                } else if handover.is_none() {
                    Self::resume_from_store(&myself, state, contact).await?;
                }
                // Otherwise the handover drops here: the call actor commits the end and reports
                // it again, and the contact is then rebuilt from the store.
                if state.consecutive_infra >= state.shared.config.infra_pause_after
                    && state
                        .campaign
                        .as_ref()
                        .is_some_and(|c| c.status == CampaignStatus::Running)
                {
                    let n = state.consecutive_infra;
                    state.consecutive_infra = 0;
                    Self::transition(
                        state,
                        CampaignStatus::PausedInfra,
                        "repeated_infra_errors",
                        Some(format!(
                            "{n} calls in a row failed on the platform or carrier side; resume when voice capacity is healthy"
                        )),
                    )
                    .await?;
                }
            }
            CampaignMsg::CallCancelled { contact, call } => {
                if let Some(c) = &mut state.campaign {
                    let reservation =
                        reservation_of(c, state.shared.config.outbound_cents_per_minute);
                    c.reserved_cents = (c.reserved_cents - reservation).max(0);
                }
                if let Some(a) = state.active.get_mut(&contact) {
                    a.queued = false;
                    let _ = a.actor.cast(ContactMsg::CallCancelled { call });
                } else {
                    Self::resume_from_store(&myself, state, contact).await?;
                }
            }
            CampaignMsg::SlotFreed { contact } => {
                if let Some(a) = state.active.get_mut(&contact)
                    && a.dialing
                {
                    a.dialing = false;
                    a.queued = false;
                    state
                        .counts
                        .shift(ContactState::Dialing, ContactState::AwaitingDisposition, 0);
                }
                Self::request_eval(&myself, state);
            }
            CampaignMsg::Resolved { contact, settled } => {
                let held_slot = state.active.get(&contact).is_some_and(|a| a.dialing);
                state.remove_active(contact);
                match settled {
                    Some(Settled { from, to, attempts }) => state.counts.shift(from, to, attempts),
                    None => state.counts_dirty = true,
                }
                if state.closed.is_some() && state.active.is_empty() {
                    Self::retire(&myself, state);
                    return Ok(());
                }
                // A freed slot admits the next contact; the last open contact completes.
                let retry_soon = settled.is_some_and(|s| s.to == ContactState::Scheduled);
                if held_slot || retry_soon || state.counts.open() == 0 || state.counts_dirty {
                    Self::request_eval(&myself, state);
                }
            }
            CampaignMsg::DispositionLanded { call } => {
                for a in state.active.values().filter(|a| !a.dialing) {
                    let _ = a.actor.cast(ContactMsg::DispositionLanded { call });
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            // A contact actor stops right after sending `Resolved`, which does the bookkeeping;
            // supervision events may overtake that message, so only the cell is forgotten here.
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                state.cells.remove(&cell.get_id());
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                if let Some(contact) = state.cells.remove(&cell.get_id()) {
                    tracing::warn!(campaign = %state.id, %contact, error = %err, "contact actor failed; re-activating it from the store");
                    state.active.remove(&contact);
                    Self::resume_from_store(&myself, state, contact).await?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, handle)) = state.wake.take() {
            handle.abort();
        }
        Ok(())
    }
}
