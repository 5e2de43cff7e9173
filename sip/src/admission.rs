//! Admission of new inbound calls: whether the server takes one more INVITE now, decided
//! before any database access, SDP work, media or recording file, and how refusals are
//! counted.
//!
//! An INVITE is refused with `503 Service Unavailable` and `Retry-After` when any of these
//! holds (the reason is counted):
//!
//! - `capacity`: the node's live calls (both directions) have reached `max_calls` less the
//!   share kept for outbound calls (`outbound_reserve`), so a flood of inbound calls never
//!   starves the calls the campaign engine places;
//! - `setups`: `max_setups` INVITEs are already being set up (routed, rung, answered, and
//!   recorded by the service: [`crate::call::Call::set_up`]), so a database that falls behind
//!   slows admission rather than piling up calls waiting to be written;
//! - `lag`: the runtime is late: a probe task that wakes every 10 ms measures how late it
//!   wakes, and a decaying peak of that over `max_lag` means the process has no time for
//!   another call;
//! - `rtp_ports`: no media port is free (counted where the port is bound);
//! - `internal`: a lock the decision needs was poisoned by a panic elsewhere. Admission fails
//!   closed: the INVITE is refused, the lock is cleared with what it guarded reset, and the
//!   next INVITE is decided afresh.
//!
//! Beside admission: the per-source INVITE rate ([`RateLimiter`]) and the count of the
//! server's calls ([`CallCounter`]), which the gate and the server read without a lock.
//!
//! Over UDP a refusal costs a scan of the datagram and one response: the gate in front of the
//! socket ([`crate::gate`]) answers it statelessly before the transaction layer sees it, and
//! answers the INVITE's retransmissions with the same 503. Over TCP and TLS (and for an INVITE
//! the gate cannot read) the server refuses it through the transaction layer.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// When new inbound calls are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionSettings {
    /// Calls live on this node at once (inbound and outbound), at most.
    pub max_calls: usize,
    /// Of `max_calls`, the calls inbound INVITEs cannot take: room kept for outbound calls.
    pub outbound_reserve: usize,
    /// INVITEs being set up at once, at most.
    pub max_setups: usize,
    /// The runtime's lateness above which new calls are refused.
    pub max_lag: Duration,
    /// What a refusal's `Retry-After` says, in seconds.
    pub retry_after_secs: u32,
}

impl Default for AdmissionSettings {
    fn default() -> Self {
        AdmissionSettings {
            max_calls: 1000,
            outbound_reserve: 100,
            max_setups: 256,
            max_lag: Duration::from_millis(40),
            retry_after_secs: 2,
        }
    }
}

/// Why an INVITE was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Capacity,
    Setups,
    Lag,
    RtpPorts,
    Internal,
}

