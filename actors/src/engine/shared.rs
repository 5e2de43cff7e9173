//! What every engine actor shares: the ports, the clock, the settings, the routing table of
//! running campaigns, the call queue's core, and the way to reach the supervisor.
//!
//! Actors reach each other only through [`Shared`] and the messages of [`super::messages`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{ActorCell, ActorRef, SpawnErr};

use super::messages::{AttemptStart, CampaignMsg, ContactMsg, QueueMsg, SupervisorMsg};
use super::slots::QueueCore;
use crate::clock::SharedClock;
use crate::ids::CampaignId;
use crate::money::Cents;
use crate::ports::{self, CallSpec, Dialer, EngineStore};

/// A pending `send_after` of an actor.
pub(crate) type Timer<M> = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<M>>>;

/// Starts a contact actor linked to `parent` (its campaign). It is a function the supervisor
/// module provides, so that a campaign starts contact actors without naming their type.
pub(crate) type ContactSpawner = fn(Arc<Shared>, AttemptStart, ActorCell) -> SpawningContact;

/// A contact actor being started.
pub(crate) type SpawningContact =
    Pin<Box<dyn Future<Output = Result<ActorRef<ContactMsg>, SpawnErr>> + Send>>;

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// How often each campaign is evaluated even when nothing happens.
    pub evaluation_interval: Duration,
    /// How long an answered call waits for a disposition before it counts as unclassified.
    pub disposition_timeout: Duration,
    /// Price of one outbound minute, in cents (reservations and costs).
    pub outbound_cents_per_minute: Cents,
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
    /// How many times a failing campaign actor is rebuilt within `restart_window` before the
    /// campaign is paused (`paused_infra`): a campaign that fails on every start would
    /// otherwise spin.
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
            outbound_cents_per_minute: Cents::new(10),
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

/// Counters of the engine's work, for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct EngineStats {
    evaluations: std::sync::atomic::AtomicU64,
    evaluation_nanos: std::sync::atomic::AtomicU64,
}

impl EngineStats {
    pub(crate) fn record_evaluation(&self, took: Duration) {
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
pub struct Shared {
    pub store: Arc<dyn EngineStore>,
    pub dialer: Arc<dyn Dialer>,
    pub clock: SharedClock,
    pub config: EngineConfig,
    pub stats: EngineStats,
    /// The running campaign actors: messages for a campaign go to its actor, or start one.
    campaigns: Mutex<HashMap<CampaignId, ActorRef<CampaignMsg>>>,
    /// The call queue; `None` while the supervisor rebuilds it (messages then go through the
    /// supervisor, which delivers them once the queue is back).
    queue: Mutex<Option<ActorRef<QueueMsg>>>,
    /// The queue's contents and live counts, behind a lock so that an admission can claim a
    /// free slot without a round trip to the queue actor.
    queue_core: Mutex<QueueCore>,
    /// Set once the supervisor has started.
    supervisor: Mutex<Option<ActorRef<SupervisorMsg>>>,
    spawn_contact: ContactSpawner,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl Shared {
    pub(crate) fn new(
        store: Arc<dyn EngineStore>,
        dialer: Arc<dyn Dialer>,
        clock: SharedClock,
        config: EngineConfig,
        spawn_contact: ContactSpawner,
    ) -> Self {
        Self {
            store,
            dialer,
            clock,
            config,
            stats: EngineStats::default(),
            campaigns: Mutex::new(HashMap::new()),
            queue: Mutex::new(None),
            queue_core: Mutex::new(QueueCore::default()),
            supervisor: Mutex::new(None),
            spawn_contact,
        }
    }

    pub(crate) fn set_supervisor(&self, supervisor: ActorRef<SupervisorMsg>) {
        *lock(&self.supervisor) = Some(supervisor);
    }

    /// Starts a contact actor for `start`, linked to `parent` (its campaign, which supervises
    /// it).
    pub(crate) async fn spawn_contact(
        self: &Arc<Self>,
        start: AttemptStart,
        parent: ActorCell,
    ) -> Result<ActorRef<ContactMsg>, SpawnErr> {
        (self.spawn_contact)(self.clone(), start, parent).await
    }

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
        self.to_supervisor(SupervisorMsg::Ensure {
            campaign: id,
            then: Some(msg),
        });
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
                    end: Box::new(end),
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
        self.to_supervisor(SupervisorMsg::ToQueue { msg });
    }

    pub(crate) fn queue_core(&self) -> std::sync::MutexGuard<'_, QueueCore> {
        lock(&self.queue_core)
    }

    /// Takes a free call slot for `spec`, a call that will be committed as `dialing`: in its
    /// workspace, on the node and on its trunk (see [`QueueCore::claim`]); give it back with
    /// [`Shared::free_slot`] if the call is not committed after all.
    pub(crate) fn claim_slot(&self, spec: &CallSpec) -> bool {
        self.queue_core().claim(
            spec,
            self.config.workspace_max_concurrent_calls,
            self.config.node_capacity,
            self.clock.now(),
        )
    }

    /// A live call ended (or never started): its slots are free. Its trunk's slot is freed in
    /// the queue's core at once (trunk counts live only in memory and outlast a queue rebuild,
    /// so they must not wait in a mailbox a failing queue would drop); its workspace and node
    /// slots through the queue ([`QueueMsg::CallEnded`]), which then releases what fits.
    pub(crate) fn free_slot(&self, spec: &CallSpec) {
        if let Some(trunk) = spec.trunk {
            self.queue_core().free_trunk(trunk.trunk);
        }
        self.to_queue(QueueMsg::CallEnded {
            workspace: spec.workspace_id,
        });
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
