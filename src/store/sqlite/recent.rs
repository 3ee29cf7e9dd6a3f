//! The last events of the tasks that ended most recently, kept in memory after their end is
//! committed: a client that reads such a task right after its end (`GetTask`, a stream that
//! catches up, a resubscription with `Last-Event-ID`) is answered without a query. A task
//! whose events since its creation are all kept is rebuilt from them; otherwise, and for
//! older events, reads go to the database. Ended tasks never change, so what is kept stays
//! true until the task is deleted (or, which the host does not do, appended to again: that
//! drops it here first).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::protocol::v1::Task;
use crate::store::window::EventWindow;
#[cfg(doc)]
use crate::store::window::WINDOW_BYTES_MAX;
use crate::store::Snapshot;
use crate::task::{apply, LoggedEvent};

/// Ended tasks kept, the most recent.
pub(super) const RECENT_TASKS: usize = 64;
/// Bytes (of their stored JSON) kept of all of them together, at most: the tasks that ended
/// longest ago go first. Each keeps what its live window held (up to [`WINDOW_BYTES_MAX`]),
/// because a stream that fell behind a task that printed its lines back to
/// back is still reading them when the task ends; the last 256 events alone left most of
/// such a stream to be read back from the database after the end.
pub(super) const RECENT_BYTES: usize = 16 << 20;

/// A task's owner as the store knows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) enum KnownOwner {
    /// Not known here (the task was created before the store was opened).
    #[default]
    Unknown,
    /// The credential that created it, or None: created without one.
    Is(Option<String>),
}

/// One ended task's last events.
pub(super) struct Ended {
    pub(super) owner: KnownOwner,
    pub(super) last_seq: u64,
    pub(super) window: EventWindow,
}

/// The most recently ended tasks.
#[derive(Default)]
pub(super) struct Recent {
    order: VecDeque<Arc<str>>,
    tasks: HashMap<Arc<str>, Ended>,
    /// The stored bytes of every kept task's events.
    bytes: usize,
}

impl Recent {
    /// Keeps an ended task's last events, forgetting the task that ended longest ago when
    /// there are too many.
    pub(super) fn keep(&mut self, id: Arc<str>, ended: Ended) {
        self.forget(&id);
        if ended.window.last_seq() != Some(ended.last_seq) {
            // Its end is not among what is kept (too large): nothing to answer from.
            return;
        }
        self.bytes += ended.window.bytes();
        self.tasks.insert(id.clone(), ended);
        self.order.push_back(id);
        while self.order.len() > RECENT_TASKS || self.bytes > RECENT_BYTES {
            match self.order.pop_front() {
                Some(old) => self.drop_task(&old),
                None => break,
            }
        }
    }

    pub(super) fn forget(&mut self, id: &str) {
        if self.tasks.contains_key(id) {
            self.order.retain(|o| &**o != id);
            self.drop_task(id);
        }
    }

    fn drop_task(&mut self, id: &str) {
        if let Some(e) = self.tasks.remove(id) {
            self.bytes -= e.window.bytes();
        }
    }

    /// Up to `limit` events after `after`, when all of them are kept.
    pub(super) fn events_after(
        &self,
        id: &str,
        after: u64,
        limit: usize,
    ) -> Option<Vec<Arc<LoggedEvent>>> {
        let e = self.tasks.get(id)?;
        let first = e.window.first_seq()?;
        (after + 1 >= first).then(|| e.window.after(after, e.last_seq, limit))
    }

