//! A time limit on the host's git processes: one watcher thread for all of them.
//!
//! The standard library's `Child` has no wait with a time limit, and a thread per call
//! would cost each git call (a millisecond or two at a turn's end) another 50 µs. The
//! watcher sleeps until the earliest deadline of the processes registered with it, kills
//! those past theirs, and sleeps again; a call registers its process when it starts and
//! withdraws it when it has waited for it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A process under watch.
struct Entry {
    id: u64,
    pid: i32,
    at: Instant,
    killed: Arc<AtomicBool>,
}

/// The processes under watch, and the watcher's wake-up.
struct Watcher {
    entries: Mutex<Vec<Entry>>,
    wake: Condvar,
}

static WATCHER: OnceLock<Option<&'static Watcher>> = OnceLock::new();
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// The watcher, its thread started on first use; `None` when no thread could be started
/// (then nothing is stopped).
fn watcher() -> Option<&'static Watcher> {
    *WATCHER.get_or_init(|| {
        let w: &'static Watcher = Box::leak(Box::new(Watcher {
            entries: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("git-deadline".into())
            .spawn(move || w.run())
            .ok()
            .map(|_| w)
    })
}

impl Watcher {
    fn run(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            entries.retain(|e| {
                if e.at > now {
                    return true;
                }
                e.killed.store(true, Ordering::SeqCst);
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(e.pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
                false
            });
            entries = match entries.iter().map(|e| e.at).min() {
                Some(at) => {
                    self.wake
                        .wait_timeout(entries, at.saturating_duration_since(now))
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.wake.wait(entries).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// One process's watch, from its start until [`Deadline::passed`].
pub(crate) struct Deadline {
    id: u64,
    killed: Arc<AtomicBool>,
}

impl Deadline {
    /// Watches the process `pid`: killed if it still runs `within` from now.
    pub(crate) fn watch(pid: u32, within: Duration) -> Deadline {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let killed = Arc::new(AtomicBool::new(false));
        if let (Some(w), Ok(pid)) = (watcher(), i32::try_from(pid)) {
            let at = Instant::now() + within;
            let mut entries = w.entries.lock().unwrap_or_else(|p| p.into_inner());
            let earliest = entries.iter().all(|e| e.at > at);
            entries.push(Entry {
                id,
                pid,
                at,
                killed: killed.clone(),
            });
            if earliest {
                w.wake.notify_one();
            }
        }
        Deadline { id, killed }
    }

    /// Ends the watch (the process has been waited for): whether it was killed for its time.
    pub(crate) fn passed(self) -> bool {
        self.withdraw();
        self.killed.load(Ordering::SeqCst)
    }

    fn withdraw(&self) {
        if let Some(w) = watcher() {
            let mut entries = w.entries.lock().unwrap_or_else(|p| p.into_inner());
            entries.retain(|e| e.id != self.id);
        }
    }
}

impl Drop for Deadline {
    /// A watch left without [`Deadline::passed`] (an early return) ends too: its process
    /// id, once reused, must not be killed at the deadline.
    fn drop(&mut self) {
        self.withdraw();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_process_past_its_deadline_is_killed_and_one_within_it_is_not() {
        let mut slow = Command::new("sleep").arg("30").spawn().unwrap();
        let mut quick = Command::new("sleep").arg("0.3").spawn().unwrap();
        let slow_watch = Deadline::watch(slow.id(), Duration::from_millis(100));
        let quick_watch = Deadline::watch(quick.id(), Duration::from_secs(30));
        let status = slow.wait().unwrap();
        assert!(slow_watch.passed());
        assert!(!status.success());
        assert!(quick.wait().unwrap().success());
        assert!(!quick_watch.passed());
    }
}
