//! Security and limits settings: credentials, allowed hosts and origins, workspace roots,
//! resource limits. File sections `[auth]`, `[security]`, `[workspace]`, `[limits]`.

use std::path::PathBuf;

use serde::Deserialize;

use super::SettingsError;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct AuthSection {
    /// Bearer tokens: `[{ name = "ci", token = "..." }]`.
    #[serde(default)]
    pub tokens: Vec<NamedToken>,
    /// API keys sent in `api_key_header`: `[{ name = "bot", key = "..." }]`.
    #[serde(default)]
    pub api_keys: Vec<NamedKey>,
    pub api_key_header: Option<String>,
    /// Basic credentials: `[{ name = "alice", username = "alice", password = "..." }]`.
    #[serde(default)]
    pub basic: Vec<BasicLogin>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    pub name: String,
    pub token: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedKey {
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicLogin {
    pub name: String,
    pub username: String,
    pub password: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SecuritySection {
    /// Host header values accepted besides the loopback names (against DNS rebinding).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed (CORS); none by default.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct WorkspaceSection {
    /// Directories a message's `metadata.cwd` may name (default: the repo path only).
    #[serde(default)]
    pub roots: Vec<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    pub max_running_tasks: Option<usize>,
    pub max_queued_tasks: Option<usize>,
    pub max_live_tasks: Option<usize>,
    pub input_timeout: Option<String>,
    pub rate_limit_per_minute: Option<u32>,
    pub max_output_bytes: Option<usize>,
    pub max_subscribers_per_task: Option<usize>,
    pub task_memory: Option<crate::adapter::ByteSize>,
    pub task_pids: Option<u64>,
    pub task_cpu_weight: Option<u64>,
    pub task_file_size: Option<crate::adapter::ByteSize>,
    pub auth_failures_per_minute: Option<u32>,
    pub max_files_per_message: Option<usize>,
}

/// A credential's secret.
#[derive(Clone, PartialEq)]
pub enum Secret {
    Bearer(String),
    ApiKey(String),
    Basic { username: String, password: String },
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Secret::Bearer(_) => f.write_str("Bearer(***)"),
            Secret::ApiKey(_) => f.write_str("ApiKey(***)"),
            Secret::Basic { username, .. } => write!(f, "Basic({username}:***)"),
        }
    }
}

/// A credential; its name is the owner of the tasks it creates.
#[derive(Debug, Clone, PartialEq)]
pub struct Credential {
    pub name: String,
    pub secret: Secret,
}

/// Who may call, from where.
#[derive(Debug, Clone, Default)]
pub struct Security {
    pub credentials: Vec<Credential>,
    /// Header carrying API keys.
    pub api_key_header: String,
    /// Host header values accepted besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed (CORS).
    pub allowed_origins: Vec<String>,
    /// Serve without credentials on a non-loopback address (explicitly asked for).
    pub insecure_no_auth: bool,
}

impl Security {
    /// Every secret value (to keep them out of agents' environments and messages).
    pub fn secret_values(&self) -> Vec<String> {
        self.credentials
            .iter()
            .flat_map(|c| match &c.secret {
                Secret::Bearer(t) | Secret::ApiKey(t) => vec![t.clone()],
                Secret::Basic { password, .. } => vec![password.clone()],
            })
            .collect()
    }
}

/// Resource limits of the host.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLimits {
    /// Turns running at once; more wait in a queue.
    pub max_running: usize,
    /// Tasks waiting to start; more are refused (HTTP 429 / JSON-RPC -32050).
    pub max_queued: usize,
    /// Agent programs alive at once: running turns plus turns waiting for an answer (which
    /// give their running slot back while they wait). At least `max_running`.
    pub max_live: usize,
    /// How long a question may wait for its answer before the task ends (failed, saying
    /// so); zero: only the turn's hard timeout ends it.
    pub input_timeout: std::time::Duration,
    /// Requests per minute per credential (token bucket); 0 = no limit.
    pub rate_per_minute: u32,
    /// Answer text kept per task; more is dropped with a note.
    pub max_output_bytes: usize,
    /// Streams following one task at once.
    pub max_subscribers: usize,
    /// Failed authentications per minute per client address before further failures from
    /// it are answered 429 (token bucket, burst of the same size); 0 = no limit.
    pub auth_failures_per_minute: u32,
    /// Files (attachment parts) one message may carry; more are refused (-32602).
    pub max_files_per_message: usize,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            max_running: 16,
            max_queued: 256,
            max_live: 64,
            input_timeout: std::time::Duration::from_secs(600),
            rate_per_minute: 600,
            max_output_bytes: 64 * 1024 * 1024,
            max_subscribers: 64,
            auth_failures_per_minute: 20,
            max_files_per_message: 100,
        }
    }
}

/// Splits a list given in one variable: commas or colons between items.
pub fn split_list(s: &str) -> Vec<String> {
    s.split([',', ':'])
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

/// Credentials from the file and the environment (`AGENT_HOST_TOKEN`,
/// `AGENT_HOST_API_KEY`).
pub fn credentials(
    auth: &AuthSection,
    env_token: Option<&str>,
    env_key: Option<&str>,
) -> Result<Vec<Credential>, SettingsError> {
    let mut out = Vec::new();
    let mut push = |name: &str, secret: Secret, what: &str| {
        let empty = match &secret {
            Secret::Bearer(s) | Secret::ApiKey(s) => s.is_empty(),
            Secret::Basic { username, password } => username.is_empty() || password.is_empty(),
        };
        if empty {
            return Err(SettingsError::Invalid(format!("{what} '{name}' is empty")));
        }
        out.push(Credential {
            name: name.to_string(),
            secret,
        });
        Ok(())
    };
    if let Some(t) = env_token.filter(|t| !t.is_empty()) {
        push("token", Secret::Bearer(t.to_string()), "AGENT_HOST_TOKEN")?;
    }
    if let Some(k) = env_key.filter(|k| !k.is_empty()) {
        push(
            "api-key",
            Secret::ApiKey(k.to_string()),
            "AGENT_HOST_API_KEY",
        )?;
    }
    for t in &auth.tokens {
        push(&t.name, Secret::Bearer(t.token.clone()), "auth.tokens")?;
    }
    for k in &auth.api_keys {
        push(&k.name, Secret::ApiKey(k.key.clone()), "auth.api_keys")?;
    }
    for b in &auth.basic {
        push(
            &b.name,
            Secret::Basic {
                username: b.username.clone(),
                password: b.password.clone(),
            },
            "auth.basic",
        )?;
    }
    Ok(out)
}
