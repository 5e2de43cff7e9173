//! Outbound calls through a SIP trunk, and OPTIONS probes of a trunk's gateways.
//!
//! [`SipClient::dial`] places one call:
//!
//! - Gateways are tried by priority; a gateway without a port is looked up in DNS (SRV, then
//!   A/AAAA, RFC 3263) and each address it names is a target. A target that answers 5xx, that
//!   says nothing within the response timeout, or that cannot be reached is left for the next,
//!   unless early media has started (the callee may already hear something).
//! - Digest challenges (401/407) are answered once with the trunk's credentials.
//! - 180/183 with SDP start the media (early media: ringback and announcements are recorded);
//!   reliable provisionals (`Require: 100rel`) are acknowledged with PRACK.
//! - Our ring timer ends an unanswered call with CANCEL. A 200 OK that crosses our CANCEL is
//!   ACKed and then ended with BYE, and the call counts as not answered.
//! - Session timers (RFC 4028): we ask for `Session-Expires`; when the answer makes us the
//!   refresher we refresh at half the interval (UPDATE if the peer allows it, else
//!   re-INVITE), and when the peer refreshes and stops doing so the call ends before the
//!   session would expire at the carrier.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rsipstack::dialog::DialogId;
use rsipstack::dialog::authenticate::Credential;
use rsipstack::dialog::dialog::DialogState;
use rsipstack::dialog::invitation::InviteOption;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{self as rsip, Header, StatusCode, StatusCodeKind};
use rsipstack::transaction::Transaction;
use rsipstack::transaction::key::{TransactionKey, TransactionRole};
use rsipstack::transaction::transaction::TransactionEvent;
use rsipstack::transport::SipAddr;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::call::{
    Call, CallParts, Core, Direction, EndCause, LiveDialog, event_sink, header_has_token,
    header_value, sdp_type,
};
use crate::media::{self, MediaConfig, MediaHandle, VadSettings};
use crate::sdp::{self, Codec, MediaDescription};
use crate::trunk::{Gateway, GatewayProbe, Trunk, TrunkTransport};

/// The codecs we offer, in our order of preference (carriers' G.711 first).
const OFFER: [(u8, Codec); 3] = [(0, Codec::Pcmu), (8, Codec::Pcma), (9, Codec::G722)];

/// The session interval we ask for, and the smallest we accept.
pub const SESSION_EXPIRES: Duration = Duration::from_secs(1800);
pub const MIN_SE: Duration = Duration::from_secs(90);

/// What identifies an INVITE we sent: enough for another process (a restart after a crash)
/// to CANCEL it, or to BYE the dialog once it is answered, so that nothing keeps ringing or
/// holding a callee for a process that is gone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InviteKey {
    pub request_uri: String,
    /// The Via, From (with our tag) and To header values of the INVITE.
    pub via: String,
    pub from: String,
    pub to: String,
    pub call_id: String,
    pub cseq: u32,
    /// Where the INVITE went.
    pub transport: TrunkTransport,
    pub destination: SocketAddr,
    /// Once answered: the callee's tag and Contact (where in-dialog requests go).
    pub remote_tag: Option<String>,
    pub remote_target: Option<String>,
}

/// Where the dialer writes down the INVITEs it sends (the service keeps them with the call).
#[async_trait::async_trait]
pub trait InviteJournal: Send + Sync + 'static {
    /// The INVITE of a call is on its way (written again when it is answered, with the
    /// callee's tag).
    async fn invite_sent(&self, call_id: &str, key: &InviteKey);
}

/// One call to place.
#[derive(Clone)]
pub struct DialPlan {
    pub trunk: Trunk,
    /// Our number (E.164), the From user unless the trunk names one.
    pub from_number: String,
    /// The callee (E.164).
    pub to_number: String,
    /// The SIP Call-ID to use (a fresh one when absent).
    pub call_id: Option<String>,
    /// How long the callee's phone may ring before we CANCEL.
    pub ring_timeout: Duration,
    /// A target that sends no response at all within this is left for the next.
    pub response_timeout: Duration,
    /// Where to record the call (early media included); none for no recording.
    pub recording: Option<PathBuf>,
    pub vad: VadSettings,
    /// Where each INVITE sent is written down, if anywhere.
    pub journal: Option<Arc<dyn InviteJournal>>,
}

impl std::fmt::Debug for DialPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DialPlan")
            .field("trunk", &self.trunk)
            .field("from_number", &self.from_number)
            .field("to_number", &self.to_number)
            .field("call_id", &self.call_id)
            .field("ring_timeout", &self.ring_timeout)
            .finish_non_exhaustive()
    }
}

