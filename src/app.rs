//! The composition root: [`App::start`] turns [`Settings`] into running engines (one per
//! adapter, recovered), their push services, the request guard and the HTTP service. The
//! `serve` command and the integration tests both start through it, so the tests exercise
//! the wiring the binary uses; [`App::router`] is the whole HTTP service, testable with
//! `tower::ServiceExt::oneshot` and no socket.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::Router;

use crate::adapter::AdapterSpec;
use crate::engine::{Engine, EngineConfig, Recovery};
use crate::push::{PushService, Sealer};
use crate::server::guard::Guard;
use crate::server::{self, AppState, HttpLimits};
use crate::settings::{PushKey, Settings, StoreChoice};
mod agents;

pub(crate) use agents::{adapter_version, adapters_to_serve, host_env, probe_version};
pub use agents::{card_settings, choose_adapter, launch_for, registry};

use crate::store::{MemoryStore, PgStore, PushStore, SqliteStore, StoreError, TaskStore};

/// Failure to start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error(transparent)]
    Adapter(#[from] crate::adapter::AdapterError),
    #[error(transparent)]
    Launch(#[from] crate::engine::launch::LaunchError),
    #[error("cannot read adapters directory {0}: {1}")]
    AdaptersDir(String, std::io::Error),
    #[error("cannot listen on {0}: {1}")]
    Bind(String, std::io::Error),
    #[error("server error: {0}")]
    Serve(std::io::Error),
    #[error("task store: {0}")]
    Store(StoreError),
    #[error("push notifications: {0}")]
    PushKey(crate::push::seal::SealError),
    #[error("{0}")]
    Sandbox(String),
    #[error("push notifications: {0}")]
    Push(crate::push::PushStartError),
    #[error("the client for other hosts: {0}")]
    Peer(String),
    #[error("workspaces: {0}")]
    Workspace(#[from] crate::workspace::WorkspaceError),
    #[error("workspaces: {0}: {1}")]
    WorkspaceDir(String, crate::workspace::WorkspaceError),
    #[error(transparent)]
    Home(#[from] crate::home::HomeError),
}

/// The task store and push-config store of one engine (one SQLite file or memory store).
type Stores = (Arc<dyn TaskStore>, Arc<dyn PushStore>);

/// The store of one adapter: the configured one for the default adapter; a database next
/// to it (`agent-host.<id>.db`) for each other one, so that every engine owns its tasks.
/// A SQLite store takes its database's lock (one host per database) and records `port` in it.
async fn open_store(
    choice: &StoreChoice,
    adapter_id: &str,
    default: bool,
    port: u16,
) -> Result<Stores, StartError> {
    Ok(match choice {
        StoreChoice::Memory => {
            let s = Arc::new(MemoryStore::new());
            (s.clone(), s)
        }
        StoreChoice::Sqlite(path) => {
            let path = if default {
                path.clone()
            } else {
                let stem = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_else(|| "agent-host".into());
                path.with_file_name(format!("{stem}.{adapter_id}.db"))
            };
            let s = Arc::new(SqliteStore::open(&path).map_err(StartError::Store)?);
            s.record_port(port).map_err(StartError::Store)?;
            tracing::info!(adapter = %adapter_id, path = %path.display(), "store: sqlite");
            (s.clone(), s)
        }
        StoreChoice::Postgres(url) => {
            // The default adapter uses the URL's own schema; each other adapter one of its
            // own, as each gets its own SQLite file.
            let schema = (!default).then(|| format!("agent_host_{adapter_id}"));
            let s = Arc::new(
                PgStore::open(url, schema.as_deref())
                    .await
                    .map_err(StartError::Store)?,
            );
            let (host, db) = url
                .parse::<tokio_postgres::Config>()
                .map(|c| {
                    (
                        format!("{:?}", c.get_hosts()),
                        c.get_dbname().map(str::to_string),
                    )
                })
                .unwrap_or_default();
            tracing::info!(adapter = %adapter_id, host, db, schema, "store: postgres");
            (s.clone(), s)
        }
    })
}

/// The workspaces of one adapter's contexts: in `--workspace-dir` (a folder per adapter but
/// the default one), else `workspaces/` beside the SQLite database, else in a temporary
/// folder removed at exit (memory and PostgreSQL stores); None with `workspace = "shared"`.
fn open_workspaces(
    settings: &Settings,
    adapter_id: &str,
    adapter_mode: Option<crate::workspace::WorkspaceMode>,
    default: bool,
    host: &mut Option<Arc<crate::workspace::HostWorkspaces>>,
    homes: Option<&crate::home::Homes>,
) -> Result<Option<Arc<crate::workspace::Workspaces>>, StartError> {
    let config = &settings.workspace;
    let mode = crate::workspace::WorkspaceMode::resolve(config.mode, adapter_mode);
    if mode == crate::workspace::WorkspaceMode::Shared {
        return Ok(None);
    }
    let base = match (&config.dir, &settings.store) {
        (Some(d), _) => Some(d.clone()),
        (None, StoreChoice::Sqlite(db)) => db.parent().map(|p| p.join("workspaces")),
        (None, _) => None,
    };
    let dir = base.map(|b| if default { b } else { b.join(adapter_id) });
    let mut config = config.clone();
    config.dir = None;
    config.mode = Some(mode);
    // The host's other folders a source repository may hold: not its uncommitted changes.
    let data = match &settings.store {
        StoreChoice::Sqlite(db) => db.parent().map(std::path::Path::to_path_buf),
        _ => None,
    };
    let kept: Vec<std::path::PathBuf> = data
        .into_iter()
        .chain(homes.map(|h| h.root().to_path_buf()))
        .collect();
    let mut all = crate::workspace::Workspaces::open(&config, dir.as_deref())
        .map_err(|e| match &settings.workspace.dir {
            // The folder given cannot be made or used: named as it was given.
            Some(_) => StartError::WorkspaceDir(settings.workspace_names.dir.clone(), e),
            None => e.into(),
        })?
        .for_adapter(adapter_id)
        .limit_named(&settings.workspace_names.max_workspaces)
        .keeping(&kept);
    if let Some(repo) = all.inside_repository() {
        tracing::warn!(adapter = %adapter_id, dir = %all.root().display(), repository = %repo.display(),
            "the workspaces' folder lies inside a git repository: each workspace is a repository nested in its files (git there lists the folder as untracked, unless ignored); a folder outside it is better (--workspace-dir)");
    }
    // `max_workspaces` bounds the host's workspaces, every adapter's together.
    match host {
        Some(h) => all = all.counted_with(h),
        None => *host = Some(all.host()),
    }
    // With `sandbox_user` on a root host the agent runs as that user: its workspace is its.
    let sandboxed = settings.sandbox.mode != Some(crate::runner::sandbox::Mode::Off);
    if let Some(u) = settings
        .sandbox
        .user
        .as_deref()
        .filter(|_| sandboxed && nix::unistd::geteuid().is_root())
        .and_then(crate::runner::sandbox::RunAs::lookup)
    {
        all = all.owned_by(u.uid, u.gid);
    }
    tracing::info!(adapter = %adapter_id, dir = %all.root().display(), mode = ?mode, "workspaces");
    let all = Arc::new(all);
    crate::server::metrics::watch_workspaces(&all);
    Ok(Some(all))
}

/// The small program a root task's sandbox runs before the task's own
/// ([`crate::runner::sandbox::enter`]), written into the data folder unless the sandbox is
/// off; in the background, so that the host's start does not wait for it (until it is
/// ready, a root task's sandbox takes the same step with the setup mode).
fn prepare_sandbox_programs(settings: &Settings) {
    if settings.sandbox.mode == Some(crate::runner::sandbox::Mode::Off) {
        return;
    }
    if let Some(dir) = data_dir(&settings.store) {
        tokio::task::spawn_blocking(move || {
            // Made as the store makes it (its user's only), if the store has not yet.
            match crate::store::files::create_dir_all(&dir) {
                Ok(()) => crate::runner::sandbox::enter::prepare(&dir),
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "agent-host-enter not written")
                }
            }
        });
    }
}

/// The host's data folder for `store`: the SQLite database's, else the default one (where
/// the push key is kept).
fn data_dir(store: &StoreChoice) -> Option<std::path::PathBuf> {
    let db = match store {
        StoreChoice::Sqlite(db) => db.clone(),
        _ => crate::settings::default_db_path().ok()?,
    };
    db.parent().map(std::path::Path::to_path_buf)
}

/// The folder of the contexts' CLI homes for `store` (the default adapter's; another
/// adapter's is a folder of its own in it): `homes/` in the data folder (the SQLite
/// database's; for PostgreSQL the default one, where the push key is kept), so that sessions
/// outlive a restart; None for the memory store, whose contexts end with the host.
pub fn homes_dir(store: &StoreChoice) -> Option<std::path::PathBuf> {
    match store {
        StoreChoice::Memory => None,
        _ => data_dir(store).map(|d| d.join("homes")),
    }
}

/// The CLI homes of one adapter's contexts ([`homes_dir`], else a temporary folder), when
/// its sandbox keeps the CLI's state per context; their folder is hidden from every task.
fn open_homes(
    settings: &Settings,
    launch: &mut crate::engine::Launch,
    default: bool,
) -> Result<Option<Arc<crate::home::Homes>>, StartError> {
    let id = &launch.adapter.id;
    let Some(policy) = launch.sandbox.as_mut() else {
        return Ok(None);
    };
    if policy.state.is_none() {
        let wanted = settings.sandbox.state == crate::runner::sandbox::StateMode::Context;
        if wanted && !policy.write.is_empty() {
            let why = if policy.mode == crate::runner::sandbox::Mode::Off {
                "the sandbox is off".to_string()
            } else {
                format!(
                    "no bubblewrap ({}), which shows each context's folder at the CLI's paths",
                    crate::runner::sandbox::Capabilities::get().bwrap_missing
                )
            };
            tracing::warn!(adapter = %id, "the CLI's state folders are the host user's, shared by every task: {why}");
        }
        return Ok(None);
    }
    let dir = homes_dir(&settings.store).map(|b| if default { b } else { b.join(id) });
    let homes = crate::home::Homes::open(dir.as_deref())?;
    policy.hide.push(homes.root().to_path_buf());
    tracing::info!(adapter = %id, dir = %homes.root().display(), "CLI state: a home of its own per context");
    Ok(Some(Arc::new(homes)))
}

/// The host's controls for one adapter: its `on_budget` over the host's.
fn controls_for(
    settings: &Settings,
    on_budget: Option<crate::policy::OnBudget>,
) -> crate::policy::Controls {
    let mut c = settings.controls.clone();
    if let Some(o) = on_budget {
        c.on_budget = o;
    }
    c
}

/// One adapter's engine (recovered), push service and handler state.
async fn start_agent(
    settings: &Settings,
    adapter: AdapterSpec,
    default: bool,
    guard: Arc<Guard>,
    local_addr: SocketAddr,
    workspaces: &mut Option<Arc<crate::workspace::HostWorkspaces>>,
) -> Result<(AppState, Vec<tokio::task::JoinHandle<()>>), StartError> {
    let mut launch = launch_for(settings, adapter)?;
    let homes = open_homes(settings, &mut launch, default)?;
    let id = launch.adapter.id.clone();
    let adapter_on_budget = launch.adapter.on_budget;
    let adapter_workspace = launch.adapter.workspace;
    tracing::info!(adapter = %id, default, "agent");
    tracing::debug!(program = %launch.program.display(), cwd = %launch.cwd.display(), "agent program");
    if settings.store == StoreChoice::Memory {
        tracing::info!(adapter = %id, "store: memory (tasks are gone when agent-host stops)");
    }
    let (store, push_store) = open_store(&settings.store, &id, default, local_addr.port()).await?;
    let engine = Engine::with_config(
        store.clone(),
        launch,
        EngineConfig {
            limits: settings.host_limits.clone(),
            workspace_roots: settings.workspace_roots.clone(),
            secrets: settings.security.secret_values(),
            input_modes: settings.input_modes.clone(),
            workspaces: open_workspaces(
                settings,
                &id,
                adapter_workspace,
                default,
                workspaces,
                homes.as_deref(),
            )?,
            homes: homes.clone(),
            controls: Arc::new(controls_for(settings, adapter_on_budget)),
        },
    );
    // With a store several hosts share: this host's id, address and lease.
    let role = crate::engine::ClusterRole {
        me: crate::store::HostRecord {
            id: settings.cluster.host_id_for(local_addr),
            address: settings.cluster.address_for(local_addr),
            machine: crate::settings::cluster::machine_name(),
            pid: std::process::id(),
        },
        heartbeat: settings.cluster.heartbeat,
        lease: settings.cluster.lease,
    };
    let joined = engine.join_cluster(role).await.map_err(StartError::Store)?;
    if let Some(f) = crate::server::peer::for_engine(&engine, default)
        .map_err(|e| StartError::Peer(e.to_string()))?
    {
        engine.set_forwarder(f);
    }
    // After joining: the push claims are held under the host id. Before recovery: the
    // updates it writes wake the deliveries.
    let push = match &settings.push {
        Some(p) => {
            let sealer = match &p.key {
                PushKey::Hex(h) => Sealer::from_hex(h),
                PushKey::File(f) => Sealer::from_file(f),
            }
            .map_err(StartError::PushKey)?;
            // Claims are held under this host's id (when it is one of several).
            let svc = PushService::start(
                p.delivery.clone(),
                push_store,
                store.clone(),
                sealer,
                engine.host_id(),
            )
            .await
            .map_err(StartError::Push)?;
            let hook = svc.clone();
            engine.set_update_hook(Arc::new(move |task_id: &str| hook.on_update(task_id)));
            tracing::info!(
                allow_private = p.delivery.allow_private,
                "push notifications on"
            );
            Some(svc)
        }
        None => None,
    };
    let r = engine.recover().await.map_err(StartError::Store)?;
    if r != Recovery::default() {
        tracing::info!(
            adapter = %id,
            resumed = r.resumed,
            queued = r.queued,
            waiting_for_input = r.waiting,
            failed = r.failed,
            stale_processes_stopped = r.stale_processes,
            "picked up the tasks a previous agent-host left unfinished"
        );
    }
    let mut background: Vec<tokio::task::JoinHandle<()>> = crate::retention::spawn(
        store.clone(),
        settings.retention,
        engine.launch().cwd.clone(),
        crate::retention::Folders {
            workspaces: engine.workspaces().cloned(),
            homes,
        },
    )
    .into_iter()
    .collect();
    if joined {
        background.push(tokio::spawn(engine.clone().run_membership()));
    }
    let state = AppState {
        engine,
        card: card_settings(settings),
        local_addr,
        started_at: SystemTime::now(),
        keepalive: settings.sse_keepalive,
        blocking_wait: settings.blocking_wait,
        push,
        guard,
        ui_enabled: settings.ui,
    };
    Ok((state, background))
}

/// A started host: the engines (one per adapter, the default first) with their push
/// services, and the HTTP service over them.
pub struct App {
    agents: Vec<AppState>,
    limits: HttpLimits,
    local_addr: SocketAddr,
    /// How long open connections may take to close after the engines stopped.
    drain: Duration,
    /// The gRPC binding's listener and address, when `grpc_port` is set.
    grpc: Option<(tokio::net::TcpListener, SocketAddr)>,
    guard: Arc<Guard>,
    /// The background work of each store (retention, the cluster heartbeat), stopped at
    /// shutdown.
    retention: Vec<tokio::task::JoinHandle<()>>,
}

impl App {
    /// Builds and starts everything `settings` describe: the registry and the adapters to
    /// serve, each adapter's launch, store, engine (with its unfinished tasks recovered) and
    /// push service, the guard, and the card. `local_addr` is the address the service answers
    /// on (the listener's, already bound: it names the server in Host checks and cards).
    pub async fn start(settings: &Settings, local_addr: SocketAddr) -> Result<App, StartError> {
        prepare_sandbox_programs(settings);
        let registry = registry(settings)?;
        let adapters = adapters_to_serve(settings, &registry)?;
        if let Some(signer) = &settings.card_signer {
            if signer.alg() == crate::protocol::jws::Alg::Rs256 {
                // RSA private-key operations in the `rsa` crate are not constant-time.
                tracing::warn!("the agent card is signed with RS256: the rsa crate's signing has an unfixed timing side channel (RUSTSEC-2023-0071); prefer ES256 (the card is signed once per base URL, which limits what a client can time)");
            }
        }
        let guard = Arc::new(
            Guard::new(
                settings.security.clone(),
                local_addr,
                settings.public_url.as_deref(),
                settings.host_limits.rate_per_minute,
            )
            .with_required_extensions(settings.required_extensions.clone())
            .with_auth_failures_per_minute(settings.host_limits.auth_failures_per_minute)
            // Other hosts sharing the store call this one at its advertised address.
            .also_reached_at(
                matches!(settings.store, StoreChoice::Postgres(_))
                    .then(|| settings.cluster.address_for(local_addr))
                    .as_deref(),
            ),
        );
        // The gRPC binding on its own port of the same address (0: a free one), bound here so
        // that the cards can name it.
        let grpc = match settings.grpc_port {
            Some(port) => {
                let addr = SocketAddr::new(local_addr.ip(), port);
                let l = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| StartError::Bind(addr.to_string(), e))?;
                let bound = l
                    .local_addr()
                    .map_err(|e| StartError::Bind(addr.to_string(), e))?;
                Some((l, bound))
            }
            None => None,
        };
        let others: Vec<(String, String, String)> = adapters
            .iter()
            .skip(1)
            .map(|a| (a.id.clone(), a.name.clone(), a.description.clone()))
            .collect();
        let mut agents = Vec::new();
        let mut grace = Duration::ZERO;
        let mut retention = Vec::new();
        let mut workspaces = None;
        for (i, adapter) in adapters.into_iter().enumerate() {
            let (mut state, pruning) = start_agent(
                settings,
                adapter,
                i == 0,
                guard.clone(),
                local_addr,
                &mut workspaces,
            )
            .await?;
            retention.extend(pruning);
            // The CLI's version, for the extended card; found in the background so that a
            // slow CLI does not hold up the start.
            let (cell, launch) = (
                state.card.cli_version.clone(),
                state.engine.launch().clone(),
            );
            tokio::spawn(async move {
                if let Some(v) = adapter_version(&launch.adapter, &launch).await {
                    let _ = cell.set(v);
                }
            });
            if i == 0 {
                state.card.others = others.clone();
            }
            state.card.grpc_port = grpc.as_ref().map(|(_, a)| a.port());
            grace = grace.max(state.engine.launch().cancel_grace);
            agents.push(state);
        }
        if !settings.security.credentials.is_empty() {
            tracing::info!(
                credentials = settings.security.credentials.len(),
                "authentication required"
            );
        }
        warn_risky(settings, local_addr);
        Ok(App {
            agents,
            limits: HttpLimits {
                body_limit: settings.body_limit,
                route_by_metadata: settings.route_by_metadata,
                conn: settings.conn_limits.clone(),
                mcp: settings.mcp,
            },
            local_addr,
            drain: grace + Duration::from_secs(10),
            grpc,
            guard,
            retention,
        })
    }

    /// The whole HTTP service, as [`App::serve`] runs it (routing between adapters,
    /// trailing-slash trimming, guard, body limit, every route).
    pub fn router(&self) -> Router {
        server::service(&self.agents, &self.limits)
    }

    /// The handler state of each adapter, the default first (engines, push services).
    pub fn agents(&self) -> &[AppState] {
        &self.agents
    }

    /// The address of the gRPC binding, when served.
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc.as_ref().map(|(_, a)| *a)
    }

    /// Serves on `listener` until `shutdown` resolves, then ends every task and waits for
    /// open connections (see [`server::serve_many`]).
    pub async fn serve<F>(
        self,
        listener: tokio::net::TcpListener,
        shutdown: F,
    ) -> Result<(), StartError>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let addr = self.local_addr;
        // One line a supervisor (or a test that asked for port 0) can read the address from.
        tracing::info!("agent-host listening on http://{addr} (card: http://{addr}/.well-known/agent-card.json)");
        if self.agents.first().is_some_and(|a| a.ui_enabled) {
            tracing::info!("web console: http://{addr}/ui/");
        }
        for s in self.agents.iter().skip(1) {
            let id = &s.engine.launch().adapter.id;
            tracing::info!("also serving {id} at http://{addr}/agents/{id}/");
        }
        let served = match self.grpc {
            None => server::serve_many(listener, self.agents, self.limits, shutdown, self.drain)
                .await
                .map_err(StartError::Serve),
            Some((grpc_listener, grpc_addr)) => {
                tracing::info!("A2A gRPC on {grpc_addr}");
                let (shutdown, grpc) =
                    server::grpc::spawn(grpc_listener, self.agents.clone(), self.guard, shutdown);
                let served =
                    server::serve_many(listener, self.agents, self.limits, shutdown, self.drain)
                        .await;
                server::grpc::finish(grpc, self.drain).await;
                served.map_err(StartError::Serve)
            }
        };
        for r in self.retention {
            r.abort();
        }
        served
    }
}

