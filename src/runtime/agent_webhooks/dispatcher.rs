//! The dispatcher: a background task of `serve` that delivers the outbox's pending events.
//!
//! It claims due deliveries (each the oldest pending event of its call, so a call's events go
//! out in order), at most `concurrency` at once, and sends each as a signed POST. A 2xx
//! delivers it; anything else is retried after an exponential backoff (`retry_base` doubling
//! up to `retry_cap`, each wait spread by ±20%) until an attempt fails once `retry_window` has
//! passed since the event, which fails it for good. A claim leases the delivery for the
//! attempt's timeout and a margin: a process that dies mid-attempt leaves it due again after
//! the lease, and a restart resumes every pending delivery where it was.
//!
//! It wakes when an event is committed (`Store::outbox_written`), when an attempt ends, when
//! the next delivery is due, and at least every `poll`. On shutdown it claims nothing more and
//! lets the attempts under way finish (each is bounded by the timeout).

use std::time::Duration;

use rand::Rng;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::edge::egress::Egress;
use crate::edge::webhooks::signed::{SignedPost, send};
use crate::store::{AttemptRecord, DueDelivery, Store};

/// The most of an answer's body read (it is not kept).
const READ_LIMIT: usize = 16 * 1024;

/// How long past its timeout an attempt's claim lasts.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// The dispatcher's settings.
#[derive(Debug, Clone)]
pub struct DispatcherSettings {
    /// The first retry's wait; each next one doubles.
    pub retry_base: Duration,
    /// The longest wait between attempts.
    pub retry_cap: Duration,
    /// How long an event is retried: an attempt that fails once this has passed since the
    /// event fails it for good.
    pub retry_window: Duration,
    /// One attempt's limit (connecting, sending, the answer).
    pub timeout: Duration,
    /// Attempts under way at once (over all calls).
    pub concurrency: usize,
    /// The longest the dispatcher sleeps without looking.
    pub poll: Duration,
}

impl DispatcherSettings {
    pub fn of(config: &Config) -> Self {
        Self {
            retry_base: config.webhook_retry_base,
            retry_cap: config.webhook_retry_cap,
            retry_window: config.webhook_retry_window,
            timeout: config.webhook_timeout,
            concurrency: config.webhook_concurrency.max(1),
            poll: Duration::from_secs(1),
        }
    }
}

