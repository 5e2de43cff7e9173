//! `ContactActor`: a virtual actor for one open attempt. The contact's state lives in the store;
//! the actor is activated when the campaign admits the contact (or rebuilt from the store after
//! a restart) and stops once the attempt is settled. It double-dials a no-answer once when the
//! campaign asks for it, waits for the disposition of an answered call, and writes the
//! settlement.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::messages::{
    Activation, AttemptStart, CampaignMsg, ContactMsg, EndHandover, Placed, QueueMsg, Settled,
    SupervisorMsg,
};
use super::shared::{Shared, Timer};
use crate::call::{CallStatus, EndReason};
use crate::clock::until;
use crate::contact::{CallOutcome, ContactState, ExclusionReason};
use crate::ids::{CallId, CampaignId, ContactId};
use crate::policy::{self, Verdict};
use crate::ports::{CallEnd, CallSpec, CampaignRules, OpenAttempt, Settlement, StoredCall};

pub struct ContactArgs {
    pub shared: Arc<Shared>,
    pub start: AttemptStart,
}

/// The state of a contact actor: one open attempt of one contact. (Named for the attempt, since
/// `ContactState` is the contact's stored state, one of its fields' values.)
pub struct AttemptState {
    shared: Arc<Shared>,
    campaign: CampaignId,
    contact: ContactId,
    rules: CampaignRules,
    /// Attempts used, this one included, and infra retries used (for the settlement rules).
    attempts: i64,
    infra_retries: i64,
    /// Set when the campaign was stopped or archived: the attempt settles without a retry.
    closed: Option<ExclusionReason>,
    /// Retry-time randomization, seeded by the campaign so a seeded run repeats.
    rng: StdRng,
    /// The attempt's current call (the second dial of a double dial replaces the first).
    call: Option<CallId>,
    /// What the current call was placed with, to place the double dial alike; `None` for an
    /// attempt rebuilt from the store.
    spec: Option<CallSpec>,
    /// The attempt has been (or may no longer be) double-dialled.
    double_dialed: bool,
    /// The call was answered and the attempt waits for a disposition (`awaiting_disposition`).
    awaiting: bool,
    /// The pending double dial or disposition timeout.
    timer: Option<Timer<ContactMsg>>,
    /// The attempt is settled (or abandoned); late messages are ignored until the actor stops.
    done: bool,
    /// A rebuilt attempt, taken up in `post_start` (where the actor may send to itself).
    resume: Option<OpenAttempt>,
}

pub struct ContactActor;

/// A handed-over call end, with the end itself.
type Handed<'a> = Option<(Box<EndHandover>, &'a CallEnd)>;

/// The call end to commit with a store write, if one was handed over.
fn ending<'a>(handed: &'a Handed<'_>) -> Option<(&'a CallSpec, &'a CallEnd)> {
    handed.as_ref().map(|(h, end)| (&h.spec, *end))
}

/// Tells the call actor its end is committed.
fn acknowledge(handed: Handed<'_>) {
    if let Some((h, _)) = handed {
        let _ = h.done.send(());
    }
}

impl ContactActor {
    fn verdict_of(call: &StoredCall) -> Option<Verdict> {
        match call.status {
            CallStatus::Cancelled => Some(Verdict::Cancelled),
            CallStatus::Ended => Some(match call.outcome {
                _ if call.end_reason == Some(EndReason::Interrupted) => Verdict::Interrupted,
                Some(CallOutcome::Answered) => Verdict::Answered(call.disposition_id),
                Some(outcome) => Verdict::Ended(outcome),
                None => Verdict::Interrupted,
            }),
            CallStatus::Queued
            | CallStatus::Dialing
            | CallStatus::Ringing
            | CallStatus::InProgress => None,
        }
    }

    /// The attempt's call ended. With a handover, the end is committed here, in the same
    /// transaction as what the attempt does next.
    async fn call_ended(
        myself: &ActorRef<ContactMsg>,
        state: &mut AttemptState,
        call: CallId,
        end: &CallEnd,
        handover: Option<Box<EndHandover>>,
    ) -> Result<(), ActorProcessingErr> {
        let handed = handover.map(|h| (h, end));
        if end.end_reason == EndReason::Interrupted {
            return Self::settle(myself, state, Verdict::Interrupted, handed).await;
        }
        match end.outcome {
            CallOutcome::NoAnswer
                if state.rules.double_dial_enabled
                    && !state.double_dialed
                    && state.spec.is_some()
                    && state.closed.is_none() =>
            {
                if let Some((h, end)) = handed {
                    state.shared.store.finish_call(&h.spec, end).await?;
                    let _ = h.done.send(());
                }
                state.double_dialed = true;
                let gap = Duration::from_secs(state.rules.double_dial_gap_seconds.max(0) as u64);
                state.timer = Some(myself.send_after(gap, || ContactMsg::Redial));
                Ok(())
            }
            CallOutcome::Answered => {
                Self::await_disposition(myself, state, call, None, handed).await
            }
            outcome => Self::settle(myself, state, Verdict::Ended(outcome), handed).await,
        }
    }

