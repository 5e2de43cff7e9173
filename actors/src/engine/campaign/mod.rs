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
use crate::call::EndReason;
use crate::campaign::CampaignStatus;
use crate::clock::until;
use crate::contact::{CallOutcome, ContactState, ExclusionReason};
use crate::ids::{CampaignId, ContactId};
use crate::money::Cents;
use crate::pacing::TickResult;
use crate::ports::{ContactCounts, DueContact, EngineCampaign, OpenAttempt, TickRecord};

mod evaluate;

pub struct CampaignArgs {
    pub shared: Arc<Shared>,
    pub id: CampaignId,
}

/// A contact with an open attempt, and its actor.
struct Active {
    actor: ActorRef<ContactMsg>,
    /// Its call holds one of the campaign's `max_in_flight` slots (queued or live); false once
    /// the call ended and the attempt waits for a disposition.
    dialing: bool,
    /// Its call still waits in the call queue (the gap between calls waits for it).
    queued: bool,
}

pub struct CampaignState {
    shared: Arc<Shared>,
    id: CampaignId,
    /// The campaign as of the last reload; `None` before the first one or once it is gone.
    campaign: Option<EngineCampaign>,
    /// When the campaign was last read: an evaluation re-reads it after an interval.
    loaded_at: Option<DateTime<Utc>>,
    /// Contacts per state, kept in memory so an evaluation does not count them.
    counts: ContactCounts,
    /// Contacts with an open attempt, each with its actor.
    active: HashMap<ContactId, Active>,
    /// The contact of each contact actor, to tell which contact a supervision event is about.
    cells: HashMap<ActorId, ContactId>,
    /// The last dial of the campaign's calls (`min_seconds_between_calls` counts from it).
    last_dial_at: Option<DateTime<Utc>>,
    /// Carrier-side failures in a row: at `infra_pause_after` the campaign is `paused_infra`.
    consecutive_infra: u32,
    /// The cached campaign may be out of date (the API or a lost race changed it): the next
    /// evaluation reloads it before deciding anything.
    dirty: bool,
    /// The cached per-state counts may be out of date (contacts were enrolled or changed
    /// through the API, or a settlement found the contact already moved): reload recounts.
    counts_dirty: bool,
    /// An `Evaluate` is already in the mailbox: many triggers in a row cause one evaluation.
    eval_pending: bool,
    /// The timer of the next evaluation, and when it fires.
    wake: Option<(DateTime<Utc>, Timer<CampaignMsg>)>,
    /// Seeds the contact actors' retry randomization (seeded by the engine's seed, so a seeded
    /// run repeats).
    rng: StdRng,
    /// Set once the campaign is stopped or archived: open attempts end without a retry.
    closed: Option<ExclusionReason>,
    /// The queue has been asked to cancel this campaign's waiting calls (asked once).
    cancelled_queue: bool,
    /// The last evaluation written: repeats within a second of it are not rewritten.
    last_record: Option<(DateTime<Utc>, TickResult)>,
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
        result: TickResult,
        last_error: Option<String>,
    ) -> TickRecord {
        let reservation = reservation_of(c, state.shared.config.outbound_cents_per_minute);
        let remaining =
            (state.counts.open() * c.rules.max_attempts - state.counts.open_attempts).max(0);
        TickRecord {
            at,
            result,
            last_error,
            estimate_cents: reservation.times(remaining),
        }
    }

    async fn record(
        state: &mut CampaignState,
        result: TickResult,
        last_error: Option<String>,
    ) -> Res<()> {
        let Some(c) = &state.campaign else {
            return Ok(());
        };
        let now = state.shared.clock.now();
        if last_error.is_none()
            && let Some((at, previous)) = &state.last_record
            && *previous == result
            && now - *at < Duration::seconds(1)
        {
            return Ok(());
        }
        let tick = Self::tick(state, c, now, result, last_error);
        state.shared.store.record_tick(state.id, &tick).await?;
        state.last_record = Some((now, result));
        Ok(())
    }

    /// An engine status change, recorded with the evaluation that decided it (`reason`, and
    /// `error` as the campaign's last error) in the same transaction.
    async fn transition(
        state: &mut CampaignState,
        to: CampaignStatus,
        reason: TickResult,
        error: Option<String>,
    ) -> Res<bool> {
        let Some(c) = &state.campaign else {
            return Ok(false);
        };
        let now = state.shared.clock.now();
        let from = c.status;
        let tick = Self::tick(state, c, now, reason, error);
        let moved = state
            .shared
            .store
            .engine_transition(state.id, from, to, &reason.as_str(), Some(&tick), now)
            .await?;
        if moved {
            tracing::info!(campaign = %state.id, from = from.as_str(), to = to.as_str(), %reason, "campaign status changed by the engine");
            if let Some(c) = &mut state.campaign {
                c.status = to;
            }
            state.last_record = Some((now, reason));
        } else {
            state.dirty = true;
        }
        Ok(moved)
    }

    /// The balance does not cover a reservation: pause until a top-up clears it (checked on
    /// fresh numbers; `false` if the balance covers it after all).
    async fn pause_for_credit(state: &mut CampaignState, reservation: Cents) -> Res<bool> {
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
            TickResult::InsufficientCredit,
            Some(format!(
                "workspace balance {} cents (less {} reserved by queued and live calls) does not cover one call's reservation of {} cents; top up to resume",
                funds.balance_cents, funds.reserved_cents, reservation
            )),
        )
        .await
    }

    /// Stopped, archived or completed: cancel what is queued, let live calls finish, then stop.
    fn close(myself: &ActorRef<CampaignMsg>, state: &mut CampaignState, status: CampaignStatus) {
        let reason = status.closing().map(|closing| closing.reason);
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
}

/// What one call of the campaign reserves: its agent's duration cap at the outbound rate.
fn reservation_of(c: &EngineCampaign, per_minute: Cents) -> Cents {
    let cap = c.agent.and_then(|a| a.max_call_duration_secs).unwrap_or(0);
    per_minute.per_minute_for(cap)
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
            && let Some(closing) = status.closing()
        {
            state.closed = Some(closing.reason);
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
                        c.reserved_cents = (c.reserved_cents - reservation).at_least_zero();
                    }
                    if end.end_reason != EndReason::Interrupted {
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
                        TickResult::RepeatedInfraErrors,
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
                    c.reserved_cents = (c.reserved_cents - reservation).at_least_zero();
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
