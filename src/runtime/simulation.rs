//! A run of the real engine and store against the simulated carrier under tokio's paused clock:
//! days of campaign time pass in seconds. Used by the `switchboard-bench campaign-sim`
//! benchmark and the engine's tests. Set-up goes straight through the store.
//!
//! Create a [`VirtualRun`] inside a current-thread tokio runtime whose clock is not yet paused;
//! it opens the store in real time, then pauses the clock (see [`Store::open_virtual`]).

use std::sync::Arc;

use anyhow::Context;
use std::time::Duration;

use crate::domain::auth::Scopes;
use crate::runtime::engine::{EnginePort, FaultHook};
use crate::store::{
    Agent, CallFilter, CallRecord, CampaignRecord, CampaignSettings, Contact, LedgerKind,
    NewContact, Page, StatusChange, Store,
};
use chrono::{DateTime, Utc};
use switchboard_actors::campaign::{AuditEvent, CampaignStatus, NumberStatus};
use switchboard_actors::clock::{SharedClock, TimeHold, TokioClock};
use switchboard_actors::engine::{Engine, EngineConfig};
use switchboard_actors::ids::{AgentId, ApiKeyId, CampaignId, PhoneNumberId, WorkspaceId};
use switchboard_actors::money::Cents;
use switchboard_actors::phone::PhoneNumber;
use switchboard_actors::ports::{Dialer, TrunkLimits};
use switchboard_actors::sim::{SecondsRange, SimCarrier, SimConfig};
use switchboard_actors::window::CallingWindow;

pub struct VirtualRun {
    pub store: Store,
    pub engine: Engine,
    pub carrier: Arc<SimCarrier>,
    pub clock: SharedClock,
    pub ws: WorkspaceId,
    pub agent: AgentId,
    pub number: PhoneNumberId,
    pub key: ApiKeyId,
    pub config: EngineConfig,
    pub sim: SimConfig,
    pub hold: Arc<TimeHold>,
    /// Faults the next engine start (see [`VirtualRun::restart`]) injects into store operations.
    pub faults: Option<FaultHook>,
    /// What the engine dials through, made from the simulated carrier at each start.
    dialer: DialerWrap,
}

/// Makes the engine's dialer from the simulated carrier (a test wraps it to watch the dials).
pub type DialerWrap = Arc<dyn Fn(Arc<SimCarrier>) -> Arc<dyn Dialer> + Send + Sync>;

/// A window open all day every day in `zone`.
pub fn all_day(zone: &str) -> CallingWindow {
    hours(zone, "00:00", "24:00", false)
}

/// A window open every day from `start` to `end` (`HH:MM`) in `zone`; panics on a malformed one.
pub fn hours(zone: &str, start: &str, end: &str, use_contact_timezone: bool) -> CallingWindow {
    CallingWindow::from_json(
        &serde_json::json!({"timezone": zone, "start": start, "end": end,
        "use_contact_timezone": use_contact_timezone}),
    )
    .expect("window")
}

impl VirtualRun {
    /// Opens the store at `db_url`, pauses the clock at `start` and starts the engine with a
    /// workspace (credited), an agent (600 s cap) and an active number ready.
    pub async fn new(
        db_url: &str,
        start: DateTime<Utc>,
        mix: &str,
        tune: impl FnOnce(&mut EngineConfig, &mut SimConfig),
    ) -> anyhow::Result<Self> {
        let carrier_itself: DialerWrap = Arc::new(|carrier| carrier);
        Self::with_dialer(db_url, start, mix, tune, carrier_itself).await
    }

