//! The REST control plane. Each resource module exposes `router()`, an `OpenApiRouter` whose
//! handlers declare method, path, scope and summary in `#[utoipa::path]`; this module merges
//! them, derives the route table and discovery documents from the result, and puts the gate
//! (auth, scopes, rate limit) in front of everything.
//!
//! **Invariant:** handlers are thin: parse into valid types, call the store, serialize. Only
//! this layer knows status codes and JSON error bodies.

pub mod error;
pub mod extract;
pub mod gate;
pub mod openapi;
pub mod prometheus;
pub mod routes;

mod affiliates;
pub(crate) mod agents;
mod billing;
mod call_windows;
mod calls;
pub(crate) mod campaigns;
mod carrier_accounts;
mod dispositions;
mod dnc;
pub(crate) mod flow_test;
mod integrations;
mod leads;
mod phone_numbers;
pub(crate) mod recordings;
mod shared_links;
pub(crate) mod sip_endpoints;
pub(crate) mod tools;
mod webhooks;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use metrics_exporter_prometheus::PrometheusHandle;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ComponentsBuilder, InfoBuilder, OpenApiBuilder};
use utoipa_axum::router::OpenApiRouter;

use crate::config::Config;
use crate::domain::payments::PaymentProvider;
use crate::store::Store;
use switchboard_actors::engine::Engine;

pub use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub config: Arc<Config>,
    pub limiter: Arc<gate::RateLimiter>,
    /// Scopes and discovery, filled once the router is assembled.
    pub routes: Arc<routes::RouteTable>,
    pub metrics: PrometheusHandle,
    /// Where payment methods and top-ups go.
    pub payments: Arc<dyn PaymentProvider>,
    /// The campaign engine and call queue.
    pub engine: Engine,
    /// Signs recording URLs.
    pub recording_key: Arc<[u8]>,
    /// Makes calls' `recording_url` (from `recording_key` and the public URL).
    links: crate::domain::signing::RecordingLinks,
    /// The outbound URL policy (webhooks).
    pub egress: crate::edge::egress::Egress,
    /// Probes carrier accounts' trunks (SIP OPTIONS); `None` while no SIP client runs.
    pub trunk_prober: Option<Arc<dyn crate::domain::trunks::TrunkProber>>,
    /// The SIP server's figures for `/metrics`, when it runs.
    pub sip: Option<switchboard_sip::server::SipMonitor>,
    /// The chat model flows are simulated with (`--llm-url`).
    pub model: Option<Arc<dyn switchboard_actors::vendors::ChatModel>>,
    /// The SIP endpoints' actors, told when an endpoint changes; when SIP runs.
    pub endpoints: Option<switchboard_actors::endpoint::Endpoints>,
    /// What flows' integration_call nodes dispatch to (the simulator's real runs).
    pub providers: Option<Arc<crate::runtime::integrations::Providers>>,
    /// Each call's latest turn, as its call actor hands it on (the live page).
    pub live_turns: Arc<crate::runtime::live_turns::LiveTurns>,
    /// Cancelled when the service begins to stop: long-lived answers (the live page's stream)
    /// end, so that draining the open connections does not wait for them.
    pub closing: tokio_util::sync::CancellationToken,
}

impl AppState {
    pub fn new(
        store: Store,
        config: Arc<Config>,
        engine: Engine,
        payments: Arc<dyn PaymentProvider>,
        recording_key: Arc<[u8]>,
        trunk_prober: Option<Arc<dyn crate::domain::trunks::TrunkProber>>,
    ) -> anyhow::Result<Self> {
        let (_, openapi) = api().split_for_parts();
        let routes = routes::RouteTable::from_openapi(serde_json::to_value(&openapi)?)?;
        let egress = crate::edge::egress::Egress::system(config.egress_allow.clone());
        let links = crate::domain::signing::RecordingLinks::new(
            recording_key.clone(),
            &public_url(&config),
        );
        Ok(Self {
            store,
            limiter: Arc::new(gate::RateLimiter::new(config.rate_limit_per_minute)),
            config,
            routes: Arc::new(routes),
            metrics: prometheus::handle()?,
            payments,
            engine,
            egress,
            recording_key,
            links,
            trunk_prober,
            sip: None,
            endpoints: None,
            model: None,
            providers: None,
            live_turns: Default::default(),
            closing: Default::default(),
        })
    }

    /// The base URL of links the service hands out.
    pub fn public_url(&self) -> String {
        public_url(&self.config)
    }

    /// Makes calls' `recording_url`.
    pub fn recording_links(&self) -> &crate::domain::signing::RecordingLinks {
        &self.links
    }
}

/// The base URL of links the service hands out: `--public-url`, else the listen address.
pub fn public_url(config: &Config) -> String {
    match &config.public_url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => format!("http://{}", config.http),
    }
}

/// Every documented route, merged.
pub fn api() -> OpenApiRouter<AppState> {
    let doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("Switchboard")
                .version("1.0.0")
                .description(Some("Voice-Agent Calling Service API: agents, numbers, calls, campaigns and more. Send `Authorization: Bearer <key>`.")),
        )
        .components(Some(
            ComponentsBuilder::new()
                .security_scheme("bearer", SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()))
                .build(),
        ))
        .build();
    OpenApiRouter::with_openapi(doc)
        .merge(routes::router())
        .merge(agents::router())
        .merge(phone_numbers::router())
        .merge(dispositions::router())
        .merge(dnc::router())
        .merge(billing::router())
        .merge(call_windows::router())
        .merge(campaigns::router())
        .merge(calls::router())
        .merge(sip_endpoints::router())
        .merge(recordings::router())
        .merge(tools::router())
        .merge(leads::router())
        .merge(shared_links::router())
        .merge(carrier_accounts::router())
        .merge(affiliates::router())
        .merge(integrations::router())
        .merge(flow_test::router())
        .merge(webhooks::router())
}

/// The complete service router.
pub fn router(state: AppState) -> Router {
    let (router, _) = api().split_for_parts();
    router
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), gate::gate))
        // The dashboard signs in with a session cookie, not a bearer key: outside the gate.
        .nest("/app", crate::dashboard::router())
        .layer(middleware::from_fn(record_metrics))
        .with_state(state)
}

async fn record_metrics(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("switchboard_http_requests_total", "method" => method.clone(), "route" => route.clone(), "status" => status).increment(1);
    metrics::histogram!("switchboard_http_request_seconds", "method" => method, "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
