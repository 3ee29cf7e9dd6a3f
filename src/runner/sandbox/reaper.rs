//! The last tier of "nothing escapes a task", where the host may create no cgroup and has no
//! bubblewrap for a PID namespace: the host becomes a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`, through `nix`) and sweeps each task's processes itself.
//!
//! # Which processes are a task's
//!
//! Once the host is a subreaper, a process whose parent exits is re-parented to the host, not
//! to init: it stays in the host's process tree, but its parent no longer tells which task it
//! came from. A process is the task's when any of these holds:
//! 1. its environment carries the task's marker, `AGENT_HOST_TASK=<host pid>.<n>`, set on the
//!    task's first process and inherited by everything it starts; `/proc/PID/environ` shows
//!    it to a host running as root or as the same user. It survives `setsid`, `setpgid`,
//!    `timeout`, double forks and re-parenting, which is what daemons do;
//! 2. it descends (by parent pid) from the task's first process or from a process already
//!    found to be the task's;
//! 3. it was found to be the task's before: every process found is remembered by pid and
//!    start time, and one scan of `/proc` every 200 ms serves every running task, so a
//!    descendant that clears its environment (`env -i`) is still known once it lived through
//!    one scan, after its parent exits.
//!
//! Why not the environment alone (any process can drop it) nor the tree alone (re-parenting
//! cuts it): each covers the other's gap. Why not a per-task subreaper process between the
//! host and the program (like `tini -s`): SIGKILL of that process (the host's own fallback
//! when a task does not stop) would hand its orphans to init, out of reach.
//!
//! Limits, why this is the last tier: a process that clears its environment *and* leaves
//! the tree between two scans (its parent exits within 200 ms) is not attributed and outlives
//! its task (as a child of the host, which reaps it when it ends); a process that makes itself
//! non-dumpable hides its environment from a host that is not root (rules 2 and 3 remain).
//! Nothing here limits memory or processes: that needs cgroups.
//!
//! # Killing
//!
//! Stop, look again, then kill: every process of the task gets SIGSTOP, then the list is made
//! again (a child forked before the stop is still the child of a stopped parent) until nothing
//! new appears; then all get SIGKILL. A stopped process cannot fork, so nothing starts between
//! the last look and the kill.
//!
//! # Reaping
//!
//! Orphans the host adopts become its zombies when they die. tokio waits for the children it
//! started by pid (`waitpid(pid)`), never `waitpid(-1)`, so reaping other pids takes no exit
//! status from it, provided the host never reaps one of *those*: every program the runner
//! starts is recorded here ([`spawning`], [`leader_started`]) under a lock held across the
//! fork, and only zombie children of the host that are not recorded programs are reaped, each
//! by its own `waitpid(pid, WNOHANG)`, with the lock held exclusively. In this crate only the
//! runner starts processes, all through `Process::spawn` (the bubblewrap trial run at the
//! capability probe is over before any task starts).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// The environment variable that marks a task's processes.
pub const MARK_VAR: &str = "AGENT_HOST_TASK";
/// How often `/proc` is read while tasks of this tier run.
const SCAN_EVERY: Duration = Duration::from_millis(200);
/// Scans after the last task ended (its last zombies may still be re-parented to the host).
const LINGER_SCANS: u32 = 10;
/// Rounds of stop-and-look before the kill (each finds the children forked before the last stop).
const STOP_ROUNDS: usize = 64;

/// One process, from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcInfo {
    pub pid: u32,
    pub ppid: u32,
    pub state: char,
    /// start time, clock ticks after boot: with the pid, names one process for good
    pub start: u64,
}

