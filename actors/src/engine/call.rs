//! `CallActor`: one per live call. Marks the call `dialing` (unless its admission committed it
//! so), has the dialer place it, records the answer when the dialer reports one, then has the
//! end (outcome, duration, cost) committed: by the contact actor of a campaign call, with the
//! attempt's next step in the same transaction, or here. Then it frees the queue slot.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::task::JoinHandle;

use super::messages::{CallMsg, CampaignMsg, EndHandover, Placed};
use super::shared::Shared;
use crate::ports::{CallEnd, CallSpec, DialProgress, DialRequest};

pub struct CallArgs {
    pub shared: Arc<Shared>,
    pub spec: CallSpec,
    pub placed: Placed,
}

pub struct CallState {
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
        CallArgs {
            shared,
            spec,
            placed,
        }: CallArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(CallState {
            shared,
            spec,
            placed,
            started_at: None,
            dial: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
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
        );
        // The dial runs on its own task so that a panic inside it (a bug in a call) ends this
        // call alone: the watcher turns it into a failure of this actor.
        let dial = AbortOnDrop(tokio::spawn(
            async move { dialer.dial(request, progress).await },
        ));
        state.dial = Some(tokio::spawn(async move {
            let msg = match dial.join().await {
                Ok(result) => CallMsg::Dialled {
                    result: Box::new(result),
                },
                Err(error) => CallMsg::Crashed {
                    error: error.to_string(),
                },
            };
            let _ = myself.cast(msg);
        }));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
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
        };
        let shared = state.shared.clone();
        let spec = &state.spec;
        let ended_at = shared.clock.now();
        let started_at = state.started_at.unwrap_or(ended_at);
        let answered_at = (result.talk_secs > 0)
            .then(|| started_at + chrono::Duration::seconds(result.ring_secs));
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

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(dial) = state.dial.take() {
            dial.abort();
        }
        Ok(())
    }
}
