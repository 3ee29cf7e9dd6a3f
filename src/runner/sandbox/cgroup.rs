//! A cgroup per task, through the plain cgroupfs files.
//!
//! Why not a crate: the maintained one (`cgroups-rs`) manages whole hierarchies, devices and
//! systemd slices; a task needs five files (`cgroup.procs` or v1's `tasks`, `cgroup.kill` or
//! `freezer.state`, `pids.max`, `memory.*`, `cpu.*`) and the join must happen in the task's
//! first process before its program runs ([`super::setup`]), where a fallback pre-exec hook
//! allows only raw system calls on prepared paths. Writing those files directly is shorter
//! than adapting the crate's model and keeps that hook allocation-free.
//!
//! Where: under the host's own cgroup in every hierarchy it can write (the unified cgroup2
//! hierarchy and the v1 `pids`, `memory`, `freezer` and `cpu` ones; not an empty unified one
//! beside the v1 `pids` and `freezer`, whose join costs each start a wait, see
//! [`v1_over_an_empty_unified`]), in a folder `agent-host-<host pid>` holding one
//! `task-<n>` folder per running process, and those of tasks that ended cleanly, kept for
//! the next tasks with the same limits ([`spare`]).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::TaskLimits;
use crate::runner::spawner::JobThread;

mod mountinfo;
mod spare;
use mountinfo::{mounts, own_path};
use spare::Spare;

/// What a hierarchy offers a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// cgroup v2 (unified): tracking, `cgroup.kill`; limits where its controllers are enabled.
    Unified,
    Pids,
    Memory,
    Freezer,
    Cpu,
}

impl Kind {
    fn v1_name(self) -> Option<&'static str> {
        match self {
            Kind::Unified => None,
            Kind::Pids => Some("pids"),
            Kind::Memory => Some("memory"),
            Kind::Freezer => Some("freezer"),
            Kind::Cpu => Some("cpu"),
        }
    }
}

/// The per-host folder in one hierarchy, created at start.
#[derive(Debug, Clone)]
pub struct Hierarchy {
    pub kind: Kind,
    /// `<mount>/<host's cgroup>/agent-host-<pid>`
    pub base: PathBuf,
    /// Unified only: the controllers its task folders get (`memory`, `pids`, `cpu`).
    pub controllers: Vec<String>,
    /// Mounted with `favordynmods`, under which a v2 join does not wait for the kernel (a v1
    /// join never does, [`join_file`]).
    pub favordynmods: bool,
}

impl Hierarchy {
    /// How a v2 hierarchy tracks a task, in words (for the log and doctor): with the wait
    /// of its join when it has one ([`v1_over_an_empty_unified`]) and how to take it off.
    pub fn v2_tracking(&self) -> &'static str {
        if self.favordynmods {
            "cgroup v2 (cgroup.kill)"
        } else {
            "cgroup v2 (cgroup.kill; each task's start waits for the kernel to let it join, up \
             to tens of ms: mount the hierarchy with favordynmods to take that off)"
        }
    }
}

/// The hierarchies this host may create task cgroups in.
#[derive(Debug, Clone, Default)]
pub struct Hierarchies {
    pub list: Vec<Hierarchy>,
    /// Folders of tasks that ended cleanly, for the next tasks.
    spare: Spare,
}

static NEXT_TASK: AtomicU64 = AtomicU64::new(1);