/// An answered outbound call.
pub struct Answered {
    pub call: Call,
    /// The gateway that answered (`host[:port];transport=...`).
    pub gateway: String,
    /// From the first INVITE to the 200 OK.
    pub ring: Duration,
    /// Early media flowed before the answer.
    pub early_media: bool,
}

/// Why a dial did not end in an answered call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A final response from the far end (busy, not found, declined, 5xx from the last
    /// gateway, ...): see `sip_code`.
    Response,
    /// Our ring timer ran out and we cancelled.
    RingTimeout,
    /// The dial was cancelled from outside before the answer.
    Cancelled,
    /// No target sent any response in time.
    NoResponse,
    /// No target could be reached (connection refused, DNS gave nothing, ...).
    Transport,
    /// Something on our side (no RTP port, no usable SDP in the answer).
    Local,
}

/// A dial that did not end in an answered call.
#[derive(Debug, Clone)]
pub struct DialFailure {
    pub kind: FailureKind,
    pub sip_code: Option<u16>,
    pub reason_phrase: Option<String>,
    /// The Q.850 cause of a `Reason: Q.850;cause=N` header, if the response had one.
    pub q850_cause: Option<u16>,
    /// The gateway that answered last (or was tried last).
    pub gateway: Option<String>,
    pub detail: String,
    /// From the first INVITE to the end of the dial.
    pub elapsed: Duration,
    pub early_media: bool,
    /// Audio was recorded (early media).
    pub recorded: bool,
}

/// Places calls and probes gateways through the running SIP server.
#[derive(Clone)]
pub struct SipClient {
    pub(crate) core: Arc<Core>,
}

/// One address a gateway resolves to.
struct Target {
    gateway: String,
    /// The Request-URI host (the gateway's host as configured).
    host: String,
    port: Option<u16>,
    transport: TrunkTransport,
    addr: SipAddr,
}

fn sip_transport(t: TrunkTransport) -> rsip::Transport {
    match t {
        TrunkTransport::Udp => rsip::Transport::Udp,
        TrunkTransport::Tcp => rsip::Transport::Tcp,
        TrunkTransport::Tls => rsip::Transport::Tls,
    }
}

/// The addresses `gw` names: itself when it is an IP address, else its DNS records.
async fn resolve(gw: &Gateway) -> Result<Vec<Target>, String> {
    let transport = sip_transport(gw.transport);
    let target = |addr: SocketAddr| Target {
        gateway: gw.to_string(),
        host: gw.host.clone(),
        port: gw.port,
        transport: gw.transport,
        addr: SipAddr {
            r#type: Some(transport),
            addr: addr.into(),
        },
    };
    if let Ok(ip) = gw.host.parse::<IpAddr>() {
        let port = gw.port.unwrap_or(gw.transport.default_port());
        return Ok(vec![target(SocketAddr::new(ip, port))]);
    }
    let resolver = rsipstack::resolver::SipResolver::new();
    let found = resolver
        .lookup(
            &rsip::Domain(gw.host.clone()),
            gw.port.map(rsip::Port::from),
            Some(transport),
            gw.transport == TrunkTransport::Tls,
        )
        .await?;
    if found.is_empty() {
        return Err(format!("{} resolves to no address", gw.host));
    }
    Ok(found.into_iter().map(|t| target(t.addr)).collect())
}

/// A user part as it may stand in a SIP URI (`#` of a tech prefix escaped).
fn uri_user(user: &str) -> String {
    user.replace('#', "%23")
}

fn host_port(host: &str, port: Option<u16>) -> String {
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    };
    match port {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

fn uri(text: &str) -> Result<rsip::Uri, String> {
    rsip::Uri::try_from(text).map_err(|e| format!("{text}: {e}"))
}

/// The Q.850 cause of a response's `Reason` header.
fn q850_cause(resp: &rsip::Response) -> Option<u16> {
    let reason = header_value(&resp.headers, "reason")?;
    reason.split(',').find_map(|r| {
        let mut parts = r.split(';');
        let protocol = parts.next()?.trim();
        if !protocol.eq_ignore_ascii_case("q.850") {
            return None;
        }
        parts.find_map(|p| {
            let (k, v) = p.split_once('=')?;
            k.trim()
                .eq_ignore_ascii_case("cause")
                .then(|| v.trim().parse().ok())?
        })
    })
}

/// The session timer a 2xx set up: its interval and whether we refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SessionTimer {
    interval: Duration,
    we_refresh: bool,
    use_update: bool,
}

