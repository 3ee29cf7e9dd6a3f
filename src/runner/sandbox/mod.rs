//! Containment of a task: what the engine asks for ([`SandboxPolicy`]) and what this machine
//! offers ([`Capabilities`], probed once), turned into a wrapped command at spawn ([`Prepared`]).
//!
//! The pieces, strongest first, each used when the machine has it:
//! - **tracking** (nothing a task starts outlives it): a cgroup per task (v2 with
//!   `cgroup.kill`, else the v1 `pids`/`freezer` hierarchies; [`cgroup`]), else the PID
//!   namespace of bubblewrap (its init dies with the program and the kernel kills the rest),
//!   else the host as a child subreaper sweeping the task's descendants ([`reaper`]);
//! - **isolation**: bubblewrap ([`bwrap`]): own PID namespace and `/proc`, the system
//!   read-only, the working directory and the adapter's state folders writable, a private
//!   `/tmp`, the host's secrets hidden, optionally no network; where bubblewrap is missing,
//!   Landlock ([`landlock`]) keeps the same write rules (but cannot hide files or processes);
//!   where the task shares the host's network, Landlock also keeps it from the host's
//!   abstract Unix sockets (Linux 6.12+);
//! - **limits**: memory, processes, CPU weight (cgroups), largest file (`RLIMIT_FSIZE`);
//! - **user**: a host running as root runs the task as another user ([`user`]).
//!
//! Pieces can be left unused on purpose (`sandbox_disable`, [`Piece`]): to run the weaker
//! tiers where the stronger exist (tests), or to step around a piece that misbehaves.

pub(crate) mod bwrap;
pub(crate) mod cgroup;
pub(crate) mod config;
pub(crate) mod enter;
mod landlock;
pub(crate) mod net;
mod pin;
pub(crate) mod program;
pub(crate) mod reaper;
pub mod setup;
mod sockets;
pub(crate) mod state;
pub(crate) mod user;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

pub use cgroup::{human_bytes, TaskCgroup};
pub use state::{Bind, StateLayout};
pub use user::RunAs;

/// A piece of the machine the sandbox can be told not to use (`sandbox_disable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Piece {
    /// cgroups (tracking and limits)
    Cgroup,
    /// bubblewrap (namespaces, mounts; the PID-namespace tier)
    Bwrap,
    /// Landlock (write rules without bubblewrap)
    Landlock,
    /// The network namespaces the host makes itself for the `proxy` mode (bubblewrap makes
    /// them and a relay in the sandbox carries the connections instead)
    Netns,
}

impl Piece {
    pub fn parse(s: &str) -> Option<Piece> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cgroup" | "cgroups" => Some(Piece::Cgroup),
            "bwrap" | "bubblewrap" => Some(Piece::Bwrap),
            "landlock" => Some(Piece::Landlock),
            "netns" => Some(Piece::Netns),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Piece::Cgroup => "cgroup",
            Piece::Bwrap => "bwrap",
            Piece::Landlock => "landlock",
            Piece::Netns => "netns",
        }
    }
}

/// How the processes of a task are tracked, strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// A cgroup per task (the kernel lists every process).
    Cgroup,
    /// bubblewrap's PID namespace (its init dies with the program, the kernel kills the rest).
    PidNamespace,
    /// The host is a child subreaper and sweeps the task's descendants ([`reaper`]).
    Subreaper,
    /// The process group only (not Linux).
    ProcessGroup,
}

/// How much containment is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Use what the machine offers; say once what is missing.
    #[default]
    Auto,
    /// Refuse to start when a piece is missing.
    Required,
    /// No sandbox: the task runs as the host's user with the host's view (process group only).
    Off,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(Mode::Auto),
            "required" => Some(Mode::Required),
            "off" => Some(Mode::Off),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Required => "required",
            Mode::Off => "off",
        }
    }
}

/// The task's network ([`net`]). The settings' default is `Proxy`; a policy built by hand
/// has the host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The host's network.
    #[default]
    Open,
    /// Its own network namespace with loopback only.
    None,
    /// Its own network namespace, and the host's egress proxy to the hosts of an allow-list.
    Proxy,
}

