//! Agent card discovery and interface selection.
//!
//! The card is read from `{base}/.well-known/agent-card.json` (then `/.well-known/agent.json`,
//! the v0.3 name), kept with its `ETag` and revalidated with `If-None-Match`. A legacy v0.3
//! card (`url`, `preferredTransport`, `additionalInterfaces`, no `supportedInterfaces`) is read
//! as the v1 card those fields describe. [`select_interface`] then picks what to talk to.

use serde_json::{json, Value};

use super::error::ClientError;
use crate::protocol::card::{AgentCard, AgentInterface};
/// An A2A protocol version this client speaks.
pub use crate::protocol::ProtocolVersion;

/// A transport binding this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    /// JSON-RPC 2.0 over HTTP POST, SSE for streams.
    JsonRpc,
    /// HTTP+JSON (REST), SSE for streams.
    HttpJson,
}

impl Binding {
    /// The card's `protocolBinding` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::JsonRpc => "JSONRPC",
            Binding::HttpJson => "HTTP+JSON",
        }
    }

    /// Parses a card binding name (also `jsonrpc`, `rest`, `http-json`, case-insensitive).
    pub fn parse(s: &str) -> Option<Binding> {
        match s.to_ascii_uppercase().as_str() {
            "JSONRPC" | "JSON-RPC" => Some(Binding::JsonRpc),
            "HTTP+JSON" | "HTTP-JSON" | "REST" | "HTTP_JSON" => Some(Binding::HttpJson),
            _ => None,
        }
    }
}

/// The interface a client talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub binding: Binding,
    pub version: ProtocolVersion,
    pub tenant: Option<String>,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} at {}",
            self.binding.as_str(),
            self.version.as_str(),
            self.url
        )
    }
}

/// What the client may use, in order of preference within a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preferences {
    /// Bindings allowed (both by default).
    pub bindings: Vec<Binding>,
    /// Versions allowed, preferred first (v1.0, then v0.3 by default).
    pub versions: Vec<ProtocolVersion>,
}

impl Default for Preferences {
    fn default() -> Self {
        Preferences {
            bindings: vec![Binding::JsonRpc, Binding::HttpJson],
            versions: vec![ProtocolVersion::V1, ProtocolVersion::V03],
        }
    }
}

/// Picks the interface: for each allowed version in preference order, the first interface
/// of the card (the card's order is the agent's preference) with an allowed binding and an
/// http(s) URL.
pub fn select_interface(card: &AgentCard, prefs: &Preferences) -> Result<Endpoint, ClientError> {
    for version in &prefs.versions {
        let found = card.supported_interfaces.iter().find_map(|i| {
            let binding = Binding::parse(&i.protocol_binding)?;
            let v = ProtocolVersion::parse(&i.protocol_version)?;
            let runnable = i.url.starts_with("http://") || i.url.starts_with("https://");
            (v == *version && prefs.bindings.contains(&binding) && runnable).then(|| Endpoint {
                url: i.url.clone(),
                binding,
                version: v,
                tenant: i.tenant.clone().filter(|t| !t.is_empty()),
            })
        });
        if let Some(e) = found {
            return Ok(e);
        }
    }
    let offered: Vec<String> = card
        .supported_interfaces
        .iter()
        .map(|i| format!("{} {} {}", i.protocol_binding, i.protocol_version, i.url))
        .collect();
    Err(ClientError::NoInterface(format!(
        "the card offers [{}]; this client speaks JSONRPC and HTTP+JSON, A2A 1.0 and 0.3 (over http/https), limited here to {:?} {:?}",
        offered.join(", "),
        prefs.bindings,
        prefs.versions
    )))
}

/// Reads a card: a v1.0 card as is; a legacy v0.3 card (no `supportedInterfaces`) from its
/// `url` + `preferredTransport` and `additionalInterfaces`, all as version `protocolVersion`.
pub fn parse_card(mut v: Value) -> Result<AgentCard, NotACard> {
    let has_v1 = v
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if !has_v1 {
        let version = v
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or("0.3")
            .to_string();
        let mut ifaces = Vec::new();
        if let Some(url) = v.get("url").and_then(Value::as_str) {
            let t = v
                .get("preferredTransport")
                .and_then(Value::as_str)
                .unwrap_or("JSONRPC");
            ifaces.push(json!({"url": url, "protocolBinding": t, "protocolVersion": version}));
        }
        for a in v
            .get("additionalInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(url), Some(t)) = (
                a.get("url").and_then(Value::as_str),
                a.get("transport").and_then(Value::as_str),
            ) {
                let i = json!({"url": url, "protocolBinding": t, "protocolVersion": version});
                if !ifaces.contains(&i) {
                    ifaces.push(i);
                }
            }
        }
        if let Some(obj) = v.as_object_mut() {
            obj.insert("supportedInterfaces".into(), Value::Array(ifaces));
        }
    }
    // Fill what a lax card may leave out, so that only the interfaces really matter.
    if let Some(obj) = v.as_object_mut() {
        for (k, d) in [
            ("description", json!("")),
            ("version", json!("")),
            ("capabilities", json!({})),
            ("defaultInputModes", json!([])),
            ("defaultOutputModes", json!([])),
            ("skills", json!([])),
        ] {
            obj.entry(k).or_insert(d);
        }
    }
    serde_json::from_value(v).map_err(NotACard)
}

