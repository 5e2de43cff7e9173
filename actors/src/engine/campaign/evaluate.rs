//! One evaluation ("tick") of a campaign, as a chain of gates: the status gate (may this
//! campaign admit at all?), the runnable gate (the launch preflight, again), completion, the
//! pacing gates of [`crate::pacing`], the budget, then admission of due contacts one by one
//! (each in its own calling hours). Each gate that closes records its [`TickResult`] and says
//! when to look again.

use chrono::{DateTime, Duration, Utc};
use ractor::ActorRef;

use super::{CampaignActor, CampaignState, Res, reservation_of};
use crate::call::PRIORITY_DEFAULT;
use crate::campaign::{CampaignStatus, Preflight};
use crate::contact::{ContactState, ExclusionReason};
use crate::engine::messages::{Activation, CampaignMsg, Placed};
use crate::ids::{AgentId, CallId};
use crate::money::Cents;
use crate::pacing::{Pacing, TickResult, admitted_on, calling_window, horizon};
use crate::policy::{contact_zone, local_date};
use crate::ports::{Admission, AdmitResult, CallSpec, DueContact, EngineCampaign, TrunkLimits};

/// What a gate decided.
enum Gate {
    /// Go on to the next gate.
    Open,
    /// Stop here; evaluate again at `wake` at the latest (`None`: the gate has arranged what
    /// happens next itself).
    Closed { wake: Option<DateTime<Utc>> },
}

/// Whether an admission loop stopped early, and why.
enum Stop {
    /// The campaign's status changed under the evaluation.
    Status,
    DailyCap,
    /// The balance ran short after the first admission.
    Credit,
    /// The budget changed under the evaluation.
    Budget,
}

impl Stop {
    fn result(&self) -> TickResult {
        match self {
            Self::Status => TickResult::StatusChanged,
            Self::DailyCap => TickResult::DailyCapReached,
            Self::Credit => TickResult::InsufficientCreditForMore,
            Self::Budget => TickResult::FundsChanged,
        }
    }
}

/// With what this evaluation admits: the campaign's agent, from-number and the agent's duration
/// cap, what one call reserves, and the day `max_calls_per_day` counts on.
struct Caller<'a> {
    agent_id: AgentId,
    from_number: &'a str,
    /// The trunk that carries the from-number's calls, with its caps.
    trunk: Option<TrunkLimits>,
    max_duration_secs: i64,
    reservation: Cents,
    today: chrono::NaiveDate,
}

/// What the admission loop did.
struct Admitted {
    count: i64,
    /// Contacts outside their calling hours, with when their hours open.
    deferred: Vec<(crate::ids::ContactId, DateTime<Utc>)>,
    stopped: Option<Stop>,
    /// Whether the store was read, whether that read found everything due, and when the next
    /// contact falls due.
    read: Option<(bool, Option<DateTime<Utc>>)>,
    /// The evaluation ended itself (paused for credit).
    ended: bool,
}

