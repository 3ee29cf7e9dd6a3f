//! Publishing a task's events: append to the store, wake the followers, count the ends.

use std::sync::Arc;

use tokio::sync::watch;

use super::{lock, state_word, Inner};
use crate::protocol::v1::{StreamResponse, TaskState};
use crate::task::TaskEvent;

impl Inner {
    /// Appends stream events and wakes subscribers.
    pub(super) async fn publish(
        &self,
        task_id: &str,
        notify: &watch::Sender<u64>,
        events: Vec<StreamResponse>,
    ) {
        let events = events.into_iter().map(TaskEvent::Stream).collect();
        let _ = self.publish_events(task_id, notify, events).await;
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
        match self.store.append(task_id, events).await {
            Ok(seq) => {
                notify.send_replace(seq);
                self.count_terminal(task_id, &terminal);
                if let Some(hook) = self.hook.get() {
                    hook(task_id);
                }
                Some(seq)
            }
            Err(e) => {
                tracing::error!(task = %task_id, error = %e, "could not store task events");
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
