//! [`Settings::resolve`]: each section merged with the config file, then the work across
//! settings (the bind address from bind and port, the working directory and workspace roots,
//! credentials, the files the sandbox hides, the card signer, ...) as short named steps.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::file::{FileConfig, Section};
use super::store::parse_store;
use super::*;
use crate::engine::config::{AgentConfig, LimitsConfig, MAX_SUBSCRIBERS_PER_TASK};
use crate::policy::config::ApprovalsConfig;
use crate::push::{DeliveryConfig, PushSettings};
use crate::retention::RetentionConfig;
use crate::runner::sandbox::config::SandboxConfig;
use crate::runner::sandbox::{Mode, Network, Piece, StateMode};
use crate::server::config::{AuthConfig, CardConfig, SecurityConfig, ServerConfig};
use crate::store::config::{ClusterConfig, ClusterSettings, StoreConfig};
use crate::workspace::WorkspaceConfig;

macro_rules! section {
    ($t:ty, $name:literal) => {
        impl Section for $t {
            const NAME: &'static str = $name;
        }
    };
}
section!(ServerConfig, "server");
section!(SecurityConfig, "security");
section!(CardConfig, "card");
section!(AgentConfig, "agent");
section!(LimitsConfig, "limits");
section!(WorkspaceConfig, "workspace");
section!(SandboxConfig, "sandbox");
section!(DeliveryConfig, "push");
section!(RetentionConfig, "retention");
section!(StoreConfig, "store");
section!(ClusterConfig, "cluster");
section!(LogConfig, "log");
impl Section for ApprovalsConfig {
    const NAME: &'static str = "approvals";
    const FILE_ONLY: &'static [(&'static str, &'static str)] =
        crate::policy::config::APPROVALS_FILE_ONLY;
}
impl Section for AuthConfig {
    const NAME: &'static str = "auth";
    const FILE_ONLY: &'static [(&'static str, &'static str)] =
        crate::server::config::AUTH_FILE_ONLY;
}

/// The sections of the config file, in the order of the reference page.
pub const SECTIONS: &[&str] = &[
    "server",
    "auth",
    "security",
    "card",
    "agent",
    "limits",
    "approvals",
    "workspace",
    "sandbox",
    "push",
    "retention",
    "store",
    "cluster",
    "log",
];

/// Every section after the config file was laid over the flags.
struct Merged {
    server: ServerConfig,
    auth: AuthConfig,
    security: SecurityConfig,
    card: CardConfig,
    agent: AgentConfig,
    limits: LimitsConfig,
    approvals: ApprovalsConfig,
    workspace: WorkspaceConfig,
    sandbox: SandboxConfig,
    push: DeliveryConfig,
    retention: RetentionConfig,
    store: StoreConfig,
    cluster: ClusterConfig,
    log: LogConfig,
}

impl Merged {
    fn new(args: &ServeArgs, file: &FileConfig) -> Result<Merged, SettingsError> {
        file.check_sections(SECTIONS)?;
        let f = &args.flags;
        Ok(Merged {
            server: file.merge(&f.server, args)?,
            auth: file.merge(&f.auth, args)?,
            security: file.merge(&f.security, args)?,
            card: file.merge(&f.card, args)?,
            agent: file.merge(&f.agent, args)?,
            limits: file.merge(&f.limits, args)?,
            approvals: file.merge(&f.approvals, args)?,
            workspace: file.merge(&f.workspace, args)?,
            sandbox: file.merge(&f.sandbox, args)?,
            push: file.merge(&f.push, args)?,
            retention: file.merge(&f.retention, args)?,
            store: file.merge(&f.store, args)?,
            cluster: file.merge(&f.cluster, args)?,
            log: file.merge(&f.log, args)?,
        })
    }
}

fn invalid(message: impl Into<String>) -> SettingsError {
    SettingsError::Invalid(message.into())
}

/// How an error names a setting: as it was given (its flag or variable, or the old file key
/// read for it), else by its file key.
struct Names<'a> {
    args: &'a ServeArgs,
    file: &'a FileConfig,
}