impl Hierarchies {
    /// Finds the mounted hierarchies, creates the host's folder in each one it may write,
    /// and clears what dead hosts left there.
    pub fn probe() -> Hierarchies {
        let (Ok(mountinfo), Ok(own)) = (
            std::fs::read_to_string("/proc/self/mountinfo"),
            std::fs::read_to_string("/proc/self/cgroup"),
        ) else {
            return Hierarchies::default();
        };
        let mut list = Vec::new();
        for m in mounts(&mountinfo) {
            let (kind, root) = (m.kind, m.root);
            let Some(own_path) = own_path(&own, kind) else {
                continue;
            };
            let rel = own_path
                .strip_prefix(root.as_str())
                .unwrap_or(&own_path)
                .trim_start_matches('/');
            let parent = m.point.join(rel);
            let base = parent.join(format!("agent-host-{}", std::process::id()));
            sweep_dead_hosts(&parent);
            if std::fs::create_dir(&base).is_err() && !base.is_dir() {
                continue;
            }
            let controllers = if kind == Kind::Unified {
                if !base.join("cgroup.kill").exists() {
                    let _ = std::fs::remove_dir(&base);
                    continue;
                }
                enable_controllers(&parent, &base)
            } else {
                Vec::new()
            };
            if list.iter().any(|h: &Hierarchy| h.kind == kind) {
                continue;
            }
            list.push(Hierarchy {
                kind,
                base,
                controllers,
                favordynmods: m.favordynmods,
            });
        }
        if let Some(unused) = v1_over_an_empty_unified(&mut list) {
            let _ = std::fs::remove_dir(&unused.base);
        }
        Hierarchies {
            list,
            spare: Spare::default(),
        }
    }

    /// At the host's end: removes the folders kept for later tasks ([`Spare`]) and the
    /// host's own folder in each hierarchy when nothing else is in it (folders of tasks still
    /// being removed in the background are swept by the next start).
    pub fn release(&self) {
        for cg in self.spare.drain() {
            cg.remove();
        }
        for h in &self.list {
            let _ = std::fs::remove_dir(&h.base);
        }
    }

    pub fn has(&self, kind: Kind) -> bool {
        self.list.iter().any(|h| h.kind == kind)
    }

    /// Whether `controller` (`memory`, `pids`, `cpu`) can limit a task, in v2 or v1.
    pub fn can_limit(&self, controller: &str) -> bool {
        self.list.iter().any(|h| match h.kind {
            Kind::Unified => h.controllers.iter().any(|c| c == controller),
            k => k.v1_name() == Some(controller),
        })
    }

    /// An empty cgroup for one task with `limits` written: a spare one that an earlier task
    /// with the same limits left clean ([`spare`]), else new folders.
    pub fn create(&self, limits: &TaskLimits) -> io::Result<TaskCgroup> {
        // Without a limit to apply, a v1 memory/cpu cgroup adds nothing.
        let wanted = |h: &&Hierarchy| match h.kind {
            Kind::Memory => limits.memory.is_some(),
            Kind::Cpu => limits.cpu_weight.is_some(),
            Kind::Pids | Kind::Unified | Kind::Freezer => true,
        };
        let asked = (limits.memory, limits.pids, limits.cpu_weight);
        // The kept sets are of these hierarchies (the list goes with them), so the same
        // limits mean folders in the same ones.
        if let Some(mut cg) = self.spare.take(|cg| cg.asked == asked) {
            cg.spare = Some(self.spare.clone());
            return Ok(cg);
        }
        let n = NEXT_TASK.fetch_add(1, Ordering::Relaxed);
        let mut cg = TaskCgroup {
            dirs: Vec::new(),
            join: Vec::new(),
            memory_limit: None,
            pids_limit: None,
            asked,
            spare: Some(self.spare.clone()),
            seen: Counts::default(),
        };
        for h in self.list.iter().filter(wanted) {
            let dir = h.base.join(format!("task-{n}"));
            std::fs::create_dir(&dir)?;
            cg.join.push(
                CString::new(dir.join(join_file(h.kind)).as_os_str().as_bytes())
                    .map_err(io::Error::other)?,
            );
            cg.dirs.push((h.kind, dir.clone()));
            let has = |c: &str| h.kind == Kind::Unified && h.controllers.iter().any(|x| x == c);
            if let Some(max) = limits.pids {
                if h.kind == Kind::Pids || has("pids") {
                    std::fs::write(dir.join("pids.max"), max.to_string())?;
                    cg.pids_limit = Some(max);
                }
            }
            if let Some(bytes) = limits.memory {
                if h.kind == Kind::Memory {
                    std::fs::write(dir.join("memory.limit_in_bytes"), bytes.to_string())?;
                    // With swap accounting, swap counts too (else the limit only moves pages to swap).
                    let _ =
                        std::fs::write(dir.join("memory.memsw.limit_in_bytes"), bytes.to_string());
                    cg.memory_limit = Some(bytes);
                } else if has("memory") {
                    std::fs::write(dir.join("memory.max"), bytes.to_string())?;
                    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
                    cg.memory_limit = Some(bytes);
                }
            }
            if let Some(weight) = limits.cpu_weight {
                if h.kind == Kind::Cpu {
                    // cpu.shares: 1024 is the default, as weight 100 is in v2.
                    let shares = (weight * 1024 / 100).max(2);
                    std::fs::write(dir.join("cpu.shares"), shares.to_string())?;
                } else if has("cpu") {
                    std::fs::write(dir.join("cpu.weight"), weight.clamp(1, 10_000).to_string())?;
                }
            }
            keep_limits_from_the_task(&dir)?;
        }
        Ok(cg)
    }
}

