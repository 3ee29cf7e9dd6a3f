//! Spare task cgroups: the folders of a task that ended cleanly, kept for the next task
//! with the same limits instead of removed and made again.
//!
//! Making a task's folders (one `mkdir` per hierarchy, then its limits written) and removing
//! them took a fifth of the host's own CPU per task when many short tasks ran (perf, 500
//! sandboxed one-line tasks): the kernel sets up and tears down each controller's state per
//! folder. A folder whose processes all exited by themselves is as a new one would be: empty,
//! thawed (nothing froze it), its limits already written. What it keeps from the earlier
//! task is the kernel's cumulative counters, which [`super::TaskCgroup`] reads at the hand
//! over and counts from (so a limit the earlier task hit is not reported again), and page
//! cache charged to it, which the kernel reclaims at the limit as it would any other.

use std::sync::{Arc, Mutex, MutexGuard};

use super::TaskCgroup;

/// At most this many sets of folders are kept; more ending at once are removed.
const KEEP: usize = 32;

/// The kept sets of one host's hierarchies (shared by its clones and its task cgroups).
#[derive(Debug, Clone, Default)]
pub struct Spare(Arc<Mutex<Vec<TaskCgroup>>>);

impl Spare {
    fn list(&self) -> MutexGuard<'_, Vec<TaskCgroup>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kept set that `fits` (the latest kept first: its folders are the most likely to be
    /// warm in the kernel's caches).
    pub(super) fn take(&self, fits: impl Fn(&TaskCgroup) -> bool) -> Option<TaskCgroup> {
        let mut list = self.list();
        let i = list.iter().rposition(fits)?;
        Some(list.remove(i))
    }

    /// Every kept set (the list is left empty).
    pub(super) fn drain(&self) -> Vec<TaskCgroup> {
        std::mem::take(&mut *self.list())
    }

    /// Keeps `cg` for a later task; gives it back when enough are kept.
    pub(super) fn keep(&self, cg: TaskCgroup) -> Option<TaskCgroup> {
        let mut list = self.list();
        if list.len() >= KEEP {
            return Some(cg);
        }
        list.push(cg);
        None
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use super::super::{Hierarchies, Hierarchy, Kind, TaskLimits};
    use super::*;

    /// A hierarchy of plain folders (a task's folders are made and removed by the same calls;
    /// the limit files are plain files here).
    fn hierarchy(root: &Path) -> Hierarchies {
        Hierarchies {
            list: vec![Hierarchy {
                kind: Kind::Pids,
                base: root.to_path_buf(),
                controllers: Vec::new(),
                favordynmods: false,
            }],
            ..Default::default()
        }
    }

    fn folder(cg: &TaskCgroup) -> PathBuf {
        cg.dirs[0].1.clone()
    }

    /// Ends `cg` as a killed task: removed. A plain folder must be empty for that (a
    /// cgroup's files are not its own), or the remover would retry it for seconds.
    fn discard(cg: TaskCgroup) {
        for f in std::fs::read_dir(folder(&cg)).expect("list").flatten() {
            std::fs::remove_file(f.path()).expect("rm");
        }
        cg.finish(false);
    }

    fn pids(n: u64) -> TaskLimits {
        TaskLimits {
            pids: Some(n),
            ..Default::default()
        }
    }

    #[test]
    fn a_clean_end_hands_its_folders_to_the_next_task_with_the_same_limits() {
        let root = tempfile::tempdir().expect("temp dir");
        let h = hierarchy(root.path());
        let first = h.create(&pids(64)).expect("create");
        let dir = folder(&first);
        assert_eq!(
            std::fs::read_to_string(dir.join("pids.max")).expect("limit"),
            "64"
        );
        assert_eq!(first.finish(true), None);
        // Other limits: new folders.
        let other = h.create(&pids(65)).expect("create");
        assert_ne!(folder(&other), dir);
        // The same limits: the kept ones.
        let second = h.create(&pids(64)).expect("create");
        assert_eq!(folder(&second), dir);
        // Nothing is kept twice: the next one is new.
        let third = h.create(&pids(64)).expect("create");
        assert_ne!(folder(&third), dir);
        for cg in [other, second, third] {
            discard(cg);
        }
    }

    #[test]
    fn a_limit_an_earlier_task_hit_is_not_the_next_ones() {
        let root = tempfile::tempdir().expect("temp dir");
        let h = hierarchy(root.path());
        let first = h.create(&pids(32)).expect("create");
        let dir = folder(&first);
        // The kernel counted 3 refused forks during the first task.
        std::fs::write(dir.join("pids.events"), "max 3\n").expect("write");
        assert_eq!(
            first.finish(true).as_deref(),
            Some("its process limit (32 processes, task_pids)")
        );
        let second = h.create(&pids(32)).expect("create");
        assert_eq!(folder(&second), dir);
        assert_eq!(second.limit_hit(), None, "the earlier task's count");
        std::fs::write(dir.join("pids.events"), "max 4\n").expect("write");
        assert!(second.limit_hit().is_some(), "a refusal of its own");
        discard(second);
    }

    #[test]
    fn folders_of_a_task_that_was_killed_are_removed_not_kept() {
        let root = tempfile::tempdir().expect("temp dir");
        let h = hierarchy(root.path());
        let cg = h.create(&pids(16)).expect("create");
        let dir = folder(&cg);
        discard(cg);
        let until = Instant::now() + Duration::from_secs(10);
        while dir.exists() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!dir.exists(), "not removed");
        let next = h.create(&pids(16)).expect("create");
        assert_ne!(folder(&next), dir);
        discard(next);
    }

    #[test]
    fn the_hosts_end_removes_the_kept_folders_and_its_own() {
        let root = tempfile::tempdir().expect("temp dir");
        let base = root.path().join("agent-host-1");
        std::fs::create_dir(&base).expect("mkdir");
        let h = hierarchy(&base);
        let cg = h.create(&TaskLimits::default()).expect("create");
        let dir = folder(&cg);
        cg.finish(true);
        assert!(dir.exists(), "kept");
        h.release();
        assert!(!dir.exists(), "the kept folder is left");
        assert!(!base.exists(), "the host's folder is left");
    }

    #[test]
    fn no_more_than_the_cap_are_kept() {
        let root = tempfile::tempdir().expect("temp dir");
        let h = hierarchy(root.path());
        // No limits: no limit file in the plain folders, so that those not kept can go.
        let all: Vec<TaskCgroup> = (0..KEEP + 8)
            .map(|_| h.create(&TaskLimits::default()).expect("create"))
            .collect();
        for cg in all {
            cg.finish(true);
        }
        assert_eq!(h.spare.list().len(), KEEP);
    }
}
