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
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::admission::Admission;
use crate::call::Core;
use crate::server::RateLimiter;

/// INVITEs remembered at once, at most (about 20 MiB with both generations full).
const MAX_REMEMBERED: usize = 500_000;

/// The gate in front of the server's UDP socket.
pub(crate) struct Gate {
    socket: tokio::net::UdpSocket,
    admission: Arc<Admission>,
    limiter: Arc<RateLimiter>,
    /// Set once the server's call state exists (it is built after the transport).
    core: OnceLock<Weak<Core>>,
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
        t1: Duration,
        server: &str,
    ) -> Gate {
        Gate {
            socket,
            admission,
            limiter,
            core: OnceLock::new(),
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

    /// Connects the gate to the server's calls, whose number admission weighs.
    pub fn attach(&self, core: &Arc<Core>) {
        let _ = self.core.set(Arc::downgrade(core));
    }

    fn live_calls(&self) -> usize {
        self.core
            .get()
            .and_then(Weak::upgrade)
            .map(|core| core.call_count())
            .unwrap_or(0)
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
                let Ok(mut seen) = self.seen.lock() else {
                    return Verdict::Pass;
                };
                match seen.get(key, now) {
                    Some(true) => return Verdict::Answer(self.unavailable(&req, source)),
                    Some(false) => return Verdict::Pass,
                    None => {}
                }
                // Over the source's INVITE rate, an INVITE is dropped unanswered and forgotten:
                // the caller's retransmission tries again, a spoofed flood gets nothing
                // reflected, and a scanner cannot tell it from any other silence.
                if !self.limiter.allow(source.ip()) {
                    return Verdict::Drop;
                }
                let Some(why) = self.admission.would_refuse(self.live_calls()) else {
                    seen.insert(key, false, now);
                    return Verdict::Pass;
                };
                seen.insert(key, true, now);
                drop(seen);
                self.admission.refused(why);
                tracing::debug!(reason = why.as_str(), "an INVITE was refused at the socket");
                Verdict::Answer(self.unavailable(&req, source))
            }
            Method::Invite => Verdict::Pass,
        }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Invite,
    Ack,
}

/// The parts of an INVITE or ACK the gate needs, as slices of the datagram. Each header is
/// kept as (name as written, value).
struct Request<'a> {
    method: Method,
    vias: Vec<(&'a [u8], &'a [u8])>,
    from: (&'a [u8], &'a [u8]),
    to: (&'a [u8], &'a [u8]),
    call_id_line: (&'a [u8], &'a [u8]),
    cseq: (&'a [u8], &'a [u8]),
    call_id: &'a [u8],
    from_tag: &'a [u8],
    to_tag: Option<&'a [u8]>,
    branch: &'a [u8],
}

