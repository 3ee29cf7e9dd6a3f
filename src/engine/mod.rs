//! The task engine: accepts messages, runs turns, answers queries, cancels, shuts down.
//!
//! A message without `taskId` creates a task (one turn). Turns of one context run one at a
//! time (a follow-up that arrives while a turn runs is queued); different contexts run
//! concurrently. Each running turn is owned by one tokio task (`turn.rs`) that owns the CLI
//! process; everyone else talks to it through a control channel. Every change to a task is
//! appended to the store and announced on the task's watch channel; subscribers read the log
//! from their own position, so a slow subscriber never blocks the CLI and never misses events.

pub mod input;
pub mod launch;
mod turn;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch, Notify};

use crate::protocol::v1::{
    ListTasksRequest, ListTasksResponse, SendMessageRequest, StreamResponse, Task, TaskState,
};
use crate::protocol::A2AError;
use crate::store::{ListQuery, Snapshot, StoreError, TaskStore};
use crate::task::{self, ExitReason, LoggedEvent, TaskEvent, TurnMapper};

pub use launch::{Launch, SessionArgs};

/// Messages to a running turn.
enum Control {
    /// The client answered the pending approval with this message.
    Reply(
        crate::protocol::v1::Message,
        oneshot::Sender<Result<(), A2AError>>,
    ),
    /// Stop the CLI; the task ends canceled.
    Cancel(oneshot::Sender<()>),
    /// Stop the CLI; the host is shutting down.
    Shutdown,
}

/// A task that has not reached a terminal state.
struct Live {
    context_id: String,
    notify: Arc<watch::Sender<u64>>,
    control: Option<mpsc::UnboundedSender<Control>>,
}

/// A turn waiting for its context's running turn to end.
struct Pending {
    task_id: String,
    prompt: String,
    /// The task ran before (a host restart cut it off): the turn resumes it.
    continuing: bool,
}

#[derive(Default)]
struct Context {
    running: Option<String>,
    queue: VecDeque<Pending>,
    session: Option<String>,
}

#[derive(Default)]
struct State {
    live: HashMap<String, Live>,
    contexts: HashMap<String, Context>,
    shutting_down: bool,
}

/// Called with a task id after new events of that task were stored.
pub type UpdateHook = Arc<dyn Fn(&str) + Send + Sync>;

struct Inner {
    store: Arc<dyn TaskStore>,
    launch: Launch,
    state: Mutex<State>,
    turn_ended: Notify,
    hook: std::sync::OnceLock<UpdateHook>,
}

/// The task engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

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

/// A message the engine accepted.
#[derive(Debug, Clone)]
pub struct Accepted {
    pub task_id: String,
    /// Stream events after this sequence number to follow the task from here.
    pub from_seq: u64,
    /// True for a new task, false for an answer to a waiting one.
    pub new_task: bool,
}

