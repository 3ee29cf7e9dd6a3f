//! The seam between a turn and the agent's program: a turn starts its program through a
//! [`Spawner`] and talks to it as a [`Child`]. The engine's default is [`ProcessSpawner`],
//! the real runner; tests give the engine a scripted child instead, so that timeouts, cancel
//! and exit handling run under paused time with no process.

use std::time::Duration;

use async_trait::async_trait;

use crate::runner::{ExitInfo, Output, Process, RunnerError, SpawnSpec};

/// A started agent program, as the turn uses it (see [`Process`] for the real one).
#[async_trait]
pub trait Child: Send {
    /// Its process id (also its process group id), recorded for the stale-process sweep.
    fn pid(&self) -> u32;
    /// When it started, in the clock ticks the stale-process sweep compares to tell it from
    /// a later process with the same pid; 0 when unknown.
    fn start_ticks(&self) -> u64 {
        0
    }
    /// The next piece of output; None once all output has ended. Must be cancel-safe.
    async fn next(&mut self) -> Option<Output>;
    /// The next piece of output, or its exit (`Err`, reported once) when that comes first:
    /// a program may exit while something it left running still holds its output. Must be
    /// cancel-safe. Default: output only.
    async fn next_or_exit(&mut self) -> Result<Option<Output>, ExitInfo> {
        Ok(self.next().await)
    }
    /// Writes to its stdin.
    async fn write_stdin(&mut self, bytes: &[u8]) -> Result<(), RunnerError>;
    /// Closes its stdin. Idempotent.
    fn close_stdin(&mut self);
    /// Waits for it to exit (then stops what it left running, `grace` after SIGTERM).
    async fn wait(&mut self, grace: Duration) -> ExitInfo;
    /// Stops it: SIGTERM, `grace`, SIGKILL. Idempotent.
    async fn terminate(&mut self, grace: Duration) -> ExitInfo;
    /// The task limit (memory, processes) it ran into, in words, once it is gone.
    fn limit_hit(&self) -> Option<String> {
        None
    }
    /// Its program has not started yet (its sandbox is being set up): nothing to ask to
    /// stop, [`Child::terminate`] kills it at once.
    fn starting(&self) -> bool {
        false
    }
}

#[async_trait]
impl Child for Process {
    fn pid(&self) -> u32 {
        Process::pid(self)
    }

    fn start_ticks(&self) -> u64 {
        Process::start_ticks(self)
    }

    async fn next(&mut self) -> Option<Output> {
        Process::next(self).await
    }

    async fn next_or_exit(&mut self) -> Result<Option<Output>, ExitInfo> {
        Process::next_or_exit(self).await
    }

    async fn write_stdin(&mut self, bytes: &[u8]) -> Result<(), RunnerError> {
        Process::write_stdin(self, bytes).await
    }

    fn close_stdin(&mut self) {
        Process::close_stdin(self)
    }

    async fn wait(&mut self, grace: Duration) -> ExitInfo {
        Process::wait(self, grace).await
    }

    async fn terminate(&mut self, grace: Duration) -> ExitInfo {
        Process::terminate(self, grace).await
    }

    fn limit_hit(&self) -> Option<String> {
        Process::limit_hit(self)
    }

    fn starting(&self) -> bool {
        Process::starting(self)
    }
}

/// Why a program could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(transparent)]
    Runner(#[from] RunnerError),
    #[error("the task that starts the program failed: {0}")]
    Internal(String),
}

/// Starts the agent's program for a turn.
#[async_trait]
pub trait Spawner: Send + Sync {
    async fn spawn(&self, spec: SpawnSpec) -> Result<Box<dyn Child>, SpawnError>;
}

/// Programs started at once: as many as there are cores (at least 2).
fn spawn_slots() -> &'static tokio::sync::Semaphore {
    static SLOTS: std::sync::OnceLock<tokio::sync::Semaphore> = std::sync::OnceLock::new();
    SLOTS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        tokio::sync::Semaphore::new(cores.max(2))
    })
}

/// The real runner: a child process per turn.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessSpawner;

#[async_trait]
impl Spawner for ProcessSpawner {
    async fn spawn(&self, spec: SpawnSpec) -> Result<Box<dyn Child>, SpawnError> {
        // fork/exec off the async workers, so a burst of new tasks never delays other streams;
        // and only a few at once: a burst of a thousand starts would otherwise grow tokio's
        // blocking pool to hundreds of threads (each with its stack and malloc arena, kept
        // after the burst) forking side by side on a few cores, while the workers that
        // deliver other tasks' events wait for the CPU and the address-space lock.
        let _permit = spawn_slots().acquire().await;
        match tokio::task::spawn_blocking(move || Process::spawn(spec)).await {
            Ok(Ok(p)) => Ok(Box::new(p)),
            Ok(Err(e)) => Err(SpawnError::Runner(e)),
            Err(e) => Err(SpawnError::Internal(e.to_string())),
        }
    }
}
