//! Settings: built-in defaults < config file < environment < command-line flags.
//!
//! Each setting is declared once, in the section struct of the module that uses it (its
//! flag, environment variable, file key, type, default and help): [`crate::engine::config`]
//! (`[agent]`, `[limits]`, `[workspace]`), [`crate::server::config`] (`[server]`, `[auth]`,
//! `[security]`, `[card]`), [`crate::runner::sandbox::config`] (`[sandbox]`),
//! [`crate::push::config`] (`[push]`), [`crate::retention`] (`[retention]`),
//! [`crate::store::config`] (`[store]`, `[cluster]`) and [`LogConfig`] (`[log]`). This module
//! gathers them into the `serve` flags ([`ServeArgs`]), reads the config file and merges it
//! generically ([`file`]), keeps the old names working ([`legacy`]), and turns the sections
//! into the checked [`Settings`] the application starts from ([`Settings::resolve`]).
//! `docs/configuration.md` is generated from the declarations ([`reference`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::adapter::PromptVia;

mod args;
pub(crate) mod file;
pub mod legacy;
#[cfg(test)]
mod reference;
mod resolve;
mod store;

pub use crate::engine::config::HostLimits;
pub use crate::push::{PushConfig, PushKey};
pub use crate::retention::RetentionSettings;
pub use crate::server::config::{Credential, Secret, Security};
pub use args::{command, LogConfig, ServeArgs, ServeFlags, WorkspaceDirFlag};
pub use file::{FileConfig, Section};
pub use store::{default_db_path, StoreChoice};

/// The sandbox settings (moved to [`crate::runner::sandbox::config`]).
pub mod sandbox {
    pub use crate::runner::sandbox::config::{SandboxSettings, DEFAULT_TASK_PIDS};
}

/// The settings of several hosts (moved to [`crate::store::config`]).
pub mod cluster {
    pub use crate::store::config::{
        machine_name, ClusterSettings, DEFAULT_HEARTBEAT, DEFAULT_LEASE,
    };
}

/// Default port (compatible with coding-agent-a2a).
pub const DEFAULT_PORT: u16 = 41242;
/// Default hard limit of a task (when neither the settings nor the adapter set one).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Default idle limit (no output).
pub const DEFAULT_IDLE: Duration = Duration::from_secs(10 * 60);
/// Default grace between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// Default longest output line kept.
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;
/// Default largest request body.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;

/// A setting that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// (The reason is in the message and is not a `source`: printed with its chain, the
    /// error would say it twice.)
    #[error("cannot read config file {path}: {reason}")]
    Read {
        path: String,
        reason: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("{0}")]
    Invalid(String),
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
    /// ones (as `[agent] pass_env` passes them; `AGENT_HOST_*` and secret values are still
    /// removed). Not read from flags, environment or file: for programs that embed the host
    /// through [`crate::app::App::start`] (the integration tests set the CLI's HOME this way).
    pub agent_env: Vec<(String, String)>,
    /// Media types a message part may name; the card's `defaultInputModes`.
    pub input_modes: Vec<String>,
    pub approval_pattern: Option<String>,
    pub approval_response: Option<String>,
    pub body_limit: usize,
    /// Interval of the keep-alive comments on idle streams ([`crate::server::config::SSE_KEEPALIVE`]).
    pub sse_keepalive: Duration,
    /// Header-read (and keep-alive idle) timeout, connection and stream caps.
    pub conn_limits: crate::server::listen::ConnLimits,
    /// Longest wait of a blocking send; None: until the task settles.
    pub blocking_wait: Option<Duration>,
    /// Serve the web console at `/ui/` (default: on for a loopback bind).
    pub ui: bool,
    /// Serve MCP at `/mcp`.
    pub mcp: bool,
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
    /// The git workspace per context (`[workspace]`).
    pub workspace: crate::workspace::WorkspaceConfig,
    /// How the workspace settings that errors after the start name were given.
    pub workspace_names: WorkspaceNames,
    pub host_limits: HostLimits,
    /// Approval rule sets and budgets (`[approvals]`, the budget keys of `[limits]`).
    pub controls: crate::policy::Controls,
    /// The sandbox per task and the task limits.
    pub sandbox: sandbox::SandboxSettings,
    /// Which terminal tasks are deleted, in the background (see [`crate::retention`]).
    pub retention: RetentionSettings,
    /// Host id, address, heartbeat and lease with a shared (PostgreSQL) store.
    pub cluster: cluster::ClusterSettings,
    /// Old config file keys used (each naming its new key), for the start-up log.
    pub notices: Vec<String>,
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

/// How a workspace setting was given (its flag, variable, or file key; the file key when it
/// was left at its default), for what names it after the start: the refusal of a new context
/// at the limit, a workspaces' folder that cannot be made, `doctor`'s lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceNames {
    /// `[workspace] dir`.
    pub dir: String,
    /// `[workspace] max_workspaces`.
    pub max_workspaces: String,
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
        ResolvedLimits {
            timeout: self
                .timeout
                .or(adapter.timeout())
                .unwrap_or(DEFAULT_TIMEOUT),
            idle_timeout: self
                .idle_timeout
                .or(adapter.idle_timeout())
                .unwrap_or(DEFAULT_IDLE),
            cancel_grace: self
                .cancel_grace
                .or(adapter.cancel_grace())
                .unwrap_or(DEFAULT_GRACE),
            max_line_bytes: self
                .max_line_bytes
                .or(adapter.max_line_bytes)
                .unwrap_or(DEFAULT_MAX_LINE),
        }
    }
}

#[cfg(test)]
mod tests;
