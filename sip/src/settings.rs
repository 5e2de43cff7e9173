//! How the SIP server listens and times its transactions ([`SipSettings`]), and the sockets
//! the caller binds for it ([`SipSockets`]). Read by the server and by every call's state.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::admission::AdmissionSettings;

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
    /// Where outbound INVITEs are written down for a restart after a crash
    /// ([`crate::outbound::InviteLog`]); none keeps no journal.
    pub invite_log: Option<PathBuf>,
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
            invite_log: None,
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