impl CampaignActor {
    pub(super) async fn evaluate(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
    ) -> Res<()> {
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
        let next_wake = now + interval;
        let mut gate = Self::status_gate(myself, state, now, next_wake).await?;
        if let Gate::Open = gate {
            gate = Self::runnable_gate(state, now).await?;
        }
        if let Gate::Open = gate {
            gate = Self::completion_gate(myself, state).await?;
        }
        if let Gate::Closed { wake } = gate {
            if let Some(at) = wake {
                Self::wake_at(myself, state, at);
            }
            return Ok(());
        }
        let Some(c) = state.campaign.clone() else {
            return Ok(());
        };
        let rules = &c.rules;
        let today = local_date(now, c.window.timezone);
        let reservation = reservation_of(&c, config.outbound_cents_per_minute);
        let pacing = Pacing {
            now,
            window: &c.window,
            ends_at: rules.ends_at,
            admitted_today: admitted_on(c.daily_window_date, c.daily_admitted_count, today),
            max_calls_per_day: rules.max_calls_per_day,
            in_flight: state.in_flight(),
            max_in_flight: rules.max_in_flight,
            queued: state.queued(),
            gap: Duration::seconds(rules.min_seconds_between_calls),
            last_call_at: state.last_dial_at.max(c.last_admitted_at),
        };
        if let Some(blocked) = pacing.blocked() {
            Self::record(state, blocked.reason, None).await?;
            let wake = blocked.until.map_or(next_wake, |at| next_wake.min(at));
            Self::wake_at(myself, state, wake);
            return Ok(());
        }
        if let Gate::Closed { wake } =
            Self::budget_gate(myself, state, &c, &pacing, reservation, now, next_wake).await?
        {
            if let Some(at) = wake {
                Self::wake_at(myself, state, at);
            }
            return Ok(());
        }

        let slots = pacing.free_slots();
        // The runnable gate has checked all three.
        let (Some(agent_id), Some(number), Some(cap)) = (
            c.agent_id,
            c.from_number.as_ref(),
            c.agent.and_then(|a| a.max_call_duration_secs),
        ) else {
            return Ok(());
        };
        let caller = Caller {
            agent_id,
            from_number: &number.number,
            trunk: number.trunk,
            max_duration_secs: cap,
            reservation,
            today,
        };
        let run = Self::admit_due(myself, state, &c, &caller, slots, now).await?;
        if run.ended {
            Self::wake_at(myself, state, next_wake);
            return Ok(());
        }
        if !run.deferred.is_empty() {
            shared.store.defer_contacts(&run.deferred, now).await?;
        }
        let result = if run.count > 0 {
            // Written with the last admission.
            let result = TickResult::Admitted(run.count);
            state.last_record = Some((now, result));
            result
        } else if let Some(stop) = &run.stopped {
            stop.result()
        } else if !run.deferred.is_empty() {
            TickResult::OutsideCallingWindow
        } else if !state.active.is_empty() {
            TickResult::WaitingForCalls
        } else {
            TickResult::NoContactsDue
        };
        if run.count == 0 {
            Self::record(state, result, None).await?;
        }
        let mut wake = next_wake;
        let dry = run.count < slots && state.due.is_empty();
        if run.stopped.is_some() || (dry && matches!(run.read, Some((false, _)))) {
            // More contacts to look at, or something changed under us: look again now.
            Self::request_eval(myself, state);
        } else if dry && let Some((true, Some(at))) = run.read {
            // Slots are free but nobody is due yet: wake when the next contact is.
            wake = wake.min(at.max(now + Duration::seconds(1)));
        }
        Self::wake_at(myself, state, wake);
        Ok(())
    }

    /// Only a running campaign admits. A scheduled one starts at `starts_at`, one paused for
    /// credit resumes once the balance covers a reservation; a draft or closed one stops its
    /// actor; any other pause waits for a person.
    async fn status_gate(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        now: DateTime<Utc>,
        next_wake: DateTime<Utc>,
    ) -> Res<Gate> {
        let Some(c) = state.campaign.clone() else {
            return Ok(Gate::Closed { wake: None });
        };
        match c.status {
            CampaignStatus::Running => Ok(Gate::Open),
            CampaignStatus::Draft => {
                Self::retire(myself, state);
                Ok(Gate::Closed { wake: None })
            }
            s if s.is_terminal() => {
                Self::close(myself, state, s);
                Ok(Gate::Closed { wake: None })
            }
            CampaignStatus::Scheduled => match c.rules.starts_at {
                Some(starts) if starts > now => {
                    Self::record(state, TickResult::WaitingForStartsAt, None).await?;
                    Ok(Gate::Closed {
                        wake: Some(starts.min(next_wake)),
                    })
                }
                _ => {
                    let started = Self::transition(
                        state,
                        CampaignStatus::Running,
                        TickResult::StartsAtReached,
                        None,
                    )
                    .await?;
                    if started {
                        return Ok(Gate::Open);
                    }
                    Self::request_eval(myself, state);
                    Ok(Gate::Closed { wake: None })
                }
            },
            CampaignStatus::PausedInsufficientCredit => {
                let reservation = reservation_of(&c, state.shared.config.outbound_cents_per_minute);
                let funds = state.shared.store.funds(c.workspace_id).await?;
                if funds.covers(reservation)
                    && Self::transition(
                        state,
                        CampaignStatus::Running,
                        TickResult::CreditRestored,
                        None,
                    )
                    .await?
                {
                    return Ok(Gate::Open);
                }
                Ok(Gate::Closed {
                    wake: Some(next_wake),
                })
            }
            // Paused by a person or for a cause a person fixes: calls in flight settle, nothing
            // is admitted, and the pause reason stays in last_tick_result.
            _ => Ok(Gate::Closed {
                wake: Some(next_wake),
            }),
        }
    }