    /// Moves to `awaiting_disposition` (freeing the campaign's in-flight slot) and settles as
    /// soon as a disposition is known, or as unclassified after the timeout.
    async fn await_disposition(
        myself: &ActorRef<ContactMsg>,
        state: &mut AttemptState,
        call: CallId,
        ended_at: Option<chrono::DateTime<chrono::Utc>>,
        handed: Handed<'_>,
    ) -> Result<(), ActorProcessingErr> {
        let shared = state.shared.clone();
        let now = shared.clock.now();
        let known = if state.awaiting {
            // Only a rebuilt attempt gets here, and its call's end is committed.
            shared.store.call_disposition(call).await?
        } else {
            let moved = shared
                .store
                .await_disposition(state.contact, call, now, ending(&handed))
                .await?;
            acknowledge(handed);
            let Some(known) = moved else {
                return Self::abandon(myself, state);
            };
            state.awaiting = true;
            shared.to_campaign(
                state.campaign,
                CampaignMsg::SlotFreed {
                    contact: state.contact,
                },
            );
            known
        };
        if let Some(d) = known {
            return Self::settle(myself, state, Verdict::Answered(Some(d)), None).await;
        }
        let timeout = shared.config.disposition_timeout;
        let wait = match ended_at {
            Some(ended) => until(
                now,
                ended + chrono::Duration::from_std(timeout).unwrap_or_default(),
            ),
            None => timeout,
        };
        state.timer = Some(myself.send_after(wait, || ContactMsg::DispositionTimeout));
        Ok(())
    }

    /// Writes the attempt's settlement (with the call's end when handed over) and stops.
    async fn settle(
        myself: &ActorRef<ContactMsg>,
        state: &mut AttemptState,
        verdict: Verdict,
        handed: Handed<'_>,
    ) -> Result<(), ActorProcessingErr> {
        Self::write_settlement(myself, state, verdict, handed, false)
            .await
            .map(drop)
    }

    /// [`ContactActor::settle`]; with `require_no_disposition`, only while the call has no
    /// disposition: `false` (and nothing written) when it has one.
    async fn write_settlement(
        myself: &ActorRef<ContactMsg>,
        state: &mut AttemptState,
        verdict: Verdict,
        handed: Handed<'_>,
        require_no_disposition: bool,
    ) -> Result<bool, ActorProcessingErr> {
        if state.done {
            return Ok(true);
        }
        let shared = state.shared.clone();
        let now = shared.clock.now();
        let infra_delay =
            chrono::Duration::from_std(shared.config.infra_retry_delay).unwrap_or_default();
        let decision = policy::settle(
            &state.rules,
            policy::Tries {
                attempts: state.attempts,
                infra_retries: state.infra_retries,
            },
            verdict,
            now,
            infra_delay,
            state.closed,
            &mut state.rng,
        );
        let Some(call) = state.call else {
            return Self::abandon(myself, state).map(|()| true);
        };
        let settlement = Settlement {
            contact_id: state.contact,
            call_id: call,
            state: decision.state,
            next_attempt_at: decision.next_attempt_at,
            refund_attempt: decision.refund_attempt,
            infra_retry: decision.infra_retry,
            outcome: verdict.outcome(),
            disposition_id: match verdict {
                Verdict::Answered(d) => d,
                _ => None,
            },
            excluded_reason: decision.excluded_reason,
            now,
            require_no_disposition,
        };
        let applied = shared
            .store
            .settle_contact(&settlement, ending(&handed))
            .await?;
        acknowledge(handed);
        if require_no_disposition && !applied {
            return Ok(false);
        }
        state.done = true;
        let from = if state.awaiting {
            ContactState::AwaitingDisposition
        } else {
            ContactState::Dialing
        };
        shared.to_campaign(
            state.campaign,
            CampaignMsg::Resolved {
                contact: state.contact,
                settled: applied.then_some(Settled {
                    from,
                    to: decision.state,
                    attempts: state.attempts - i64::from(decision.refund_attempt),
                }),
            },
        );
        myself.stop(None);
        Ok(true)
    }

