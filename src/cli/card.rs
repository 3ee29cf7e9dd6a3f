//! `agent-host card`: the agent card the server would serve; `agent-host card verify URL`
//! fetches an agent card and checks its JWS signatures.

use clap::{Args, Subcommand};
use serde_json::Value;

use crate::app::{card_settings, choose_adapter, host_env, registry, StartError};
use crate::protocol::jws::{self, Alg, JwsError};
use crate::server;
use crate::settings::{ServeArgs, Settings};

/// `agent-host card [verify URL]`.
#[derive(Debug, clap::Args)]
pub struct CardArgs {
    #[command(subcommand)]
    pub command: Option<CardCommand>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum CardCommand {
    /// Fetch an agent card and verify its signatures (RFC 8785 canonical JSON, JWS HS256,
    /// ES256 or RS256); one line per signature. Exit: 0 all verified (at least one), 1 not,
    /// 2 usage.
    Verify(CardVerifyArgs),
}

/// `agent-host card`: the card as served at the configured address.
pub fn print_card(settings: &Settings) -> Result<String, StartError> {
    let registry = registry(settings)?;
    let adapter = choose_adapter(settings, &registry, &host_env())?;
    let base = settings
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}/", settings.bind));
    let mut cs = card_settings(settings);
    // The gRPC interface as serve lists it, when its port is known before the start (0 is
    // a free port picked then).
    cs.grpc_port = settings.grpc_port.filter(|p| *p != 0);
    let card = server::card::build(
        &adapter,
        &cs,
        &base,
        settings.push.is_some(),
        &settings.security,
    );
    Ok(serde_json::to_string_pretty(&server::card::served_json(&card, &cs)).unwrap_or_default())
}

/// Arguments of `agent-host card verify`.
#[derive(Debug, Clone, Args)]
pub struct CardVerifyArgs {
    /// The agent's base URL or the card URL (without `.well-known/` in the path,
    /// `.well-known/agent-card.json` is appended)
    pub url: String,
    /// HS256: the shared secret; ES256/RS256: the path of a PEM public key file (a private key works too).
    /// Without it, ES256/RS256 use a `jwk` in the signature's protected header
    #[arg(
        long,
        env = "AGENT_HOST_CARD_SIGN_KEY",
        value_name = "SECRET|PEM_PATH",
        hide_env_values = true
    )]
    pub key: Option<String>,
}

/// The card URL for `url`.
pub fn card_url(url: &str) -> String {
    if url.contains("/.well-known/") {
        return url.to_string();
    }
    format!("{}/.well-known/agent-card.json", url.trim_end_matches('/'))
}

/// The key text for a signature of `alg`: the secret itself for HS256, the file's PEM text
/// (or inline PEM) for ES256/RS256.
fn key_for(alg: Option<Alg>, key: Option<&str>) -> Result<Option<String>, SignatureError> {
    let Some(key) = key else { return Ok(None) };
    match alg {
        Some(Alg::Es256 | Alg::Rs256) if !key.trim_start().starts_with("-----BEGIN") => {
            std::fs::read_to_string(key)
                .map(Some)
                .map_err(|source| SignatureError::KeyFile {
                    path: key.to_string(),
                    source,
                })
        }
        _ => Ok(Some(key.to_string())),
    }
}

/// Why one signature of a card did not verify.
#[derive(Debug, thiserror::Error)]
enum SignatureError {
    #[error("cannot read key file {path}: {source}")]
    KeyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Jws(#[from] JwsError),
}

/// One line per signature of `card`, and whether all verified (and there was one).
pub fn verify_card(card: &Value, key: Option<&str>) -> (Vec<String>, bool) {
    let sigs = card
        .get("signatures")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if sigs.is_empty() {
        return (vec!["the card has no signatures".into()], false);
    }
    let mut ok = true;
    let mut lines = Vec::new();
    for (i, sig) in sigs.iter().enumerate() {
        let header = jws::header_of(sig).ok();
        let kid = header
            .as_ref()
            .and_then(|h| h.kid.clone())
            .unwrap_or_else(|| "-".into());
        let alg_name = header
            .as_ref()
            .map(|h| h.alg.clone())
            .unwrap_or_else(|| "-".into());
        let alg = Alg::parse(&alg_name).ok();
        let result = key_for(alg, key).and_then(|k| Ok(jws::verify(card, sig, k.as_deref())?));
        let status = match result {
            Ok(_) => "OK".to_string(),
            Err(reason) => {
                ok = false;
                format!("FAILED: {reason}")
            }
        };
        lines.push(format!("signature {i}: kid={kid} alg={alg_name} {status}"));
    }
    (lines, ok)
}

/// Runs `agent-host card verify`; the exit code (0 all verified, 1 otherwise).
pub async fn run(args: CardVerifyArgs) -> i32 {
    let url = card_url(&args.url);
    let fetched = async {
        let resp = reqwest::get(&url).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("HTTP {status}"));
        }
        resp.json::<Value>().await.map_err(|e| e.to_string())
    }
    .await;
    let card = match fetched {
        Ok(c) => c,
        Err(e) => {
            eprintln!("agent-host: cannot fetch the card at {url}: {e}");
            return 1;
        }
    };
    let (lines, ok) = verify_card(&card, args.key.as_deref());
    for l in lines {
        println!("{l}");
    }
    i32::from(!ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::jws::CardSigner;
    use serde_json::json;

    #[test]
    fn urls() {
        assert_eq!(
            card_url("http://h:1/"),
            "http://h:1/.well-known/agent-card.json"
        );
        assert_eq!(
            card_url("http://h:1/.well-known/agent.json"),
            "http://h:1/.well-known/agent.json"
        );
    }

    #[test]
    fn lines_and_result() {
        let mut card = json!({"name": "x"});
        assert!(!verify_card(&card, Some("k")).1);
        CardSigner::new(Alg::Hs256, "k", Some("one".into()))
            .unwrap()
            .attach(&mut card);
        let (lines, ok) = verify_card(&card, Some("k"));
        assert!(ok);
        assert_eq!(lines, vec!["signature 0: kid=one alg=HS256 OK"]);
        let (lines, ok) = verify_card(&card, Some("wrong"));
        assert!(!ok);
        assert!(
            lines[0].contains("FAILED: signature does not match"),
            "{lines:?}"
        );
    }
}
