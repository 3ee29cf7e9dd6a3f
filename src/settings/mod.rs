//! Settings: built-in defaults < config file < environment < command-line flags.
//!
//! [`ServeArgs`] are the flags (each also read from its environment variable by clap);
//! [`FileConfig`] is the TOML file (`config/agent-host.toml` is an annotated example);
//! [`Settings::resolve`] merges them and checks the result.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::adapter::PromptVia;

mod args;
pub mod cluster;
mod conn;
mod file;
mod push;
pub mod retention;
pub mod sandbox;
pub mod security;
mod store;
pub use args::ServeArgs;
use file::card_provider;
pub use file::*;
use push::resolve_push;
pub use push::{PushConfig, PushKey};
pub use security::{Credential, HostLimits, Secret, Security};
use store::parse_store;
pub use store::{default_db_path, StoreChoice};

/// Default port (compatible with coding-agent-a2a).
pub const DEFAULT_PORT: u16 = 41242;
/// Default hard limit of a task: 30 minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 30 * 60 * 1000;
/// Default idle limit (no output): 10 minutes.
pub const DEFAULT_IDLE_MS: u64 = 10 * 60 * 1000;
/// Default grace between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE_MS: u64 = 5000;
/// Default longest output line kept.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;
/// Default largest request body.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// Default interval of SSE keep-alive comments.
pub const DEFAULT_KEEPALIVE_MS: u64 = 15_000;

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

impl Settings {
    /// Refuses to serve on a non-loopback address without any credential, unless asked to
    /// with `--insecure-no-auth`.
    pub fn check_open_bind(&self) -> Result<(), SettingsError> {
        let bind = self.bind;
        if !bind.ip().is_loopback()
            && self.security.credentials.is_empty()
            && !self.security.insecure_no_auth
        {
            return Err(SettingsError::Invalid(format!(
                "refusing to listen on {bind} without authentication: anyone who can reach it could run commands on this machine. \
                 Set AGENT_HOST_TOKEN (or [auth] tokens/api_keys/basic in the config file), or bind to 127.0.0.1; \
                 --insecure-no-auth serves without it"
            )));
        }
        Ok(())
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Human,
    Json,
}

/// The merged, checked settings of `serve`.
#[derive(Debug, Clone)]
pub struct Settings {
    pub bind: SocketAddr,
    /// Port of the gRPC binding (same address as `bind`); None: not served.
    pub grpc_port: Option<u16>,
    pub public_url: Option<String>,
    pub adapter: Option<String>,
    pub adapters_dir: Option<PathBuf>,
    pub repo_path: PathBuf,
    /// Limits set by the config file, environment or flags (they win over an adapter's own).
    pub limits: TurnLimits,
    pub force: bool,
    /// Root endpoints route by `metadata.agent` and by task id to the other adapters.
    pub route_by_metadata: bool,
    pub model: Option<String>,
    pub binary: Option<String>,
    pub args: Vec<String>,
    pub prompt_via: Option<PromptVia>,
    pub pass_env: Vec<String>,
    /// Variables set in the agent's environment over the inherited and the adapter's own
    /// ones (as `AGENT_PASS_ENV` passes them; `AGENT_HOST_*` and secret values are still
    /// removed). Not read from flags, environment or file: for programs that embed the host
    /// through [`crate::app::App::start`] (the integration tests set the CLI's HOME this way).
    pub agent_env: Vec<(String, String)>,
    /// Media types a message part may name; the card's `defaultInputModes`.
    pub input_modes: Vec<String>,
    pub approval_pattern: Option<String>,
    pub approval_response: Option<String>,
    pub body_limit: usize,
    pub sse_keepalive: Duration,
    /// Header-read (and keep-alive idle) timeout, connection and stream caps.
    pub conn_limits: crate::server::listen::ConnLimits,
    /// Longest wait of a blocking send; None: until the task settles.
    pub blocking_wait: Option<Duration>,
    /// Serve the web console at `/ui/` (default: on for a loopback bind).
    pub ui: bool,
    pub card_name: Option<String>,
    pub card_description: Option<String>,
    pub card_legacy_v03: bool,
    /// The card's `provider` (`[card] provider_organization` / `provider_url`).
    pub card_provider: crate::protocol::card::AgentProvider,
    /// Extensions every request must name (ours only).
    pub required_extensions: Vec<String>,
    /// Signs the served agent card; None: unsigned.
    pub card_signer: Option<std::sync::Arc<crate::protocol::jws::CardSigner>>,
    pub log_format: LogFormat,
    pub store: StoreChoice,
    /// Push notifications; None when off.
    pub push: Option<PushConfig>,
    pub security: Security,
    /// Directories a message may name as its working directory (canonical).
    pub workspace_roots: Vec<PathBuf>,
    pub host_limits: HostLimits,
    /// The sandbox per task and the task limits (see [`sandbox`]).
    pub sandbox: sandbox::SandboxSettings,
    /// Which terminal tasks are deleted, in the background (see [`crate::retention`]).
    pub retention: retention::RetentionSettings,
    /// Host id, address, heartbeat and lease with a shared (PostgreSQL) store.
    pub cluster: cluster::ClusterSettings,
    /// A git workspace per context (see [`crate::workspace`]).
    pub workspace: crate::workspace::WorkspaceConfig,
}

/// Limits of a turn as configured; unset ones fall back to the adapter's `[limits]`, then to
/// the built-in defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnLimits {
    pub timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub cancel_grace: Option<Duration>,
    pub max_line_bytes: Option<usize>,
}

