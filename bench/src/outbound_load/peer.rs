//! The answering peer: a SIP UAS on one UDP socket standing in for a carrier's far end. Each
//! INVITE gets an outcome from the configured shares:
//!
//! - `answer`: 180, then 200 with SDP after the ring delay; a short "hello" as a person says it
//!   (so answering-machine detection hears a person), then the RTP that arrives is echoed back
//!   to its sender (its payload, in the peer's own stream) and counted (sequence gaps are
//!   losses);
//! - `machine`: answered the same way, but it plays a greeting (speech or a speech-like pattern,
//!   then a beep, then silence) instead of echoing, as an answering machine would;
//! - `busy`: 486;
//! - `no_answer`: 180 and nothing more until the caller's CANCEL (200, then 487).
//!
//! It notes per call when the INVITE came, the answer, the ACK, the first RTP and the end, and
//! the RTP sent, received and lost; per calling number (each campaign calls from its own) the
//! calls in flight at once and the smallest gap between INVITEs: the pacing as the far end saw
//! it. One task per call; the RTP path reuses one buffer per call and allocates nothing.
//!
//! Past 600 lines on purpose: one UAS, read top to bottom (the socket's dispatch, each call's
//! legs, its RTP), with its tests after it.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use switchboard_sip::rtp::LossCounter;
use switchboard_sip::sdp::{self, Codec, MediaDescription};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::MissedTickBehavior;

use super::sipmsg::Msg;
use crate::rtp::{RtpOut, rtp_payload};

/// What the peer does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Answer,
    Machine,
    Busy,
    NoAnswer,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Answer, Kind::Machine, Kind::Busy, Kind::NoAnswer];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Answer => "answer",
            Kind::Machine => "machine",
            Kind::Busy => "busy",
            Kind::NoAnswer => "no_answer",
        }
    }

    /// The outcome the service should record for it (`amd`: answering-machine detection is
    /// on).
    pub fn expected_outcome(self, amd: bool) -> &'static str {
        match self {
            Kind::Machine if amd => "voicemail",
            Kind::Answer | Kind::Machine => "answered",
            Kind::Busy => "busy",
            Kind::NoAnswer => "no_answer",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// Outcome shares, dealt out by smooth weighted round robin: every window of calls matches the
/// shares as closely as whole calls allow, so a short run gets the configured mix too.
#[derive(Debug, Clone)]
pub struct Mix {
    weights: Vec<(Kind, i64)>,
    current: Vec<i64>,
}

impl std::str::FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Mix, String> {
        let mut weights = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (k, w) = part
                .split_once('=')
                .ok_or_else(|| format!("expected kind=weight, got {part:?}"))?;
            let kind = Kind::parse(k.trim())
                .ok_or_else(|| format!("{k:?}: one of answer, machine, busy, no_answer"))?;
            let w: i64 = w.trim().parse().map_err(|_| format!("bad weight {w:?}"))?;
            if w < 0 {
                return Err(format!("negative weight {w}"));
            }
            if w > 0 {
                weights.push((kind, w));
            }
        }
        if weights.is_empty() {
            return Err("no outcome has a positive weight".into());
        }
        Ok(Mix {
            current: vec![0; weights.len()],
            weights,
        })
    }
}

impl Mix {
    pub fn next(&mut self) -> Kind {
        let total: i64 = self.weights.iter().map(|(_, w)| w).sum();
        let mut best = 0;
        for (i, (_, w)) in self.weights.iter().enumerate() {
            self.current[i] += w;
            if self.current[i] > self.current[best] {
                best = i;
            }
        }
        self.current[best] -= total;
        self.weights[best].0
    }

    /// Each kind's share, 0-1.
    pub fn shares(&self) -> BTreeMap<&'static str, f64> {
        let total: i64 = self.weights.iter().map(|(_, w)| w).sum();
        self.weights
            .iter()
            .map(|(k, w)| (k.name(), *w as f64 / total as f64))
            .collect()
    }
}