impl<'a> Request<'a> {
    /// Reads an INVITE or ACK from `packet`; `None` for any other message and for anything
    /// the gate does not read with certainty.
    fn parse(packet: &'a [u8]) -> Option<Request<'a>> {
        let method = if packet.starts_with(b"INVITE ") {
            Method::Invite
        } else if packet.starts_with(b"ACK ") {
            Method::Ack
        } else {
            return None;
        };
        let mut lines = Lines { rest: packet };
        let request_line = lines.next()?;
        if !request_line.ends_with(b" SIP/2.0") {
            return None;
        }
        let mut vias = Vec::new();
        let (mut from, mut to, mut call_id, mut cseq) = (None, None, None, None);
        loop {
            let line = lines.next()?;
            if line.is_empty() {
                break;
            }
            // A folded continuation line: leave the message to the full parser.
            if line[0] == b' ' || line[0] == b'\t' {
                return None;
            }
            let colon = line.iter().position(|&b| b == b':')?;
            let name = line[..colon].trim_ascii();
            let value = line[colon + 1..].trim_ascii();
            let slot = match name {
                n if n.eq_ignore_ascii_case(b"via") || n.eq_ignore_ascii_case(b"v") => {
                    vias.push((name, value));
                    continue;
                }
                n if n.eq_ignore_ascii_case(b"from") || n.eq_ignore_ascii_case(b"f") => &mut from,
                n if n.eq_ignore_ascii_case(b"to") || n.eq_ignore_ascii_case(b"t") => &mut to,
                n if n.eq_ignore_ascii_case(b"call-id") || n.eq_ignore_ascii_case(b"i") => {
                    &mut call_id
                }
                n if n.eq_ignore_ascii_case(b"cseq") => &mut cseq,
                _ => continue,
            };
            // A header the gate needs, twice: not a message to answer from raw bytes.
            if slot.replace((name, value)).is_some() {
                return None;
            }
        }
        let (from, to, call_id_line, cseq) = (from?, to?, call_id?, cseq?);
        let top = first_value(vias.first()?.1);
        let branch = param(params_of_via(top), b"branch")?;
        let from_tag = param(header_params(from.1), b"tag")?;
        let to_tag = param(header_params(to.1), b"tag");
        let call_id = call_id_line.1;
        if call_id.is_empty() || branch.is_empty() || from_tag.is_empty() {
            return None;
        }
        // CSeq names the request's method.
        let method_name: &[u8] = match method {
            Method::Invite => b"INVITE",
            Method::Ack => b"ACK",
        };
        if !cseq.1.ends_with(method_name) {
            return None;
        }
        Some(Request {
            method,
            vias,
            from,
            to,
            call_id_line,
            cseq,
            call_id,
            from_tag,
            to_tag,
            branch,
        })
    }
}

/// The header lines of a message: CRLF (or bare LF) separated; `None` past the end.
struct Lines<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let end = self.rest.iter().position(|&b| b == b'\n')?;
        let line = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

/// The first value of a comma-separated header (Via may carry several).
fn first_value(value: &[u8]) -> &[u8] {
    let mut quoted = false;
    for (i, &b) in value.iter().enumerate() {
        match b {
            b'"' => quoted = !quoted,
            b',' if !quoted => return value[..i].trim_ascii(),
            _ => {}
        }
    }
    value
}

/// A via-parm's parameters (after `SIP/2.0/UDP host:port`).
fn params_of_via(via: &[u8]) -> &[u8] {
    match via.iter().position(|&b| b == b';') {
        Some(i) => &via[i..],
        None => b"",
    }
}

/// A From or To value's header parameters: after the `>` of a name-addr, or after the URI.
fn header_params(value: &[u8]) -> &[u8] {
    let after = match value.iter().rposition(|&b| b == b'>') {
        Some(i) => &value[i + 1..],
        None => value,
    };
    match after.iter().position(|&b| b == b';') {
        Some(i) => &after[i..],
        None => b"",
    }
}

/// The value of parameter `name` in `;a=b;c` parameters (empty for a flag).
fn param<'a>(params: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    params.split(|&b| b == b';').find_map(|p| {
        let p = p.trim_ascii();
        let (n, v) = match p.iter().position(|&b| b == b'=') {
            Some(i) => (p[..i].trim_ascii(), p[i + 1..].trim_ascii()),
            None => (p, &p[p.len()..]),
        };
        n.eq_ignore_ascii_case(name).then_some(v)
    })
}

/// The top Via of a response to a request from `source`, with `received` when the sent-by
/// host is not the source address and `rport` filled in when the client asked for it, and
/// where the response goes: the source with `rport`, else the sent-by port at the source
/// address.
fn top_via(value: &[u8], source: SocketAddr) -> (Vec<u8>, SocketAddr) {
    let top = first_value(value);
    let others = &value[top.len()..];
    let (sent, params) = top.split_at(top.len() - params_of_via(top).len());
    let sent_by = sent
        .split(|b| b.is_ascii_whitespace())
        .rfind(|s| !s.is_empty());
    let (host, port) = sent_by.map(split_host_port).unwrap_or((b"", None));
    let mut out = sent.to_vec();
    let mut rport = false;
    for p in params
        .split(|&b| b == b';')
        .map(<[u8]>::trim_ascii)
        .filter(|p| !p.is_empty())
    {
        let name = p.split(|&b| b == b'=').next().unwrap_or_default();
        if name.eq_ignore_ascii_case(b"received") {
            continue;
        }
        out.push(b';');
        if p.eq_ignore_ascii_case(b"rport") {
            rport = true;
            out.extend_from_slice(format!("rport={}", source.port()).as_bytes());
        } else {
            out.extend_from_slice(p);
        }
    }
    let host_is_source = std::str::from_utf8(host)
        .ok()
        .and_then(|h| h.trim_matches(['[', ']']).parse::<IpAddr>().ok())
        == Some(source.ip());
    if !host_is_source {
        out.extend_from_slice(format!(";received={}", source.ip()).as_bytes());
    }
    out.extend_from_slice(others);
    let to = if rport {
        source
    } else {
        SocketAddr::new(source.ip(), port.unwrap_or(5060))
    };
    (out, to)
}

