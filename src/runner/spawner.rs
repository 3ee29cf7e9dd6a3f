//! Spawning a sandboxed child from one long-lived thread (see [`spawn_cmd`]), at a lower CPU
//! priority than the host's (see [`SETUP_NICE`]).

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
pub(crate) fn lower_own_priority() {
    // SAFETY: nice(2) takes a plain integer and touches no memory of ours; on Linux it changes
    // only the calling thread's nice value.
    let _ = unsafe { nix::libc::nice(SETUP_NICE) };
}

/// A job for the spawner thread.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// Spawns `cmd`; under bubblewrap from one long-lived thread. bubblewrap's
/// `--die-with-parent` is `PR_SET_PDEATHSIG`, which fires when the *thread* that forked it
/// exits: spawned from a short-lived thread (tokio's blocking pool ends idle threads after
/// 10 s) the sandbox would be killed with it.
pub(crate) fn spawn_cmd(mut cmd: Command, wrapped: bool) -> io::Result<Child> {
    if !wrapped {
        return cmd.spawn();
    }
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<SpawnJob>>> =
        std::sync::OnceLock::new();
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        let started = std::thread::Builder::new()
            .name("agent-host-spawner".into())
            .spawn(move || {
                lower_own_priority();
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        if let Err(e) = started {
            tracing::error!(error = %e, "cannot start the spawner thread");
        }
        std::sync::Mutex::new(tx)
    });
    let handle = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let job: SpawnJob = Box::new(move || {
        let _runtime = handle.enter();
        let _ = done_tx.send(cmd.spawn());
    });
    sender
        .lock()
        .map_err(|_| io::Error::other("spawner lock poisoned"))?
        .send(job)
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    done_rx
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}
