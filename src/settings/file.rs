//! The config file (`--config`, TOML): its sections as read, before they are merged with
//! flags and environment variables into [`super::Settings`].

use std::path::Path;

use serde::Deserialize;

use super::*;

/// The config file. Unknown keys are errors (with line and column).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub server: ServerSection,
    #[serde(default)]
    pub agent: AgentSection,
    #[serde(default)]
    pub card: CardSection,
    #[serde(default)]
    pub log: LogSection,
    #[serde(default)]
    pub push: PushSection,
    #[serde(default)]
    pub auth: security::AuthSection,
    #[serde(default)]
    pub security: security::SecuritySection,
    #[serde(default)]
    pub workspace: security::WorkspaceSection,
    #[serde(default)]
    pub limits: security::LimitsSection,
    #[serde(default)]
    pub sandbox: sandbox::SandboxSection,
    #[serde(default)]
    pub retention: retention::RetentionSection,
    #[serde(default)]
    pub cluster: cluster::ClusterSection,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PushSection {
    pub enabled: Option<bool>,
    pub allow_private: Option<bool>,
    pub max_attempts: Option<u32>,
    pub retry_base_ms: Option<u64>,
    pub retry_max_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub max_configs_per_task: Option<usize>,
    pub claim_lease_ms: Option<u64>,
    pub key: Option<String>,
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ServerSection {
    pub store: Option<String>,
    pub bind: Option<String>,
    pub port: Option<u16>,
    pub grpc_port: Option<u16>,
    pub public_url: Option<String>,
    pub body_limit_bytes: Option<usize>,
    pub sse_keepalive_ms: Option<u64>,
    pub blocking_wait_ms: Option<u64>,
    pub header_timeout_ms: Option<u64>,
    pub max_connections: Option<usize>,
    pub max_connections_per_address: Option<usize>,
    pub max_streams: Option<usize>,
    pub ui: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    pub adapter: Option<String>,
    pub adapters_dir: Option<PathBuf>,
    pub repo_path: Option<PathBuf>,
    pub timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub cancel_grace_ms: Option<u64>,
    pub force: Option<bool>,
    pub route_by_metadata: Option<bool>,
    pub model: Option<String>,
    pub binary: Option<String>,
    pub args: Option<Vec<String>>,
    pub prompt_via: Option<PromptVia>,
    pub pass_env: Option<Vec<String>>,
    pub input_modes: Option<Vec<String>>,
    pub max_line_bytes: Option<usize>,
    pub approval_pattern: Option<String>,
    pub approval_response: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CardSection {
    pub name: Option<String>,
    pub description: Option<String>,
    pub legacy_v03_fields: Option<bool>,
    pub required_extensions: Option<Vec<String>>,
    pub sign_alg: Option<String>,
    pub sign_key: Option<String>,
    pub sign_kid: Option<String>,
    pub provider_organization: Option<String>,
    pub provider_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    pub format: Option<String>,
}

impl FileConfig {
    pub fn load(path: &Path) -> Result<FileConfig, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| SettingsError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }
}

/// Who provides the agent, as the card says: `[card] provider_organization` and
/// `provider_url` (both, or neither for agent-host's own).
pub(super) fn card_provider(
    card: &CardSection,
) -> Result<crate::protocol::card::AgentProvider, SettingsError> {
    let (org, url) =
        match (&card.provider_organization, &card.provider_url) {
            (None, None) => (
                DEFAULT_PROVIDER_ORG.to_string(),
                DEFAULT_PROVIDER_URL.to_string(),
            ),
            (Some(o), Some(u)) => (o.trim().to_string(), u.trim().to_string()),
            _ => return Err(SettingsError::Invalid(
                "[card] provider_organization and provider_url go together: set both or neither"
                    .into(),
            )),
        };
    if org.is_empty() || !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(SettingsError::Invalid(format!(
            "[card] provider_organization must not be empty and provider_url must be an http(s) URL (got '{org}', '{url}')"
        )));
    }
    Ok(crate::protocol::card::AgentProvider {
        organization: org,
        url,
    })
}

/// The card's provider when none is configured.
pub const DEFAULT_PROVIDER_ORG: &str = "agent-host";
pub const DEFAULT_PROVIDER_URL: &str = "https://github.com/agent-host/agent-host";