impl Network {
    pub fn parse(s: &str) -> Option<Network> {
        match s.trim().to_ascii_lowercase().as_str() {
            "open" => Some(Network::Open),
            "none" => Some(Network::None),
            "proxy" => Some(Network::Proxy),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Network::Open => "open",
            Network::None => "none",
            Network::Proxy => "proxy",
        }
    }
}

/// Limits of one task; `None` = unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskLimits {
    /// bytes of memory (swap included where the kernel counts it)
    pub memory: Option<u64>,
    /// processes and threads
    pub pids: Option<u64>,
    /// CPU weight, 1..=10000, 100 = as much as any other process
    pub cpu_weight: Option<u64>,
    /// largest file the task may write, in bytes
    pub file_size: Option<u64>,
}

/// What the engine asks for one task.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxPolicy {
    pub mode: Mode,
    /// Writable: the working directory first, then the adapter's state folders/files.
    pub write: Vec<PathBuf>,
    /// Not visible at all (folders get an empty tmpfs, files an empty file).
    pub hide: Vec<PathBuf>,
    /// Shown again (read-write) inside a hidden folder: the task's own attachments.
    pub reveal: Vec<PathBuf>,
    pub network: Network,
    /// Run as this user (root hosts only), as configured.
    pub user: Option<String>,
    /// That user, looked up, when the task really switches to it (a root host, mode not off).
    pub run_as: Option<RunAs>,
    pub limits: TaskLimits,
    /// The context's workspace: the folder of all workspaces hidden, this one's checkout
    /// writable (after `hide`, whose paths inside the checkout are hidden again).
    pub workspace: Option<WorkspaceMount>,
    /// The way out in the `proxy` network mode.
    pub egress: Option<net::Egress>,
    /// Host Unix sockets the adapter's CLI needs, bound in (all others are out of sight).
    pub sockets: Vec<PathBuf>,
    /// The CLI's state paths that are each context's own ([`state`]); None: the host
    /// user's, shared by every task (`sandbox_state = "shared"`, no bubblewrap, mode off).
    pub state: Option<std::sync::Arc<StateLayout>>,
    /// This turn's context folders at the CLI's state paths, then the host's credentials
    /// read-only (made from `state` for the turn's context).
    pub binds: Vec<Bind>,
}

/// Where a CLI keeps its state (`sandbox_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StateMode {
    /// A folder of its own per context, shown at the CLI's state paths (needs bubblewrap).
    #[default]
    Context,
    /// The host user's folders, shared by every task.
    Shared,
}

impl StateMode {
    pub fn parse(s: &str) -> Option<StateMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "context" => Some(StateMode::Context),
            "shared" => Some(StateMode::Shared),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StateMode::Context => "context",
            StateMode::Shared => "shared",
        }
    }
}

/// The workspaces a task sees: only its own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkspaceMount {
    /// The folder of every context's workspace.
    pub root: PathBuf,
    /// The task's own checkout.
    pub checkout: PathBuf,
    /// The source repository's objects, which the checkout borrows (`objects/info/alternates`, as `git clone --shared` writes it):
    /// shown read-only, also where the sandbox would hide them (a repository under `/tmp`),
    /// or git in the checkout finds no object of the base. Then the object folders the
    /// source's own alternates name (a source made by `git clone --shared` or
    /// `--reference`), shown read-only too, except those in or around a folder the
    /// sandbox hides.
    pub borrowed: Vec<PathBuf>,
    /// The source repository's top folder: shown read-only where the sandbox would hide it
    /// (under `/tmp`), as it is seen everywhere else, so that the agent finds it read-only
    /// rather than as empty folders of its private `/tmp` it could write.
    pub source: Option<PathBuf>,
}

/// What this machine offers, probed once per host.
#[derive(Debug)]
pub struct Capabilities {
    /// A working bubblewrap and its version.
    pub bwrap: Option<(PathBuf, String)>,
    /// Why bubblewrap cannot be used (not installed, or it failed a trial run).
    pub bwrap_missing: String,
    /// The bubblewrap found is setuid (it must not start under `no_new_privs`).
    pub bwrap_setuid: bool,
    /// The bubblewrap found binds open descriptors (`--bind-fd`, 0.8 and later).
    pub bwrap_bind_fd: bool,
    /// The Landlock ABI version the kernel supports.
    pub landlock_abi: Option<i32>,
    pub cgroups: cgroup::Hierarchies,
    pub root: bool,
    /// The pieces left unused on purpose (`sandbox_disable`).
    pub disabled: Vec<Piece>,
}