fn session_timer(resp: &rsip::Response) -> Option<SessionTimer> {
    let value = header_value(&resp.headers, "session-expires")
        .or_else(|| header_value(&resp.headers, "x"))?;
    let mut parts = value.split(';');
    let secs: u64 = parts.next()?.trim().parse().ok()?;
    if secs == 0 {
        return None;
    }
    let refresher = parts
        .filter_map(|p| p.split_once('='))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("refresher"))
        .map(|(_, v)| v.trim().to_ascii_lowercase());
    Some(SessionTimer {
        interval: Duration::from_secs(secs),
        // A 2xx without a refresher leaves it to us, the UAC (RFC 4028 §7.2).
        we_refresh: refresher.as_deref() != Some("uas"),
        use_update: header_has_token(&resp.headers, "allow", "UPDATE"),
    })
}

/// What one INVITE to one target came to.
enum Attempt {
    Answered(Box<Answered>),
    /// Worth trying the next target (5xx, no response, unreachable), and nothing was heard.
    Next(DialFailure),
    Final(DialFailure),
}

/// The media of a dial: the socket until the media starts, then the running session.
struct Media {
    socket: Option<tokio::net::UdpSocket>,
    local: SocketAddr,
    session_id: u64,
    running: Option<(MediaHandle, u8, Codec, SocketAddr)>,
    recording: Option<PathBuf>,
    vad: VadSettings,
    jitter_depth: usize,
}

impl Media {
    /// Starts the media on the peer's SDP (early or final); a later SDP moves it.
    fn start(&mut self, body: &[u8], events: &crate::call::EventTx) -> Result<(), String> {
        let desc = MediaDescription::parse(body).map_err(|e| format!("the peer's SDP: {e}"))?;
        let (pt, codec) = desc
            .codecs
            .iter()
            .copied()
            .find(|(_, c)| OFFER.iter().any(|(_, o)| o == c))
            .ok_or("the peer's SDP has none of our codecs")?;
        if let Some((handle, _, running_codec, remote)) = &mut self.running {
            if *running_codec != codec {
                return Err("the peer changed codec between early media and the answer".into());
            }
            if *remote != desc.addr && desc.addr.port() != 0 {
                handle.control().retarget(desc.addr);
                *remote = desc.addr;
            }
            return Ok(());
        }
        let socket = self.socket.take().ok_or("the media socket is gone")?;
        let handle = media::start(
            socket,
            MediaConfig {
                codec,
                payload_type: pt,
                remote: desc.addr,
                recording: self.recording.clone(),
                vad: self.vad,
                jitter_depth: self.jitter_depth,
            },
            event_sink(events),
        )
        .map_err(|e| e.to_string())?;
        self.running = Some((handle, pt, codec, desc.addr));
        Ok(())
    }

    fn offer(&self) -> Vec<u8> {
        sdp::describe(self.local, &OFFER, self.session_id, 1).into_bytes()
    }

    /// Stops media that started on early media of a call that then failed.
    async fn stop(&mut self) -> bool {
        match self.running.take() {
            Some((handle, ..)) => {
                let _ = handle.finish().await;
                self.recording.is_some()
            }
            None => false,
        }
    }
}

impl SipClient {
    /// Places one call. `cancel` ends it before the answer (an API cancel, a shutdown).
    pub async fn dial(
        &self,
        plan: DialPlan,
        cancel: CancellationToken,
    ) -> Result<Answered, DialFailure> {
        let started = Instant::now();
        let fail = |kind, detail: String| DialFailure {
            kind,
            sip_code: None,
            reason_phrase: None,
            q850_cause: None,
            gateway: None,
            detail,
            elapsed: started.elapsed(),
            early_media: false,
            recorded: false,
        };
        let socket = match self.core.ports.bind().await {
            Ok(socket) => socket,
            Err(e) => return Err(fail(FailureKind::Local, format!("no RTP port: {e}"))),
        };
        let local = match socket.local_addr() {
            Ok(a) => SocketAddr::new(self.core.media_ip, a.port()),
            Err(e) => return Err(fail(FailureKind::Local, format!("RTP socket: {e}"))),
        };
        let mut media = Media {
            socket: Some(socket),
            local,
            session_id: rand::random::<u32>().into(),
            running: None,
            recording: plan.recording.clone(),
            vad: plan.vad,
            jitter_depth: self.core.settings.jitter_depth,
        };
        let mut last: Option<DialFailure> = None;
        for gw in plan.trunk.ordered_gateways() {
            let targets = match resolve(gw).await {
                Ok(targets) => targets,
                Err(e) => {
                    let mut f = fail(FailureKind::Transport, e);
                    f.gateway = Some(gw.to_string());
                    last = Some(f);
                    continue;
                }
            };
            for target in targets {
                if cancel.is_cancelled() {
                    return Err(fail(FailureKind::Cancelled, "cancelled".into()));
                }
                match self
                    .attempt(&plan, &target, &mut media, &cancel, started)
                    .await
                {
                    Attempt::Answered(answered) => return Ok(*answered),
                    Attempt::Final(mut failure) => {
                        failure.recorded = media.stop().await;
                        return Err(failure);
                    }
                    Attempt::Next(failure) => {
                        tracing::debug!(gateway = %target.gateway, detail = %failure.detail, "trying the next gateway");
                        last = Some(failure);
                    }
                }
            }
        }
        let mut failure = last.unwrap_or_else(|| fail(FailureKind::Transport, "no gateway".into()));
        failure.elapsed = started.elapsed();
        failure.recorded = media.stop().await;
        Err(failure)
    }

