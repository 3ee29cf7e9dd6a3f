//! `agent-host doctor`: checks a setup the way `serve` would use it (same settings), one
//! `pass` / `warn` / `fail` line per check: each adapter served (program, version tested,
//! credentials, and with `--online` one tiny real turn), the working directory and the
//! workspace roots, the store, the sandbox pieces and the port. Exit 0 when nothing
//! failed, 1 otherwise.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::adapter::AdapterSpec;
use crate::app::{adapters_to_serve, host_env, launch_for, probe_version, registry};
use crate::engine::launch::Launch;
use crate::settings::{Settings, StoreChoice};

/// Flags of `agent-host doctor` besides the serve settings.
#[derive(Debug, Clone, clap::Args)]
pub struct DoctorArgs {
    /// Also run one tiny real turn ("Reply with OK") against each adapter's model
    #[arg(long)]
    pub online: bool,
    /// Time limit of the --online turn, a duration (30s, 2m)
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub online_timeout: crate::units::Dur,
    /// Print the checks as one JSON document
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub serve: crate::settings::ServeArgs,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
}

/// One check: what (`check`, e.g. `claude-code credentials`), its outcome and what it found.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub check: String,
    pub status: Status,
    pub detail: String,
}

fn check(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
    Check {
        check: name.into(),
        status,
        detail: detail.into(),
    }
}

/// Every check of `settings`.
pub async fn run(settings: &Settings, args: &DoctorArgs) -> Vec<Check> {
    // Before the adapter checks run a version probe (which asks for the capabilities).
    crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    let mut out = Vec::new();
    let served = registry(settings).and_then(|r| adapters_to_serve(settings, &r));
    match &served {
        Ok(adapters) => {
            for a in adapters {
                adapter_checks(settings, a.clone(), args, &mut out).await;
            }
        }
        Err(e) => out.push(check("adapter", Status::Fail, e.to_string())),
    }
    out.extend(workspace_checks(settings));
    out.push(match &settings.store {
        StoreChoice::Postgres(url) => postgres_check(url).await,
        other => store_check(other),
    });
    out.extend(push_key_check(settings));
    if let Ok(adapters) = &served {
        out.extend(sandbox_checks(settings, adapters));
    }
    out.push(bind_check(settings));
    out.push(port_check(settings));
    out.extend(grpc_port_check(settings));
    out
}

/// The settings could not be resolved (a value `serve` refuses): one failed check saying
/// which, in place of the checks that need them.
pub fn unresolved(e: &crate::settings::SettingsError) -> Vec<Check> {
    vec![check("settings", Status::Fail, e.to_string())]
}

/// `serve`'s refusal to listen beyond loopback without a credential.
fn bind_check(settings: &Settings) -> Check {
    match settings.check_open_bind() {
        Ok(()) => check("bind", Status::Pass, settings.bind.to_string()),
        Err(e) => check("bind", Status::Fail, format!("--bind: {e}")),
    }
}

/// The push key file, when push is on and the key is kept in one: read and checked, or,
/// missing, a place it can be created in (serve creates it).
fn push_key_check(settings: &Settings) -> Option<Check> {
    let Some(crate::settings::PushConfig {
        key: crate::settings::PushKey::File(f),
        ..
    }) = &settings.push
    else {
        return None;
    };
    Some(match crate::push::seal::Sealer::check_file(f) {
        Ok(()) if f.exists() => check("push key", Status::Pass, f.display().to_string()),
        Ok(()) => check(
            "push key",
            Status::Pass,
            format!("{} (created at the first start)", f.display()),
        ),
        Err(e) => check("push key", Status::Fail, format!("--push-key-file: {e}")),
    })
}