    /// As [`VirtualRun::new`], with the engine dialling through what `dialer` makes of the
    /// simulated carrier.
    pub async fn with_dialer(
        db_url: &str,
        start: DateTime<Utc>,
        mix: &str,
        tune: impl FnOnce(&mut EngineConfig, &mut SimConfig),
        dialer: DialerWrap,
    ) -> anyhow::Result<Self> {
        let clock: SharedClock = Arc::new(TokioClock::starting_at(start));
        let store = Store::open_virtual(db_url, clock.clone())
            .await
            .context("store")?;
        // From here on, time only moves when every task waits (see `Store::open_virtual`),
        // and never while a query runs.
        tokio::time::pause();
        let hold = Arc::new(TimeHold::default());
        tokio::spawn(hold.clone().run());
        let setup = hold.enter();
        let ws = store
            .create_workspace("simulation", "IL")
            .await
            .context("ws")?;
        store
            .apply_ledger_entry(
                ws.id,
                10_000_000,
                LedgerKind::Credit,
                "simulation credit",
                None,
            )
            .await
            .context("credit")?;
        let (key, _) = store
            .create_key(ws.id, "simulation", &Scopes::All, None)
            .await
            .context("key")?;
        let mut agent = Agent::new("Simulated agent".into());
        agent.max_call_duration_secs = Some(600);
        let agent = store.create_agent(ws.id, &agent).await.context("agent")?;
        let number = store
            .add_owned_number(
                ws.id,
                &PhoneNumber::from_e164_unchecked("+972501110000".into()),
                NumberStatus::Active,
            )
            .await
            .context("number")?;
        let mut config = EngineConfig {
            seed: Some(11),
            ..EngineConfig::default()
        };
        let mut sim = SimConfig {
            mix: mix.parse().map_err(anyhow::Error::msg)?,
            ring_secs: SecondsRange { min: 5, max: 20 },
            talk_secs: SecondsRange { min: 30, max: 90 },
            seed: 5,
            dial_log: None,
        };
        tune(&mut config, &mut sim);
        let carrier = Arc::new(SimCarrier::new(sim.clone(), clock.clone()).context("carrier")?);
        let engine = start_engine(
            &store,
            dialer(carrier.clone()),
            config.clone(),
            hold.clone(),
            None,
        )
        .await?;
        drop(setup);
        Ok(Self {
            store,
            engine,
            carrier,
            clock,
            ws: ws.id,
            agent: agent.id,
            number: number.id,
            key: key.id,
            config,
            sim,
            hold,
            faults: None,
            dialer,
        })
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// A campaign of this rig's agent and number, open all day in UTC unless tuned.
    pub async fn campaign(&self, tune: impl FnOnce(&mut CampaignSettings)) -> CampaignId {
        let _held = self.hold.enter();
        let mut s = CampaignSettings::defaults(format!("c-{}", uuid::Uuid::now_v7()));
        s.agent_id = Some(self.agent);
        s.from_phone_number_id = Some(self.number);
        s.calling_window = Some(all_day("UTC"));
        s.rules.max_calls_per_day = 100_000;
        tune(&mut s);
        self.store
            .create_campaign(self.ws, &s, self.key)
            .await
            .expect("campaign")
            .id
    }

    /// Enrolls `n` Israeli mobile numbers (with an optional time zone each).
    pub async fn enroll(&self, c: CampaignId, n: usize, timezone: Option<&str>) {
        const CHUNK: usize = 50_000;
        let _held = self.hold.enter();
        for first in (0..n).step_by(CHUNK) {
            let contacts: Vec<NewContact> = (first..n.min(first + CHUNK))
                .map(|i| NewContact {
                    // Israeli mobile numbers: up to 8,999,999 distinct ones.
                    phone_number: format!("+9725{:08}", 21_000_000 + i),
                    timezone: timezone.map(str::to_owned),
                    lead_id: None,
                    variables: serde_json::json!({}),
                    metadata: serde_json::json!({}),
                    excluded: None,
                })
                .collect();
            self.store
                .enroll_contacts(self.ws, c, &contacts, self.key)
                .await
                .expect("enroll")
                .expect("the campaign is the run's");
        }
        if self.record(c).await.status != CampaignStatus::Draft {
            self.engine.campaign_changed(c);
        }
    }

    pub async fn launch(&self, c: CampaignId) {
        let _held = self.hold.enter();
        let current = self.record(c).await;
        let to = switchboard_actors::campaign::start_status(
            self.now(),
            current.settings.rules.starts_at,
        );
        let change = StatusChange {
            from: current.status,
            to,
            event: AuditEvent::Launched,
            actor: Some(self.key),
            from_number: Some("+972501110000".into()),
        };
        assert!(
            self.store
                .change_campaign_status(self.ws, c, &change)
                .await
                .expect("launch")
        );
        self.engine.campaign_changed(c);
    }

    pub async fn record(&self, c: CampaignId) -> CampaignRecord {
        let _held = self.hold.enter();
        self.store
            .campaign_any(self.ws, c)
            .await
            .expect("read")
            .expect("campaign exists")
    }

    /// Advances virtual time a minute at a time until `done` holds (panics after `limit`).
    pub async fn run_until(
        &self,
        c: CampaignId,
        limit: Duration,
        done: impl Fn(&CampaignRecord) -> bool,
    ) -> CampaignRecord {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let r = self.record(c).await;
            if done(&r) {
                return r;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "campaign still {} ({:?}) after {limit:?}",
                r.status.as_str(),
                r.last_tick_result
            );
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
    }

    pub async fn run_to(
        &self,
        c: CampaignId,
        status: CampaignStatus,
        limit: Duration,
    ) -> CampaignRecord {
        self.run_until(c, limit, |r| r.status == status).await
    }

    /// Every call of the campaign, oldest first.
    pub async fn calls(&self, c: CampaignId) -> Vec<CallRecord> {
        let _held = self.hold.enter();
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let page = self
                .store
                .list_calls(
                    self.ws,
                    &CallFilter {
                        campaign_id: Some(c),
                        ..CallFilter::default()
                    },
                    Page { limit: 100, offset },
                )
                .await
                .expect("calls");
            let n = page.items.len() as i64;
            all.extend(page.items);
            if n < 100 {
                break;
            }
            offset += 100;
        }
        all.reverse();
        all
    }

