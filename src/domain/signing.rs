//! HMAC-SHA256 signatures, hex-encoded: recording links and agent webhook deliveries are
//! signed here, and every signature presented is checked here, in constant time.
//!
//! [`RecordingLinks`] makes a call's permanent `recording_url`; the API and the webhook
//! events show calls through the same `CallRecord::presented` (the store's), so they show the
//! same call.
//! [`SigningSecret`] is a workspace's webhook signing secret.
//!
//! **Invariant:** a secret never prints: `Debug` and `Display` show its prefix only.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use switchboard_actors::ids::CallId;

fn mac(key: &[u8], message: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
    mac.update(message);
    mac
}

/// The HMAC-SHA256 of `message` under `key`, as lowercase hex.
pub fn sign(key: &[u8], message: &[u8]) -> String {
    hex::encode(mac(key, message).finalize().into_bytes())
}

/// Whether `signature` (hex) is the HMAC-SHA256 of `message` under `key`; compared in constant
/// time, and false for anything that is not hex.
pub fn verify(key: &[u8], message: &[u8], signature: &str) -> bool {
    match hex::decode(signature) {
        Ok(bytes) => mac(key, message).verify_slice(&bytes).is_ok(),
        Err(_) => false,
    }
}

/// What a call's `recording_url` is made of: the service's recording key and the base URL
/// clients reach the API at.
#[derive(Clone)]
pub struct RecordingLinks {
    key: Arc<[u8]>,
    base_url: String,
}

impl std::fmt::Debug for RecordingLinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingLinks")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl RecordingLinks {
    pub fn new(key: Arc<[u8]>, base_url: &str) -> Self {
        Self {
            key,
            base_url: base_url.trim_end_matches('/').to_owned(),
        }
    }

    /// The message a call's recording URL signs.
    pub fn message(id: CallId) -> String {
        format!("recording:{id}")
    }

    /// The permanent signed URL of a call's recording.
    pub fn url(&self, id: CallId) -> String {
        let sig = sign(&self.key, Self::message(id).as_bytes());
        format!("{}/calls/{id}/recording?sig={sig}", self.base_url)
    }
}

/// The prefix of a webhook signing secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// A workspace's webhook signing secret: `whsec_` and 64 hex characters (32 random bytes).
/// The whole string, prefix included, is the HMAC key a receiver verifies with.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(String);

impl SigningSecret {
    /// A fresh secret from the OS-seeded CSPRNG.
    pub fn generate() -> Self {
        Self(format!(
            "{SECRET_PREFIX}{}",
            hex::encode(rand::random::<[u8; 32]>())
        ))
    }

    /// A stored secret.
    pub fn from_stored(secret: String) -> Self {
        Self(secret)
    }

    /// The secret itself, to show its owner or store it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The `v1` signature of a delivery: hex HMAC-SHA256 over `"{timestamp}.{body}"`.
    pub fn sign_delivery(&self, timestamp: i64, body: &[u8]) -> String {
        sign(self.0.as_bytes(), &delivery_message(timestamp, body))
    }

    /// Whether `signature` is the `v1` signature of this delivery (constant time).
    pub fn verify_delivery(&self, timestamp: i64, body: &[u8], signature: &str) -> bool {
        verify(
            self.0.as_bytes(),
            &delivery_message(timestamp, body),
            signature,
        )
    }
}

fn delivery_message(timestamp: i64, body: &[u8]) -> Vec<u8> {
    let mut message = format!("{timestamp}.").into_bytes();
    message.extend_from_slice(body);
    message
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningSecret({SECRET_PREFIX}***)")
    }
}

impl std::fmt::Display for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{SECRET_PREFIX}***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_are_checked_whole() {
        let key = b"k";
        let good = sign(key, b"m");
        assert!(verify(key, b"m", &good));
        let mut altered = good.clone();
        altered.replace_range(0..1, if good.starts_with('0') { "1" } else { "0" });
        assert!(!verify(key, b"m", &altered));
        assert!(!verify(key, b"m", &good[..10]));
        assert!(!verify(key, b"n", &good));
        assert!(!verify(b"other", b"m", &good));
        assert!(!verify(key, b"m", "zz"));
        assert!(!verify(key, b"m", ""));
    }

    #[test]
    fn delivery_signatures_cover_the_timestamp_and_the_body() {
        let secret = SigningSecret::generate();
        assert!(secret.expose().starts_with(SECRET_PREFIX));
        assert_eq!(secret.expose().len(), SECRET_PREFIX.len() + 64);
        assert_ne!(secret, SigningSecret::generate());
        let sig = secret.sign_delivery(1_700_000_000, b"{\"a\":1}");
        assert_eq!(
            sig,
            sign(secret.expose().as_bytes(), b"1700000000.{\"a\":1}"),
            "the key is the whole secret, the message `{{timestamp}}.{{body}}`"
        );
        assert!(secret.verify_delivery(1_700_000_000, b"{\"a\":1}", &sig));
        assert!(!secret.verify_delivery(1_700_000_001, b"{\"a\":1}", &sig));
        assert!(!secret.verify_delivery(1_700_000_000, b"{\"a\":2}", &sig));
        assert!(!SigningSecret::generate().verify_delivery(1_700_000_000, b"{\"a\":1}", &sig));
    }

    #[test]
    fn secrets_never_print() {
        let secret = SigningSecret::generate();
        let hex = &secret.expose()[SECRET_PREFIX.len()..];
        assert!(!format!("{secret:?}").contains(hex));
        assert!(!format!("{secret}").contains(hex));
    }

    #[test]
    fn the_signature_is_rfc_4231_hmac_sha256() {
        // RFC 4231, test case 2.
        assert_eq!(
            sign(b"Jefe", b"what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
