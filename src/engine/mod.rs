//! The task engine: accepts messages, runs turns, answers queries, cancels, shuts down.
//!
//! A message without `taskId` creates a task (one turn). Turns of one context run one at a
//! time (a follow-up that arrives while a turn runs is queued); different contexts run
//! concurrently. Each running turn is owned by one tokio task (`turn.rs`) that owns the CLI
//! process; everyone else talks to it through a control channel. Every change to a task is
//! appended to the store and announced on the task's watch channel; subscribers read the log
//! from their own position, so a slow subscriber never blocks the CLI and never misses events.

mod attach;
pub mod input;
pub mod launch;
mod recover;
mod stream;
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
use crate::task::{self, ExitReason, TaskEvent, TurnMapper};

pub use launch::{Launch, SessionArgs};
pub use recover::{Recovery, RESTART_PROMPT};
pub use stream::EventStream;

use crate::settings::HostLimits;
use crate::store::ContextRecord;
use crate::task::Redactor;
use std::path::PathBuf;
use stream::SubscriberSlot;

/// Messages to a running turn.
enum Control {
    /// A message for the task: the answer to the pending approval, or (while the agent
    /// works) a message passed to it when its protocol takes one.
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
    /// When the task was accepted (for the duration metric).
    created: std::time::Instant,
    notify: Arc<watch::Sender<u64>>,
    control: Option<mpsc::UnboundedSender<Control>>,
}

/// A turn waiting for its context's running turn to end.
struct Pending {
    task_id: String,
    prompt: String,
    /// The trace the request that made this turn belongs to.
    traceparent: Option<String>,
    /// The request activated the tool-trace extension.
    tool_trace: bool,
    /// The `messageId` of the message that started the turn (the adapter's `{message_id}`).
    message_id: String,
    /// The task ran before (a host restart cut it off): the turn resumes it.
    continuing: bool,
}

#[derive(Default)]
struct Context {
    running: Option<String>,
    queue: VecDeque<Pending>,
    session: Option<String>,
    /// The credential whose conversation this is.
    owner: Option<String>,
    /// The working directory chosen by its first message, if any.
    cwd: Option<PathBuf>,
}

impl Context {
    fn record(&self, context_id: &str) -> ContextRecord {
        ContextRecord {
            context_id: context_id.to_string(),
            session_id: self.session.clone(),
            owner: self.owner.clone(),
            cwd: self.cwd.as_ref().map(|p| p.to_string_lossy().into_owned()),
        }
    }
}

#[derive(Default)]
struct State {
    live: HashMap<String, Live>,
    contexts: HashMap<String, Context>,
    shutting_down: bool,
    /// Turns with a process (or starting one).
    running_turns: usize,
    /// Turns whose context is free but which wait for a slot (`max_running`).
    ready: VecDeque<(String, Pending)>,
    /// Streams following each task.
    subscribers: HashMap<String, usize>,
}

impl State {
    fn queued(&self) -> usize {
        self.ready.len() + self.contexts.values().map(|c| c.queue.len()).sum::<usize>()
    }
}

/// What the engine needs beyond the adapter.
#[derive(Debug, Clone, Default)]
pub struct EngineConfig {
    pub limits: HostLimits,
    /// Directories a message may choose as its working directory (canonical). Empty: only
    /// the adapter's working directory.
    pub workspace_roots: Vec<PathBuf>,
    /// Secret values never shown to clients (the host's own credentials).
    pub secrets: Vec<String>,
    /// Media types a message part may name (`type/subtype`, `type/*`, `*/*`). Empty:
    /// [`input::DEFAULT_INPUT_MODES`].
    pub input_modes: Vec<String>,
}

/// Who is calling: the credential's name, or None when no authentication is configured.
pub type Owner<'a> = Option<&'a str>;

/// True when a task (or context) owned by `owner` may be seen by `caller`.
fn visible(owner: &Option<String>, caller: Owner<'_>) -> bool {
    match (owner, caller) {
        (Some(o), Some(c)) => o == c,
        _ => true,
    }
}

tokio::task_local! {
    /// The W3C `traceparent` of the request being handled (set by the HTTP layer), passed to
    /// the CLI (`TRACEPARENT`) and kept in the task's metadata.
    pub static TRACEPARENT: Option<String>;
    /// The request activated the tool-trace extension: its turn adds typed tool and
    /// reasoning parts.
    pub static TOOL_TRACE: bool;
}

