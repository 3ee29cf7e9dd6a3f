//! Publishing a task's events: append to the store, wake the followers, count the ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::{lock, state_word, Engine, Inner};

/// Locks one of the health mutexes (a panic while holding one leaves plain data behind).
fn guard<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
use crate::protocol::v1::{StreamResponse, TaskState};
use crate::store::Snapshot;
use crate::task::{LoggedEvent, TaskEvent};

/// Whether the store takes writes, and the terminal events it refused: those are kept here,
/// so that streams still end and reads still show the end (the store keeps the task
/// unfinished, and the next start ends or resumes it like after a crash).
#[derive(Default)]
pub(super) struct StoreHealth {
    failing: AtomicBool,
    failure: Mutex<Option<String>>,
    unstored: Mutex<HashMap<String, Arc<LoggedEvent>>>,
}

impl StoreHealth {
    fn failed(&self, why: String) {
        *guard(&self.failure) = Some(why);
        self.failing.store(true, Ordering::Release);
    }

    fn recovered(&self) {
        if self.failing.swap(false, Ordering::AcqRel) {
            tracing::info!("the task store takes writes again");
            *guard(&self.failure) = None;
        }
    }

    /// Why the store failed its last write.
    pub(super) fn failure(&self) -> String {
        guard(&self.failure)
            .clone()
            .unwrap_or_else(|| "unknown error".into())
    }

    /// The end of a task that the store refused, if it comes after `seq`.
    pub(super) fn unstored_after(&self, task_id: &str, seq: u64) -> Option<Arc<LoggedEvent>> {
        guard(&self.unstored)
            .get(task_id)
            .filter(|e| e.seq > seq)
            .cloned()
    }

    /// Forgets the refused end of a task another host owns now (its end is that host's).
    pub(super) fn forget(&self, task_id: &str) {
        guard(&self.unstored).remove(task_id);
    }

    /// A snapshot with the refused end applied.
    pub(super) fn patch(&self, snap: &mut Snapshot) {
        if let Some(e) = guard(&self.unstored).get(&snap.task.id) {
            if e.seq > snap.last_seq {
                crate::task::apply(&mut snap.task, &e.event);
                snap.last_seq = e.seq;
            }
        }
    }
}

impl Engine {
    /// Why the store failed its last write, while it fails (for `/health`).
    pub fn store_failure(&self) -> Option<String> {
        if !self.inner.health.failing.load(Ordering::Acquire) {
            return None;
        }
        guard(&self.inner.health.failure).clone()
    }
}

impl Inner {
    /// Appends stream events and wakes subscribers.
    /// Returns false when the store refused them.
    pub(super) async fn publish(
        &self,
        task_id: &str,
        notify: &watch::Sender<u64>,
        events: Vec<StreamResponse>,
    ) -> bool {
        if events.is_empty() {
            return true;
        }
        let events = events.into_iter().map(TaskEvent::Stream).collect();
        self.publish_events(task_id, notify, events).await.is_some()
    }

    /// Appends events and wakes subscribers. Returns the sequence number of the last event
    /// stored (None when there was nothing to store or the store failed).
    pub(super) async fn publish_events(
        &self,
        task_id: &str,
        notify: &watch::Sender<u64>,
        events: Vec<TaskEvent>,
    ) -> Option<u64> {
        if events.is_empty() {
            return None;
        }
        let terminal = events.iter().find_map(|e| match e {
            TaskEvent::Stream(StreamResponse::StatusUpdate(u)) if u.status.state.is_terminal() => {
                Some(u.status.state)
            }
            _ => None,
        });
        // The end is kept aside in case the store refuses it (boxed: this future is part of
        // every live turn's state, and an event inline would add its 344 bytes to each).
        let end = terminal.and_then(|_| {
            events
                .iter()
                .rev()
                .find(|e| e.ends_stream())
                .cloned()
                .map(Box::new)
        });
        match self.store.append(task_id, events).await {
            Ok(seq) => {
                self.health.recovered();
                notify.send_replace(seq);
                self.count_terminal(task_id, &terminal);
                if let Some(hook) = self.hook.get() {
                    hook(task_id);
                }
                Some(seq)
            }
            // Taken over by another host, whose word the store holds now: nothing to keep
            // aside (reads show the store's version), and no failure of the store.
            Err(e) if e.is_not_owner() => {
                tracing::warn!(task = %task_id, error = %e, "another host owns this task now; its events from this host are not stored");
                None
            }
            Err(e) => {
                tracing::error!(task = %task_id, error = %e, "could not store task events");
                metrics::counter!("agent_host_store_failures_total").increment(1);
                self.health.failed(e.to_string());
                if let Some(end) = end {
                    // Streams and reads see the end; the next start repairs the store.
                    let seq = *notify.borrow() + 1;
                    guard(&self.health.unstored)
                        .insert(task_id.to_string(), Arc::new(LoggedEvent::new(seq, *end)));
                    notify.send_replace(seq);
                    self.count_terminal(task_id, &terminal);
                    if let Some(hook) = self.hook.get() {
                        hook(task_id);
                    }
                }
                None
            }
        }
    }

    /// Counts a task that reached a terminal state, with its duration.
    fn count_terminal(&self, task_id: &str, state: &Option<TaskState>) {
        let Some(state) = state else {
            return;
        };
        let adapter = self.launch.adapter.id.clone();
        let label = state_word(*state);
        metrics::counter!("agent_host_tasks_finished_total", "adapter" => adapter.clone(), "state" => label)
            .increment(1);
        let created = lock(&self.state).live.get(task_id).map(|l| l.created);
        if let Some(c) = created {
            metrics::histogram!("agent_host_task_duration_seconds", "adapter" => adapter, "state" => label)
                .record(c.elapsed().as_secs_f64());
        }
    }

    /// The watch channel of a live task (a fresh one for a task that is not live).
    pub(super) fn notify_of(&self, task_id: &str) -> Arc<watch::Sender<u64>> {
        let st = lock(&self.state);
        st.live
            .get(task_id)
            .map(|l| l.notify.clone())
            .unwrap_or_else(|| Arc::new(watch::channel(0).0))
    }

    /// Publishes the final events of a task that never ran (queued, or shut down) and forgets it.
    pub(super) async fn publish_final(
        self: &Arc<Self>,
        task_id: &str,
        events: Vec<StreamResponse>,
    ) {
        let notify = self.notify_of(task_id);
        self.publish(task_id, &notify, events).await;
        lock(&self.state).live.remove(task_id);
        self.turn_ended.notify_waiters();
    }
}
