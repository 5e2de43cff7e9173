//! Where a call's audio goes, and whose packets are the caller's (strict RTP source).
//!
//! Audio goes to the address the SDP names (the signalled address), and only packets from it
//! are the caller's. A caller behind a NAT may send from (and listen on) another address; that
//! address is learned only while nothing at all has come from the signalled one, and only after
//! [`PROBATION`] consecutive in-sequence packets of our payload type from that one source
//! (Asterisk's `strictrtp` probation). A source on the signalled port (another IP: a host with
//! several addresses, or a NAT that keeps ports) is learned after its probation; any other
//! only once the session has also run for [`LEARN_AFTER`] with nothing from the signalled
//! address, so a stranger who merely knows our port never races the caller. Once learned, it
//! is the only other address heard; a packet from the signalled address takes the call back to
//! it for good. Everything else is foreign: counted, and never answered.
//!
//! A packet that reached the socket before the session started (while the call rang) decides
//! nothing: the session drops those unread ([`SourcePolicy::before_start`]).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::time::Instant;

/// How long the session waits for the signalled address before it may learn another.
pub const LEARN_AFTER: Duration = Duration::from_millis(500);

/// Consecutive in-sequence packets one other source must send before it is learned.
pub const PROBATION: u8 = 4;

/// A source on probation: its address, stream and the last sequence number seen.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    from: SocketAddr,
    ssrc: u32,
    seq: u16,
    count: u8,
}

/// The session's decision about one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The caller's: play it.
    Caller,
    /// From an address the call did not negotiate: ignore it.
    Foreign,
}

/// Which addresses a call's RTP is exchanged with.
#[derive(Debug)]
pub struct SourcePolicy {
    signalled: SocketAddr,
    /// Another address learned while the signalled one stayed silent (a NAT).
    learned: Option<SocketAddr>,
    heard_signalled: bool,
    /// When the session started (or the signalled address last changed).
    since: Instant,
    candidate: Option<Candidate>,
    /// Foreign packets ignored so far.
    pub foreign: u64,
}

impl SourcePolicy {
    pub fn new(signalled: SocketAddr, now: Instant) -> SourcePolicy {
        SourcePolicy {
            signalled,
            learned: None,
            heard_signalled: false,
            since: now,
            candidate: None,
            foreign: 0,
        }
    }

    /// Where our audio goes.
    pub fn target(&self) -> SocketAddr {
        self.learned.unwrap_or(self.signalled)
    }

    /// Whether a packet that arrived before the session started is kept: only one from the
    /// signalled address is; any other decides nothing and counts as foreign.
    pub fn before_start(&mut self, from: SocketAddr) -> bool {
        if from == self.signalled {
            return true;
        }
        self.foreign += 1;
        false
    }

    /// The session starts now: the wait for the signalled address counts from here.
    pub fn started(&mut self, now: Instant) {
        self.since = now;
        self.candidate = None;
    }

    /// Whether `from` is the caller's address as things stand (the signalled one, or the one
    /// learned): the per-packet fast path, which needs no clock.
    pub fn known(&mut self, from: SocketAddr) -> bool {
        if from == self.signalled {
            self.heard_signalled = true;
            self.learned = None;
            self.candidate = None;
            return true;
        }
        self.learned == Some(from)
    }

    /// Whether a packet is the caller's. `ours` says whether it carries the call's payload
    /// type (only such packets count toward a probation).
    pub fn admit(
        &mut self,
        from: SocketAddr,
        ssrc: u32,
        seq: u16,
        ours: bool,
        now: Instant,
    ) -> Source {
        if self.known(from) {
            return Source::Caller;
        }
        if self.heard_signalled || self.learned.is_some() || !ours {
            self.foreign += 1;
            return Source::Foreign;
        }
        let candidate = match self.candidate {
            Some(c) if c.from == from && c.ssrc == ssrc && seq == c.seq.wrapping_add(1) => {
                Candidate {
                    seq,
                    count: c.count.saturating_add(1),
                    ..c
                }
            }
            _ => Candidate {
                from,
                ssrc,
                seq,
                count: 1,
            },
        };
        self.candidate = Some(candidate);
        let waited =
            from.port() == self.signalled.port() || now.duration_since(self.since) >= LEARN_AFTER;
        if candidate.count >= PROBATION && waited {
            self.learned = Some(from);
            self.candidate = None;
            return Source::Caller;
        }
        self.foreign += 1;
        Source::Foreign
    }