impl ProcInfo {
    /// From `/proc/PID/stat` ("pid (comm) state ppid ... starttime ..."; `comm` may hold
    /// spaces and parentheses, so fields are counted after its last `)`).
    pub fn parse(stat: &str) -> Option<ProcInfo> {
        let pid = stat.split_ascii_whitespace().next()?.parse().ok()?;
        let rest = &stat[stat.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        Some(ProcInfo {
            pid,
            state: f.first()?.chars().next()?,
            ppid: f.get(1)?.parse().ok()?,
            start: f.get(19)?.parse().ok()?,
        })
    }

    fn key(&self) -> (u32, u64) {
        (self.pid, self.start)
    }

    fn dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Every process of the machine (that this host may see), from one pass over `/proc`.
fn processes() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|s| ProcInfo::parse(&s))
        .collect()
}

/// The task number in `environ` (NUL-separated `K=V`), if it carries this host's marker.
pub(crate) fn mark_in(environ: &[u8], host: u32) -> Option<u64> {
    let prefix = format!("{MARK_VAR}={host}.");
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .and_then(|n| std::str::from_utf8(n).ok()?.parse().ok())
}

/// What one task's sweep remembers.
#[derive(Debug)]
struct Task {
    /// The first process (pid, start time).
    leader: (u32, u64),
    /// Every process found to be the task's, by (pid, start time).
    members: HashSet<(u32, u64)>,
}

#[derive(Debug, Default)]
struct State {
    tasks: HashMap<u64, Task>,
    /// Whose marker each process carries (`None`: none of ours), read once per process.
    marks: HashMap<(u32, u64), Option<u64>>,
    /// Programs the runner started (pid -> start time): tokio reaps those, never this module.
    leaders: HashMap<u32, u64>,
    /// Scans left after the last task ended.
    linger: u32,
    /// How many recorded programs make [`leader_started`] forget those gone.
    prune_leaders_at: usize,
}

impl State {
    /// The processes of task `n` in `procs` (the first process included, zombies too), and
    /// remember them.
    fn members(&mut self, n: u64, procs: &[ProcInfo]) -> Vec<ProcInfo> {
        let host = std::process::id();
        let Some(task) = self.tasks.get(&n) else {
            return Vec::new();
        };
        let earliest = task.leader.1;
        let mut found: HashSet<u32> = HashSet::new();
        for p in procs {
            let k = p.key();
            if k == task.leader || task.members.contains(&k) {
                found.insert(p.pid);
                continue;
            }
            // Nothing started before the task's first process is the task's.
            if p.start < earliest || p.dead() {
                continue;
            }
            let mark = *self.marks.entry(k).or_insert_with(|| {
                std::fs::read(format!("/proc/{}/environ", p.pid))
                    .ok()
                    .and_then(|e| mark_in(&e, host))
            });
            if mark == Some(n) {
                found.insert(p.pid);
            }
        }
        // Descendants of what was found, to any depth.
        let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
        for p in procs {
            children.entry(p.ppid).or_default().push(p.pid);
        }
        let mut todo: Vec<u32> = found.iter().copied().collect();
        while let Some(pid) = todo.pop() {
            for c in children.get(&pid).into_iter().flatten() {
                if found.insert(*c) {
                    todo.push(*c);
                }
            }
        }
        let out: Vec<ProcInfo> = procs
            .iter()
            .filter(|p| found.contains(&p.pid))
            .copied()
            .collect();
        if let Some(task) = self.tasks.get_mut(&n) {
            task.members.extend(out.iter().map(ProcInfo::key));
        }
        out
    }

    /// Forgets processes that are gone. What is not in `procs` is looked up again: it may
    /// have been recorded after `procs` was read.
    fn prune(&mut self, procs: &[ProcInfo]) {
        let live: HashSet<(u32, u64)> = procs.iter().map(ProcInfo::key).collect();
        let here =
            |k: &(u32, u64)| live.contains(k) || crate::runner::start_ticks(k.0) == Some(k.1);
        self.marks.retain(|k, _| here(k));
        for t in self.tasks.values_mut() {
            t.members.retain(|k| here(k));
        }
        self.leaders.retain(|pid, start| here(&(*pid, *start)));
    }
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    let m = STATE.get_or_init(Default::default);
    // A panic while holding the lock leaves consistent-enough maps: keep using them.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held (shared) while the runner forks a program and records it; exclusively while reaping.
fn spawn_lock() -> &'static RwLock<()> {
    static LOCK: RwLock<()> = RwLock::new(());
    &LOCK
}

