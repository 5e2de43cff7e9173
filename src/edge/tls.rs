//! TLS for every client and server of the process.

/// Installs the process's TLS crypto provider (ring), shared by SIP over TLS and outbound
/// HTTPS. Calling it again is harmless.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