pub struct PeerConfig {
    pub ip: IpAddr,
    pub port: u16,
    pub mix: Mix,
    /// From the INVITE to the 200 of answered calls.
    pub ring: Duration,
    pub codec: Codec,
    /// An answered call the caller has not ended after this is ended by the peer (BYE).
    pub hold_cap: Duration,
    /// An unanswered call the caller has not cancelled after this gets 480.
    pub ring_cap: Duration,
    /// The machine's greeting, encoded in `codec`, 20 ms a frame.
    pub greeting: Vec<Vec<u8>>,
    /// What a person says on answering (then they echo what they hear).
    pub hello: Vec<Vec<u8>>,
}

/// One call as the peer saw it.
#[derive(Debug, Clone)]
pub struct PeerCall {
    pub call_id: String,
    pub kind: Kind,
    pub invite_at: Instant,
    pub invite_wall: DateTime<Utc>,
    pub answered_at: Option<Instant>,
    pub ack_at: Option<Instant>,
    pub first_rtp_at: Option<Instant>,
    pub ended_at: Instant,
    /// `caller_bye`, `cancelled`, `peer_bye`, `rejected` (our 486/480), `no_ack`, `bad_offer`.
    pub end: &'static str,
    pub rtp_sent: u64,
    pub rtp_received: u64,
    pub rtp_lost: u64,
}

/// The far end's view of one calling number's pacing.
#[derive(Debug, Clone, Default)]
pub struct FarEnd {
    pub invites: u64,
    pub live: i64,
    pub max_live: i64,
    last_invite: Option<Instant>,
    pub min_gap_secs: Option<f64>,
}

/// The running figures, read while the run goes.
#[derive(Default)]
pub struct Live {
    /// From INVITE to the end of the call (or of its ringing).
    pub in_flight: AtomicI64,
    /// Answered and not ended: the media is flowing.
    pub talking: AtomicI64,
    pub invites: AtomicU64,
    pub rtp_sent: AtomicU64,
    pub rtp_received: AtomicU64,
    pub rtp_lost: AtomicU64,
    /// Datagrams that were not SIP or belonged to no call.
    pub stray: AtomicU64,
}

struct Route {
    tx: mpsc::UnboundedSender<Msg>,
    /// The call has stopped counting as in flight.
    ended: Arc<AtomicBool>,
    from: Arc<str>,
}

struct Shared {
    cfg: PeerConfig,
    sock: UdpSocket,
    addr: SocketAddr,
    live: Live,
    routes: Mutex<HashMap<String, Route>>,
    far: Mutex<BTreeMap<String, FarEnd>>,
    mix: Mutex<Mix>,
    calls: Mutex<Vec<PeerCall>>,
    /// The silence frame in `cfg.codec`.
    silence: Vec<u8>,
}

