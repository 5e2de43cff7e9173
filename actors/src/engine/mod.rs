//! The campaign engine: supervised actors that admit contacts, queue calls and settle them.
//!
//! ```text
//! EngineSupervisor ─┬─ CallQueue           (one; priority then FIFO, per-workspace and node limits)
//!                   ├─ CampaignActor × N   (one per launched, non-terminal campaign)
//!                   │     └─ ContactActor × in-flight   (virtual: one per open attempt)
//!                   └─ CallActor × live calls            (one per call, placed through the Dialer)
//! ```
//!
//! Data flow: a campaign evaluation admits a contact by committing the attempt and its call in
//! one transaction, then activates a `ContactActor`, which hands the call to the `CallQueue`.
//! `POST /calls` commits a `queued` call and hands it to the same queue. The queue asks the
//! supervisor to start a `CallActor` when the workspace and the node have room; the call actor
//! marks the call `dialing` and dials. When the workspace has a free slot and none of its calls
//! waits, the admission takes the slot itself: the call is committed as `dialing` with the
//! attempt and its actor starts at once (the queue's order is unchanged: a claim never passes a
//! waiting call).
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
//! - `CallQueue` failure: rebuilt from the store (queued calls, live counts).
//! - `CallActor` failure: its call is ended as `infra_error` (`interrupted`) and never redialled
//!   by the engine; the contact's next attempt follows the campaign's rules.
//! - Process crash: at start every `dialing` call is ended as interrupted, `queued` calls are
//!   queued again, and each live campaign rebuilds its open attempts from the store.

mod call;
mod campaign;
mod contact;
mod queue;
mod supervisor;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorRef};

use crate::clock::SharedClock;
use crate::ids::{CallId, CampaignId, WorkspaceId};
use crate::ports::{self, CallSpec, Dialer, EngineStore};

pub use campaign::CampaignMsg;

/// A campaign call's end, handed by its call actor to the contact actor, which commits it in one
/// transaction with the attempt's next step (settlement, or the wait for a disposition) and then
/// answers `done`. If the handover is dropped unanswered, the call actor commits the end itself
/// and reports it again without a handover.
pub struct EndHandover {
    pub(crate) spec: CallSpec,
    pub(crate) done: tokio::sync::oneshot::Sender<()>,
}

/// A pending `send_after` of an actor.
pub(crate) type Timer<M> = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<M>>>;
pub use queue::{QueueMsg, QueueStats};
use supervisor::{EngineSupervisor, SupervisorMsg};

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How often each campaign is evaluated even when nothing happens.
    pub evaluation_interval: Duration,
    /// How long an answered call waits for a disposition before it counts as unclassified.
    pub disposition_timeout: Duration,
    /// Price of one outbound minute, in cents (reservations and costs).
    pub outbound_cents_per_minute: i64,
    /// Calls one workspace may have live at once.
    pub workspace_max_concurrent_calls: usize,
    /// Calls this node places at once, over all workspaces.
    pub node_capacity: usize,
    /// Consecutive carrier-side failures after which a campaign moves to `paused_infra`.
    pub infra_pause_after: u32,
    /// Delay before retrying an attempt that hit an infra error.
    pub infra_retry_delay: Duration,
    /// Contacts read per evaluation to find admissible ones.
    pub scan_batch: i64,
    pub restart_limit: u32,
    pub restart_window: Duration,
    /// Seed of the retry-time randomization (random when `None`).
    pub seed: Option<u64>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            evaluation_interval: Duration::from_secs(60),
            disposition_timeout: Duration::from_secs(300),
            outbound_cents_per_minute: 10,
            workspace_max_concurrent_calls: 10,
            node_capacity: 1000,
            infra_pause_after: 5,
            infra_retry_delay: Duration::from_secs(60),
            scan_batch: 200,
            restart_limit: 5,
            restart_window: Duration::from_secs(600),
            seed: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("engine failed to start: {0}")]
    Start(String),
}

/// Counters of the engine's work, for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct EngineStats {
    evaluations: std::sync::atomic::AtomicU64,
    evaluation_nanos: std::sync::atomic::AtomicU64,
}

