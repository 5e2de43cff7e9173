//! The SIP server: UDP and TCP listeners (and TLS with a certificate) on sockets the caller
//! binds, the inbound INVITE path and the dialogs of live calls.
//!
//! An INVITE for `sip:<slug>@host` is checked in this order: over UDP, the gate in front of
//! the socket ([`crate::gate`]) refuses it statelessly when admission would; then the source's
//! INVITE rate (over UDP an INVITE past it is dropped unanswered; over TCP and TLS it gets
//! 503), admission ([`crate::admission`]: 503 with `Retry-After` when the node cannot take
//! another call, before any lookup, SDP or media work). An admitted INVITE gets 100 Trying at
//! once; then the slug ([`InboundRouter::route`]: unknown, deleted and inactive all answer the same 404), the
//! source address (403), the SDP offer (488 without a common codec). Then 180, a short ring,
//! 200 with the SDP answer, and the call is handed to [`InboundRouter::run_call`] with its
//! media running.
//!
//! One file on purpose: the transports' setup, the INVITE path and the dialog-state loop all
//! work on the same `Shared` state and rsipstack's endpoint, and are read together.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rsipstack::EndpointBuilder;
use rsipstack::dialog::dialog::DialogState;
use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::dialog::invite_dialog::InviteDialog;
use rsipstack::sip::prelude::HeadersExt;
use rsipstack::sip::{self as rsip, Header, Method, StatusCode};
use rsipstack::transaction::Transaction;
use rsipstack::transaction::endpoint::EndpointOption;
use rsipstack::transport::tcp::TcpConnection;
use rsipstack::transport::tls::{ReloadableCertResolver, TlsConnection};
use rsipstack::transport::udp::UdpConnection;
use rsipstack::transport::{
    SipAddr, SipConnection, TcpListenerConnection, TlsConfig, TlsListenerConnection, TransportLayer,
};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::admission::{Admission, AdmissionSettings, AdmissionStats, Refusal, spawn_lag_probe};
pub use crate::call::{Call, CallEvent, Direction, EndCause};
use crate::call::{CallParts, Core, LiveDialog, event_sink, sdp_type};
use crate::gate::Gate;
use crate::media::{self, MediaConfig, VadSettings};
use crate::rtp::RtpPorts;
use crate::sdp::{self, Codec, MediaDescription, SdpError};

/// Where and how the server listens.
#[derive(Debug, Clone)]
pub struct SipSettings {
    /// SIP over TLS with this certificate (its listener is in [`SipSockets::tls`]).
    pub tls: Option<TlsSettings>,
    /// The address peers should use, written into Via, Contact and SDP. Defaults to the UDP
    /// socket's address (or the first non-loopback address when it is bound to 0.0.0.0).
    pub public_ip: Option<IpAddr>,
    /// Media sockets are bound on `rtp_ip` (default: the UDP socket's IP) in `rtp_ports`.
    pub rtp_ip: Option<IpAddr>,
    pub rtp_ports: (u16, u16),
    /// INVITEs accepted from one source address per second (and as a burst).
    pub invites_per_second: u32,
    /// How long the call rings (180) before it is answered.
    pub ring: Duration,
    /// SIP timer T1; retransmissions follow from it.
    pub t1: Duration,
    /// The transaction layer's expiry (see [`SipSettings::transaction_expiry`]); `None` is
    /// 32 x T1.
    pub transaction_expiry: Option<Duration>,
    /// Reordering depth of the caller's audio, in 20 ms packets.
    pub jitter_depth: usize,
    pub user_agent: String,
    /// When new inbound calls are refused (see [`crate::admission`]).
    pub admission: AdmissionSettings,
}