impl Names<'_> {
    /// Whether the setting `id` was set (flag, variable or file), not left at its default.
    fn is_set(&self, id: &str) -> bool {
        self.args.is_explicit(id) || self.file.sets(id)
    }

    fn of(&self, id: &str) -> String {
        self.args
            .given_as(id)
            .unwrap_or_else(|| self.file.key_name(id))
    }
}

impl Settings {
    /// Merges flags and environment (`args`) over the config file over the defaults, and
    /// checks the result.
    pub fn resolve(args: &ServeArgs) -> Result<Settings, SettingsError> {
        let file = FileConfig::load(args.config.as_deref())?;
        let m = Merged::new(args, &file)?;
        let n = Names { args, file: &file };
        let bind = parse_bind(&m.server.bind, m.server.port)?;
        let repo_path = repo_path(args, &m.agent)?;
        let store = parse_store(&m.store.location)
            .map_err(|e| invalid(format!("{}: {e}", n.of("store.location"))))?;
        let push = push(&n, &m.push, &store)?;
        let mut sandbox = sandbox(
            &n,
            &m.sandbox,
            &secrets(args, &store, &push, &m.card),
            &repo_path,
        )?;
        check_counts(&n, &m.limits)?;
        sandbox.running_tasks = m.limits.max_running_tasks;
        Ok(Settings {
            bind,
            grpc_port: m.server.grpc_port,
            public_url: public_url(&n, &m.server)?,
            adapter: m.agent.adapter.clone().filter(|a| !a.is_empty()),
            adapters_dir: m.agent.adapters_dir.clone(),
            workspace_roots: workspace_roots(&n, &m.workspace, &repo_path)?,
            workspace: workspace(&n, &m.workspace)?,
            workspace_names: WorkspaceNames {
                dir: n.of("workspace.dir"),
                max_workspaces: n.of("workspace.max_workspaces"),
            },
            repo_path,
            limits: turn_limits(&n, &m.limits)?,
            force: m.agent.force,
            route_by_metadata: m.agent.route_by_metadata,
            model: m.agent.model.clone().filter(|v| !v.is_empty()),
            binary: m.agent.binary.clone().filter(|v| !v.is_empty()),
            args: m.agent.args.clone().map(|w| w.0).unwrap_or_default(),
            prompt_via: m.agent.prompt_via,
            pass_env: trimmed(&m.agent.pass_env),
            agent_env: Vec::new(),
            input_modes: crate::engine::input::input_modes(Some(m.agent.input_modes.clone()))
                .map_err(|e| invalid(format!("{}: {e}", n.of("agent.input_modes"))))?,
            approval_pattern: m.agent.approval_pattern.clone(),
            approval_response: m.agent.approval_response.clone().map(with_newline),
            body_limit: positive(&n.of("server.body_limit"), m.server.body_limit.0)? as usize,
            sse_keepalive: crate::server::config::SSE_KEEPALIVE,
            conn_limits: conn_limits(&n, &m.server)?,
            blocking_wait: m.server.blocking_wait.non_zero(),
            ui: m.server.ui.unwrap_or(bind.ip().is_loopback()),
            mcp: m.server.mcp,
            card_name: m.card.name.clone(),
            card_description: m.card.description.clone(),
            card_legacy_v03: m.card.legacy_v03_fields,
            card_provider: card_provider(&m.card)?,
            required_extensions: required_extensions(&m.card)?,
            card_signer: card_signer(&m.card)?,
            log_format: log_format(&n, &m.log)?,
            store,
            push,
            security: security(args, &m.auth, &m.security)?,
            host_limits: host_limits(&m.limits, &m.server),
            controls: crate::policy::config::controls(&m.approvals, &m.limits.budget_settings())
                .map_err(|e| invalid(format!("{}: {}", setting_named(&n, &e.field), e.why)))?,
            sandbox,
            retention: RetentionSettings::from_config(&m.retention),
            cluster: cluster(&n, &m.cluster)?,
            notices: file.notices,
        })
    }
}

/// A setting the controls name by its file key, named as it was given (`--approvals`,
/// `AGENT_HOST_BUDGET`); the file keys of rule sets stay as they are.
fn setting_named(n: &Names, field: &str) -> String {
    match field {
        "[approvals] default" => n.of("approvals.default"),
        "[limits] budget" => n.of("limits.budget"),
        other => other.to_string(),
    }
}