fn store_err(e: StoreError) -> A2AError {
    match e {
        StoreError::NotFound(id) => A2AError::TaskNotFound(id),
        StoreError::BadPageToken => A2AError::InvalidParams("pageToken is not valid".into()),
        other => A2AError::Internal(other.to_string()),
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding this lock leaves maps that are still consistent (every update is
    // a single insert or remove), so continuing with the inner value is safe.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Engine {
    pub fn new(store: Arc<dyn TaskStore>, launch: Launch) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                store,
                launch,
                state: Mutex::new(State::default()),
                turn_ended: Notify::new(),
                hook: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Sets the function told about every stored update (push notifications). Only the
    /// first call has an effect.
    pub fn set_update_hook(&self, hook: UpdateHook) {
        let _ = self.inner.hook.set(hook);
    }

    /// The adapter this engine runs.
    pub fn launch(&self) -> &Launch {
        &self.inner.launch
    }

    /// Accepts a message: starts (or queues) a new task, or answers a waiting one.
    pub async fn send(&self, req: SendMessageRequest) -> Result<Accepted, A2AError> {
        let mut msg = req.message;
        input::validate_message(&msg)?;
        if let Some(task_id) = msg.task_id.clone().filter(|t| !t.is_empty()) {
            return self.answer(&task_id, msg).await;
        }
        let context_id = match msg.context_id.clone().filter(|c| !c.is_empty()) {
            Some(c) => {
                task::validate_id("message.contextId", &c).map_err(A2AError::InvalidParams)?;
                c
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        let task_id = uuid::Uuid::new_v4().to_string();
        msg.task_id = Some(task_id.clone());
        msg.context_id = Some(context_id.clone());
        let prompt = input::prompt_of(&msg);
        let task = Task {
            id: task_id.clone(),
            context_id: context_id.clone(),
            status: crate::protocol::v1::TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(task::now_timestamp()),
            },
            history: vec![msg],
            ..Task::default()
        };
        {
            let st = lock(&self.inner.state);
            if st.shutting_down {
                return Err(A2AError::Busy("agent-host is shutting down".into()));
            }
        }
        self.inner.store.create(task).await.map_err(store_err)?;
        let start = {
            let mut st = lock(&self.inner.state);
            st.live.insert(
                task_id.clone(),
                Live {
                    context_id: context_id.clone(),
                    notify: Arc::new(watch::channel(1).0),
                    control: None,
                },
            );
            let ctx = st.contexts.entry(context_id.clone()).or_default();
            if ctx.running.is_some() {
                ctx.queue.push_back(Pending {
                    task_id: task_id.clone(),
                    prompt,
                    continuing: false,
                });
                tracing::info!(task = %task_id, context = %context_id, "queued behind the context's running turn");
                None
            } else {
                ctx.running = Some(task_id.clone());
                Some(self.prepare_turn(&mut st, &task_id, &context_id, prompt, false))
            }
        };
        if let Some(t) = start {
            tokio::spawn(turn::run(self.inner.clone(), t));
        }
        Ok(Accepted {
            task_id,
            from_seq: 0,
            new_task: true,
        })
    }

    /// Sets up a turn for a task whose context is free: control channel and session args.
    fn prepare_turn(
        &self,
        st: &mut State,
        task_id: &str,
        context_id: &str,
        prompt: String,
        continuing: bool,
    ) -> turn::Turn {
        let launch = &self.inner.launch;
        let ctx = st.contexts.entry(context_id.to_string()).or_default();
        let session = match &ctx.session {
            Some(s) if launch.can_resume() => SessionArgs::Resume(s.clone()),
            _ if launch.host_chooses_session() => {
                SessionArgs::New(uuid::Uuid::new_v4().to_string())
            }
            _ => SessionArgs::None,
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let notify = match st.live.get_mut(task_id) {
            Some(live) => {
                live.control = Some(tx);
                live.notify.clone()
            }
            // Every started task was registered as live by `send`; a missing entry would
            // mean it was removed concurrently, and a fresh channel is harmless then.
            None => Arc::new(watch::channel(0).0),
        };
        turn::Turn {
            task_id: task_id.to_string(),
            context_id: context_id.to_string(),
            prompt,
            session,
            notify,
            control: rx,
            continuing,
        }
    }

    /// A message with `taskId`: the answer to a task waiting for input.
    async fn answer(
        &self,
        task_id: &str,
        mut msg: crate::protocol::v1::Message,
    ) -> Result<Accepted, A2AError> {
        let snap = self.snapshot(task_id).await?;
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
        if state != TaskState::InputRequired {
            return Err(A2AError::UnsupportedOperation(format!(
                "task {task_id} is {} and not waiting for input; wait for input-required, or cancel it",
                state_word(state)
            )));
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
            Ok(None) => {
                return self
                    .answer_after_restart(task_id, &snap.task.context_id, msg)
                    .await
            }
            Err(()) => {
                return Err(A2AError::UnsupportedOperation(format!(
                    "task {task_id} can no longer be answered"
                )))
            }
        };
        let (ack_tx, ack_rx) = oneshot::channel();
        control
            .send(Control::Reply(msg, ack_tx))
            .map_err(|_| A2AError::UnsupportedOperation(format!("task {task_id} has ended")))?;
        match tokio::time::timeout(Duration::from_secs(10), ack_rx).await {
            Ok(Ok(Ok(()))) => {}
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
        }
        let snap = self.snapshot(task_id).await?;
        Ok(Accepted {
            task_id: task_id.to_string(),
            from_seq: snap.last_seq,
            new_task: false,
        })
    }

    /// The answer to a task that was waiting for input when the host restarted: its CLI
    /// process is gone, so a turn resumes the CLI's session with the answer as the prompt.
    async fn answer_after_restart(
        &self,
        task_id: &str,
        context_id: &str,
        msg: crate::protocol::v1::Message,
    ) -> Result<Accepted, A2AError> {
        let answer = match input::decision_of(&msg, "", "question") {
            Ok(d) => d
                .message
                .unwrap_or_else(|| if d.allow { "yes".into() } else { "no".into() }),
            Err(_) => input::prompt_of(&msg),
        };
        let prompt = format!(
            "agent-host restarted while you were waiting for the user, and your process was \
             stopped. The user's answer to what you last asked: {answer}"
        );
        let notify = self.inner.notify_of(task_id);
        self.inner
            .publish_events(task_id, &notify, vec![TaskEvent::UserMessage(msg)])
            .await;
        let turn = {
            let mut st = lock(&self.inner.state);
            self.prepare_turn(&mut st, task_id, context_id, prompt, true)
        };
        tokio::spawn(turn::run(self.inner.clone(), turn));
        let snap = self.snapshot(task_id).await?;
        Ok(Accepted {
            task_id: task_id.to_string(),
            from_seq: snap.last_seq,
            new_task: false,
        })
    }

    /// Picks up what a previous host left: stops the process groups it left running,
    /// restores the contexts' CLI sessions, and for each unfinished task: a task that never
    /// started is queued again; a running one resumes its CLI session (when the adapter can
    /// resume and the session is known) or fails with a message that says the host
    /// restarted; one waiting for input stays answerable where its session can be resumed.
    pub async fn recover(&self) -> Result<Recovery, StoreError> {
        let store = &self.inner.store;
        let mut r = Recovery::default();
        for (task_id, pgid, start) in store.recorded_processes().await? {
            let n = crate::runner::kill_stale_group(pgid, start);
            if n > 0 {
                tracing::warn!(task = %task_id, pgid, processes = n, "stopped processes a previous agent-host left running");
                r.stale_processes += n;
            }
            store.forget_process(&task_id).await?;
        }
        {
            let sessions = store.sessions().await?;
            let mut st = lock(&self.inner.state);
            for (ctx, sid) in sessions {
                st.contexts.entry(ctx).or_default().session = Some(sid);
            }
        }
        let can_resume = self.inner.launch.can_resume();
        for snap in store.unfinished().await? {
            let t = &snap.task;
            let id = t.id.clone();
            let ctx_id = t.context_id.clone();
            let kept = {
                let mut st = lock(&self.inner.state);
                let resumable = can_resume
                    && st
                        .contexts
                        .get(&ctx_id)
                        .is_some_and(|c| c.session.is_some());
                let keep = match t.status.state {
                    TaskState::Submitted => {
                        let prompt = t.history.first().map(input::prompt_of).unwrap_or_default();
                        let ctx = st.contexts.entry(ctx_id.clone()).or_default();
                        ctx.queue.push_back(Pending {
                            task_id: id.clone(),
                            prompt,
                            continuing: false,
                        });
                        r.queued += 1;
                        true
                    }
                    TaskState::Working if resumable => {
                        let ctx = st.contexts.entry(ctx_id.clone()).or_default();
                        ctx.queue.push_back(Pending {
                            task_id: id.clone(),
                            prompt: RESTART_PROMPT.to_string(),
                            continuing: true,
                        });
                        r.resumed += 1;
                        true
                    }
                    TaskState::InputRequired if resumable => {
                        st.contexts.entry(ctx_id.clone()).or_default().running = Some(id.clone());
                        r.waiting += 1;
                        true
                    }
                    _ => false,
                };
                if keep {
                    st.live.insert(
                        id.clone(),
                        Live {
                            context_id: ctx_id.clone(),
                            notify: Arc::new(watch::channel(snap.last_seq).0),
                            control: None,
                        },
                    );
                }
                keep
            };
            if kept {
                continue;
            }
            let mut m = TurnMapper::new(&id, &ctx_id);
            let events = m.on_exit(ExitReason::Restarted);
            self.inner.publish_final(&id, events).await;
            r.failed += 1;
        }
        let turns: Vec<turn::Turn> = {
            let mut st = lock(&self.inner.state);
            let free: Vec<(String, Pending)> = st
                .contexts
                .iter_mut()
                .filter(|(_, c)| c.running.is_none())
                .filter_map(|(id, c)| c.queue.pop_front().map(|p| (id.clone(), p)))
                .collect();
            free.into_iter()
                .map(|(ctx_id, p)| {
                    if let Some(c) = st.contexts.get_mut(&ctx_id) {
                        c.running = Some(p.task_id.clone());
                    }
                    self.prepare_turn(&mut st, &p.task_id, &ctx_id, p.prompt, p.continuing)
                })
                .collect()
        };
        for t in turns {
            tokio::spawn(turn::run(self.inner.clone(), t));
        }
        Ok(r)
    }

    async fn snapshot(&self, task_id: &str) -> Result<Snapshot, A2AError> {
        self.inner
            .store
            .get(task_id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| A2AError::TaskNotFound(task_id.to_string()))
    }

    /// The task, with at most `history_length` messages of history.
    pub async fn get(&self, task_id: &str, history_length: Option<i32>) -> Result<Task, A2AError> {
        if let Some(n) = history_length {
            if n < 0 {
                return Err(A2AError::InvalidParams(
                    "historyLength must not be negative".into(),
                ));
            }
        }
        let snap = self.snapshot(task_id).await?;
        Ok(task::view(&snap.task, history_length, true))
    }

    /// The task and the sequence number it reflects.
    pub async fn get_snapshot(&self, task_id: &str) -> Result<Snapshot, A2AError> {
        self.snapshot(task_id).await
    }

    /// Lists tasks, newest status first.
    pub async fn list(&self, req: ListTasksRequest) -> Result<ListTasksResponse, A2AError> {
        let page_size = match req.page_size {
            None | Some(0) => 50,
            Some(n) if (1..=100).contains(&n) => n,
            Some(n) => {
                return Err(A2AError::InvalidParams(format!(
                    "pageSize must be between 1 and 100, got {n}"
                )))
            }
        };
        if let Some(n) = req.history_length {
            if n < 0 {
                return Err(A2AError::InvalidParams(
                    "historyLength must not be negative".into(),
                ));
            }
        }
        if let Some(ts) = &req.status_timestamp_after {
            if chrono::DateTime::parse_from_rfc3339(ts).is_err() {
                return Err(A2AError::InvalidParams(format!(
                    "statusTimestampAfter '{ts}' is not an ISO 8601 timestamp"
                )));
            }
        }
        let status_after = req.status_timestamp_after.as_deref().and_then(|ts| {
            chrono::DateTime::parse_from_rfc3339(ts).ok().map(|d| {
                d.with_timezone(&chrono::Utc)
                    .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                    .to_string()
            })
        });
        let query = ListQuery {
            context_id: req.context_id.filter(|c| !c.is_empty()),
            state: req.status.filter(|s| *s != TaskState::Unspecified),
            status_after,
            page_size: page_size as usize,
            page_token: req.page_token.filter(|t| !t.is_empty()),
        };
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let page = self
            .inner
            .store
            .list(&query, include_artifacts)
            .await
            .map_err(store_err)?;
        Ok(ListTasksResponse {
            tasks: page
                .tasks
                .iter()
                .map(|t| task::view(t, req.history_length, include_artifacts))
                .collect(),
            next_page_token: page.next_page_token,
            page_size,
            total_size: page.total_size as i32,
        })
    }

    /// Cancels a task: a queued one ends at once; a running one after its CLI is stopped.
    pub async fn cancel(&self, task_id: &str) -> Result<Task, A2AError> {
        let snap = self.snapshot(task_id).await?;
        if snap.task.status.state.is_terminal() {
            return Err(A2AError::TaskNotCancelable(format!(
                "task {task_id} is already {} and cannot be canceled",
                state_word(snap.task.status.state)
            )));
        }
        enum Action {
            /// Not running a process: queued, or waiting for an answer after a restart.
            Finalize {
                context_id: String,
                holds_context: bool,
            },
            Signal(mpsc::UnboundedSender<Control>),
        }
        let action = {
            let mut st = lock(&self.inner.state);
            match st.live.get(task_id) {
                Some(Live {
                    control: Some(c), ..
                }) => Action::Signal(c.clone()),
                Some(live) => {
                    let context_id = live.context_id.clone();
                    let ctx = st.contexts.entry(context_id.clone()).or_default();
                    ctx.queue.retain(|p| p.task_id != task_id);
                    let holds_context = ctx.running.as_deref() == Some(task_id);
                    Action::Finalize {
                        context_id,
                        holds_context,
                    }
                }
                None => Action::Finalize {
                    context_id: snap.task.context_id.clone(),
                    holds_context: false,
                },
            }
        };
        match action {
            Action::Finalize {
                context_id,
                holds_context,
            } => {
                let mut m = TurnMapper::new(task_id, &context_id);
                let events = m.on_exit(ExitReason::Canceled);
                if holds_context {
                    let notify = self.inner.notify_of(task_id);
                    self.inner.publish(task_id, &notify, events).await;
                    self.inner.finish_turn(task_id, &context_id);
                } else {
                    self.inner.publish_final(task_id, events).await;
                }
            }
            Action::Signal(c) => {
                let (tx, rx) = oneshot::channel();
                if c.send(Control::Cancel(tx)).is_ok() {
                    let grace = self.inner.launch.cancel_grace;
                    // The turn acknowledges once the process group is gone and the task
                    // is canceled; bounded by the grace period plus the SIGKILL round.
                    let _ = tokio::time::timeout(grace + Duration::from_secs(5), rx).await;
                }
            }
        }
        let snap = self.snapshot(task_id).await?;
        Ok(task::view(&snap.task, None, true))
    }

    /// Follows a task's log from after `after`. Fails if the task does not exist.
    pub async fn subscribe(&self, task_id: &str, after: u64) -> Result<EventStream, A2AError> {
        // Subscribe to the watch before reading the store, so no wake-up is missed.
        let rx = {
            let st = lock(&self.inner.state);
            st.live.get(task_id).map(|l| l.notify.subscribe())
        };
        self.snapshot(task_id).await?;
        Ok(EventStream {
            store: self.inner.store.clone(),
            task_id: task_id.to_string(),
            cursor: after,
            rx,
            buf: VecDeque::new(),
            done: false,
        })
    }

    /// Waits until the task is terminal or waits for input (following from `after`), and
    /// returns it.
    pub async fn wait_settled(&self, task_id: &str, after: u64) -> Result<Snapshot, A2AError> {
        let mut s = self.subscribe(task_id, after).await?;
        while s.next().await.is_some() {}
        self.snapshot(task_id).await
    }

    /// Ends every task: queued ones fail at once, running ones have their CLI stopped
    /// (process group SIGTERM, grace, SIGKILL) and end `failed`. Returns when all are done or
    /// after the grace period plus a margin.
    pub async fn shutdown(&self) {
        let (queued, running) = {
            let mut st = lock(&self.inner.state);
            st.shutting_down = true;
            let mut queued = Vec::new();
            for (ctx_id, ctx) in st.contexts.iter_mut() {
                for p in ctx.queue.drain(..) {
                    queued.push((p.task_id, ctx_id.clone()));
                }
            }
            let running: Vec<mpsc::UnboundedSender<Control>> =
                st.live.values().filter_map(|l| l.control.clone()).collect();
            (queued, running)
        };
        for (task_id, ctx) in queued {
            let mut m = TurnMapper::new(&task_id, &ctx);
            let events = m.on_exit(ExitReason::Shutdown);
            self.inner.publish_final(&task_id, events).await;
        }
        for c in running {
            let _ = c.send(Control::Shutdown);
        }
        let deadline =
            tokio::time::Instant::now() + self.inner.launch.cancel_grace + Duration::from_secs(5);
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
    }

    /// Number of tasks not yet terminal (queued, running or waiting for input).
    pub fn live_count(&self) -> usize {
        lock(&self.inner.state).live.len()
    }
}

impl Inner {
    /// Appends stream events and wakes subscribers.
    async fn publish(
        &self,
        task_id: &str,
        notify: &watch::Sender<u64>,
        events: Vec<StreamResponse>,
    ) {
        let events = events.into_iter().map(TaskEvent::Stream).collect();
        self.publish_events(task_id, notify, events).await;
    }

    /// Appends events and wakes subscribers.
    async fn publish_events(
        &self,
        task_id: &str,
        notify: &watch::Sender<u64>,
        events: Vec<TaskEvent>,
    ) {
        if events.is_empty() {
            return;
        }
        match self.store.append(task_id, events).await {
            Ok(seq) => {
                notify.send_replace(seq);
                if let Some(hook) = self.hook.get() {
                    hook(task_id);
                }
            }
            Err(e) => tracing::error!(task = %task_id, error = %e, "could not store task events"),
        }
    }

    /// The watch channel of a live task (a fresh one for a task that is not live).
    fn notify_of(&self, task_id: &str) -> Arc<watch::Sender<u64>> {
        let st = lock(&self.state);
        st.live
            .get(task_id)
            .map(|l| l.notify.clone())
            .unwrap_or_else(|| Arc::new(watch::channel(0).0))
    }

    /// Publishes the final events of a task that never ran (queued, or shut down) and forgets it.
    async fn publish_final(self: &Arc<Self>, task_id: &str, events: Vec<StreamResponse>) {
        let notify = self.notify_of(task_id);
        self.publish(task_id, &notify, events).await;
        lock(&self.state).live.remove(task_id);
        self.turn_ended.notify_waiters();
    }

    /// A turn ended: forget the task, start the context's next queued turn.
    fn finish_turn(self: &Arc<Self>, task_id: &str, context_id: &str) {
        let next = {
            let mut st = lock(&self.state);
            st.live.remove(task_id);
            let shutting_down = st.shutting_down;
            let Some(ctx) = st.contexts.get_mut(context_id) else {
                return;
            };
            ctx.running = None;
            match ctx.queue.pop_front() {
                Some(p) if !shutting_down => {
                    ctx.running = Some(p.task_id.clone());
                    let engine = Engine {
                        inner: self.clone(),
                    };
                    Some(engine.prepare_turn(
                        &mut st,
                        &p.task_id,
                        context_id,
                        p.prompt,
                        p.continuing,
                    ))
                }
                Some(p) => {
                    ctx.queue.push_front(p);
                    None
                }
                None => {
                    if ctx.session.is_none() {
                        st.contexts.remove(context_id);
                    }
                    None
                }
            }
        };
        self.turn_ended.notify_waiters();
        if let Some(t) = next {
            tokio::spawn(turn::run(self.clone(), t));
        }
    }

    /// Remembers the CLI session of a context, for resuming it on the next turn.
    async fn set_session(&self, context_id: &str, session_id: &str) {
        {
            let mut st = lock(&self.state);
            if let Some(ctx) = st.contexts.get_mut(context_id) {
                ctx.session = Some(session_id.to_string());
            }
        }
        if let Err(e) = self.store.set_session(context_id, session_id).await {
            tracing::error!(context = %context_id, error = %e, "could not store the context's session");
        }
    }
}

fn state_word(s: TaskState) -> &'static str {
    match s {
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::Rejected => "rejected",
        TaskState::Working => "working",
        TaskState::Submitted => "submitted",
        TaskState::InputRequired => "waiting for input",
        TaskState::AuthRequired => "waiting for authentication",
        TaskState::Unspecified => "in an unknown state",
    }
}

/// A task's events from a position on: replays the log, then follows it live. Ends after a
/// terminal or input-required status, or when the task is no longer live and the log is read.
pub struct EventStream {
    store: Arc<dyn TaskStore>,
    task_id: String,
    cursor: u64,
    rx: Option<watch::Receiver<u64>>,
    buf: VecDeque<Arc<LoggedEvent>>,
    done: bool,
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

    /// Sequence number of the last event returned.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}