/// Wakes the scanner when a task starts.
fn wake() -> &'static Condvar {
    static CV: Condvar = Condvar::new();
    &CV
}

/// Taken by the runner around forking a program and [`leader_started`].
pub fn spawning() -> RwLockReadGuard<'static, ()> {
    spawn_lock().read().unwrap_or_else(|e| e.into_inner())
}

/// Records a program the runner started (tokio reaps it; this module must not); returns its
/// start time in clock ticks (0 if it could not be read), which tells it apart from a later
/// process with the same pid.
pub fn leader_started(pid: u32) -> u64 {
    let start = crate::runner::start_ticks(pid).unwrap_or(0);
    let mut st = state();
    st.leaders.insert(pid, start);
    // Programs dropped before they were reaped (tokio reaps those itself) are forgotten by
    // the scanner; without one (other tiers) here, once there are many.
    // (Amortized: the next time at twice what is left, so that many live programs do not
    // make every start look at all of them.)
    if st.leaders.len() > st.prune_leaders_at.max(1024) {
        st.leaders
            .retain(|pid, start| crate::runner::start_ticks(*pid) == Some(*start));
        st.prune_leaders_at = st.leaders.len() * 2;
    }
    start
}

/// The runner reaped program `pid`.
pub fn leader_reaped(pid: u32) {
    state().leaders.remove(&pid);
}

/// Makes the host a child subreaper and starts the scanner (once). Returns whether the host
/// is one.
pub fn enable() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
            tracing::warn!(error = %e, "cannot become a child subreaper: a task's orphans escape it");
            return false;
        }
        let started = std::thread::Builder::new()
            .name("agent-host-reaper".into())
            .spawn(scanner);
        if let Err(e) = started {
            tracing::warn!(error = %e, "cannot start the reaper thread");
        }
        tracing::info!("tracking: the host is a child subreaper and sweeps each task's descendants");
        true
    })
}

