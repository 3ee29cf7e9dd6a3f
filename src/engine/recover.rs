//! Picking up after a previous host: stale process groups, contexts, unfinished tasks, and
//! answers to tasks that were waiting when the host restarted.

use std::collections::HashSet;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{
    changes, input, lock, Accepted, Control, Engine, Inner, Live, Pending, RequestOptions,
};
use crate::protocol::v1::{Message, TaskState};
use crate::protocol::A2AError;
use crate::store::{Snapshot, StoreError};
use crate::task::{ExitReason, TaskEvent, TurnMapper};

/// The prompt of a turn that resumes a task a host restart cut off.
pub const RESTART_PROMPT: &str = "agent-host restarted while you were working on the previous request, and your process was stopped. Continue the work where you left off and finish the request.";

/// What [`Engine::recover`] found.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Recovery {
    /// Running tasks whose CLI session is resumed.
    pub resumed: usize,
    /// Tasks that never started, queued again.
    pub queued: usize,
    /// Tasks waiting for input that stay answerable.
    pub waiting: usize,
    /// Tasks that could not be resumed and were failed.
    pub failed: usize,
    /// Processes a previous host left running, stopped.
    pub stale_processes: usize,
}

impl Engine {
    /// Picks up what a previous host left: stops the process groups it left running,
    /// restores the contexts (CLI sessions, owners, directories), and for each unfinished
    /// task: a task that never started is queued again; a running one resumes its CLI
    /// session (when the adapter can resume and the session is known) or fails with a
    /// message that says the host restarted; one waiting for input stays answerable where
    /// its session can be resumed.
    pub async fn recover(&self) -> Result<Recovery, StoreError> {
        let store = &self.inner.store;
        let mut r = Recovery::default();
        // With several hosts on the store, only this host's tasks (and those of no host);
        // alone, every unfinished task.
        let (unfinished, mine) = match self.claim_own().await? {
            Some(tasks) => {
                let ids: HashSet<String> = tasks.iter().map(|t| t.task.id.clone()).collect();
                (tasks, Some(ids))
            }
            None => (store.unfinished().await?, None),
        };
        // Every group recorded for these tasks belongs to a host that is gone: a single
        // host's store is opened under its data folder's lock (`store::lock`), and a shared
        // one's tasks were claimed above by this host's id.
        for (task_id, pgid, start) in store.recorded_processes().await? {
            if mine.as_ref().is_some_and(|m| !m.contains(&task_id)) {
                continue;
            }
            let n = crate::runner::kill_stale_group(pgid, start);
            if n > 0 {
                tracing::warn!(task = %task_id, pgid, processes = n, "stopped processes a previous agent-host left running");
                r.stale_processes += n;
            }
            store.forget_process(&task_id).await?;
        }
        {
            let contexts = store.contexts().await?;
            for cwd in contexts.iter().filter_map(|c| c.cwd.as_deref()) {
                self.inner.note_work_dir(std::path::Path::new(cwd));
            }
            let mut st = lock(&self.inner.state);
            for c in contexts {
                st.sched.restore_context(c);
            }
        }
        self.pick_up(unfinished, None, &mut r).await;
        Ok(r)
    }

