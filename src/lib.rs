//! Switchboard: a self-hosted telephony and campaign runtime for AI voice agents.
//!
//! - [`config`]: service settings, from flags and `SWITCHBOARD_*` variables.
//! - [`cli`]: the `switchboard` command line (`serve` and the operator commands).
//! - [`auth`]: API keys (generated, hashed, compared in constant time) and scopes.
//! - [`store`]: the SQLite store; every query is scoped to one workspace.
//! - [`billing`]: balances, the ledger and the payment-provider port.
//! - [`http`]: the REST control plane (axum), its discovery documents and its gate (auth and
//!   rate limits).
//! - [`egress`]: the outbound URL policy every request to a workspace-supplied URL obeys.
//! - [`flows`]: flow agents: the checks of a flow at save, and the director of a flow call.
//! - [`simulator`]: the flow simulator: a flow agent on the text line, scripted, played or
//!   replayed.
//! - [`providers`]: what flows' integrations answer (Google Calendar's answers as a flow sees
//!   them).
//! - [`engine`]: the campaign engine wired to the store and the configured carrier.
//! - [`jobs`]: background work: activating purchased numbers, end-of-call analyses.
//! - [`analysis`]: the end-of-call analysis of answered calls (summary, extracted values,
//!   disposition), a persisted job.
//! - [`simulation`]: the engine and store against the simulated carrier under virtual time.
//! - [`inbound`]: inbound SIP calls: routing slugs to endpoints and agents, and their records.
//! - [`webhooks`]: webhook tools: configuration rules, the payload contract, one delivery.
//! - [`call_tools`]: the agent's tools on a call, snapshotted when it starts, run for its
//!   model.
//! - [`agent_webhooks`]: agents' call events, signed and delivered from the store's outbox
//!   (retried, in order per call), and `tool.called` for function tools.
//! - [`signing`]: HMAC-SHA256 signatures: recording links and webhook deliveries.
//! - [`speech`]: text to speech for agents' prompts (espeak-ng, OpenAI-compatible, fallback).
//! - [`vendors`]: the OpenAI-compatible chat model and transcription clients.
//! - [`trunks`]: SIP trunks on carrier accounts: their status, the port that probes them, how
//!   they are shown and read from a flag.
//!
//! [`serve`] runs the whole service on the HTTP listener and SIP sockets the caller binds, until
//! a shutdown future resolves, so tests run the real service in-process on port 0.

pub mod agent_webhooks;
pub mod analysis;
pub mod auth;
pub mod billing;
pub mod call_tools;
pub mod cli;
pub mod config;
pub mod dashboard;
pub mod egress;
pub mod engine;
pub mod flows;
pub mod http;
pub mod inbound;
pub mod jobs;
pub mod lead_memory;
pub mod live_turns;
pub mod outbound;
pub mod providers;
pub mod secrets;
pub mod signing;
pub mod simulation;
pub mod simulator;
pub mod speech;
pub mod store;
pub mod trunks;
pub mod vendors;
pub mod webhooks;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

pub use config::Config;
pub use store::Store;

/// The text-to-speech engine the settings ask for.
fn speech_engine(config: &Config) -> anyhow::Result<Arc<dyn switchboard_actors::agent::Speech>> {
    let engine: Arc<dyn switchboard_actors::agent::Speech> = match &config.tts {
        config::Tts::Auto => match speech::Espeak::find() {
            Some(espeak) => Arc::new(espeak),
            None => {
                tracing::info!("espeak-ng is not installed: prompts play as chimes");
                Arc::new(speech::Tones)
            }
        },
        config::Tts::Espeak => Arc::new(
            speech::Espeak::find()
                .ok_or_else(|| anyhow::anyhow!("--tts espeak: espeak-ng is not installed"))?,
        ),
        config::Tts::OpenAi {
            base_url,
            api_key,
            model,
        } => Arc::new(speech::OpenAiSpeech {
            base_url: base_url.clone(),
            api_key: api_key.clone(),
            model: model.clone(),
            client: reqwest::Client::builder()
                .timeout(std::time::Duration::from_secs(30))
                .build()?,
        }),
        config::Tts::Tones => Arc::new(speech::Tones),
    };
    Ok(Arc::new(speech::Cached::new(engine)))
}

/// An endpoint for `settings`, when they are given.
fn vendor_endpoint(
    settings: &Option<config::VendorSettings>,
    timeouts: vendors::Timeouts,
) -> anyhow::Result<Option<vendors::Endpoint>> {
    Ok(match settings {
        Some(settings) => Some(vendors::Endpoint::new(settings.clone(), timeouts)?),
        None => None,
    })
}