impl Refusal {
    pub const ALL: [Refusal; 5] = [
        Refusal::Capacity,
        Refusal::Setups,
        Refusal::Lag,
        Refusal::RtpPorts,
        Refusal::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Capacity => "capacity",
            Refusal::Setups => "setups",
            Refusal::Lag => "lag",
            Refusal::RtpPorts => "rtp_ports",
            Refusal::Internal => "internal",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What admission has done so far, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdmissionStats {
    /// INVITEs admitted.
    pub admitted: u64,
    /// INVITEs refused, by [`Refusal::ALL`]'s order.
    pub refused: [u64; Refusal::ALL.len()],
    /// INVITEs being set up now.
    pub setting_up: usize,
    /// The runtime's lateness now (the decaying peak), microseconds.
    pub lag_us: u64,
}

/// The admission state of one server.
#[derive(Debug)]
pub struct Admission {
    settings: AdmissionSettings,
    setting_up: AtomicUsize,
    lag_us: AtomicU64,
    admitted: AtomicU64,
    refused: [AtomicU64; Refusal::ALL.len()],
}

/// An INVITE being set up; dropping it frees its place.
#[derive(Debug)]
pub struct SetupPermit(Arc<Admission>);

impl Drop for SetupPermit {
    fn drop(&mut self) {
        self.0.setting_up.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    pub fn new(settings: AdmissionSettings) -> Arc<Admission> {
        Arc::new(Admission {
            settings,
            setting_up: AtomicUsize::new(0),
            lag_us: AtomicU64::new(0),
            admitted: AtomicU64::new(0),
            refused: Default::default(),
        })
    }

    pub fn settings(&self) -> &AdmissionSettings {
        &self.settings
    }

    /// Admits an inbound INVITE with `live_calls` live now, or says why not (and counts it).
    pub fn admit(self: &Arc<Self>, live_calls: usize) -> Result<SetupPermit, Refusal> {
        let s = &self.settings;
        if let Some(refusal) = self.signals(live_calls) {
            self.refused(refusal);
            return Err(refusal);
        }
        let taken = self.setting_up.fetch_add(1, Ordering::AcqRel);
        let permit = SetupPermit(self.clone());
        if taken >= s.max_setups {
            drop(permit);
            self.refused(Refusal::Setups);
            return Err(Refusal::Setups);
        }
        self.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(permit)
    }

    /// Takes an INVITE whose admission was decided when it arrived (by the UDP gate): counted
    /// as admitted, it holds a setup place like any other, whatever the signals say now.
    pub fn admit_decided(self: &Arc<Self>) -> SetupPermit {
        self.setting_up.fetch_add(1, Ordering::AcqRel);
        self.admitted.fetch_add(1, Ordering::Relaxed);
        SetupPermit(self.clone())
    }

    /// Whether an INVITE with `live_calls` live now would be refused, and why; takes nothing
    /// and counts nothing (the UDP gate asks before the transaction layer sees the INVITE).
    pub fn would_refuse(&self, live_calls: usize) -> Option<Refusal> {
        self.signals(live_calls).or_else(|| {
            (self.setting_up.load(Ordering::Acquire) >= self.settings.max_setups)
                .then_some(Refusal::Setups)
        })
    }

    /// The refusals decided by the node's state alone: capacity and lag.
    fn signals(&self, live_calls: usize) -> Option<Refusal> {
        let s = &self.settings;
        if live_calls >= s.max_calls.saturating_sub(s.outbound_reserve) {
            Some(Refusal::Capacity)
        } else if self.lag() > s.max_lag {
            Some(Refusal::Lag)
        } else {
            None
        }
    }

    /// Counts a refusal decided elsewhere (at the UDP gate, or no media port).
    pub fn refused(&self, why: Refusal) {
        self.refused[why.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// The runtime's lateness now (a decaying peak).
    pub fn lag(&self) -> Duration {
        Duration::from_micros(self.lag_us.load(Ordering::Relaxed))
    }

    pub fn stats(&self) -> AdmissionStats {
        AdmissionStats {
            admitted: self.admitted.load(Ordering::Relaxed),
            refused: std::array::from_fn(|i| self.refused[i].load(Ordering::Relaxed)),
            setting_up: self.setting_up.load(Ordering::Relaxed),
            lag_us: self.lag_us.load(Ordering::Relaxed),
        }
    }

    /// One probe: the probe woke `late` after it should have. The peak decays by an eighth a
    /// probe (to a tenth of itself in about 200 ms).
    fn record_lag(&self, late: Duration) {
        let late = late.as_micros().min(u128::from(u64::MAX)) as u64;
        let decayed = self.lag_us.load(Ordering::Relaxed) * 7 / 8;
        self.lag_us.store(late.max(decayed), Ordering::Relaxed);
    }
}

/// How often the lag probe wakes.
const PROBE: Duration = Duration::from_millis(10);

/// Runs the lag probe for `admission` until `stop`.
pub fn spawn_lag_probe(admission: Arc<Admission>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut due = tokio::time::Instant::now() + PROBE;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep_until(due) => {}
            }
            let now = tokio::time::Instant::now();
            // The timer's own granularity (about 1 ms) is not lateness.
            admission.record_lag(
                now.saturating_duration_since(due)
                    .saturating_sub(Duration::from_millis(1)),
            );
            due = now + PROBE;
        }
    });
}

/// The server's calls now: answered or being answered, and outbound ones ringing. Counted as
/// calls come and go; read without a lock, so nothing a panic poisons stands between an INVITE
/// and its admission.
#[derive(Debug, Default)]
pub struct CallCounter(AtomicUsize);

impl CallCounter {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn remove(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}

/// Locks `m` for a decision about an INVITE. A lock poisoned by a panic elsewhere answers
/// `None` (the caller refuses the INVITE: admission fails closed) after `reset` has put what
/// it guards back to a known state and the poison is cleared, so the next INVITE is decided
/// afresh.
pub(crate) fn lock_or_reset<'a, T>(
    m: &'a Mutex<T>,
    reset: impl FnOnce(&mut T),
) -> Option<MutexGuard<'a, T>> {
    match m.lock() {
        Ok(guard) => Some(guard),
        Err(poisoned) => {
            reset(&mut *poisoned.into_inner());
            m.clear_poison();
            tracing::error!("a SIP admission lock was poisoned by a panic; the INVITE is refused");
            None
        }
    }
}

