//! Wiring of the campaign engine (`switchboard-actors`) into the service: the store port backed
//! by [`Store`], the carrier chosen in [`Config`], and start-up.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use switchboard_actors::call::EndReason;
use switchboard_actors::campaign::CampaignStatus;
use switchboard_actors::clock::TimeHold;
use switchboard_actors::contact::{CallOutcome, ExclusionReason};
use switchboard_actors::engine::{Engine, EngineConfig};
use switchboard_actors::ids::{AgentId, CallId, CampaignId, ContactId, DispositionId, WorkspaceId};
use switchboard_actors::ports::{
    Admission, AdmitResult, CallEnd, CallSpec, ContactCounts, DialProgress, DialRequest,
    DialResult, Dialer, DueScan, EngineCampaign, EngineStore, Funds, OpenAttempt, PortError,
    PortResult, Settlement, TickRecord,
};
use switchboard_actors::sim::SimCarrier;
use switchboard_actors::sip_dialer::{DEFAULT_RESPONSE_TIMEOUT, SipDialer};

use crate::config::{Carrier, Config};
use crate::domain::payments::PaymentProvider;
use crate::store::{DispositionSet, DispositionSource, Store, StoreError};

/// The engine's store port over [`Store`]; a call's charge is followed by auto top-up.
pub struct EnginePort {
    pub store: Store,
    pub payments: Arc<dyn PaymentProvider>,
    /// Set under a paused clock: virtual time stands still while a query runs.
    pub hold: Option<Arc<TimeHold>>,
    /// Resilience tests: an operation (by name, e.g. `due_contacts`) for which this answers
    /// `true` fails as if the database had.
    pub faults: Option<FaultHook>,
}

/// Decides, per store operation, whether to fail it (fault injection).
pub type FaultHook = Arc<dyn Fn(&str) -> bool + Send + Sync>;

impl EnginePort {
    async fn held<T>(&self, work: impl std::future::Future<Output = T>) -> T {
        let _guard = self.hold.as_ref().map(|h| h.enter());
        work.await
    }

    /// A call's charge took the balance below the auto top-up threshold: top up.
    async fn after_charge(&self, workspace: WorkspaceId, low: bool) {
        if !low {
            return;
        }
        if let Err(err) = self
            .held(crate::runtime::charges::auto_topup(
                &self.store,
                self.payments.as_ref(),
                workspace,
            ))
            .await
        {
            tracing::warn!(%workspace, error = %err, "auto top-up failed");
        }
    }

    /// Runs one store operation for the engine (failing it instead when a fault is injected).
    async fn query<T>(
        &self,
        op: &'static str,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> PortResult<T> {
        self.injected(op)?;
        self.held(work)
            .await
            .map_err(|err| PortError::failed(op, err))
    }

    /// Runs a store operation that ends a call as [`EnginePort::query`] does, tried again
    /// while the database cannot be reached (see [`crate::runtime::retry`]); virtual time moves
    /// on between the tries.
    async fn ending<T, Fut>(&self, op: &'static str, work: impl FnMut() -> Fut) -> PortResult<T>
    where
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        self.injected(op)?;
        let mut work = work;
        crate::runtime::retry::until_reachable(op, || self.held(work()))
            .await
            .map_err(|err| PortError::failed(op, err))
    }

    /// Fails `op` when a fault is injected for it.
    fn injected(&self, op: &'static str) -> PortResult<()> {
        match &self.faults {
            Some(faults) if faults(op) => Err(PortError::Injected { operation: op }),
            _ => Ok(()),
        }
    }
}