fn positive(name: &str, v: u64) -> Result<u64, SettingsError> {
    if v == 0 {
        return Err(invalid(format!("{name} must be greater than 0")));
    }
    Ok(v)
}

fn positive_dur(
    name: &str,
    d: Option<crate::units::Dur>,
) -> Result<Option<Duration>, SettingsError> {
    match d {
        Some(d) if d.0.is_zero() => Err(invalid(format!("{name} must be greater than 0"))),
        other => Ok(other.map(Duration::from)),
    }
}

fn trimmed(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn with_newline(r: String) -> String {
    if r.ends_with('\n') {
        r
    } else {
        format!("{r}\n")
    }
}

/// `ADDR` or `ADDR:PORT` (IPv6 as `[::1]:PORT`); `localhost` means 127.0.0.1.
pub(super) fn parse_bind(s: &str, port: u16) -> Result<SocketAddr, SettingsError> {
    let s = s.trim();
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok(sa);
    }
    let loopback = IpAddr::from([127, 0, 0, 1]);
    if s == "localhost" {
        return Ok(SocketAddr::new(loopback, port));
    }
    if let Some(p) = s.strip_prefix("localhost:") {
        let p: u16 = p
            .parse()
            .map_err(|_| invalid(format!("bind address '{s}': '{p}' is not a port")))?;
        return Ok(SocketAddr::new(loopback, p));
    }
    let host = s.trim_start_matches('[').trim_end_matches(']');
    let ip: IpAddr = host.parse().map_err(|_| {
        invalid(format!(
            "bind address '{s}' is not an IP address or IP:PORT (e.g. 127.0.0.1, 0.0.0.0:8080, [::1]:41242)"
        ))
    })?;
    Ok(SocketAddr::new(ip, port))
}

/// The agents' working directory, named in errors as the user gave it.
fn repo_path(args: &ServeArgs, agent: &AgentConfig) -> Result<PathBuf, SettingsError> {
    let (path, source) = match &agent.repo_path {
        Some(p) if args.is_explicit("agent.repo_path") => {
            // The variable holding this value (an old name is set under the new one too).
            let var = ["AGENT_REPO_PATH", "AGENT_HOST_REPO_PATH"]
                .into_iter()
                .find(|v| std::env::var_os(v).is_some_and(|v| *p == v));
            (p.clone(), var.unwrap_or("--repo-path"))
        }
        Some(p) => (p.clone(), "[agent] repo_path"),
        None => (
            std::env::current_dir()
                .map_err(|e| invalid(format!("cannot read the current directory: {e}")))?,
            "the current directory",
        ),
    };
    if !path.is_dir() {
        return Err(invalid(format!(
            "{source} '{}' is not a directory",
            path.display()
        )));
    }
    Ok(path)
}

/// The `[workspace]` section, its values checked: the author is "Name <email>", the patch
/// limit more than nothing (0 would cut every patch); errors name the setting as given.
fn workspace(n: &Names, w: &WorkspaceConfig) -> Result<WorkspaceConfig, SettingsError> {
    w.identity()
        .map_err(|e| invalid(format!("{}: {e}", n.of("workspace.author"))))?;
    positive(&n.of("workspace.patch_limit"), w.patch_limit.0)?;
    Ok(w.clone())
}

/// The workspace roots (the folders a message's `metadata.cwd` may name), canonical; none
/// configured: the working directory. One that cannot be used is named with the setting as
/// given.
fn workspace_roots(
    n: &Names,
    w: &WorkspaceConfig,
    repo: &Path,
) -> Result<Vec<PathBuf>, SettingsError> {
    let roots = if w.roots.is_empty() {
        vec![repo.to_path_buf()]
    } else {
        w.roots.clone()
    };
    roots
        .iter()
        .map(|r| {
            r.canonicalize().map_err(|e| {
                invalid(format!(
                    "{}: '{}' cannot be used: {e}",
                    n.of("workspace.roots"),
                    r.display()
                ))
            })
        })
        .collect()
}

fn turn_limits(n: &Names, l: &LimitsConfig) -> Result<TurnLimits, SettingsError> {
    Ok(TurnLimits {
        timeout: positive_dur(&n.of("limits.timeout"), l.timeout)?,
        idle_timeout: positive_dur(&n.of("limits.idle_timeout"), l.idle_timeout)?,
        cancel_grace: l.cancel_grace.map(Duration::from),
        max_line_bytes: l
            .max_line
            .map(|b| positive(&n.of("limits.max_line"), b.0).map(|v| v as usize))
            .transpose()?,
    })
}

