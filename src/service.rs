//! The whole service wired together: [`serve`] runs it on the HTTP listener and SIP sockets
//! the caller binds until a shutdown future resolves, so tests run the real service in-process
//! on port 0.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::app::state::App;
use crate::config::Config;
use crate::domain::payments::PaymentProvider;
use crate::domain::trunks::TrunkProber;
use crate::edge::egress::Egress;
use crate::http;
use crate::runtime::vendors;
use crate::store::Store;

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
    crate::edge::tls::install_crypto();
    let mut config = config;
    if config.public_url.is_none() {
        config.public_url = Some(format!("http://{}", listener.local_addr()?));
    }
    config.check()?;
    let espeak = crate::edge::speech::Espeak::find().is_some();
    let vendors = crate::runtime::vendors::described(&config, espeak);
    let dashboard = format!(
        "{}/app",
        config
            .public_url
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches('/')
    );
    let prepared = prepare(store, config).await?;
    let running = start(prepared, sip).await?;
    let (app, metrics) = doors(&running, metrics)?;
    // Once `shutdown` resolves, streams that never end by themselves are told to.
    let closing = running.app.closing.clone();
    let shutdown = async move {
        shutdown.await;
        closing.cancel();
    };
    let background = Background::spawn(&running);
    tracing::info!(addr = %listener.local_addr()?, "HTTP control plane listening");
    for (vendor, what) in &vendors {
        tracing::info!("{vendor}: {what}");
    }
    tracing::info!("dashboard: {dashboard}");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;
    if let Some(metrics) = metrics {
        metrics.stop().await;
    }
    drain(running, background).await;
    tracing::info!("stopped");
    Ok(())
}

/// The store and settings as every part runs on them, before anything starts.
struct Prepared {
    store: Store,
    config: Arc<Config>,
    recording_key: Arc<[u8]>,
    model: Option<Arc<dyn switchboard_actors::vendors::ChatModel>>,
}

/// Reads the recording key and wires the store for what it shows and starts.
async fn prepare(store: Store, config: Config) -> anyhow::Result<Prepared> {
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
    let model = vendors::chat_model(&config)?;
    store.register_node(&config.node).await?;
    let store = store
        .with_node(&config.node.id)
        .with_default_trunk(config.default_trunk())
        .with_recording_links(crate::domain::signing::RecordingLinks::new(
            recording_key.clone(),
            &crate::app::state::public_url(&config),
        ))
        .with_analysis(model.is_some());
    Ok(Prepared {
        store,
        config: Arc::new(config),
        recording_key,
        model,
    })
}

/// What runs once started: the SIP server, the engine, and the application over them.
struct Running {
    store: Store,
    config: Arc<Config>,
    engine: switchboard_actors::engine::Engine,
    sip: Option<SipRunning>,
    sip_stop: tokio_util::sync::CancellationToken,
    app: App,
}

/// Starts the SIP server (first: the SIP dialer places calls through it), ends what a previous
/// process left ringing, starts the engine, and builds the application over them.
async fn start(
    prepared: Prepared,
    sip: Option<switchboard_sip::server::SipSockets>,
) -> anyhow::Result<Running> {
    let Prepared {
        store,
        config,
        recording_key,
        model,
    } = prepared;
    let payments: Arc<dyn PaymentProvider> =
        Arc::new(crate::domain::payments::LocalPaymentProvider);
    let sip_stop = tokio_util::sync::CancellationToken::new();
    let speech = vendors::speech_engine(&config)?;
    let egress = Egress::system(config.egress_allow.clone());
    let providers = Arc::new(crate::runtime::integrations::Providers::new(
        store.clone(),
        egress.clone(),
        config.google.clone(),
        config.integration_timeout,
        config.secrets_key_file.clone(),
    ));
    let vendors = vendors::Vendors {
        model: model.clone(),
        transcriber: vendors::transcriber(&config)?,
        egress,
        providers: providers.clone(),
        turns: Default::default(),
    };
    let live_turns = vendors.turns.clone();
    // Inbound calls run under the engine once it has started.
    let sip = start_sip(
        &config, sip, &store, &payments, &speech, &vendors, &sip_stop,
    )
    .await?;
    let client = sip.as_ref().map(|s| s.server.client());
    if let Some(client) = &client {
        // Before the engine reconciles them as interrupted: end what a previous process left
        // ringing or answered.
        crate::runtime::outbound::abandon_stale_calls(&store, client).await?;
    }
    let dialer = crate::runtime::engine::dialer(
        &config,
        &store,
        client.as_ref().map(|c| (c, &sip_stop)),
        speech,
        vendors,
    )?;
    let engine = crate::runtime::engine::start(
        &store,
        payments.clone(),
        dialer,
        crate::runtime::engine::engine_config(&config),
    )
    .await?;
    if let Some(sip) = &sip {
        let _ = sip.engine.set(engine.clone());
    }
    // What `POST /carrier-accounts/{id}/test` probes trunks with: the SIP server's OPTIONS
    // client, once the server runs; without one the route answers 503 SIP_NOT_RUNNING.
    let trunk_prober: Option<Arc<dyn TrunkProber>> =
        client.map(|c| Arc::new(c) as Arc<dyn TrunkProber>);
    let mut app = App::new(
        store.clone(),
        config.clone(),
        engine.clone(),
        payments,
        recording_key,
        trunk_prober,
    );
    app.sip = sip.as_ref().map(|s| s.server.monitor());
    app.endpoints = sip.as_ref().map(|s| s.endpoints.clone());
    app.model = model;
    app.providers = Some(providers);
    app.live_turns = live_turns;
    Ok(Running {
        store,
        config,
        engine,
        sip,
        sip_stop,
        app,
    })
}

