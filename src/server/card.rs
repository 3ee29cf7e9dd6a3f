//! The agent card route: built from the adapter and the settings, with caching headers.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::settings::{Secret, Security};

use super::AppState;
use crate::adapter::AdapterSpec;
use crate::protocol::card::{
    AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill,
};

/// What the card says beyond the adapter.
#[derive(Debug, Clone)]
pub struct CardSettings {
    /// Overrides the adapter's display name.
    pub name: Option<String>,
    /// Overrides the adapter's description.
    pub description: Option<String>,
    /// Add the v0.3 top-level fields (`url`, `preferredTransport`, ...) for v0.3 clients.
    pub legacy_v03_fields: bool,
    /// Base URL clients should use (e.g. behind a proxy); default: from the request's Host.
    pub public_url: Option<String>,
    /// Path of this agent under the base URL (`agents/codex/`), empty for the root.
    pub path_prefix: String,
    /// The other adapters served by this host: (id, name, description), named in the root
    /// card as skills.
    pub others: Vec<(String, String, String)>,
    /// Signs the card as served (after the base URL is filled in); None: unsigned.
    pub signer: Option<std::sync::Arc<crate::protocol::jws::CardSigner>>,
    /// The CLI's version, once detected (`version_args`), for the extended card.
    pub cli_version: std::sync::Arc<std::sync::OnceLock<String>>,
    /// Extensions every request must name (marked `required` in the card).
    pub required_extensions: Vec<String>,
    /// Media types the agent reads (the configured input modes).
    pub input_modes: Vec<String>,
    /// Port of the gRPC binding, when served (listed as a `GRPC` interface).
    pub grpc_port: Option<u16>,
}

/// Media types the agent writes.
pub const OUTPUT_MODES: &[&str] = &["text/plain", "application/json"];

/// The card for clients reaching the server at `base_url` (ending in `/`).
pub fn build(
    adapter: &AdapterSpec,
    cs: &CardSettings,
    base_url: &str,
    push: bool,
    security: &Security,
) -> AgentCard {
    let (security_schemes, security_requirements) = security_of(security);
    let mut skills: Vec<AgentSkill> = adapter
        .skills
        .iter()
        .map(|s| AgentSkill {
            id: s.id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            tags: if s.tags.is_empty() {
                vec![adapter.id.clone()]
            } else {
                s.tags.clone()
            },
            examples: s.examples.clone(),
            ..AgentSkill::default()
        })
        .collect();
    for (id, name, description) in &cs.others {
        skills.push(AgentSkill {
            id: format!("agent-{id}"),
            name: name.clone(),
            description: format!(
                "{description} Served by this host at agents/{id}/ (its own card: agents/{id}/.well-known/agent-card.json)."
            ),
            tags: vec![id.clone(), "agent".into()],
            ..AgentSkill::default()
        });
    }
    let iface = |url: String, binding: &str, version: &str| AgentInterface {
        url,
        protocol_binding: binding.into(),
        tenant: None,
        protocol_version: version.into(),
    };
    // JSON-RPC first (clients take the first entry they support); the REST paths are
    // relative to the base, which ends in `/`.
    let rest = |path: &str| format!("{base_url}{}", path.trim_start_matches('/'));
    let mut interfaces = vec![
        iface(base_url.to_string(), "JSONRPC", "1.0"),
        iface(base_url.to_string(), "JSONRPC", "0.3"),
        iface(rest(super::rest::V1_BASE), "HTTP+JSON", "1.0"),
        iface(rest(super::rest::V03_BASE), "HTTP+JSON", "0.3"),
    ];
    if let Some(grpc) = grpc_interface(base_url, cs, &adapter.id) {
        interfaces.push(grpc);
    }
    AgentCard {
        name: cs.name.clone().unwrap_or_else(|| adapter.name.clone()),
        description: cs
            .description
            .clone()
            .unwrap_or_else(|| adapter.description.clone()),
        supported_interfaces: interfaces,
        provider: Some(AgentProvider {
            url: "https://github.com/agent-host/agent-host".into(),
            organization: "agent-host".into(),
        }),
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(push),
            extended_agent_card: Some(super::extended::offered(security)),
            extensions: super::extensions::card_entries(&cs.required_extensions),
        },
        security_schemes,
        security_requirements,
        default_input_modes: cs.input_modes.clone(),
        default_output_modes: OUTPUT_MODES.iter().map(|s| s.to_string()).collect(),
        skills,
        signatures: vec![],
        icon_url: None,
    }
}

/// The gRPC interface, when served: `host:port` (gRPC targets have no scheme or path) with
/// the host clients reached this card by; an agent under `agents/{id}/` is named by
/// `tenant`.
fn grpc_interface(base_url: &str, cs: &CardSettings, adapter_id: &str) -> Option<AgentInterface> {
    let port = cs.grpc_port?;
    let url = reqwest::Url::parse(base_url).ok()?;
    let host = url.host_str()?;
    Some(AgentInterface {
        url: format!("{host}:{port}"),
        protocol_binding: "GRPC".into(),
        tenant: (!cs.path_prefix.is_empty()).then(|| adapter_id.to_string()),
        protocol_version: "1.0".into(),
    })
}

/// The card's `securitySchemes` and `securityRequirements` (any one scheme suffices).
fn security_of(security: &Security) -> (serde_json::Map<String, Value>, Vec<Value>) {
    let mut schemes = serde_json::Map::new();
    for c in &security.credentials {
        let (name, scheme) = match &c.secret {
            Secret::Bearer(_) => (
                "bearer",
                json!({"httpAuthSecurityScheme": {"scheme": "Bearer", "description": "Authorization: Bearer <token>"}}),
            ),
            Secret::Basic { .. } => (
                "basic",
                json!({"httpAuthSecurityScheme": {"scheme": "Basic"}}),
            ),
            Secret::ApiKey(_) => (
                "apiKey",
                json!({"apiKeySecurityScheme": {"location": "header", "name": security.api_key_header}}),
            ),
        };
        schemes.insert(name.to_string(), scheme);
    }
    let requirements = schemes
        .keys()
        .map(|k| json!({"schemes": {k.as_str(): {"list": []}}}))
        .collect();
    (schemes, requirements)
}

/// The base URL of this server as the client reached it.
pub fn base_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(u) = &state.card.public_url {
        let mut u = u.clone();
        if !u.ends_with('/') {
            u.push('/');
        }
        return format!("{u}{}", state.card.path_prefix);
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| state.local_addr.to_string());
    format!("http://{host}/{}", state.card.path_prefix)
}

/// The card's JSON as served: with the v0.3 fields if configured, then signed if configured.
pub fn served_json(card: &AgentCard, cs: &CardSettings) -> Value {
    let mut v = card.to_json(cs.legacy_v03_fields);
    if let Some(signer) = &cs.signer {
        signer.attach(&mut v);
    }
    v
}

/// `GET /.well-known/agent-card.json` (also `/.well-known/agent.json`).
pub async fn get_card(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let base = base_url(&state, &headers);
    let card = build(
        &state.engine.launch().adapter,
        &state.card,
        &base,
        state.push.is_some(),
        state.guard.security(),
    );
    let body = served_json(&card, &state.card).to_string();
    let digest = Sha256::digest(body.as_bytes());
    let etag = format!("\"{}\"", hex::encode(&digest[..16]));
    let last_modified = httpdate::fmt_http_date(state.started_at);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag || t == "*")
        })
        .unwrap_or(false);
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, body).into_response()
    };
    let h = resp.headers_mut();
    if !matches {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=60"),
    );
    resp
}
