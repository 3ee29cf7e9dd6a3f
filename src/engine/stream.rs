//! Following a task's event log: replay, then live.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::watch;

use super::{lock, Inner};
use crate::store::TaskStore;
use crate::task::LoggedEvent;

/// A task's events from a position on: replays the log, then follows it live. Ends after a
/// terminal or input-required status, or when the task is no longer live and the log is read.
pub struct EventStream {
    pub(super) store: Arc<dyn TaskStore>,
    pub(super) task_id: String,
    pub(super) cursor: u64,
    pub(super) rx: Option<watch::Receiver<u64>>,
    pub(super) buf: VecDeque<Arc<LoggedEvent>>,
    pub(super) done: bool,
    /// Events up to this sequence number are read but not returned (a snapshot already holds
    /// them); the stream still ends when one of them ends it.
    pub(super) hidden_through: u64,
    /// Counts the stream among the task's subscribers while it lives.
    pub(super) _slot: Option<SubscriberSlot>,
}

/// One of a task's subscriber slots; freed when dropped.
pub(super) struct SubscriberSlot {
    pub(super) inner: Arc<Inner>,
    pub(super) task_id: String,
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        metrics::gauge!("agent_host_sse_subscribers").decrement(1.0);
        let mut st = lock(&self.inner.state);
        if let Some(n) = st.subscribers.get_mut(&self.task_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.subscribers.remove(&self.task_id);
            }
        }
    }
}

impl EventStream {
    /// The next event; None at the end.
    pub async fn next(&mut self) -> Option<Arc<LoggedEvent>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(e) = self.buf.pop_front() {
                self.cursor = e.seq;
                if e.event.ends_stream() {
                    self.done = true;
                }
                if e.seq <= self.hidden_through {
                    continue;
                }
                return Some(e);
            }
            match self
                .store
                .events_after(&self.task_id, self.cursor, 512)
                .await
            {
                Ok(evs) if !evs.is_empty() => {
                    self.buf.extend(evs);
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(task = %self.task_id, error = %e, "could not read task events");
                    return None;
                }
            }
            match &mut self.rx {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        // The task is no longer live: read what is left, then end.
                        self.rx = None;
                    }
                }
                None => return None,
            }
        }
    }

    /// Leaves out the events up to `seq` (they are in a snapshot sent before the stream),
    /// but ends where one of them ends the stream: a stream that started before the snapshot
    /// sees whether the task settled in between.
    pub fn hide_through(mut self, seq: u64) -> EventStream {
        self.hidden_through = seq;
        self
    }

    /// Sequence number of the last event returned.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}
