//! Push secrets (tokens, credentials) sealed at rest: ChaCha20-Poly1305 with a random nonce,
//! stored as base64(nonce ‖ ciphertext). The key is 32 bytes, from the configuration (hex) or
//! a key file that agent-host creates with 0600 permissions.

use std::io::Write;
use std::path::Path;

use base64::Engine as _;
use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;

/// A sealing key.
#[derive(Clone)]
pub struct Sealer {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

/// A key that cannot be used, or a sealed value that cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the push key must be 64 hex digits (32 bytes)")]
    BadKey,
    #[error("cannot read or create the push key file {path}: {source}")]
    KeyFile {
        path: String,
        source: std::io::Error,
    },
    #[error("a stored push secret cannot be opened (was the push key changed?)")]
    Open,
}

/// A key file's path with no file where a folder of it should be (named in the error).
fn not_blocked(path: &Path) -> Result<(), SealError> {
    match path.parent().and_then(crate::store::files::blocked_at) {
        Some(part) => Err(SealError::KeyFile {
            path: path.display().to_string(),
            source: crate::store::files::not_a_directory(&part),
        }),
        None => Ok(()),
    }
}

impl Sealer {
    /// From 64 hex digits.
    pub fn from_hex(hex_key: &str) -> Result<Sealer, SealError> {
        let bytes = hex::decode(hex_key.trim()).map_err(|_| SealError::BadKey)?;
        if bytes.len() != 32 {
            return Err(SealError::BadKey);
        }
        Ok(Sealer {
            cipher: ChaCha20Poly1305::new(Key::from_slice(&bytes)),
        })
    }

    /// From a key file (hex), created with a random key and 0600 permissions if missing.
    pub fn from_file(path: &Path) -> Result<Sealer, SealError> {
        let err = |source| SealError::KeyFile {
            path: path.display().to_string(),
            source,
        };
        not_blocked(path)?;
        match std::fs::read_to_string(path) {
            Ok(text) => Sealer::from_hex(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    crate::store::files::create_dir_all(dir).map_err(err)?;
                }
                let mut key = [0u8; 32];
                rand::thread_rng().fill_bytes(&mut key);
                let hex_key = hex::encode(key);
                let mut f = crate::store::files::create_new_private(path).map_err(err)?;
                f.write_all(hex_key.as_bytes()).map_err(err)?;
                Sealer::from_hex(&hex_key)
            }
            Err(e) => Err(err(e)),
        }
    }

    /// Whether `from_file` would work, looked at without writing: the file's key read and
    /// checked, or, missing, a place where it can be created (no file where a folder of its
    /// path should be).
    pub fn check_file(path: &Path) -> Result<(), SealError> {
        not_blocked(path)?;
        match std::fs::read_to_string(path) {
            Ok(text) => Sealer::from_hex(&text).map(drop),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SealError::KeyFile {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Seals a secret.
    pub fn seal(&self, plain: &str) -> String {
        let mut nonce = [0u8; 12];
        rand::thread_rng().fill_bytes(&mut nonce);
        // Encryption with a 32-byte key and a 12-byte nonce cannot fail (only
        // plaintexts beyond ~256 GiB would); an empty result would fail to open later.
        let ct = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), plain.as_bytes())
            .unwrap_or_default();
        let mut out = nonce.to_vec();
        out.extend(ct);
        base64::engine::general_purpose::STANDARD.encode(out)
    }

    /// Opens a sealed secret.
    pub fn open(&self, sealed: &str) -> Result<String, SealError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|_| SealError::Open)?;
        if bytes.len() < 12 {
            return Err(SealError::Open);
        }
        let (nonce, ct) = bytes.split_at(12);
        let plain = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), ct)
            .map_err(|_| SealError::Open)?;
        String::from_utf8(plain).map_err(|_| SealError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_and_open() {
        let s = Sealer::from_hex(&"ab".repeat(32)).unwrap();
        let sealed = s.seal("secret-token");
        assert!(!sealed.contains("secret"));
        assert_ne!(sealed, s.seal("secret-token"), "a fresh nonce each time");
        assert_eq!(s.open(&sealed).unwrap(), "secret-token");
        let other = Sealer::from_hex(&"cd".repeat(32)).unwrap();
        assert!(other.open(&sealed).is_err());
        assert!(Sealer::from_hex("abc").is_err());
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/push.key");
        let a = Sealer::from_file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let mode = std::fs::metadata(dir.path().join("keys"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "the folder it creates is private too");
        let b = Sealer::from_file(&path).unwrap();
        assert_eq!(b.open(&a.seal("x")).unwrap(), "x");
    }
}