static CAPS: OnceLock<Capabilities> = OnceLock::new();

impl Capabilities {
    /// The machine's capabilities (probed on first use: a trial run of bubblewrap, the
    /// Landlock ABI, the writable cgroup hierarchies).
    pub fn get() -> &'static Capabilities {
        CAPS.get_or_init(|| Capabilities::probe(&[]))
    }

    /// Like [`Capabilities::get`], leaving `disable` unused: the host calls this with its
    /// settings before anything else asks. Once probed, the pieces stay as they are (a
    /// warning says so when `disable` asks for another set).
    pub fn configure(disable: &[Piece]) -> &'static Capabilities {
        let caps = CAPS.get_or_init(|| Capabilities::probe(disable));
        if disable.iter().any(|p| !caps.disabled.contains(p)) {
            tracing::warn!(
                "sandbox_disable is applied once per process; the pieces were already chosen"
            );
        }
        caps
    }

    fn probe(disable: &[Piece]) -> Capabilities {
        let off = |p: Piece| disable.contains(&p);
        let (bwrap, bwrap_missing) = if off(Piece::Bwrap) {
            (None, "not used: sandbox_disable".into())
        } else {
            bwrap::probe()
        };
        let bwrap_setuid = bwrap.as_ref().is_some_and(|(path, _)| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o4000 != 0)
        });
        let bwrap_bind_fd = bwrap
            .as_ref()
            .is_some_and(|(path, _)| bwrap::binds_fds(path));
        Capabilities {
            bwrap,
            bwrap_missing,
            bwrap_setuid,
            bwrap_bind_fd,
            landlock_abi: if off(Piece::Landlock) {
                None
            } else {
                landlock::abi()
            },
            cgroups: if off(Piece::Cgroup) {
                cgroup::Hierarchies::default()
            } else {
                cgroup::Hierarchies::probe()
            },
            root: nix::unistd::geteuid().is_root(),
            disabled: disable.to_vec(),
        }
    }

    /// How the processes of a task are tracked.
    pub fn tier(&self) -> Tier {
        use cgroup::Kind;
        if [Kind::Unified, Kind::Freezer, Kind::Pids]
            .iter()
            .any(|k| self.cgroups.has(*k))
        {
            Tier::Cgroup
        } else if self.bwrap.is_some() {
            Tier::PidNamespace
        } else if cfg!(target_os = "linux") {
            Tier::Subreaper
        } else {
            Tier::ProcessGroup
        }
    }

    /// How the processes of a task are tracked, in words.
    pub fn tracking(&self) -> &'static str {
        use cgroup::Kind;
        let unified = self.cgroups.list.iter().find(|h| h.kind == Kind::Unified);
        if let Some(h) = unified {
            h.v2_tracking()
        } else if self.cgroups.has(Kind::Freezer) {
            "cgroup v1 (freezer)"
        } else if self.cgroups.has(Kind::Pids) {
            "cgroup v1 (pids)"
        } else {
            match self.tier() {
                Tier::Cgroup => "cgroup",
                Tier::PidNamespace => "PID namespace (the program is its init)",
                Tier::Subreaper => {
                    "subreaper (the host adopts the task's orphans and sweeps its descendants)"
                }
                Tier::ProcessGroup => "process group only",
            }
        }
    }

    /// Whether a task of `policy` is kept from the host's abstract Unix sockets by Landlock:
    /// where it shares the host's network (`open`, or no bubblewrap to make a namespace) and
    /// the kernel can scope them. A setuid bubblewrap (started after the ruleset) needs the
    /// host to be root, which may apply the ruleset without `no_new_privs`.
    pub fn scopes_sockets(&self, policy: &SandboxPolicy) -> bool {
        let shares_network = policy.network == Network::Open || self.bwrap.is_none();
        policy.mode != Mode::Off
            && shares_network
            && self
                .landlock_abi
                .is_some_and(|v| v >= landlock::ABSTRACT_SCOPE_ABI)
            && (!self.bwrap_setuid || self.root)
    }

    /// The pieces in force for `policy`, one phrase each (for logs, `agent-host adapters`
    /// and the extended card).
    pub fn pieces(&self, policy: &SandboxPolicy) -> Vec<String> {
        if policy.mode == Mode::Off {
            return vec!["off: process group only".into()];
        }
        let mut out = vec![format!("tracking: {}", self.tracking())];
        match (&self.bwrap, self.landlock_abi) {
            (Some((_, v)), _) => out.push(format!(
                "bubblewrap {v}: own PID namespace and /proc, system read-only, private /tmp, host data hidden"
            )),
            (None, Some(abi)) => out.push(format!("landlock ABI {abi}: writes limited to the working directory and state folders")),
            (None, None) => {}
        }
        if self.scopes_sockets(policy) {
            out.push("abstract Unix sockets: the task's own only (Landlock scope)".into());
        }
        if policy.state.is_some() && self.bwrap.is_some() {
            out.push("CLI state: a folder of its own per context".into());
        }
        match (policy.network, &policy.egress) {
            (Network::None, _) if self.bwrap.is_some() => {
                out.push("network: none (loopback only)".into())
            }
            (Network::Proxy, Some(e)) if self.bwrap.is_some() => out.push(format!(
                "network: proxy to {}",
                match e.rules.describe() {
                    d if d.is_empty() => "no host".to_string(),
                    d => d.join(", "),
                }
            )),
            _ => {}
        }
        let l = &policy.limits;
        if let Some(m) = l.memory.filter(|_| self.cgroups.can_limit("memory")) {
            out.push(format!("memory limit {}", human_bytes(m)));
        }
        if let Some(p) = l.pids.filter(|_| self.cgroups.can_limit("pids")) {
            out.push(format!("process limit {p}"));
        }
        if let Some(w) = l.cpu_weight.filter(|_| self.cgroups.can_limit("cpu")) {
            out.push(format!("cpu weight {w}"));
        }
        if let Some(f) = l.file_size {
            out.push(format!("file size limit {}", human_bytes(f)));
        }
        if let Some(u) = &policy.run_as {
            out.push(format!("user {} (uid {})", u.name, u.uid));
        }
        if !self.disabled.is_empty() {
            let names: Vec<&str> = self.disabled.iter().map(|p| p.as_str()).collect();
            out.push(format!("not used (sandbox_disable): {}", names.join(", ")));
        }
        out
    }

    /// What `policy` asks for that this machine cannot give, one phrase each.
    pub fn missing(&self, policy: &SandboxPolicy) -> Vec<String> {
        if policy.mode == Mode::Off {
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.bwrap.is_none() {
            let hint = if self.disabled.contains(&Piece::Bwrap) {
                ""
            } else {
                "; install the `bubblewrap` package"
            };
            out.push(format!(
                "bubblewrap ({}{hint}): no PID namespace, no private /tmp, host files not hidden, the CLI's state shared by every context",
                self.bwrap_missing
            ));
            if self.landlock_abi.is_none() {
                out.push(
                    "Landlock (kernel 5.13+ with landlock enabled): writes are not restricted"
                        .into(),
                );
            }
            if policy.network != Network::Open {
                out.push(format!(
                    "a network namespace for sandbox_network = \"{}\" (needs bubblewrap)",
                    policy.network.as_str()
                ));
            }
        }
        if !self.cgroups.has(cgroup::Kind::Unified)
            && !self.cgroups.has(cgroup::Kind::Freezer)
            && !self.cgroups.has(cgroup::Kind::Pids)
        {
            out.push(format!(
                "a writable cgroup hierarchy (cgroup v2, or v1 pids/freezer): processes are tracked by {}",
                match self.tier() {
                    Tier::PidNamespace => "bubblewrap's PID namespace",
                    Tier::Subreaper => "the host as subreaper sweeping their descendants",
                    _ => "process group only",
                }
            ));
        }
        let l = &policy.limits;
        for (set, ctl, key) in [
            (l.memory.is_some(), "memory", "task_memory"),
            (l.pids.is_some(), "pids", "task_pids"),
            (l.cpu_weight.is_some(), "cpu", "task_cpu_weight"),
        ] {
            if set && !self.cgroups.can_limit(ctl) {
                out.push(format!(
                    "the {ctl} cgroup controller ({key} is not enforced)"
                ));
            }
        }
        if policy.user.is_some() && !self.root {
            out.push("root (sandbox_user needs a host running as root)".into());
        }
        out
    }
}