async fn adapter_checks(
    settings: &Settings,
    a: AdapterSpec,
    args: &DoctorArgs,
    out: &mut Vec<Check>,
) {
    let id = a.id.clone();
    let launch = match launch_for(settings, a.clone()) {
        Ok(l) => l,
        Err(e) => {
            // The error already says how to install a missing program.
            out.push(check(format!("{id} program"), Status::Fail, e.to_string()));
            return;
        }
    };
    out.push(check(
        format!("{id} program"),
        Status::Pass,
        launch.program.display().to_string(),
    ));
    // Run exactly as a task's program runs (its sandbox, environment), the built-in agents
    // included: a program the sandbox cannot run fails here, not at the first task.
    let probe = probe_version(&launch).await;
    if let Some(why) = &probe.failure {
        let said = if probe.output.is_empty() {
            String::new()
        } else {
            format!(": {}", probe.output)
        };
        out.push(check(
            format!("{id} runs"),
            Status::Fail,
            format!(
                "{} {} in the task's sandbox: {why}{said}",
                launch.program.display(),
                a.version_args.join(" ")
            ),
        ));
        return;
    }
    out.push(check(
        format!("{id} runs"),
        Status::Pass,
        format!("{} in the task's sandbox", a.version_args.join(" ")),
    ));
    let version = if a.binary == crate::engine::launch::SELF_BINARY {
        Some(env!("CARGO_PKG_VERSION").to_string())
    } else {
        probe.version
    };
    out.push(match version {
        Some(v) if a.tested_versions.contains(&v) => check(
            format!("{id} version"),
            Status::Pass,
            format!("{v} (tested)"),
        ),
        Some(v) if a.tested_versions.is_empty() => check(format!("{id} version"), Status::Pass, v),
        Some(v) => check(
            format!("{id} version"),
            Status::Warn,
            format!(
                "{v} is not a tested version ({})",
                a.tested_versions.join(", ")
            ),
        ),
        None => check(
            format!("{id} version"),
            Status::Warn,
            "unknown (the program printed no version)",
        ),
    });
    out.push(credentials_check(&a, &launch));
    out.extend(state_check(settings, &launch));
    if args.online {
        out.push(online_check(settings, launch, args.online_timeout.into()).await);
    }
}

/// A variable's value as the agent would see it, else as the host has it.
fn lookup(launch: &Launch, name: &str) -> Option<String> {
    launch
        .env
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var(name).ok())
        .filter(|v| !v.is_empty())
}

/// Whether the CLI's credentials (the adapter's `[doctor]`) are there.
fn credentials_check(a: &AdapterSpec, launch: &Launch) -> Check {
    let name = format!("{} credentials", a.id);
    let spec = &a.doctor;
    if spec.credentials_env.is_empty() && spec.credentials_files.is_empty() {
        return check(
            name,
            Status::Pass,
            "none needed (the adapter declares none)",
        );
    }
    if let Some(var) = spec
        .credentials_env
        .iter()
        .find(|v| lookup(launch, v).is_some())
    {
        return check(name, Status::Pass, format!("{var} is set"));
    }
    let home = lookup(launch, "HOME");
    let files: Vec<PathBuf> = spec
        .credentials_files
        .iter()
        .filter_map(|f| crate::adapter::sandbox::expand_path(f, &launch.env, home.as_deref()))
        .map(PathBuf::from)
        .collect();
    if let Some(f) = files.iter().find(|f| f.is_file()) {
        return check(name, Status::Pass, format!("{} exists", f.display()));
    }
    let mut wanted = Vec::new();
    if !spec.credentials_env.is_empty() {
        wanted.push(format!("set {}", spec.credentials_env.join(" or ")));
    }
    if !files.is_empty() {
        let list: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
        wanted.push(format!(
            "log in with the CLI (it writes {})",
            list.join(" or ")
        ));
    }
    check(
        name,
        Status::Fail,
        format!("none found: {}", wanted.join(", or ")),
    )
}

/// Where the CLI's state folders are for its tasks: a home of its own per context, or the
/// host user's, shared by every task (and why). None when the adapter declares none.
fn state_check(settings: &Settings, launch: &Launch) -> Option<Check> {
    use crate::runner::sandbox::{Mode, StateMode};
    let policy = launch.sandbox.as_ref()?;
    if policy.write.is_empty() {
        return None;
    }
    let name = format!("{} CLI state", launch.adapter.id);
    if policy.state.is_some() {
        let dir = crate::app::homes_dir(&settings.store).map_or_else(
            || "a temporary folder (memory store)".to_string(),
            |d| d.display().to_string(),
        );
        return Some(check(
            name,
            Status::Pass,
            format!("a home of its own per context, in {dir}"),
        ));
    }
    let paths: Vec<String> = policy
        .write
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let why = if settings.sandbox.state == StateMode::Shared {
        "sandbox_state = \"shared\"".to_string()
    } else if policy.mode == Mode::Off {
        "the sandbox is off".to_string()
    } else {
        format!(
            "no bubblewrap ({}), which shows each context's folder at the CLI's paths",
            crate::runner::sandbox::Capabilities::get().bwrap_missing
        )
    };
    Some(check(
        name,
        Status::Warn,
        format!(
            "the host user's {}, shared by every task (each task reads and writes every context's sessions): {why}",
            paths.join(", ")
        ),
    ))
}