impl EngineStats {
    fn record_evaluation(&self, took: Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        self.evaluations.fetch_add(1, Relaxed);
        self.evaluation_nanos
            .fetch_add(u64::try_from(took.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Campaign evaluations so far and the wall time they took in all.
    pub fn evaluations(&self) -> (u64, Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        (
            self.evaluations.load(Relaxed),
            Duration::from_nanos(self.evaluation_nanos.load(Relaxed)),
        )
    }
}

/// What every engine actor shares: the ports, the clock and the routing table.
#[doc(hidden)]
pub struct Shared {
    pub store: Arc<dyn EngineStore>,
    pub dialer: Arc<dyn Dialer>,
    pub clock: SharedClock,
    pub config: EngineConfig,
    pub stats: EngineStats,
    campaigns: Mutex<HashMap<CampaignId, ActorRef<CampaignMsg>>>,
    queue: Mutex<Option<ActorRef<QueueMsg>>>,
    queue_core: Mutex<queue::QueueCore>,
    supervisor: Mutex<Option<ActorRef<SupervisorMsg>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Shared {
    /// The campaign's actor, if one is running.
    pub fn campaign(&self, id: CampaignId) -> Option<ActorRef<CampaignMsg>> {
        lock(&self.campaigns)
            .get(&id)
            .filter(|a| {
                matches!(
                    a.get_status(),
                    ractor::ActorStatus::Starting | ractor::ActorStatus::Running
                )
            })
            .cloned()
    }

    pub fn register_campaign(&self, id: CampaignId, actor: ActorRef<CampaignMsg>) {
        lock(&self.campaigns).insert(id, actor);
    }

    /// Forgets `id` if it is still routed to `actor`.
    pub fn unregister_campaign(&self, id: CampaignId, actor: ractor::ActorId) {
        let mut map = lock(&self.campaigns);
        if map.get(&id).is_some_and(|a| a.get_id() == actor) {
            map.remove(&id);
        }
    }

    pub fn campaign_ids(&self) -> Vec<(CampaignId, ActorRef<CampaignMsg>)> {
        lock(&self.campaigns)
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    /// Delivers to the campaign's actor, starting it (from the store) when it is not running.
    pub fn to_campaign(&self, id: CampaignId, msg: CampaignMsg) {
        let msg = match self.campaign(id) {
            Some(actor) => match actor.cast(msg) {
                Ok(()) => return,
                Err(ractor::MessagingErr::SendErr(msg)) => msg,
                Err(_) => return,
            },
            None => msg,
        };
        self.to_supervisor(SupervisorMsg::Ensure(id, Some(msg)));
    }

    /// Tells a campaign call's campaign of its committed end (`counted`: the campaign has seen
    /// this end before, in a dropped handover).
    pub(crate) fn report_end(&self, spec: &CallSpec, end: ports::CallEnd, counted: bool) {
        if let (Some(campaign), Some(contact)) = (spec.campaign_id, spec.contact_id) {
            self.to_campaign(
                campaign,
                CampaignMsg::CallFinished {
                    contact,
                    call: spec.id,
                    end,
                    handover: None,
                    counted,
                },
            );
        }
    }

    /// Delivers to the call queue; while it is being restarted, the supervisor delivers once
    /// it is back.
    pub fn to_queue(&self, msg: QueueMsg) {
        let queue = lock(&self.queue).clone();
        let msg = match queue {
            Some(q) => match q.cast(msg) {
                Ok(()) => return,
                Err(ractor::MessagingErr::SendErr(msg)) => msg,
                Err(_) => return,
            },
            None => msg,
        };
        self.to_supervisor(SupervisorMsg::ToQueue(msg));
    }

    pub(crate) fn queue_core(&self) -> std::sync::MutexGuard<'_, queue::QueueCore> {
        lock(&self.queue_core)
    }

    /// Takes a free call slot of the workspace for a call that will be committed as `dialing`
    /// (see [`queue::QueueCore::claim`]); give it back with [`QueueMsg::CallEnded`] if the
    /// call is not committed after all.
    pub(crate) fn claim_slot(&self, ws: WorkspaceId) -> bool {
        self.queue_core().claim(
            ws,
            self.config.workspace_max_concurrent_calls,
            self.config.node_capacity,
        )
    }

    pub fn set_queue(&self, queue: Option<ActorRef<QueueMsg>>) {
        *lock(&self.queue) = queue;
    }

    pub fn queue(&self) -> Option<ActorRef<QueueMsg>> {
        lock(&self.queue).clone()
    }

    pub fn to_supervisor(&self, msg: SupervisorMsg) {
        if let Some(s) = lock(&self.supervisor).clone() {
            let _ = s.cast(msg);
        }
    }
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
        let shared = Arc::new(Shared {
            store,
            dialer,
            clock,
            config,
            stats: EngineStats::default(),
            campaigns: Mutex::new(HashMap::new()),
            queue: Mutex::new(None),
            queue_core: Mutex::new(queue::QueueCore::default()),
            supervisor: Mutex::new(None),
        });
        let (supervisor, _) = Actor::spawn(None, EngineSupervisor, shared.clone())
            .await
            .map_err(|e| EngineError::Start(e.to_string()))?;
        *lock(&shared.supervisor) = Some(supervisor.clone());
        ractor::call!(supervisor, SupervisorMsg::Boot)
            .map_err(|e| EngineError::Start(e.to_string()))?
            .map_err(EngineError::Start)?;
        Ok(Self { shared, supervisor })
    }

    /// A campaign's status, settings or contacts changed through the API: its actor re-reads
    /// them at once (starting if the campaign was just launched).
    pub fn campaign_changed(&self, id: CampaignId) {
        self.shared.to_campaign(id, CampaignMsg::Changed);
    }

    /// A direct call was committed as `queued`: hand it to the call queue.
    pub fn call_queued(&self, call: CallSpec) {
        self.shared.to_queue(QueueMsg::Enqueue(call));
    }

    /// A disposition landed on a campaign call through the API.
    pub fn disposition_landed(&self, campaign: CampaignId, call: CallId) {
        self.shared
            .to_campaign(campaign, CampaignMsg::DispositionLanded { call });
    }

    /// A workspace's balance went up: campaigns paused for credit look again.
    pub fn funds_changed(&self, workspace: WorkspaceId) {
        for (_, actor) in self.shared.campaign_ids() {
            let _ = actor.cast(CampaignMsg::FundsChanged(workspace));
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
