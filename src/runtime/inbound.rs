//! Inbound SIP calls wired to the store: the router that turns `sip:<slug>@host` into an
//! endpoint, its agent and a call plan (with the lead memory of a trusted caller-ID), and the
//! store port of the inbound call actor.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use switchboard_actors::agent::director::PromptAgent;
use switchboard_actors::agent::{AgentPlan, AmdPlan, Mind, Speech};
use switchboard_actors::clock::SharedClock;
use switchboard_actors::endpoint::{
    Admission, EndpointFacts, EndpointRoute, EndpointStore, Endpoints, Seat,
};
use switchboard_actors::ids::{CallId, SipEndpointId};
use switchboard_actors::inbound::{
    InboundCall, InboundEnd, InboundPlan, InboundStart, InboundStore, run_call,
};
use switchboard_actors::money::Cents;
use switchboard_actors::ports::{PortError, PortResult};
use switchboard_actors::slug::SipSlug;
use switchboard_actors::turns::fill;
use switchboard_sip::acl::{IpNet, SourceFilter};
use switchboard_sip::call::Call;
use switchboard_sip::media::{ListenSettings, VadSettings};
use switchboard_sip::server::{Answer, InboundRouter, Routing};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::domain::payments::PaymentProvider;
use crate::runtime::agent_webhooks::turns::TurnEvents;
use crate::runtime::call_tools::{CallFacts, equip};
use crate::store::{Agent, Store};

/// Where a call's recording lives.
pub fn recording_path(data_dir: &std::path::Path, call: CallId) -> PathBuf {
    data_dir.join("recordings").join(format!("{call}.wav"))
}

/// How `agent` runs a call capped at `max_duration`; `detect` turns on its answering-machine
/// detection (outbound calls), if the agent has it on.
pub fn agent_plan(
    agent: &Agent,
    max_duration: Duration,
    detect: bool,
    vendors: &crate::runtime::vendors::Vendors,
    variables: &serde_json::Map<String, serde_json::Value>,
) -> AgentPlan {
    // Speech to text is what a prompt agent's conversation needs; a flow needs the chat model
    // only at the steps it decides with it, and runs on its keypad without speech to text.
    let flow = agent.agent_type == crate::store::AgentType::Flow;
    let converses = vendors.transcriber.is_some() || flow;
    let mind = converses.then(|| Mind {
        model: vendors.model.clone(),
        transcriber: vendors.transcriber.clone(),
        director: Box::new(PromptAgent {
            system_prompt: fill(&agent.system_prompt, variables),
            temperature: Some(agent.temperature as f32),
        }),
        notes: Vec::new(),
        listen: ListenSettings {
            pause_secs: (agent.vad_stop_secs / 2.0).max(0.2),
            pre_roll_secs: agent.vad_start_secs + 0.3,
            max_secs: agent.max_continuous_speech_secs.max(1) as f64 + 1.0,
        },
        unfinished_grace: Duration::from_secs_f64(agent.vad_stop_secs.clamp(0.0, 1.0)),
        max_continuous_speech: Duration::from_secs(agent.max_continuous_speech_secs.max(1) as u64),
        tools: None,
        integrations: None,
    });
    AgentPlan {
        mind,
        turns: None,
        greeting: fill(&agent.greeting_message, variables),
        agent_speaks_first: agent.agent_speaks_first,
        voice: agent.voice.clone(),
        language: agent.language.clone(),
        silence_timeout: Duration::from_secs(agent.silence_timeout_secs.max(1) as u64),
        max_duration,
        amd: detect
            .then(|| agent.answering_machine_detection.settings())
            .flatten()
            .map(|settings| AmdPlan {
                settings,
                voicemail_message: agent
                    .voicemail_message
                    .as_deref()
                    .map(|m| fill(m, variables)),
                greet_early: agent.answering_machine_detection.greet_early,
            }),
    }
}

/// The voice activity detection `agent` asks for.
pub fn vad_settings(agent: &Agent) -> VadSettings {
    VadSettings {
        start_secs: agent.vad_start_secs,
        stop_secs: agent.vad_stop_secs,
        confidence: agent.vad_confidence,
    }
}

