//! The campaign engine: supervised actors that admit contacts, queue calls and settle them.
//!
//! ```text
//! EngineSupervisor ─┬─ CallQueue           (one; priority then FIFO; workspace, node, trunk limits)
//!                   ├─ CampaignActor × N   (one per launched, non-terminal campaign)
//!                   │     └─ ContactActor × in-flight   (virtual: one per open attempt)
//!                   └─ CallActor × live calls            (one per call, placed through the Dialer)
//! ```
//!
//! Data flow: a campaign evaluation admits a contact by committing the attempt and its call in
//! one transaction, then activates a `ContactActor`, which hands the call to the `CallQueue`.
//! `POST /calls` commits a `queued` call and hands it to the same queue. The queue asks the
//! supervisor to start a `CallActor` when the workspace, the node and the call's SIP trunk have
//! room (a trunk's caps: concurrent calls, calls started per second); the call actor marks the
//! call `dialing` and dials. When there is room and no waiting call could take it, the admission
//! takes the slot itself: the call is committed as `dialing` with the attempt and its actor
//! starts at once (the queue's order is unchanged: a claim never passes a waiting call).
//!
//! When a campaign call ends, its actor hands the end to the contact actor (through the
//! campaign), which commits the end (outcome, cost) and the attempt's next step (settlement, or
//! the wait for a disposition) in one transaction, answers the call actor, and stops once the
//! attempt is settled. Nobody acts on an end before it is committed: if the handover is dropped
//! (the contact actor is gone or failed), the call actor commits the end itself and reports it
//! again, and the contact is rebuilt from the store. A direct call's actor commits its own end.
//!
//! Restart policy (written down in ARCHITECTURE.md too):
//! - `CampaignActor` failure: its contact actors are stopped and the campaign is rebuilt from the
//!   store, at most [`EngineConfig::restart_limit`] times per [`EngineConfig::restart_window`];
//!   past that the campaign is moved to `paused_infra` with `last_error` set.
//! - `ContactActor` failure: its campaign re-activates it from the store.
//! - `CallQueue` failure: rebuilt from the store (queued calls, live counts), keeping the
//!   trunks' live counts and calls-per-second windows, which only memory knows.
//! - `CallActor` failure: its call is ended as `infra_error` (`interrupted`) and never redialled
//!   by the engine; the contact's next attempt follows the campaign's rules.
//! - Process crash: at start every live call of this node (and of nodes that are gone) is ended
//!   as interrupted, `queued` calls are queued again, and each live campaign rebuilds its open
//!   attempts from the store.

mod call;
mod campaign;
mod contact;
mod messages;
mod queue;
mod shared;
mod slots;
mod supervisor;

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};

use crate::clock::SharedClock;
use crate::ids::{CallId, CampaignId, WorkspaceId};
use crate::inbound::InboundCall;
use crate::ports::{CallSpec, Dialer, EngineStore};
use messages::{BootError, CampaignMsg, QueueMsg, SupervisorMsg};
use shared::Shared;
use supervisor::EngineSupervisor;

pub use shared::{EngineConfig, EngineStats};
pub use slots::QueueStats;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("engine failed to start: {0}")]
    Start(#[from] BootError),
    #[error("engine failed to start: the supervisor did not answer: {0}")]
    Supervisor(String),
}

/// A handle on the running engine; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
    supervisor: ActorRef<SupervisorMsg>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// Reconciles the store (interrupted calls, queued calls, open attempts) and starts the
    /// supervisor, the call queue and one actor per live campaign.
    pub async fn start(
        store: Arc<dyn EngineStore>,
        dialer: Arc<dyn Dialer>,
        clock: SharedClock,
        config: EngineConfig,
    ) -> Result<Self, EngineError> {
        let shared = Arc::new(Shared::new(
            store,
            dialer,
            clock,
            config,
            supervisor::spawn_contact,
        ));
        let (supervisor, _) = Actor::spawn(None, EngineSupervisor, shared.clone())
            .await
            .map_err(|e| EngineError::Supervisor(e.to_string()))?;
        shared.set_supervisor(supervisor.clone());
        ractor::call!(supervisor, |reply| SupervisorMsg::Boot { reply })
            .map_err(|e| EngineError::Supervisor(e.to_string()))??;
        Ok(Self { shared, supervisor })
    }

    /// A campaign's status, settings or contacts changed through the API: its actor re-reads
    /// them at once (starting if the campaign was just launched).
    pub fn campaign_changed(&self, id: CampaignId) {
        self.shared.to_campaign(id, CampaignMsg::Changed);
    }

    /// A direct call was committed as `queued`: hand it to the call queue.
    pub fn call_queued(&self, call: CallSpec) {
        self.shared.to_queue(QueueMsg::Enqueue { call });
    }

    /// An inbound call was answered: it runs as a call actor under the engine's supervision
    /// (a failure inside it ends it as interrupted), and its `done` is dropped when it is
    /// over. The call comes back if the engine has stopped.
    pub fn answer(&self, call: InboundCall) -> Result<(), Box<InboundCall>> {
        let call = Box::new(call);
        match self.supervisor.cast(SupervisorMsg::Answer { call }) {
            Err(ractor::MessagingErr::SendErr(SupervisorMsg::Answer { call })) => Err(call),
            _ => Ok(()),
        }
    }

    /// A disposition landed on a campaign call through the API.
    pub fn disposition_landed(&self, campaign: CampaignId, call: CallId) {
        self.shared
            .to_campaign(campaign, CampaignMsg::DispositionLanded { call });
    }

    /// A workspace's balance went up: campaigns paused for credit look again.
    pub fn funds_changed(&self, workspace: WorkspaceId) {
        for (_, actor) in self.shared.campaign_ids() {
            let _ = actor.cast(CampaignMsg::FundsChanged { workspace });
        }
    }

    /// Queue depth and live calls, for metrics and the simulator.
    pub fn queue_stats(&self) -> QueueStats {
        self.shared.queue_core().stats()
    }

    /// Counters of the engine's work.
    pub fn stats(&self) -> &EngineStats {
        &self.shared.stats
    }

    /// Campaign actors currently running.
    pub fn running_campaigns(&self) -> usize {
        self.shared.campaign_ids().len()
    }

    /// Stops every actor. Live calls are cut; the next start ends them as interrupted.
    pub async fn stop(&self) {
        let cell = self.supervisor.get_cell();
        cell.stop_children(None);
        let _ = cell.stop_and_wait(None, Some(Duration::from_secs(5))).await;
    }
}
