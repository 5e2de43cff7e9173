//! The UDP gate: new INVITEs the server cannot take are refused at the socket, before the
//! transaction layer sees them.
//!
//! The gate wraps the UDP socket the transaction layer reads from. Every datagram that is not
//! a new INVITE (no To tag) passes straight through. A new INVITE is looked at from its raw
//! bytes: when admission ([`crate::admission`]) would refuse it, the gate answers
//! `503 Service Unavailable` with `Retry-After` itself, as a stateless UAS (RFC 3261 §8.2.7):
//!
//! - the response copies Via (with `received` and `rport` filled in), From, Call-ID and CSeq,
//!   and adds a To tag derived from the request (a keyed hash of Call-ID, From tag and
//!   branch), so a retransmission of the INVITE gets the very same response;
//! - a refused INVITE's transaction is remembered only as a 64-bit key in a table that forgets
//!   after 16*T1 to 32*T1 (8 to 16 s), as long as the transaction layer remembers a finished
//!   transaction ([`crate::retention`]): its retransmissions are answered 503 again even if
//!   room has appeared meanwhile, and nothing else is kept (no parsed message, no timers). A
//!   caller retransmits a refused INVITE only while it has not had the 503; one that comes
//!   later is weighed again, as a new one;
//! - the ACK for the 503 is recognised by its To tag and dropped.
//!
//! An INVITE the gate lets through is remembered the same way, and the decision is final: the
//! server takes it without weighing admission again ([`Gate::passed`]), and its retransmissions
//! pass to the transaction layer, which absorbs them. So admission is decided once per
//! transaction, at the socket, and no INVITE the gate passed is refused later through the
//! transaction layer.
//!
//! The source's INVITE rate (`invites_per_second`) is applied here too, before admission: an
//! INVITE past it is dropped unanswered.
//!
//! What the gate does not understand (folded header lines, a missing header, a second request
//! line) it passes through: the server's own admission check refuses such an INVITE through
//! the transaction layer, at the usual cost. Over TCP and TLS nothing is gated; those INVITEs
//! meet the same admission check in the server.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::admission::{Admission, CallCounter, RateLimiter, Refusal, lock_or_reset};

mod parse;
#[cfg(test)]
mod tests;

use parse::{Method, Request, first_value, param, params_of_via, top_via};

/// INVITEs remembered at once, at most (about 20 MiB with both generations full).
const MAX_REMEMBERED: usize = 500_000;

/// The gate in front of the server's UDP socket.
pub(crate) struct Gate {
    socket: tokio::net::UdpSocket,
    admission: Arc<Admission>,
    limiter: Arc<RateLimiter>,
    /// The server's calls now, which admission weighs.
    calls: Arc<CallCounter>,
    keys: RandomState,
    /// New INVITEs seen: refused (`true`) or passed.
    seen: Mutex<Remembered>,
    server: String,
}

/// Keys of INVITEs and what the gate decided, in two generations: the current one, and the
/// previous one, dropped when the current one is `window` old (at the next INVITE, or the
/// next [`Gate::age`], whichever comes first).
struct Remembered {
    window: Duration,
    since: Instant,
    current: HashMap<u64, bool>,
    previous: HashMap<u64, bool>,
}

impl Remembered {
    /// Forgets every decision (a poisoned lock's state is not trusted).
    fn forget(&mut self) {
        self.current.clear();
        self.previous.clear();
        self.since = Instant::now();
    }

    fn rotate(&mut self, now: Instant) {
        if now.duration_since(self.since) >= self.window {
            self.previous = std::mem::take(&mut self.current);
            self.since = now;
        }
    }

    fn get(&mut self, key: u64, now: Instant) -> Option<bool> {
        self.rotate(now);
        self.current
            .get(&key)
            .or_else(|| self.previous.get(&key))
            .copied()
    }

    fn insert(&mut self, key: u64, refused: bool, now: Instant) {
        self.rotate(now);
        if self.current.len() < MAX_REMEMBERED {
            self.current.insert(key, refused);
        }
    }
}

impl Gate {
    pub fn new(
        socket: tokio::net::UdpSocket,
        admission: Arc<Admission>,
        limiter: Arc<RateLimiter>,
        calls: Arc<CallCounter>,
        t1: Duration,
        server: &str,
    ) -> Gate {
        Gate {
            socket,
            admission,
            limiter,
            calls,
            keys: RandomState::new(),
            seen: Mutex::new(Remembered {
                window: t1 * 16,
                since: Instant::now(),
                current: HashMap::new(),
                previous: HashMap::new(),
            }),
            server: server.to_string(),
        }
    }

