//! A request's approval rules and budget (`metadata.approvals`, `metadata.budget`): checked
//! against the host's before anything starts and kept in the task's metadata, where each
//! turn reads them ([`super::turn::controls`]); and the answer to a budget's question:
//! "continue" raises the budget (within the host's ceiling) and resumes the same session,
//! "stop" completes the task with what was done.

use serde_json::{json, Map, Value};

use super::turn::controls::{restart_prompt, CONTINUE_PROMPT};
use super::{changes, lock, Accepted, Engine, Pending, RequestOptions};
use crate::policy::budget::{answer_of, raise_by, raised, why_no_raise, BudgetAnswer, Limits};
use crate::policy::{BadInput, TaskControls};
use crate::protocol::v1::{
    Message, Part, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent,
};
use crate::protocol::A2AError;
use crate::store::{ListQuery, Snapshot};
use crate::task::{self, TaskEvent};

fn bad(e: BadInput) -> A2AError {
    A2AError::InvalidParams(format!("{}: {}", e.field, e.why))
}

/// The data part of a task's budget question, when it waits on one.
pub(super) fn budget_question(t: &Task) -> Option<Value> {
    if t.status.state != TaskState::InputRequired {
        return None;
    }
    t.status
        .message
        .as_ref()?
        .parts
        .iter()
        .filter_map(|p| p.data.as_ref())
        .find(|d| d.get("kind").and_then(Value::as_str) == Some("budget"))
        .cloned()
}

impl Engine {
    /// The controls a new task's request asks for, checked (-32602 naming the field).
    pub(super) fn request_controls(
        &self,
        msg: &Message,
        request: Option<&Map<String, Value>>,
    ) -> Result<TaskControls, A2AError> {
        self.inner
            .config
            .controls
            .for_request(msg.metadata.as_ref(), request)
            .map_err(bad)
    }

    /// The new task's metadata for its controls: its rules (when any) and its budget (a
    /// follow-up, in a `known_context`, that sets no budget for its context keeps the one
    /// its context has).
    pub(super) async fn controls_metadata(
        &self,
        tc: &TaskControls,
        context_id: &str,
        known_context: bool,
    ) -> Option<Map<String, Value>> {
        let mut md = Map::new();
        if !tc.policy.is_empty() {
            let rules: Vec<Value> = tc
                .policy
                .own
                .iter()
                .filter_map(|r| serde_json::to_value(&r.spec).ok())
                .collect();
            md.insert(
                "approvals".into(),
                json!({"set": tc.policy.set.name, "rules": rules}),
            );
        }
        let context = if tc.budget.context_named || !known_context {
            tc.budget.context
        } else {
            self.context_budget(context_id).await
        };
        if !tc.budget.task.is_empty() || !context.is_empty() {
            let mut b = json!({
                "allowed": tc.budget.task.to_json(),
                "spent": crate::policy::Spent::default().to_json(),
                "onBudget": tc.budget.on_budget.word(),
                "step": tc.budget.task.to_json(),
            });
            if !context.is_empty() {
                b["context"] = json!({"allowed": context.to_json()});
            }
            md.insert("budget".into(), b);
        }
        (!md.is_empty()).then_some(md)
    }

    /// The budget the context's latest task has for the whole context.
    async fn context_budget(&self, context_id: &str) -> Limits {
        let query = ListQuery {
            context_id: Some(context_id.to_string()),
            page_size: 100,
            ..Default::default()
        };
        let Ok(page) = self.inner.store.list(&query, false).await else {
            return Limits::default();
        };
        page.tasks
            .iter()
            .filter_map(|t| {
                t.metadata
                    .as_ref()?
                    .get("budget")?
                    .get("context")?
                    .get("allowed")
            })
            .map(Limits::from_json)
            .find(|l| !l.is_empty())
            .unwrap_or_default()
    }

    /// The answer to a budget's question: continue (the budget raised, the same session
    /// resumed) or stop (the task completes).
    pub(super) async fn answer_budget(
        &self,
        snap: &Snapshot,
        question: &Value,
        msg: Message,
        opts: &RequestOptions,
    ) -> Result<Accepted, A2AError> {
        let id = question.get("approvalId").and_then(Value::as_str);
        super::input::answers_the_question(&msg, id.unwrap_or_default())?;
        let data = msg.parts.iter().find_map(|p| p.data.as_ref());
        let answer =
            answer_of(data, &msg.text()).map_err(|e| A2AError::InvalidParams(e.to_string()))?;
        match answer {
            BudgetAnswer::Stop => self.stop_at_budget(snap, msg).await,
            BudgetAnswer::Continue { add, each } => {
                let (budget, more) = self.raised_budget(snap, question, add, each)?;
                self.continue_with(snap, msg, budget, &more, opts).await
            }
        }
    }

