//! Canceling a task: a queued one is finalized at once, a running one is stopped through
//! its turn's control channel.

use std::time::Duration;

use tokio::sync::oneshot;

use super::schedule::CancelPlan;
use super::{cluster, lock, state_word, Control, Engine, Inner, Owner};
use crate::protocol::v1::Task;
use crate::protocol::A2AError;
use crate::task::{self, ExitReason, TurnMapper};

impl Engine {
    /// Cancels a task: a queued one ends at once; a running one after its CLI is stopped.
    pub async fn cancel(&self, task_id: &str, owner: Owner<'_>) -> Result<Task, A2AError> {
        // Not while an answer is being taken (a continue starting a turn of a parked task).
        let _one_at_a_time = self.inner.answering(task_id).await;
        let snap = self.snapshot_for(task_id, owner).await?;
        if snap.task.status.state.is_terminal() {
            return Err(A2AError::TaskNotCancelable(format!(
                "task {task_id} is already {} and cannot be canceled",
                state_word(snap.task.status.state)
            )));
        }
        // Another host runs it: canceling here would end the task in the log while its
        // program runs on.
        if let Some(host) = self.remote_owner(task_id).await? {
            return Err(cluster::runs_elsewhere(task_id, "cancel", &host));
        }
        let (plan, control) = {
            let mut st = lock(&self.inner.state);
            let plan = st.sched.cancel(task_id);
            let control = st.live.get(task_id).and_then(|l| l.control.clone());
            Inner::gauge_load(&st);
            (plan, control)
        };
        match (plan, control) {
            (CancelPlan::Running, Some(c)) => {
                let (tx, rx) = oneshot::channel();
                if c.send(Control::Cancel(tx)).is_ok() {
                    let grace = self.inner.launch.cancel_grace;
                    // The turn acknowledges once the process group is gone and the task
                    // is canceled: the CLI's own interrupt (up to a grace period), SIGTERM
                    // (another), then the SIGKILL round.
                    let _ = tokio::time::timeout(
                        grace
                            .saturating_mul(2)
                            .saturating_add(Duration::from_secs(5)),
                        rx,
                    )
                    .await;
                }
            }
            (
                CancelPlan::Finalize {
                    context_id,
                    holds_context,
                },
                _,
            ) => {
                let context_id = context_id.unwrap_or_else(|| snap.task.context_id.clone());
                let mut m = TurnMapper::new(task_id, &context_id);
                let events = m.on_exit(ExitReason::Canceled);
                if holds_context {
                    let notify = self.inner.notify_of(task_id);
                    self.inner.publish(task_id, &notify, events).await;
                    self.inner.finish_turn(task_id);
                } else {
                    self.inner.publish_final(task_id, events).await;
                }
            }
            // A turn holds a slot but has no control channel: it is ending by itself.
            (CancelPlan::Running, None) => {}
        }
        let snap = self.snapshot(task_id).await?;
        Ok(task::view(snap.task, None, true))
    }
}
