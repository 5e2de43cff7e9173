//! Work run on an interval until shutdown.

use std::time::Duration;

use tokio::sync::watch;

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