/// On a machine that mounts both versions (the v1 controllers and an empty unified
/// hierarchy beside them), takes the unified one off `list` when it limits nothing and the
/// v1 `pids` and `freezer` hierarchies track and kill a task's processes; returns it.
///
/// Why: a process that joins a cgroup v2 folder writes `cgroup.procs`, for which the kernel
/// takes a lock shared by every fork of the machine for writing, and that waits for an RCU
/// grace period unless the hierarchy is mounted with `favordynmods`: 7–39 ms measured per
/// join when joins came 50 ms apart (about 0.1 ms back to back, a recent writer having left
/// the lock in its slow mode). A v1 folder is joined through `tasks` ([`join_file`]), which
/// moves the calling thread alone and takes no such lock. On a v2-only machine there is no
/// such choice; `favordynmods` takes the wait away there (see docs/security.md).
fn v1_over_an_empty_unified(list: &mut Vec<Hierarchy>) -> Option<Hierarchy> {
    let has = |list: &[Hierarchy], kind: Kind| list.iter().any(|h| h.kind == kind);
    if !(has(list, Kind::Pids) && has(list, Kind::Freezer)) {
        return None;
    }
    let i = list
        .iter()
        .position(|h| h.kind == Kind::Unified && h.controllers.is_empty())?;
    Some(list.remove(i))
}

/// The file of a task's folder in a hierarchy of `kind` that its first process writes `0`
/// to, to move itself in ([`TaskCgroup::join_self`]).
///
/// v1: `tasks`, which moves the writing thread alone, so the kernel takes only that thread's
/// locks, where `cgroup.procs` takes the machine-wide lock described at
/// [`v1_over_an_empty_unified`] and waits for a grace period. The thread is the whole
/// process: the join runs in the task's first process before anything in it started a
/// thread (the setup executable's first step, or a pre-exec hook in a forked child, which
/// has one thread). v2 has only `cgroup.procs` for this (its `cgroup.threads` moves a thread
/// only within a threaded subtree).
fn join_file(kind: Kind) -> &'static str {
    match kind {
        Kind::Unified => "cgroup.procs",
        Kind::Pids | Kind::Memory | Kind::Freezer | Kind::Cpu => "tasks",
    }
}

/// The files of a task's cgroup that hold its limits.
const LIMIT_FILES: &[&str] = &[
    "pids.max",
    "memory.limit_in_bytes",
    "memory.memsw.limit_in_bytes",
    "memory.soft_limit_in_bytes",
    "memory.max",
    "memory.high",
    "memory.swap.max",
    "cpu.shares",
    "cpu.weight",
    "cpu.max",
    "cpu.cfs_quota_us",
];

