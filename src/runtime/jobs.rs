//! Background jobs, run on an interval until shutdown:
//! - activate purchased numbers whose regulatory review period has passed;
//! - run due end-of-call analyses ([`crate::runtime::analysis`]);
//! - fold the campaigns' count logs into their counts (between the folds admissions start);
//! - write this node's heartbeat and watch the other nodes' ([`crate::runtime::node_watch`]);
//! - drop the API's rate windows that have ended (counted in the database on PostgreSQL).

use std::sync::Arc;

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
        crate::runtime::node_watch::run(store.clone(), config.node.clone(), stop.clone()),
        activate_numbers(store.clone(), config, stop.clone()),
        fold_counts(store.clone(), interval, stop.clone()),
        prune_rate_windows(store.clone(), interval, stop.clone()),
        crate::runtime::analysis::run(store, analyst, interval, stop),
    );
}

async fn activate_numbers(store: Store, config: Arc<Config>, stop: watch::Receiver<bool>) {
    crate::runtime::schedule::every(config.job_interval, stop, || async {
        match store.activate_due_numbers(store.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "purchased numbers activated"),
            Err(err) => tracing::warn!(error = %err, "number activation failed"),
        }
    })
    .await;
}

async fn fold_counts(store: Store, interval: std::time::Duration, stop: watch::Receiver<bool>) {
    crate::runtime::schedule::every(interval, stop, || store.fold_counts_or_later()).await;
}

async fn prune_rate_windows(
    store: Store,
    interval: std::time::Duration,
    stop: watch::Receiver<bool>,
) {
    if !matches!(store.engine(), crate::store::Engine::Postgres) {
        return;
    }
    crate::runtime::schedule::every(interval, stop, || async {
        let window = store.now().timestamp().max(0) / 60;
        if let Err(err) = store.prune_key_windows(window - 1).await {
            tracing::warn!(error = %err, "the ended rate windows were not dropped");
        }
    })
    .await;
}
