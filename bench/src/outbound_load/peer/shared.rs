//! What the peer's parts share: its configuration, the socket and the routes to each call's
//! task ([`Shared`]), and the figures it keeps (each call's [`PeerCall`], pacing by calling
//! number in [`FarEnd`], the running [`Live`] counters).

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use switchboard_sip::sdp::Codec;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::mix::{Kind, Mix};
use crate::outbound_load::sipmsg::Msg;

/// What the peer is: where it listens, what it does with calls and what it says.
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

/// Where the dispatch hands a call's messages: its task, and its pacing state.
pub(super) struct Route {
    pub(super) tx: mpsc::UnboundedSender<Msg>,
    /// The call has stopped counting as in flight.
    pub(super) ended: Arc<AtomicBool>,
    pub(super) from: Arc<str>,
}

/// The peer's state, shared by the dispatch and every call's task.
pub(super) struct Shared {
    pub(super) cfg: PeerConfig,
    pub(super) sock: UdpSocket,
    pub(super) addr: SocketAddr,
    pub(super) live: Live,
    pub(super) routes: Mutex<HashMap<String, Route>>,
    pub(super) far: Mutex<BTreeMap<String, FarEnd>>,
    pub(super) mix: Mutex<Mix>,
    pub(super) calls: Mutex<Vec<PeerCall>>,
    /// The silence frame in `cfg.codec`.
    pub(super) silence: Vec<u8>,
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
    pub(super) async fn bind(cfg: PeerConfig) -> anyhow::Result<Arc<Shared>> {
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

    pub(super) async fn send(&self, text: &str, to: SocketAddr) {
        let _ = self.sock.send_to(text.as_bytes(), to).await;
    }

    pub(super) fn begin(&self, from: &str, now: Instant) {
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
    pub(super) fn end(&self, ended: &AtomicBool, from: &str) {
        if ended.swap(true, Ordering::Relaxed) {
            return;
        }
        self.live.in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(f) = self.far.lock().unwrap().get_mut(from) {
            f.live -= 1;
        }
    }
}