/// The counts whose help says "at least 1", and the live tasks at least the running ones.
fn check_counts(n: &Names, l: &LimitsConfig) -> Result<(), SettingsError> {
    for (id, v) in [
        ("limits.max_running_tasks", l.max_running_tasks),
        ("limits.max_files_per_message", l.max_files_per_message),
    ] {
        if v == 0 {
            return Err(invalid(format!("{} must be at least 1", n.of(id))));
        }
    }
    // At its default, the live limit rises to the running one (the engine's `max`).
    if l.max_live_tasks < l.max_running_tasks && n.is_set("limits.max_live_tasks") {
        let default = if n.is_set("limits.max_running_tasks") {
            ""
        } else {
            ", its default"
        };
        return Err(invalid(format!(
            "{} ({}) must be at least {} ({}{default}): a running turn that asks a question keeps its program alive",
            n.of("limits.max_live_tasks"),
            l.max_live_tasks,
            n.of("limits.max_running_tasks"),
            l.max_running_tasks
        )));
    }
    Ok(())
}

/// The card's base URL, when set: an http(s) URL with a host, as `--advertise-url`.
fn public_url(n: &Names, s: &ServerConfig) -> Result<Option<String>, SettingsError> {
    match &s.public_url {
        Some(u) if !is_http_url(u) => Err(invalid(format!(
            "{} '{u}' is not an http:// or https:// URL",
            n.of("server.public_url")
        ))),
        other => Ok(other.clone()),
    }
}

/// An `http://` or `https://` URL with a host.
fn is_http_url(u: &str) -> bool {
    url::Url::parse(u)
        .map(|p| matches!(p.scheme(), "http" | "https") && p.host().is_some())
        .unwrap_or(false)
}

fn host_limits(l: &LimitsConfig, s: &ServerConfig) -> HostLimits {
    HostLimits {
        max_running: l.max_running_tasks.max(1),
        max_queued: l.max_queued_tasks,
        max_live: l.max_live_tasks.max(l.max_running_tasks.max(1)),
        input_timeout: l.input_timeout.0,
        rate_per_minute: s.rate_limit,
        max_output_bytes: l.max_output.0 as usize,
        max_subscribers: MAX_SUBSCRIBERS_PER_TASK,
        auth_failures_per_minute: s.auth_failures_per_minute,
        max_files_per_message: l.max_files_per_message.max(1),
    }
}

fn conn_limits(
    n: &Names,
    s: &ServerConfig,
) -> Result<crate::server::listen::ConnLimits, SettingsError> {
    let cap = |id: &str, v: usize| positive(&n.of(id), v as u64).map(|v| v as usize);
    Ok(crate::server::listen::ConnLimits {
        header_timeout: positive_dur(&n.of("server.header_timeout"), Some(s.header_timeout))?
            .unwrap_or_default(),
        max_connections: cap("server.max_connections", s.max_connections)?,
        max_connections_per_address: cap(
            "server.max_connections_per_address",
            s.max_connections_per_address,
        )?,
        max_streams: cap("server.max_streams", s.max_streams)?,
    })
}

fn security(
    args: &ServeArgs,
    auth: &AuthConfig,
    s: &SecurityConfig,
) -> Result<Security, SettingsError> {
    Ok(Security {
        credentials: credentials(auth)?,
        api_key_header: auth.api_key_header.clone(),
        allowed_hosts: trimmed(&s.allowed_hosts),
        allowed_origins: trimmed(&s.allowed_origins),
        insecure_no_auth: args.insecure_no_auth,
    })
}

