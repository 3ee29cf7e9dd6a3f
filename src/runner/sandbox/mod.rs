//! Containment of a task: what the engine asks for ([`SandboxPolicy`]) and what this machine
//! offers ([`Capabilities`], probed once), turned into a wrapped command at spawn ([`Prepared`]).
//!
//! The pieces, strongest first, each used when the machine has it:
//! - **tracking** (nothing a task starts outlives it): a cgroup per task (v2 with
//!   `cgroup.kill`, else the v1 `pids`/`freezer` hierarchies; [`cgroup`]), else the PID
//!   namespace of bubblewrap (its init dies with the program and the kernel kills the rest),
//!   else the process group and a sweep of the leader's descendants;
//! - **isolation**: bubblewrap ([`bwrap`]): own PID namespace and `/proc`, the system
//!   read-only, the working directory and the adapter's state folders writable, a private
//!   `/tmp`, the host's secrets hidden, optionally no network; where bubblewrap is missing,
//!   Landlock ([`landlock`]) keeps the same write rules (but cannot hide files or processes);
//! - **limits**: memory, processes, CPU weight (cgroups), largest file (`RLIMIT_FSIZE`);
//! - **user**: a host running as root runs the task as another user.

pub mod bwrap;
pub mod cgroup;
mod landlock;

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;

pub use cgroup::{human_bytes, TaskCgroup};

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

/// The task's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The host's network (CLIs must reach their model API).
    #[default]
    Open,
    /// Its own network namespace with loopback only.
    None,
}

