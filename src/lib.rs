//! Switchboard: a self-hosted telephony and campaign runtime for AI voice agents.
//!
//! - [`config`]: service settings, from flags and `SWITCHBOARD_*` variables.
//! - [`cli`]: the `switchboard` command line (`serve` and the operator commands).
//! - [`auth`]: API keys (generated, hashed, compared in constant time) and scopes.
//! - [`store`]: the SQLite store; every query is scoped to one workspace.
//! - [`billing`]: balances, the ledger and the payment-provider port.
//! - [`http`]: the REST control plane (axum), its discovery documents and its gate (auth and
//!   rate limits).
//! - [`engine`]: the campaign engine wired to the store and the configured carrier.
//! - [`jobs`]: background work, such as activating purchased numbers.
//! - [`simulation`]: the engine and store against the simulated carrier under virtual time.
//!
//! [`serve`] runs the whole service on listeners the caller binds, until a shutdown future
//! resolves, so tests run the real service in-process on port 0.

pub mod auth;
pub mod billing;
pub mod cli;
pub mod config;
pub mod engine;
pub mod http;
pub mod jobs;
pub mod simulation;
pub mod store;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

pub use config::Config;
pub use store::Store;

/// Runs the service on `listener` until `shutdown` resolves, then drains in-flight requests.
pub async fn serve(
    listener: TcpListener,
    store: Store,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let config = Arc::new(config);
    let payments: Arc<dyn billing::PaymentProvider> = Arc::new(billing::LocalPaymentProvider);
    let dialer = engine::dialer(&config, &store)?;
    let engine = engine::start(
        &store,
        payments.clone(),
        dialer,
        engine::engine_config(&config),
    )
    .await?;
    let state = http::AppState::new(store.clone(), config.clone(), engine.clone(), payments)?;
    let app = http::router(state);
    let (stop_jobs, jobs_stopped) = tokio::sync::watch::channel(false);
    let jobs = tokio::spawn(jobs::run(store, config, jobs_stopped));
    tracing::info!(addr = %listener.local_addr()?, "HTTP control plane listening");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await?;
    let _ = stop_jobs.send(true);
    let _ = jobs.await;
    engine.stop().await;
    tracing::info!("stopped");
    Ok(())
}