/// The owner given to a task's limit files: the highest valid user and group id, which no
/// user has and no task's user namespace maps.
const NOBODYS: u32 = u32::MAX - 1;

/// Gives the limit files of a task's cgroup folder `dir` to an id the task is not.
///
/// Why: a root host's task is the host's uid 0 (in user namespaces of its own), holding every
/// capability in its own namespace. There it may make a cgroup namespace and mount a v1
/// hierarchy (or a v2 one without `nsdelegate`) whose root is its own cgroup, and the limit
/// files, owned by uid 0 with mode 0644, would let it lift its own limits (seen: `pids.max`
/// written to `max`). A capability in a user namespace counts only on files whose owner that
/// namespace maps: owned by an id no task maps, the files are read-only to every task by
/// their modes, while the host (root of the first namespace) still writes them.
fn keep_limits_from_the_task(dir: &Path) -> io::Result<()> {
    for name in LIMIT_FILES {
        let file = dir.join(name);
        match std::os::unix::fs::chown(&file, Some(NOBODYS), Some(NOBODYS)) {
            // A host that is not root cannot give files away; its tasks are not root either.
            // In a user namespace that maps no `nobody` (`unshare -r`: only root is mapped)
            // the kernel answers EINVAL: the files stay root's, whom the task is not either
            // (before, every task of such a host failed to start).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::EINVAL)) => return Ok(()),
            other => other?,
        }
    }
    Ok(())
}

/// One task's cgroups (one folder per hierarchy).
#[derive(Debug)]
pub struct TaskCgroup {
    dirs: Vec<(Kind, PathBuf)>,
    /// The file of each folder that moves the first process in ([`join_file`]), ready for
    /// [`TaskCgroup::join_self`].
    join: Vec<CString>,
    memory_limit: Option<u64>,
    pids_limit: Option<u64>,
    /// The limits it was created for (memory, pids, CPU weight): a spare one serves only a
    /// task asking for the same ([`spare`]).
    asked: (Option<u64>, Option<u64>, Option<u64>),
    /// Where its folders are kept when it ends cleanly ([`TaskCgroup::finish`]).
    spare: Option<Spare>,
    /// The kernel's limit counters when this task got the folders (not zero when an earlier
    /// task used them): only what counted since is this task's.
    seen: Counts,
}

/// The kernel's counts of a task's limits being hit (cumulative per folder).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    /// Processes killed at the memory limit.
    oom_kills: u64,
    /// Forks refused at the process limit.
    forks_refused: u64,
}

/// How long a v1 freeze may take before the kill goes ahead anyway.
const FREEZE_WAIT: Duration = Duration::from_millis(500);

impl TaskCgroup {
    /// The folder `dir` of one hierarchy, as a task's cgroup (no limits known).
    fn at(kind: Kind, dir: PathBuf) -> TaskCgroup {
        TaskCgroup {
            dirs: vec![(kind, dir)],
            join: Vec::new(),
            memory_limit: None,
            pids_limit: None,
            asked: (None, None, None),
            spare: None,
            seen: Counts::default(),
        }
    }