impl Network {
    pub fn parse(s: &str) -> Option<Network> {
        match s.trim().to_ascii_lowercase().as_str() {
            "open" => Some(Network::Open),
            "none" => Some(Network::None),
            _ => None,
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
    /// Run as this user (root hosts only).
    pub user: Option<String>,
    pub limits: TaskLimits,
}

/// What this machine offers, probed once per host.
#[derive(Debug)]
pub struct Capabilities {
    /// A working bubblewrap and its version.
    pub bwrap: Option<(PathBuf, String)>,
    /// Why bubblewrap cannot be used (not installed, or it failed a trial run).
    pub bwrap_missing: String,
    /// The Landlock ABI version the kernel supports.
    pub landlock_abi: Option<i32>,
    pub cgroups: cgroup::Hierarchies,
    pub root: bool,
}

static CAPS: OnceLock<Capabilities> = OnceLock::new();

impl Capabilities {
    /// The machine's capabilities (probed on first use: a trial run of bubblewrap, the
    /// Landlock ABI, the writable cgroup hierarchies).
    pub fn get() -> &'static Capabilities {
        CAPS.get_or_init(Capabilities::probe)
    }

    fn probe() -> Capabilities {
        let (bwrap, bwrap_missing) = bwrap::probe();
        Capabilities {
            bwrap,
            bwrap_missing,
            landlock_abi: landlock::abi(),
            cgroups: cgroup::Hierarchies::probe(),
            root: nix::unistd::geteuid().is_root(),
        }
    }

    /// How the processes of a task are tracked, in words.
    pub fn tracking(&self) -> &'static str {
        use cgroup::Kind;
        if self.cgroups.has(Kind::Unified) {
            "cgroup v2 (cgroup.kill)"
        } else if self.cgroups.has(Kind::Freezer) {
            "cgroup v1 (freezer)"
        } else if self.cgroups.has(Kind::Pids) {
            "cgroup v1 (pids)"
        } else if self.bwrap.is_some() {
            "PID namespace (the program is its init)"
        } else {
            "process group and descendants"
        }
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
        if policy.network == Network::None && self.bwrap.is_some() {
            out.push("network: none (loopback only)".into());
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
        if let Some(u) = policy.user.as_ref().filter(|_| self.root) {
            out.push(format!("user {u}"));
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
            out.push(format!(
                "bubblewrap ({}; install the `bubblewrap` package): no PID namespace, no private /tmp, host files not hidden",
                self.bwrap_missing
            ));
            if self.landlock_abi.is_none() {
                out.push(
                    "Landlock (kernel 5.13+ with landlock enabled): writes are not restricted"
                        .into(),
                );
            }
            if policy.network == Network::None {
                out.push(
                    "a network namespace for sandbox_network = \"none\" (needs bubblewrap)".into(),
                );
            }
        }
        if !self.cgroups.has(cgroup::Kind::Unified)
            && !self.cgroups.has(cgroup::Kind::Freezer)
            && !self.cgroups.has(cgroup::Kind::Pids)
        {
            out.push("a writable cgroup hierarchy (cgroup v2, or v1 pids/freezer): processes are tracked by group and namespace only".into());
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

/// Everything decided before fork for one spawn.
#[derive(Debug)]
pub struct Prepared {
    /// The program to exec and its arguments (bubblewrap's, with the task's after `--`).
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cgroup: Option<TaskCgroup>,
    /// The program runs under bubblewrap, whose outer process is the leader.
    pub wrapped: bool,
    hook: Hook,
}

/// What the pre-exec hook does, prepared so that it only makes system calls.
#[derive(Debug, Default)]
struct Hook {
    join: Vec<CString>,
    file_size: Option<u64>,
    user: Option<(u32, u32)>,
    landlock: Option<landlock::Prepared>,
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
    Landlock(String),
}

impl Prepared {
    /// Decides how `program args` runs under `policy` on this machine.
    pub fn new(
        policy: &SandboxPolicy,
        program: &Path,
        args: &[String],
        cwd: &Path,
    ) -> Result<Prepared, SandboxError> {
        let caps = Capabilities::get();
        let missing = caps.missing(policy);
        if policy.mode == Mode::Required && !missing.is_empty() {
            return Err(SandboxError::Missing(missing));
        }
        let user = match (&policy.user, caps.root) {
            (Some(name), true) => {
                let u = nix::unistd::User::from_name(name)
                    .ok()
                    .flatten()
                    .ok_or_else(|| SandboxError::NoUser(name.clone()))?;
                Some((u.uid.as_raw(), u.gid.as_raw()))
            }
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
        let mut hook = Hook {
            join: cgroup
                .as_ref()
                .map(TaskCgroup::join_paths)
                .unwrap_or_default(),
            file_size: policy.limits.file_size,
            user,
            landlock: None,
        };
        let (program, args, wrapped) = match &caps.bwrap {
            Some((bwrap, _)) => {
                let mut all = bwrap::args(policy, cwd, caps.root && user.is_none());
                all.push("--".into());
                all.push(program.display().to_string());
                all.extend(args.iter().cloned());
                (bwrap.clone(), all, true)
            }
            None => {
                if caps.landlock_abi.is_some() {
                    let mut write = vec![cwd.to_path_buf()];
                    write.extend(policy.write.iter().cloned());
                    hook.landlock =
                        Some(landlock::Prepared::new(&write).map_err(SandboxError::Landlock)?);
                }
                (program.to_path_buf(), args.to_vec(), false)
            }
        };
        Ok(Prepared {
            program,
            args,
            cgroup,
            wrapped,
            hook,
        })
    }

    /// The pre-exec hook: join the cgroups, set the file size limit, restrict writes
    /// (Landlock), become the sandbox user. Runs in the forked child: system calls only.
    pub fn pre_exec(&mut self) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
        let mut hook = std::mem::take(&mut self.hook);
        move || {
            TaskCgroup::join_self(&hook.join)?;
            if let Some(max) = hook.file_size {
                nix::sys::resource::setrlimit(
                    nix::sys::resource::Resource::RLIMIT_FSIZE,
                    max,
                    max,
                )?;
            }
            if let Some((uid, gid)) = hook.user {
                nix::unistd::setgroups(&[nix::unistd::Gid::from_raw(gid)])?;
                nix::unistd::setgid(nix::unistd::Gid::from_raw(gid))?;
                nix::unistd::setuid(nix::unistd::Uid::from_raw(uid))?;
            }
            if let Some(ll) = hook.landlock.as_mut() {
                ll.restrict_self()?;
            }
            Ok(())
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

/// The default memory limit of a task: half the machine's memory (`MemTotal`).
pub fn default_task_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    // Whole MiB, so that it reads well in messages.
    Some(kib * 1024 / 2 / (1 << 20) * (1 << 20))
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