    /// One INVITE to one target, to its end or to the answer.
    async fn attempt(
        &self,
        plan: &DialPlan,
        target: &Target,
        media: &mut Media,
        cancel: &CancellationToken,
        started: Instant,
    ) -> Attempt {
        let core = &self.core;
        let failure = |kind, detail: String, early_media: bool| DialFailure {
            kind,
            sip_code: None,
            reason_phrase: None,
            q850_cause: None,
            gateway: Some(target.gateway.clone()),
            detail,
            elapsed: started.elapsed(),
            early_media,
            recorded: false,
        };
        let trunk = &plan.trunk;
        let from_host = trunk.from_host().unwrap_or(&target.host).to_string();
        let caller = uri(&format!(
            "sip:{}@{}",
            uri_user(&trunk.from_user_for(&plan.from_number)),
            host_port(&from_host, None)
        ));
        let callee = uri(&format!(
            "sip:{}@{}",
            uri_user(&trunk.request_user_for(&plan.to_number)),
            host_port(&target.host, target.port)
        ));
        let (caller, callee) = match (caller, callee) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                return Attempt::Final(failure(FailureKind::Local, e, false));
            }
        };
        let contact_key = match target.transport {
            TrunkTransport::Udp => "udp",
            TrunkTransport::Tcp => "tcp",
            TrunkTransport::Tls => "tls",
        };
        let Some(contact) = core.contacts.get(contact_key).cloned() else {
            return Attempt::Final(failure(
                FailureKind::Local,
                format!("SIP over {contact_key} is not configured"),
                false,
            ));
        };
        let mut headers = vec![
            Header::Supported("timer".into()),
            Header::Other(
                "Session-Expires".into(),
                SESSION_EXPIRES.as_secs().to_string(),
            ),
            Header::Other("Min-SE".into(), MIN_SE.as_secs().to_string()),
        ];
        headers.extend(
            trunk
                .headers
                .iter()
                .map(|h| Header::Other(h.name.clone(), h.value.clone())),
        );
        let credential = match (&trunk.username, &trunk.password) {
            (Some(username), Some(password)) => Some(Credential {
                username: username.clone(),
                password: password.expose().to_string(),
                realm: None,
                auth_username: trunk.auth_username.clone(),
            }),
            _ => None,
        };
        let call_id = plan
            .call_id
            .clone()
            .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
        let option = InviteOption {
            caller,
            callee,
            destination: Some(target.addr.clone()),
            content_type: Some("application/sdp".into()),
            offer: Some(media.offer()),
            contact,
            credential,
            headers: Some(headers),
            support_prack: true,
            call_id: Some(call_id.clone()),
            ..Default::default()
        };
        // The INVITE's provisional responses come through the shared state loop, to here.
        let (progress_tx, mut progress) = mpsc::unbounded_channel();
        let _dialing = Dialing::register(core, call_id, progress_tx);
        let (dialog, mut invite) = match core.dialogs.do_invite_async(option, core.states.clone()) {
            Ok(started) => started,
            Err(e) => return Attempt::Next(failure(FailureKind::Transport, e.to_string(), false)),
        };
        // Dropped before a final response (the dial's owner went away): CANCEL, so nothing
        // keeps ringing the callee.
        let mut pending = CancelOnDrop(Some(dialog.clone()));
        let mut key = invite_key(&dialog.initial_request(), target);
        if let (Some(journal), Some(key)) = (&plan.journal, &key) {
            journal.invite_sent(&key.call_id, key).await;
        }
        let (events_tx, events_rx) = crate::call::event_stream();
        let attempt_start = tokio::time::Instant::now();
        let ring_deadline = tokio::time::Instant::from_std(started + plan.ring_timeout);
        let response_deadline = attempt_start + plan.response_timeout;
        let mut heard = false;
        let mut cancelled: Option<FailureKind> = None;
        let result = loop {
            tokio::select! {
                result = &mut invite => break result,
                Some(state) = progress.recv() => match *state {
                    DialogState::Trying(_) => heard = true,
                    DialogState::Early(_, resp) => {
                        heard = true;
                        if !resp.body.is_empty()
                            && let Err(e) = media.start(&resp.body, &events_tx)
                        {
                            tracing::debug!(error = %e, "early media not started");
                        }
                    }
                    _ => {}
                },
                _ = tokio::time::sleep_until(response_deadline), if !heard && cancelled.is_none() => {
                    // Nothing from this target: leave it (its transaction ends on its own).
                    invite.abort();
                    return Attempt::Next(failure(FailureKind::NoResponse, format!("no response from {} in {:?}", target.gateway, plan.response_timeout), false));
                }
                _ = tokio::time::sleep_until(ring_deadline), if cancelled.is_none() => {
                    cancelled = Some(FailureKind::RingTimeout);
                    let _ = dialog.cancel().await;
                }
                _ = cancel.cancelled(), if cancelled.is_none() => {
                    cancelled = Some(FailureKind::Cancelled);
                    let _ = dialog.cancel().await;
                }
            }
        };
        pending.0 = None;
        let early_media = media.running.is_some();
        let (id, resp) = match result {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => {
                let f = failure(FailureKind::Transport, e.to_string(), early_media);
                return if early_media || cancelled.is_some() {
                    Attempt::Final(DialFailure {
                        kind: cancelled.unwrap_or(FailureKind::Transport),
                        ..f
                    })
                } else {
                    Attempt::Next(f)
                };
            }
            Err(e) => {
                return Attempt::Final(failure(
                    FailureKind::Local,
                    format!("the INVITE task failed: {e}"),
                    early_media,
                ));
            }
        };
        let Some(resp) = resp else {
            let f = failure(
                cancelled.unwrap_or(FailureKind::NoResponse),
                format!("no final response from {}", target.gateway),
                early_media,
            );
            return if early_media || cancelled.is_some() {
                Attempt::Final(f)
            } else {
                Attempt::Next(f)
            };
        };
        let code = u16::from(resp.status_code.clone());
        let phrase = resp.status_code.text().to_string();
        let answered = resp.status_code.kind() == StatusCodeKind::Successful;
        if let Some(kind) = cancelled {
            // Our CANCEL ended it (487), or a 200 OK crossed it and rsipstack has ACKed and
            // BYEd that answer: either way nobody was connected.
            return Attempt::Final(DialFailure {
                kind,
                sip_code: Some(code),
                reason_phrase: Some(phrase),
                q850_cause: q850_cause(&resp),
                ..failure(
                    kind,
                    format!("cancelled; the far end answered {code}"),
                    early_media,
                )
            });
        }
        if !answered {
            let f = DialFailure {
                sip_code: Some(code),
                reason_phrase: Some(phrase),
                q850_cause: q850_cause(&resp),
                ..failure(FailureKind::Response, format!("{code}"), early_media)
            };
            let retry_elsewhere = matches!(resp.status_code.kind(), StatusCodeKind::ServerFailure)
                || resp.status_code == StatusCode::RequestTimeout && !heard;
            return if retry_elsewhere && !early_media {
                Attempt::Next(f)
            } else {
                Attempt::Final(f)
            };
        }
        // Answered: the media runs on the answer's SDP (or the early one).
        let sdp_result = if resp.body.is_empty() {
            if early_media {
                Ok(())
            } else {
                Err("the answer has no SDP".to_string())
            }
        } else {
            media.start(&resp.body, &events_tx)
        };
        if let Err(e) = sdp_result {
            let _ = dialog.bye().await;
            core.dialogs.remove_dialog(&id);
            return Attempt::Final(DialFailure {
                sip_code: Some(code),
                reason_phrase: Some(phrase),
                ..failure(FailureKind::Local, e, early_media)
            });
        }
        let Some((handle, pt, codec, _)) = media.running.take() else {
            let _ = dialog.bye().await;
            core.dialogs.remove_dialog(&id);
            return Attempt::Final(failure(
                FailureKind::Local,
                "the media did not start".into(),
                early_media,
            ));
        };
        core.insert_live(
            id.clone(),
            LiveDialog {
                direction: Direction::Outbound,
                events: events_tx,
                media: Some(handle.control()),
                answer: (media.local, pt, codec),
                session_id: media.session_id,
                version: 1,
                refreshed: Instant::now(),
            },
        );
        if let (Some(journal), Some(key)) = (&plan.journal, &mut key) {
            key.remote_tag = Some(id.remote_tag.clone());
            key.remote_target = resp
                .typed_contact_headers()
                .ok()
                .and_then(|c| c.first().map(|c| c.uri.to_string()));
            journal.invite_sent(&key.call_id, key).await;
        }
        let timer = session_timer(&resp);
        let refresher = tokio::spawn(drive(
            core.clone(),
            dialog.clone(),
            id.clone(),
            timer,
            TransactionKey::from_response(&resp, TransactionRole::Client).ok(),
        ));
        let remote = target
            .addr
            .get_socketaddr()
            .unwrap_or_else(|_| SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0));
        let call = Call::new(
            core.clone(),
            CallParts {
                direction: Direction::Outbound,
                call_id: id.call_id.clone(),
                from: plan.from_number.clone(),
                to: plan.to_number.clone(),
                remote,
                codec,
                media: handle,
                events: events_rx,
                dialog,
                refresher: Some(refresher),
                setup: None,
            },
        );
        Attempt::Answered(Box::new(Answered {
            call,
            gateway: target.gateway.clone(),
            ring: started.elapsed(),
            early_media,
        }))
    }

    /// Sends OPTIONS to every gateway of `trunk` (each address DNS names, until one answers).
    pub async fn probe(&self, trunk: &Trunk) -> Vec<GatewayProbe> {
        let mut results = Vec::new();
        for gw in &trunk.gateways {
            let probe = match resolve(gw).await {
                Err(e) => GatewayProbe {
                    gateway: gw.to_string(),
                    ok: false,
                    status: None,
                    detail: e,
                },
                Ok(targets) => {
                    let mut result = None;
                    for target in &targets {
                        let probe = self.options(trunk, target).await;
                        let ok = probe.ok;
                        result = Some(probe);
                        if ok {
                            break;
                        }
                    }
                    result.unwrap_or_else(|| GatewayProbe {
                        gateway: gw.to_string(),
                        ok: false,
                        status: None,
                        detail: "no address".into(),
                    })
                }
            };
            results.push(probe);
        }
        results
    }

    async fn options(&self, trunk: &Trunk, target: &Target) -> GatewayProbe {
        let probe = |ok, status, detail: String| GatewayProbe {
            gateway: target.gateway.clone(),
            ok,
            status,
            detail,
        };
        let endpoint = &self.core.endpoint;
        let host = host_port(&target.host, target.port);
        let user = trunk
            .username
            .as_deref()
            .map(uri_user)
            .unwrap_or_else(|| "switchboard".into());
        let from_host = trunk.from_host().unwrap_or(&target.host).to_string();
        let (req_uri, from_uri) = match (
            uri(&format!("sip:{host}")),
            uri(&format!("sip:{user}@{}", host_port(&from_host, None))),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return probe(false, None, e),
        };
        let listen = endpoint
            .transport_layer
            .get_listen_addrs()
            .into_iter()
            .find(|a| a.r#type == target.addr.r#type && target.transport != TrunkTransport::Udp);
        let via = match endpoint.get_via(listen, None) {
            Ok(via) => via,
            Err(e) => return probe(false, None, e.to_string()),
        };
        let from = rsip::typed::From {
            display_name: None,
            uri: from_uri,
            params: vec![],
        }
        .with_tag(rsipstack::transaction::make_tag());
        let to = rsip::typed::To {
            display_name: None,
            uri: req_uri.clone(),
            params: vec![],
        };
        let request = endpoint.make_request(rsip::Method::Options, req_uri, via, from, to, 1, None);
        let key = match TransactionKey::from_request(&request, TransactionRole::Client) {
            Ok(key) => key,
            Err(e) => return probe(false, None, e.to_string()),
        };
        let mut tx = Transaction::new_client(key, request, endpoint.clone(), None);
        tx.destination = Some(target.addr.clone());
        let wait = async {
            tx.send().await.map_err(|e| e.to_string())?;
            while let Some(msg) = tx.receive().await {
                if let rsip::SipMessage::Response(resp) = msg
                    && resp.status_code.kind() != StatusCodeKind::Provisional
                {
                    return Ok(resp);
                }
            }
            Err("no response".to_string())
        };
        let timeout = self.core.settings.t1 * 8;
        match tokio::time::timeout(timeout, wait).await {
            Err(_) => probe(false, None, format!("no response in {timeout:?}")),
            Ok(Err(e)) => probe(false, None, e),
            Ok(Ok(resp)) => {
                let code = u16::from(resp.status_code.clone());
                let ok = !matches!(resp.status_code.kind(), StatusCodeKind::ServerFailure)
                    && resp.status_code != StatusCode::RequestTimeout;
                probe(ok, Some(code), resp.status_code.text().to_string())
            }
        }
    }
}