/// The chat model the settings name (`--llm-url`), if any.
pub fn chat_model(
    config: &Config,
) -> anyhow::Result<Option<Arc<dyn switchboard_actors::vendors::ChatModel>>> {
    let endpoint = vendor_endpoint(&config.llm, config.vendor_timeouts)?;
    Ok(endpoint.map(|endpoint| Arc::new(vendors::OpenAiChat { endpoint }) as _))
}

/// The speech-to-text engine the settings name (`--stt-url`), if any.
pub fn transcriber(
    config: &Config,
) -> anyhow::Result<Option<Arc<dyn switchboard_actors::vendors::Transcriber>>> {
    let endpoint = vendor_endpoint(&config.stt, config.vendor_timeouts)?;
    Ok(endpoint.map(|endpoint| Arc::new(vendors::OpenAiTranscriber { endpoint }) as _))
}

/// Installs the process's TLS crypto provider (ring), shared by SIP over TLS and outbound
/// HTTPS. Calling it again is harmless.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Runs the service on `listener` (HTTP) and `sip` (the SIP server's sockets, given exactly when
/// `config.sip` is set) until `shutdown` resolves, then drains in-flight requests and lets live
/// calls end.
pub async fn serve(
    listener: TcpListener,
    metrics: Option<TcpListener>,
    sip: Option<switchboard_sip::server::SipSockets>,
    store: Store,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    install_crypto();
    let mut config = config;
    if config.public_url.is_none() {
        config.public_url = Some(format!("http://{}", listener.local_addr()?));
    }
    config.check()?;
    // Read before anything holds the store: calls show their recording links through it, in
    // webhook events as in the API.
    let recording_key: Arc<[u8]> = store
        .service_secret(
            "recording_url",
            || rand::random::<[u8; 32]>().to_vec(),
            chrono::Utc::now(),
        )
        .await?
        .into();
    // Built before anything ends a call: whether a model is configured decides whether an
    // answered call's end starts an analysis.
    let model = chat_model(&config)?;
    let store = store
        .with_default_trunk(config.default_trunk())
        .with_recording_links(signing::RecordingLinks::new(
            recording_key.clone(),
            &http::public_url(&config),
        ))
        .with_analysis(model.is_some());
    let config = Arc::new(config);
    let payments: Arc<dyn billing::PaymentProvider> = Arc::new(billing::LocalPaymentProvider);
    let sip_stop = tokio_util::sync::CancellationToken::new();
    let speech = speech_engine(&config)?;
    let egress = egress::Egress::system(config.egress_allow.clone());
    let providers = Arc::new(providers::Providers::new(
        store.clone(),
        egress.clone(),
        config.google.clone(),
        config.integration_timeout,
        config.secrets_key_file.clone(),
    ));
    let vendors = vendors::Vendors {
        model: model.clone(),
        transcriber: transcriber(&config)?,
        egress,
        providers: providers.clone(),
        turns: Default::default(),
    };
    let live_turns = vendors.turns.clone();
    // The SIP server starts first: the SIP dialer places calls through it. Its inbound calls
    // run under the engine once it has started.
    let sip = start_sip(
        &config, sip, &store, &payments, &speech, &vendors, &sip_stop,
    )
    .await?;
    let client = sip.as_ref().map(|s| s.server.client());
    if let Some(client) = &client {
        // Before the engine reconciles them as interrupted: end what a previous process left
        // ringing or answered.
        outbound::abandon_stale_calls(&store, client).await?;
    }
    let dialer = engine::dialer(
        &config,
        &store,
        client.as_ref().map(|c| (c, &sip_stop)),
        speech,
        vendors,
    )?;
    let engine = engine::start(
        &store,
        payments.clone(),
        dialer,
        engine::engine_config(&config),
    )
    .await?;
    if let Some(sip) = &sip {
        let _ = sip.engine.set(engine.clone());
    }
    // What `POST /carrier-accounts/{id}/test` probes trunks with: the SIP server's OPTIONS
    // client, once the server runs; without one the route answers 503 SIP_NOT_RUNNING.
    let trunk_prober: Option<Arc<dyn trunks::TrunkProber>> = client
        .clone()
        .map(|c| Arc::new(c) as Arc<dyn trunks::TrunkProber>);
    let mut state = http::AppState::new(
        store.clone(),
        config.clone(),
        engine.clone(),
        payments,
        recording_key,
        trunk_prober,
    )?;
    state.sip = sip.as_ref().map(|s| s.server.monitor());
    state.endpoints = sip.as_ref().map(|s| s.endpoints.clone());
    state.model = model.clone();
    state.providers = Some(providers);
    state.live_turns = live_turns;
    let metrics = metrics
        .map(|listener| http::prometheus::Listener::spawn(listener, state.clone()))
        .transpose()?;
    // Once `shutdown` resolves, streams that never end by themselves are told to.
    let closing = state.closing.clone();
    let shutdown = async move {
        shutdown.await;
        closing.cancel();
    };
    let app = http::router(state);
    let (stop_jobs, jobs_stopped) = tokio::sync::watch::channel(false);
    let analyst = model.map(|model| analysis::Analyst {
        store: store.clone(),
        model,
        engine: engine.clone(),
    });
    let jobs = tokio::spawn(jobs::run(
        store.clone(),
        config.clone(),
        analyst,
        jobs_stopped,
    ));
    // Delivers agent webhook events, resuming whatever a previous run left pending.
    let dispatcher_stop = tokio_util::sync::CancellationToken::new();
    let dispatcher = tokio::spawn(agent_webhooks::dispatcher::run(
        store,
        egress::Egress::system(config.egress_allow.clone()),
        agent_webhooks::DispatcherSettings::of(&config),
        dispatcher_stop.clone(),
    ));
    tracing::info!(addr = %listener.local_addr()?, "HTTP control plane listening");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;
    if let Some(metrics) = metrics {
        metrics.stop().await;
    }
    if let Some(SipRunning {
        server,
        live,
        endpoints,
        ..
    }) = sip
    {
        server.shutdown().await;
        // Live calls end with a BYE and record their end before the service stops: each holds
        // a token of `live`, so the wait ends when the last one finishes (or after 5 s).
        sip_stop.cancel();
        live.close();
        let drained = tokio::time::timeout(std::time::Duration::from_secs(5), live.wait()).await;
        if drained.is_err() {
            tracing::warn!(calls = live.len(), "live calls still running at shutdown");
        }
        // Each endpoint writes the last call it has not written yet.
        endpoints.stop().await;
    }
    let _ = stop_jobs.send(true);
    let _ = jobs.await;
    engine.stop().await;
    // Last: the attempts under way finish; what is still pending waits in the outbox for the
    // next start.
    dispatcher_stop.cancel();
    let _ = dispatcher.await;
    tracing::info!("stopped");
    Ok(())
}