    pub async fn contacts(&self, c: CampaignId) -> Vec<Contact> {
        let _held = self.hold.enter();
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let page = self
                .store
                .list_contacts(self.ws, c, None, Page { limit: 100, offset })
                .await
                .expect("contacts");
            let n = page.items.len() as i64;
            all.extend(page.items);
            if n < 100 {
                break;
            }
            offset += 100;
        }
        all
    }

    /// Stops the engine (as a crash would: live calls are cut) and starts a new one on the same
    /// store.
    pub async fn restart(&mut self) {
        let _held = self.hold.enter();
        self.engine.stop().await;
        self.carrier =
            Arc::new(SimCarrier::new(self.sim.clone(), self.clock.clone()).expect("carrier"));
        self.engine = start_engine(
            &self.store,
            (self.dialer)(self.carrier.clone()),
            self.config.clone(),
            self.hold.clone(),
            self.faults.clone(),
        )
        .await
        .expect("engine restarts");
    }
}

async fn start_engine(
    store: &Store,
    dialer: Arc<dyn Dialer>,
    config: EngineConfig,
    hold: Arc<TimeHold>,
    faults: Option<FaultHook>,
) -> anyhow::Result<Engine> {
    let port = Arc::new(EnginePort {
        store: store.clone(),
        payments: Arc::new(crate::domain::payments::LocalPaymentProvider),
        hold: Some(hold),
        faults,
    });
    Ok(Engine::start(port, dialer, store.clock(), config).await?)
}

/// The most calls of `calls` live at one instant, from their dial and end times.
pub fn peak_concurrency(calls: &[CallRecord]) -> usize {
    let mut edges: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for c in calls {
        if let (Some(s), Some(e)) = (c.started_at, c.ended_at) {
            edges.push((s, 1));
            edges.push((e, -1));
        }
    }
    // Ends sort before starts at the same instant: a slot freed can be reused at once.
    edges.sort();
    let (mut live, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        live += d;
        peak = peak.max(live);
    }
    peak as usize
}