/// The store port of inbound calls; a charge is followed by auto top-up.
pub struct InboundPort {
    pub store: Store,
    pub payments: Arc<dyn PaymentProvider>,
    pub cents_per_minute: Cents,
}

impl InboundPort {
    pub fn new(store: Store, payments: Arc<dyn PaymentProvider>, cents_per_minute: Cents) -> Self {
        InboundPort {
            store,
            payments,
            cents_per_minute,
        }
    }
}

#[async_trait]
impl InboundStore for InboundPort {
    async fn inbound_started(&self, call: &InboundStart) -> PortResult<()> {
        self.store
            .inbound_started(call)
            .await
            .map_err(|e| PortError::failed("inbound_started", e))
    }

    async fn inbound_ended(&self, call: &InboundEnd) -> PortResult<()> {
        let low = crate::runtime::retry::until_reachable("inbound_ended", || {
            self.store.inbound_ended(call, self.cents_per_minute)
        })
        .await
        .map_err(|e| PortError::failed("inbound_ended", e))?;
        if low == Some(true)
            && let Err(err) = crate::runtime::charges::auto_topup(
                &self.store,
                self.payments.as_ref(),
                call.workspace_id,
            )
            .await
        {
            tracing::warn!(workspace = %call.workspace_id, error = %err, "auto top-up failed");
        }
        Ok(())
    }
}

/// A routed inbound call: its plan, and whether the caller-ID may bring the lead memory (the
/// agent has lead memory on and trusts caller-IDs). The lookup runs with the call, which knows
/// the caller.
pub struct RoutedCall {
    pub plan: InboundPlan,
    pub lead_memory: bool,
    /// Its place on its endpoint, held until the call ends.
    pub seat: Seat,
    /// A flow agent, whose flow the call runs once the caller is known.
    pub flow_agent: Option<Box<Agent>>,
}

#[async_trait]
impl EndpointStore for Store {
    async fn endpoint(&self, slug: &str) -> PortResult<Option<EndpointFacts>> {
        let route = self
            .sip_route(slug)
            .await
            .map_err(|e| PortError::failed("sip_route", e))?;
        Ok(route.map(|route| EndpointFacts {
            sources: match &route.allowed_source_ips {
                None => SourceFilter::any(),
                Some(list) => SourceFilter::only(
                    list.iter()
                        .filter_map(|s| s.parse::<IpNet>().ok())
                        .collect(),
                ),
            },
            max_concurrent_calls: route
                .max_concurrent_calls
                .map(|cap| u32::try_from(cap.max(0)).unwrap_or(u32::MAX)),
            route: EndpointRoute {
                id: route.endpoint_id,
                workspace_id: route.workspace_id,
                slug: route.slug,
                agent_id: route.agent_id,
            },
        }))
    }

    async fn last_call(&self, id: SipEndpointId, at: DateTime<Utc>) -> PortResult<()> {
        self.endpoint_last_call(id, at)
            .await
            .map_err(|e| PortError::failed("endpoint_last_call", e))
    }
}

/// Routes INVITEs to endpoints and runs their calls.
pub struct SipRouter {
    pub store: Store,
    pub config: Arc<Config>,
    pub port: Arc<InboundPort>,
    pub speech: Arc<dyn Speech>,
    pub vendors: crate::runtime::vendors::Vendors,
    pub clock: SharedClock,
    pub stop: CancellationToken,
    /// The endpoints' actors, which seat each call.
    pub endpoints: Endpoints,
    /// Calls running now: each holds a token while it runs, so shutdown can wait for them.
    pub live: tokio_util::task::TaskTracker,
    /// The engine its calls run under, once it has started (the SIP server starts first).
    pub engine: Arc<std::sync::OnceLock<switchboard_actors::engine::Engine>>,
}

#[async_trait]
impl InboundRouter for SipRouter {
    type Target = RoutedCall;

