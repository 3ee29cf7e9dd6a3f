//! Child processes: the only place in the crate that spawns processes, opens ptys or sends signals.
//!
//! A [`Process`] is one coding-agent CLI run. The child always leads its own process group
//! (pid == pgid) so that cancel reaches everything it started (shells, dev servers, relaunched
//! node processes). Output arrives line by line through [`Process::next`]; see [`Output`].
//!
//! With a [`SandboxPolicy`] in the [`SpawnSpec`], the child also runs contained
//! ([`sandbox`]): in its own cgroup (so every process it starts is known to the kernel, even
//! after `setsid`), under bubblewrap or Landlock, with limits. [`Process::terminate`] and
//! [`Process::wait`] then end everything in the task's cgroup, not only its process group;
//! where the machine has no cgroups nor bubblewrap, everything the host's sweep attributes
//! to the task ([`sandbox::reaper`]).
//!
//! Programs start through `posix_spawn`, never a fork of the host (whose page tables grow
//! with the tasks it serves): what a contained or pty child must do to itself before its
//! program runs happens in a fresh exec of the host's binary ([`sandbox::setup`]).

mod lines;

/// On a pty, a line without its newline is delivered after this much quiet (a prompt).
pub const PARTIAL_LINE_AFTER: Duration = Duration::from_millis(300);
mod stale;

pub use stale::{kill_stale_group, process_exists, start_ticks};
mod group;
mod pty;
pub mod sandbox;
mod spawner;
mod start;
mod stdin;

pub use group::group_alive;
#[cfg(test)]
use group::parse_stat;
use group::signal_group_members;
use stdin::StdinRequest;

pub use sandbox::{SandboxPolicy, TaskLimits};

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::task::Poll;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncRead;
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use lines::LineReader;

/// Cleans one line as the runner does: lossy UTF-8, CR and ANSI escape sequences removed.
pub fn clean_line(line: &[u8]) -> String {
    lines::clean(line)
}

/// How often group membership is polled while waiting for a group to go away.
const POLL: Duration = Duration::from_millis(20);
/// After SIGKILL, how long to keep checking (and re-killing) before giving up on a group
/// (a process stuck in uninterruptible sleep cannot be killed at once).
const KILL_SETTLE: Duration = Duration::from_secs(5);

/// How the child's stdio is connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoMode {
    /// stdout and stderr are separate pipes; stdin per [`StdinMode`].
    Pipes,
    /// stdout and stderr are one raw, wide pseudo-terminal (500 x 50); stdin is the terminal too
    /// unless [`StdinMode::Null`]. The child leads a new session with the pty as controlling tty.
    Pty,
}

/// What the child reads on stdin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinMode {
    /// stdin is /dev/null (one-shot CLIs: `codex exec` waits for EOF forever otherwise)
    Null,
    /// write `initial` right after spawn; then close stdin unless `keep_open` (keep_open = a
    /// writer stays available for approvals answers).
    ///
    /// In [`IoMode::Pty`] stdin is the terminal, which cannot signal EOF in raw mode: with
    /// `keep_open: false` the initial bytes are written and no further writes are accepted.
    Write { initial: Vec<u8>, keep_open: bool },
}

/// Everything needed to start one child.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The COMPLETE environment of the child: the runner calls env_clear() and sets exactly these.
    pub env: Vec<(String, String)>,
    pub io: IoMode,
    pub stdin: StdinMode,
    /// longest stdout line kept (default used by callers: 16 MiB); longer lines become Output::TooLong
    pub max_line_bytes: usize,
    /// Containment of the child; `None`: none (its own process group only).
    pub sandbox: Option<SandboxPolicy>,
}

/// One piece of the child's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// one stdout line (for pty: the merged terminal output), without `\r` and ANSI escapes
    Line(String),
    /// a stdout line longer than max_line_bytes was discarded; `bytes` = its length
    TooLong { bytes: usize },
    /// one stderr line (pipes mode only), cleaned like stdout. An over-long stderr line is
    /// replaced by a short note saying how long it was.
    Stderr(String),
}

/// The child's output streams (stdout and stderr; a pty's one stream), read in place by the
/// one who asks for the next line: the turn, with no reader task in between.
#[derive(Default)]
struct Outputs {
    stdout: Option<LineReader<Box<dyn AsyncRead + Send + Sync + Unpin>>>,
    stderr: Option<LineReader<Box<dyn AsyncRead + Send + Sync + Unpin>>>,
    /// Which stream is asked first the next time: they take turns, so a busy one never
    /// keeps the other waiting.
    stderr_first: bool,
}