/// The credentials of `[auth]`: `token` and `api_key` (named "token" and "api-key"), then
/// the lists with owners. An empty one is an error.
fn credentials(auth: &AuthConfig) -> Result<Vec<Credential>, SettingsError> {
    let mut out = Vec::new();
    let single = [
        ("token", auth.token.clone().map(Secret::Bearer)),
        ("api-key", auth.api_key.clone().map(Secret::ApiKey)),
    ];
    let listed = auth
        .tokens
        .iter()
        .map(|t| (t.name.as_str(), Secret::Bearer(t.token.clone())))
        .chain(
            auth.api_keys
                .iter()
                .map(|k| (k.name.as_str(), Secret::ApiKey(k.key.clone()))),
        )
        .chain(auth.basic.iter().map(|b| {
            let secret = Secret::Basic {
                username: b.username.clone(),
                password: b.password.clone(),
            };
            (b.name.as_str(), secret)
        }));
    let all = single
        .into_iter()
        .filter_map(|(n, s)| Some((n, s?)))
        .filter(|(_, s)| !matches!(s, Secret::Bearer(t) | Secret::ApiKey(t) if t.is_empty()))
        .chain(listed);
    for (name, secret) in all {
        let empty = match &secret {
            Secret::Bearer(s) | Secret::ApiKey(s) => s.is_empty(),
            Secret::Basic { username, password } => username.is_empty() || password.is_empty(),
        };
        if empty {
            return Err(invalid(format!("[auth] credential '{name}' is empty")));
        }
        out.push(Credential {
            name: name.to_string(),
            secret,
        });
    }
    Ok(out)
}

fn push(
    n: &Names,
    p: &DeliveryConfig,
    store: &StoreChoice,
) -> Result<Option<PushConfig>, SettingsError> {
    for (id, v) in [
        ("push.max_attempts", p.max_attempts as usize),
        ("push.max_configs_per_task", p.max_configs_per_task),
    ] {
        if v == 0 {
            return Err(invalid(format!("{} must be at least 1", n.of(id))));
        }
    }
    if !p.enabled {
        return Ok(None);
    }
    let key = match (&p.key, &p.key_file) {
        (Some(hex), _) => {
            crate::push::Sealer::from_hex(hex)
                .map_err(|e| invalid(format!("{}: {e}", n.of("push.key"))))?;
            PushKey::Hex(hex.clone())
        }
        (None, Some(f)) => PushKey::File(f.clone()),
        (None, None) => PushKey::File(match store {
            StoreChoice::Sqlite(db) => db.with_file_name("push.key"),
            StoreChoice::Memory | StoreChoice::Postgres(_) => {
                default_db_path()?.with_file_name("push.key")
            }
        }),
    };
    Ok(Some(PushConfig {
        delivery: PushSettings::from_config(p),
        key,
    }))
}

/// The host's files a task must not see: the config file, the database, the push key file,
/// the card signing key file.
fn secrets(
    args: &ServeArgs,
    store: &StoreChoice,
    push: &Option<PushConfig>,
    card: &CardConfig,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = args.config.iter().cloned().collect();
    if let StoreChoice::Sqlite(db) = store {
        out.push(db.clone());
    }
    if let Some(PushConfig {
        key: PushKey::File(f),
        ..
    }) = push
    {
        out.push(f.clone());
    }
    if let Some(k) = card.sign_key.as_deref().filter(|k| Path::new(k).is_file()) {
        out.push(PathBuf::from(k));
    }
    out
}

fn sandbox(
    n: &Names,
    s: &SandboxConfig,
    secrets: &[PathBuf],
    repo: &Path,
) -> Result<sandbox::SandboxSettings, SettingsError> {
    let one_of = |id: &str, v: &str, words: &str| {
        invalid(format!("{} '{v}' is not one of {words}", n.of(id)))
    };
    let mode = s
        .mode
        .as_deref()
        .map(|v| Mode::parse(v).ok_or_else(|| one_of("sandbox.mode", v, "auto, required, off")))
        .transpose()?;
    let network = s
        .network
        .as_deref()
        .map(|v| Network::parse(v).ok_or_else(|| one_of("sandbox.network", v, "proxy, open, none")))
        .transpose()?;
    let state = s
        .state
        .as_deref()
        .map(|v| StateMode::parse(v).ok_or_else(|| one_of("sandbox.state", v, "context, shared")))
        .transpose()?
        .unwrap_or_default();
    // The hosts alone first, so that an error names the setting that holds the bad entry.
    let hosts = || s.allow_hosts.iter().map(String::as_str);
    crate::egress::Rules::new(hosts(), std::iter::empty())
        .map_err(|e| invalid(format!("{}: {e}", n.of("sandbox.allow_hosts"))))?;
    crate::egress::Rules::new(hosts(), s.resolve.iter().map(String::as_str))
        .map_err(|e| invalid(format!("{}: {e}", n.of("sandbox.resolve"))))?;
    if let Some(w) = s.cpu_weight.filter(|w| !(1..=10_000).contains(w)) {
        return Err(invalid(format!(
            "{} {w} is not between 1 and 10000",
            n.of("sandbox.cpu_weight")
        )));
    }
    let disable = parse_disable(&s.disable)
        .map_err(|e| invalid(format!("{}{e}", n.of("sandbox.disable"))))?;
    Ok(sandbox::SandboxSettings {
        mode,
        network,
        disable,
        user: s.user.clone().filter(|u| !u.is_empty()),
        state,
        memory: s.memory.map(|b| b.0),
        pids: s.pids,
        cpu_weight: s.cpu_weight,
        file_size: s.file_size.map(|b| b.0),
        hide: hidden(secrets, repo),
        allow_hosts: s.allow_hosts.clone(),
        resolve: s.resolve.clone(),
        running_tasks: 1,
    })
}

