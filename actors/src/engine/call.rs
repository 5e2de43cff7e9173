//! `CallActor`: one per live call, of either direction.
//!
//! An outbound call's actor marks the call `dialing` (unless its admission committed it so),
//! has the dialer place it, records the answer when the dialer reports one, then has the end
//! (outcome, duration, cost) committed: by the contact actor of a campaign call, with the
//! attempt's next step in the same transaction, or here. Then it frees the queue slot.
//!
//! An inbound call's actor runs the answered call ([`crate::inbound::run_call`]: recorded as
//! live, the agent, the end recorded) and stops when it is over.
//!
//! Either way the call runs on a task of its own: a panic inside it fails this actor alone,
//! and the supervisor ends the call as interrupted.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::task::JoinHandle;

use super::messages::{CallMsg, CampaignMsg, EndHandover, Placed};
use super::shared::Shared;
use crate::inbound::InboundCall;
use crate::ports::{CallEnd, CallSpec, DialProgress, DialRequest};

/// How a call actor's call starts.
pub enum CallArgs {
    /// An outbound call to dial.
    Dial {
        shared: Arc<Shared>,
        spec: Box<CallSpec>,
        placed: Placed,
    },
    /// An inbound call, answered.
    Answered(Box<InboundCall>),
}

pub enum CallState {
    Dial(Box<DialState>),
    /// An inbound call: taken to run when the actor starts, then its task.
    Answered {
        call: Option<Box<InboundCall>>,
        run: Option<JoinHandle<()>>,
    },
}

pub struct DialState {
    shared: Arc<Shared>,
    spec: CallSpec,
    /// Whether the call still has to be marked `dialing` before the dial.
    placed: Placed,
    /// When the dial began (the call's `started_at`); `None` until then.
    started_at: Option<chrono::DateTime<chrono::Utc>>,
    /// The dialer's task, aborted if the actor stops first.
    dial: Option<JoinHandle<()>>,
}

pub struct CallActor;

/// A task aborted when its handle is dropped (the call actor stopped before the dial ended).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn join(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Actor for CallActor {
    type Msg = CallMsg;
    type State = CallState;
    type Arguments = CallArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: CallArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(match args {
            CallArgs::Dial {
                shared,
                spec,
                placed,
            } => CallState::Dial(Box::new(DialState {
                shared,
                spec: *spec,
                placed,
                started_at: None,
                dial: None,
            })),
            CallArgs::Answered(call) => CallState::Answered {
                call: Some(call),
                run: None,
            },
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match state {
            CallState::Dial(state) => dial(myself, state).await,
            CallState::Answered { call, run } => {
                if let Some(mut call) = call.take() {
                    // Its agent's actor is linked to this one.
                    call.owner = Some(myself.get_cell());
                    *run = Some(watch(
                        myself,
                        async move { crate::inbound::run_call(*call).await },
                        |ran| match ran {
                            Ok(()) => CallMsg::Ran,
                            Err(failed) => CallMsg::Crashed {
                                error: failed.to_string(),
                            },
                        },
                    ));
                }
                Ok(())
            }
        }
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match (state, msg) {
            (_, CallMsg::Crashed { error }) => Err(format!("the call failed: {error}").into()),
            (CallState::Dial(state), msg) => dialled(myself, msg, state).await,
            (CallState::Answered { .. }, _) => {
                myself.stop(None);
                Ok(())
            }
        }
    }

    /// The call's agent (an actor linked to this one) failed: so does the call, which its
    /// supervisor ends as interrupted.
    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorFailed(_, error) => {
                Err(format!("the call's agent failed: {error}").into())
            }
            _ => Ok(()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let task = match state {
            CallState::Dial(state) => state.dial.take(),
            CallState::Answered { run, .. } => run.take(),
        };
        if let Some(task) = task {
            task.abort();
        }
        Ok(())
    }
}

/// Runs `work` on a task of its own and tells `actor` how it ended: `done` of its result, or
/// [`CallMsg::Crashed`] if it panicked. The returned watcher aborts the work when aborted.
fn watch<T: Send + 'static>(
    actor: ActorRef<CallMsg>,
    work: impl std::future::Future<Output = T> + Send + 'static,
    done: impl FnOnce(T) -> CallMsg + Send + 'static,
) -> JoinHandle<()> {
    let work = AbortOnDrop(tokio::spawn(work));
    tokio::spawn(async move {
        let msg = match work.join().await {
            Ok(result) => done(result),
            Err(error) => CallMsg::Crashed {
                error: error.to_string(),
            },
        };
        let _ = actor.cast(msg);
    })
}