#[derive(Debug, Clone)]
pub struct TlsSettings {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl Default for SipSettings {
    fn default() -> Self {
        SipSettings {
            tls: None,
            public_ip: None,
            rtp_ip: None,
            rtp_ports: (20_000, 39_999),
            invites_per_second: 20,
            ring: Duration::from_millis(200),
            t1: Duration::from_millis(500),
            transaction_expiry: None,
            jitter_depth: 3,
            user_agent: "Switchboard".into(),
            admission: AdmissionSettings::default(),
        }
    }
}

impl SipSettings {
    /// The longest a transaction waits, RFC 3261's 64 x T1 "transaction expire" (like a session
    /// border controller's `trans-expire`): for a first answer to our INVITE or request
    /// (timers B and F), for the ACK of our answer (H, L), for late retransmissions (D, J, M),
    /// and before a finished transaction's last message is dropped. Switchboard's default is
    /// 32 x T1 (16 s): a request of ours that gets no answer at all is given up after 16 s
    /// rather than 32, an answer nobody acknowledges is hung up after 16 s, and after a flood
    /// of calls the transaction layer lets go of its memory within 16 s.
    pub fn transaction_expiry(&self) -> Duration {
        self.transaction_expiry.unwrap_or(self.t1 * 32)
    }
}

/// The server's sockets, bound by the caller (tests bind port 0 and pass them in; the CLI binds
/// its flags' addresses).
#[derive(Debug)]
pub struct SipSockets {
    pub udp: tokio::net::UdpSocket,
    /// TCP, on the UDP socket's port.
    pub tcp: tokio::net::TcpListener,
    /// SIP over TLS; required when the settings have [`SipSettings::tls`].
    pub tls: Option<tokio::net::TcpListener>,
}

impl SipSockets {
    /// Binds UDP and TCP on `listen` (port 0 picks one port free for both) and TLS on `tls`.
    pub async fn bind(listen: SocketAddr, tls: Option<SocketAddr>) -> std::io::Result<Self> {
        let mut tries = 0;
        let (udp, tcp) = loop {
            let udp = tokio::net::UdpSocket::bind(listen).await?;
            let port = udp.local_addr()?.port();
            match tokio::net::TcpListener::bind(SocketAddr::new(listen.ip(), port)).await {
                Ok(tcp) => break (udp, tcp),
                // Port 0 chose a UDP port whose TCP twin is taken: choose again.
                Err(e)
                    if listen.port() == 0
                        && e.kind() == std::io::ErrorKind::AddrInUse
                        && tries < 32 =>
                {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        };
        let tls = match tls {
            Some(addr) => Some(tokio::net::TcpListener::bind(addr).await?),
            None => None,
        };
        Ok(SipSockets { udp, tcp, tls })
    }
}

/// What the service decides about an inbound INVITE.
pub enum Routing<T> {
    /// No such endpoint, or it is deleted or inactive: 404, the same for every reason.
    Unknown,
    /// The source address is not allowed to call this endpoint: 403.
    Forbidden,
    /// No capacity for another call now: 503.
    Busy,
    /// Answer, with what the service needs to run the call.
    Answer(Answer<T>),
}

/// How to answer a routed call.
pub struct Answer<T> {
    pub target: T,
    /// Where to record the call; none for no recording.
    pub recording: Option<std::path::PathBuf>,
    pub vad: VadSettings,
}

/// The service's side of inbound calls.
#[async_trait]
pub trait InboundRouter: Send + Sync + 'static {
    type Target: Send + 'static;

    /// Which endpoint `slug` names and whether `source` may call it.
    async fn route(&self, slug: &str, source: IpAddr) -> Routing<Self::Target>;

    /// Runs an answered call to its end. The call's media is already flowing; end it with
    /// [`Call::hangup`] or wait for [`CallEvent::Ended`], then [`Call::finish`].
    async fn run_call(&self, target: Self::Target, call: Call);
}

/// Counts INVITEs per source over one-second windows.
pub(crate) struct RateLimiter {
    per_second: u32,
    window: Mutex<(Instant, HashMap<IpAddr, u32>)>,
}

impl RateLimiter {
    pub fn new(per_second: u32) -> RateLimiter {
        RateLimiter {
            per_second: per_second.max(1),
            window: Mutex::new((Instant::now(), HashMap::new())),
        }
    }

