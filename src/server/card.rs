//! The agent card route: built from the adapter and the settings, with caching headers.

use std::collections::HashMap;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::server::config::{Secret, Security};

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
    /// The served card of each base URL, built and signed once.
    pub cache: std::sync::Arc<CardCache>,
    /// Who provides the agent (`[card] provider_organization` / `provider_url`).
    pub provider: AgentProvider,
    /// Port of the gRPC binding, when served (listed as a `GRPC` interface).
    pub grpc_port: Option<u16>,
}

/// A card as served: its JSON text and entity tag.
#[derive(Debug)]
pub struct ServedCard {
    pub body: String,
    pub etag: String,
}

/// Base URLs whose card is kept; a host that answers to more (every `Host` port gives its
/// own base URL) builds and signs the others per request.
const CARD_CACHE_MAX: usize = 64;

/// The served card by base URL (the only part of the card that depends on the request), so
/// that a signed card is signed once per base URL instead of on every unauthenticated GET.
#[derive(Debug, Default)]
pub struct CardCache(
    std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<ServedCard>>>,
);

impl CardCache {
    /// The cached card of `base`, else `build`'s (kept while there is room).
    pub fn get_or_build(
        &self,
        base: &str,
        build: impl FnOnce() -> ServedCard,
    ) -> std::sync::Arc<ServedCard> {
        let lock = || self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = lock().get(base) {
            return c.clone();
        }
        // Built outside the lock: signing may take a while; a concurrent first request
        // builds the same card.
        let card = std::sync::Arc::new(build());
        let mut map = lock();
        if map.len() < CARD_CACHE_MAX {
            map.insert(base.to_string(), card.clone());
        }
        card
    }

    /// How many base URLs have their card kept.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
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
        iface(rest(super::paths::V1_BASE), "HTTP+JSON", "1.0"),
        iface(rest(super::paths::V03_BASE), "HTTP+JSON", "0.3"),
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
        provider: Some(cs.provider.clone()),
        version: env!("CARGO_PKG_VERSION").into(),
        documentation_url: None,
        capabilities: AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(push),
            extended_agent_card: Some(extended_offered(security)),
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

/// Whether a host with these credentials serves an extended card (announced in the card,
/// served by [`super::extended`]).
pub fn extended_offered(security: &Security) -> bool {
    !security.credentials.is_empty()
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
    served_json_for(card, cs, false)
}

/// The card's JSON for a client that asked for a version: a client that sent `A2A-Version: 1.x`
/// (`pure_v1`) gets the pure v1.0 card; the others get the v0.3 fields too when configured,
/// since v0.3 clients send no version and read `url` / `preferredTransport`.
pub fn served_json_for(card: &AgentCard, cs: &CardSettings, pure_v1: bool) -> Value {
    let mut v = card.to_json(cs.legacy_v03_fields && !pure_v1);
    if let Some(signer) = &cs.signer {
        signer.attach(&mut v);
    }
    v
}

/// Whether the request asks for A2A 1.x (`A2A-Version` header or query parameter).
pub fn asks_for_v1(headers: &HeaderMap, query: &HashMap<String, String>) -> bool {
    super::negotiate::requested_version(headers, query)
        .is_some_and(|v| v.split('.').next().is_some_and(|major| major.trim() == "1"))
}

/// `GET /.well-known/agent-card.json` (also `/.well-known/agent.json`). The body depends on
/// `A2A-Version` (see [`served_json_for`]), so the response says `Vary: A2A-Version` and the
/// ETag, a digest of the body, differs between the two forms.
pub async fn get_card(
    State(state): State<AppState>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    headers: HeaderMap,
) -> Response {
    // A query that does not parse asks for no version; the card is public anyway.
    let query = query.map(|Query(q)| q).unwrap_or_default();
    let pure_v1 = asks_for_v1(&headers, &query);
    let base = base_url(&state, &headers);
    // One entry per base URL and card form (the pure v1.0 card, or the one with v0.3 fields).
    let key = format!("{}{base}", if pure_v1 { "v1 " } else { "" });
    let served = state.card.cache.get_or_build(&key, || {
        let card = build(
            &state.engine.launch().adapter,
            &state.card,
            &base,
            state.push.is_some(),
            state.guard.security(),
        );
        let body = served_json_for(&card, &state.card, pure_v1).to_string();
        let digest = Sha256::digest(body.as_bytes());
        let etag = format!("\"{}\"", hex::encode(&digest[..16]));
        ServedCard { body, etag }
    });
    let (body, etag) = (served.body.clone(), &served.etag);
    let last_modified = httpdate::fmt_http_date(state.started_at);
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(',')
                .map(|t| t.trim().trim_start_matches("W/"))
                .any(|t| t == etag.as_str() || t == "*")
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
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    if let Ok(v) = HeaderValue::from_str(&last_modified) {
        h.insert(header::LAST_MODIFIED, v);
    }
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=60"),
    );
    h.insert(header::VARY, HeaderValue::from_static("A2A-Version"));
    resp
}