/// A warning for every setting that opens the host: what it allows, and the setting.
fn warn_risky(settings: &Settings, local_addr: SocketAddr) {
    let sec = &settings.security;
    let no_creds = sec.credentials.is_empty();
    if no_creds && !local_addr.ip().is_loopback() {
        tracing::warn!("serving on {local_addr} WITHOUT authentication (--insecure-no-auth): anyone who can reach it can run commands on this machine");
    }
    if sec.allowed_hosts.iter().any(|h| h.trim() == "*") {
        tracing::warn!(
            "security.allowed_hosts contains \"*\": any Host header is accepted, so DNS rebinding can reach this host from a web page{}",
            if no_creds { " (and no credentials are required)" } else { "" }
        );
    }
    if sec.allowed_origins.iter().any(|o| o.trim() == "*") {
        tracing::warn!(
            "security.allowed_origins contains \"*\": a page on any web site may call this host from a browser{}",
            if no_creds { ", and no credentials are required: any site a local user visits can run the agent" } else { "" }
        );
    }
    if let Some(p) = &settings.push {
        if p.delivery.allow_private {
            tracing::warn!("push.allow_private is on (--push-allow-private): webhooks may target loopback, private and link-local addresses (cloud metadata among them); local testing only");
        }
    }
    let l = &settings.host_limits;
    if !no_creds && l.rate_per_minute == 0 && l.auth_failures_per_minute == 0 {
        tracing::warn!("[server] rate_limit and auth_failures_per_minute are 0: requests and failed authentications are not throttled");
    } else if !no_creds && l.auth_failures_per_minute == 0 {
        tracing::warn!(
            "[server] auth_failures_per_minute is 0: failed authentications are not throttled"
        );
    }
    for c in &sec.credentials {
        let short = match &c.secret {
            crate::settings::Secret::Bearer(t) | crate::settings::Secret::ApiKey(t) => t.len() < 16,
            crate::settings::Secret::Basic { password, .. } => password.len() < 12,
        };
        if short {
            tracing::warn!(credential = %c.name, "this credential's secret is short enough to guess; use at least 16 random characters (e.g. openssl rand -hex 32)");
        }
    }
    if settings
        .workspace_roots
        .iter()
        .any(|r| r.parent().is_none())
    {
        tracing::warn!("a workspace root is \"/\": a message may run the agent in any directory ([workspace] roots, AGENT_HOST_WORKSPACE_ROOTS)");
    }
    if settings.force {
        tracing::warn!("[agent] force is on: the agent runs with its adapter's force arguments (no approval prompts)");
    }
}
