//! The agent card (v1.0 shape) and the optional v0.3 legacy fields.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `AgentInterface`: one (URL, binding, version) a client can use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentInterface {
    pub url: String,
    pub protocol_binding: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub protocol_version: String,
}

/// `AgentProvider`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentProvider {
    pub url: String,
    pub organization: String,
}

/// `AgentExtension`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AgentExtension {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Map<String, Value>>,
}

/// `AgentCapabilities`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AgentCapabilities {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notifications: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<AgentExtension>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extended_agent_card: Option<bool>,
}

/// `AgentSkill`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AgentSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_modes: Vec<String>,
}

/// `AgentCard` (v1.0). Security schemes, requirements and signatures are carried as raw JSON
/// so that later features can fill them without changing this type's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub supported_interfaces: Vec<AgentInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AgentProvider>,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    pub capabilities: AgentCapabilities,
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub security_schemes: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_requirements: Vec<Value>,
    pub default_input_modes: Vec<String>,
    pub default_output_modes: Vec<String>,
    pub skills: Vec<AgentSkill>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signatures: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icon_url: Option<String>,
}

impl AgentCard {
    /// The card as JSON; with `legacy_v03` the v0.3 top-level fields (`url`,
    /// `preferredTransport`, `protocolVersion`, `additionalInterfaces`) derived from the first
    /// v0.3 interface are added, so that v0.3 clients can read it. (The v1.0 conformance kit
    /// rejects those extra keys, hence the card served to `A2A-Version: 1.0` goes without.)
    pub fn to_json(&self, legacy_v03: bool) -> Value {
        let mut v = match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            // A struct of strings, vectors and maps always serializes to an object.
            _ => Map::new(),
        };
        if legacy_v03 {
            let v03: Vec<&AgentInterface> = self
                .supported_interfaces
                .iter()
                .filter(|i| i.protocol_version.starts_with("0."))
                .collect();
            if let Some(first) = v03.first() {
                v.insert("url".into(), Value::String(first.url.clone()));
                v.insert(
                    "preferredTransport".into(),
                    Value::String(first.protocol_binding.clone()),
                );
                v.insert("protocolVersion".into(), Value::String("0.3.0".into()));
                let additional: Vec<Value> = v03
                    .iter()
                    .map(|i| serde_json::json!({"url": i.url, "transport": i.protocol_binding}))
                    .collect();
                v.insert("additionalInterfaces".into(), Value::Array(additional));
            }
            // v0.3 security: `security: [{name: [scopes]}]`, and each scheme also in its
            // v0.3 form (`type`, `scheme` / `in` + `name`) next to the v1.0 member.
            if !self.security_requirements.is_empty() {
                let security: Vec<Value> = self
                    .security_requirements
                    .iter()
                    .filter_map(|r| r.get("schemes")?.as_object())
                    .map(|m| {
                        let o: Map<String, Value> = m
                            .iter()
                            .map(|(k, v)| {
                                (
                                    k.clone(),
                                    v.get("list").cloned().unwrap_or(Value::Array(vec![])),
                                )
                            })
                            .collect();
                        Value::Object(o)
                    })
                    .collect();
                v.insert("security".into(), Value::Array(security));
            }
            if let Some(Value::Object(schemes)) = v.get_mut("securitySchemes") {
                for scheme in schemes.values_mut() {
                    legacy_scheme(scheme);
                }
            }
        }
        Value::Object(v)
    }
}

/// Adds the v0.3 keys of a security scheme next to its v1.0 oneof member.
fn legacy_scheme(scheme: &mut Value) {
    let Value::Object(m) = scheme else {
        return;
    };
    let extra: Vec<(&str, Value)> = if let Some(h) = m.get("httpAuthSecurityScheme") {
        vec![
            ("type", Value::String("http".into())),
            (
                "scheme",
                Value::String(h["scheme"].as_str().unwrap_or("").to_ascii_lowercase()),
            ),
        ]
    } else if let Some(k) = m.get("apiKeySecurityScheme") {
        vec![
            ("type", Value::String("apiKey".into())),
            ("in", k["location"].clone()),
            ("name", k["name"].clone()),
        ]
    } else {
        vec![]
    };
    for (k, v) in extra {
        m.insert(k.to_string(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> AgentCard {
        AgentCard {
            name: "n".into(),
            description: "d".into(),
            supported_interfaces: vec![
                AgentInterface {
                    url: "http://h/".into(),
                    protocol_binding: "JSONRPC".into(),
                    tenant: None,
                    protocol_version: "1.0".into(),
                },
                AgentInterface {
                    url: "http://h/".into(),
                    protocol_binding: "JSONRPC".into(),
                    tenant: None,
                    protocol_version: "0.3".into(),
                },
            ],
            provider: None,
            version: "1".into(),
            documentation_url: None,
            capabilities: AgentCapabilities {
                streaming: Some(true),
                ..AgentCapabilities::default()
            },
            security_schemes: Map::new(),
            security_requirements: vec![],
            default_input_modes: vec!["text/plain".into()],
            default_output_modes: vec!["text/plain".into()],
            skills: vec![],
            signatures: vec![],
            icon_url: None,
        }
    }

    #[test]
    fn legacy_fields_are_switchable() {
        let plain = card().to_json(false);
        assert!(plain.get("url").is_none());
        assert!(plain.get("protocolVersion").is_none());
        assert_eq!(plain["capabilities"]["streaming"], true);
        let legacy = card().to_json(true);
        assert_eq!(legacy["url"], "http://h/");
        assert_eq!(legacy["preferredTransport"], "JSONRPC");
        assert_eq!(legacy["protocolVersion"], "0.3.0");
        assert_eq!(legacy["additionalInterfaces"][0]["transport"], "JSONRPC");
    }
}
