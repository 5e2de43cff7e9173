//! Background jobs, run on an interval until shutdown:
//! - activate purchased numbers whose regulatory review period has passed.

use std::sync::Arc;

use tokio::sync::watch;

use crate::config::Config;
use crate::store::Store;

pub async fn run(store: Store, config: Arc<Config>, mut stop: watch::Receiver<bool>) {
    let mut interval = tokio::time::interval(config.job_interval);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        match store.activate_due_numbers(store.now()).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(count = n, "purchased numbers activated"),
            Err(err) => tracing::warn!(error = %err, "number activation failed"),
        }
    }
}