/// The operation's name for fault injection: one that also ends a call fails as `finish_call`
/// does.
fn ending_op(op: &'static str, ending: Option<(&CallSpec, &CallEnd)>) -> &'static str {
    if ending.is_some() { "finish_call" } else { op }
}

#[async_trait::async_trait]
// Reads by id alone: the engine acts for every workspace, its ids come from the store itself
// (never from a client), and the `EngineStore` port carries no workspace.
impl EngineStore for EnginePort {
    async fn live_campaigns(&self) -> PortResult<Vec<CampaignId>> {
        self.query("live_campaigns", self.store.live_campaigns())
            .await
    }
    async fn campaign(&self, id: CampaignId) -> PortResult<Option<EngineCampaign>> {
        self.query("engine_campaign", self.store.engine_campaign(id))
            .await
    }
    async fn contact_counts(&self, id: CampaignId) -> PortResult<ContactCounts> {
        self.query("contact_counts", self.store.contact_counts(id))
            .await
    }
    async fn due_contacts(
        &self,
        id: CampaignId,
        agent: Option<AgentId>,
        now: DateTime<Utc>,
        limit: i64,
    ) -> PortResult<DueScan> {
        self.query(
            "due_contacts",
            self.store.due_contacts(id, agent, now, limit),
        )
        .await
    }
    async fn defer_contacts(
        &self,
        deferrals: &[(ContactId, DateTime<Utc>)],
        now: DateTime<Utc>,
    ) -> PortResult<()> {
        self.query("defer_contacts", self.store.defer_contacts(deferrals, now))
            .await
    }
    async fn exclude_contact(
        &self,
        id: ContactId,
        reason: ExclusionReason,
        now: DateTime<Utc>,
    ) -> PortResult<bool> {
        self.query(
            "exclude_contact",
            self.store.exclude_contact(id, reason, now),
        )
        .await
    }
    async fn funds(&self, ws: WorkspaceId) -> PortResult<Funds> {
        self.query("funds", self.store.funds(ws)).await
    }
    async fn admit(&self, admission: &Admission) -> PortResult<AdmitResult> {
        self.query("admit", self.store.admit(admission)).await
    }
    async fn record_tick(&self, id: CampaignId, tick: &TickRecord) -> PortResult<()> {
        self.query("record_tick", self.store.record_tick(id, tick))
            .await
    }
    async fn engine_transition(
        &self,
        id: CampaignId,
        from: CampaignStatus,
        to: CampaignStatus,
        reason: &str,
        tick: Option<&TickRecord>,
        now: DateTime<Utc>,
    ) -> PortResult<bool> {
        self.query(
            "engine_transition",
            self.store
                .engine_transition(id, from, to, reason, tick, now),
        )
        .await
    }
    async fn open_attempts(&self, id: CampaignId) -> PortResult<Vec<OpenAttempt>> {
        self.query("open_attempts", self.store.open_attempts(id))
            .await
    }
    async fn open_attempt(&self, contact: ContactId) -> PortResult<Option<OpenAttempt>> {
        self.query("open_attempt", self.store.open_attempt(contact))
            .await
    }
    async fn queued_calls(&self) -> PortResult<Vec<CallSpec>> {
        self.query("queued_calls", self.store.queued_calls()).await
    }
    async fn live_calls(&self) -> PortResult<HashMap<WorkspaceId, usize>> {
        self.query("live_calls", self.store.live_calls()).await
    }
    async fn interrupt_live_calls(&self, now: DateTime<Utc>) -> PortResult<u64> {
        self.query("interrupt_live_calls", self.store.interrupt_live_calls(now))
            .await
    }
    async fn mark_dialing(&self, call: CallId, now: DateTime<Utc>) -> PortResult<bool> {
        self.query("mark_dialing", self.store.mark_dialing(call, now))
            .await
    }
    async fn call_answered(&self, call: CallId, now: DateTime<Utc>) -> PortResult<bool> {
        self.query("call_answered", self.store.call_answered(call, now))
            .await
    }
    async fn call_ringing(&self, call: CallId, now: DateTime<Utc>) -> PortResult<bool> {
        self.query("call_ringing", self.store.call_ringing(call, now))
            .await
    }
    async fn finish_call(&self, call: &CallSpec, end: &CallEnd) -> PortResult<()> {
        let low = self
            .ending("finish_call", || self.store.finish_call(call, end))
            .await?;
        self.after_charge(call.workspace_id, low == Some(true))
            .await;
        Ok(())
    }
    async fn cancel_call(
        &self,
        call: &CallSpec,
        reason: EndReason,
        now: DateTime<Utc>,
    ) -> PortResult<bool> {
        self.query("cancel_call", self.store.cancel_call(call, reason, now))
            .await
    }
    async fn redial(&self, call: &CallSpec, contact: ContactId) -> PortResult<bool> {
        self.query("redial", self.store.redial(call, contact)).await
    }
    async fn await_disposition(
        &self,
        contact: ContactId,
        call: CallId,
        now: DateTime<Utc>,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> PortResult<Option<Option<DispositionId>>> {
        let (known, low) = self
            .ending(ending_op("await_disposition", ending), || {
                self.store.await_disposition(contact, call, now, ending)
            })
            .await?;
        if let Some((spec, _)) = ending {
            self.after_charge(spec.workspace_id, low).await;
        }
        Ok(known)
    }
    async fn call_disposition(&self, call: CallId) -> PortResult<Option<DispositionId>> {
        self.query("call_disposition", self.store.call_disposition(call))
            .await
    }
    async fn settle_contact(
        &self,
        settlement: &Settlement,
        ending: Option<(&CallSpec, &CallEnd)>,
    ) -> PortResult<bool> {
        let (applied, low) = self
            .ending(ending_op("settle_contact", ending), || {
                self.store.settle_contact(settlement, ending)
            })
            .await?;
        if let Some((spec, _)) = ending {
            self.after_charge(spec.workspace_id, low).await;
        }
        Ok(applied)
    }
}

/// The dialer of `--carrier none`: nothing can be placed.
pub struct NoCarrier;

#[async_trait::async_trait]
impl Dialer for NoCarrier {
    async fn dial(&self, _request: DialRequest, _progress: DialProgress) -> DialResult {
        DialResult {
            outcome: CallOutcome::InfraError,
            ring_secs: 0,
            talk_secs: 0,
            end_reason: EndReason::NoCarrier,
            disposition_label: None,
            network: Default::default(),
            conversation: Default::default(),
        }
    }
}

/// Lands a disposition on an answered call and, for a campaign call, tells the engine, whose
/// contact waiting for it settles on it (a stop disposition retires the contact). The one path
/// for `POST /calls/{id}/disposition` and the end-of-call analysis. `None`: no such call.
pub async fn land_disposition(
    store: &Store,
    engine: &Engine,
    ws: WorkspaceId,
    call: CallId,
    disposition: DispositionId,
    source: DispositionSource,
) -> Result<Option<DispositionSet>, StoreError> {
    let result = store
        .set_call_disposition(ws, call, disposition, source)
        .await?;
    if let Some(DispositionSet::Set(call)) = &result
        && let Some(campaign) = call.campaign_id
    {
        engine.disposition_landed(campaign, call.id);
    }
    Ok(result)
}

/// The engine's settings from the service's.
pub fn engine_config(config: &Config) -> EngineConfig {
    EngineConfig {
        evaluation_interval: config.evaluation_interval,
        disposition_timeout: config.disposition_timeout,
        outbound_cents_per_minute: config.outbound_cents_per_minute,
        workspace_max_concurrent_calls: config.workspace_max_concurrent_calls,
        node_capacity: config.node_capacity,
        ..EngineConfig::default()
    }
}

/// The dialer `config.carrier` selects; `sip` is the SIP server's client side, when SIP runs.
pub fn dialer(
    config: &Arc<Config>,
    store: &Store,
    sip: Option<(
        &switchboard_sip::outbound::SipClient,
        &tokio_util::sync::CancellationToken,
    )>,
    speech: Arc<dyn switchboard_actors::agent::Speech>,
    vendors: crate::runtime::vendors::Vendors,
) -> anyhow::Result<Arc<dyn Dialer>> {
    let dialer: Arc<dyn Dialer> = match &config.carrier {
        Carrier::None => Arc::new(NoCarrier),
        Carrier::Sim(sim) => Arc::new(SimCarrier::new(sim.clone(), store.clock())?),
        Carrier::Sip => {
            let Some((client, stop)) = sip else {
                anyhow::bail!("--carrier sip needs the SIP server (--sip)");
            };
            let port = Arc::new(crate::runtime::outbound::OutboundPort {
                store: store.clone(),
                config: config.clone(),
                vendors,
            });
            Arc::new(SipDialer {
                client: client.clone(),
                directory: port,
                speech,
                stop: stop.clone(),
                response_timeout: DEFAULT_RESPONSE_TIMEOUT,
                fault: config.call_fault.as_ref().map(|f| f.0.clone()),
            })
        }
    };
    Ok(match &config.dialer_hook {
        Some(hook) => (hook.0)(dialer),
        None => dialer,
    })
}

/// Starts the engine on `store`: reconciles what a previous run left open, then runs every live
/// campaign.
pub async fn start(
    store: &Store,
    payments: Arc<dyn PaymentProvider>,
    dialer: Arc<dyn Dialer>,
    config: EngineConfig,
) -> anyhow::Result<Engine> {
    let port = Arc::new(EnginePort {
        store: store.clone(),
        payments,
        hold: None,
        faults: None,
    });
    Ok(Engine::start(port, dialer, store.clock(), config).await?)
}