/// The front doors over the application: the REST API with the dashboard beside it, and the
/// metrics listener when one is bound.
fn doors(
    running: &Running,
    metrics: Option<TcpListener>,
) -> anyhow::Result<(axum::Router, Option<http::prometheus::Listener>)> {
    let (_, openapi) = http::router::api().split_for_parts();
    let state = http::state::AppState::new(running.app.clone(), serde_json::to_value(&openapi)?)?;
    let metrics = metrics
        .map(|listener| http::prometheus::Listener::spawn(listener, state.clone()))
        .transpose()?;
    let pages = crate::dashboard::router().with_state(running.app.clone());
    let service = http::router::router(state, crate::dashboard::BASE, pages);
    Ok((service, metrics))
}

/// The background work beside the requests: jobs (number activation, analyses) and the agent
/// webhooks' dispatcher, each with the way to stop it.
struct Background {
    stop_jobs: tokio::sync::watch::Sender<bool>,
    jobs: tokio::task::JoinHandle<()>,
    dispatcher_stop: tokio_util::sync::CancellationToken,
    dispatcher: tokio::task::JoinHandle<()>,
}

impl Background {
    fn spawn(running: &Running) -> Self {
        let (stop_jobs, jobs_stopped) = tokio::sync::watch::channel(false);
        let analyst = running
            .app
            .model
            .clone()
            .map(|model| crate::runtime::analysis::Analyst {
                store: running.store.clone(),
                model,
                engine: running.engine.clone(),
            });
        let jobs = tokio::spawn(crate::runtime::jobs::run(
            running.store.clone(),
            running.config.clone(),
            analyst,
            jobs_stopped,
        ));
        // Delivers agent webhook events, resuming whatever a previous run left pending.
        let dispatcher_stop = tokio_util::sync::CancellationToken::new();
        let dispatcher = tokio::spawn(crate::runtime::agent_webhooks::dispatcher::run(
            running.store.clone(),
            Egress::system(running.config.egress_allow.clone()),
            crate::runtime::agent_webhooks::DispatcherSettings::of(&running.config),
            dispatcher_stop.clone(),
        ));
        Self {
            stop_jobs,
            jobs,
            dispatcher_stop,
            dispatcher,
        }
    }
}

/// Once the requests are drained: live calls end (with a BYE, their ends recorded), then the
/// jobs, the engine, and last the dispatcher (the attempts under way finish; what is still
/// pending waits in the outbox for the next start).
async fn drain(running: Running, background: Background) {
    if let Some(SipRunning {
        server,
        live,
        endpoints,
        ..
    }) = running.sip
    {
        server.shutdown().await;
        // Each live call holds a token of `live`, so the wait ends when the last one finishes
        // (or after 5 s).
        running.sip_stop.cancel();
        live.close();
        let drained = tokio::time::timeout(std::time::Duration::from_secs(5), live.wait()).await;
        if drained.is_err() {
            tracing::warn!(calls = live.len(), "live calls still running at shutdown");
        }
        // Each endpoint writes the last call it has not written yet.
        endpoints.stop().await;
    }
    let _ = background.stop_jobs.send(true);
    let _ = background.jobs.await;
    running.engine.stop().await;
    background.dispatcher_stop.cancel();
    let _ = background.dispatcher.await;
    if let Err(err) = running.store.node_stopped(&running.config.node.id).await {
        tracing::warn!(error = %err, "the node's stop was not recorded");
    }
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
    payments: &Arc<dyn PaymentProvider>,
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
            let router = crate::runtime::inbound::SipRouter {
                store: store.clone(),
                config: config.clone(),
                port: Arc::new(crate::runtime::inbound::InboundPort::new(
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
