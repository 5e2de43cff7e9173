//! Background jobs, run on an interval until shutdown:
//! - activate purchased numbers whose regulatory review period has passed;
//! - run due end-of-call analyses ([`crate::runtime::analysis`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::config::Config;
use crate::runtime::analysis::Analyst;
use crate::store::Store;

/// Runs every job until `stop` turns true. `analyst` is `None` without a chat model.
pub async fn run(
    store: Store,
    config: Arc<Config>,
    analyst: Option<Analyst>,
    stop: watch::Receiver<bool>,
) {
    let interval = config.job_interval;
    tokio::join!(
        activate_numbers(store.clone(), config, stop.clone()),
        crate::runtime::analysis::run(store, analyst, interval, stop),
    );
}

/// Runs `work` every `interval` until `stop` turns true; a run under way then is dropped.
pub async fn every<F, Fut>(interval: Duration, mut stop: watch::Receiver<bool>, mut work: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut ticks = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            () = work() => {}
            _ = stop.changed() => return,
        }
    }
}

async fn activate_numbers(store: Store, config: Arc<Config>, stop: watch::Receiver<bool>) {
    every(config.job_interval, stop, || async {
        match store.activate_due_numbers(store.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "purchased numbers activated"),
            Err(err) => tracing::warn!(error = %err, "number activation failed"),
        }
    })
    .await;
}
