//! Secrets kept in the store (an integration's OAuth client secret and refresh token) are
//! sealed with ChaCha20-Poly1305 under the service's secrets key, never stored as they are.
//!
//! The key is 32 random bytes, written in hex to the secrets key file (`--secrets-key-file`,
//! default `switchboard.key`), created with mode 0600 the first time it is needed. A sealed
//! value is `v1.<base64(nonce || ciphertext || tag)>`, with a fresh random 96-bit nonce per
//! seal, and is bound to what it belongs to (the integration's id as associated data), so a
//! sealed value copied onto another row does not open.

use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};

const PREFIX: &str = "v1.";

/// Why a secret could not be sealed or opened.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error("the secrets key file {path} cannot be used: {reason}")]
    Key { path: PathBuf, reason: String },
    /// The value was sealed under another key, for another owner, or was altered.
    #[error("a sealed secret does not open with this service's secrets key")]
    Unsealable,
}

/// The service's secrets key.
pub struct Secrets {
    key: LessSafeKey,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Secrets {
    /// The key in `path`, created (mode 0600) when the file does not exist.
    pub fn load_or_create(path: &Path) -> Result<Secrets, SecretsError> {
        let fail = |reason: String| SecretsError::Key {
            path: path.to_path_buf(),
            reason,
        };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut bytes = [0u8; 32];
                rand::rng().fill_bytes(&mut bytes);
                let text = hex::encode(bytes);
                let mut options = std::fs::OpenOptions::new();
                options.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
                match options.open(path) {
                    Ok(mut file) => {
                        file.write_all(text.as_bytes())
                            .and_then(|()| file.sync_all())
                            .map_err(|e| fail(e.to_string()))?;
                        text
                    }
                    // Another process created it first: use its key.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?
                    }
                    Err(e) => return Err(fail(e.to_string())),
                }
            }
            Err(e) => return Err(fail(e.to_string())),
        };
        let bytes: [u8; 32] = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| fail("it must hold 64 hexadecimal digits (32 bytes)".into()))?;
        Ok(Secrets::from_bytes(&bytes))
    }

    /// A key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Secrets {
        let key = UnboundKey::new(&CHACHA20_POLY1305, bytes)
            .unwrap_or_else(|_| unreachable!("a 32-byte key is ChaCha20-Poly1305's key length"));
        Secrets {
            key: LessSafeKey::new(key),
        }
    }

    /// `plain` sealed for `owner`.
    pub fn seal(&self, plain: &[u8], owner: &[u8]) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let mut sealed = plain.to_vec();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(owner),
                &mut sealed,
            )
            .unwrap_or_else(|_| unreachable!("sealing fails only past 256 GiB"));
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        format!("{PREFIX}{}", STANDARD.encode(out))
    }

    /// What `sealed` holds, if it was sealed for `owner` under this key.
    pub fn open(&self, sealed: &str, owner: &[u8]) -> Result<Vec<u8>, SecretsError> {
        let bytes = sealed
            .strip_prefix(PREFIX)
            .and_then(|b| STANDARD.decode(b).ok())
            .filter(|b| b.len() >= NONCE_LEN)
            .ok_or(SecretsError::Unsealable)?;
        let (nonce, rest) = bytes.split_at(NONCE_LEN);
        let nonce =
            Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretsError::Unsealable)?;
        let mut rest = rest.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::from(owner), &mut rest)
            .map_err(|_| SecretsError::Unsealable)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_for_its_owner_under_its_key() {
        let secrets = Secrets::from_bytes(&[7; 32]);
        let sealed = secrets.seal(b"refresh-token", b"owner-1");
        assert!(sealed.starts_with("v1."));
        assert!(!sealed.contains("refresh"));
        assert_eq!(secrets.open(&sealed, b"owner-1").unwrap(), b"refresh-token");
        // Every seal takes a fresh nonce.
        assert_ne!(sealed, secrets.seal(b"refresh-token", b"owner-1"));
        assert!(secrets.open(&sealed, b"owner-2").is_err());
        assert!(
            Secrets::from_bytes(&[8; 32])
                .open(&sealed, b"owner-1")
                .is_err()
        );
        let mut altered = sealed.clone().into_bytes();
        let last = altered.len() - 3;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert!(secrets.open(&altered, b"owner-1").is_err());
        assert!(secrets.open("plain text", b"owner-1").is_err());
    }

    #[test]
    fn the_key_file_is_created_once_private_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.key");
        let first = Secrets::load_or_create(&path).unwrap();
        let sealed = first.seal(b"x", b"o");
        let again = Secrets::load_or_create(&path).unwrap();
        assert_eq!(again.open(&sealed, b"o").unwrap(), b"x");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "short").unwrap();
        let err = Secrets::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("64 hexadecimal digits"), "{err}");
    }
}