/// Limits of a turn after the fallbacks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedLimits {
    pub timeout: Duration,
    pub idle_timeout: Duration,
    pub cancel_grace: Duration,
    pub max_line_bytes: usize,
}

impl TurnLimits {
    /// Configured values, else the adapter's, else the defaults.
    pub fn resolve(&self, adapter: &crate::adapter::Limits) -> ResolvedLimits {
        let ms = Duration::from_millis;
        ResolvedLimits {
            timeout: self
                .timeout
                .or(adapter.timeout_ms.map(ms))
                .unwrap_or(ms(DEFAULT_TIMEOUT_MS)),
            idle_timeout: self
                .idle_timeout
                .or(adapter.idle_timeout_ms.map(ms))
                .unwrap_or(ms(DEFAULT_IDLE_MS)),
            cancel_grace: self
                .cancel_grace
                .or(adapter.cancel_grace_ms.map(ms))
                .unwrap_or(ms(DEFAULT_GRACE_MS)),
            max_line_bytes: self
                .max_line_bytes
                .or(adapter.max_line_bytes)
                .unwrap_or(DEFAULT_MAX_LINE),
        }
    }
}

fn positive(name: &str, v: u64) -> Result<u64, SettingsError> {
    if v == 0 {
        return Err(SettingsError::Invalid(format!(
            "{name} must be greater than 0"
        )));
    }
    Ok(v)
}

/// `ADDR` or `ADDR:PORT` (IPv6 as `[::1]:PORT`); `localhost` means 127.0.0.1.
fn parse_bind(s: &str, port: u16) -> Result<SocketAddr, SettingsError> {
    let s = s.trim();
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok(sa);
    }
    let host = s.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = if host == "localhost" {
        IpAddr::from([127, 0, 0, 1])
    } else if let Some((h, p)) = s.rsplit_once(':').filter(|(h, _)| *h == "localhost") {
        let p: u16 = p.parse().map_err(|_| {
            SettingsError::Invalid(format!("bind address '{s}': '{p}' is not a port"))
        })?;
        let _ = h;
        return Ok(SocketAddr::new(IpAddr::from([127, 0, 0, 1]), p));
    } else {
        host.parse().map_err(|_| {
            SettingsError::Invalid(format!(
                "bind address '{s}' is not an IP address or IP:PORT (e.g. 127.0.0.1, 0.0.0.0:8080, [::1]:41242)"
            ))
        })?
    };
    Ok(SocketAddr::new(ip, port))
}