/// Starts an outbound call: marks it `dialing` and has the dialer place it on a task of its
/// own.
async fn dial(myself: ActorRef<CallMsg>, state: &mut DialState) -> Result<(), ActorProcessingErr> {
    let shared = state.shared.clone();
    let spec = &state.spec;
    let now = shared.clock.now();
    // Committed before the dial (by the admission, or here): after a crash this call is
    // reconciled, never redialled.
    if state.placed == Placed::Queued && !shared.store.mark_dialing(spec.id, now).await? {
        // Cancelled (or already placed) while it waited in the queue.
        shared.free_slot(spec);
        myself.stop(None);
        return Ok(());
    }
    state.started_at = Some(now);
    // The dial instant as the carrier sees it (the commit above may have taken time).
    let dialled_at = shared.clock.now();
    if let (Some(campaign), Some(contact)) = (spec.campaign_id, spec.contact_id) {
        shared.to_campaign(
            campaign,
            CampaignMsg::CallStarted {
                contact,
                at: dialled_at,
            },
        );
    }
    let request = DialRequest {
        call_id: spec.id,
        workspace_id: spec.workspace_id,
        campaign_id: spec.campaign_id,
        contact_id: spec.contact_id,
        attempt: spec.attempt,
        agent_id: spec.agent_id,
        from_phone_number_id: spec.from_phone_number_id,
        from_number: spec.from_number.clone(),
        to_number: spec.to_number.clone(),
        max_duration_secs: spec.max_duration_secs,
    };
    let dialer = shared.dialer.clone();
    // The answer comes to this mailbox before the dial's result (it is sent first, from the
    // same task), so it is recorded before the end.
    let answers = myself.clone();
    let rings = myself.clone();
    let progress = DialProgress::new(
        move || {
            let _ = rings.cast(CallMsg::Ringing);
        },
        move |recorded| {
            let _ = answers.cast(CallMsg::Answered { recorded });
        },
    )
    .with_owner(myself.get_cell());
    // The dial runs on its own task so that a panic inside it (a bug in a call) ends this
    // call alone: the watcher turns it into a failure of this actor.
    state.dial = Some(watch(
        myself,
        async move { dialer.dial(request, progress).await },
        |result| CallMsg::Dialled {
            result: Box::new(result),
        },
    ));
    Ok(())
}

/// What an outbound call's actor hears: its progress (recorded as news), and the dial's
/// result (the end committed, the slot freed).
async fn dialled(
    myself: ActorRef<CallMsg>,
    msg: CallMsg,
    state: &mut DialState,
) -> Result<(), ActorProcessingErr> {
    let result = match msg {
        progress @ (CallMsg::Ringing | CallMsg::Answered { .. }) => {
            let (id, now) = (state.spec.id, state.shared.clock.now());
            let store = &state.shared.store;
            let (what, written, recorded) = match progress {
                CallMsg::Answered { recorded } => {
                    ("answer", store.call_answered(id, now).await, recorded)
                }
                _ => ("ringing", store.call_ringing(id, now).await, None),
            };
            if let Some(recorded) = recorded {
                let _ = recorded.send(());
            }
            // News, not a step the call depends on: a failed write is logged and the call
            // goes on (its end records the answer again).
            if let Err(error) = written {
                tracing::warn!(call = %id, %error, what, "the call's progress was not recorded");
            }
            return Ok(());
        }
        CallMsg::Dialled { result } => *result,
        CallMsg::Crashed { error } => {
            return Err(format!("the call failed: {error}").into());
        }
        CallMsg::Ran => return Ok(()),
    };
    let shared = state.shared.clone();
    let spec = &state.spec;
    let ended_at = shared.clock.now();
    let started_at = state.started_at.unwrap_or(ended_at);
    let answered_at =
        (result.talk_secs > 0).then(|| started_at + chrono::Duration::seconds(result.ring_secs));
    let end = CallEnd {
        outcome: result.outcome,
        started_at: Some(started_at),
        answered_at,
        ended_at,
        billable_secs: result.talk_secs,
        cost_cents: shared
            .config
            .outbound_cents_per_minute
            .per_minute_for(result.talk_secs),
        end_reason: result.end_reason,
        disposition_label: result.disposition_label,
        network: result.network,
        conversation: result.conversation,
    };
    if let (Some(campaign), Some(contact)) = (spec.campaign_id, spec.contact_id) {
        // The contact actor commits the end with the attempt's next step, in one
        // transaction; if nobody takes the end, it is committed here and reported again.
        let (done, committed) = tokio::sync::oneshot::channel();
        shared.to_campaign(
            campaign,
            CampaignMsg::CallFinished {
                contact,
                call: spec.id,
                end: Box::new(end.clone()),
                handover: Some(Box::new(EndHandover {
                    spec: spec.clone(),
                    done,
                })),
                counted: false,
            },
        );
        if committed.await.is_err() {
            shared.store.finish_call(spec, &end).await?;
            shared.report_end(spec, end, true);
        }
    } else {
        shared.store.finish_call(spec, &end).await?;
    }
    shared.free_slot(spec);
    myself.stop(None);
    Ok(())
}