/// The identity of an INVITE as sent to `target`.
fn invite_key(req: &rsip::Request, target: &Target) -> Option<InviteKey> {
    let value = |name: &str| header_value(&req.headers, name);
    let cseq = value("cseq")?.split_whitespace().next()?.parse().ok()?;
    Some(InviteKey {
        request_uri: req.uri.to_string(),
        via: value("via")?,
        from: value("from")?,
        to: value("to")?,
        call_id: value("call-id")?,
        cseq,
        transport: target.transport,
        destination: target.addr.get_socketaddr().ok()?,
        remote_tag: None,
        remote_target: None,
    })
}

impl SipClient {
    /// Ends what a previous process left of a call: CANCELs its INVITE, or BYEs its dialog
    /// when it was answered. Returns the final response's code, if one came.
    pub async fn abandon(&self, key: &InviteKey) -> Option<u16> {
        let (method, uri, to, cseq, via) = match (&key.remote_tag, &key.remote_target) {
            (Some(tag), target) => (
                "BYE",
                target.clone().unwrap_or_else(|| key.request_uri.clone()),
                format!("{};tag={tag}", key.to),
                key.cseq + 1,
                // A new transaction: the Via of the INVITE with a fresh branch.
                key.via
                    .split(';')
                    .map(|p| {
                        if p.trim_start().starts_with("branch=") {
                            format!("branch=z9hG4bK{}", rand::random::<u64>())
                        } else {
                            p.to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(";"),
            ),
            (None, _) => (
                "CANCEL",
                key.request_uri.clone(),
                key.to.clone(),
                key.cseq,
                key.via.clone(),
            ),
        };
        let text = format!(
            "{method} {uri} SIP/2.0\r\nVia: {via}\r\nFrom: {}\r\nTo: {to}\r\nCall-ID: {}\r\nCSeq: {cseq} {method}\r\nMax-Forwards: 70\r\nContent-Length: 0\r\n\r\n",
            key.from, key.call_id
        );
        let request = rsip::Request::try_from(text.as_str()).ok()?;
        let endpoint = &self.core.endpoint;
        let txkey = TransactionKey::from_request(&request, TransactionRole::Client).ok()?;
        let mut tx = Transaction::new_client(txkey, request, endpoint.clone(), None);
        tx.destination = Some(SipAddr {
            r#type: Some(sip_transport(key.transport)),
            addr: key.destination.into(),
        });
        let wait = async {
            tx.send().await.ok()?;
            while let Some(msg) = tx.receive().await {
                if let rsip::SipMessage::Response(resp) = msg
                    && resp.status_code.kind() != StatusCodeKind::Provisional
                {
                    return Some(u16::from(resp.status_code));
                }
            }
            None
        };
        tokio::time::timeout(self.core.settings.t1 * 16, wait)
            .await
            .ok()
            .flatten()
    }
}

/// Cancels an INVITE whose dial is dropped before its final response.
struct CancelOnDrop(Option<InviteDialog>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(dialog) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = dialog.cancel().await;
            });
        }
    }
}