/// The card signer from `--card-sign-alg/-key/-kid` over `[card] sign_*`; reads the PEM
/// file for ES256/RS256.
fn card_signer(
    args: &ServeArgs,
    card: &CardSection,
) -> Result<Option<std::sync::Arc<crate::protocol::jws::CardSigner>>, SettingsError> {
    use crate::protocol::jws::{Alg, CardSigner};
    let alg = args.card_sign_alg.clone().or_else(|| card.sign_alg.clone());
    let key = args.card_sign_key.clone().or_else(|| card.sign_key.clone());
    let kid = args.card_sign_kid.clone().or_else(|| card.sign_kid.clone());
    let Some(alg) = alg.filter(|a| !a.trim().is_empty()) else {
        if key.is_some() {
            return Err(SettingsError::Invalid(
                "a card signing key is set but no algorithm: set AGENT_HOST_CARD_SIGN_ALG (HS256, ES256 or RS256)".into(),
            ));
        }
        return Ok(None);
    };
    let alg = Alg::parse(&alg).map_err(|e| SettingsError::Invalid(format!("card signing: {e}")))?;
    let key = key.filter(|k| !k.is_empty()).ok_or_else(|| {
        SettingsError::Invalid(format!(
            "card signing with {alg} needs a key: set AGENT_HOST_CARD_SIGN_KEY ({})",
            if alg == Alg::Hs256 {
                "the secret"
            } else {
                "the path of a PEM private key"
            }
        ))
    })?;
    let material = if alg == Alg::Hs256 {
        key
    } else {
        std::fs::read_to_string(&key)
            .map_err(|e| SettingsError::Invalid(format!("card signing key file {key}: {e}")))?
    };
    let signer = CardSigner::new(alg, &material, kid)
        .map_err(|e| SettingsError::Invalid(format!("card signing: {e}")))?;
    Ok(Some(std::sync::Arc::new(signer)))
}