    async fn route(&self, slug: &str, source: IpAddr) -> Routing<RoutedCall> {
        // A slug that could not have been drawn cannot exist: no lookup for it.
        if SipSlug::parse(slug).is_none() {
            return Routing::Unknown;
        }
        let (route, seat) = match self.endpoints.admit(slug, source).await {
            Admission::Seated { route, seat } => (route, seat),
            Admission::Unknown => return Routing::Unknown,
            Admission::Forbidden => return Routing::Forbidden,
            Admission::Full => return Routing::Full,
            Admission::Unavailable => return Routing::Busy,
        };
        let agent = match self
            .store
            .answering_agent(route.workspace_id, route.agent_id)
            .await
        {
            Ok(Some((_, true))) => return Routing::Forbidden,
            Ok(Some((agent, false))) => agent,
            Ok(None) => return Routing::Unknown,
            Err(e) => {
                tracing::warn!(error = %e, "SIP routing lookup failed");
                return Routing::Busy;
            }
        };
        let call_id = CallId::new();
        let max_secs = agent
            .max_call_duration_secs
            .filter(|s| *s > 0)
            .map(|s| s as u64)
            .unwrap_or(self.config.inbound_max_call_secs);
        // Inbound calls never detect answering machines.
        let mut agent_plan = agent_plan(
            &agent,
            Duration::from_secs(max_secs),
            false,
            &self.vendors,
            &Default::default(),
        );
        let facts = CallFacts {
            workspace_id: route.workspace_id,
            agent_id: agent.id,
            agent_name: agent.name.clone(),
            call_id,
            direction: "inbound",
            metadata: Default::default(),
            variables: Default::default(),
        };
        equip(&mut agent_plan, &self.store, &self.vendors, facts).await;
        agent_plan.turns = Some(
            self.vendors
                .turns
                .sink(call_id, TurnEvents::for_call(&self.store, call_id, &agent)),
        );
        let plan = InboundPlan {
            call_id,
            workspace_id: route.workspace_id,
            endpoint_id: route.id,
            agent_id: route.agent_id,
            sip_uri: format!("sip:{}@{}", route.slug, self.config.sip_host),
            agent: agent_plan,
            recorded: true,
        };
        Routing::Answer(Answer {
            target: RoutedCall {
                plan,
                lead_memory: agent.lead_memory_enabled && agent.lead_memory_trust_caller_id,
                seat,
                flow_agent: (agent.agent_type == crate::store::AgentType::Flow)
                    .then(|| Box::new(agent.clone())),
            },
            recording: Some(recording_path(&self.config.data_dir, call_id)),
            vad: vad_settings(&agent),
        })
    }

    async fn run_call(&self, routed: RoutedCall, call: Call) {
        let _running = self.live.token();
        let mut plan = routed.plan;
        if let Some(agent) = &routed.flow_agent {
            let numbers = (plan.sip_uri.as_str(), call.from.as_str());
            let metadata = crate::runtime::flows::call_metadata(
                agent,
                plan.call_id,
                "inbound",
                numbers,
                &Default::default(),
            );
            crate::runtime::flows::direct(&mut plan.agent, agent, metadata, &Default::default());
        }
        if routed.lead_memory {
            crate::runtime::lead_memory::remember(
                &self.store,
                plan.workspace_id,
                &mut plan.agent,
                &call.from,
                true,
            )
            .await;
        }
        let (done, over) = tokio::sync::oneshot::channel();
        let call = InboundCall {
            call,
            plan,
            store: self.port.clone(),
            speech: self.speech.clone(),
            clock: self.clock.clone(),
            stop: self.stop.clone(),
            fault: self.config.inbound_fault.as_ref().map(|f| f.0.clone()),
            done: Some(done),
            owner: None,
            seat: Some(routed.seat),
        };
        // Under the engine's supervision; before it has started (or once it has stopped),
        // here.
        let left = match self.engine.get() {
            Some(engine) => engine.answer(call).err(),
            None => Some(Box::new(call)),
        };
        match left {
            Some(call) => {
                let _ = run_call(*call).await;
            }
            None => {
                let _ = over.await;
            }
        }
    }
}