/// Everything decided before one spawn.
#[derive(Debug)]
pub struct Prepared {
    /// The program to exec and its arguments (bubblewrap's, with the task's after `--`).
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cgroup: Option<TaskCgroup>,
    /// The program runs under bubblewrap, whose outer process is the leader.
    pub wrapped: bool,
    /// Tracked by the host as subreaper (the last tier): the marker to set, then the sweep.
    pub track: Option<reaper::Pending>,
    /// What the task's first process does to itself before the program runs ([`setup`]).
    steps: setup::Steps,
}

/// Why a task cannot be contained as asked.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("sandbox = \"required\" but this machine lacks: {}", .0.join("; "))]
    Missing(Vec<String>),
    #[error("cannot create the task's cgroup: {0}")]
    Cgroup(#[source] std::io::Error),
    #[error("sandbox_user '{0}' is not a user of this machine")]
    NoUser(String),
    #[error("cannot set up Landlock: {0}")]
    Landlock(#[source] ::landlock::RulesetError),
    #[error("{0}")]
    Link(#[source] std::io::Error),
}

impl Prepared {
    /// Decides how `program args` runs under `policy` on this machine; `path_var` is the
    /// program's `PATH` (to find a script's interpreter).
    pub fn new(
        policy: &SandboxPolicy,
        program: &Path,
        args: &[String],
        cwd: &Path,
        path_var: Option<&str>,
    ) -> Result<Prepared, SandboxError> {
        let caps = Capabilities::get();
        let missing = caps.missing(policy);
        if policy.mode == Mode::Required && !missing.is_empty() {
            return Err(SandboxError::Missing(missing));
        }
        let user = match (&policy.user, &policy.run_as, caps.root) {
            (_, Some(u), true) => {
                u.warn_unwritable(cwd);
                Some(u)
            }
            // Looked up when the policy was made; a name alone here means the lookup failed.
            (Some(name), None, true) => return Err(SandboxError::NoUser(name.clone())),
            _ => None,
        };
        let cgroup = if caps.cgroups.list.is_empty() {
            None
        } else {
            Some(
                caps.cgroups
                    .create(&policy.limits)
                    .map_err(SandboxError::Cgroup)?,
            )
        };
        let mut steps = setup::Steps {
            join: cgroup
                .as_ref()
                .map(TaskCgroup::join_paths)
                .unwrap_or_default(),
            netns: net::joined(policy)
                .and_then(|p| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).ok()),
            file_size: policy.limits.file_size,
            user: user.map(|u| {
                let groups = u.groups.iter().map(|g| nix::unistd::Gid::from_raw(*g));
                (u.uid, u.gid, groups.collect())
            }),
            ..setup::Steps::default()
        };
        let track = match caps.tier() {
            Tier::Subreaper => reaper::Pending::new(),
            _ => None,
        };
        let (program, args, wrapped) = match &caps.bwrap {
            Some((bwrap, _)) => {
                // What bubblewrap binds from folders an agent may have written: no link on
                // the way now, and held by descriptor until the mount (see [`pin`]).
                // The setup step checks them when it opens them; without it, the host here.
                let reachable = agent_reachable(policy, cwd);
                if caps.bwrap_bind_fd && setup::helper().is_some() {
                    steps.pin = reachable;
                } else {
                    for p in &reachable {
                        pin::open_without_links(p).map_err(SandboxError::Link)?;
                    }
                }
                let root_task = caps.root && user.is_none();
                let mut all = bwrap::args(policy, cwd, root_task, user);
                // The program runs wherever it lies (`/tmp` included): shown read-only.
                let needs = program::needs(program, path_var);
                all.extend(program::binds(&needs, policy, cwd));
                let shown: Vec<PathBuf> = needs.iter().map(|s| s.path().to_path_buf()).collect();
                all.extend(bwrap::cover_host_sockets(policy, cwd, &shown, user));
                let inside = if root_task {
                    lock_mounts(&mut all)
                } else {
                    Vec::new()
                };
                all.push("--".into());
                all.extend(inside);
                all.extend(net::command_prefix(policy));
                all.push(program.display().to_string());
                all.extend(args.iter().cloned());
                (bwrap.clone(), all, true)
            }
            None => {
                if caps.landlock_abi.is_some() {
                    let mut write = vec![cwd.to_path_buf()];
                    write.extend(policy.write.iter().cloned());
                    steps.landlock = Some(write);
                }
                // Root in the host's own namespaces: no capability (see the step).
                steps.drop_caps = caps.root && user.is_none() && policy.mode != Mode::Off;
                (program.to_path_buf(), args.to_vec(), false)
            }
        };
        steps.scope_sockets = caps.scopes_sockets(policy);
        Ok(Prepared {
            program,
            args,
            cgroup,
            wrapped,
            track,
            steps,
        })
    }

    /// What the task's first process does to itself before the program runs (taken once).
    pub fn take_steps(&mut self) -> setup::Steps {
        std::mem::take(&mut self.steps)
    }
}

/// The sources of bubblewrap's binds that lie in folders an agent may write (the working
/// directory, the task's own attachments in it, the context's checkout), where they exist.
fn agent_reachable(policy: &SandboxPolicy, cwd: &Path) -> Vec<PathBuf> {
    let mut out = vec![cwd.to_path_buf()];
    out.extend(policy.reveal.iter().cloned());
    out.extend(policy.workspace.iter().map(|w| w.checkout.clone()));
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out.dedup();
    out
}

/// For a task that is root in its sandbox: keeps it from undoing the sandbox's mounts.
/// Adds to bubblewrap's arguments `all` what that needs, and returns what runs inside the
/// sandbox before the program: a step entering a user namespace of the task's own
/// ([`setup::Steps::own_userns`], which says why), shown at a path of the sandbox's `/run`:
/// [`enter`]'s small program when the host has it, else the setup mode. Without either,
/// the task runs without capabilities.
fn lock_mounts(all: &mut Vec<String>) -> Vec<String> {
    if let Some(enter) = enter::program() {
        let enter = enter.display().to_string();
        all.extend(["--ro-bind".into(), enter, enter::IN_SANDBOX.into()]);
        return vec![enter::IN_SANDBOX.to_string()];
    }
    // By its real path: bubblewrap would read `/proc/self/exe` (the helper when it is the
    // host's own executable) as its own.
    static REAL: OnceLock<Option<PathBuf>> = OnceLock::new();
    let real = REAL.get_or_init(|| {
        let real = std::fs::canonicalize(setup::helper()?).ok()?;
        (!real.to_string_lossy().ends_with(" (deleted)")).then_some(real)
    });
    match real {
        Some(helper) => {
            let helper = helper.display().to_string();
            all.extend(["--ro-bind".into(), helper, setup::IN_SANDBOX.into()]);
            let steps = setup::Steps {
                own_userns: true,
                ..setup::Steps::default()
            };
            let mut inside = vec![setup::IN_SANDBOX.to_string(), setup::MODE.to_string()];
            inside.extend(
                steps
                    .to_args()
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned()),
            );
            inside.push("--".into());
            inside
        }
        None => {
            all.extend(["--cap-drop".into(), "ALL".into()]);
            Vec::new()
        }
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        // Not handed to a Process (the spawn failed): the cgroup is still empty.
        if let Some(cg) = self.cgroup.take() {
            cg.remove();
        }
    }
}

/// The default memory limit of a task: the machine's memory (`MemTotal`) shared by
/// `running_tasks` tasks (0 counts as 1), so that as many as may run at once fit.
pub fn default_task_memory(running_tasks: usize) -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let share = running_tasks.max(1) as u64;
    // Whole MiB, so that it reads well in messages.
    Some(kib * 1024 / share / (1 << 20) * (1 << 20))
}

/// Logs once which pieces are in force for `policy`, and what is missing.
pub fn log_once(policy: &SandboxPolicy) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let caps = Capabilities::get();
        let pieces = caps.pieces(policy).join("; ");
        let missing = caps.missing(policy);
        if missing.is_empty() {
            tracing::info!(mode = policy.mode.as_str(), "sandbox: {pieces}");
        } else {
            tracing::warn!(mode = policy.mode.as_str(), missing = %missing.join("; "), "sandbox: {pieces}");
        }
    });
}