/// Remembers the processes of running tasks and reaps adopted zombies, while tasks run.
fn scanner() {
    loop {
        {
            let mut st = state();
            while st.tasks.is_empty() && st.linger == 0 {
                st = wake().wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.tasks.is_empty() {
                st.linger -= 1;
            }
        }
        let procs = processes();
        {
            let mut st = state();
            let ids: Vec<u64> = st.tasks.keys().copied().collect();
            for n in ids {
                st.members(n, &procs);
            }
            st.prune(&procs);
        }
        reap(&procs);
        std::thread::sleep(SCAN_EVERY);
    }
}

/// Reaps every zombie child of the host in `procs` that is not a program the runner started.
fn reap(procs: &[ProcInfo]) {
    let host = std::process::id();
    let _exclusive = spawn_lock().write().unwrap_or_else(|e| e.into_inner());
    let st = state();
    for p in procs {
        if p.ppid == host && p.dead() && !st.leaders.contains_key(&p.pid) {
            // ECHILD (already reaped) and "still running" both leave nothing to do.
            let _ = waitpid(Pid::from_raw(p.pid as i32), Some(WaitPidFlag::WNOHANG));
        }
    }
}

static NEXT: AtomicU64 = AtomicU64::new(1);

/// A task about to start under this tier: the marker its first process gets.
#[derive(Debug)]
pub struct Pending {
    n: u64,
}

impl Pending {
    /// Makes the host a subreaper (if not yet) and numbers the task; `None` if the host
    /// cannot be one.
    pub fn new() -> Option<Pending> {
        enable().then(|| Pending {
            n: NEXT.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// The marker's value (`<host pid>.<n>`).
    pub fn mark(&self) -> String {
        format!("{}.{}", std::process::id(), self.n)
    }

    /// The task's first process is `pid`: track it from now on.
    pub fn started(self, pid: u32) -> Tracker {
        let start = crate::runner::start_ticks(pid).unwrap_or(0);
        let mut st = state();
        st.tasks.insert(
            self.n,
            Task {
                leader: (pid, start),
                members: HashSet::new(),
            },
        );
        wake().notify_all();
        Tracker { n: self.n }
    }
}

/// The sweep of one running task; dropping it forgets the task.
#[derive(Debug)]
pub struct Tracker {
    n: u64,
}

impl Tracker {
    /// The task's live processes now (its first process included).
    fn live(&self) -> Vec<ProcInfo> {
        let procs = processes();
        let mut st = state();
        st.members(self.n, &procs)
            .into_iter()
            .filter(|p| !p.dead())
            .collect()
    }

    /// True while any process of the task is alive.
    pub fn alive(&self) -> bool {
        !self.live().is_empty()
    }

    /// Sends `signal` to every process of the task.
    pub fn signal(&self, signal: Signal) {
        for p in self.live() {
            let _ = kill(Pid::from_raw(p.pid as i32), signal);
        }
    }

    /// Stops every process of the task until no new one appears, then kills them all.
    pub fn kill_all(&self) {
        let mut stopped: HashSet<(u32, u64)> = HashSet::new();
        for _ in 0..STOP_ROUNDS {
            let new: Vec<ProcInfo> = self
                .live()
                .into_iter()
                .filter(|p| !stopped.contains(&p.key()))
                .collect();
            if new.is_empty() {
                break;
            }
            for p in new {
                let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGSTOP);
                stopped.insert(p.key());
            }
        }
        for (pid, _) in &stopped {
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        let mut st = state();
        st.tasks.remove(&self.n);
        // A few more scans reap the zombies the last kills leave.
        st.linger = LINGER_SCANS;
        wake().notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32, start: u64) -> ProcInfo {
        ProcInfo {
            pid,
            ppid,
            state: 'S',
            start,
        }
    }

    #[test]
    fn stat_lines_and_markers() {
        let line = "123 (a (weird) name) Z 77 123 123 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        let info = ProcInfo::parse(line).unwrap();
        assert_eq!(
            (info.pid, info.ppid, info.state, info.start),
            (123, 77, 'Z', 987654)
        );
        assert!(info.dead());
        let env = b"PATH=/bin\0AGENT_HOST_TASK=42.7\0HOME=/h\0";
        assert_eq!(mark_in(env, 42), Some(7));
        assert_eq!(mark_in(env, 43), None, "another host's marker");
        assert_eq!(mark_in(b"XAGENT_HOST_TASK=42.7\0", 42), None);
    }

    /// Membership from remembered processes and descent, without reading any real process
    /// (the pids are far above any this machine uses, so no environment is found).
    #[test]
    fn remembered_processes_and_their_descendants_belong_to_the_task() {
        let mut st = State::default();
        let big = 4_000_000_000;
        st.tasks.insert(
            1,
            Task {
                leader: (big, 100),
                members: HashSet::from([(big + 2, 150)]),
            },
        );
        let procs = [
            p(big, 1, 100),           // the first process
            p(big + 1, big, 110),     // its child
            p(big + 2, 1, 150),       // remembered, re-parented to init
            p(big + 3, big + 2, 160), // its child
            p(big + 4, 1, 170),       // unrelated
            p(big + 5, 1, 90),        // older than the task
        ];
        let mut m: Vec<u32> = st.members(1, &procs).iter().map(|p| p.pid).collect();
        m.sort_unstable();
        assert_eq!(m, [big, big + 1, big + 2, big + 3]);
        // Now remembered: still the task's after its parent is gone.
        let later = [p(big + 3, 1, 160)];
        assert_eq!(st.members(1, &later).len(), 1);
        st.prune(&later);
        assert_eq!(st.tasks[&1].members.len(), 1);
    }
}