    pub fn allow(&self, ip: IpAddr) -> bool {
        let Ok(mut w) = self.window.lock() else {
            return true;
        };
        let now = Instant::now();
        if now.duration_since(w.0) >= Duration::from_secs(1) {
            w.0 = now;
            w.1.clear();
        }
        let n = w.1.entry(ip).or_insert(0);
        *n += 1;
        *n <= self.per_second
    }
}

struct Shared<R: InboundRouter> {
    router: R,
    core: Arc<Core>,
    limiter: Arc<RateLimiter>,
    admission: Arc<Admission>,
    gate: Arc<Gate>,
}

/// A running SIP server.
pub struct SipServer {
    core: Arc<Core>,
    admission: Arc<Admission>,
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    pub tls: Option<SocketAddr>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
pub enum SipError {
    #[error("SIP transport: {0}")]
    Transport(String),
    #[error("SIP over TLS: {0}")]
    Tls(String),
    #[error("SIP over TLS is configured but no TLS listener was given")]
    NoTlsListener,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl SipServer {
    /// Starts serving on sockets the caller has bound (see [`SipSockets::bind`]).
    pub async fn start<R: InboundRouter>(
        settings: SipSettings,
        sockets: SipSockets,
        router: R,
    ) -> Result<SipServer, SipError> {
        let stop = CancellationToken::new();
        let transport = |e: rsipstack::Error| SipError::Transport(e.to_string());
        let udp_local = sockets.udp.local_addr()?;
        let listen_ip = udp_local.ip();
        let port = udp_local.port();
        let public_ip = match settings.public_ip {
            Some(ip) => ip,
            None if listen_ip.is_unspecified() => {
                rsipstack::transport::SipConnection::resolve_bind_address(udp_local).ip()
            }
            None => listen_ip,
        };
        let tcp_addr = sockets.tcp.local_addr()?;
        let tls = match (&settings.tls, sockets.tls) {
            (Some(tls), Some(listener)) => Some((tls_acceptor(tls)?, listener)),
            (Some(_), None) => return Err(SipError::NoTlsListener),
            (None, _) => None,
        };
        let tls_addr = match &tls {
            Some((_, listener)) => Some(listener.local_addr()?),
            None => None,
        };
        let layer_stop = stop.child_token();
        let layer = TransportLayer::new(layer_stop.clone());
        let udp_public = SocketAddr::new(public_ip, port);
        let limiter = Arc::new(RateLimiter::new(settings.invites_per_second));
        let admission = Admission::new(settings.admission);
        let gate = Arc::new(Gate::new(
            sockets.udp,
            admission.clone(),
            limiter.clone(),
            settings.t1,
            &settings.user_agent,
        ));
        let udp =
            UdpConnection::from_socket(gate.clone(), Some(udp_public), Some(stop.child_token()))
                .await
                .map_err(transport)?;
        layer.add_transport(udp.into());
        let option = EndpointOption {
            t1: settings.t1,
            t1x64: settings.transaction_expiry(),
            ..Default::default()
        };
        let endpoint = EndpointBuilder::new()
            .with_cancel_token(stop.child_token())
            .with_transport_layer(layer)
            .with_user_agent(&settings.user_agent)
            .with_option(option)
            .with_allows(vec![
                Method::Invite,
                Method::Ack,
                Method::Bye,
                Method::Cancel,
                Method::Options,
            ])
            .build();
        let incoming = endpoint.incoming_transactions().map_err(transport)?;
        let dialogs = Arc::new(DialogLayer::new(endpoint.inner.clone()));
        let (states, state_rx) = dialogs.new_dialog_state_channel();
        let contact = |transport: Option<rsip::Transport>, port: u16| rsip::Uri {
            scheme: Some(rsip::Scheme::Sip),
            auth: Some(rsip::Auth {
                user: "switchboard".into(),
                password: None,
            }),
            host_with_port: SocketAddr::new(public_ip, port).into(),
            params: transport.map(rsip::Param::Transport).into_iter().collect(),
            headers: vec![],
        };
        let mut contacts = HashMap::new();
        contacts.insert("udp", contact(None, port));
        contacts.insert("tcp", contact(Some(rsip::Transport::Tcp), tcp_addr.port()));
        if let Some(tls) = tls_addr {
            contacts.insert("tls", contact(Some(rsip::Transport::Tls), tls.port()));
        }
        let rtp_ip = settings.rtp_ip.unwrap_or(listen_ip);
        let ports = RtpPorts::new(rtp_ip, settings.rtp_ports.0, settings.rtp_ports.1)?;
        spawn_lag_probe(admission.clone(), stop.child_token());
        crate::retention::spawn(
            endpoint.inner.clone(),
            gate.clone(),
            settings.t1 * 16,
            stop.child_token(),
        );
        let core = Arc::new(Core {
            settings,
            ports,
            media_ip: public_ip,
            endpoint: endpoint.inner.clone(),
            dialogs,
            states,
            dialing: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            contacts,
        });
        gate.attach(&core);
        let shared = Arc::new(Shared {
            router,
            core: core.clone(),
            limiter,
            admission: admission.clone(),
            gate,
        });
        let tcp_public = SocketAddr::new(public_ip, tcp_addr.port());
        let mut streams = vec![(
            sockets.tcp,
            None,
            SipAddr {
                r#type: Some(rsip::Transport::Tcp),
                addr: tcp_public.into(),
            },
        )];
        if let (Some((acceptor, listener)), Some(addr)) = (tls, tls_addr) {
            let public = SocketAddr::new(public_ip, addr.port());
            streams.push((
                listener,
                Some(acceptor),
                SipAddr {
                    r#type: Some(rsip::Transport::Tls),
                    addr: public.into(),
                },
            ));
        }
        let task_stop = stop.clone();
        let task = tokio::spawn(async move {
            let endpoint_inner = endpoint.inner.clone();
            let mut serve = std::pin::pin!(endpoint.serve());
            // rsipstack serves (and for TCP and TLS, binds) every listener registered when the
            // endpoint starts, in the endpoint's first poll. UDP is served from our socket; the
            // stream listeners are ours, so they are registered after that first poll, only for
            // the address in-dialog requests' Via names (RFC 3261 §18.1.1).
            let mut first = std::task::Poll::Pending;
            std::future::poll_fn(|cx| {
                first = serve.as_mut().poll(cx);
                std::task::Poll::Ready(())
            })
            .await;
            if first.is_ready() {
                return;
            }
            for (_, acceptor, local) in &streams {
                let Ok(addr) = local.get_socketaddr() else {
                    continue;
                };
                let listener = if acceptor.is_some() {
                    TlsListenerConnection::new(addr, None, TlsConfig::default())
                        .await
                        .map(SipConnection::TlsListener)
                } else {
                    TcpListenerConnection::new(addr, None)
                        .await
                        .map(SipConnection::TcpListener)
                };
                if let Ok(listener) = listener {
                    endpoint_inner.transport_layer.inner.add_listener(listener);
                }
            }
            for (listener, acceptor, local) in streams {
                tokio::spawn(accept_streams(
                    listener,
                    acceptor,
                    local,
                    endpoint_inner.clone(),
                    layer_stop.clone(),
                ));
            }
            let accept = accept_loop(shared.clone(), incoming);
            let states = state_loop(shared.core.clone(), state_rx);
            tokio::select! {
                _ = serve => {}
                _ = accept => {}
                _ = states => {}
                _ = task_stop.cancelled() => {}
            }
        });
        Ok(SipServer {
            core,
            admission,
            udp: SocketAddr::new(listen_ip, port),
            tcp: tcp_addr,
            tls: tls_addr,
            stop,
            task,
        })
    }

    /// The client side: outbound calls and OPTIONS probes through this server's transports.
    pub fn client(&self) -> crate::outbound::SipClient {
        crate::outbound::SipClient {
            core: self.core.clone(),
        }
    }

    /// What the server's gauges read from (`/metrics`).
    pub fn monitor(&self) -> SipMonitor {
        SipMonitor {
            core: self.core.clone(),
            admission: self.admission.clone(),
        }
    }

    /// Stops listening. Live calls' media keeps running until their owners finish them.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// A running server's figures, read at any time.
#[derive(Clone)]
pub struct SipMonitor {
    core: Arc<Core>,
    admission: Arc<Admission>,
}

impl SipMonitor {
    /// What admission has admitted and refused, and its signals now.
    pub fn admission(&self) -> AdmissionStats {
        self.admission.stats()
    }

    /// Calls on the server now (both directions).
    pub fn calls(&self) -> usize {
        self.core.call_count()
    }

    /// The transaction layer's tables now.
    pub fn transactions(&self) -> TransactionStats {
        let stats = self.core.endpoint.get_stats();
        TransactionStats {
            running: stats.running_transactions,
            finished: stats.finished_transactions,
            waiting_ack: stats.waiting_ack,
            timers: self.core.endpoint.timers.len(),
        }
    }
}

/// The sizes of the transaction layer's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionStats {
    /// Transactions running (not yet terminated).
    pub running: usize,
    /// Terminated transactions whose last message is kept to answer late retransmissions.
    pub finished: usize,
    /// Answered INVITEs waiting for their ACK.
    pub waiting_ack: usize,
    /// Timers armed (retransmissions, waits, the expiry of finished transactions): none once
    /// no call is up and the last transaction has expired.
    pub timers: usize,
}

/// Accepts TCP (or, with an acceptor, TLS) connections on a listener the caller bound and
/// hands each to the endpoint's transport layer, until `stop`.
async fn accept_streams(
    listener: tokio::net::TcpListener,
    acceptor: Option<TlsAcceptor>,
    local: SipAddr,
    endpoint: Arc<rsipstack::transaction::endpoint::EndpointInner>,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, remote) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, local = %local, "accepting a SIP connection failed");
                continue;
            }
        };
        let Some(acceptor) = acceptor.clone() else {
            match TcpConnection::from_stream(stream, local.clone(), Some(stop.child_token())) {
                Ok(conn) => endpoint
                    .transport_layer
                    .add_connection(SipConnection::Tcp(conn)),
                Err(e) => tracing::warn!(error = %e, %remote, "SIP over TCP connection failed"),
            }
            continue;
        };
        let (endpoint, local, stop) = (endpoint.clone(), local.clone(), stop.clone());
        // The handshake runs on its own task so a slow client holds up no one else.
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(error = %e, %remote, "TLS handshake failed");
                    return;
                }
            };
            let remote = SipAddr {
                r#type: Some(rsip::Transport::Tls),
                addr: remote.into(),
            };
            match TlsConnection::from_server_stream(stream, local, remote, Some(stop.child_token()))
                .await
            {
                Ok(conn) => endpoint
                    .transport_layer
                    .add_connection(SipConnection::Tls(conn)),
                Err(e) => tracing::warn!(error = %e, "SIP over TLS connection failed"),
            }
        });
    }
}

