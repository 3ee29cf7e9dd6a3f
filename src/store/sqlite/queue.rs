//! The queue between the SQLite store and its writer thread.
//!
//! Hand-written rather than a channel because of when it wakes the writer: a channel wakes a
//! waiting receiver at every send, so a stream of events would cost a thread switch and a
//! transaction per event. This queue wakes the writer only for the first write after it went
//! idle, for a write someone waits for (urgent), or when a batch is full; otherwise the writer
//! lingers up to [`LINGER`] for more, and a fast stream is committed in a few large
//! transactions.
//!
//! Every write gets a ticket (1, 2, ...) in queue order; the writer reports the last ticket of
//! each batch it has finished, so a reader can tell whether the writes it depends on are in
//! the database yet.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::rows::Queued;
use crate::protocol::v1::Task;
use crate::store::StoreError;

/// How a write is answered: once it is committed (or failed).
pub(super) type Reply = oneshot::Sender<Result<(), StoreError>>;

pub(super) enum Write {
    Create {
        task: Box<Task>,
        /// The first event (the task as created), encoded.
        first: String,
        owner: Option<String>,
        reply: Reply,
    },
    Append {
        task_id: Arc<str>,
        /// The task's failure epoch when the append was made (see [`super::writer::Failures`]).
        epoch: u32,
        /// Each event (its sequence number in it) with its stored JSON.
        rows: Vec<Queued>,
        /// New state and status timestamp, when the events changed the status.
        status: Option<(String, String)>,
        /// Checkpoint now (the task now waits for its client).
        checkpoint: bool,
        /// The task ended: nothing more will be appended.
        ended: bool,
        /// None: written in the background, nobody waits.
        reply: Option<Reply>,
    },
    /// Deletes these tasks, where terminal, with their rows and orphaned contexts.
    Delete { ids: Vec<String>, reply: Reply },
    /// Any other statement.
    Exec {
        sql: &'static str,
        args: Vec<rusqlite::types::Value>,
        reply: Reply,
    },
    /// Nothing to write: answered once everything queued before it is committed.
    Flush { reply: Reply },
}

impl Write {
    fn reply(self) -> Option<Reply> {
        match self {
            Write::Create { reply, .. }
            | Write::Delete { reply, .. }
            | Write::Exec { reply, .. }
            | Write::Flush { reply } => Some(reply),
            Write::Append { reply, .. } => reply,
        }
    }

    pub(super) fn answer(self, outcome: Result<(), StoreError>) {
        if let Some(r) = self.reply() {
            let _ = r.send(outcome);
        }
    }
}

/// Writes that make a batch worth committing at once.
pub(super) const BATCH: usize = 512;

/// How long the writer waits for more writes before committing those it has, when nobody
/// waits for them: the most a streamed event stays uncommitted when the writer keeps up.
pub const LINGER: Duration = Duration::from_millis(5);

/// Writes queued beyond which an append waits for the writer (so a producer faster than the
/// disk cannot fill memory).
pub(super) const HIGH_WATER: usize = 8 * BATCH;

/// What the writer waits for, when it waits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Waiting {
    No,
    /// Idle: any write wakes it.
    Any,
    /// Lingering over a batch: only an urgent write or a full batch wakes it.
    Urgent,
}

struct State {
    items: Vec<Write>,
    /// Tickets handed out, and the last ticket of the writes the writer has finished.
    sent: u64,
    done: u64,
    urgent: bool,
    waiting: Waiting,
    /// The store is gone: the writer finishes what is queued and stops.
    closed: bool,
    /// The writer has stopped (it panicked, or the store closed): writes are refused.
    stopped: bool,
}

pub(super) struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

impl Queue {
    pub(super) fn new() -> Queue {
        Queue {
            state: Mutex::new(State {
                items: Vec::new(),
                sent: 0,
                done: 0,
                urgent: false,
                waiting: Waiting::No,
                closed: false,
                stopped: false,
            }),
            wake: Condvar::new(),
        }
    }

    /// The queue's state. It is plain data, consistent after every statement, so a panic
    /// that poisoned the lock left nothing half-done.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a write; `urgent` when its sender waits for it. Returns its ticket and the
    /// number of writes queued.
    pub(super) fn push(&self, w: Write, urgent: bool) -> Result<(u64, usize), StoreError> {
        let mut st = self.lock();
        if st.stopped || st.closed {
            return Err(StoreError::WriterStopped);
        }
        st.items.push(w);
        st.sent += 1;
        st.urgent |= urgent;
        let wake = match st.waiting {
            Waiting::No => false,
            Waiting::Any => true,
            Waiting::Urgent => urgent || st.items.len() >= BATCH,
        };
        let out = (st.sent, st.items.len());
        if wake {
            st.waiting = Waiting::No;
            drop(st);
            self.wake.notify_one();
        }
        Ok(out)
    }

    /// The last ticket of the writes the writer has finished (committed, or failed).
    pub(super) fn done(&self) -> u64 {
        self.lock().done
    }

    /// Whether writes are queued or being written.
    pub(super) fn busy(&self) -> bool {
        let st = self.lock();
        st.done < st.sent
    }

    /// The writer's next batch, into `out` (empty): waits for a write, then lingers for more
    /// unless one is urgent or the batch is full. Returns the batch's last ticket; None when
    /// the store is closed and everything queued is written.
    pub(super) fn take(&self, out: &mut Vec<Write>) -> Option<u64> {
        let mut st = self.lock();
        let mut until = None;
        loop {
            if st.items.is_empty() {
                if st.closed {
                    return None;
                }
                st.waiting = Waiting::Any;
                st = self.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                st.waiting = Waiting::No;
                continue;
            }
            if st.urgent || st.closed || st.items.len() >= BATCH {
                break;
            }
            let now = Instant::now();
            let until = *until.get_or_insert(now + LINGER);
            if now >= until {
                break;
            }
            st.waiting = Waiting::Urgent;
            st = self
                .wake
                .wait_timeout(st, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.waiting = Waiting::No;
        }
        st.urgent = false;
        std::mem::swap(out, &mut st.items);
        Some(st.sent)
    }

    /// The writer finished the writes up to `ticket`.
    pub(super) fn finished(&self, ticket: u64) {
        self.lock().done = ticket;
    }

    /// No more writes: the writer finishes what is queued and stops.
    pub(super) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// The writer stopped: later writes are refused, and those queued are dropped, so
    /// their senders hear that the writer stopped.
    pub(super) fn stopped(&self) {
        let items = {
            let mut st = self.lock();
            st.stopped = true;
            std::mem::take(&mut st.items)
        };
        drop(items);
    }
}

/// Marks the queue stopped when the writer thread ends, also by a panic.
pub(super) struct StopGuard<'a>(pub(super) &'a Queue);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        self.0.stopped();
    }
}
