//! Agent card signatures (A2A §8.4): RFC 8785 (JCS) canonical JSON of the card without its
//! `signatures`, signed as a detached JWS (RFC 7515) with HS256, ES256 or RS256.
//!
//! Pure code: keys come in as bytes or PEM text; reading files is the caller's business.
//!
//! Numbers are canonicalized as IEEE doubles in ECMAScript `Number.prototype.toString` form,
//! using Rust's shortest round-trip digits; integers beyond 2^53 therefore lose precision,
//! exactly as they would in a JavaScript verifier.

use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::EncodePublicKey;
use rsa::signature::SignatureEncoding;
use rsa::traits::PublicKeyParts;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

/// A signing or verification failure.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwsError {
    #[error("unknown signing algorithm '{0}' (use HS256, ES256 or RS256)")]
    UnknownAlg(String),
    #[error("bad {alg} key: {message}")]
    BadKey { alg: Alg, message: String },
    #[error("malformed signature: {0}")]
    Malformed(String),
    #[error("signature does not match")]
    Mismatch,
    #[error("no key to verify {0} with")]
    NoKey(Alg),
}

/// A JWS algorithm supported here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Hs256,
    Es256,
    Rs256,
}

impl Alg {
    /// Parses `HS256`, `ES256` or `RS256` (case-insensitive).
    pub fn parse(s: &str) -> Result<Alg, JwsError> {
        match s.trim().to_ascii_uppercase().as_str() {
            "HS256" => Ok(Alg::Hs256),
            "ES256" => Ok(Alg::Es256),
            "RS256" => Ok(Alg::Rs256),
            _ => Err(JwsError::UnknownAlg(s.to_string())),
        }
    }

    /// The JOSE name.
    pub fn name(self) -> &'static str {
        match self {
            Alg::Hs256 => "HS256",
            Alg::Es256 => "ES256",
            Alg::Rs256 => "RS256",
        }
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

fn bad_key(alg: Alg, e: impl fmt::Display) -> JwsError {
    JwsError::BadKey {
        alg,
        message: e.to_string(),
    }
}

enum SignKey {
    Hs(Vec<u8>),
    Es(p256::ecdsa::SigningKey),
    Rs(Box<rsa::pkcs1v15::SigningKey<Sha256>>),
}

/// A private key with its key id; signs cards.
pub struct CardSigner {
    key: SignKey,
    kid: String,
}

impl fmt::Debug for CardSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CardSigner")
            .field("alg", &self.alg())
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

fn derive_kid(material: &[u8]) -> String {
    hex::encode(&Sha256::digest(material)[..8])
}

impl CardSigner {
    /// `key` is the HS256 secret, or the PEM text of an ES256/RS256 private key (PKCS#8;
    /// also SEC1 `EC PRIVATE KEY` and PKCS#1 `RSA PRIVATE KEY`). Without `kid`, the key id is
    /// the first 16 hex digits of the SHA-256 of the secret or of the public key (DER/SEC1).
    pub fn new(alg: Alg, key: &str, kid: Option<String>) -> Result<CardSigner, JwsError> {
        let (key, material) = match alg {
            Alg::Hs256 => {
                if key.is_empty() {
                    return Err(bad_key(alg, "the secret is empty"));
                }
                (
                    SignKey::Hs(key.as_bytes().to_vec()),
                    key.as_bytes().to_vec(),
                )
            }
            Alg::Es256 => {
                let sk = p256::ecdsa::SigningKey::from_pkcs8_pem(key)
                    .or_else(|_| p256::SecretKey::from_sec1_pem(key).map(Into::into))
                    .map_err(|e| bad_key(alg, format!("not a P-256 private key PEM ({e})")))?;
                let public = sk
                    .verifying_key()
                    .to_encoded_point(false)
                    .as_bytes()
                    .to_vec();
                (SignKey::Es(sk), public)
            }
            Alg::Rs256 => {
                let pk = rsa::RsaPrivateKey::from_pkcs8_pem(key)
                    .or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(key))
                    .map_err(|e| bad_key(alg, format!("not an RSA private key PEM ({e})")))?;
                let public = pk
                    .to_public_key()
                    .to_public_key_der()
                    .map_err(|e| bad_key(alg, e))?
                    .as_bytes()
                    .to_vec();
                let sk = rsa::pkcs1v15::SigningKey::<Sha256>::new(pk);
                (SignKey::Rs(Box::new(sk)), public)
            }
        };
        let kid = kid
            .filter(|k| !k.is_empty())
            .unwrap_or_else(|| derive_kid(&material));
        Ok(CardSigner { key, kid })
    }