    /// The task rebuilt from its events, when every one since its creation is kept and its
    /// owner is known.
    pub(super) fn snapshot(&self, id: &str) -> Option<Snapshot> {
        let e = self.tasks.get(id)?;
        let KnownOwner::Is(owner) = e.owner.clone() else {
            return None;
        };
        if e.window.first_seq() != Some(1) {
            return None;
        }
        let mut task = Task::default();
        for ev in e.window.iter() {
            apply(&mut task, &ev.event);
        }
        Some(Snapshot {
            task,
            last_seq: e.last_seq,
            owner,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{StreamResponse, TaskState};
    use crate::store::suite::{answer, chunk, status, task};
    use crate::store::window::{WINDOW, WINDOW_BYTES_MAX};
    use crate::task::TaskEvent;

    fn ended(id: &str, events: usize) -> Ended {
        ended_of(id, events, 10)
    }

    /// An ended task of `events` chunks, each counted as `size` stored bytes.
    fn ended_of(id: &str, events: usize, size: usize) -> Ended {
        let mut window = EventWindow::default();
        let mut seq = 1;
        let mut push = |ev: TaskEvent| {
            window.keep(size, Arc::new(LoggedEvent::new(seq, ev)), WINDOW_BYTES_MAX);
            seq += 1;
        };
        push(TaskEvent::Stream(StreamResponse::Task(task(
            id,
            "c",
            "2026-01-01T00:00:00.000Z",
        ))));
        for i in 0..events {
            push(chunk(id, "x", i > 0));
        }
        push(status(id, TaskState::Completed, "2026-01-01T00:00:01.000Z"));
        Ended {
            owner: KnownOwner::Is(Some("alice".into())),
            last_seq: events as u64 + 2,
            window,
        }
    }

    #[test]
    fn a_short_ended_task_is_rebuilt_from_memory_and_a_long_one_only_streams_from_it() {
        let mut r = Recent::default();
        r.keep("short".into(), ended("short", 10));
        let snap = r.snapshot("short").unwrap();
        assert_eq!(snap.task.status.state, TaskState::Completed);
        assert_eq!(answer(&snap.task), "x".repeat(10));
        assert_eq!((snap.last_seq, snap.owner.as_deref()), (12, Some("alice")));
        let seqs: Vec<u64> = r
            .events_after("short", 9, 10)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, vec![10, 11, 12]);

        // What the live window held stays: a stream that fell behind reads on from memory.
        let n = WINDOW + 100;
        r.keep("long".into(), ended("long", n));
        assert!(r.snapshot("long").is_none(), "its first events are gone");
        assert!(r.events_after("long", 0, 10).is_none());
        assert_eq!(r.events_after("long", 200, 10).unwrap()[0].seq, 201);
        let last = r.events_after("long", n as u64, 10).unwrap();
        assert_eq!(last.len(), 2);
        r.forget("short");
        assert!(r.snapshot("short").is_none());
    }

    #[test]
    fn the_tasks_that_ended_first_go_when_all_kept_are_over_the_byte_bound() {
        let mut r = Recent::default();
        // About 0.9 MiB each: 17 fit in 16 MiB.
        let size = 300 << 10;
        for i in 0..20 {
            r.keep(format!("t{i}").into(), ended_of(&format!("t{i}"), 1, size));
        }
        assert!(r.bytes <= RECENT_BYTES, "{}", r.bytes);
        assert_eq!(
            r.bytes,
            r.tasks.values().map(|e| e.window.bytes()).sum::<usize>()
        );
        assert!(r.snapshot("t0").is_none());
        assert!(r.snapshot("t19").is_some());
        assert_eq!(r.tasks.len(), RECENT_BYTES / (3 * size));
        // Kept again (the host does not do it, but the count stays true).
        r.keep("t19".into(), ended_of("t19", 1, size));
        r.forget("t18");
        assert_eq!(
            r.bytes,
            r.tasks.values().map(|e| e.window.bytes()).sum::<usize>()
        );
    }

    #[test]
    fn only_the_most_recent_tasks_are_kept() {
        let mut r = Recent::default();
        for i in 0..RECENT_TASKS + 3 {
            r.keep(format!("t{i}").into(), ended(&format!("t{i}"), 1));
        }
        assert!(r.snapshot("t0").is_none());
        assert!(r.snapshot("t2").is_none());
        assert!(r.snapshot("t3").is_some());
        assert_eq!(r.order.len(), RECENT_TASKS);
        assert_eq!(r.tasks.len(), RECENT_TASKS);
    }
}