/// One real turn through an engine with a memory store, like a task of `serve`.
async fn online_check(settings: &Settings, launch: Launch, limit: Duration) -> Check {
    use crate::protocol::v1::SendMessageRequest;
    let name = format!("{} online", launch.adapter.id);
    let store = Arc::new(crate::store::MemoryStore::new());
    let engine = crate::engine::Engine::with_config(
        store,
        launch,
        crate::engine::EngineConfig {
            limits: settings.host_limits.clone(),
            workspace_roots: settings.workspace_roots.clone(),
            secrets: settings.security.secret_values(),
            input_modes: settings.input_modes.clone(),
            ..Default::default()
        },
    );
    let req = SendMessageRequest {
        tenant: None,
        message: crate::engine::input::text_message("Reply with OK"),
        configuration: None,
        metadata: None,
    };
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(limit, async {
        let accepted = engine
            .send(req, None, &crate::engine::RequestOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        loop {
            let t = engine
                .get(&accepted.task_id, Some(0), None)
                .await
                .map_err(|e| e.to_string())?;
            let state = t.status.state;
            if state.is_terminal() || state.is_interrupted() {
                let said = t
                    .status
                    .message
                    .as_ref()
                    .map(|m| {
                        m.parts
                            .iter()
                            .filter_map(|p| p.text.clone())
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                return Ok::<_, String>((state, said));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    engine.shutdown().await;
    let secs = started.elapsed().as_secs_f64();
    match result {
        Ok(Ok((crate::protocol::v1::TaskState::Completed, _))) => check(
            name,
            Status::Pass,
            format!("a turn completed in {secs:.1}s"),
        ),
        Ok(Ok((state, said))) => check(
            name,
            Status::Fail,
            format!("the turn ended {} {}", state.as_proto_name(), said.trim()),
        ),
        Ok(Err(e)) => check(name, Status::Fail, e),
        Err(_) => check(
            name,
            Status::Fail,
            format!("no answer within {}", crate::units::Dur(limit)),
        ),
    }
}

/// Whether `dir` or a folder above it holds `.git`.
fn in_git_repo(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

fn workspace_checks(settings: &Settings) -> Vec<Check> {
    let dir = &settings.repo_path;
    let mut out = Vec::new();
    if !dir.is_dir() {
        out.push(check(
            "working directory",
            Status::Fail,
            format!("{} is not a directory", dir.display()),
        ));
        return out;
    }
    out.push(if in_git_repo(dir) {
        check("working directory", Status::Pass, format!("{} (a git repository)", dir.display()))
    } else {
        check(
            "working directory",
            Status::Warn,
            format!("{} is not in a git repository: the agents' changes cannot be reviewed or undone with git", dir.display()),
        )
    });
    if let Some(c) = workspaces_check(settings) {
        out.push(c);
    }
    for root in &settings.workspace_roots {
        out.push(if root.is_dir() {
            check("workspace root", Status::Pass, root.display().to_string())
        } else {
            check(
                "workspace root",
                Status::Warn,
                format!("{} is not a directory", root.display()),
            )
        });
    }
    out
}

/// The git workspaces of the default adapter's contexts (in `--workspace-dir`, else beside
/// the SQLite database): how many, their disk use, against `--max-workspaces`.
fn workspaces_check(settings: &Settings) -> Option<Check> {
    let config = &settings.workspace;
    if config.mode == Some(crate::workspace::WorkspaceMode::Shared) {
        return None;
    }
    let dir = match (&config.dir, &settings.store) {
        (Some(d), _) => d.clone(),
        (None, StoreChoice::Sqlite(db)) => db.parent()?.join("workspaces"),
        (None, _) => return None,
    };
    if let Some(part) = crate::store::files::blocked_at(&dir) {
        let setting = if config.dir.is_some() {
            format!("{} ", settings.workspace_names.dir)
        } else {
            String::new()
        };
        return Some(check(
            "git workspaces",
            Status::Fail,
            format!(
                "{setting}{}: {} is not a directory",
                dir.display(),
                part.display()
            ),
        ));
    }
    if !dir.is_dir() {
        return None;
    }
    let all = crate::workspace::Workspaces::open(config, Some(&dir)).ok()?;
    let n = all.list().len();
    let detail = format!("{n} in {} ({})", dir.display(), human_size(all.disk_use()));
    let max = config.max_workspaces;
    Some(if max > 0 && n * 10 >= max * 9 {
        check(
            "git workspaces",
            Status::Warn,
            format!(
                "{detail}: near {} {max}; new contexts are refused at the limit",
                settings.workspace_names.max_workspaces
            ),
        )
    } else {
        check("git workspaces", Status::Pass, detail)
    })
}

/// A PostgreSQL store: reachable, and how its schema stands against this build's, read
/// without writing (`serve` creates or migrates it; doctor changes nothing).
async fn postgres_check(url: &str) -> Check {
    use crate::store::postgres::{SchemaState, SCHEMA_VERSION};
    let inspect = crate::store::postgres::inspect(url);
    let state = match tokio::time::timeout(Duration::from_secs(10), inspect).await {
        Ok(Ok(state)) => state,
        // The error says "postgres: ..." itself.
        Ok(Err(e)) => return check("store", Status::Fail, e.to_string()),
        Err(_) => return check("store", Status::Fail, "postgres: no answer within 10 s"),
    };
    match state {
        SchemaState::Current => check(
            "store",
            Status::Pass,
            "postgres: reachable, schema up to date",
        ),
        SchemaState::Missing => check(
            "store",
            Status::Pass,
            "postgres: reachable, schema missing (created at the first start)",
        ),
        SchemaState::Older(v) => check(
            "store",
            Status::Pass,
            format!(
                "postgres: reachable, schema older ({v}, this build {SCHEMA_VERSION}): migrated at the next start"
            ),
        ),
        SchemaState::Newer(v) => check(
            "store",
            Status::Fail,
            format!(
                "postgres: schema newer ({v}, this build {SCHEMA_VERSION}): use a newer agent-host"
            ),
        ),
    }
}

fn store_check(store: &StoreChoice) -> Check {
    let path = match store {
        StoreChoice::Postgres(_) => {
            return check("store", Status::Warn, "postgres: checked when connecting")
        }
        StoreChoice::Memory => {
            return check(
                "store",
                Status::Warn,
                "memory: tasks are gone when the host stops",
            )
        }
        StoreChoice::Sqlite(p) => p,
    };
    if let Err(e) = crate::store::SqliteStore::check_path(path) {
        return check("store", Status::Fail, format!("--store sqlite:{e}"));
    }
    let size: u64 = [path.clone()]
        .into_iter()
        .chain(side_files(path))
        .filter_map(|p| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    let exists = path.exists();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let writable = if exists {
        std::fs::OpenOptions::new().append(true).open(path).is_ok()
    } else {
        // The folder is created by the host: look at the nearest existing one.
        dir.ancestors()
            .find(|d| d.exists())
            .map(|d| nix::unistd::access(d, nix::unistd::AccessFlags::W_OK).is_ok())
            .unwrap_or(false)
    };
    let held = match crate::store::lock::check(path) {
        Err(crate::store::StoreError::Locked(l)) => format!(
            "; in use by agent-host pid {}{}",
            l.pid.map_or("?".into(), |p| p.to_string()),
            l.port.map_or(String::new(), |p| format!(", port {p}"))
        ),
        _ => String::new(),
    };
    match (exists, writable) {
        (true, true) => check(
            "store",
            Status::Pass,
            format!("sqlite {} ({}){held}", path.display(), human_size(size)),
        ),
        (false, true) => check(
            "store",
            Status::Pass,
            format!("sqlite {} (created at the first start)", path.display()),
        ),
        (_, false) => check(
            "store",
            Status::Fail,
            format!("sqlite {}: not writable", path.display()),
        ),
    }
}

fn side_files(path: &Path) -> Vec<PathBuf> {
    ["-wal", "-shm"]
        .iter()
        .map(|s| {
            let mut n = path.as_os_str().to_owned();
            n.push(s);
            PathBuf::from(n)
        })
        .collect()
}

pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The sandbox of each adapter served (an adapter's own `[sandbox] mode` and `network` count
/// where the settings leave them unset, as they do in `serve`); named `sandbox` for the one
/// adapter, `ID sandbox` for each of several.
fn sandbox_checks(settings: &Settings, adapters: &[AdapterSpec]) -> Vec<Check> {
    let several = adapters.len() > 1;
    adapters
        .iter()
        .flat_map(|a| {
            let name = if several {
                format!("{} sandbox", a.id)
            } else {
                "sandbox".to_string()
            };
            adapter_sandbox_checks(settings, a, &name)
        })
        .collect()
}

fn adapter_sandbox_checks(settings: &Settings, a: &AdapterSpec, name: &str) -> Vec<Check> {
    let env = crate::engine::launch::child_env(a, &host_env(), &settings.pass_env);
    let policy = match crate::engine::launch::sandbox_policy(a, &settings.sandbox, &env) {
        Ok(p) => p,
        Err(e) => return vec![check(name, Status::Fail, e.to_string())],
    };
    let caps = crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    let piece = format!("{name} piece");
    let mut out = vec![check(
        name,
        Status::Pass,
        format!("mode {}", policy.mode.as_str()),
    )];
    for p in caps.pieces(&policy) {
        out.push(check(&piece, Status::Pass, p));
    }
    if let Some(u) = &policy.run_as {
        let cwd = &settings.repo_path;
        out.push(if u.can_write_dir(cwd) {
            check(
                "sandbox user",
                Status::Pass,
                format!("{} (uid {}) can write {}", u.name, u.uid, cwd.display()),
            )
        } else {
            check(
                "sandbox user",
                Status::Warn,
                format!(
                    "{} (uid {}) cannot write the working directory {} by its modes: give it to the user (chown -R {} {})",
                    u.name,
                    u.uid,
                    cwd.display(),
                    u.name,
                    cwd.display()
                ),
            )
        });
    }
    let required = policy.mode == crate::runner::sandbox::Mode::Required;
    for m in caps.missing(&policy) {
        let status = if required { Status::Fail } else { Status::Warn };
        out.push(check(&piece, status, format!("missing: {m}")));
    }
    out
}

fn port_check(settings: &Settings) -> Check {
    let addr = settings.bind;
    if addr.port() == 0 {
        return check(
            "port",
            Status::Pass,
            format!("{addr}: a free port is picked at start"),
        );
    }
    match std::net::TcpListener::bind(addr) {
        Ok(_) => check("port", Status::Pass, format!("{addr} is free")),
        Err(e) => {
            let ours = match &settings.store {
                StoreChoice::Sqlite(p) => match crate::store::lock::check(p) {
                    Err(crate::store::StoreError::Locked(l)) if l.port == Some(addr.port()) => {
                        l.pid
                    }
                    _ => None,
                },
                StoreChoice::Memory | StoreChoice::Postgres(_) => None,
            };
            match ours {
                Some(pid) => check(
                    "port",
                    Status::Warn,
                    format!("{addr} is taken by a running agent-host (pid {pid}) on this database"),
                ),
                None => check("port", Status::Fail, format!("{addr} cannot be bound: {e}")),
            }
        }
    }
}

/// The gRPC port (`--grpc-port`), when set: free, as serve binds it beside the HTTP port.
fn grpc_port_check(settings: &Settings) -> Option<Check> {
    let port = settings.grpc_port.filter(|p| *p != 0)?;
    let addr = std::net::SocketAddr::new(settings.bind.ip(), port);
    Some(match std::net::TcpListener::bind(addr) {
        Ok(_) => check("grpc port", Status::Pass, format!("{addr} is free")),
        Err(e) => check(
            "grpc port",
            Status::Fail,
            format!("--grpc-port {port}: {addr} cannot be bound: {e}"),
        ),
    })
}

/// The checks as text, one line each.
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.check.len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in checks {
        let tag = match c.status {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("{tag}  {:<width$}  {}\n", c.check, c.detail));
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    out.push_str(&format!(
        "\n{} passed, {} warnings, {} failed\n",
        count(Status::Pass),
        count(Status::Warn),
        count(Status::Fail)
    ));
    out
}

/// The checks as one JSON document: `{"ok": bool, "checks": [{check, status, detail}]}`.
pub fn render_json(checks: &[Check]) -> String {
    let doc = serde_json::json!({ "ok": exit_code(checks) == 0, "checks": checks });
    format!("{doc}\n")
}

/// 0 when no check failed, else 1.
pub fn exit_code(checks: &[Check]) -> i32 {
    i32::from(checks.iter().any(|c| c.status == Status::Fail))
}