impl Outputs {
    /// The next line of either stream; `None` once both reached EOF.
    fn poll_next(&mut self, cx: &mut std::task::Context<'_>) -> Poll<Option<Output>> {
        let stderr_first = self.stderr_first;
        self.stderr_first = !stderr_first;
        let mut waiting = false;
        for take_stderr in [stderr_first, !stderr_first] {
            let slot = if take_stderr {
                &mut self.stderr
            } else {
                &mut self.stdout
            };
            let Some(reader) = slot.as_mut() else {
                continue;
            };
            match reader.poll_next(cx) {
                Poll::Ready(Some(out)) => return Poll::Ready(Some(out)),
                Poll::Ready(None) => *slot = None,
                Poll::Pending => waiting = true,
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(None)
        }
    }
}

/// How the leader exited: `code` for a normal exit, `signal` if it was killed by one.
/// Both are `None` only if its status could not be collected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

#[derive(thiserror::Error, Debug)]
pub enum RunnerError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot set up a pseudo-terminal: {0}")]
    Pty(#[source] io::Error),
    #[error("the child's stdin is closed")]
    StdinClosed,
    #[error("writing to the child's stdin failed: {0}")]
    Stdin(#[source] io::Error),
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
}

/// A running (or finished) child and its process group.
pub struct Process {
    pid: u32,
    child: Child,
    output: Outputs,
    /// `None` once stdin is closed (or was never open).
    stdin: Option<mpsc::Sender<StdinRequest>>,
    tasks: Vec<JoinHandle<()>>,
    /// The leader's exit, once reaped.
    exit: Option<ExitInfo>,
    /// The group has been checked empty after the leader was reaped.
    group_gone: bool,
    /// The task's cgroup (tracking, limits), when contained.
    cgroup: Option<sandbox::TaskCgroup>,
    /// The host's sweep of the task's processes, where there is no cgroup nor PID namespace.
    tracker: Option<sandbox::reaper::Tracker>,
    /// The leader is bubblewrap's outer process (it dies on SIGTERM and takes the sandbox
    /// with it, so a graceful SIGTERM goes to the others only).
    wrapped: bool,
    /// The limit the task ran into, read before its cgroup was removed.
    limit_hit: Option<String>,
    /// See [`Process::start_ticks`].
    start_ticks: u64,
    /// Whether anything of the task was killed (a v1 cgroup is frozen for that): its cgroup
    /// then does not serve another task.
    killed: bool,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.pid)
            .field("exit", &self.exit)
            .field("group_gone", &self.group_gone)
            .finish_non_exhaustive()
    }
}

impl Process {
    /// The child's pid, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the leader started, in clock ticks since boot (`/proc/PID/stat`; 0 if it could
    /// not be read): with the pid, what tells it apart from a later process given the same
    /// pid (see [`kill_stale_group`]).
    pub fn start_ticks(&self) -> u64 {
        self.start_ticks
    }

    fn pgid(&self) -> Pid {
        // pids fit in i32 on every supported platform (Linux: at most 2^22).
        Pid::from_raw(self.pid as i32)
    }

    /// Next piece of output; `None` once stdout AND stderr have reached EOF (which waits for
    /// every process holding them, e.g. a background grandchild). Cancel-safe.
    pub async fn next(&mut self) -> Option<Output> {
        std::future::poll_fn(|cx| self.output.poll_next(cx)).await
    }

    /// Like [`Process::next`], but also reports the leader's exit (once, as `Err`) when it
    /// comes before the end of the output: a program that exits while a background child of
    /// its still holds the pipes. Cancel-safe.
    pub async fn next_or_exit(&mut self) -> Result<Option<Output>, ExitInfo> {
        if self.exit.is_some() {
            return Ok(self.next().await);
        }
        let output = &mut self.output;
        tokio::select! {
            biased;
            out = std::future::poll_fn(|cx| output.poll_next(cx)) => Ok(out),
            status = self.child.wait() => {
                sandbox::reaper::leader_reaped(self.pid);
                let exit = exit_info(status, self.wrapped, self.pid);
                self.exit = Some(exit);
                Err(exit)
            }
        }
    }

