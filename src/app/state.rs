//! The service as every operation reaches it.

use std::sync::Arc;

use switchboard_actors::engine::Engine;

use super::limits::RateLimiter;
use crate::config::Config;
use crate::domain::payments::PaymentProvider;
use crate::store::Store;

/// The service as its operations reach it: the store, the engine, the settings and the ports
/// to the outside world. Cheap to clone (handles and `Arc`s).
#[derive(Clone)]
pub struct App {
    pub store: Store,
    pub config: Arc<Config>,
    /// The API's rate limit (the gate's, and the dashboard's sign-in).
    pub limiter: Arc<RateLimiter>,
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

impl App {
    pub fn new(
        store: Store,
        config: Arc<Config>,
        engine: Engine,
        payments: Arc<dyn PaymentProvider>,
        recording_key: Arc<[u8]>,
        trunk_prober: Option<Arc<dyn crate::domain::trunks::TrunkProber>>,
    ) -> Self {
        let egress = crate::edge::egress::Egress::system(config.egress_allow.clone());
        let links = crate::domain::signing::RecordingLinks::new(
            recording_key.clone(),
            &public_url(&config),
        );
        Self {
            store,
            limiter: Arc::new(RateLimiter::new(config.rate_limit_per_minute)),
            config,
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
        }
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