    /// Still runnable? The same checks as the launch preflight; a problem pauses the campaign
    /// (`paused_config`) with the problem as its last error.
    async fn runnable_gate(state: &mut CampaignState, now: DateTime<Utc>) -> Res<Gate> {
        let Some(c) = &state.campaign else {
            return Ok(Gate::Closed { wake: None });
        };
        let check = Preflight {
            agent_id_set: c.agent_id.is_some(),
            agent: c.agent,
            from_number_id_set: c.from_phone_number_id.is_some(),
            from_number: c.from_number.clone(),
            window: &c.window,
            now,
            starts_at: None,
            ends_at: c.rules.ends_at,
        };
        let Err(problem) = check.check() else {
            return Ok(Gate::Open);
        };
        Self::transition(
            state,
            CampaignStatus::PausedConfig,
            TickResult::Config(problem.config_problem()),
            Some(problem.to_string()),
        )
        .await?;
        Ok(Gate::Closed { wake: None })
    }

    /// Done when every enrolled contact is terminal (recounted first); a campaign without
    /// contacts waits for some to be enrolled.
    async fn completion_gate(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
    ) -> Res<Gate> {
        if state.counts.open() > 0 || !state.active.is_empty() {
            return Ok(Gate::Open);
        }
        state.counts = state.shared.store.contact_counts(state.id).await?;
        if state.counts.total() == 0 || state.counts.open() > 0 {
            return Ok(Gate::Open);
        }
        Self::transition(
            state,
            CampaignStatus::Completed,
            TickResult::AllContactsDone,
            None,
        )
        .await?;
        Self::retire(myself, state);
        Ok(Gate::Closed { wake: None })
    }

    /// `budget_cents` must take one more reservation, decided on fresh money: with calls in
    /// flight the budget may free up when they settle; without, the campaign is paused
    /// (`paused_budget`).
    #[allow(clippy::too_many_arguments)]
    async fn budget_gate(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        c: &EngineCampaign,
        pacing: &Pacing<'_>,
        reservation: Cents,
        now: DateTime<Utc>,
        next_wake: DateTime<Utc>,
    ) -> Res<Gate> {
        let Some(budget) = c.rules.budget_cents else {
            return Ok(Gate::Open);
        };
        let over = |c: &EngineCampaign| c.spent_cents + c.reserved_cents + reservation > budget;
        if !over(c) {
            return Ok(Gate::Open);
        }
        // Decide on fresh money, not the cache.
        if !Self::reload(state, now).await? {
            return Ok(Gate::Closed { wake: None });
        }
        if !state.campaign.as_ref().is_some_and(over) {
            Self::request_eval(myself, state);
            return Ok(Gate::Closed { wake: None });
        }
        if pacing.in_flight == 0 && pacing.queued == 0 {
            Self::transition(
                state,
                CampaignStatus::PausedBudget,
                TickResult::BudgetReached,
                Some(format!(
                    "spent {} cents of a {} cent budget; one more call reserves {} cents; raise or remove budget_cents, then resume",
                    c.spent_cents, budget, reservation
                )),
            )
            .await?;
        } else {
            Self::record(state, TickResult::BudgetReservedByCallsInFlight, None).await?;
        }
        Ok(Gate::Closed {
            wake: Some(next_wake),
        })
    }