/// Runs an answered outbound call's dialog: answers the peer's in-dialog requests (through
/// the shared [`Core::on_state`]) and keeps the session timer.
async fn drive(
    core: Arc<Core>,
    dialog: InviteDialog,
    id: DialogId,
    timer: Option<SessionTimer>,
    invite: Option<TransactionKey>,
) {
    let now = tokio::time::Instant::now();
    let mut invite = invite;
    let fork_window_ends = now + FORK_WINDOW;
    let mut next = timer.map(|t| {
        if t.we_refresh {
            now + t.interval / 2
        } else {
            now + expiry_margin(t.interval)
        }
    });
    // Nothing left to do (no session timer, the fork window over): the task ends, and the
    // call's end is the shared state loop's to notice.
    while invite.is_some() || next.is_some() {
        let wake = next.unwrap_or_else(|| now + Duration::from_secs(86_400 * 365));
        tokio::select! {
            _ = tokio::time::sleep_until(fork_window_ends), if invite.is_some() => {
                if let Some(key) = invite.take()
                    && let Some(tx) = core.endpoint.transactions.get(&key)
                {
                    let _ = tx.send(TransactionEvent::Terminate(key));
                }
            }
            _ = tokio::time::sleep_until(wake), if next.is_some() => {
                let Some(t) = timer else { return };
                if t.we_refresh {
                    if refresh(&core, &dialog, &id, t).await {
                        next = Some(tokio::time::Instant::now() + t.interval / 2);
                        continue;
                    }
                    tracing::info!(call_id = %id.call_id, "the session refresh failed; ending the call");
                } else {
                    let since = core.refreshed_at(&id).map(|at| at.elapsed()).unwrap_or_default();
                    let margin = expiry_margin(t.interval);
                    if since < margin {
                        next = Some(tokio::time::Instant::now() + (margin - since));
                        continue;
                    }
                    tracing::info!(call_id = %id.call_id, "the peer stopped refreshing the session; ending the call");
                }
                core.end(&id, EndCause::SessionExpired);
                let _ = dialog.bye().await;
                core.dialogs.remove_dialog(&id);
                return;
            }
        }
    }
}