    /// Takes up unfinished tasks (a restart's, or, with `lost`, those of that host, taken
    /// over): one that never started is queued again; one waiting for input stays
    /// answerable where its session can be resumed; a running one resumes its session after
    /// a restart, and fails (restarted, or host lost) otherwise. Then starts what can start.
    pub(super) async fn pick_up(&self, tasks: Vec<Snapshot>, lost: Option<&str>, r: &mut Recovery) {
        let can_resume = self.inner.launch.can_resume();
        let default_cwd = self.default_cwd();
        for snap in tasks {
            let t = &snap.task;
            let id = t.id.clone();
            let ctx_id = t.context_id.clone();
            let kept = {
                let mut st = lock(&self.inner.state);
                let resumable = can_resume && st.sched.session_of(&ctx_id).is_some();
                st.sched.claim(&ctx_id, snap.owner.clone());
                let keep = match t.status.state {
                    TaskState::Submitted => {
                        // The attachments were saved when the task was accepted.
                        let work_dir = st.sched.cwd_of(&ctx_id).unwrap_or(&default_cwd);
                        let dir = input::attachments_dir(work_dir, &id);
                        let first = t.history.first();
                        let prompt = first
                            .map(|m| input::prompt_of(m, Some(&dir)))
                            .unwrap_or_default();
                        let message_id = first.map(|m| m.message_id.clone()).unwrap_or_default();
                        st.sched.requeue(
                            &ctx_id,
                            Pending {
                                task_id: id.clone(),
                                prompt,
                                traceparent: None,
                                tool_trace: false,
                                message_id,
                                continuing: false,
                            },
                        );
                        r.queued += 1;
                        true
                    }
                    // A lost host's session lived there: its running turn is not resumed.
                    TaskState::Working if resumable && lost.is_none() => {
                        st.sched.requeue(
                            &ctx_id,
                            Pending {
                                task_id: id.clone(),
                                prompt: RESTART_PROMPT.to_string(),
                                traceparent: None,
                                tool_trace: false,
                                message_id: String::new(),
                                continuing: true,
                            },
                        );
                        r.resumed += 1;
                        true
                    }
                    TaskState::InputRequired if resumable => {
                        st.sched.hold(&ctx_id, &id);
                        r.waiting += 1;
                        true
                    }
                    _ => false,
                };
                if keep {
                    st.live.insert(id.clone(), Live::new(snap.last_seq));
                }
                keep
            };
            if kept {
                continue;
            }
            let mut m = TurnMapper::new(&id, &ctx_id);
            let reason = match lost {
                Some(host) => ExitReason::HostLost(host.to_string()),
                None => ExitReason::Restarted,
            };
            let prompt = t.history.first().map(|m| input::prompt_of(m, None));
            let mut events = self
                .changes_of_cut_turn(&id, &ctx_id, &prompt.unwrap_or_default())
                .await;
            events.extend(m.on_exit(reason));
            self.inner.publish_final(&id, events).await;
            r.failed += 1;
        }
        let turns = {
            let mut st = lock(&self.inner.state);
            let starts = st.sched.start_idle();
            self.inner.prepare(&mut st, starts)
        };
        self.inner.spawn(turns);
    }

    /// The `changes` artifact of a turn the host's end cut short, when its context's
    /// workspace is on this host: what the agent changed before then (committed as any
    /// turn's end would), as every turn's end carries it.
    async fn changes_of_cut_turn(
        &self,
        task_id: &str,
        context_id: &str,
        prompt: &str,
    ) -> Vec<crate::protocol::v1::StreamResponse> {
        let all = self.inner.config.workspaces.as_ref();
        let (tw, _) = changes::turn_workspace(all, context_id, &self.default_cwd()).await;
        let Some(tw) = tw else {
            return Vec::new();
        };
        changes::changes_update(&tw, task_id, context_id, prompt)
            .await
            .into_iter()
            .collect()
    }