    /// The contact left the attempt behind our back (archived): stop without writing.
    fn abandon(
        myself: &ActorRef<ContactMsg>,
        state: &mut AttemptState,
    ) -> Result<(), ActorProcessingErr> {
        state.done = true;
        state.shared.to_campaign(
            state.campaign,
            CampaignMsg::Resolved {
                contact: state.contact,
                settled: None,
            },
        );
        myself.stop(None);
        Ok(())
    }
}

impl Actor for ContactActor {
    type Msg = ContactMsg;
    type State = AttemptState;
    type Arguments = ContactArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        ContactArgs {
            shared,
            start: args,
        }: ContactArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let mut state = AttemptState {
            shared,
            campaign: args.campaign,
            contact: args.contact,
            rules: args.rules,
            attempts: args.attempts,
            infra_retries: args.infra_retries,
            closed: args.closed,
            rng: StdRng::seed_from_u64(args.seed),
            call: None,
            spec: None,
            double_dialed: false,
            awaiting: false,
            timer: None,
            done: false,
            resume: None,
        };
        match args.activation {
            Activation::Admitted { call: spec, placed } => {
                state.call = Some(spec.id);
                match placed {
                    Placed::Queued => state
                        .shared
                        .to_queue(QueueMsg::Enqueue { call: spec.clone() }),
                    Placed::Dialing => state.shared.to_supervisor(SupervisorMsg::Dispatch {
                        call: spec.clone(),
                        placed,
                    }),
                }
                state.spec = Some(spec);
            }
            Activation::Resumed { open } => {
                state.call = open.call.as_ref().map(|c| c.id);
                state.awaiting = open.state == ContactState::AwaitingDisposition;
                // A rebuilt attempt is not double-dialled: what the first dial was is gone.
                state.double_dialed = true;
                state.resume = Some(open);
            }
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let Some(open) = state.resume.take() else {
            return Ok(());
        };
        let Some(call) = open.call else {
            // An attempt without a call cannot be committed; treat it as spent.
            return Self::settle(&myself, state, Verdict::Interrupted, None).await;
        };
        match Self::verdict_of(&call) {
            // Still queued or live: its end will be reported.
            None => Ok(()),
            Some(Verdict::Answered(None)) => {
                Self::await_disposition(&myself, state, call.id, call.ended_at, None).await
            }
            Some(verdict) => Self::settle(&myself, state, verdict, None).await,
        }
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if state.done {
            return Ok(());
        }
        match msg {
            ContactMsg::CallFinished {
                call,
                end,
                handover,
            } => {
                // A handover dropped here is committed by the call actor, and reported again.
                if state.call == Some(call) && !state.awaiting {
                    Self::call_ended(&myself, state, call, &end, handover).await?;
                }
            }
            ContactMsg::CallCancelled { call } => {
                if state.call == Some(call) {
                    Self::settle(&myself, state, Verdict::Cancelled, None).await?;
                }
            }
            ContactMsg::Redial => {
                state.timer = None;
                let no_answer = Verdict::Ended(CallOutcome::NoAnswer);
                let Some(first) = state.spec.clone() else {
                    return Self::settle(&myself, state, no_answer, None).await;
                };
                if state.closed.is_some() {
                    return Self::settle(&myself, state, no_answer, None).await;
                }
                let spec = CallSpec {
                    id: CallId::new(),
                    queued_at: state.shared.clock.now(),
                    ..first
                };
                if !state.shared.store.redial(&spec, state.contact).await? {
                    return Self::abandon(&myself, state);
                }
                state.call = Some(spec.id);
                state
                    .shared
                    .to_queue(QueueMsg::Enqueue { call: spec.clone() });
                state.spec = Some(spec);
            }
            ContactMsg::DispositionLanded { call } => {
                if state.awaiting
                    && state.call == Some(call)
                    && let Some(d) = state.shared.store.call_disposition(call).await?
                {
                    Self::settle(&myself, state, Verdict::Answered(Some(d)), None).await?;
                }
            }
            ContactMsg::DispositionTimeout => {
                // Unclassified, unless a disposition landed meanwhile: then settle with it.
                if state.awaiting
                    && let Some(call) = state.call
                    && !Self::write_settlement(&myself, state, Verdict::Answered(None), None, true)
                        .await?
                {
                    let d = state.shared.store.call_disposition(call).await?;
                    Self::settle(&myself, state, Verdict::Answered(d), None).await?;
                }
            }
            ContactMsg::Closed { reason } => {
                state.closed = Some(reason);
                // A pending double dial is not placed for a closed campaign.
                if !state.awaiting && state.double_dialed && state.timer.is_some() {
                    if let Some(t) = state.timer.take() {
                        t.abort();
                    }
                    Self::settle(&myself, state, Verdict::Ended(CallOutcome::NoAnswer), None)
                        .await?;
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(t) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }
}
