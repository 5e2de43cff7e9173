//! `EngineSupervisor`: owns the call queue, the campaign actors and the call actors, and
//! restarts a failed child from persisted state (policy in the module docs of `engine`).

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::time::Instant;

use super::call::{CallActor, CallArgs};
use super::campaign::{CampaignActor, CampaignArgs};
use super::contact::{ContactActor, ContactArgs};
use super::messages::{AttemptStart, BootError, CampaignMsg, SupervisorMsg};
use super::queue::{CallQueue, QueueArgs};
use super::shared::{Shared, SpawningContact};
use crate::call::EndReason;
use crate::campaign::CampaignStatus;
use crate::contact::CallOutcome;
use crate::ids::CampaignId;
use crate::inbound::InboundFacts;
use crate::money::Cents;
use crate::ports::{CallEnd, CallSpec};

/// Starts a contact actor under its campaign (installed in [`Shared`] as its `ContactSpawner`):
/// the campaign supervises its contacts and re-activates a failed one from the store.
pub(super) fn spawn_contact(
    shared: Arc<Shared>,
    start: AttemptStart,
    campaign: ActorCell,
) -> SpawningContact {
    Box::pin(async move {
        let (actor, _) =
            Actor::spawn_linked(None, ContactActor, ContactArgs { shared, start }, campaign)
                .await?;
        Ok(actor)
    })
}

/// What a child of the supervisor is, to decide what its failure means.
enum Child {
    Queue,
    Campaign(CampaignId),
    Call(Box<CallSpec>),
    Inbound(Box<InboundFacts>),
}

pub struct SupervisorState {
    shared: Arc<Shared>,
    children: HashMap<ActorId, Child>,
    /// When each campaign's actor was rebuilt within the restart window: past
    /// `restart_limit` of them the campaign is paused instead of rebuilt again.
    restarts: HashMap<CampaignId, Vec<Instant>>,
}

pub struct EngineSupervisor;

impl EngineSupervisor {
    async fn spawn_queue(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (queue, _) = Actor::spawn_linked(
            None,
            CallQueue,
            QueueArgs {
                shared: state.shared.clone(),
                supervisor: myself.clone(),
            },
            myself.get_cell(),
        )
        .await?;
        state.children.insert(queue.get_id(), Child::Queue);
        state.shared.set_queue(Some(queue));
        Ok(())
    }

    async fn spawn_campaign(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        id: CampaignId,
    ) -> Result<ActorRef<CampaignMsg>, ActorProcessingErr> {
        if let Some(actor) = state.shared.campaign(id) {
            return Ok(actor);
        }
        let (actor, _) = Actor::spawn_linked(
            None,
            CampaignActor,
            CampaignArgs {
                shared: state.shared.clone(),
                id,
            },
            myself.get_cell(),
        )
        .await?;
        state.children.insert(actor.get_id(), Child::Campaign(id));
        state.shared.register_campaign(id, actor.clone());
        Ok(actor)
    }

    async fn boot(
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), BootError> {
        let now = state.shared.clock.now();
        let interrupted = state.shared.store.interrupt_live_calls(now).await?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "calls live at the last stop were ended as interrupted"
            );
        }
        Self::spawn_queue(myself, state)
            .await
            .map_err(|e| BootError::Spawn {
                actor: "call queue",
                reason: e.to_string(),
            })?;
        for id in state.shared.store.live_campaigns().await? {
            Self::spawn_campaign(myself, state, id)
                .await
                .map_err(|e| BootError::Spawn {
                    actor: "campaign actor",
                    reason: e.to_string(),
                })?;
        }
        Ok(())
    }

    /// Whether the campaign may be restarted once more within the restart window.
    fn may_restart(state: &mut SupervisorState, id: CampaignId) -> bool {
        let now = Instant::now();
        let window = state.shared.config.restart_window;
        let limit = state.shared.config.restart_limit as usize;
        let times = state.restarts.entry(id).or_default();
        times.retain(|t| now.duration_since(*t) < window);
        if times.len() >= limit {
            return false;
        }
        times.push(now);
        true
    }
}