/// A JSON document that does not read as an agent card.
#[derive(Debug, thiserror::Error)]
#[error("not an agent card: {0}")]
pub struct NotACard(#[source] pub serde_json::Error);

/// A card as fetched: the card, its raw JSON and its `ETag`.
#[derive(Debug, Clone)]
pub struct CachedCard {
    pub card: AgentCard,
    pub raw: Value,
    pub etag: Option<String>,
    /// The URL it came from.
    pub url: String,
}

/// Whether a refresh changed the card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardRefresh {
    /// 304 Not Modified: the cached card is current.
    NotModified,
    /// A new card was read.
    Updated,
}

/// The card URLs to try for a base URL: the well-known path appended to it, then the v0.3
/// name.
pub fn card_urls(base: &str) -> Vec<String> {
    let b = base.trim_end_matches('/');
    if b.ends_with(".json") {
        return vec![b.to_string()];
    }
    vec![
        format!("{b}/.well-known/agent-card.json"),
        format!("{b}/.well-known/agent.json"),
    ]
}

/// A card interface, for building cards in code and tests.
pub fn interface(url: &str, binding: Binding, version: ProtocolVersion) -> AgentInterface {
    AgentInterface {
        url: url.into(),
        protocol_binding: binding.as_str().into(),
        tenant: None,
        protocol_version: version.as_str().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(ifaces: Value) -> AgentCard {
        parse_card(json!({"name": "a", "supportedInterfaces": ifaces})).unwrap()
    }

    #[test]
    fn prefers_v1_then_card_order() {
        let c = card(json!([
            {"url": "http://h/rest03", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            {"url": "h:1000", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]));
        let e = select_interface(&c, &Preferences::default()).unwrap();
        assert_eq!(
            (e.url.as_str(), e.binding, e.version),
            ("http://h/rest", Binding::HttpJson, ProtocolVersion::V1)
        );
        let only_rpc = Preferences {
            bindings: vec![Binding::JsonRpc],
            ..Preferences::default()
        };
        assert_eq!(select_interface(&c, &only_rpc).unwrap().url, "http://h/");
        let only_03 = Preferences {
            versions: vec![ProtocolVersion::V03],
            ..Preferences::default()
        };
        let e = select_interface(&c, &only_03).unwrap();
        assert_eq!(
            (e.binding, e.version),
            (Binding::HttpJson, ProtocolVersion::V03)
        );
    }

    #[test]
    fn falls_back_to_v03_and_skips_what_cannot_run() {
        let c = card(json!([
            {"url": "h:1000", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h/x", "protocolBinding": "urn:custom", "protocolVersion": "1.0"},
            {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"},
            {"url": "http://h/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3.0", "tenant": "t"},
        ]));
        let e = select_interface(&c, &Preferences::default()).unwrap();
        assert_eq!(
            (e.binding, e.version),
            (Binding::JsonRpc, ProtocolVersion::V03)
        );
        assert_eq!(e.tenant.as_deref(), Some("t"));
        let grpc_only =
            card(json!([{"url": "h:1", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]));
        let err = select_interface(&grpc_only, &Preferences::default()).unwrap_err();
        assert!(err.to_string().contains("GRPC 1.0 h:1"), "{err}");
    }

    #[test]
    fn legacy_v03_cards_become_interfaces() {
        let c = parse_card(json!({
            "name": "old", "description": "d", "version": "1", "protocolVersion": "0.3.0",
            "url": "http://old/rpc", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "http://old/rpc", "transport": "JSONRPC"},
                                     {"url": "http://old/rest", "transport": "HTTP+JSON"}],
            "capabilities": {"streaming": true}, "defaultInputModes": ["text"],
            "defaultOutputModes": ["text"], "skills": []
        }))
        .unwrap();
        assert_eq!(c.supported_interfaces.len(), 2);
        let e = select_interface(&c, &Preferences::default()).unwrap();
        assert_eq!(
            (e.url.as_str(), e.binding, e.version),
            ("http://old/rpc", Binding::JsonRpc, ProtocolVersion::V03)
        );
        let rest = Preferences {
            bindings: vec![Binding::HttpJson],
            ..Preferences::default()
        };
        assert_eq!(select_interface(&c, &rest).unwrap().url, "http://old/rest");
        // Without preferredTransport, JSON-RPC is the v0.3 default.
        let c = parse_card(json!({"name": "o", "url": "http://o/"})).unwrap();
        assert_eq!(c.supported_interfaces[0].protocol_binding, "JSONRPC");
    }

    #[test]
    fn card_urls_append_the_well_known_path() {
        assert_eq!(
            card_urls("http://h:1/agents/x/")[0],
            "http://h:1/agents/x/.well-known/agent-card.json"
        );
        assert_eq!(card_urls("http://h/c.json"), vec!["http://h/c.json"]);
        assert_eq!(ProtocolVersion::parse("1.0.1"), Some(ProtocolVersion::V1));
        assert_eq!(ProtocolVersion::parse("0.2"), None);
        assert_eq!(Binding::parse("rest"), Some(Binding::HttpJson));
    }
}