/// The wait before the retry that follows failed attempt number `attempts` (from 1):
/// `base * 2^(attempts - 1)`, at most `cap`, times `spread` (the jitter, around 1).
pub fn backoff(base: Duration, cap: Duration, attempts: i64, spread: f64) -> Duration {
    let doublings = u32::try_from(attempts.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
    let wait = base.saturating_mul(2u32.saturating_pow(doublings)).min(cap);
    wait.mul_f64(spread.clamp(0.5, 1.5))
}

/// Runs the dispatcher until `stop` is cancelled.
pub async fn run(
    store: Store,
    egress: Egress,
    settings: DispatcherSettings,
    stop: CancellationToken,
) {
    let mut running = JoinSet::new();
    let lease = chrono::Duration::from_std(settings.timeout + LEASE_MARGIN)
        .unwrap_or(chrono::Duration::MAX);
    loop {
        let free = settings.concurrency.saturating_sub(running.len());
        if free > 0 {
            let now = store.now();
            match store
                .claim_due_deliveries(now, now + lease, free as i64)
                .await
            {
                Ok(due) => {
                    for delivery in due {
                        running.spawn(attempt(
                            store.clone(),
                            egress.clone(),
                            settings.clone(),
                            delivery,
                        ));
                    }
                }
                Err(error) => tracing::warn!(%error, "webhook deliveries could not be claimed"),
            }
        }
        let wait = if running.len() < settings.concurrency {
            until_next_due(&store, settings.poll).await
        } else {
            settings.poll
        };
        tokio::select! {
            _ = stop.cancelled() => break,
            Some(_) = running.join_next(), if !running.is_empty() => {}
            _ = store.outbox_notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
    while running.join_next().await.is_some() {}
}

/// How long until the next delivery is due, between 10 ms and `poll`.
async fn until_next_due(store: &Store, poll: Duration) -> Duration {
    let next = match store.next_delivery_due().await {
        Ok(Some(next)) => next,
        Ok(None) => return poll,
        Err(error) => {
            tracing::warn!(%error, "webhook deliveries could not be read");
            return poll;
        }
    };
    (next - store.now())
        .to_std()
        .unwrap_or_default()
        .clamp(Duration::from_millis(10), poll)
}

/// One attempt of a claimed delivery, recorded.
async fn attempt(store: Store, egress: Egress, settings: DispatcherSettings, d: DueDelivery) {
    let (secret, headers) = match store.delivery_context(d.workspace_id, d.agent_id).await {
        Ok(context) => context,
        Err(error) => {
            // Left to its lease: it is due again once the lease ends.
            tracing::warn!(event = %d.id, %error, "a webhook delivery could not be prepared");
            return;
        }
    };
    let outcome = send(
        &egress,
        SignedPost {
            url: &d.url,
            event_id: d.id,
            kind: d.kind.as_str(),
            body: d.envelope.as_bytes(),
            secret: &secret,
            headers: &headers,
            timestamp: store.now().timestamp(),
            timeout: settings.timeout,
            read_limit: READ_LIMIT,
        },
    )
    .await;
    let at = store.now();
    let error = outcome.error(settings.timeout);
    let attempts = d.attempts + 1;
    let next_attempt_at = match &error {
        None => None,
        Some(_) => {
            let window =
                chrono::Duration::from_std(settings.retry_window).unwrap_or(chrono::Duration::MAX);
            (at - d.created_at < window).then(|| {
                let spread = rand::rng().random_range(0.8..1.2);
                let wait = backoff(settings.retry_base, settings.retry_cap, attempts, spread);
                at + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::MAX)
            })
        }
    };
    let result = match (&error, next_attempt_at) {
        (None, _) => "delivered",
        (Some(_), Some(_)) => "retrying",
        (Some(_), None) => "failed",
    };
    metrics::counter!("switchboard_webhook_attempts_total", "result" => result).increment(1);
    match &error {
        None => tracing::info!(
            event = %d.id, call = %d.call_id, kind = %d.kind, attempts, "webhook delivered"
        ),
        Some(error) => tracing::warn!(
            event = %d.id, call = %d.call_id, kind = %d.kind, attempts,
            status = ?outcome.status_code(), %error, result, "webhook attempt failed"
        ),
    }
    let record = AttemptRecord {
        at,
        status_code: outcome.status_code(),
        error,
        next_attempt_at,
    };
    if let Err(error) = store.record_attempt(d.id, &record).await {
        tracing::warn!(event = %d.id, %error, "a webhook attempt could not be recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_the_base_up_to_the_cap() {
        let base = Duration::from_secs(10);
        let cap = Duration::from_secs(3600);
        let waits: Vec<u64> = (1..=11)
            .map(|n| backoff(base, cap, n, 1.0).as_secs())
            .collect();
        assert_eq!(
            waits,
            [10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600, 3600]
        );
        assert_eq!(backoff(base, cap, 1000, 1.0), cap, "no overflow");
        assert_eq!(backoff(base, cap, 0, 1.0), base);
        assert_eq!(backoff(base, cap, 2, 1.2), Duration::from_secs(24));
        assert_eq!(backoff(base, cap, 2, 0.8), Duration::from_secs(16));
    }

    #[test]
    fn the_production_schedule_retries_for_a_day() {
        let config = Config::default();
        let s = DispatcherSettings::of(&config);
        assert_eq!(s.retry_base, Duration::from_secs(10));
        assert_eq!(s.retry_cap, Duration::from_secs(3600));
        assert_eq!(s.retry_window, Duration::from_secs(24 * 3600));
        assert_eq!(s.timeout, Duration::from_secs(10));
        // Attempts made within the window at the shortest waits (every wait at 0.8 times).
        let mut elapsed = Duration::ZERO;
        let mut attempts = 1;
        while elapsed < s.retry_window {
            elapsed += backoff(s.retry_base, s.retry_cap, attempts, 0.8);
            attempts += 1;
        }
        assert!(
            (30..=45).contains(&attempts),
            "{attempts} attempts in a day"
        );
    }
}