    /// The task's budget metadata with the reached budget raised, and the text of what was
    /// added.
    fn raised_budget(
        &self,
        snap: &Snapshot,
        question: &Value,
        add: Option<Limits>,
        each: Option<f64>,
    ) -> Result<(Value, String), A2AError> {
        let host = &self.inner.config.controls;
        let mut b = snap
            .task
            .metadata
            .as_ref()
            .and_then(|m| m.get("budget"))
            .cloned()
            .unwrap_or_else(|| json!({}));
        let context = question.get("scope").and_then(Value::as_str) == Some("context");
        let kinds: Vec<&str> = question
            .get("reached")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let at = if context {
            "/context/allowed"
        } else {
            "/allowed"
        };
        let allowed = b.pointer(at).map(Limits::from_json).unwrap_or_default();
        let step = b
            .get("step")
            .map(Limits::from_json)
            .filter(|s| !context && !s.is_empty())
            .unwrap_or(allowed);
        let asked = add.or_else(|| {
            each.map(|n| {
                let mut l = Limits::default();
                for k in &kinds {
                    l.set(k, n);
                }
                l
            })
        });
        let ceiling = if context {
            &host.context_ceiling
        } else {
            &host.ceiling
        };
        let more = raise_by(&allowed, &step, &kinds, ceiling, asked.as_ref()).ok_or_else(|| {
            A2AError::InvalidParams(match why_no_raise(&allowed, &kinds, ceiling) {
                Some(why) => format!("{why}; answer 'stop'"),
                None => "the budget's first amount is 0, so 'continue' adds nothing: answer 'continue with N' (or a data part {\"option\": \"continue\", \"add\": {KIND: N}}), or 'stop'".to_string(),
            })
        })?;
        let new = raised(&allowed, &more).to_json();
        if context {
            b["context"]["allowed"] = new;
        } else {
            b["allowed"] = new;
        }
        Ok((b, more.to_string()))
    }

    /// Continues a task stopped at its budget: the answer and the raised budget are stored,
    /// and a turn resumes the agent's session.
    async fn continue_with(
        &self,
        snap: &Snapshot,
        msg: Message,
        budget: Value,
        more: &str,
        opts: &RequestOptions,
    ) -> Result<Accepted, A2AError> {
        let t = &snap.task;
        let msg_id = msg.message_id.clone();
        let mut md = Map::new();
        md.insert("budget".into(), budget);
        // No program runs until a slot is free: the status says what it waits for.
        let text = match lock(&self.inner.state).sched.resume_waits() {
            Some(w) => format!(
                "Continuing with more budget ({more}) once it starts. {}",
                super::why_it_waits(&w)
            ),
            None => format!("Continuing with more budget ({more})"),
        };
        let status = status_update(t, TaskState::Working, &text, Some(md));
        let notify = self.inner.notify_of(&t.id);
        let answered_at = self
            .inner
            .publish_events(
                &t.id,
                &notify,
                vec![TaskEvent::UserMessage(msg), TaskEvent::Stream(status)],
            )
            .await
            .ok_or_else(|| A2AError::Internal("the answer could not be stored".into()))?;
        // A program that cannot resume its session starts afresh: it is given the request
        // again (with its attachments, saved when the task was accepted).
        let prompt = if self.inner.launch.can_resume() {
            CONTINUE_PROMPT.to_string()
        } else {
            let cwd = lock(&self.inner.state)
                .sched
                .cwd_of(&t.context_id)
                .cloned()
                .unwrap_or_else(|| self.default_cwd());
            let dir = super::input::attachments_dir(&cwd, &t.id);
            let request = t
                .history
                .first()
                .map(|m| super::input::prompt_of(m, Some(&dir)))
                .unwrap_or_default();
            restart_prompt(&request)
        };
        let turns = {
            let mut st = lock(&self.inner.state);
            let starts = st.sched.resume(Pending {
                task_id: t.id.clone(),
                prompt,
                traceparent: opts.traceparent.clone(),
                tool_trace: opts.tool_trace,
                message_id: msg_id,
                continuing: true,
            });
            self.inner.prepare(&mut st, starts.into_iter().collect())
        };
        self.inner.spawn(turns);
        Ok(Accepted {
            task_id: t.id.clone(),
            from_seq: answered_at,
            new_task: false,
            elsewhere: false,
        })
    }

    /// Ends a task stopped at its budget as completed, with its workspace's change.
    async fn stop_at_budget(&self, snap: &Snapshot, msg: Message) -> Result<Accepted, A2AError> {
        let t = &snap.task;
        let notify = self.inner.notify_of(&t.id);
        let answered_at = self
            .inner
            .publish_events(&t.id, &notify, vec![TaskEvent::UserMessage(msg)])
            .await
            .ok_or_else(|| A2AError::Internal("the answer could not be stored".into()))?;
        let mut updates = Vec::new();
        if let Some(all) = self.inner.config.workspaces.as_ref() {
            let cwd = lock(&self.inner.state)
                .sched
                .cwd_of(&t.context_id)
                .cloned()
                .unwrap_or_else(|| self.default_cwd());
            let (tw, _) = changes::turn_workspace(Some(all), &t.context_id, &cwd).await;
            if let Some(tw) = tw {
                let subject = t.history.first().map(Message::text).unwrap_or_default();
                updates.extend(changes::changes_update(&tw, &t.id, &t.context_id, &subject).await);
            }
        }
        updates.push(status_update(
            t,
            TaskState::Completed,
            "Stopped at the budget, as answered; what the agent did so far is in the task's artifacts",
            None,
        ));
        self.inner.publish(&t.id, &notify, updates).await;
        self.inner.finish_turn(&t.id);
        Ok(Accepted {
            task_id: t.id.clone(),
            from_seq: answered_at,
            new_task: false,
            elsewhere: false,
        })
    }
}

fn status_update(
    t: &Task,
    state: TaskState,
    text: &str,
    metadata: Option<Map<String, Value>>,
) -> StreamResponse {
    StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: t.id.clone(),
        context_id: t.context_id.clone(),
        status: TaskStatus {
            state,
            message: Some(Message::agent(vec![Part::text(text)], &t.id, &t.context_id)),
            timestamp: Some(task::now_timestamp()),
        },
        metadata,
    })
}
