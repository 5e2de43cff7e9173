//! `CallQueue`: the single admission queue for every outbound call, campaign or direct.
//!
//! Ordered by priority (higher first), then FIFO. A call is released only while its workspace
//! has fewer than `workspace_max_concurrent_calls` live calls and the node fewer than
//! `node_capacity`. A campaign call gets the default priority, so it never jumps ahead of a
//! direct call queued before it.
//!
//! An admission may also take a free slot directly ([`super::slots::QueueCore::claim`]) when the
//! workspace has room and none of its calls is waiting: its call is then committed as `dialing`
//! and started at once, which is what the queue would have done with it.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::messages::{CampaignMsg, Placed, QueueMsg, SupervisorMsg};
use super::shared::Shared;
use super::slots::QueueCore;

pub struct QueueArgs {
    pub shared: Arc<Shared>,
    pub supervisor: ActorRef<SupervisorMsg>,
}

pub struct QueueState {
    shared: Arc<Shared>,
    /// Released calls go to the supervisor, which starts their call actors.
    supervisor: ActorRef<SupervisorMsg>,
}

impl QueueState {
    /// Hands every call the queue can release to the supervisor.
    fn dispatch(&self) {
        let config = &self.shared.config;
        let released = self
            .shared
            .queue_core()
            .dispatch(config.workspace_max_concurrent_calls, config.node_capacity);
        for call in released {
            let _ = self.supervisor.cast(SupervisorMsg::Dispatch {
                call,
                placed: Placed::Queued,
            });
        }
    }
}

pub struct CallQueue;

impl Actor for CallQueue {
    type Msg = QueueMsg;
    type State = QueueState;
    type Arguments = QueueArgs;

    /// (Re)builds the queue from the store: the live counts and the queued calls.
    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        QueueArgs { shared, supervisor }: QueueArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let live = shared.store.live_calls().await?;
        let queued = shared.store.queued_calls().await?;
        {
            let mut core = shared.queue_core();
            *core = QueueCore::rebuilt(live, core.stats().peak_live);
            for spec in queued {
                core.push(spec);
            }
        }
        Ok(QueueState { shared, supervisor })
    }

    async fn post_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.dispatch();
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            QueueMsg::Enqueue { call } => state.shared.queue_core().push(call),
            QueueMsg::CallEnded { workspace } => state.shared.queue_core().free_slot(workspace),
            QueueMsg::CancelCampaign { campaign } => {
                let cancelled = state.shared.queue_core().remove_campaign(campaign);
                let now = state.shared.clock.now();
                for spec in cancelled {
                    if state
                        .shared
                        .store
                        .cancel_call(&spec, "campaign_closed", now)
                        .await?
                        && let Some(contact) = spec.contact_id
                    {
                        state.shared.to_campaign(
                            campaign,
                            CampaignMsg::CallCancelled {
                                contact,
                                call: spec.id,
                            },
                        );
                    }
                }
            }
        }
        state.dispatch();
        Ok(())
    }
}