/// An outbound INVITE's place in [`Core::dialing`], for as long as it waits for its answer.
struct Dialing<'a> {
    core: &'a Core,
    call_id: String,
}

impl<'a> Dialing<'a> {
    fn register(
        core: &'a Core,
        call_id: String,
        progress: mpsc::UnboundedSender<Box<DialogState>>,
    ) -> Dialing<'a> {
        if let Ok(mut dialing) = core.dialing.lock() {
            dialing.insert(call_id.clone(), progress);
        }
        Dialing { core, call_id }
    }
}

impl Drop for Dialing<'_> {
    fn drop(&mut self) {
        if let Ok(mut dialing) = self.core.dialing.lock() {
            dialing.remove(&self.call_id);
        }
    }
}

/// How long the INVITE transaction of an answered call stays open after the answer, to ACK
/// and hang up a second 2xx from another branch of a forking proxy. RFC 6026 keeps it for
/// 64*T1 (32 s) in all; past this window the endpoint still re-sends our ACK to
/// retransmissions of the answer (it keeps the ACK until the transaction expiry), so closing
/// the transaction early only stops watching for forks that answer seconds late, and frees
/// its buffers and task sooner on every answered call.
const FORK_WINDOW: Duration = Duration::from_secs(4);

/// When, after a refresh by the peer, we give the session up: before it expires at the
/// carrier (RFC 4028 §10: interval minus the smaller of 32 s and a third of it).
fn expiry_margin(interval: Duration) -> Duration {
    interval - std::cmp::min(Duration::from_secs(32), interval / 3)
}