/// The TLS acceptor for the configured certificate and key (PEM).
fn tls_acceptor(tls: &TlsSettings) -> Result<TlsAcceptor, SipError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let resolver = ReloadableCertResolver::new(&tls.cert_pem, &tls.key_pem, provider.clone())
        .map_err(|e| SipError::Tls(e.to_string()))?;
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| SipError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn accept_loop<R: InboundRouter>(
    shared: Arc<Shared<R>>,
    mut incoming: rsipstack::transaction::TransactionReceiver,
) {
    while let Some(tx) = incoming.recv().await {
        let shared = shared.clone();
        tokio::spawn(async move { shared.incoming(tx).await });
    }
}

async fn state_loop(core: Arc<Core>, mut states: mpsc::UnboundedReceiver<DialogState>) {
    while let Some(state) = states.recv().await {
        core.on_state(state);
    }
}

fn source_of(tx: &Transaction) -> Option<SocketAddr> {
    tx.connection
        .as_ref()
        .and_then(|c| c.get_remote_addr())
        .and_then(|a| a.get_socketaddr().ok())
}

impl<R: InboundRouter> Shared<R> {
    async fn incoming(self: Arc<Self>, mut tx: Transaction) {
        let in_dialog = tx
            .original
            .to_header()
            .ok()
            .and_then(|to| to.tag().ok().flatten())
            .is_some();
        if in_dialog {
            match self.core.dialogs.match_dialog(&tx) {
                Some(mut dialog) => {
                    let _ = dialog.handle(&mut tx).await;
                }
                None => {
                    let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
                }
            }
            return;
        }
        match tx.original.method {
            Method::Invite => self.invite(tx).await,
            Method::Options => {
                let allow = Header::Allow("INVITE, ACK, BYE, CANCEL, OPTIONS".into());
                let _ = tx.reply_with(StatusCode::OK, vec![allow], None).await;
            }
            Method::Bye => {
                let _ = tx.reply(StatusCode::CallTransactionDoesNotExist).await;
            }
            _ => {
                let allow = Header::Allow("INVITE, ACK, BYE, CANCEL, OPTIONS".into());
                let _ = tx
                    .reply_with(StatusCode::MethodNotAllowed, vec![allow], None)
                    .await;
            }
        }
    }

