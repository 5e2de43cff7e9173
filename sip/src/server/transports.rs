//! The server's transports: rsipstack's endpoint over the sockets the caller bound (UDP through
//! the gate), and the TCP and TLS listeners, whose accept loops are ours and hand each
//! connection to rsipstack's transport layer.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use rsipstack::EndpointBuilder;
use rsipstack::sip::{self as rsip, Method};
use rsipstack::transaction::Endpoint;
use rsipstack::transaction::endpoint::{EndpointInner, EndpointOption};
use rsipstack::transport::tcp::TcpConnection;
use rsipstack::transport::tls::{ReloadableCertResolver, TlsConnection};
use rsipstack::transport::{
    SipAddr, SipConnection, TcpListenerConnection, TlsConfig, TlsListenerConnection, TransportLayer,
};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use super::shared::SipError;
use crate::journal::Inspector;
use crate::settings::{SipSettings, SipSockets, TlsSettings};

/// A stream listener: the socket, its TLS acceptor (none for TCP), and the address in-dialog
/// requests' Via names.
pub(super) type Stream = (tokio::net::TcpListener, Option<TlsAcceptor>, SipAddr);

pub(super) fn error(e: rsipstack::Error) -> SipError {
    SipError::Transport(e.to_string())
}

/// Where the server listens, and the address it writes into Via, Contact and SDP.
pub(super) struct Addresses {
    pub listen_ip: IpAddr,
    /// The UDP port (TCP's too, unless bound elsewhere).
    pub port: u16,
    pub public_ip: IpAddr,
    pub tcp: SocketAddr,
}

impl Addresses {
    pub fn of(settings: &SipSettings, sockets: &SipSockets) -> Result<Addresses, SipError> {
        let udp_local = sockets.udp.local_addr()?;
        let listen_ip = udp_local.ip();
        let public_ip = match settings.public_ip {
            Some(ip) => ip,
            None if listen_ip.is_unspecified() => {
                rsipstack::transport::SipConnection::resolve_bind_address(udp_local).ip()
            }
            None => listen_ip,
        };
        Ok(Addresses {
            listen_ip,
            port: udp_local.port(),
            public_ip,
            tcp: sockets.tcp.local_addr()?,
        })
    }

    /// Our Contact per transport (`udp`, `tcp`, `tls`).
    pub fn contacts(&self, tls: Option<SocketAddr>) -> HashMap<&'static str, rsip::Uri> {
        let contact = |transport: Option<rsip::Transport>, port: u16| rsip::Uri {
            scheme: Some(rsip::Scheme::Sip),
            auth: Some(rsip::Auth {
                user: "switchboard".into(),
                password: None,
            }),
            host_with_port: SocketAddr::new(self.public_ip, port).into(),
            params: transport.map(rsip::Param::Transport).into_iter().collect(),
            headers: vec![],
        };
        let mut contacts = HashMap::new();
        contacts.insert("udp", contact(None, self.port));
        contacts.insert("tcp", contact(Some(rsip::Transport::Tcp), self.tcp.port()));
        if let Some(tls) = tls {
            contacts.insert("tls", contact(Some(rsip::Transport::Tls), tls.port()));
        }
        contacts
    }

    /// The stream listeners to serve: TCP, and TLS when configured.
    pub fn streams(
        &self,
        tcp: tokio::net::TcpListener,
        tls: Option<(TlsAcceptor, tokio::net::TcpListener)>,
        tls_addr: Option<SocketAddr>,
    ) -> Vec<Stream> {
        let tcp_public = SocketAddr::new(self.public_ip, self.tcp.port());
        let mut streams = vec![(
            tcp,
            None,
            SipAddr {
                r#type: Some(rsip::Transport::Tcp),
                addr: tcp_public.into(),
            },
        )];
        if let (Some((acceptor, listener)), Some(addr)) = (tls, tls_addr) {
            let public = SocketAddr::new(self.public_ip, addr.port());
            streams.push((
                listener,
                Some(acceptor),
                SipAddr {
                    r#type: Some(rsip::Transport::Tls),
                    addr: public.into(),
                },
            ));
        }
        streams
    }
}

/// The TLS acceptor and listener, when the settings ask for TLS.
pub(super) fn tls(
    settings: &SipSettings,
    listener: Option<tokio::net::TcpListener>,
) -> Result<Option<(TlsAcceptor, tokio::net::TcpListener)>, SipError> {
    match (&settings.tls, listener) {
        (Some(tls), Some(listener)) => Ok(Some((tls_acceptor(tls)?, listener))),
        (Some(_), None) => Err(SipError::NoTlsListener),
        (None, _) => Ok(None),
    }
}

/// rsipstack's endpoint on `layer`, with the settings' timers.
pub(super) fn endpoint(
    settings: &SipSettings,
    layer: TransportLayer,
    inspector: Option<Inspector>,
    stop: CancellationToken,
) -> Endpoint {
    let option = EndpointOption {
        t1: settings.t1,
        t1x64: settings.transaction_expiry(),
        ..Default::default()
    };
    let mut builder = EndpointBuilder::new();
    if let Some(inspector) = inspector {
        builder.with_inspector(Box::new(inspector));
    }
    builder
        .with_cancel_token(stop)
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
        .build()
}

/// Polls the endpoint's `serve` once, then registers and accepts the stream listeners;
/// `false` if the endpoint stopped at once.
///
/// rsipstack serves (and for TCP and TLS, binds) every listener registered when the endpoint
/// starts, in the endpoint's first poll. UDP is served from our socket; the stream listeners
/// are ours, so they are registered after that first poll, only for the address in-dialog
/// requests' Via names (RFC 3261 §18.1.1).
pub(super) async fn serve_streams<F: Future<Output = ()>>(
    mut serve: Pin<&mut F>,
    streams: Vec<Stream>,
    endpoint: &Arc<EndpointInner>,
    stop: CancellationToken,
) -> bool {
    let mut first = std::task::Poll::Pending;
    std::future::poll_fn(|cx| {
        first = serve.as_mut().poll(cx);
        std::task::Poll::Ready(())
    })
    .await;
    if first.is_ready() {
        return false;
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
            endpoint.transport_layer.inner.add_listener(listener);
        }
    }
    for (listener, acceptor, local) in streams {
        tokio::spawn(accept_streams(
            listener,
            acceptor,
            local,
            endpoint.clone(),
            stop.clone(),
        ));
    }
    true
}

/// Accepts TCP (or, with an acceptor, TLS) connections on a listener the caller bound and
/// hands each to the endpoint's transport layer, until `stop`.
async fn accept_streams(
    listener: tokio::net::TcpListener,
    acceptor: Option<TlsAcceptor>,
    local: SipAddr,
    endpoint: Arc<EndpointInner>,
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