/// Sends one session refresh; `true` if the peer accepted it.
async fn refresh(core: &Core, dialog: &InviteDialog, id: &DialogId, timer: SessionTimer) -> bool {
    let Some(offer) = core.next_offer(id) else {
        return false;
    };
    let headers = vec![
        Header::Supported("timer".into()),
        Header::Other(
            "Session-Expires".into(),
            format!("{};refresher=uac", timer.interval.as_secs()),
        ),
        sdp_type(),
    ];
    let sent = if timer.use_update {
        dialog.update(Some(headers), Some(offer)).await
    } else {
        dialog.reinvite(Some(headers), Some(offer)).await
    };
    match sent {
        Ok(Some(resp)) => {
            resp.status_code.kind() == StatusCodeKind::Successful
                // A refresh that crossed one of the peer's requests: the session is alive.
                || resp.status_code == StatusCode::RequestPending
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(headers: &[(&str, &str)]) -> rsip::Response {
        let mut text = String::from(
            "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1:5060;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:c@d>;tag=2\r\nCall-ID: x\r\nCSeq: 1 INVITE\r\n",
        );
        for (name, value) in headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("Content-Length: 0\r\n\r\n");
        rsip::Response::try_from(text.as_str()).expect("a valid response")
    }

    #[test]
    fn q850_causes_are_read_from_reason() {
        let r = response(&[("Reason", "Q.850;cause=17;text=\"User busy\"")]);
        assert_eq!(q850_cause(&r), Some(17));
        let r = response(&[("Reason", "SIP;cause=486, Q.850;cause=34")]);
        assert_eq!(q850_cause(&r), Some(34));
        assert_eq!(q850_cause(&response(&[])), None);
    }

    #[test]
    fn session_timers_name_the_refresher() {
        let t = session_timer(&response(&[
            ("Session-Expires", "90;refresher=uac"),
            ("Allow", "INVITE, ACK, BYE, UPDATE"),
        ]));
        assert_eq!(
            t,
            Some(SessionTimer {
                interval: Duration::from_secs(90),
                we_refresh: true,
                use_update: true
            })
        );
        let t = session_timer(&response(&[("Session-Expires", "1800;refresher=uas")]));
        assert_eq!(
            t.map(|t| (t.we_refresh, t.use_update)),
            Some((false, false))
        );
        assert_eq!(session_timer(&response(&[])), None);
        assert_eq!(
            expiry_margin(Duration::from_secs(90)),
            Duration::from_secs(60)
        );
        assert_eq!(
            expiry_margin(Duration::from_secs(1800)),
            Duration::from_secs(1768)
        );
    }

    #[test]
    fn tech_prefixes_are_escaped_in_uris() {
        assert_eq!(uri_user("1234#972501234567"), "1234%23972501234567");
        assert_eq!(host_port("2001:db8::1", Some(5060)), "[2001:db8::1]:5060");
        assert!(uri("sip:1234%23972501234567@gw.example.net").is_ok());
    }
}