/// The running peer, on a thread of its own (named `peer`, so its CPU can be read apart).
pub struct Peer {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

const T1: Duration = Duration::from_millis(500);
/// How long a call's task stays after its end to answer retransmissions.
const LINGER: Duration = Duration::from_secs(4);

impl Peer {
    /// Starts the peer on its own thread and single-threaded runtime.
    pub fn start(cfg: PeerConfig) -> anyhow::Result<Peer> {
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("peer".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(anyhow::Error::from(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    match Shared::bind(cfg).await {
                        Ok(shared) => {
                            let dispatcher = tokio::spawn(dispatch(shared.clone()));
                            let _ = ready_tx.send(Ok(shared));
                            let _ = stopped.await;
                            dispatcher.abort();
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                        }
                    }
                });
            })?;
        let shared = ready
            .recv()
            .context("the peer's thread ended before it started")??;
        Ok(Peer {
            addr: shared.addr,
            shared,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn live(&self) -> &Live {
        &self.shared.live
    }

    /// Pacing by calling number.
    pub fn far_ends(&self) -> BTreeMap<String, FarEnd> {
        self.shared.far.lock().unwrap().clone()
    }

    /// The calls that have ended so far.
    pub fn calls(&self) -> Vec<PeerCall> {
        self.shared.calls.lock().unwrap().clone()
    }

    /// Forgets the calls so far (a warm-up before the measured run).
    pub fn forget(&self) {
        self.shared.calls.lock().unwrap().clear();
        self.shared.far.lock().unwrap().clear();
        let live = &self.shared.live;
        for counter in [
            &live.invites,
            &live.rtp_sent,
            &live.rtp_received,
            &live.rtp_lost,
            &live.stray,
        ] {
            counter.store(0, std::sync::atomic::Ordering::Relaxed);
        }
    }

    pub fn shares(&self) -> BTreeMap<&'static str, f64> {
        self.shared.cfg.mix.shares()
    }

    pub fn stop(mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Larger socket buffers for bursts of signalling (best effort: the kernel caps them).
fn grow_buffers(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 4 << 20;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: the descriptor is open for the life of `sock`, and the option value is a
        // c_int on this stack frame whose size is passed.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

impl Shared {
    async fn bind(cfg: PeerConfig) -> anyhow::Result<Arc<Shared>> {
        if cfg
            .greeting
            .iter()
            .chain(&cfg.hello)
            .any(|f| f.len() != 160)
        {
            bail!("the greeting is not encoded in 20 ms frames");
        }
        let sock = UdpSocket::bind((cfg.ip, cfg.port))
            .await
            .with_context(|| format!("binding the peer's SIP socket on {}:{}", cfg.ip, cfg.port))?;
        grow_buffers(&sock);
        let addr = sock.local_addr()?;
        let silence = {
            let mut enc = switchboard_sip::audio_codec::create_encoder(cfg.codec.codec_type());
            enc.encode(&vec![0i16; cfg.codec.frame_samples()])
        };
        Ok(Arc::new(Shared {
            mix: Mutex::new(cfg.mix.clone()),
            cfg,
            sock,
            addr,
            live: Live::default(),
            routes: Mutex::new(HashMap::new()),
            far: Mutex::new(BTreeMap::new()),
            calls: Mutex::new(Vec::new()),
            silence,
        }))
    }

    async fn send(&self, text: &str, to: SocketAddr) {
        let _ = self.sock.send_to(text.as_bytes(), to).await;
    }

    fn begin(&self, from: &str, now: Instant) {
        self.live.in_flight.fetch_add(1, Ordering::Relaxed);
        self.live.invites.fetch_add(1, Ordering::Relaxed);
        let mut far = self.far.lock().unwrap();
        let f = far.entry(from.to_string()).or_default();
        f.invites += 1;
        f.live += 1;
        f.max_live = f.max_live.max(f.live);
        if let Some(last) = f.last_invite {
            let gap = now.duration_since(last).as_secs_f64();
            f.min_gap_secs = Some(f.min_gap_secs.map_or(gap, |g| g.min(gap)));
        }
        f.last_invite = Some(now);
    }

    /// The call no longer counts as in flight (once, whoever notices first).
    fn end(&self, ended: &AtomicBool, from: &str) {
        if ended.swap(true, Ordering::Relaxed) {
            return;
        }
        self.live.in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(f) = self.far.lock().unwrap().get_mut(from) {
            f.live -= 1;
        }
    }
}

/// Reads the SIP socket and hands each message to its call.
async fn dispatch(sh: Arc<Shared>) {
    let mut buf = vec![0u8; 65_536];
    loop {
        let Ok((n, src)) = sh.sock.recv_from(&mut buf).await else {
            continue;
        };
        let Some(msg) = Msg::parse(&buf[..n]) else {
            sh.live.stray.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let route = {
            let routes = sh.routes.lock().unwrap();
            routes
                .get(msg.call_id())
                .map(|r| (r.tx.clone(), r.ended.clone(), r.from.clone()))
        };
        match route {
            Some((tx, ended, from)) => {
                // The caller's BYE or CANCEL ends the call for pacing right here, before any
                // INVITE behind it in the socket is read.
                if msg.is("BYE") || msg.is("CANCEL") {
                    sh.end(&ended, &from);
                }
                let _ = tx.send(msg);
            }
            None if msg.is("INVITE") && !msg.has_to_tag() => {
                let now = Instant::now();
                let kind = sh.mix.lock().unwrap().next();
                let from: Arc<str> = msg.caller().into();
                let ended = Arc::new(AtomicBool::new(false));
                let (tx, rx) = mpsc::unbounded_channel();
                sh.begin(&from, now);
                sh.routes.lock().unwrap().insert(
                    msg.call_id().to_string(),
                    Route {
                        tx,
                        ended: ended.clone(),
                        from: from.clone(),
                    },
                );
                let call = Call {
                    sh: sh.clone(),
                    src,
                    tag: format!("{:x}", rand::random::<u64>()),
                    ended,
                    from,
                    record: PeerCall {
                        call_id: msg.call_id().to_string(),
                        kind,
                        invite_at: now,
                        invite_wall: Utc::now(),
                        answered_at: None,
                        ack_at: None,
                        first_rtp_at: None,
                        ended_at: now,
                        end: "",
                        rtp_sent: 0,
                        rtp_received: 0,
                        rtp_lost: 0,
                    },
                    invite: msg,
                    rx,
                };
                tokio::spawn(call.run());
            }
            None if msg.is("OPTIONS") => {
                let text = msg.response(200, "OK", "peer", "", "");
                sh.send(&text, src).await;
            }
            None if msg.method.is_some() && !msg.is("ACK") => {
                let text = msg.response(481, "Call/Transaction Does Not Exist", "peer", "", "");
                sh.send(&text, src).await;
            }
            None => {
                sh.live.stray.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// What came while waiting for an ACK.
enum Waited {
    Ack,
    Bye(Msg),
    Cancel(Msg),
    Timeout,
}

/// How a call's media runs.
struct Media {
    rtp: UdpSocket,
    remote: SocketAddr,
    payload_type: u8,
    sdp: String,
}

struct Call {
    sh: Arc<Shared>,
    src: SocketAddr,
    tag: String,
    ended: Arc<AtomicBool>,
    from: Arc<str>,
    record: PeerCall,
    invite: Msg,
    rx: mpsc::UnboundedReceiver<Msg>,
}

impl Call {
    async fn reply(&self, msg: &Msg, code: u16, reason: &str, extra: &str, body: &str) -> String {
        let text = msg.response(code, reason, &self.tag, extra, body);
        self.sh.send(&text, self.src).await;
        text
    }

    fn end_pacing(&self) {
        self.sh.end(&self.ended, &self.from);
    }

    async fn run(mut self) {
        let invite = self.invite.clone();
        self.reply(&invite, 100, "Trying", "", "").await;
        self.record.end = match self.record.kind {
            Kind::Busy => {
                self.end_pacing();
                let text = self.reply(&invite, 486, "Busy Here", "", "").await;
                self.until_ack(&text).await;
                "rejected"
            }
            Kind::NoAnswer => self.ring_out().await,
            Kind::Answer | Kind::Machine => self.answer().await,
        };
        self.end_pacing();
        self.record.ended_at = Instant::now();
        if self.record.answered_at.is_some() {
            self.sh.live.talking.fetch_sub(1, Ordering::Relaxed);
        }
        let live = &self.sh.live;
        live.rtp_sent
            .fetch_add(self.record.rtp_sent, Ordering::Relaxed);
        live.rtp_received
            .fetch_add(self.record.rtp_received, Ordering::Relaxed);
        live.rtp_lost
            .fetch_add(self.record.rtp_lost, Ordering::Relaxed);
        self.sh.calls.lock().unwrap().push(self.record.clone());
        // Answer retransmissions for a while, then forget the call.
        let linger = tokio::time::sleep(LINGER);
        tokio::pin!(linger);
        loop {
            tokio::select! {
                _ = &mut linger => break,
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("BYE") || m.is("CANCEL") => {
                        self.reply(&m, 200, "OK", "", "").await;
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        self.sh.routes.lock().unwrap().remove(&self.record.call_id);
    }

    /// Retransmits a final response to the INVITE until its ACK (RFC 3261 timers G and H).
    async fn until_ack(&mut self, text: &str) -> Waited {
        let give_up = tokio::time::Instant::now() + T1 * 64;
        let mut every = T1;
        let mut next = tokio::time::Instant::now() + every;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(give_up) => return Waited::Timeout,
                _ = tokio::time::sleep_until(next) => {
                    self.sh.send(text, self.src).await;
                    every = (every * 2).min(Duration::from_secs(4));
                    next = tokio::time::Instant::now() + every;
                }
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("ACK") => return Waited::Ack,
                    Some(m) if m.is("INVITE") => self.sh.send(text, self.src).await,
                    Some(m) if m.is("BYE") => return Waited::Bye(m),
                    Some(m) if m.is("CANCEL") => return Waited::Cancel(m),
                    Some(_) => {}
                    None => return Waited::Timeout,
                },
            }
        }
    }

    /// The caller cancelled a ringing call: 200 for the CANCEL, 487 for the INVITE.
    async fn cancelled(&mut self, cancel: &Msg) -> &'static str {
        self.reply(cancel, 200, "OK", "", "").await;
        let invite = self.invite.clone();
        let text = self.reply(&invite, 487, "Request Terminated", "", "").await;
        self.until_ack(&text).await;
        "cancelled"
    }

    /// Rings until the caller gives up.
    async fn ring_out(&mut self) -> &'static str {
        let invite = self.invite.clone();
        let ringing = self.reply(&invite, 180, "Ringing", "", "").await;
        let cap = tokio::time::sleep(self.sh.cfg.ring_cap);
        tokio::pin!(cap);
        loop {
            tokio::select! {
                _ = &mut cap => {
                    self.end_pacing();
                    let text = self.reply(&invite, 480, "Temporarily Unavailable", "", "").await;
                    self.until_ack(&text).await;
                    return "rejected";
                }
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("CANCEL") => return self.cancelled(&m).await,
                    Some(m) if m.is("INVITE") => self.sh.send(&ringing, self.src).await,
                    Some(_) => {}
                    None => return "cancelled",
                },
            }
        }
    }

    /// The media socket and answer for the INVITE's offer.
    async fn media(&self) -> Result<Media, String> {
        let offer =
            MediaDescription::parse(self.invite.body.as_bytes()).map_err(|e| e.to_string())?;
        let codec = self.sh.cfg.codec;
        let payload_type = offer
            .codecs
            .iter()
            .find(|(_, c)| *c == codec)
            .map(|(pt, _)| *pt)
            .ok_or("the offer lacks the peer's codec")?;
        let rtp = UdpSocket::bind((self.sh.cfg.ip, 0))
            .await
            .map_err(|e| e.to_string())?;
        let local = rtp.local_addr().map_err(|e| e.to_string())?;
        let sdp = sdp::describe(
            local,
            &[(payload_type, codec)],
            rand::random::<u32>().into(),
            1,
        );
        Ok(Media {
            rtp,
            remote: offer.addr,
            payload_type,
            sdp,
        })
    }

    async fn answer(&mut self) -> &'static str {
        let invite = self.invite.clone();
        let media = match self.media().await {
            Ok(m) => m,
            Err(e) => {
                eprintln!("peer: refused the offer of {}: {e}", self.record.call_id);
                self.end_pacing();
                let text = self
                    .reply(&invite, 488, "Not Acceptable Here", "", "")
                    .await;
                self.until_ack(&text).await;
                return "bad_offer";
            }
        };
        let ringing = self.reply(&invite, 180, "Ringing", "", "").await;
        let ring = tokio::time::sleep(self.sh.cfg.ring);
        tokio::pin!(ring);
        loop {
            tokio::select! {
                _ = &mut ring => break,
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("CANCEL") => return self.cancelled(&m).await,
                    Some(m) if m.is("INVITE") => self.sh.send(&ringing, self.src).await,
                    Some(_) => {}
                    None => return "cancelled",
                },
            }
        }
        let contact = format!(
            "Contact: <sip:peer@{}>\r\nContent-Type: application/sdp\r\n",
            self.sh.addr
        );
        let ok = self.reply(&invite, 200, "OK", &contact, &media.sdp).await;
        self.record.answered_at = Some(Instant::now());
        self.sh.live.talking.fetch_add(1, Ordering::Relaxed);
        match self.until_ack(&ok).await {
            Waited::Ack => self.record.ack_at = Some(Instant::now()),
            Waited::Bye(bye) => {
                self.reply(&bye, 200, "OK", "", "").await;
                return "caller_bye";
            }
            // A CANCEL that crossed our 200: the INVITE is answered; its BYE follows.
            Waited::Cancel(cancel) => {
                self.reply(&cancel, 200, "OK", "", "").await;
            }
            Waited::Timeout => {
                self.end_pacing();
                self.hang_up().await;
                return "no_ack";
            }
        }
        self.talk(media, &ok, &contact).await
    }

    /// Echoes (or plays the greeting) until either side hangs up.
    async fn talk(&mut self, media: Media, ok: &str, contact: &str) -> &'static str {
        let machine = self.record.kind == Kind::Machine;
        // A person says hello and then echoes what they hear; a machine plays its greeting.
        let intro = if machine {
            &self.sh.cfg.greeting
        } else {
            &self.sh.cfg.hello
        };
        let mut loss = LossCounter::default();
        let mut out = RtpOut::new(media.payload_type);
        let mut buf = [0u8; 2048];
        let mut remote = media.remote;
        let mut latched = false;
        let mut frame = 0usize;
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        tick.set_missed_tick_behavior(MissedTickBehavior::Burst);
        let cap = tokio::time::sleep(self.sh.cfg.hold_cap);
        tokio::pin!(cap);
        let end = loop {
            let speaking = machine || frame < intro.len();
            tokio::select! {
                got = media.rtp.recv_from(&mut buf) => {
                    let Ok((n, from)) = got else { continue };
                    let Some(payload) = rtp_payload(&buf[..n]) else { continue };
                    if self.record.first_rtp_at.is_none() {
                        self.record.first_rtp_at = Some(Instant::now());
                    }
                    loss.record(u16::from_be_bytes([buf[2], buf[3]]));
                    if !latched {
                        remote = from;
                        latched = true;
                    }
                    if !speaking {
                        // The echo: what came, in our own stream (sequence and timing go on).
                        let _ = media.rtp.send_to(out.packet(payload), from).await;
                    }
                }
                _ = tick.tick(), if speaking => {
                    let payload = intro.get(frame).unwrap_or(&self.sh.silence);
                    let _ = media.rtp.send_to(out.packet(payload), remote).await;
                    frame += 1;
                }
                msg = self.rx.recv() => match msg {
                    Some(m) if m.is("BYE") => {
                        self.reply(&m, 200, "OK", "", "").await;
                        break "caller_bye";
                    }
                    Some(m) if m.is("INVITE") && !m.has_to_tag() => self.sh.send(ok, self.src).await,
                    Some(m) if m.is("INVITE") => {
                        // A re-INVITE (session refresh): the same media.
                        self.reply(&m, 200, "OK", contact, &media.sdp).await;
                    }
                    Some(m) if m.is("UPDATE") || m.is("OPTIONS") || m.is("INFO") => {
                        self.reply(&m, 200, "OK", "", "").await;
                    }
                    Some(m) if m.is("ACK") && self.record.ack_at.is_none() => {
                        self.record.ack_at = Some(Instant::now());
                    }
                    Some(_) => {}
                    None => break "caller_bye",
                },
                _ = &mut cap => {
                    self.end_pacing();
                    self.hang_up().await;
                    break "peer_bye";
                }
            }
        };
        self.record.rtp_sent = out.sent;
        self.record.rtp_received = loss.received;
        self.record.rtp_lost = loss.lost();
        end
    }

    /// Our BYE, retransmitted until answered (timer E; 32 s at most).
    async fn hang_up(&mut self) {
        let bye = self.invite.bye(self.sh.addr, &self.tag, 1);
        let target = self
            .invite
            .contact_uri()
            .and_then(|uri| contact_addr(&uri))
            .unwrap_or(self.src);
        let give_up = tokio::time::Instant::now() + T1 * 64;
        let mut every = T1;
        loop {
            self.sh.send(&bye, target).await;
            let wait = (tokio::time::Instant::now() + every).min(give_up);
            loop {
                match tokio::time::timeout_at(wait, self.rx.recv()).await {
                    Ok(Some(m)) if m.code >= 200 && m.cseq_method() == "BYE" => return,
                    Ok(Some(m)) if m.is("BYE") => {
                        self.reply(&m, 200, "OK", "", "").await;
                        return;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => return,
                    Err(_) => break,
                }
            }
            if tokio::time::Instant::now() >= give_up {
                return;
            }
            every = (every * 2).min(Duration::from_secs(4));
        }
    }
}

/// The address of a `sip:user@host:port;params` URI with an IP host.
fn contact_addr(uri: &str) -> Option<SocketAddr> {
    let rest = uri.split_once(':')?.1;
    let host_port = rest.rsplit('@').next()?.split(';').next()?;
    if let Ok(addr) = host_port.parse::<SocketAddr>() {
        return Some(addr);
    }
    let ip: IpAddr = host_port.trim_matches(['[', ']']).parse().ok()?;
    Some(SocketAddr::new(ip, 5060))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_deals_the_shares_in_every_window() {
        let mut mix: Mix = "answer=70,busy=10,no_answer=10,machine=10".parse().unwrap();
        let mut counts: BTreeMap<Kind, u32> = BTreeMap::new();
        for _ in 0..10 {
            *counts.entry(mix.next()).or_default() += 1;
        }
        assert_eq!(counts[&Kind::Answer], 7);
        assert_eq!(counts[&Kind::Busy], 1);
        assert_eq!(counts[&Kind::NoAnswer], 1);
        assert_eq!(counts[&Kind::Machine], 1);
        assert!("answer=0".parse::<Mix>().is_err());
        assert!("human=1".parse::<Mix>().is_err());
    }

    #[test]
    fn contact_addresses() {
        assert_eq!(
            contact_addr("sip:127.0.0.1:5070;transport=udp"),
            Some("127.0.0.1:5070".parse().unwrap())
        );
        assert_eq!(
            contact_addr("sip:sb@10.0.0.2"),
            Some("10.0.0.2:5060".parse().unwrap())
        );
        assert_eq!(contact_addr("sip:sb@example.com"), None);
    }

    struct Nobody;

    #[async_trait::async_trait]
    impl switchboard_sip::server::InboundRouter for Nobody {
        type Target = ();
        async fn route(&self, _: &str, _: IpAddr) -> switchboard_sip::server::Routing<()> {
            switchboard_sip::server::Routing::Unknown
        }
        async fn run_call(&self, _: (), _: switchboard_sip::call::Call) {}
    }

    /// Switchboard's own SIP client dials the peer once for each kind of outcome.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_dialer_meets_every_outcome() {
        use switchboard_sip::outbound::{DialPlan, FailureKind};
        use switchboard_sip::server::{SipServer, SipSettings, SipSockets};

        let audio = vec![4000i16; 8000];
        let peer = Peer::start(PeerConfig {
            ip: "127.0.0.1".parse().unwrap(),
            port: 0,
            mix: "answer=1,machine=1,busy=1,no_answer=1".parse().unwrap(),
            ring: Duration::from_millis(100),
            codec: Codec::Pcmu,
            hold_cap: Duration::from_secs(20),
            ring_cap: Duration::from_secs(20),
            greeting: crate::greeting::frames(Codec::Pcmu, &audio),
            hello: crate::greeting::frames(Codec::Pcmu, &audio[..4000]),
        })
        .unwrap();
        let sockets = SipSockets::bind("127.0.0.1:0".parse().unwrap(), None)
            .await
            .unwrap();
        let server = SipServer::start(
            SipSettings {
                rtp_ports: (42_000, 42_999),
                t1: Duration::from_millis(100),
                ..SipSettings::default()
            },
            sockets,
            Nobody,
        )
        .await
        .unwrap();
        let client = server.client();
        let trunk: switchboard_sip::trunk::Trunk = serde_json::from_value(serde_json::json!(
            {"gateways": [{"host": "127.0.0.1", "port": peer.addr.port()}]}
        ))
        .unwrap();
        let plan = |n: u32| DialPlan {
            trunk: trunk.clone(),
            from_number: "+972501000000".into(),
            to_number: format!("+97252000000{n}"),
            call_id: Some(format!("call-{n}")),
            ring_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(2),
            recording: None,
            vad: Default::default(),
            on_ringing: None,
        };
        let cancel = tokio_util::sync::CancellationToken::new;
        for n in 0..2 {
            let mut answered = client.dial(plan(n), cancel()).await.expect("answered");
            tokio::time::sleep(Duration::from_millis(600)).await;
            answered.call.hangup().await;
            let stats = answered.call.finish().await.unwrap();
            assert!(stats.packets_received >= 10, "call {n}: {stats:?}");
            assert_eq!(stats.packets_lost, 0);
        }
        let busy = client.dial(plan(2), cancel()).await.err().expect("busy");
        assert_eq!(busy.sip_code, Some(486));
        let unanswered = client
            .dial(plan(3), cancel())
            .await
            .err()
            .expect("no answer");
        assert_eq!(unanswered.kind, FailureKind::RingTimeout);

        let deadline = Instant::now() + Duration::from_secs(10);
        while peer.calls().len() < 4 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut calls = peer.calls();
        calls.sort_by(|a, b| a.call_id.cmp(&b.call_id));
        let ends: Vec<(&str, &str)> = calls.iter().map(|c| (c.kind.name(), c.end)).collect();
        assert_eq!(
            ends,
            [
                ("answer", "caller_bye"),
                ("machine", "caller_bye"),
                ("busy", "rejected"),
                ("no_answer", "cancelled")
            ]
        );
        // A person says hello (25 frames) and echoes what comes; the machine plays its greeting.
        assert!(calls[0].rtp_sent >= 25 && calls[0].rtp_received >= 25);
        assert!(calls[1].rtp_sent >= 20 && calls[1].rtp_received >= 10);
        assert!(calls.iter().all(|c| c.rtp_lost == 0));
        assert!(calls[0].ack_at.is_some() && calls[0].first_rtp_at.is_some());
        let far = peer.far_ends();
        let number = &far["+972501000000"];
        assert_eq!((number.invites, number.max_live, number.live), (4, 1, 0));
        assert!(number.min_gap_secs.unwrap() > 0.0);
        assert_eq!(peer.live().in_flight.load(Ordering::Relaxed), 0);
        peer.stop();
        server.shutdown().await;
    }
}