/// The SIP server once started: its live inbound calls, its endpoints' actors, and where the
/// engine its calls run under is set once it has started.
struct SipRunning {
    server: switchboard_sip::server::SipServer,
    live: tokio_util::task::TaskTracker,
    endpoints: switchboard_actors::endpoint::Endpoints,
    engine: Arc<std::sync::OnceLock<switchboard_actors::engine::Engine>>,
}

/// The SIP server on `sockets` when SIP is configured, with the inbound router over the store.
async fn start_sip(
    config: &Arc<Config>,
    sockets: Option<switchboard_sip::server::SipSockets>,
    store: &Store,
    payments: &Arc<dyn billing::PaymentProvider>,
    speech: &Arc<dyn switchboard_actors::agent::Speech>,
    vendors: &vendors::Vendors,
    stop: &tokio_util::sync::CancellationToken,
) -> anyhow::Result<Option<SipRunning>> {
    Ok(match (&config.sip, sockets) {
        (Some(settings), Some(sockets)) => {
            let endpoints = switchboard_actors::endpoint::Endpoints::start(
                Arc::new(store.clone()),
                config.endpoints,
            )
            .await?;
            let router = inbound::SipRouter {
                store: store.clone(),
                config: config.clone(),
                port: Arc::new(inbound::InboundPort::new(
                    store.clone(),
                    payments.clone(),
                    config.inbound_cents_per_minute,
                )),
                speech: speech.clone(),
                vendors: vendors.clone(),
                clock: Arc::new(switchboard_actors::clock::SystemClock),
                stop: stop.clone(),
                endpoints: endpoints.clone(),
                live: Default::default(),
                engine: Default::default(),
            };
            let live = router.live.clone();
            let engine = router.engine.clone();
            let mut settings = settings.clone();
            // Outbound INVITEs are written down beside the recordings, for the next start.
            settings
                .invite_log
                .get_or_insert_with(|| config.data_dir.join("sip").join("invites.log"));
            let server =
                switchboard_sip::server::SipServer::start(settings, sockets, router).await?;
            tracing::info!(udp = %server.udp, tcp = %server.tcp, tls = ?server.tls, "SIP listening");
            Some(SipRunning {
                server,
                live,
                endpoints,
                engine,
            })
        }
        (None, None) => None,
        (Some(_), None) => anyhow::bail!("SIP is configured but no SIP sockets were given"),
        (None, Some(_)) => anyhow::bail!("SIP sockets were given but SIP is not configured"),
    })
}
