//! Where a gateway is: itself when it is an IP address, else its DNS records (RFC 3263), and
//! the URIs an INVITE to it carries.

use std::net::{IpAddr, SocketAddr};

use rsipstack::sip as rsip;
use rsipstack::transport::SipAddr;

use crate::trunk::{Gateway, TrunkTransport};

/// One address a gateway resolves to.
pub(super) struct Target {
    pub(super) gateway: String,
    /// The Request-URI host (the gateway's host as configured).
    pub(super) host: String,
    pub(super) port: Option<u16>,
    pub(super) transport: TrunkTransport,
    pub(super) addr: SipAddr,
}

pub(super) fn sip_transport(t: TrunkTransport) -> rsip::Transport {
    match t {
        TrunkTransport::Udp => rsip::Transport::Udp,
        TrunkTransport::Tcp => rsip::Transport::Tcp,
        TrunkTransport::Tls => rsip::Transport::Tls,
    }
}

/// The addresses `gw` names: itself when it is an IP address, else its DNS records.
pub(super) async fn resolve(gw: &Gateway) -> Result<Vec<Target>, String> {
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
pub(super) fn uri_user(user: &str) -> String {
    user.replace('#', "%23")
}

pub(super) fn host_port(host: &str, port: Option<u16>) -> String {
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

pub(super) fn uri(text: &str) -> Result<rsip::Uri, String> {
    rsip::Uri::try_from(text).map_err(|e| format!("{text}: {e}"))
}
