//! Answers to a task: delivered to its running turn (or, after a restart, to a new turn),
//! then followed from the stored answer on.

use std::time::Duration;

use tokio::sync::oneshot;

use super::schedule::{visible, Refusal};
use super::{lock, state_word, stream::EventStream, Control, Engine, Owner, RequestOptions};
use super::{refusal, store_err, Accepted};
use crate::protocol::v1::TaskState;
use crate::protocol::A2AError;
use crate::store::Snapshot;

impl Engine {
    /// The task of `context_id` that is in `input-required`, if there is one. A context of
    /// another caller is refused as a context of another caller, whatever its task is doing:
    /// the answer names no task of theirs.
    pub(super) async fn waiting_task_of(
        &self,
        context_id: Option<&str>,
        owner: Owner<'_>,
    ) -> Result<Option<String>, A2AError> {
        let Some(context_id) = context_id.filter(|c| !c.is_empty()) else {
            return Ok(None);
        };
        let Some(holder) = lock(&self.inner.state)
            .sched
            .holder_of(context_id)
            .map(str::to_string)
        else {
            return Ok(None);
        };
        match self.inner.store.get(&holder).await {
            Ok(Some(snap)) if snap.task.status.state == TaskState::InputRequired => {
                if !visible(&snap.owner, owner) {
                    return Err(refusal(Refusal::NotOwner));
                }
                Ok(Some(holder))
            }
            _ => Ok(None),
        }
    }

    /// A message with `taskId`: the answer to a task waiting for input.
    pub(super) async fn answer(
        &self,
        task_id: &str,
        mut msg: crate::protocol::v1::Message,
        owner: Owner<'_>,
        opts: &RequestOptions,
    ) -> Result<Accepted, A2AError> {
        // One answer at a time: the task is read (and answered) as the previous answer left
        // it, so only one of several concurrent answers is taken.
        let _one_at_a_time = self.inner.answering(task_id).await;
        let snap = self.snapshot_for(task_id, owner).await?;
        if let Some(c) = msg.context_id.as_deref().filter(|c| !c.is_empty()) {
            if c != snap.task.context_id {
                return Err(A2AError::InvalidParams(format!(
                    "message.contextId '{c}' does not match the context of task {task_id}"
                )));
            }
        }
        let state = snap.task.status.state;
        if state.is_terminal() {
            return Err(A2AError::UnsupportedOperation(format!(
                "task {task_id} is already {}; send a new message without taskId (and with its contextId to continue the conversation)",
                state_word(state)
            )));
        }
        // A working task takes the message when its agent reads messages while it works
        // (the turn decides); a waiting one takes it as the answer.
        if state != TaskState::InputRequired && state != TaskState::Working {
            return Err(A2AError::UnsupportedOperation(format!(
                "task {task_id} is {} and not waiting for input; wait for input-required, or cancel it",
                state_word(state)
            )));
        }
        if let Some(host) = self.remote_owner(task_id).await? {
            return Err(super::cluster::runs_elsewhere(task_id, "answer", &host));
        }
        let control = {
            let st = lock(&self.inner.state);
            match st.live.get(task_id) {
                Some(l) => Ok(l.control.clone()),
                None => Err(()),
            }
        };
        msg.context_id = Some(snap.task.context_id.clone());
        msg.task_id = Some(task_id.to_string());
        let control = match control {
            Ok(Some(c)) => c,
            // Waiting since before a restart: the answer resumes the CLI's session.
            Ok(None) if state == TaskState::InputRequired => {
                return match super::controls::budget_question(&snap.task) {
                    Some(q) => self.answer_budget(&snap, &q, msg, opts).await,
                    None => self.answer_after_restart(task_id, msg, opts).await,
                };
            }
            Ok(None) => {
                return Err(A2AError::UnsupportedOperation(format!(
                    "task {task_id} has not started yet; wait for it to work, or cancel it"
                )))
            }
            Err(()) => {
                return Err(A2AError::UnsupportedOperation(format!(
                    "task {task_id} can no longer be answered"
                )))
            }
        };
        let (ack_tx, ack_rx) = oneshot::channel();
        control
            .send(Control::Reply(Box::new(msg), ack_tx))
            .map_err(|_| A2AError::UnsupportedOperation(format!("task {task_id} has ended")))?;
        // The turn acknowledges with the sequence number of the stored answer: what follows
        // it is the agent's reaction, even when the agent asks again at once.
        let answered_at = match tokio::time::timeout(Duration::from_secs(10), ack_rx).await {
            Ok(Ok(Ok(seq))) => seq,
            Ok(Ok(Err(e))) => return Err(e),
            Ok(Err(_)) => {
                return Err(A2AError::UnsupportedOperation(format!(
                    "task {task_id} ended before the answer was delivered"
                )))
            }
            Err(_) => {
                return Err(A2AError::Internal(
                    "the agent did not take the answer in time".into(),
                ))
            }
        };
        Ok(Accepted {
            task_id: task_id.to_string(),
            from_seq: answered_at,
            new_task: false,
            elsewhere: false,
        })
    }

    /// Follows a task just answered: the task as it is now and the stream of what follows,
    /// which is already at its end when the task settled after the answer (stored at
    /// `answered_at`): waiting for input again, or ended. A stream of an answer thus ends at
    /// the first settled state after the answer, even one reached before it was opened.
    pub async fn follow_answer(
        &self,
        task_id: &str,
        answered_at: u64,
        owner: Owner<'_>,
    ) -> Result<(Snapshot, EventStream), A2AError> {
        let snap = self.snapshot_for(task_id, owner).await?;
        let mut cursor = answered_at;
        while cursor < snap.last_seq {
            let events = self
                .inner
                .store
                .events_after(task_id, cursor, 512)
                .await
                .map_err(store_err)?;
            let Some(last) = events.last() else { break };
            cursor = last.seq;
            if events
                .iter()
                .any(|e| e.seq <= snap.last_seq && e.event.ends_stream())
            {
                let mut ended = self.follow(task_id, snap.last_seq);
                ended.done = true;
                return Ok((snap, ended));
            }
        }
        let events = self.subscribe(task_id, snap.last_seq, owner).await?;
        Ok((snap, events))
    }
}