/// Whether the current request activated the tool-trace extension.
fn current_tool_trace() -> bool {
    TOOL_TRACE.try_with(|t| *t).unwrap_or(false)
}

/// The current request's `traceparent`, if any.
fn current_traceparent() -> Option<String> {
    TRACEPARENT.try_with(|t| t.clone()).ok().flatten()
}

/// Called with a task id after new events of that task were stored.
pub type UpdateHook = Arc<dyn Fn(&str) + Send + Sync>;

struct Inner {
    store: Arc<dyn TaskStore>,
    launch: Launch,
    config: EngineConfig,
    redactor: Redactor,
    state: Mutex<State>,
    turn_ended: Notify,
    hook: std::sync::OnceLock<UpdateHook>,
}

/// The task engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
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
    /// An engine with the default limits, whose agents work in the adapter's directory.
    pub fn new(store: Arc<dyn TaskStore>, launch: Launch) -> Engine {
        Engine::with_config(store, launch, EngineConfig::default())
    }

    pub fn with_config(
        store: Arc<dyn TaskStore>,
        launch: Launch,
        mut config: EngineConfig,
    ) -> Engine {
        if config.workspace_roots.is_empty() {
            let root = launch
                .cwd
                .canonicalize()
                .unwrap_or_else(|_| launch.cwd.clone());
            config.workspace_roots.push(root);
        }
        if config.input_modes.is_empty() {
            config.input_modes = input::default_input_modes();
        }
        let redactor = Redactor {
            workspace: config
                .workspace_roots
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
            secrets: config.secrets.clone(),
        };
        Engine {
            inner: Arc::new(Inner {
                store,
                launch,
                config,
                redactor,
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

    /// The host's limits this engine applies.
    pub fn host_limits(&self) -> &crate::settings::security::HostLimits {
        &self.inner.config.limits
    }

    /// Accepts a message from `owner`: starts (or queues) a new task, or answers a waiting
    /// one.
    pub async fn send(
        &self,
        req: SendMessageRequest,
        owner: Owner<'_>,
    ) -> Result<Accepted, A2AError> {
        let mut msg = req.message;
        input::validate_message(&msg, &self.inner.config.input_modes)?;
        if let Some(task_id) = msg.task_id.clone().filter(|t| !t.is_empty()) {
            task::validate_id("message.taskId", &task_id).map_err(A2AError::InvalidParams)?;
            return self.answer(&task_id, msg, owner).await;
        }
        let cwd = match input::requested_cwd(&msg, req.metadata.as_ref()) {
            Some(raw) => Some(self.check_cwd(&raw)?),
            None => None,
        };
        let context_id = match msg.context_id.clone().filter(|c| !c.is_empty()) {
            Some(c) => {
                task::validate_id("message.contextId", &c).map_err(A2AError::InvalidParams)?;
                c
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        let limits = &self.inner.config.limits;
        let context_cwd = {
            let st = lock(&self.inner.state);
            if st.shutting_down {
                return Err(A2AError::Busy("agent-host is shutting down".into()));
            }
            let ctx = st.contexts.get(&context_id);
            if let Some(ctx) = ctx {
                if !visible(&ctx.owner, owner) {
                    return Err(A2AError::InvalidParams(
                        "message.contextId belongs to a conversation of another caller; start a new one".into(),
                    ));
                }
                let current = ctx.cwd.clone().unwrap_or_else(|| self.default_cwd());
                if cwd.as_ref().is_some_and(|want| *want != current) {
                    return Err(A2AError::InvalidParams(
                        "metadata.cwd differs from the working directory of this conversation; a context keeps its directory".into(),
                    ));
                }
            }
            let must_wait =
                st.running_turns >= limits.max_running || ctx.is_some_and(|c| c.running.is_some());
            if must_wait && st.queued() >= limits.max_queued {
                return Err(A2AError::Busy(format!(
                    "agent-host is at capacity: {} tasks are waiting to start; retry later",
                    st.queued()
                )));
            }
            ctx.and_then(|c| c.cwd.clone())
        };
        let task_id = uuid::Uuid::new_v4().to_string();
        msg.task_id = Some(task_id.clone());
        msg.context_id = Some(context_id.clone());
        let work_dir = cwd
            .clone()
            .or(context_cwd)
            .unwrap_or_else(|| self.default_cwd());
        let attachments = attach::save(&work_dir, &task_id, &msg).await?;
        let prompt = input::prompt_of(&msg, Some(&attachments));
        let message_id = msg.message_id.clone();
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
        self.inner
            .store
            .create_owned(task, owner.map(str::to_string))
            .await
            .map_err(store_err)?;
        metrics::counter!("agent_host_tasks_created_total", "adapter" => self.inner.launch.adapter.id.clone())
            .increment(1);
        let (start, new_context) = {
            let mut st = lock(&self.inner.state);
            st.live.insert(
                task_id.clone(),
                Live {
                    context_id: context_id.clone(),
                    created: std::time::Instant::now(),
                    notify: Arc::new(watch::channel(1).0),
                    control: None,
                },
            );
            let new_context = !st.contexts.contains_key(&context_id);
            let ctx = st.contexts.entry(context_id.clone()).or_default();
            if new_context {
                ctx.owner = owner.map(str::to_string);
                ctx.cwd = cwd;
            }
            let record = new_context.then(|| ctx.record(&context_id));
            let pending = Pending {
                task_id: task_id.clone(),
                prompt,
                traceparent: current_traceparent(),
                tool_trace: current_tool_trace(),
                message_id,
                continuing: false,
            };
            if ctx.running.is_some() {
                ctx.queue.push_back(pending);
                tracing::info!(task = %task_id, context = %context_id, "queued behind the context's running turn");
                (None, record)
            } else {
                (self.start_or_wait(&mut st, &context_id, pending), record)
            }
        };
        if let Some(record) = new_context.filter(|r| r.owner.is_some() || r.cwd.is_some()) {
            if let Err(e) = self.inner.store.put_context(&record).await {
                tracing::error!(error = %e, "could not store a context");
            }
        }
        if let Some(t) = start {
            tokio::spawn(turn::run(self.inner.clone(), t));
        }
        Ok(Accepted {
            task_id,
            from_seq: 0,
            new_task: true,
        })
    }

    /// The adapter's working directory, canonical.
    fn default_cwd(&self) -> PathBuf {
        let cwd = &self.inner.launch.cwd;
        cwd.canonicalize().unwrap_or_else(|_| cwd.clone())
    }

    /// Checks a working directory a message asks for: absolute, existing, a directory, and
    /// (symlinks resolved) inside one of the allowed roots.
    fn check_cwd(&self, raw: &str) -> Result<PathBuf, A2AError> {
        let bad = |why: &str| A2AError::InvalidParams(format!("metadata.cwd {why}"));
        let p = std::path::Path::new(raw);
        if !p.is_absolute() {
            return Err(bad("must be an absolute path"));
        }
        let canon = p
            .canonicalize()
            .map_err(|_| bad("does not exist or cannot be read"))?;
        if !canon.is_dir() {
            return Err(bad("is not a directory"));
        }
        if !self
            .inner
            .config
            .workspace_roots
            .iter()
            .any(|root| canon.starts_with(root))
        {
            return Err(bad(
                "is outside the directories this host allows (workspace roots)",
            ));
        }
        Ok(canon)
    }

    /// Occupies the context with `p`, and starts it if a slot is free (else it waits for
    /// one in `ready`).
    fn start_or_wait(&self, st: &mut State, context_id: &str, p: Pending) -> Option<turn::Turn> {
        if let Some(ctx) = st.contexts.get_mut(context_id) {
            ctx.running = Some(p.task_id.clone());
        }
        if st.running_turns >= self.inner.config.limits.max_running {
            tracing::info!(task = %p.task_id, "waiting for a free slot (max running tasks)");
            st.ready.push_back((context_id.to_string(), p));
            Inner::gauge_load(st);
            return None;
        }
        st.running_turns += 1;
        Inner::gauge_load(st);
        Some(self.prepare_turn(st, context_id, p))
    }

    /// Sets up a turn for a task whose context is free: control channel, session args,
    /// working directory.
    fn prepare_turn(&self, st: &mut State, context_id: &str, p: Pending) -> turn::Turn {
        let Pending {
            task_id,
            prompt,
            traceparent,
            tool_trace,
            message_id,
            continuing,
        } = p;
        let task_id = task_id.as_str();
        let launch = &self.inner.launch;
        let ctx = st.contexts.entry(context_id.to_string()).or_default();
        let session = match &ctx.session {
            Some(s) if launch.can_resume() => SessionArgs::Resume(s.clone()),
            _ if launch.host_chooses_session() => {
                SessionArgs::New(uuid::Uuid::new_v4().to_string())
            }
            _ => SessionArgs::None,
        };
        let cwd = ctx.cwd.clone().unwrap_or_else(|| launch.cwd.clone());
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
            message_id,
            session,
            cwd,
            notify,
            control: rx,
            continuing,
            traceparent,
            tool_trace,
        }
    }

    /// A message with `taskId`: the answer to a task waiting for input.
    async fn answer(
        &self,
        task_id: &str,
        mut msg: crate::protocol::v1::Message,
        owner: Owner<'_>,
    ) -> Result<Accepted, A2AError> {
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
                return self
                    .answer_after_restart(task_id, &snap.task.context_id, msg)
                    .await
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
        // Follow from before the answer: an agent may answer and wait again (or end) before
        // a snapshot taken now, and a blocking send would then wait for an event already
        // logged.
        Ok(Accepted {
            task_id: task_id.to_string(),
            from_seq: snap.last_seq,
            new_task: false,
        })
    }

    async fn snapshot(&self, task_id: &str) -> Result<Snapshot, A2AError> {
        self.inner
            .store
            .get(task_id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| A2AError::TaskNotFound(task_id.to_string()))
    }

    /// The task as `owner` may see it: another caller's task is not found.
    async fn snapshot_for(&self, task_id: &str, owner: Owner<'_>) -> Result<Snapshot, A2AError> {
        task::validate_id("id", task_id)
            .map_err(|_| A2AError::TaskNotFound(task_id.to_string()))?;
        let snap = self.snapshot(task_id).await?;
        if !visible(&snap.owner, owner) {
            return Err(A2AError::TaskNotFound(task_id.to_string()));
        }
        Ok(snap)
    }

    /// The task, with at most `history_length` messages of history.
    pub async fn get(
        &self,
        task_id: &str,
        history_length: Option<i32>,
        owner: Owner<'_>,
    ) -> Result<Task, A2AError> {
        if let Some(n) = history_length {
            if n < 0 {
                return Err(A2AError::InvalidParams(
                    "historyLength must not be negative".into(),
                ));
            }
        }
        let snap = self.snapshot_for(task_id, owner).await?;
        Ok(task::view(&snap.task, history_length, true))
    }

    /// The task and the sequence number it reflects.
    pub async fn get_snapshot(
        &self,
        task_id: &str,
        owner: Owner<'_>,
    ) -> Result<Snapshot, A2AError> {
        self.snapshot_for(task_id, owner).await
    }

    /// Whether this engine holds the task, whoever owns it (for routing between engines; the
    /// engine that holds it still checks the caller).
    pub async fn has_task(&self, task_id: &str) -> bool {
        task::validate_id("id", task_id).is_ok() && self.snapshot(task_id).await.is_ok()
    }

    /// Lists the caller's tasks, newest status first.
    pub async fn list(
        &self,
        req: ListTasksRequest,
        owner: Owner<'_>,
    ) -> Result<ListTasksResponse, A2AError> {
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
        let status_after = match &req.status_timestamp_after {
            Some(ts) => Some(
                chrono::DateTime::parse_from_rfc3339(ts)
                    .map_err(|_| {
                        A2AError::InvalidParams(format!(
                            "statusTimestampAfter '{ts}' is not an ISO 8601 timestamp"
                        ))
                    })?
                    .with_timezone(&chrono::Utc)
                    .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                    .to_string(),
            ),
            None => None,
        };
        let query = ListQuery {
            owner: owner.map(str::to_string),
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
    pub async fn cancel(&self, task_id: &str, owner: Owner<'_>) -> Result<Task, A2AError> {
        let snap = self.snapshot_for(task_id, owner).await?;
        if snap.task.status.state.is_terminal() {
            return Err(A2AError::TaskNotCancelable(format!(
                "task {task_id} is already {} and cannot be canceled",
                state_word(snap.task.status.state)
            )));
        }
        enum Action {
            /// Not running a process: queued, waiting for a slot, or waiting for an answer
            /// after a restart.
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
                    st.ready.retain(|(_, p)| p.task_id != task_id);
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
                    // is canceled: the CLI's own interrupt (up to a grace period), SIGTERM
                    // (another), then the SIGKILL round.
                    let _ = tokio::time::timeout(grace * 2 + Duration::from_secs(5), rx).await;
                }
            }
        }
        let snap = self.snapshot(task_id).await?;
        Ok(task::view(&snap.task, None, true))
    }

    /// A client's stream of a task's log from after `after`: counted against the task's
    /// subscriber limit.
    pub async fn subscribe(
        &self,
        task_id: &str,
        after: u64,
        owner: Owner<'_>,
    ) -> Result<EventStream, A2AError> {
        self.snapshot_for(task_id, owner).await?;
        let slot = {
            let mut st = lock(&self.inner.state);
            let n = st.subscribers.entry(task_id.to_string()).or_insert(0);
            if *n >= self.inner.config.limits.max_subscribers {
                return Err(A2AError::Busy(format!(
                    "task {task_id} already has {n} streams following it; close one and retry"
                )));
            }
            *n += 1;
            metrics::gauge!("agent_host_sse_subscribers").increment(1.0);
            SubscriberSlot {
                inner: self.inner.clone(),
                task_id: task_id.to_string(),
            }
        };
        let mut s = self.follow(task_id, after);
        s._slot = Some(slot);
        Ok(s)
    }

    /// Follows a task's log from after `after` (the caller checked the task exists).
    fn follow(&self, task_id: &str, after: u64) -> EventStream {
        // Subscribe to the watch before reading the store, so no wake-up is missed.
        let rx = {
            let st = lock(&self.inner.state);
            st.live.get(task_id).map(|l| l.notify.subscribe())
        };
        EventStream {
            store: self.inner.store.clone(),
            task_id: task_id.to_string(),
            cursor: after,
            rx,
            buf: VecDeque::new(),
            done: false,
            hidden_through: 0,
            _slot: None,
        }
    }

    /// Waits until the task is terminal or waits for input (following from `after`), and
    /// returns it.
    pub async fn wait_settled(
        &self,
        task_id: &str,
        after: u64,
        owner: Owner<'_>,
    ) -> Result<Snapshot, A2AError> {
        self.snapshot_for(task_id, owner).await?;
        let mut s = self.follow(task_id, after);
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
            let mut queued: Vec<(String, String)> = st
                .ready
                .drain(..)
                .map(|(ctx, p)| (p.task_id, ctx))
                .collect();
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
            }
            Err(e) => tracing::error!(task = %task_id, error = %e, "could not store task events"),
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

    /// Publishes the running and queued counts.
    fn gauge_load(st: &State) {
        metrics::gauge!("agent_host_running_tasks").set(st.running_turns as f64);
        metrics::gauge!("agent_host_queued_tasks").set(st.queued() as f64);
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

    /// A task that held its context ended: forget it, free its slot if it had a process,
    /// start the context's next turn and any turn waiting for a slot.
    fn finish_turn(self: &Arc<Self>, task_id: &str, context_id: &str) {
        let engine = Engine {
            inner: self.clone(),
        };
        let turns = {
            let mut st = lock(&self.state);
            let had_process = st.live.remove(task_id).is_some_and(|l| l.control.is_some());
            if had_process {
                st.running_turns = st.running_turns.saturating_sub(1);
            }
            let shutting_down = st.shutting_down;
            let mut turns = Vec::new();
            let next = match st.contexts.get_mut(context_id) {
                Some(ctx) => {
                    ctx.running = None;
                    let next = if shutting_down {
                        None
                    } else {
                        ctx.queue.pop_front()
                    };
                    if next.is_none() && ctx.session.is_none() && ctx.queue.is_empty() {
                        st.contexts.remove(context_id);
                    }
                    next
                }
                None => None,
            };
            if let Some(p) = next {
                turns.extend(engine.start_or_wait(&mut st, context_id, p));
            }
            while !shutting_down && st.running_turns < self.config.limits.max_running {
                let Some((ctx, p)) = st.ready.pop_front() else {
                    break;
                };
                st.running_turns += 1;
                turns.push(engine.prepare_turn(&mut st, &ctx, p));
            }
            Inner::gauge_load(&st);
            turns
        };
        self.turn_ended.notify_waiters();
        for t in turns {
            tokio::spawn(turn::run(self.clone(), t));
        }
    }

    /// Remembers the CLI session of a context, for resuming it on the next turn.
    async fn set_session(&self, context_id: &str, session_id: &str) {
        let record = {
            let mut st = lock(&self.state);
            let ctx = st.contexts.entry(context_id.to_string()).or_default();
            ctx.session = Some(session_id.to_string());
            ctx.record(context_id)
        };
        if let Err(e) = self.store.put_context(&record).await {
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
