//! Spawning a sandboxed child from one long-lived thread (see [`spawn_cmd`]).

use std::io;

use tokio::process::{Child, Command};

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
