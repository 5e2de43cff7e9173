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
//! Cut by role: `shared` (the router the service implements, the state the loops share, the
//! error of starting), `transports` (the endpoint over the caller's sockets, the stream
//! listeners' accept loops), `invite` (the inbound INVITE path), `dialogs` (the loops that hand
//! incoming transactions and dialog states on). This file starts them and calls down to them.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rsipstack::dialog::dialog_layer::DialogLayer;
use rsipstack::transport::TransportLayer;
use rsipstack::transport::udp::UdpConnection;
use tokio_util::sync::CancellationToken;

use crate::admission::{Admission, AdmissionStats, CallCounter, RateLimiter, spawn_lag_probe};
use crate::call::Core;
pub use crate::call::{Call, CallEvent, Direction, EndCause};
use crate::gate::Gate;
use crate::journal::{Crossing, Inspector, InviteLog};
use crate::rtp::RtpPorts;
pub use crate::settings::{SipSettings, SipSockets, TlsSettings};

mod dialogs;
mod invite;
mod shared;
mod transports;

use shared::Shared;
pub use shared::{Answer, InboundRouter, Routing, SipError};

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

impl SipServer {
    /// Starts serving on sockets the caller has bound (see [`SipSockets::bind`]).
    pub async fn start<R: InboundRouter>(
        settings: SipSettings,
        sockets: SipSockets,
        router: R,
    ) -> Result<SipServer, SipError> {
        let stop = CancellationToken::new();
        let addresses = transports::Addresses::of(&settings, &sockets)?;
        let tls = transports::tls(&settings, sockets.tls)?;
        let tls_addr = match &tls {
            Some((_, listener)) => Some(listener.local_addr()?),
            None => None,
        };
        let layer_stop = stop.child_token();
        let layer = TransportLayer::new(layer_stop.clone());
        let limiter = Arc::new(RateLimiter::new(settings.invites_per_second));
        let admission = Admission::new(settings.admission);
        let calls = Arc::new(CallCounter::default());
        let gate = Arc::new(Gate::new(
            sockets.udp,
            admission.clone(),
            limiter.clone(),
            calls.clone(),
            settings.t1,
            &settings.user_agent,
        ));
        let udp_public = SocketAddr::new(addresses.public_ip, addresses.port);
        let udp =
            UdpConnection::from_socket(gate.clone(), Some(udp_public), Some(stop.child_token()))
                .await
                .map_err(transports::error)?;
        layer.add_transport(udp.into());
        let crossing = Arc::new(Crossing::default());
        let (invite_log, left_over) = match &settings.invite_log {
            Some(path) => {
                let (log, left) = InviteLog::open(path)?;
                (Some(Arc::new(log)), left)
            }
            None => (None, Vec::new()),
        };
        let inspector = invite_log.clone().map(|log| Inspector {
            log,
            crossing: crossing.clone(),
        });
        let endpoint = transports::endpoint(&settings, layer, inspector, stop.child_token());
        let incoming = endpoint
            .incoming_transactions()
            .map_err(transports::error)?;
        let dialogs = Arc::new(DialogLayer::new(endpoint.inner.clone()));
        let (states, state_rx) = dialogs.new_dialog_state_channel();
        let contacts = addresses.contacts(tls_addr);
        let rtp_ip = settings.rtp_ip.unwrap_or(addresses.listen_ip);
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
            media_counters: Arc::default(),
            calls,
            invite_log,
            left_over: Mutex::new(left_over),
            crossing,
            media_ip: addresses.public_ip,
            endpoint: endpoint.inner.clone(),
            dialogs,
            states,
            dialing: Mutex::new(HashMap::new()),
            live: Mutex::new(HashMap::new()),
            contacts,
        });
        let shared = Arc::new(Shared {
            router,
            core: core.clone(),
            limiter,
            admission: admission.clone(),
            gate,
        });
        let streams = addresses.streams(sockets.tcp, tls, tls_addr);
        let task_stop = stop.clone();
        let task = tokio::spawn(async move {
            let endpoint_inner = endpoint.inner.clone();
            let mut serve = std::pin::pin!(endpoint.serve());
            if !transports::serve_streams(serve.as_mut(), streams, &endpoint_inner, layer_stop)
                .await
            {
                return;
            }
            let accept = dialogs::accept_loop(shared.clone(), incoming);
            let states = dialogs::state_loop(shared.core.clone(), state_rx);
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
            udp: SocketAddr::new(addresses.listen_ip, addresses.port),
            tcp: addresses.tcp,
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

    /// RTP packets ignored so far because they came from an address no call negotiated.
    pub fn foreign_rtp_packets(&self) -> u64 {
        self.core
            .media_counters
            .foreign_packets
            .load(std::sync::atomic::Ordering::Relaxed)
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
