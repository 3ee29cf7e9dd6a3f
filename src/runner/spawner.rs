//! Spawning a sandboxed child from one long-lived thread (see [`spawn_cmd`]), at a lower CPU
//! priority than the host's (see [`SETUP_NICE`]); [`JobThread`], such a thread, also serves
//! the removal of finished tasks' cgroups.

use std::io;

use tokio::process::{Child, Command};

/// How many nice steps below the host the spawner thread runs, and with it what it starts
/// (a child inherits its parent thread's nice value): setting a sandbox up (the host's setup
/// mode, then bubblewrap's namespaces and mounts) takes about 5 ms of CPU per task, and at the
/// host's own priority, while many tasks start, that CPU was taken from the host threads that
/// carry the running tasks' events (100 tasks starting together: p99 event latency 16-33 ms
/// against 4-7 ms without the sandbox). The task's program keeps the lower priority: the
/// host's work for it (its events) comes first, an unprivileged process cannot raise its
/// priority back, and 5 steps is about a third of the CPU weight of the host's threads.
pub(crate) const SETUP_NICE: i32 = 5;

/// Lowers the calling thread's CPU priority by [`SETUP_NICE`] (Linux keeps a nice value per
/// thread). A failure leaves the priority as it was.
fn lower_own_priority() {
    // SAFETY: nice(2) takes a plain integer and touches no memory of ours; on Linux it changes
    // only the calling thread's nice value.
    let _ = unsafe { nix::libc::nice(SETUP_NICE) };
}

/// A job for a [`JobThread`].
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// One long-lived thread, started on first use at [`SETUP_NICE`] below the host, that runs
/// the jobs given to it in order.
pub(crate) struct JobThread {
    name: &'static str,
    queue: std::sync::OnceLock<Option<std::sync::mpsc::Sender<Job>>>,
}

impl JobThread {
    pub(crate) const fn new(name: &'static str) -> Self {
        JobThread {
            name,
            queue: std::sync::OnceLock::new(),
        }
    }

    /// Queues `job`; gives it back when the thread could not be started.
    pub(crate) fn run(&self, job: Job) -> Result<(), Job> {
        let queue = self.queue.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || {
                    lower_own_priority();
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::error!(thread = self.name, error = %e, "cannot start a background thread");
                    None
                }
            }
        });
        match queue {
            Some(tx) => tx.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    }
}

/// Spawns `cmd`; under bubblewrap from one long-lived thread. bubblewrap's
/// `--die-with-parent` is `PR_SET_PDEATHSIG`, which fires when the *thread* that forked it
/// exits: spawned from a short-lived thread (tokio's blocking pool ends idle threads after
/// 10 s) the sandbox would be killed with it.
pub(crate) fn spawn_cmd(mut cmd: Command, wrapped: bool) -> io::Result<Child> {
    if !wrapped {
        return cmd.spawn();
    }
    static SPAWNER: JobThread = JobThread::new("agent-host-spawner");
    let handle = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let job: Job = Box::new(move || {
        let _runtime = handle.enter();
        let _ = done_tx.send(cmd.spawn());
    });
    SPAWNER
        .run(job)
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    done_rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}