impl Settings {
    /// Merges flags/environment (`args`) over the config file over defaults.
    pub fn resolve(args: &ServeArgs) -> Result<Settings, SettingsError> {
        let file = match &args.config {
            Some(p) => FileConfig::load(p)?,
            None => FileConfig::default(),
        };
        let (srv, ag, card, log) = (&file.server, &file.agent, &file.card, &file.log);
        let port = args.port.or(srv.port).unwrap_or(DEFAULT_PORT);
        let bind_s = args
            .bind
            .clone()
            .or_else(|| srv.bind.clone())
            .unwrap_or_else(|| "127.0.0.1".into());
        let bind = parse_bind(&bind_s, port)?;
        // Named in errors as the user gave it: the flag, the variable or the config key.
        let (repo_path, repo_source) = match (&args.repo_path, &ag.repo_path) {
            (Some(p), _) => {
                let from_env = std::env::var_os("AGENT_REPO_PATH").is_some_and(|v| *p == v);
                let name = if from_env {
                    "AGENT_REPO_PATH"
                } else {
                    "--repo-path"
                };
                (p.clone(), name)
            }
            (None, Some(p)) => (p.clone(), "[agent] repo_path"),
            (None, None) => (
                std::env::current_dir().map_err(|e| {
                    SettingsError::Invalid(format!("cannot read the current directory: {e}"))
                })?,
                "the current directory",
            ),
        };
        if !repo_path.is_dir() {
            return Err(SettingsError::Invalid(format!(
                "{repo_source} '{}' is not a directory",
                repo_path.display()
            )));
        }
        let agent_args = match (&args.agent_args, &ag.args) {
            (Some(s), _) => shell_words::split(s).map_err(|e| {
                SettingsError::Invalid(format!("AGENT_ARGS cannot be split into words: {e}"))
            })?,
            (None, Some(v)) => v.clone(),
            (None, None) => Vec::new(),
        };
        let store = parse_store(
            args.store
                .as_deref()
                .or(srv.store.as_deref())
                .unwrap_or("sqlite"),
        )?;
        let push = resolve_push(args, &file.push, &store)?;
        let security = Security {
            credentials: security::credentials(
                &file.auth,
                args.token.as_deref(),
                args.api_key.as_deref(),
            )?,
            api_key_header: file
                .auth
                .api_key_header
                .clone()
                .unwrap_or_else(|| "X-API-Key".into()),
            allowed_hosts: args
                .allowed_hosts
                .clone()
                .unwrap_or_else(|| file.security.allowed_hosts.clone()),
            allowed_origins: args
                .allowed_origins
                .clone()
                .unwrap_or_else(|| file.security.allowed_origins.clone()),
            insecure_no_auth: args.insecure_no_auth,
        };
        let roots: Vec<PathBuf> = match (&args.allowed_cwds, file.workspace.roots.is_empty()) {
            (Some(list), _) => security::split_list(list)
                .into_iter()
                .map(PathBuf::from)
                .collect(),
            (None, false) => file.workspace.roots.clone(),
            (None, true) => vec![repo_path.clone()],
        };
        let mut workspace_roots = Vec::new();
        for r in roots {
            let canon = r.canonicalize().map_err(|e| {
                SettingsError::Invalid(format!(
                    "workspace root '{}' cannot be used: {e}",
                    r.display()
                ))
            })?;
            workspace_roots.push(canon);
        }
        let d = HostLimits::default();
        let l = &file.limits;
        let host_limits = HostLimits {
            max_running: args
                .max_running_tasks
                .or(l.max_running_tasks)
                .unwrap_or(d.max_running)
                .max(1),
            max_queued: args
                .max_queued_tasks
                .or(l.max_queued_tasks)
                .unwrap_or(d.max_queued),
            rate_per_minute: args
                .rate_limit
                .or(l.rate_limit_per_minute)
                .unwrap_or(d.rate_per_minute),
            max_output_bytes: l.max_output_bytes.unwrap_or(d.max_output_bytes),
            max_subscribers: l
                .max_subscribers_per_task
                .unwrap_or(d.max_subscribers)
                .max(1),
            auth_failures_per_minute: args
                .auth_failures_per_minute
                .or(l.auth_failures_per_minute)
                .unwrap_or(d.auth_failures_per_minute),
            max_files_per_message: l
                .max_files_per_message
                .unwrap_or(d.max_files_per_message)
                .max(1),
        };
        let mut secrets: Vec<PathBuf> = args.config.iter().cloned().collect();
        if let StoreChoice::Sqlite(db) = &store {
            secrets.push(db.clone());
        }
        if let Some(PushConfig {
            key: PushKey::File(f),
            ..
        }) = &push
        {
            secrets.push(f.clone());
        }
        if let Some(k) = args.card_sign_key.clone().or_else(|| card.sign_key.clone()) {
            if Path::new(&k).is_file() {
                secrets.push(PathBuf::from(k));
            }
        }
        let sandbox = sandbox::resolve(args, &file.sandbox, &file.limits, &secrets, &repo_path)?;
        let retention = retention::resolve(args, &file.retention)?;
        let cluster = cluster::resolve(args, &file.cluster)?;
        let log_format = match args
            .log_format
            .clone()
            .or_else(|| log.format.clone())
            .unwrap_or_else(|| "human".into())
            .as_str()
        {
            "human" | "text" => LogFormat::Human,
            "json" => LogFormat::Json,
            other => {
                return Err(SettingsError::Invalid(format!(
                    "log format '{other}' is not one of human, json"
                )))
            }
        };
        Ok(Settings {
            bind,
            grpc_port: args.grpc_port.or(srv.grpc_port),
            public_url: args.public_url.clone().or_else(|| srv.public_url.clone()),
            adapter: args
                .adapter
                .clone()
                .or_else(|| ag.adapter.clone())
                .filter(|a| !a.is_empty()),
            adapters_dir: args
                .adapters_dir
                .clone()
                .or_else(|| ag.adapters_dir.clone()),
            repo_path,
            limits: TurnLimits {
                timeout: args
                    .timeout_ms
                    .or(ag.timeout_ms)
                    .map(|v| positive("AGENT_TIMEOUT_MS", v).map(Duration::from_millis))
                    .transpose()?,
                idle_timeout: args
                    .idle_timeout_ms
                    .or(ag.idle_timeout_ms)
                    .map(|v| positive("AGENT_IDLE_EXIT_MS", v).map(Duration::from_millis))
                    .transpose()?,
                cancel_grace: args
                    .cancel_grace_ms
                    .or(ag.cancel_grace_ms)
                    .map(Duration::from_millis),
                max_line_bytes: args
                    .max_line_bytes
                    .or(ag.max_line_bytes)
                    .map(|v| positive("AGENT_MAX_LINE_BYTES", v as u64).map(|v| v as usize))
                    .transpose()?,
            },
            force: args.force.or(ag.force).unwrap_or(false),
            route_by_metadata: args
                .route_by_metadata
                .or(ag.route_by_metadata)
                .unwrap_or(false),
            model: args
                .model
                .clone()
                .or_else(|| ag.model.clone())
                .filter(|m| !m.is_empty()),
            binary: args
                .binary
                .clone()
                .or_else(|| ag.binary.clone())
                .filter(|b| !b.is_empty()),
            args: agent_args,
            prompt_via: args.prompt_via.or(ag.prompt_via),
            approval_pattern: args
                .approval_pattern
                .clone()
                .or_else(|| ag.approval_pattern.clone()),
            approval_response: args
                .approval_response
                .clone()
                .or_else(|| ag.approval_response.clone())
                .map(|r| {
                    if r.ends_with('\n') {
                        r
                    } else {
                        format!("{r}\n")
                    }
                }),
            pass_env: args
                .pass_env
                .clone()
                .or_else(|| ag.pass_env.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            agent_env: Vec::new(),
            input_modes: crate::engine::input::input_modes(
                args.input_modes.clone().or_else(|| ag.input_modes.clone()),
            )
            .map_err(|e| SettingsError::Invalid(format!("AGENT_INPUT_MODES: {e}")))?,
            body_limit: positive(
                "AGENT_HOST_BODY_LIMIT",
                args.body_limit
                    .or(srv.body_limit_bytes)
                    .unwrap_or(DEFAULT_BODY_LIMIT) as u64,
            )? as usize,
            sse_keepalive: Duration::from_millis(positive(
                "server.sse_keepalive_ms",
                srv.sse_keepalive_ms.unwrap_or(DEFAULT_KEEPALIVE_MS),
            )?),
            conn_limits: conn::conn_limits(args, srv)?,
            blocking_wait: args
                .blocking_wait_ms
                .or(srv.blocking_wait_ms)
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            ui: args.ui.or(srv.ui).unwrap_or(bind.ip().is_loopback()),
            card_name: card.name.clone(),
            card_description: card.description.clone(),
            card_provider: card_provider(card)?,
            card_legacy_v03: args
                .card_legacy_v03
                .or(card.legacy_v03_fields)
                .unwrap_or(true),
            required_extensions: {
                let v: Vec<String> = args
                    .required_extensions
                    .clone()
                    .or_else(|| card.required_extensions.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|u| u.trim().to_string())
                    .filter(|u| !u.is_empty())
                    .collect();
                let known = [
                    crate::server::extensions::TOOL_TRACE,
                    crate::server::extensions::APPROVAL,
                ];
                if let Some(bad) = v.iter().find(|u| !known.contains(&u.as_str())) {
                    return Err(SettingsError::Invalid(format!(
                        "required extension '{bad}' is not one this host offers ({})",
                        known.join(", ")
                    )));
                }
                v
            },
            card_signer: card_signer(args, card)?,
            log_format,
            store,
            push,
            security,
            workspace_roots,
            host_limits,
            sandbox,
            retention,
            cluster,
            workspace: args.workspace.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