/// `host:port`, `host`, `[v6]:port` or `[v6]`.
fn split_host_port(sent_by: &[u8]) -> (&[u8], Option<u16>) {
    let colon = if sent_by.first() == Some(&b'[') {
        sent_by
            .iter()
            .position(|&b| b == b']')
            .and_then(|close| (sent_by.get(close + 1) == Some(&b':')).then_some(close + 1))
    } else {
        sent_by.iter().position(|&b| b == b':')
    };
    match colon {
        Some(i) => {
            let port = std::str::from_utf8(&sent_by[i + 1..])
                .ok()
                .and_then(|p| p.parse().ok());
            (&sent_by[..i], port)
        }
        None => (sent_by, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::AdmissionSettings;

    const INVITE: &str = "INVITE sip:sales@127.0.0.1:5060 SIP/2.0\r\n\
        Via: SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bK-1;rport\r\n\
        v: SIP/2.0/UDP 10.0.0.8;branch=z9hG4bK-0\r\n\
        Max-Forwards: 70\r\n\
        From: \"Ann\" <sip:ann@example.com>;tag=abc\r\n\
        To: <sip:sales@127.0.0.1>\r\n\
        Call-ID: c1@host\r\n\
        CSeq: 1 INVITE\r\n\
        Content-Length: 0\r\n\r\n";

    fn source() -> SocketAddr {
        "127.0.0.1:5070".parse().unwrap()
    }

    async fn gate(max_calls: usize) -> Gate {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let admission = Admission::new(AdmissionSettings {
            max_calls,
            outbound_reserve: 0,
            ..AdmissionSettings::default()
        });
        let limiter = Arc::new(RateLimiter::new(3));
        Gate::new(
            socket,
            admission,
            limiter,
            Duration::from_millis(500),
            "Switchboard",
        )
    }

    fn answer(v: Verdict) -> (String, SocketAddr) {
        match v {
            Verdict::Answer((bytes, to)) => (String::from_utf8(bytes).unwrap(), to),
            Verdict::Pass => panic!("passed"),
            Verdict::Drop => panic!("dropped"),
        }
    }

    #[tokio::test]
    async fn an_invite_with_room_passes_and_its_admission_is_decided() {
        let mut g = gate(10).await;
        assert!(!g.passed("c1@host", "z9hG4bK-1"));
        assert!(matches!(
            g.decide(INVITE.as_bytes(), source()),
            Verdict::Pass
        ));
        assert!(g.passed("c1@host", "z9hG4bK-1"));
        assert!(!g.passed("c1@host", "z9hG4bK-2"));
        // As the server asks, from the parsed request (its top Via rewritten on receipt).
        let parsed = rsipstack::sip::SipMessage::try_from(INVITE.as_bytes()).unwrap();
        let rsipstack::sip::SipMessage::Request(req) = parsed else {
            panic!("not a request");
        };
        assert!(g.passed_request(&req));
        // Its retransmission passes too, even once the node is full.
        g.admission = Admission::new(AdmissionSettings {
            max_calls: 0,
            ..AdmissionSettings::default()
        });
        assert!(matches!(
            g.decide(INVITE.as_bytes(), source()),
            Verdict::Pass
        ));
        assert_eq!(g.admission.stats().refused, [0; 4]);
    }

    #[tokio::test]
    async fn a_refused_invite_gets_a_stateless_503() {
        let g = gate(0).await;
        let (first, to) = answer(g.decide(INVITE.as_bytes(), source()));
        assert_eq!(to, source(), "rport: back to the source");
        assert!(
            first.starts_with("SIP/2.0 503 Service Unavailable\r\n"),
            "{first}"
        );
        assert!(
            first.contains(
                "Via: SIP/2.0/UDP 10.0.0.9:5070;branch=z9hG4bK-1;rport=5070;received=127.0.0.1\r\n"
            ),
            "{first}"
        );
        assert!(first.contains("v: SIP/2.0/UDP 10.0.0.8;branch=z9hG4bK-0\r\n"));
        assert!(first.contains("From: \"Ann\" <sip:ann@example.com>;tag=abc\r\n"));
        assert!(first.contains("To: <sip:sales@127.0.0.1>;tag=sb"));
        assert!(first.contains("Call-ID: c1@host\r\nCSeq: 1 INVITE\r\nRetry-After: 2\r\n"));
        assert!(first.ends_with("Content-Length: 0\r\n\r\n"));
        assert_eq!(g.admission.stats().refused, [1, 0, 0, 0]);
        assert!(!g.passed("c1@host", "z9hG4bK-1"));
        // The full parser reads it as a response to the INVITE.
        let parsed = rsipstack::sip::SipMessage::try_from(first.as_bytes()).unwrap();
        assert!(matches!(parsed, rsipstack::sip::SipMessage::Response(_)));

        // A retransmission: the same answer, counted once.
        let (again, _) = answer(g.decide(INVITE.as_bytes(), source()));
        assert_eq!(again, first);
        assert_eq!(g.admission.stats().refused, [1, 0, 0, 0]);

        // Its ACK carries our tag and stops here.
        let tag = first
            .split("tag=sb")
            .nth(1)
            .unwrap()
            .split("\r\n")
            .next()
            .unwrap();
        let ack = INVITE
            .replacen("INVITE sip", "ACK sip", 1)
            .replace("CSeq: 1 INVITE", "CSeq: 1 ACK")
            .replace(
                "To: <sip:sales@127.0.0.1>",
                &format!("To: <sip:sales@127.0.0.1>;tag=sb{tag}"),
            );
        assert!(matches!(g.decide(ack.as_bytes(), source()), Verdict::Drop));
        // An ACK of someone else's dialog passes.
        let other = ack.replace(";tag=sb", ";tag=other");
        assert!(matches!(
            g.decide(other.as_bytes(), source()),
            Verdict::Pass
        ));
    }

    #[tokio::test]
    async fn a_retransmission_of_a_refused_invite_stays_refused_when_room_appears() {
        let mut g = gate(0).await;
        let _ = answer(g.decide(INVITE.as_bytes(), source()));
        g.admission = Admission::new(AdmissionSettings::default());
        let _ = answer(g.decide(INVITE.as_bytes(), source()));
        // A new transaction (new branch) is admitted.
        let new = INVITE.replace("z9hG4bK-1", "z9hG4bK-2");
        assert!(matches!(g.decide(new.as_bytes(), source()), Verdict::Pass));
    }

    #[tokio::test]
    async fn past_the_source_rate_an_invite_is_dropped_and_forgotten() {
        let g = gate(10).await;
        for n in 0..3 {
            let invite = INVITE.replace("z9hG4bK-1", &format!("z9hG4bK-{n}"));
            assert!(matches!(
                g.decide(invite.as_bytes(), source()),
                Verdict::Pass
            ));
        }
        let invite = INVITE.replace("z9hG4bK-1", "z9hG4bK-9");
        assert!(matches!(
            g.decide(invite.as_bytes(), source()),
            Verdict::Drop
        ));
        assert!(!g.passed("c1@host", "z9hG4bK-9"));
        // Another source has its own count.
        let other: SocketAddr = "127.0.0.2:5070".parse().unwrap();
        assert!(matches!(g.decide(invite.as_bytes(), other), Verdict::Pass));
    }

    #[tokio::test]
    async fn without_rport_the_answer_goes_to_the_sent_by_port() {
        let g = gate(0).await;
        let invite = INVITE.replace(";rport", "");
        let (resp, to) = answer(g.decide(invite.as_bytes(), "127.0.0.1:40000".parse().unwrap()));
        assert_eq!(to, "127.0.0.1:5070".parse().unwrap());
        assert!(
            resp.contains("branch=z9hG4bK-1;received=127.0.0.1\r\n"),
            "{resp}"
        );
    }

    #[tokio::test]
    async fn what_the_gate_cannot_read_passes_to_the_full_parser() {
        let g = gate(0).await;
        let cases = [
            // In-dialog re-INVITE.
            INVITE.replace(
                "To: <sip:sales@127.0.0.1>",
                "To: <sip:sales@127.0.0.1>;tag=x",
            ),
            // Folded header.
            INVITE.replace("Call-ID: c1@host\r\n", "Call-ID:\r\n c1@host\r\n"),
            // No branch, no From tag, no Call-ID, two Call-IDs.
            INVITE.replace(";branch=z9hG4bK-1", ""),
            INVITE.replace(";tag=abc", ""),
            INVITE.replace("Call-ID: c1@host\r\n", ""),
            INVITE.replace("Call-ID: c1@host\r\n", "Call-ID: a\r\ni: b\r\n"),
            // CSeq of another method, a request line of another version, no end of headers.
            INVITE.replace("1 INVITE", "1 BYE"),
            INVITE.replace("SIP/2.0\r\nVia", "SIP/3.0\r\nVia"),
            INVITE.trim_end().to_string(),
            "OPTIONS sip:x SIP/2.0\r\n\r\n".to_string(),
            String::new(),
        ];
        for case in cases {
            assert!(
                matches!(g.decide(case.as_bytes(), source()), Verdict::Pass),
                "{case:?}"
            );
        }
        assert_eq!(g.admission.stats().refused, [0; 4]);
    }

    #[test]
    fn ipv6_sent_by() {
        assert_eq!(split_host_port(b"[::1]:5070"), (&b"[::1]"[..], Some(5070)));
        assert_eq!(split_host_port(b"[::1]"), (&b"[::1]"[..], None));
        assert_eq!(split_host_port(b"host"), (&b"host"[..], None));
        let (via, to) = top_via(
            b"SIP/2.0/UDP [::1]:5070;branch=z9hG4bK-1",
            "[::1]:5070".parse().unwrap(),
        );
        assert_eq!(via, b"SIP/2.0/UDP [::1]:5070;branch=z9hG4bK-1");
        assert_eq!(to, "[::1]:5070".parse().unwrap());
    }
}