    pub fn alg(&self) -> Alg {
        match self.key {
            SignKey::Hs(_) => Alg::Hs256,
            SignKey::Es(_) => Alg::Es256,
            SignKey::Rs(_) => Alg::Rs256,
        }
    }

    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The `AgentCardSignature` of `card` (its `signatures` field is ignored).
    pub fn sign(&self, card: &Value) -> Value {
        let header = json!({"alg": self.alg().name(), "typ": "JOSE", "kid": self.kid});
        let protected = URL_SAFE_NO_PAD.encode(canonicalize(&header));
        let input = signing_input(&protected, card);
        let sig: Vec<u8> = match &self.key {
            SignKey::Hs(secret) => hmac_sha256(secret, input.as_bytes()),
            SignKey::Es(sk) => {
                let s: p256::ecdsa::Signature = sk.sign(input.as_bytes());
                s.to_bytes().to_vec()
            }
            SignKey::Rs(sk) => sk.sign(input.as_bytes()).to_vec(),
        };
        json!({"protected": protected, "signature": URL_SAFE_NO_PAD.encode(sig)})
    }

    /// Appends this signer's signature to the card's `signatures` (a JSON object).
    pub fn attach(&self, card: &mut Value) {
        let sig = self.sign(card);
        if let Value::Object(m) = card {
            match m.get_mut("signatures") {
                Some(Value::Array(a)) => a.push(sig),
                _ => {
                    m.insert("signatures".into(), Value::Array(vec![sig]));
                }
            }
        }
    }
}

fn hmac_sha256(secret: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length, so `new_from_slice` cannot fail.
    match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

fn signing_input(protected_b64: &str, card: &Value) -> String {
    let payload = match card {
        Value::Object(m) => {
            let mut m = m.clone();
            m.remove("signatures");
            canonicalize(&Value::Object(m))
        }
        other => canonicalize(other),
    };
    format!("{protected_b64}.{}", URL_SAFE_NO_PAD.encode(payload))
}

/// A key to verify with: an HS256 secret or a public key PEM (SPKI).
#[derive(Debug, Clone, Default)]
pub struct VerifyKey {
    /// HS256 secret, or the PEM text of a public key.
    pub material: Option<String>,
}

/// The decoded protected header of a signature.
#[derive(Debug, Clone, PartialEq)]
pub struct SigHeader {
    pub alg: String,
    pub kid: Option<String>,
    pub jwk: Option<Value>,
}

/// Decodes the protected header of an `AgentCardSignature`.
pub fn header_of(sig: &Value) -> Result<SigHeader, JwsError> {
    let protected = sig
        .get("protected")
        .and_then(Value::as_str)
        .ok_or_else(|| JwsError::Malformed("no 'protected' string".into()))?;
    let bytes = URL_SAFE_NO_PAD
        .decode(protected.trim_end_matches('='))
        .map_err(|e| JwsError::Malformed(format!("protected is not base64url: {e}")))?;
    let h: Value = serde_json::from_slice(&bytes)
        .map_err(|e| JwsError::Malformed(format!("protected is not JSON: {e}")))?;
    let alg = h
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(|| JwsError::Malformed("protected header has no 'alg'".into()))?;
    Ok(SigHeader {
        alg: alg.to_string(),
        kid: h.get("kid").and_then(Value::as_str).map(str::to_string),
        jwk: h.get("jwk").cloned(),
    })
}

/// Checks one `AgentCardSignature` of `card` (whose `signatures` are ignored). `key` is
/// the HS256 secret or a public key PEM; ES256/RS256 fall back on a `jwk` in the header.
pub fn verify(card: &Value, sig: &Value, key: Option<&str>) -> Result<SigHeader, JwsError> {
    let header = header_of(sig)?;
    let alg = Alg::parse(&header.alg)?;
    let protected = sig
        .get("protected")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let signature = sig
        .get("signature")
        .and_then(Value::as_str)
        .ok_or_else(|| JwsError::Malformed("no 'signature' string".into()))?;
    let raw = URL_SAFE_NO_PAD
        .decode(signature.trim_end_matches('='))
        .map_err(|e| JwsError::Malformed(format!("signature is not base64url: {e}")))?;
    let input = signing_input(protected, card);
    match alg {
        Alg::Hs256 => {
            let secret = key.ok_or(JwsError::NoKey(alg))?;
            let mut mac =
                Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|e| bad_key(alg, e))?;
            mac.update(input.as_bytes());
            mac.verify_slice(&raw).map_err(|_| JwsError::Mismatch)?;
        }
        Alg::Es256 => {
            let vk = match key {
                Some(pem) => p256::ecdsa::VerifyingKey::from_public_key_pem(pem)
                    .or_else(|e| {
                        // A private key PEM carries its public key.
                        p256::ecdsa::SigningKey::from_pkcs8_pem(pem)
                            .or_else(|_| p256::SecretKey::from_sec1_pem(pem).map(Into::into))
                            .map(|sk: p256::ecdsa::SigningKey| *sk.verifying_key())
                            .map_err(|_| e)
                    })
                    .map_err(|e| bad_key(alg, format!("not a P-256 public key PEM ({e})")))?,
                None => es_from_jwk(header.jwk.as_ref().ok_or(JwsError::NoKey(alg))?)?,
            };
            let s = p256::ecdsa::Signature::from_slice(&raw)
                .map_err(|_| JwsError::Malformed("ES256 signature is not 64 bytes r||s".into()))?;
            vk.verify(input.as_bytes(), &s)
                .map_err(|_| JwsError::Mismatch)?;
        }
        Alg::Rs256 => {
            let pk = match key {
                Some(pem) => rsa::RsaPublicKey::from_public_key_pem(pem)
                    .or_else(|e| {
                        // A private key PEM carries its public key.
                        rsa::RsaPrivateKey::from_pkcs8_pem(pem)
                            .or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(pem))
                            .map(|k| k.to_public_key())
                            .map_err(|_| e)
                    })
                    .map_err(|e| bad_key(alg, format!("not an RSA public key PEM ({e})")))?,
                None => rs_from_jwk(header.jwk.as_ref().ok_or(JwsError::NoKey(alg))?)?,
            };
            let vk = rsa::pkcs1v15::VerifyingKey::<Sha256>::new(pk);
            let s = rsa::pkcs1v15::Signature::try_from(raw.as_slice())
                .map_err(|e| JwsError::Malformed(e.to_string()))?;
            vk.verify(input.as_bytes(), &s)
                .map_err(|_| JwsError::Mismatch)?;
        }
    }
    Ok(header)
}