/// The smallest gap between consecutive dials, in seconds.
pub fn min_dial_gap(calls: &[CallRecord]) -> Option<i64> {
    let mut starts: Vec<DateTime<Utc>> = calls.iter().filter_map(|c| c.started_at).collect();
    starts.sort();
    starts.windows(2).map(|w| (w[1] - w[0]).num_seconds()).min()
}

impl VirtualRun {
    /// Queues a direct call as `POST /calls` does.
    pub async fn direct_call(&self, to: &str, priority: i64) -> switchboard_actors::ids::CallId {
        self.direct_call_on(to, priority, None).await
    }

    /// Queues a direct call carried by a trunk with `trunk`'s caps.
    pub async fn direct_call_on(
        &self,
        to: &str,
        priority: i64,
        trunk: Option<TrunkLimits>,
    ) -> switchboard_actors::ids::CallId {
        let _held = self.hold.enter();
        let spec = switchboard_actors::ports::CallSpec {
            id: switchboard_actors::ids::CallId::new(),
            workspace_id: self.ws,
            campaign_id: None,
            contact_id: None,
            agent_id: self.agent,
            from_phone_number_id: Some(self.number),
            from_number: "+972501110000".into(),
            to_number: to.into(),
            priority,
            attempt: 1,
            max_duration_secs: 600,
            reserved_cents: Cents::new(100),
            queued_at: self.now(),
            trunk,
        };
        let new = crate::store::NewCall {
            spec: spec.clone(),
            metadata: serde_json::json!({}),
            variables: serde_json::json!({}),
            idempotency_key: None,
            request_hash: None,
            ring_timeout_secs: None,
        };
        match self.store.create_call(&new).await.expect("call") {
            crate::store::CallInsert::Created(_) => {}
            other => panic!("call not created: {other:?}"),
        }
        self.engine.call_queued(spec.clone());
        spec.id
    }

    /// Every call of the workspace, oldest first.
    pub async fn all_calls(&self) -> Vec<CallRecord> {
        let _held = self.hold.enter();
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let page = self
                .store
                .list_calls(self.ws, &CallFilter::default(), Page { limit: 100, offset })
                .await
                .expect("calls");
            let n = page.items.len() as i64;
            all.extend(page.items);
            if n < 100 {
                break;
            }
            offset += 100;
        }
        all.reverse();
        all
    }

    pub async fn set_balance(&self, cents: i64) {
        let _held = self.hold.enter();
        let now = self
            .store
            .billing_account(self.ws)
            .await
            .expect("account")
            .expect("workspace")
            .balance_cents;
        self.store
            .apply_ledger_entry(
                self.ws,
                cents - now,
                LedgerKind::Adjustment,
                "simulation balance",
                None,
            )
            .await
            .expect("adjust");
    }

    pub async fn events(&self, c: CampaignId) -> Vec<(String, Option<String>)> {
        let _held = self.hold.enter();
        self.store
            .campaign_events(
                self.ws,
                c,
                Page {
                    limit: 100,
                    offset: 0,
                },
            )
            .await
            .expect("events")
            .items
            .into_iter()
            .map(|e| (e.kind.as_str().to_owned(), e.message))
            .collect()
    }

    /// Changes settings as PATCH does.
    pub async fn patch(&self, c: CampaignId, tune: impl FnOnce(&mut CampaignSettings)) {
        let _held = self.hold.enter();
        let current = self.record(c).await;
        let mut s = current.settings.clone();
        tune(&mut s);
        assert!(
            self.store
                .update_campaign_settings(self.ws, c, current.status, &s, &["test"], self.key)
                .await
                .expect("patch")
        );
        self.engine.campaign_changed(c);
    }

    /// Applies an API command's status change (pause, stop, archive, resume).
    pub async fn command(&self, c: CampaignId, to: CampaignStatus) {
        let _held = self.hold.enter();
        let current = self.record(c).await;
        let change = StatusChange {
            from: current.status,
            to,
            event: AuditEvent::of_command(to),
            actor: Some(self.key),
            from_number: None,
        };
        assert!(
            self.store
                .change_campaign_status(self.ws, c, &change)
                .await
                .expect("command")
        );
        self.engine.campaign_changed(c);
    }
}