    /// Admits due contacts into at most `slots` calls: each in its own calling hours, none on
    /// the do-not-call list, each re-checked by the store as it is admitted.
    async fn admit_due(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        c: &EngineCampaign,
        caller: &Caller<'_>,
        slots: i64,
        now: DateTime<Utc>,
    ) -> Res<Admitted> {
        let shared = state.shared.clone();
        let config = &shared.config;
        let rules = &c.rules;
        let (today, reservation) = (caller.today, caller.reservation);
        let horizon = horizon(rules.ends_at, now);
        let mut run = Admitted {
            count: 0,
            deferred: Vec::new(),
            stopped: None,
            read: None,
            ended: false,
        };
        while run.count < slots {
            let Some(d) = state.due.pop_front() else {
                if run.read.is_some() {
                    break;
                }
                // A few more than the free slots (some may be outside their hours or blocked),
                // and about as many as the last interval admitted.
                let limit =
                    (slots * 2 + 8 + state.admitted_last_interval * 5 / 4).min(config.scan_batch);
                let scan = shared
                    .store
                    .due_contacts(state.id, Some(caller.agent_id), now, limit)
                    .await?;
                run.read = Some(((scan.due.len() as i64) < limit, scan.next_due_at));
                if scan.due.is_empty() {
                    break;
                }
                state.due = scan.due.into();
                continue;
            };
            let zone = contact_zone(&c.window, d.timezone.as_deref(), &d.phone_number);
            if let Some(blocked) = calling_window(&c.window, zone, now, horizon) {
                let opens = blocked.until.unwrap_or(now + Duration::days(1));
                run.deferred.push((d.id, opens));
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
                agent_id: caller.agent_id,
                from_phone_number_id: c.from_phone_number_id,
                from_number: caller.from_number.to_owned(),
                to_number: d.phone_number.clone(),
                priority: PRIORITY_DEFAULT,
                attempt: d.attempts + 1,
                max_duration_secs: caller.max_duration_secs,
                reserved_cents: reservation,
                queued_at: now,
                trunk: caller.trunk,
            };
            // The evaluation is recorded with each admission; the last one has the final count.
            let tick = Self::tick(state, c, now, TickResult::Admitted(run.count + 1), None);
            // A free slot is taken now, so the call is committed as `dialing` with the attempt;
            // it is given back if the admission does not happen.
            let claimed = shared.claim_slot(&spec);
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
                shared.free_slot(&spec);
            }
            let placed = if claimed {
                Placed::Dialing
            } else {
                Placed::Queued
            };
            match admitted_now? {
                AdmitResult::Admitted => {
                    run.count += 1;
                    Self::admitted(myself, state, &d, spec, placed, today, reservation, now)
                        .await?;
                }
                AdmitResult::ContactGone => {}
                AdmitResult::DoNotCall => Self::exclude_blocked(state, &d, now).await?,
                stop => {
                    // The contact is still due: it stays first in line.
                    state.due.push_front(d);
                    run.stopped = Some(match stop {
                        AdmitResult::NotRunning => {
                            state.dirty = true;
                            Stop::Status
                        }
                        AdmitResult::DailyCap => Stop::DailyCap,
                        AdmitResult::InsufficientCredit => {
                            if run.count == 0 && Self::pause_for_credit(state, reservation).await? {
                                run.ended = true;
                                return Ok(run);
                            }
                            Stop::Credit
                        }
                        // Re-read money and decide at once.
                        _ => {
                            state.dirty = true;
                            Stop::Budget
                        }
                    });
                    break;
                }
            }
        }
        Ok(run)
    }

    /// Books an admission in the cached counts and money, and starts its contact actor.
    #[allow(clippy::too_many_arguments)]
    async fn admitted(
        myself: &ActorRef<CampaignMsg>,
        state: &mut CampaignState,
        d: &DueContact,
        call: CallSpec,
        placed: Placed,
        today: chrono::NaiveDate,
        reservation: Cents,
        now: DateTime<Utc>,
    ) -> Res<()> {
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
            Activation::Admitted { call, placed },
        )
        .await
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
}