fn jwk_bytes(jwk: &Value, field: &str, alg: Alg) -> Result<Vec<u8>, JwsError> {
    let s = jwk
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| bad_key(alg, format!("jwk has no '{field}'")))?;
    URL_SAFE_NO_PAD
        .decode(s)
        .map_err(|e| bad_key(alg, format!("jwk '{field}': {e}")))
}

fn es_from_jwk(jwk: &Value) -> Result<p256::ecdsa::VerifyingKey, JwsError> {
    let alg = Alg::Es256;
    let (x, y) = (jwk_bytes(jwk, "x", alg)?, jwk_bytes(jwk, "y", alg)?);
    let mut sec1 = vec![4u8];
    sec1.extend_from_slice(&x);
    sec1.extend_from_slice(&y);
    p256::ecdsa::VerifyingKey::from_sec1_bytes(&sec1).map_err(|e| bad_key(alg, e))
}

fn rs_from_jwk(jwk: &Value) -> Result<rsa::RsaPublicKey, JwsError> {
    let alg = Alg::Rs256;
    let n = rsa::BigUint::from_bytes_be(&jwk_bytes(jwk, "n", alg)?);
    let e = rsa::BigUint::from_bytes_be(&jwk_bytes(jwk, "e", alg)?);
    let pk = rsa::RsaPublicKey::new(n, e).map_err(|e| bad_key(alg, e))?;
    // Moduli under 2048 bits are too weak to trust.
    if pk.size() < 256 {
        return Err(bad_key(alg, "RSA modulus shorter than 2048 bits"));
    }
    Ok(pk)
}

/// RFC 8785 canonical JSON: object members sorted by the UTF-16 code units of their names,
/// no whitespace, ECMAScript number and string forms.
pub fn canonicalize(v: &Value) -> String {
    let mut out = String::new();
    write_jcs(v, &mut out);
    out
}

fn write_jcs(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&es_number(n.as_f64().unwrap_or(0.0))),
        Value::String(s) => write_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_jcs(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => write_object(m, out),
    }
}

fn write_object(m: &Map<String, Value>, out: &mut String) {
    let mut keys: Vec<(Vec<u16>, &String)> =
        m.keys().map(|k| (k.encode_utf16().collect(), k)).collect();
    keys.sort();
    out.push('{');
    for (i, (_, k)) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(k, out);
        out.push(':');
        if let Some(v) = m.get(*k) {
            write_jcs(v, out);
        }
    }
    out.push('}');
}

fn write_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// ECMAScript `Number.prototype.toString` of a finite double.
fn es_number(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return "0".into();
    }
    // `{:e}` gives the shortest round-trip digits: "d.ddde-7".
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1;
    let mut s = String::new();
    if f < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.push_str(&"0".repeat((n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.push_str(&"0".repeat((-n) as usize));
        s.push_str(&digits);
    } else {
        let e = n - 1;
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if e < 0 { '-' } else { '+' });
        s.push_str(&e.abs().to_string());
    }
    s
}

#[cfg(test)]
mod tests;
