//! The engine's notion of "now".
//!
//! Every engine decision reads time from a [`Clock`]. [`SystemClock`] is the wall clock.
//! [`TokioClock`] maps tokio's clock onto a chosen UTC instant: under tokio's paused clock (tests
//! and the campaign simulator) days of campaign time pass in seconds, and timers (`sleep`,
//! `send_after`) and readings of the clock stay in step because both come from tokio.

use std::sync::Arc;

use chrono::{DateTime, SubsecRound, Utc};

/// A source of the current UTC time, at microsecond precision (the store's).
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

pub type SharedClock = Arc<dyn Clock>;

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now().trunc_subsecs(6)
    }
}

/// tokio's clock, starting at `base`. Create it inside the runtime whose clock it reads.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: DateTime<Utc>,
    start: tokio::time::Instant,
}

impl TokioClock {
    pub fn starting_at(base: DateTime<Utc>) -> Self {
        Self {
            base: base.trunc_subsecs(6),
            start: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> DateTime<Utc> {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.start);
        let elapsed = chrono::Duration::from_std(elapsed).unwrap_or(chrono::Duration::MAX);
        (self.base + elapsed).trunc_subsecs(6)
    }
}

/// The wall clock moved forward by an offset its owner advances: the service's integration
/// tests jump past an expiry or a review delay instead of waiting for it, while time still flows
/// (rows written one after another keep distinct, ordered timestamps).
#[derive(Debug, Default)]
pub struct AdjustableClock {
    offset: std::sync::Mutex<chrono::Duration>,
}

impl AdjustableClock {
    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut offset = self.offset.lock().unwrap_or_else(|p| p.into_inner());
        *offset += by;
    }
}

impl Clock for AdjustableClock {
    fn now(&self) -> DateTime<Utc> {
        let offset = *self.offset.lock().unwrap_or_else(|p| p.into_inner());
        (Utc::now() + offset).trunc_subsecs(6)
    }
}

/// Keeps tokio's paused clock from jumping ahead while work runs on other threads.
///
/// A paused clock advances to the next timer whenever the runtime has nothing to run, and a
/// task waiting on a database worker thread is "nothing to run". While any [`HoldGuard`] is
/// alive, [`TimeHold::run`] keeps yielding, so the runtime always has a task to run and never
/// parks: virtual time stands still until the work is done. (A yielding task costs no thread
/// hand-off per query, unlike holding the clock with a blocking task; the runtime's thread
/// spins while the database works on another core, or gives its core to the database thread
/// when they share one.) Only used under a paused clock.
#[derive(Debug, Default)]
pub struct TimeHold {
    busy: std::sync::Mutex<usize>,
    wake: tokio::sync::Notify,
}

/// Holds virtual time while alive.
#[derive(Debug)]
pub struct HoldGuard(Arc<TimeHold>);

impl Drop for HoldGuard {
    fn drop(&mut self) {
        let mut busy = self.0.lock();
        *busy = busy.saturating_sub(1);
    }
}

impl TimeHold {
    fn lock(&self) -> std::sync::MutexGuard<'_, usize> {
        match self.busy.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub fn enter(self: &Arc<Self>) -> HoldGuard {
        let mut busy = self.lock();
        *busy += 1;
        if *busy == 1 {
            self.wake.notify_one();
        }
        HoldGuard(self.clone())
    }

    /// Spawn this on the paused runtime; it runs until the runtime stops.
    pub async fn run(self: Arc<Self>) {
        loop {
            if *self.lock() == 0 {
                self.wake.notified().await;
                continue;
            }
            // While work is in flight, stay runnable: a current-thread runtime with a ready
            // task never parks, and paused time only auto-advances when it parks. Yielding
            // costs no thread hand-off, unlike waiting on a blocking task.
            while *self.lock() > 0 {
                // Also offer the core to the operating system: when the database thread shares
                // this core, it runs now instead of waiting out this thread's time slice.
                std::thread::yield_now();
                tokio::task::yield_now().await;
            }
        }
    }
}

/// How long to wait from `now` until `at` (zero when `at` has passed).
pub fn until(now: DateTime<Utc>, at: DateTime<Utc>) -> std::time::Duration {
    (at - now).to_std().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adjustable_clock_jumps_by_what_it_is_advanced() {
        let clock = AdjustableClock::default();
        let before = clock.now();
        clock.advance(std::time::Duration::from_secs(3600));
        let after = clock.now();
        assert!(
            after - before >= chrono::Duration::hours(1),
            "{before} {after}"
        );
        assert!(after - before < chrono::Duration::hours(1) + chrono::Duration::minutes(1));
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_time() {
        let base = "2026-03-08T06:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let clock = TokioClock::starting_at(base);
        assert_eq!(clock.now(), base);
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
        assert_eq!(clock.now(), base + chrono::Duration::hours(1));
    }
}