/// Counts INVITEs per source over one-second windows.
pub(crate) struct RateLimiter {
    per_second: u32,
    pub(crate) window: Mutex<(Instant, HashMap<IpAddr, u32>)>,
}

impl RateLimiter {
    pub fn new(per_second: u32) -> RateLimiter {
        RateLimiter {
            per_second: per_second.max(1),
            window: Mutex::new((Instant::now(), HashMap::new())),
        }
    }

    /// Whether one more INVITE from `ip` is within its rate; `None` when that cannot be told
    /// (a poisoned lock), which the caller refuses.
    pub fn allow(&self, ip: IpAddr) -> Option<bool> {
        let mut w = lock_or_reset(&self.window, |w| {
            *w = (Instant::now(), HashMap::new());
        })?;
        let now = Instant::now();
        if now.duration_since(w.0) >= Duration::from_secs(1) {
            w.0 = now;
            w.1.clear();
        }
        let n = w.1.entry(ip).or_insert(0);
        *n += 1;
        Some(*n <= self.per_second)
    }
}

/// Poisons `m` as a panic while holding it would (tests).
#[cfg(test)]
pub(crate) fn poison<T: Send>(m: &Mutex<T>) {
    std::thread::scope(|s| {
        let _ = s
            .spawn(|| {
                let _guard = m.lock();
                panic!("poisoning the lock on purpose");
            })
            .join();
    });
    assert!(m.is_poisoned());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_rate_window_refuses_once_and_then_decides_afresh() {
        let limiter = RateLimiter::new(2);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(limiter.allow(ip), Some(true));
        poison(&limiter.window);
        assert_eq!(limiter.allow(ip), None);
        assert!(!limiter.window.is_poisoned());
        // The window was reset: two more within the rate, then over it.
        assert_eq!(limiter.allow(ip), Some(true));
        assert_eq!(limiter.allow(ip), Some(true));
        assert_eq!(limiter.allow(ip), Some(false));
    }

    #[test]
    fn the_call_count_follows_calls_and_never_wraps() {
        let calls = CallCounter::default();
        calls.add();
        calls.add();
        calls.remove();
        assert_eq!(calls.get(), 1);
        calls.remove();
        calls.remove();
        assert_eq!(calls.get(), 0);
    }

    fn settings() -> AdmissionSettings {
        AdmissionSettings {
            max_calls: 10,
            outbound_reserve: 2,
            max_setups: 3,
            max_lag: Duration::from_millis(40),
            retry_after_secs: 2,
        }
    }

    #[test]
    fn capacity_keeps_room_for_outbound_calls() {
        let a = Admission::new(settings());
        assert!(a.admit(7).is_ok());
        assert_eq!(a.admit(8).unwrap_err(), Refusal::Capacity);
        assert_eq!(a.stats().refused, [1, 0, 0, 0, 0]);
        assert_eq!(a.stats().admitted, 1);
    }

    #[test]
    fn setups_are_bounded_and_freed_when_done() {
        let a = Admission::new(settings());
        let permits: Vec<_> = (0..3).map(|_| a.admit(0).unwrap()).collect();
        assert_eq!(a.admit(0).unwrap_err(), Refusal::Setups);
        assert_eq!(a.stats().setting_up, 3);
        drop(permits);
        assert_eq!(a.stats().setting_up, 0);
        assert!(a.admit(0).is_ok());
    }

    #[test]
    fn a_late_runtime_refuses_until_the_lag_decays() {
        let a = Admission::new(settings());
        a.record_lag(Duration::from_millis(100));
        assert_eq!(a.admit(0).unwrap_err(), Refusal::Lag);
        for _ in 0..8 {
            a.record_lag(Duration::ZERO);
        }
        assert!(a.lag() < Duration::from_millis(40), "{:?}", a.lag());
        assert!(a.admit(0).is_ok());
    }
}