impl Actor for EngineSupervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        shared: Arc<Shared>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            shared,
            children: HashMap::new(),
            restarts: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Boot { reply } => {
                // The caller learns why; a supervisor that could not boot stops.
                let booted = Self::boot(&myself, state).await;
                let failed = booted.is_err();
                let _ = reply.send(booted);
                if failed {
                    myself.stop(Some("the engine could not start".into()));
                }
            }
            SupervisorMsg::ToQueue { msg } => {
                if state.shared.queue().is_none() {
                    Self::spawn_queue(&myself, state).await?;
                }
                state.shared.to_queue(msg);
            }
            SupervisorMsg::Ensure { campaign, then } => {
                let actor = Self::spawn_campaign(&myself, state, campaign).await?;
                if let Some(msg) = then {
                    let _ = actor.cast(msg);
                }
            }
            SupervisorMsg::Dispatch { call: spec, placed } => {
                match Actor::spawn_linked(
                    None,
                    CallActor,
                    CallArgs::Dial {
                        shared: state.shared.clone(),
                        spec: Box::new(spec.clone()),
                        placed,
                    },
                    myself.get_cell(),
                )
                .await
                {
                    Ok((actor, _)) => {
                        state
                            .children
                            .insert(actor.get_id(), Child::Call(Box::new(spec)));
                    }
                    Err(err) => {
                        tracing::error!(call = %spec.id, error = %err, "could not start a call actor");
                        interrupt(&state.shared, &spec).await;
                        state.shared.free_slot(&spec);
                    }
                }
            }
            SupervisorMsg::Answer { call } => {
                let facts = call.facts();
                let started = Actor::spawn_linked(
                    None,
                    CallActor,
                    CallArgs::Answered(call),
                    myself.get_cell(),
                )
                .await;
                match started {
                    Ok((actor, _)) => {
                        let child = Child::Inbound(Box::new(facts));
                        state.children.insert(actor.get_id(), child);
                    }
                    Err(err) => {
                        // The call went down with the actor that could not start (its dialog
                        // is BYEd as it is dropped); its record ends here.
                        tracing::error!(call = %facts.id, error = %err, "could not start a call actor");
                        // On a task of its own: a store that fails is retried there, and the
                        // supervisor goes on with its other calls.
                        tokio::spawn(async move { facts.interrupted().await });
                    }
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
            SupervisionEvent::ActorTerminated(cell, _, _) => {
                match state.children.remove(&cell.get_id()) {
                    Some(Child::Campaign(id)) => {
                        state.shared.unregister_campaign(id, cell.get_id())
                    }
                    Some(Child::Queue) => {
                        state.shared.set_queue(None);
                    }
                    _ => {}
                }
            }
            SupervisionEvent::ActorFailed(cell, err) => match state.children.remove(&cell.get_id())
            {
                Some(Child::Campaign(id)) => {
                    state.shared.unregister_campaign(id, cell.get_id());
                    cell.stop_children(Some("campaign restarting".into()));
                    if Self::may_restart(state, id) {
                        tracing::warn!(campaign = %id, error = %err, "campaign actor failed; rebuilding it from the store");
                        Self::spawn_campaign(&myself, state, id).await?;
                    } else {
                        tracing::error!(campaign = %id, error = %err, "campaign actor keeps failing; pausing the campaign");
                        let now = state.shared.clock.now();
                        let reason = format!("engine_error: {err}");
                        for from in [CampaignStatus::Running, CampaignStatus::Scheduled] {
                            if state
                                .shared
                                .store
                                .engine_transition(
                                    id,
                                    from,
                                    CampaignStatus::PausedInfra,
                                    &reason,
                                    None,
                                    now,
                                )
                                .await?
                            {
                                break;
                            }
                        }
                    }
                }
                Some(Child::Queue) => {
                    tracing::error!(error = %err, "call queue failed; rebuilding it from the store");
                    state.shared.set_queue(None);
                    Self::spawn_queue(&myself, state).await?;
                }
                Some(Child::Call(spec)) => {
                    tracing::error!(call = %spec.id, error = %err, "call actor failed; the call is ended as interrupted");
                    interrupt(&state.shared, &spec).await;
                    state.shared.free_slot(&spec);
                }
                Some(Child::Inbound(facts)) => {
                    tracing::error!(call = %facts.id, error = %err, "call actor failed; the call is ended as interrupted");
                    tokio::spawn(async move { facts.interrupted().await });
                }
                None => {}
            },
            _ => {}
        }
        Ok(())
    }
}

/// Ends a call whose actor is gone as interrupted, and tells its campaign.
async fn interrupt(shared: &Shared, spec: &CallSpec) {
    let end = CallEnd {
        outcome: CallOutcome::InfraError,
        started_at: None,
        answered_at: None,
        ended_at: shared.clock.now(),
        billable_secs: 0,
        cost_cents: Cents::ZERO,
        end_reason: EndReason::Interrupted,
        disposition_label: None,
        network: Default::default(),
        conversation: Default::default(),
    };
    if let Err(err) = shared.store.finish_call(spec, &end).await {
        tracing::error!(call = %spec.id, error = %err, "could not end an interrupted call; the next start will");
        return;
    }
    shared.report_end(spec, end, false);
}