    /// Write to the child's stdin (pipes) or to the pty master (pty).
    pub async fn write_stdin(&mut self, bytes: &[u8]) -> Result<(), RunnerError> {
        let sender = self.stdin.as_ref().ok_or(RunnerError::StdinClosed)?;
        let (done_tx, done_rx) = oneshot::channel();
        sender
            .send((bytes.to_vec(), done_tx))
            .await
            .map_err(|_| RunnerError::StdinClosed)?;
        match done_rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(RunnerError::Stdin(e)),
            Err(_) => Err(RunnerError::StdinClosed),
        }
    }

    /// Close stdin (pipes: the child sees EOF once pending writes are done). Idempotent.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Wait for the leader to exit and reap it; afterwards, if anything is left in the process
    /// group or the task's cgroup (a CLI's background shell or dev server, a daemon), SIGTERM
    /// it, wait up to `grace`, SIGKILL what is left. Returns the leader's exit.
    pub async fn wait(&mut self, grace: Duration) -> ExitInfo {
        let exit = self.reap().await;
        if self.group_gone {
            return exit;
        }
        if self.members_alive() {
            self.signal_group(Signal::SIGTERM);
            self.wait_members_gone(Instant::now() + grace).await;
            self.kill_rest().await;
        } else {
            // Nothing left (the usual end): no second look at the cgroup.
            self.all_gone(true);
        }
        exit
    }

    /// Cancel: SIGTERM to the whole group (and cgroup), wait up to `grace` for it to exit,
    /// then SIGKILL, reap the leader, and make sure no process of the task is left.
    /// Idempotent; works if the leader already exited.
    pub async fn terminate(&mut self, grace: Duration) -> ExitInfo {
        if let (Some(exit), true) = (self.exit, self.group_gone) {
            return exit;
        }
        if self.starting() {
            // Nothing there would act on SIGTERM: waiting out the grace only delays the stop.
            self.kill_everything();
            let exit = self.reap().await;
            self.kill_rest().await;
            return exit;
        }
        let deadline = Instant::now() + grace;
        self.signal_group(Signal::SIGTERM);
        if self.exit.is_none() {
            // A timeout here just means the leader ignored SIGTERM; SIGKILL follows.
            let _ = tokio::time::timeout_at(deadline, self.reap()).await;
        }
        // The leader may have gone while helpers are still shutting down: give them the rest
        // of the grace period too.
        self.wait_members_gone(deadline).await;
        self.kill_everything();
        let exit = self.reap().await;
        self.kill_rest().await;
        exit
    }

    /// True while the agent's program has not started yet under bubblewrap: the leader is
    /// still in the host's setup step, or every other process of the task is bubblewrap's
    /// own (its init in the task's PID namespace, the fork about to exec the program). None
    /// of them acts on SIGTERM: the setup step is not in the task's cgroup yet and a wrapped
    /// leader is spared the graceful signal, bubblewrap's init ignores signals it has no
    /// handler for, and the program that starts a moment later was not there to get it. A
    /// graceful stop then waits out its whole grace for nothing (issue 33: a cancel in the
    /// first 20 ms of a task took the 5 s grace); [`Process::terminate`] kills such a task
    /// at once. Without bubblewrap the leader is the setup step or the program itself, which
    /// both get the signal.
    pub fn starting(&self) -> bool {
        if self.exit.is_some() || !self.wrapped {
            return false;
        }
        let members = match &self.cgroup {
            Some(cg) => cg.pids(),
            None => group::members(self.pid),
        };
        members
            .into_iter()
            .filter(|p| *p != self.pid as i32)
            .all(group::is_bubblewrap)
    }

    /// The limit (memory, processes) the task ran into, in words (`its memory limit (256
    /// MiB, task_memory)`), once its processes are gone; `None` when it hit none or is not
    /// in a cgroup.
    pub fn limit_hit(&self) -> Option<String> {
        self.limit_hit
            .clone()
            .or_else(|| self.cgroup.as_ref().and_then(|c| c.limit_hit()))
    }

    /// True while any process of the task is alive: its cgroup, or without one its group.
    ///
    /// With a cgroup, the cgroup alone answers: every process the task started is in it (a
    /// process cannot move itself out), and one that exits leaves it at once, zombie or not.
    /// The group check would also scan all of `/proc` whenever the group still has a member
    /// (a sandbox wrapper's children being torn down): with a thousand tasks ending together
    /// that scan, repeated every poll, took over 40% of the host's CPU and delayed every
    /// other task's events by seconds.
    ///
    /// Swept by the host (no cgroup, no PID namespace): the group or anything the sweep
    /// attributes to the task.
    fn members_alive(&self) -> bool {
        match (&self.tracker, &self.cgroup) {
            (Some(t), _) => group_alive(self.pid) || t.alive(),
            (None, Some(c)) => c.alive(),
            (None, None) => group_alive(self.pid),
        }
    }

    async fn wait_members_gone(&self, deadline: Instant) {
        while self.members_alive() && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
    }

    /// Reap the leader (once) and remember its exit.
    async fn reap(&mut self) -> ExitInfo {
        if let Some(exit) = self.exit {
            return exit;
        }
        let status = self.child.wait().await;
        sandbox::reaper::leader_reaped(self.pid);
        let exit = exit_info(status, self.wrapped, self.pid);
        self.exit = Some(exit);
        exit
    }

    /// With the leader reaped: SIGKILL whatever is left in the group and cgroup until both
    /// are empty; then remove the cgroup (its limit counters read first).
    async fn kill_rest(&mut self) {
        if self.group_gone {
            return;
        }
        let deadline = Instant::now() + KILL_SETTLE;
        while self.members_alive() {
            self.kill_everything();
            if Instant::now() >= deadline {
                tracing::warn!(
                    pgid = self.pid,
                    "the task still has processes after SIGKILL"
                );
                return;
            }
            tokio::time::sleep(POLL).await;
        }
        self.all_gone(!self.killed);
    }

    /// Every process of the task is gone: the cgroup's limit counters are read, and its
    /// folders go (`clean`: they exited, none was killed, so the folders may serve the
    /// next task; see [`sandbox::cgroup::TaskCgroup::finish`]).
    fn all_gone(&mut self, clean: bool) {
        self.group_gone = true;
        self.tracker = None;
        if let Some(cg) = self.cgroup.take() {
            self.limit_hit = cg.finish(clean);
        }
    }

    /// `signal` to the leader by its pid, while it is not reaped (tokio then no longer gives
    /// the pid, which may be reused). Right after the start the leader is still in its setup
    /// step ([`sandbox::setup`]): on a pty it does not lead its session (its group) yet, and
    /// it may not have joined the task's cgroup; it starts nothing before both are done.
    fn signal_leader(&self, signal: Signal) {
        if let Some(pid) = self.child.id() {
            // pids fit in i32 (see `pgid`).
            let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), signal);
        }
    }

    /// SIGTERM (or another catchable signal) to the task. Under bubblewrap the leader is its
    /// outer process, which would die at once and SIGKILL the sandbox before the agent saw
    /// the signal: then every other member gets it.
    fn signal_group(&self, signal: Signal) {
        if self.wrapped && signal != Signal::SIGKILL {
            match &self.cgroup {
                Some(cg) => cg.signal(signal, Some(self.pid as i32)),
                None => signal_group_members(self.pid, signal),
            }
            return;
        }
        match killpg(self.pgid(), signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::warn!(pgid = self.pid, ?signal, error = %e, "killpg failed"),
        }
        self.signal_leader(signal);
        if let Some(cg) = &self.cgroup {
            cg.signal(signal, None);
        }
        if let Some(t) = &self.tracker {
            t.signal(signal);
        }
    }

    /// SIGKILL to the group, the leader and everything in the task's cgroup.
    fn kill_everything(&mut self) {
        self.killed = true;
        match killpg(self.pgid(), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => tracing::warn!(pgid = self.pid, error = %e, "killpg failed"),
        }
        self.signal_leader(Signal::SIGKILL);
        if let Some(cg) = &self.cgroup {
            cg.kill_all();
        }
        if let Some(t) = &self.tracker {
            t.kill_all();
        }
    }
}

/// The leader's exit status in the host's terms.
fn exit_info(status: io::Result<std::process::ExitStatus>, wrapped: bool, pid: u32) -> ExitInfo {
    match status {
        // bubblewrap reports a program killed by signal N as exit code 128 + N.
        Ok(status) => match (status.code(), wrapped) {
            (Some(c), true) if (129..160).contains(&c) => ExitInfo {
                code: None,
                signal: Some(c - 128),
            },
            _ => ExitInfo {
                code: status.code(),
                signal: status.signal(),
            },
        },
        Err(e) => {
            tracing::warn!(pid, error = %e, "cannot collect the exit status");
            ExitInfo {
                code: None,
                signal: None,
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.group_gone {
            // Nothing may outlive a dropped Process. tokio reaps the dropped leader in the background.
            self.kill_everything();
        }
        if let Some(cg) = self.cgroup.take() {
            // The killed processes take a moment to leave the cgroup; remove it off this thread.
            std::thread::spawn(move || {
                for _ in 0..100 {
                    if !cg.alive() {
                        break;
                    }
                    cg.kill_all();
                    std::thread::sleep(POLL);
                }
                cg.remove();
            });
        }
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests;