    /// The answer to a task that was waiting for input when the host restarted: its CLI
    /// process is gone, so a turn resumes the CLI's session with the answer as the prompt.
    pub(super) async fn answer_after_restart(
        &self,
        task_id: &str,
        msg: Message,
        opts: &RequestOptions,
    ) -> Result<Accepted, A2AError> {
        let answer = match input::decision_of(&msg, "", "question") {
            Ok(d) => d
                .message
                .unwrap_or_else(|| if d.allow { "yes".into() } else { "no".into() }),
            Err(_) => input::prompt_of(&msg, None),
        };
        let prompt = format!(
            "agent-host restarted while you were waiting for the user, and your process was \
             stopped. The user's answer to what you last asked: {answer}"
        );
        let msg_id = msg.message_id.clone();
        let notify = self.inner.notify_of(task_id);
        let answered_at = self
            .inner
            .publish_events(task_id, &notify, vec![TaskEvent::UserMessage(msg)])
            .await
            .ok_or_else(|| A2AError::Internal("the answer could not be stored".into()))?;
        let turns = {
            let mut st = lock(&self.inner.state);
            let starts = st.sched.resume(Pending {
                task_id: task_id.to_string(),
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
            task_id: task_id.to_string(),
            from_seq: answered_at,
            new_task: false,
            elsewhere: false,
        })
    }
}

impl Inner {
    /// On a clean stop, whether a task in `state` is left unfinished for the next start
    /// (what a crash keeps): working or waiting for an answer, with an adapter that can
    /// resume the context's session and a store that outlives the host.
    pub(super) fn keeps_on_shutdown(&self, context_id: &str, state: TaskState) -> bool {
        matches!(state, TaskState::Working | TaskState::InputRequired)
            && self.store.durable()
            && self.launch.can_resume()
            && lock(&self.state).sched.session_of(context_id).is_some()
    }
}

impl Engine {
    /// At shutdown, the tasks waiting for an answer without a program: kept as they are for
    /// the next start when it can resume them (what a running turn's end keeps), else ended
    /// `failed` as a running one is.
    async fn end_idle(&self, idle: Vec<(String, String)>) {
        for (task_id, ctx) in idle {
            if self.inner.keeps_on_shutdown(&ctx, TaskState::InputRequired) {
                lock(&self.inner.state).live.remove(&task_id);
                self.inner.turn_ended.notify_waiters();
                continue;
            }
            let mut m = TurnMapper::new(&task_id, &ctx);
            let events = m.on_exit(ExitReason::Shutdown);
            self.inner.publish_final(&task_id, events).await;
        }
    }

    /// Ends every task: running ones have their CLI stopped (process group SIGTERM, grace,
    /// SIGKILL); those a next start can resume are kept unfinished (with a durable store,
    /// queued ones too), the others end `failed`. Returns when all are done or
    /// after the grace period plus a margin.
    pub async fn shutdown(&self) {
        let (queued, running, idle) = {
            let mut st = lock(&self.inner.state);
            let queued = st.sched.shutdown();
            let running: Vec<mpsc::UnboundedSender<Control>> =
                st.live.values().filter_map(|l| l.control.clone()).collect();
            // Waiting for an answer with no program (parked at a budget, or waiting since a
            // restart): nothing to stop, nothing to wait for.
            let idle: Vec<(String, String)> = st
                .live
                .iter()
                .filter(|(id, l)| l.control.is_none() && !queued.iter().any(|(q, _)| q == *id))
                .filter_map(|(id, _)| {
                    let ctx = st.sched.context_of(id)?;
                    Some((id.clone(), ctx.to_string()))
                })
                .collect();
            Inner::gauge_load(&st);
            (queued, running, idle)
        };
        self.end_idle(idle).await;
        for (task_id, ctx) in queued {
            if self.inner.store.durable() {
                // Kept as a crash keeps it: the next start runs it.
                lock(&self.inner.state).live.remove(&task_id);
                continue;
            }
            let mut m = TurnMapper::new(&task_id, &ctx);
            let events = m.on_exit(ExitReason::Shutdown);
            self.inner.publish_final(&task_id, events).await;
        }
        for c in running {
            let _ = c.send(Control::Shutdown);
        }
        let deadline = super::deadline::after(
            tokio::time::Instant::now(),
            self.inner
                .launch
                .cancel_grace
                .saturating_add(Duration::from_secs(5)),
        );
        loop {
            let notified = self.inner.turn_ended.notified();
            if lock(&self.inner.state).live.is_empty() {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                tracing::warn!("some tasks did not end within the shutdown grace period");
                break;
            }
        }
        // The progress of the tasks kept for the next start may still be on its way to the
        // database.
        if let Err(e) = self.inner.store.flush_writes().await {
            tracing::error!(error = %e, "could not write the last events to the store");
        }
    }
}