    /// Drops the generation of remembered INVITEs that is due, even when no INVITE comes to
    /// do it: after a flood, the flood's keys do not outstay their window.
    pub fn age(&self) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.rotate(Instant::now());
        }
    }

    fn hash(&self, parts: &[&[u8]]) -> u64 {
        let mut h = self.keys.build_hasher();
        for part in parts {
            part.hash(&mut h);
        }
        h.finish()
    }

    /// The To tag of the 503 for a request: the same for its retransmissions and its ACK.
    fn tag(&self, req: &Request) -> String {
        format!(
            "sb{:016x}",
            self.hash(&[req.call_id, req.from_tag, req.branch])
        )
    }

    /// What to do with one datagram from `source`.
    fn decide(&self, packet: &[u8], source: SocketAddr) -> Verdict {
        let Some(req) = Request::parse(packet) else {
            return Verdict::Pass;
        };
        match req.method {
            Method::Ack => {
                let ours = req
                    .to_tag
                    .is_some_and(|tag| tag == self.tag(&req).as_bytes());
                if ours { Verdict::Drop } else { Verdict::Pass }
            }
            Method::Invite if req.to_tag.is_none() => {
                let key = self.hash(&[req.call_id, req.branch]);
                let now = Instant::now();
                // A poisoned lock cannot say what was decided: refused, not let through.
                let Some(mut seen) = lock_or_reset(&self.seen, Remembered::forget) else {
                    return self.refuse(Refusal::Internal, &req, source);
                };
                match seen.get(key, now) {
                    Some(true) => return Verdict::Answer(self.unavailable(&req, source)),
                    Some(false) => return Verdict::Pass,
                    None => {}
                }
                // Over the source's INVITE rate, an INVITE is dropped unanswered and forgotten:
                // the caller's retransmission tries again, a spoofed flood gets nothing
                // reflected, and a scanner cannot tell it from any other silence.
                match self.limiter.allow(source.ip()) {
                    Some(true) => {}
                    Some(false) => return Verdict::Drop,
                    None => return self.refuse(Refusal::Internal, &req, source),
                }
                let Some(why) = self.admission.would_refuse(self.calls.get()) else {
                    seen.insert(key, false, now);
                    return Verdict::Pass;
                };
                seen.insert(key, true, now);
                drop(seen);
                self.refuse(why, &req, source)
            }
            Method::Invite => Verdict::Pass,
        }
    }

    /// Refuses an INVITE at the socket (counted): a 503.
    fn refuse(&self, why: Refusal, req: &Request, source: SocketAddr) -> Verdict {
        self.admission.refused(why);
        tracing::debug!(reason = why.as_str(), "an INVITE was refused at the socket");
        Verdict::Answer(self.unavailable(req, source))
    }

    /// Whether the gate let this INVITE through: then admission has been decided.
    pub fn passed_request(&self, req: &rsipstack::sip::Request) -> bool {
        use rsipstack::sip::prelude::HeadersExt;
        let (Ok(call_id), Ok(via)) = (req.call_id_header(), req.via_header()) else {
            return false;
        };
        let top = first_value(via.value().as_bytes());
        let Some(branch) = param(params_of_via(top), b"branch") else {
            return false;
        };
        let (Ok(call_id), Ok(branch)) = (
            std::str::from_utf8(call_id.value().as_bytes().trim_ascii()),
            std::str::from_utf8(branch),
        ) else {
            return false;
        };
        self.passed(call_id, branch)
    }

    /// Whether the gate let the INVITE with this Call-ID and top Via branch through.
    pub fn passed(&self, call_id: &str, branch: &str) -> bool {
        let key = self.hash(&[call_id.as_bytes(), branch.as_bytes()]);
        self.seen
            .lock()
            .is_ok_and(|mut seen| seen.get(key, Instant::now()) == Some(false))
    }

    /// The 503 for `req`, and where it goes (RFC 3261 §18.2.2).
    fn unavailable(&self, req: &Request, source: SocketAddr) -> (Vec<u8>, SocketAddr) {
        let retry = self.admission.settings().retry_after_secs;
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(b"SIP/2.0 503 Service Unavailable\r\n");
        let (top, to) = top_via(req.vias[0].1, source);
        out.extend_from_slice(req.vias[0].0);
        out.extend_from_slice(b": ");
        out.extend_from_slice(&top);
        out.extend_from_slice(b"\r\n");
        for (name, value) in &req.vias[1..] {
            line(&mut out, name, value);
        }
        line(&mut out, req.from.0, req.from.1);
        let tagged = format!(";tag={}", self.tag(req));
        out.extend_from_slice(req.to.0);
        out.extend_from_slice(b": ");
        out.extend_from_slice(req.to.1);
        out.extend_from_slice(tagged.as_bytes());
        out.extend_from_slice(b"\r\n");
        line(&mut out, req.call_id_line.0, req.call_id_line.1);
        line(&mut out, req.cseq.0, req.cseq.1);
        out.extend_from_slice(format!("Retry-After: {retry}\r\n").as_bytes());
        out.extend_from_slice(format!("Server: {}\r\n", self.server).as_bytes());
        out.extend_from_slice(b"Content-Length: 0\r\n\r\n");
        (out, to)
    }
}

fn line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

enum Verdict {
    Pass,
    Drop,
    Answer((Vec<u8>, SocketAddr)),
}

#[async_trait::async_trait]
impl rsipstack::platform::net::UdpSocket for Gate {
    async fn recv_from(&self, buf: &mut [u8]) -> rsipstack::Result<(usize, SocketAddr)> {
        loop {
            let (len, source) = self.socket.recv_from(buf).await?;
            let packet = buf.get(..len).unwrap_or_default();
            match self.decide(packet, source) {
                Verdict::Pass => return Ok((len, source)),
                Verdict::Drop => {}
                Verdict::Answer((response, to)) => {
                    let _ = self.socket.send_to(&response, to).await;
                }
            }
        }
    }

    async fn send_to(&self, buf: &[u8], addr: SocketAddr) -> rsipstack::Result<usize> {
        Ok(self.socket.send_to(buf, addr).await?)
    }

    fn local_addr(&self) -> rsipstack::Result<SocketAddr> {
        Ok(self.socket.local_addr()?)
    }
}
