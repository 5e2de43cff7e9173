//! `CallQueue`: the single admission queue for every outbound call, campaign or direct.
//!
//! Ordered by priority (higher first), then FIFO. A call is released only while its workspace
//! has fewer than `workspace_max_concurrent_calls` live calls, the node fewer than
//! `node_capacity`, and its SIP trunk room: fewer live calls than its `max_concurrent` and
//! fewer than `calls_per_second` calls started within the last second. A call waits for room on
//! its trunk, never fails for lack of it, and never holds back its workspace's calls on other
//! trunks. A campaign call gets the default priority, so it never jumps ahead of a direct call
//! queued before it.
//!
//! A call's end wakes the queue; when only a trunk's calls-per-second window holds calls back,
//! the queue wakes itself when the window opens.
//!
//! An admission may also take a free slot directly ([`super::slots::QueueCore::claim`]) when the
//! workspace, the node and the call's trunk have room and no waiting call could take it: its
//! call is then committed as `dialing` and started at once, which is what the queue would have
//! done with it.

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::time::Instant;

use super::messages::{CampaignMsg, Placed, QueueMsg, SupervisorMsg};
use super::shared::{Shared, Timer};
use super::slots::QueueCore;
use crate::call::EndReason;

pub struct QueueArgs {
    pub shared: Arc<Shared>,
    pub supervisor: ActorRef<SupervisorMsg>,
}

pub struct QueueState {
    shared: Arc<Shared>,
    /// Released calls go to the supervisor, which starts their call actors.
    supervisor: ActorRef<SupervisorMsg>,
    /// The pending wake-up for a trunk's calls-per-second window, and when it is due.
    wake: Option<(Instant, Timer<QueueMsg>)>,
}

impl QueueState {
    /// Hands every call the queue can release to the supervisor; when calls wait only for a
    /// trunk's calls-per-second window, wakes the queue when it opens.
    fn dispatch(&mut self, myself: &ActorRef<QueueMsg>) {
        let config = &self.shared.config;
        let released = self.shared.queue_core().dispatch(
            config.workspace_max_concurrent_calls,
            config.node_capacity,
            self.shared.clock.now(),
        );
        for call in released.calls {
            let _ = self.supervisor.cast(SupervisorMsg::Dispatch {
                call,
                placed: Placed::Queued,
            });
        }
        if let Some(wait) = released.window_opens_in {
            self.wake_in(myself, wait);
        }
    }

    /// Sends the queue [`QueueMsg::WindowOpened`] after `wait`, unless a wake-up is already due
    /// by then.
    fn wake_in(&mut self, myself: &ActorRef<QueueMsg>, wait: Duration) {
        let due = Instant::now() + wait;
        if let Some((at, timer)) = &self.wake {
            if *at <= due && !timer.is_finished() {
                return;
            }
            timer.abort();
        }
        let timer = myself.send_after(wait, || QueueMsg::WindowOpened);
        self.wake = Some((due, timer));
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
            let previous = std::mem::take(&mut *core);
            *core = QueueCore::rebuilt(live, previous);
            for spec in queued {
                core.push(spec);
            }
        }
        Ok(QueueState {
            shared,
            supervisor,
            wake: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.dispatch(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, timer)) = state.wake.take() {
            timer.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            QueueMsg::Enqueue { call } => state.shared.queue_core().push(call),
            QueueMsg::CallEnded { workspace } => state.shared.queue_core().free_slot(workspace),
            QueueMsg::WindowOpened => state.wake = None,
            QueueMsg::CancelCampaign { campaign } => {
                let cancelled = state.shared.queue_core().remove_campaign(campaign);
                let now = state.shared.clock.now();
                for spec in cancelled {
                    if state
                        .shared
                        .store
                        .cancel_call(&spec, EndReason::CampaignClosed, now)
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
        state.dispatch(&myself);
        Ok(())
    }
}