    /// Runs in the task's first process before its program, while it has one thread: moves it
    /// into every folder of the task ([`join_file`]). Only raw system calls on the prepared
    /// paths (async-signal-safe, no allocation: it may run between fork and exec).
    pub fn join_self(paths: &[CString]) -> io::Result<()> {
        for p in paths {
            // SAFETY: `p` is a valid NUL-terminated path and open is async-signal-safe.
            let fd =
                unsafe { nix::libc::open(p.as_ptr(), nix::libc::O_WRONLY | nix::libc::O_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is the descriptor just opened; the buffer is a static one-byte
            // string, and write is async-signal-safe.
            let n = unsafe { nix::libc::write(fd, b"0".as_ptr().cast(), 1) };
            let err = io::Error::last_os_error();
            // SAFETY: `fd` is open and owned here; close is async-signal-safe.
            unsafe { nix::libc::close(fd) };
            if n != 1 {
                return Err(err);
            }
        }
        Ok(())
    }

    /// The paths for [`TaskCgroup::join_self`] ([`join_file`] of each folder).
    pub fn join_paths(&self) -> Vec<CString> {
        self.join.clone()
    }

    /// The folder used to list the task's processes.
    fn tracking(&self) -> Option<&Path> {
        [
            Kind::Unified,
            Kind::Pids,
            Kind::Freezer,
            Kind::Memory,
            Kind::Cpu,
        ]
        .iter()
        .find_map(|k| self.dir(*k))
    }

    fn dir(&self, kind: Kind) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, d)| d.as_path())
    }

    /// Every process of the task (the kernel's list, whatever they did to their group).
    pub fn pids(&self) -> Vec<i32> {
        let Some(dir) = self.tracking() else {
            return Vec::new();
        };
        std::fs::read_to_string(dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// True while any process is in the task's cgroup.
    pub fn alive(&self) -> bool {
        !self.pids().is_empty()
    }

    /// Sends `signal` to every process of the task but `except` (a sandbox wrapper that
    /// would die at once and take the rest with it before they saw the signal).
    pub fn signal(&self, signal: Signal, except: Option<i32>) {
        for pid in self.pids() {
            if Some(pid) != except {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
    }

    /// Kills every process of the task: `cgroup.kill` (v2), else freeze, SIGKILL each, thaw
    /// (v1: nothing can fork in between), else SIGKILL each.
    pub fn kill_all(&self) {
        if let Some(dir) = self.dir(Kind::Unified) {
            if std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
                return;
            }
        }
        if let Some(dir) = self.dir(Kind::Freezer) {
            let state = dir.join("freezer.state");
            if std::fs::write(&state, "FROZEN").is_ok() {
                let until = Instant::now() + FREEZE_WAIT;
                while Instant::now() < until
                    && std::fs::read_to_string(&state).is_ok_and(|s| s.trim() != "FROZEN")
                {
                    std::thread::sleep(Duration::from_millis(2));
                }
                self.signal(Signal::SIGKILL, None);
                let _ = std::fs::write(&state, "THAWED");
                return;
            }
        }
        self.signal(Signal::SIGKILL, None);
    }

    /// The limit the task ran into, in words, if the kernel counted one.
    pub fn limit_hit(&self) -> Option<String> {
        self.describe(self.counts())
    }

    /// The limit that `now` (against what was counted before the task) says the task ran
    /// into, in words.
    fn describe(&self, now: Counts) -> Option<String> {
        if now.oom_kills > self.seen.oom_kills {
            let limit = self.memory_limit.map(human_bytes).unwrap_or_default();
            return Some(format!("its memory limit ({limit}, task_memory)"));
        }
        if now.forks_refused > self.seen.forks_refused {
            let limit = self.pids_limit.map(|n| n.to_string()).unwrap_or_default();
            return Some(format!("its process limit ({limit} processes, task_pids)"));
        }
        None
    }

    /// The kernel's limit counters of the task's folders. Only those of a limit that was set
    /// are read (each read is an open, a read and a close, at every task's end).
    fn counts(&self) -> Counts {
        let count = |file: PathBuf, key: &str| -> u64 {
            std::fs::read_to_string(file)
                .ok()
                .and_then(|s| {
                    s.lines().find_map(|l| {
                        let (k, v) = l.split_once(' ')?;
                        (k == key).then(|| v.trim().parse().ok()).flatten()
                    })
                })
                .unwrap_or(0)
        };
        let mut c = Counts::default();
        for (kind, dir) in &self.dirs {
            if self.memory_limit.is_some() {
                c.oom_kills += match kind {
                    Kind::Memory => count(dir.join("memory.oom_control"), "oom_kill"),
                    Kind::Unified => count(dir.join("memory.events"), "oom_kill"),
                    _ => 0,
                };
            }
            if self.pids_limit.is_some() && matches!(kind, Kind::Pids | Kind::Unified) {
                c.forks_refused += count(dir.join("pids.events"), "max");
            }
        }
        c
    }

    /// The task's processes are all gone: the limit it ran into (see [`Self::limit_hit`]),
    /// and its folders go. `clean`: it ended by itself, nothing was frozen or killed, so the
    /// folders are as a new task would get them (limits written, thawed, empty) and are kept
    /// for the next task with the same limits ([`Spare`]); otherwise, or when enough are
    /// kept, they are removed in the background.
    pub fn finish(mut self, clean: bool) -> Option<String> {
        let now = self.counts();
        let hit = self.describe(now);
        // Taken out: a kept set is on the list without its handle to it (no reference
        // cycle); `create` gives it back.
        match self.spare.take() {
            Some(spare) if clean => {
                self.seen = now;
                if let Some(cg) = spare.keep(self) {
                    remove_in_background(cg);
                }
            }
            _ => remove_in_background(self),
        }
        hit
    }

    /// Removes the folders (they must be empty; a process that is still exiting keeps one a
    /// moment longer, so this retries briefly).
    pub fn remove(&self) {
        for (_, dir) in &self.dirs {
            let until = Instant::now() + Duration::from_secs(2);
            while std::fs::remove_dir(dir).is_err() && dir.exists() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Removes a finished task's cgroup folders (see [`TaskCgroup::remove`]) on one long-lived
/// thread, at the spawner's lower priority, in the order the tasks ended; the caller does
/// not wait. Removing a cgroup costs the kernel 0.1 ms or more per hierarchy, and each was a
/// blocking task of its own: a thousand tasks ending together grew tokio's blocking pool to
/// dozens of threads (each with its stack and malloc arena) removing folders side by side,
/// while the tasks still running waited for the CPU. Folders still queued when the host exits
/// are swept by the next start, as those of a host that died are.
pub fn remove_in_background(cg: TaskCgroup) {
    static REMOVER: JobThread = JobThread::new("agent-host-cgroup-rm");
    if let Err(job) = REMOVER.run(Box::new(move || cg.remove())) {
        std::thread::spawn(job);
    }
}

/// `256 MiB`-style text for a byte count.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}

/// Enables `memory`, `pids` and `cpu` for the task folders under `base` where the parent
/// allows it (v2 lets a folder hand out only what its parent handed to it). Returns what is on.
fn enable_controllers(parent: &Path, base: &Path) -> Vec<String> {
    let available = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let mut on = Vec::new();
    for c in ["memory", "pids", "cpu"] {
        let offered = available.split_whitespace().any(|a| a == c)
            || (std::fs::write(parent.join("cgroup.subtree_control"), format!("+{c}")).is_ok()
                && std::fs::read_to_string(base.join("cgroup.controllers"))
                    .is_ok_and(|s| s.split_whitespace().any(|a| a == c)));
        if offered && std::fs::write(base.join("cgroup.subtree_control"), format!("+{c}")).is_ok() {
            on.push(c.to_string());
        }
    }
    on
}

/// Kills what hosts that died without cleaning up left in `parent/agent-host-<pid>/task-*`
/// and removes those folders.
fn sweep_dead_hosts(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("agent-host-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let host = e.path();
        if let Ok(tasks) = std::fs::read_dir(&host) {
            for t in tasks.flatten().filter(|t| t.path().is_dir()) {
                let cg = TaskCgroup::at(Kind::Pids, t.path());
                if cg.alive() {
                    tracing::warn!(cgroup = %t.path().display(), "killing what a stopped agent-host left running");
                    let _ = std::fs::write(t.path().join("cgroup.kill"), "1");
                    cg.signal(Signal::SIGKILL, None);
                }
                cg.remove();
            }
        }
        let _ = std::fs::remove_dir(&host);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_handed_to_the_background_remover_are_removed() {
        // Plain folders stand for a task's empty cgroup folders (rmdir is the same call).
        let root = tempfile::tempdir().expect("temp dir");
        let folders: Vec<PathBuf> = (0..20)
            .map(|i| root.path().join(format!("task-{i}")))
            .collect();
        for f in &folders {
            std::fs::create_dir(f).expect("mkdir");
            let cg = TaskCgroup::at(Kind::Pids, f.clone());
            remove_in_background(cg);
        }
        let until = Instant::now() + Duration::from_secs(10);
        while folders.iter().any(|f| f.exists()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        let left: Vec<_> = folders.iter().filter(|f| f.exists()).collect();
        assert!(left.is_empty(), "not removed: {left:?}");
    }

    fn hierarchy(kind: Kind, controllers: &[&str]) -> Hierarchy {
        Hierarchy {
            kind,
            base: PathBuf::from(format!("/sys/fs/cgroup/{kind:?}/agent-host-1")),
            controllers: controllers.iter().map(|c| c.to_string()).collect(),
            favordynmods: false,
        }
    }

    #[test]
    fn an_empty_unified_hierarchy_beside_v1_pids_and_freezer_is_left_unused() {
        let kinds = |l: &[Hierarchy]| l.iter().map(|h| h.kind).collect::<Vec<_>>();
        // Both versions mounted, the controllers all on v1 (as on the project's machines).
        let mut hybrid = vec![
            hierarchy(Kind::Unified, &[]),
            hierarchy(Kind::Pids, &[]),
            hierarchy(Kind::Memory, &[]),
            hierarchy(Kind::Freezer, &[]),
        ];
        let dropped = v1_over_an_empty_unified(&mut hybrid).map(|h| h.kind);
        assert_eq!(dropped, Some(Kind::Unified));
        assert_eq!(kinds(&hybrid), [Kind::Pids, Kind::Memory, Kind::Freezer]);
        // A unified hierarchy that limits something stays, and so does one that is needed
        // to kill (no v1 freezer).
        for mut list in [
            vec![
                hierarchy(Kind::Unified, &["memory"]),
                hierarchy(Kind::Pids, &[]),
                hierarchy(Kind::Freezer, &[]),
            ],
            vec![
                hierarchy(Kind::Unified, &[]),
                hierarchy(Kind::Pids, &[]),
                hierarchy(Kind::Memory, &[]),
            ],
            vec![hierarchy(Kind::Unified, &["memory", "pids"])],
        ] {
            let before = kinds(&list);
            assert!(v1_over_an_empty_unified(&mut list).is_none(), "{before:?}");
            assert_eq!(kinds(&list), before);
        }
    }

    #[test]
    fn a_v2_hierarchy_without_favordynmods_says_how_to_take_its_wait_off() {
        let mut h = hierarchy(Kind::Unified, &[]);
        assert!(h
            .v2_tracking()
            .contains("mount the hierarchy with favordynmods"));
        h.favordynmods = true;
        assert_eq!(h.v2_tracking(), "cgroup v2 (cgroup.kill)");
    }

    #[test]
    fn a_task_joins_v1_folders_by_its_thread_and_v2_ones_by_its_process() {
        assert_eq!(join_file(Kind::Unified), "cgroup.procs");
        for kind in [Kind::Pids, Kind::Memory, Kind::Freezer, Kind::Cpu] {
            assert_eq!(join_file(kind), "tasks", "{kind:?}");
        }
    }

    #[test]
    fn byte_counts_in_words() {
        assert_eq!(human_bytes(256 << 20), "256 MiB");
        assert_eq!(human_bytes(4 << 30), "4 GiB");
        assert_eq!(human_bytes(1000), "1000 bytes");
    }
}