    async fn invite(self: Arc<Self>, mut tx: Transaction) {
        let Some(source) = source_of(&tx) else {
            let _ = tx.reply(StatusCode::BadRequest).await;
            return;
        };
        // Over UDP the gate has usually decided already (source rate and admission): it
        // refused at the socket what it would refuse, and what it let through is taken.
        let decided = self.gate.passed_request(&tx.original);
        if !decided && !self.limiter.allow(source.ip()) {
            // Over UDP the INVITE is dropped unanswered: the caller's own retransmissions
            // retry it after the window, a spoofed flood gets nothing reflected, and a scanner
            // cannot tell an over-limit INVITE from any other. Over TCP and TLS (no
            // retransmissions, no spoofing) the caller is told to come back.
            let reliable = tx.connection.as_ref().is_some_and(|c| c.is_reliable());
            if reliable {
                let retry = Header::RetryAfter("1".into());
                let _ = tx
                    .reply_with(StatusCode::ServiceUnavailable, vec![retry], None)
                    .await;
            }
            return;
        }
        // Before any lookup, SDP or media: is there room for this call at all?
        let admitted = match decided {
            true => Ok(self.admission.admit_decided()),
            false => self.admission.admit(self.core.call_count()),
        };
        let permit = match admitted {
            Ok(permit) => permit,
            Err(why) => {
                tracing::debug!(reason = why.as_str(), "an INVITE was refused");
                self.unavailable(&mut tx).await;
                return;
            }
        };
        // Taken: the caller stops retransmitting while the call is set up.
        let _ = tx.send_trying().await;
        let slug = tx.original.uri.user().unwrap_or_default().to_string();
        let answer = match self.router.route(&slug, source.ip()).await {
            Routing::Unknown => {
                let _ = tx.reply(StatusCode::NotFound).await;
                return;
            }
            Routing::Forbidden => {
                let _ = tx.reply(StatusCode::Forbidden).await;
                return;
            }
            Routing::Busy => {
                self.unavailable(&mut tx).await;
                return;
            }
            Routing::Answer(answer) => answer,
        };
        let offer = match MediaDescription::parse(&tx.original.body) {
            Ok(offer) => offer,
            Err(SdpError::NotText | SdpError::Malformed(_)) if !tx.original.body.is_empty() => {
                let _ = tx.reply(StatusCode::BadRequest).await;
                return;
            }
            Err(_) => {
                let _ = tx.reply(StatusCode::NotAcceptableHere).await;
                return;
            }
        };
        let Ok((payload_type, codec)) = offer.choose(&Codec::ALL) else {
            let _ = tx.reply(StatusCode::NotAcceptableHere).await;
            return;
        };
        if offer.addr.port() == 0 {
            let _ = tx.reply(StatusCode::NotAcceptableHere).await;
            return;
        }
        let socket = match self.core.ports.bind().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "no RTP port for an inbound call");
                self.admission.refused(Refusal::RtpPorts);
                self.unavailable(&mut tx).await;
                return;
            }
        };
        let transport = tx
            .connection
            .as_ref()
            .map(|c| c.transport())
            .unwrap_or(rsip::Transport::Udp);
        let contact_key = match transport {
            rsip::Transport::Tcp => "tcp",
            rsip::Transport::Tls => "tls",
            _ => "udp",
        };
        let contact = self.core.contacts.get(contact_key).cloned();
        let mut dialog = match self.core.dialogs.get_or_create_server_invite(
            &tx,
            self.core.states.clone(),
            None,
            contact,
        ) {
            Ok(d) => d,
            Err(_) => {
                // No Contact header, or a malformed From/To.
                let _ = tx.reply(StatusCode::BadRequest).await;
                return;
            }
        };
        let id = dialog.id();
        let local = match socket.local_addr() {
            Ok(a) => SocketAddr::new(self.core.media_ip, a.port()),
            Err(_) => {
                let _ = tx.reply(StatusCode::ServerInternalError).await;
                return;
            }
        };
        let session_id: u64 = rand::random::<u32>().into();
        let (events_tx, events_rx) = crate::call::event_stream();
        let core = &self.core;
        core.insert_live(
            id.clone(),
            LiveDialog {
                direction: Direction::Inbound,
                events: events_tx.clone(),
                media: None,
                answer: (local, payload_type, codec),
                session_id,
                version: 1,
                refreshed: Instant::now(),
            },
        );
        let control = dialog.clone();
        tokio::spawn(async move {
            let _ = dialog.handle(&mut tx).await;
        });
        let _ = control.ringing(None, None);
        tokio::time::sleep(core.settings.ring).await;
        if !core.is_live(&id) {
            // Cancelled while ringing.
            return;
        }
        let body = sdp::describe(local, &[(payload_type, codec)], session_id, 1);
        if control
            .accept(Some(vec![sdp_type()]), Some(body.into_bytes()))
            .is_err()
        {
            return;
        }
        let media = match media::start(
            socket,
            MediaConfig {
                codec,
                payload_type,
                remote: offer.addr,
                recording: answer.recording,
                vad: answer.vad,
                jitter_depth: core.settings.jitter_depth,
            },
            event_sink(&events_tx),
        ) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "inbound call media did not start");
                let _ = control.bye().await;
                return;
            }
        };
        core.set_media(&id, media.control());
        let from = tx_from(&control);
        let call = Call::new(
            core.clone(),
            CallParts {
                direction: Direction::Inbound,
                call_id: id.call_id.clone(),
                from,
                to: slug,
                remote: source,
                codec,
                media,
                events: events_rx,
                dialog: control,
                refresher: None,
                // Until the router has recorded the call (`Call::set_up`).
                setup: Some(permit),
            },
        );
        self.router.run_call(answer.target, call).await;
    }
}

impl<R: InboundRouter> Shared<R> {
    /// Refuses an INVITE the server cannot take now: 503 with `Retry-After`.
    async fn unavailable(&self, tx: &mut Transaction) {
        let retry = self.admission.settings().retry_after_secs;
        let retry = Header::RetryAfter(retry.to_string().into());
        let _ = tx
            .reply_with(StatusCode::ServiceUnavailable, vec![retry], None)
            .await;
    }
}

fn tx_from(dialog: &InviteDialog) -> String {
    let req = dialog.initial_request();
    match req.from_header().ok().and_then(|f| f.uri().ok()) {
        Some(uri) => match uri.user() {
            Some(user) => user.to_string(),
            None => uri.to_string(),
        },
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transaction_expiry_is_32_t1_unless_set() {
        let mut settings = SipSettings::default();
        assert_eq!(settings.transaction_expiry(), Duration::from_secs(16));
        settings.t1 = Duration::from_millis(50);
        assert_eq!(settings.transaction_expiry(), Duration::from_millis(1600));
        settings.transaction_expiry = Some(Duration::from_secs(32));
        assert_eq!(settings.transaction_expiry(), Duration::from_secs(32));
    }
}