    /// The signalled address from a new offer or answer (a re-INVITE or UPDATE). The same
    /// address changes nothing; a new one is the only one heard from now on, with learning
    /// starting over.
    pub fn signal(&mut self, addr: SocketAddr, now: Instant) {
        if addr == self.signalled {
            return;
        }
        *self = SourcePolicy {
            foreign: self.foreign,
            ..SourcePolicy::new(addr, now)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// `n` in-sequence packets from `from`, `gap` apart, from `at`; the last decision.
    fn stream(p: &mut SourcePolicy, from: u16, n: u16, at: Instant, gap: Duration) -> Source {
        let mut last = Source::Foreign;
        for i in 0..n {
            last = p.admit(addr(from), 9, 100 + i, true, at + gap * u32::from(i));
        }
        last
    }

    #[test]
    fn only_the_signalled_address_is_heard_once_it_has_spoken() {
        let t = Instant::now();
        let mut p = SourcePolicy::new(addr(4000), t);
        assert_eq!(p.admit(addr(4000), 1, 1, true, t), Source::Caller);
        let later = t + Duration::from_secs(5);
        assert_eq!(
            stream(&mut p, 5000, 50, later, Duration::from_millis(20)),
            Source::Foreign
        );
        assert_eq!(p.target(), addr(4000));
        assert_eq!(p.foreign, 50);
    }

    #[test]
    fn another_source_is_learned_only_after_the_wait_and_its_probation() {
        let t = Instant::now();
        let mut p = SourcePolicy::new(addr(4000), t);
        // In sequence, but too early.
        assert_eq!(
            stream(&mut p, 5000, 10, t, Duration::from_millis(20)),
            Source::Foreign
        );
        assert_eq!(p.target(), addr(4000));
        // After the wait, its probation starts over with a gap in sequence.
        let late = t + LEARN_AFTER;
        assert_eq!(p.admit(addr(5000), 9, 200, true, late), Source::Foreign);
        assert_eq!(p.admit(addr(5000), 9, 202, true, late), Source::Foreign);
        assert_eq!(p.admit(addr(5000), 9, 203, true, late), Source::Foreign);
        assert_eq!(p.admit(addr(5000), 9, 204, true, late), Source::Foreign);
        assert_eq!(p.admit(addr(5000), 9, 205, true, late), Source::Caller);
        assert_eq!(p.target(), addr(5000));
        // Learned: nobody else is.
        assert_eq!(
            stream(&mut p, 6000, 10, late, Duration::from_millis(20)),
            Source::Foreign
        );
        assert_eq!(p.target(), addr(5000));
        // The signalled address takes the call back.
        assert_eq!(p.admit(addr(4000), 1, 1, true, late), Source::Caller);
        assert_eq!(p.target(), addr(4000));
        assert_eq!(p.admit(addr(5000), 9, 206, true, late), Source::Foreign);
    }

    #[test]
    fn a_source_on_the_signalled_port_is_learned_after_its_probation_alone() {
        let t = Instant::now();
        let mut p = SourcePolicy::new(SocketAddr::from(([192, 0, 2, 2], 4000)), t);
        assert_eq!(
            stream(
                &mut p,
                4000,
                u16::from(PROBATION),
                t,
                Duration::from_millis(20)
            ),
            Source::Caller
        );
        assert_eq!(p.target(), addr(4000));
        assert_eq!(p.foreign, u64::from(PROBATION) - 1);
    }

    #[test]
    fn two_interleaved_sources_never_pass_probation() {
        let t = Instant::now() - LEARN_AFTER;
        let mut p = SourcePolicy::new(addr(4000), t);
        let now = Instant::now();
        for i in 0..20 {
            assert_eq!(p.admit(addr(5000), 9, i, true, now), Source::Foreign);
            assert_eq!(p.admit(addr(5002), 8, i, true, now), Source::Foreign);
        }
        // Nor do packets of another payload type.
        for i in 0..20 {
            assert_eq!(p.admit(addr(5000), 9, 100 + i, false, now), Source::Foreign);
        }
        assert_eq!(p.target(), addr(4000));
    }

    #[test]
    fn the_same_signalled_address_changes_nothing_and_a_new_one_starts_over() {
        let t = Instant::now();
        let mut p = SourcePolicy::new(addr(4000), t);
        assert_eq!(p.admit(addr(4000), 1, 1, true, t), Source::Caller);
        let later = t + Duration::from_secs(10);
        p.signal(addr(4000), later);
        assert_eq!(p.admit(addr(5000), 9, 1, true, later), Source::Foreign);
        assert_eq!(
            stream(&mut p, 5000, 10, later, Duration::from_millis(100)),
            Source::Foreign
        );
        // Moved: audio goes to the new address, which is the only one heard at once.
        p.signal(addr(4100), later);
        assert_eq!(p.target(), addr(4100));
        assert_eq!(p.admit(addr(4000), 1, 2, true, later), Source::Foreign);
        assert_eq!(p.admit(addr(4100), 1, 3, true, later), Source::Caller);
    }

    #[test]
    fn packets_before_the_start_count_as_foreign_unless_signalled() {
        let mut p = SourcePolicy::new(addr(4000), Instant::now());
        assert!(p.before_start(addr(4000)));
        assert!(!p.before_start(addr(5000)));
        assert_eq!(p.foreign, 1);
        assert_eq!(p.target(), addr(4000));
    }
}