/// The pieces not to use, each once; an error names the item (after the setting's name).
pub(super) fn parse_disable(items: &[String]) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        let p = Piece::parse(item)
            .ok_or_else(|| format!(" '{item}' is not one of cgroup, bwrap, landlock, netns"))?;
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

/// The host's files hidden from tasks: each secret file; a database's folder as a whole
/// (WAL, SHM, other adapters' databases, the push key next to it) unless the working
/// directory is inside it, then the database files one by one.
pub(super) fn hidden(secrets: &[PathBuf], repo: &Path) -> Vec<PathBuf> {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let repo = abs(repo);
    let mut out: Vec<PathBuf> = Vec::new();
    for s in secrets.iter().map(|s| abs(s)) {
        let is_db = s.extension().is_some_and(|e| e == "db");
        match s.parent() {
            Some(dir) if is_db && !repo.starts_with(dir) && dir != Path::new("/") => {
                out.push(dir.to_path_buf())
            }
            _ => {
                if is_db {
                    for suffix in ["-wal", "-shm", "-journal"] {
                        let mut f = s.clone().into_os_string();
                        f.push(suffix);
                        out.push(f.into());
                    }
                }
                out.push(s);
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// A host id of printable characters without spaces, an http(s) URL, a heartbeat of at
/// least 100 ms and a lease of at least two heartbeats.
fn cluster(n: &Names, c: &ClusterConfig) -> Result<ClusterSettings, SettingsError> {
    if let Some(id) = &c.host_id {
        if id.is_empty()
            || id.len() > 200
            || id.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(invalid(format!(
                "{} '{id}' must be 1 to 200 characters without spaces",
                n.of("cluster.host_id")
            )));
        }
    }
    if let Some(u) = c.advertise_url.as_ref().filter(|u| !is_http_url(u)) {
        return Err(invalid(format!(
            "{} '{u}' is not an http:// or https:// URL",
            n.of("cluster.advertise_url")
        )));
    }
    let (heartbeat, lease) = (c.heartbeat.0, c.lease.0);
    if heartbeat < Duration::from_millis(100) {
        return Err(invalid(format!(
            "{} must be at least 100ms",
            n.of("cluster.heartbeat")
        )));
    }
    if lease < heartbeat * 2 {
        return Err(invalid(format!(
            "{} ({}) must be at least twice {} ({}): a host must be able to miss a heartbeat without losing its tasks",
            n.of("cluster.lease"),
            c.lease,
            n.of("cluster.heartbeat"),
            c.heartbeat
        )));
    }
    Ok(ClusterSettings {
        host_id: c.host_id.clone(),
        advertise_url: c.advertise_url.clone(),
        heartbeat,
        lease,
    })
}

fn required_extensions(card: &CardConfig) -> Result<Vec<String>, SettingsError> {
    let v = trimmed(&card.required_extensions);
    let known = [
        crate::server::extensions::TOOL_TRACE,
        crate::server::extensions::APPROVAL,
    ];
    if let Some(bad) = v.iter().find(|u| !known.contains(&u.as_str())) {
        return Err(invalid(format!(
            "required extension '{bad}' is not one this host offers ({})",
            known.join(", ")
        )));
    }
    Ok(v)
}

fn log_format(n: &Names, l: &LogConfig) -> Result<LogFormat, SettingsError> {
    match l.format.as_str() {
        "human" | "text" => Ok(LogFormat::Human),
        "json" => Ok(LogFormat::Json),
        other => Err(invalid(format!(
            "{} '{other}' is not one of human (or text), json",
            n.of("log.format")
        ))),
    }
}

/// The card's provider when none is configured.
pub const DEFAULT_PROVIDER_ORG: &str = "agent-host";
pub const DEFAULT_PROVIDER_URL: &str = "https://github.com/agent-host/agent-host";

/// Who provides the agent, as the card says: `[card] provider_organization` and
/// `provider_url` (both, or neither for agent-host's own).
fn card_provider(card: &CardConfig) -> Result<crate::protocol::card::AgentProvider, SettingsError> {
    let (org, url) =
        match (&card.provider_organization, &card.provider_url) {
            (None, None) => (
                DEFAULT_PROVIDER_ORG.to_string(),
                DEFAULT_PROVIDER_URL.to_string(),
            ),
            (Some(o), Some(u)) => (o.trim().to_string(), u.trim().to_string()),
            _ => return Err(invalid(
                "[card] provider_organization and provider_url go together: set both or neither",
            )),
        };
    if org.is_empty() || !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(invalid(format!(
            "[card] provider_organization must not be empty and provider_url must be an http(s) URL (got '{org}', '{url}')"
        )));
    }
    Ok(crate::protocol::card::AgentProvider {
        organization: org,
        url,
    })
}

/// The card signer of `[card] sign_alg`, `sign_key`, `sign_kid`; reads the PEM file for
/// ES256/RS256.
fn card_signer(
    card: &CardConfig,
) -> Result<Option<Arc<crate::protocol::jws::CardSigner>>, SettingsError> {
    use crate::protocol::jws::{Alg, CardSigner};
    let Some(alg) = card.sign_alg.clone().filter(|a| !a.trim().is_empty()) else {
        if card.sign_key.is_some() {
            return Err(invalid(
                "a card signing key is set but no algorithm: set AGENT_HOST_CARD_SIGN_ALG (HS256, ES256 or RS256)",
            ));
        }
        return Ok(None);
    };
    let alg = Alg::parse(&alg).map_err(|e| invalid(format!("card signing: {e}")))?;
    let key = card
        .sign_key
        .clone()
        .filter(|k| !k.is_empty())
        .ok_or_else(|| {
            invalid(format!(
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
            .map_err(|e| invalid(format!("card signing key file {key}: {e}")))?
    };
    let signer = CardSigner::new(alg, &material, card.sign_kid.clone())
        .map_err(|e| invalid(format!("card signing: {e}")))?;
    Ok(Some(Arc::new(signer)))
}

/// Each section's name, keys (as the config file spells them) and file-only keys with their
/// help, from the declarations (for the reference page and its test).
#[cfg(test)]
pub fn section_keys() -> Result<Vec<SectionKeys>, SettingsError> {
    let args =
        ServeArgs::from_flags(std::iter::empty::<String>()).map_err(|e| invalid(e.to_string()))?;
    let f = &args.flags;
    fn keys<T: Section>(s: &T) -> SectionKeys {
        let keys = match serde_json::to_value(s) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        };
        SectionKeys {
            name: T::NAME,
            keys,
            file_only: T::FILE_ONLY,
        }
    }
    Ok(vec![
        keys(&f.server),
        keys(&f.auth),
        keys(&f.security),
        keys(&f.card),
        keys(&f.agent),
        keys(&f.limits),
        keys(&f.approvals),
        keys(&f.workspace),
        keys(&f.sandbox),
        keys(&f.push),
        keys(&f.retention),
        keys(&f.store),
        keys(&f.cluster),
        keys(&f.log),
    ])
}

#[cfg(test)]
/// One section's keys; see [`section_keys`].
#[derive(Debug, Clone)]
pub struct SectionKeys {
    pub name: &'static str,
    pub keys: Vec<String>,
    pub file_only: &'static [(&'static str, &'static str)],
}
