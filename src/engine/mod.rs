//! The task engine: accepts messages, runs turns, answers queries, cancels, shuts down.
//!
//! A message without `taskId` creates a task (one turn). Turns of one context run one at a
//! time (a follow-up that arrives while a turn runs is queued); different contexts run
//! concurrently. Each running turn is owned by one tokio task (`turn.rs`) that owns the CLI
//! process; everyone else talks to it through a control channel. Every change to a task is
//! appended to the store and announced on the task's watch channel; subscribers read the log
//! from their own position, so a slow subscriber never blocks the CLI and never misses events.
//!
//! Files: `schedule` decides which turn runs when (no I/O; the engine holds it under its one
//! lock); `turn` drives one turn through a [`child::Child`]; `answer` relays answers;
//! `cancel` cancels tasks; `stream` follows a task's log; `publish` appends and wakes;
//! `query` reads tasks; `recover` picks up after a previous host; `cluster` is the engine
//! as one of several hosts on a shared store (leases, takeover, other hosts' tasks);
//! `forward` passes commands for another host's task or context to that host.

mod answer;
mod attach;
mod cancel;
pub mod changes;
pub mod child;
mod cluster;
pub mod config;
mod controls;
mod deadline;
mod forward;
pub mod input;
pub mod launch;
mod proxy;
mod publish;
mod query;
mod recover;
mod schedule;
mod stream;
mod turn;
mod workspaces;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch, Notify};

use crate::protocol::v1::{SendMessageRequest, Task, TaskState};
use crate::protocol::A2AError;
use crate::store::{StoreError, TaskStore};
use crate::task;

pub use cluster::ClusterRole;
pub use forward::{Forwarder, Relay};
pub use launch::{Launch, PromptRoute, SessionArgs};
pub use recover::Recovery;
pub use stream::EventStream;

use crate::task::Redactor;
pub use config::HostLimits;
use schedule::{Pending, Refusal, Scheduler, Start};
use std::path::PathBuf;

/// Messages to a running turn.
enum Control {
    /// A message for the task: the answer to the pending approval, or (while the agent
    /// works) a message passed to it when its protocol takes one. Acknowledged with the
    /// sequence number of the stored message. The message is boxed: a tokio channel
    /// allocates its slots 32 at a time, so an unboxed message (about 170 bytes) cost every
    /// live task a 5.6 KiB block for a channel that rarely carries anything.
    Reply(
        Box<crate::protocol::v1::Message>,
        oneshot::Sender<Result<u64, A2AError>>,
    ),
    /// Stop the CLI; the task ends canceled.
    Cancel(oneshot::Sender<()>),
    /// Stop the CLI; the host is shutting down.
    Shutdown,
}

/// A task that has not reached a terminal state.
struct Live {
    /// When the task was accepted (for the duration metric).
    created: std::time::Instant,
    notify: Arc<watch::Sender<u64>>,
    control: Option<mpsc::UnboundedSender<Control>>,
    /// Held while an answer (or a cancel) to the task is handled: answers to one task are
    /// taken one at a time, each seeing the task as the one before left it. Without it,
    /// concurrent answers to a task waiting with no program (parked at its budget, or
    /// waiting since a restart) were all accepted, each starting a turn.
    answering: Arc<tokio::sync::Mutex<()>>,
}

impl Live {
    fn new(last_seq: u64) -> Live {
        Live {
            created: std::time::Instant::now(),
            notify: Arc::new(watch::channel(last_seq).0),
            control: None,
            answering: Arc::default(),
        }
    }
}

struct State {
    /// Contexts, queues and slots.
    sched: Scheduler,
    /// Channels of the tasks not yet terminal.
    live: HashMap<String, Live>,
    /// Streams following each task.
    subscribers: HashMap<String, usize>,
}

/// What a request tells the engine besides its message (set by the HTTP layer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestOptions {
    /// The W3C `traceparent` of the request, passed to the CLI (`TRACEPARENT`) and kept in
    /// the task's metadata.
    pub traceparent: Option<String>,
    /// The request activated the tool-trace extension: its turn adds typed tool and
    /// reasoning parts.
    pub tool_trace: bool,
    /// What a command passed to another host carries with it (`forward`).
    pub relay: Relay,
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
    /// A git workspace per context ([`crate::workspace`]); None: every turn works in its
    /// folder.
    pub workspaces: Option<Arc<crate::workspace::Workspaces>>,
    /// A CLI home per context ([`crate::home`]), used when the adapter's sandbox keeps the
    /// CLI's state per context; None: the host user's.
    pub homes: Option<Arc<crate::home::Homes>>,
    /// Approval rule sets and budgets (the adapter's `on_budget` already applied).
    pub controls: Arc<crate::policy::Controls>,
}

/// Who is calling: the credential's name, or None when no authentication is configured.
pub type Owner<'a> = Option<&'a str>;

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
    /// Starts each turn's program.
    spawner: Arc<dyn child::Spawner>,
    /// Whether the store takes writes; ends that could not be stored.
    health: Arc<publish::StoreHealth>,
    /// This host among several on a shared store (`cluster`), once joined.
    cluster: std::sync::OnceLock<ClusterRole>,
    /// Carries commands to the hosts that own their tasks (`forward`), once set.
    forwarder: std::sync::OnceLock<Arc<dyn Forwarder>>,
    /// Every working directory this engine's tasks were given (the default one, those
    /// messages chose, those of restored contexts): each turn hides the attachments saved in
    /// all of them but its own, wherever its own working directory lies.
    work_dirs: Mutex<std::collections::BTreeSet<std::path::PathBuf>>,
}

impl Inner {
    /// Notes a working directory a task was given ([`Inner::work_dirs`]).
    fn note_work_dir(&self, dir: &std::path::Path) {
        let mut all = self
            .work_dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !all.contains(dir) {
            all.insert(dir.to_path_buf());
        }
    }

    /// The working directories tasks were given.
    fn work_dirs(&self) -> Vec<std::path::PathBuf> {
        self.work_dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
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
    /// Carried out by the host that owns the task or context (`forward`), which also took
    /// the message's push config.
    pub elsewhere: bool,
}

fn store_err(e: StoreError) -> A2AError {
    match e {
        StoreError::NotFound(id) => A2AError::TaskNotFound(id),
        StoreError::BadPageToken => A2AError::InvalidParams("pageToken is not valid".into()),
        other => A2AError::Internal(other.to_string()),
    }
}

/// The error a refused send gets.
fn refusal(r: Refusal) -> A2AError {
    match r {
        Refusal::ShuttingDown => A2AError::Busy("agent-host is shutting down".into()),
        Refusal::NotOwner => A2AError::InvalidParams(
            "message.contextId belongs to a conversation of another caller; start a new one"
                .into(),
        ),
        Refusal::CwdDiffers => A2AError::InvalidParams(
            "metadata.cwd differs from the working directory of this conversation; a context keeps its directory".into(),
        ),
        Refusal::Busy { queued } => A2AError::Busy(format!(
            "agent-host is at capacity: {queued} tasks are waiting to start; retry later"
        )),
    }
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // A panic while holding this lock leaves maps that are still consistent (every update is
    // a single insert or remove), so continuing with the inner value is safe.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A new task being created: what [`Engine::send`] checked and reserved for it.
struct NewTask<'a> {
    task_id: &'a str,
    context_id: &'a str,
    /// The working directory the request asked for, checked.
    cwd: Option<&'a PathBuf>,
    ticket: &'a schedule::Ticket,
    /// The request's metadata.
    request: Option<&'a crate::protocol::v1::Metadata>,
    controls: &'a crate::policy::TaskControls,
    owner: Owner<'a>,
}

impl Engine {
    /// An engine with the default limits, whose agents work in the adapter's directory.
    pub fn new(store: Arc<dyn TaskStore>, launch: Launch) -> Engine {
        Engine::with_config(store, launch, EngineConfig::default())
    }

    pub fn with_config(store: Arc<dyn TaskStore>, launch: Launch, config: EngineConfig) -> Engine {
        Engine::with_spawner(store, launch, config, Arc::new(child::ProcessSpawner))
    }

    /// An engine whose turns start their program through `spawner` (tests: a scripted
    /// child instead of a process).
    pub fn with_spawner(
        store: Arc<dyn TaskStore>,
        launch: Launch,
        mut config: EngineConfig,
        spawner: Arc<dyn child::Spawner>,
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
        let launch_cwd = launch.cwd.clone();
        let sched = Scheduler::new(
            config.limits.max_running,
            config.limits.max_queued,
            config.limits.max_live,
        );
        Engine {
            inner: Arc::new(Inner {
                store,
                launch,
                config,
                redactor,
                state: Mutex::new(State {
                    sched,
                    live: HashMap::new(),
                    subscribers: HashMap::new(),
                }),
                turn_ended: Notify::new(),
                hook: std::sync::OnceLock::new(),
                spawner,
                health: Arc::default(),
                cluster: std::sync::OnceLock::new(),
                forwarder: std::sync::OnceLock::new(),
                work_dirs: Mutex::new(std::iter::once(launch_cwd).collect()),
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

    /// The approval rule sets and budgets this engine applies.
    pub fn controls(&self) -> &crate::policy::Controls {
        &self.inner.config.controls
    }

    /// The host's limits this engine applies.
    pub fn host_limits(&self) -> &HostLimits {
        &self.inner.config.limits
    }

    /// Accepts a message from `owner`: starts (or queues) a new task, or answers a waiting
    /// one. `opts` carries what the request says besides the message.
    pub async fn send(
        &self,
        req: SendMessageRequest,
        owner: Owner<'_>,
        opts: &RequestOptions,
    ) -> Result<Accepted, A2AError> {
        // A task or context of another live host: carried out there.
        if let Some(acc) = self.forward_send(&req, owner, opts).await? {
            return Ok(acc);
        }
        let mut msg = req.message;
        input::validate_message(&msg, &self.inner.config.input_modes)?;
        input::check_file_count(&msg, self.inner.config.limits.max_files_per_message)?;
        if let Some(task_id) = msg.task_id.clone().filter(|t| !t.is_empty()) {
            task::check_id("message.taskId", &task_id)?;
            return self.answer(&task_id, msg, owner, opts).await;
        }
        // A reply that names only its context answers the context's task that waits for
        // input (the flow of the coding-agent-a2a API): queued behind it, it would wait forever.
        if let Some(waiting) = self
            .waiting_task_of(msg.context_id.as_deref(), owner)
            .await?
        {
            return self.answer(&waiting, msg, owner, opts).await;
        }
        let request = req.metadata.as_ref();
        // The rules and budget it asks for: checked before anything starts.
        let controls = self.request_controls(&msg, request)?;
        let cwd = match input::requested_cwd(&msg, request)? {
            Some(raw) => Some(self.check_cwd(&raw)?),
            None => None,
        };
        // Its type checked here, before anything starts; it is used once the context's
        // workspace is made.
        input::requested_base_ref(&msg, request)?;
        let context_id = match msg.context_id.clone().filter(|c| !c.is_empty()) {
            Some(c) => {
                task::check_id("message.contextId", &c)?;
                c
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        // One of several hosts: a context this host does not know may be another host's,
        // taken over (or about to be): its session, owner and folder are read from the store.
        self.adopt_stored_context(&context_id).await?;
        // Checked and reserved in one step: ownership of a new context, and a place within
        // the running and queued limits.
        let ticket = {
            let default_cwd = self.default_cwd();
            let mut st = lock(&self.inner.state);
            st.sched
                .admit(&context_id, owner, cwd.as_ref(), &default_cwd)
                .map_err(refusal)?
        };
        let task_id = uuid::Uuid::new_v4().to_string();
        msg.task_id = Some(task_id.clone());
        msg.context_id = Some(context_id.clone());
        let new = NewTask {
            task_id: &task_id,
            context_id: &context_id,
            cwd: cwd.as_ref(),
            ticket: &ticket,
            request,
            controls: &controls,
            owner,
        };
        match self.create_task(&new, msg).await {
            Ok((prompt, message_id)) => {
                let pending = Pending {
                    task_id: task_id.clone(),
                    prompt,
                    traceparent: opts.traceparent.clone(),
                    tool_trace: opts.tool_trace,
                    message_id,
                    continuing: false,
                };
                self.enqueue_new(ticket, pending, &context_id).await;
                Ok(Accepted {
                    task_id,
                    from_seq: 0,
                    new_task: true,
                    elsewhere: false,
                })
            }
            Err(e) => {
                // Its place given back: the turns it held back may start.
                let new_context = ticket.new_context.is_some();
                let (turns, forgotten) = {
                    let mut st = lock(&self.inner.state);
                    let starts = st.sched.release(ticket);
                    let forgotten = new_context && !st.sched.knows(&context_id);
                    (self.inner.prepare(&mut st, starts), forgotten)
                };
                self.inner.spawn(turns);
                if forgotten {
                    self.drop_unused_workspace(&context_id).await;
                }
                Err(e)
            }
        }
    }

    /// Stores the new task of `msg`: its working directory (and a new context's workspace)
    /// made, its prompt checked, its attachments saved. The turn's prompt and message id.
    async fn create_task(
        &self,
        new: &NewTask<'_>,
        msg: crate::protocol::v1::Message,
    ) -> Result<(String, String), A2AError> {
        let (task_id, context_id) = (new.task_id, new.context_id);
        // A prompt that names no saved attachment does not depend on the folder: checked
        // before a new context's workspace is made for it.
        if input::attachments(&msg).is_empty() {
            self.inner
                .launch
                .check_prompt(&input::prompt_of(&msg, None))?;
        }
        let (work_dir, source_dirty) = self.work_dir_of(new, &msg).await?;
        self.inner.note_work_dir(&work_dir);
        // The prompt as the turn will have it (attachments named by where they are saved).
        let saved_at = input::attachments_dir(&work_dir, task_id);
        self.inner
            .launch
            .check_prompt(&input::prompt_of(&msg, Some(&saved_at)))?;
        let run_as = self
            .inner
            .launch
            .sandbox
            .as_ref()
            .and_then(|p| p.run_as.as_ref());
        let attachments = attach::save(&work_dir, task_id, &msg, run_as).await?;
        let prompt = input::prompt_of(&msg, Some(&attachments));
        let message_id = msg.message_id.clone();
        let created_at = task::now_timestamp();
        let known_context = new.ticket.new_context.is_none();
        // When it was created, for the durations clients show (the status timestamp
        // moves on with every update), beside the budgets and rules it runs under.
        let mut metadata = self
            .controls_metadata(new.controls, context_id, known_context)
            .await
            .unwrap_or_default();
        metadata.insert(
            "createdAt".to_string(),
            serde_json::Value::String(created_at.clone()),
        );
        if source_dirty {
            // The workspace started from the base commit, without the source's uncommitted
            // changes (the `changes` artifact says so too).
            metadata.insert("sourceDirty".to_string(), serde_json::Value::Bool(true));
        }
        let task = Task {
            id: task_id.to_string(),
            context_id: context_id.to_string(),
            status: crate::protocol::v1::TaskStatus {
                state: TaskState::Submitted,
                // What it waits for, when it does not start at once.
                message: new.ticket.wait.as_ref().map(|w| {
                    crate::protocol::v1::Message::agent(
                        vec![crate::protocol::v1::Part::text(why_it_waits(w))],
                        task_id,
                        context_id,
                    )
                }),
                timestamp: Some(created_at),
            },
            history: vec![msg],
            metadata: Some(metadata),
            ..Task::default()
        };
        self.inner
            .store
            .create_owned(task, new.owner.map(str::to_string))
            .await
            .map_err(store_err)?;
        Ok((prompt, message_id))
    }

    /// The folder a new task's turn works in: the requested one, else its context's
    /// (checked again: replaced by a symbolic link since, it would lead the turn outside the
    /// roots), else the adapter's; in a workspace, the same place in the context's checkout
    /// (a new context's workspace is made now, so a bad base is refused before anything
    /// starts). With it, whether the workspace's source had uncommitted changes.
    async fn work_dir_of(
        &self,
        new: &NewTask<'_>,
        msg: &crate::protocol::v1::Message,
    ) -> Result<(PathBuf, bool), A2AError> {
        let default_cwd = self.default_cwd();
        let work_dir = match (new.cwd, &new.ticket.context_cwd) {
            (Some(c), _) => c.clone(),
            // The host's own folder is not a caller's choice: no roots to check it against.
            // A context with a workspace works in the same place in its checkout, which
            // holds it whatever became of it in the source (checked out away, removed):
            // the source's folder only names that place, and is not entered.
            (None, Some(c)) if *c != default_cwd => {
                if self.has_workspace(new.context_id).await {
                    c.clone()
                } else {
                    self.recheck_cwd(c)?
                }
            }
            (None, _) => default_cwd,
        };
        let base = input::requested_base_ref(msg, new.request)?;
        // A base asked for where no workspace is made would be ignored: refused instead.
        let unusable = |why: String| {
            A2AError::InvalidParams(format!(
                "metadata.baseRef needs a workspace of the context's own, and {why}"
            ))
        };
        let Some(all) = &self.inner.config.workspaces else {
            return match base {
                Some(_) => Err(unusable(
                    "this agent's contexts work in the folder itself (workspace = \"shared\")"
                        .into(),
                )),
                None => Ok((work_dir, false)),
            };
        };
        let asked = base.is_some();
        match changes::workspace_for(all, new.context_id, &work_dir, base).await? {
            Some(ws) => Ok((ws.map_cwd(&work_dir), ws.source_dirty)),
            None if asked => Err(unusable(format!(
                "{} is not in a git repository",
                work_dir.display()
            ))),
            None => Ok((work_dir, false)),
        }
    }

    /// Removes the workspace of a context that a refused first message made and that has no
    /// task (nothing else of it is known here): it would count against `--max-workspaces`,
    /// and neither retention nor `tasks prune`, which go by tasks, would ever remove it.
    async fn drop_unused_workspace(&self, context_id: &str) {
        let Some(all) = self.inner.config.workspaces.clone() else {
            return;
        };
        let query = crate::store::ListQuery {
            context_id: Some(context_id.to_string()),
            page_size: 1,
            ..crate::store::ListQuery::default()
        };
        match self.inner.store.list(&query, false).await {
            Ok(page) if page.tasks.is_empty() => {}
            Ok(_) => return,
            Err(e) => {
                tracing::warn!(context = %context_id, error = %e,
                    "cannot tell whether a refused context has tasks; its workspace is kept");
                return;
            }
        }
        let id = context_id.to_string();
        match tokio::task::spawn_blocking(move || all.remove(&id)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(context = %context_id, error = %e,
                    "the workspace of a refused context could not be removed");
            }
            Err(e) => tracing::error!(error = %e, "removing a refused context's workspace failed"),
        }
    }

    /// Queues a stored new task's turn (it starts now when its context and the limits let
    /// it) and stores the context it created.
    async fn enqueue_new(&self, ticket: schedule::Ticket, pending: Pending, context_id: &str) {
        metrics::counter!("agent_host_tasks_created_total", "adapter" => self.inner.launch.adapter.id.clone())
            .increment(1);
        let new_context = ticket.new_context.clone();
        let task_id = pending.task_id.clone();
        let turns = {
            let mut st = lock(&self.inner.state);
            st.live.insert(task_id.clone(), Live::new(1));
            let starts = st.sched.enqueue(ticket, pending);
            if !starts.iter().any(|s| s.pending.task_id == task_id) {
                tracing::info!(task = %task_id, context = %context_id, "waiting for the context's running turn or a free slot");
            }
            self.inner.prepare(&mut st, starts)
        };
        if let Some(record) = new_context {
            if let Err(e) = self.inner.store.put_context(&record).await {
                tracing::error!(error = %e, "could not store a context");
            }
        }
        self.inner.spawn(turns);
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
        if let Some(own) = self.host_folder_holding(&canon) {
            return Err(bad(&format!(
                "is inside {}, agent-host's own folder (workspaces, CLI homes, the task store), which no task may work in",
                own.display()
            )));
        }
        if let Some(git_dir) = crate::workspace::git_folder_holding(&canon) {
            return Err(bad(&format!(
                "is inside {}, a repository's git folder, which no task may work in (name the repository's work tree instead)",
                git_dir.display()
            )));
        }
        Ok(canon)
    }

    /// The host's own folder (the workspaces', the CLI homes', the store's: what the sandbox
    /// hides) that holds `dir`, if one does: a task made to work there would see, or be made
    /// a workspace from, another context's files.
    fn host_folder_holding(&self, dir: &std::path::Path) -> Option<PathBuf> {
        let config = &self.inner.config;
        let workspaces = config.workspaces.as_ref().map(|w| w.root().to_path_buf());
        let homes = config.homes.as_ref().map(|h| h.root().to_path_buf());
        let hidden = self
            .inner
            .launch
            .sandbox
            .iter()
            .flat_map(|p| p.hide.iter().cloned());
        workspaces
            .into_iter()
            .chain(homes)
            .chain(hidden)
            .map(|h| h.canonicalize().unwrap_or(h))
            .find(|h| dir.starts_with(h))
    }

    /// Checks a conversation's directory (chosen and checked at its first turn) again: still
    /// a directory inside the roots, and still itself with symbolic links resolved. Its
    /// errors name the conversation's directory, not `metadata.cwd`: the message being
    /// refused may have sent none.
    fn recheck_cwd(&self, dir: &std::path::Path) -> Result<PathBuf, A2AError> {
        let again = self
            .check_cwd(&dir.to_string_lossy())
            .map_err(|e| match e {
                A2AError::InvalidParams(why) => A2AError::InvalidParams(remembered_cwd(dir, &why)),
                other => other,
            })?;
        if again != dir {
            return Err(A2AError::InvalidParams(format!(
                "the working directory of this conversation, {}, changed (a symbolic link?); start a new conversation",
                dir.display()
            )));
        }
        Ok(again)
    }

    /// Whether the context has a workspace on this host (a lookup that fails counts as
    /// none: the folder is then checked as without one).
    async fn has_workspace(&self, context_id: &str) -> bool {
        let Some(all) = self.inner.config.workspaces.clone() else {
            return false;
        };
        let id = context_id.to_string();
        matches!(
            tokio::task::spawn_blocking(move || all.get(&id)).await,
            Ok(Ok(Some(_)))
        )
    }

    /// Turns running now and turns waiting for a slot or their context.
    pub fn load(&self) -> (usize, usize) {
        let st = lock(&self.inner.state);
        (st.sched.running(), st.sched.queued())
    }

    /// The directories a message may choose as its working directory.
    pub fn workspace_roots(&self) -> &[PathBuf] {
        &self.inner.config.workspace_roots
    }

    /// Number of tasks not yet terminal (queued, running or waiting for input).
    pub fn live_count(&self) -> usize {
        lock(&self.inner.state).live.len()
    }
}

impl Inner {
    /// Waits for the task's turn to take an answer or a cancel ([`Live::answering`]); None
    /// for a task not live here.
    async fn answering(&self, task_id: &str) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        let m = lock(&self.state)
            .live
            .get(task_id)
            .map(|l| l.answering.clone())?;
        Some(m.lock_owned().await)
    }

    /// Publishes the running and queued counts.
    fn gauge_load(st: &State) {
        metrics::gauge!("agent_host_running_tasks").set(st.sched.running() as f64);
        metrics::gauge!("agent_host_queued_tasks").set(st.sched.queued() as f64);
        metrics::gauge!("agent_host_waiting_tasks").set(st.sched.waiting() as f64);
    }

    /// A task that held its context ended: forget it, free its slot if it had one, start
    /// the context's next turn and any turn waiting for a slot.
    fn finish_turn(self: &Arc<Self>, task_id: &str) {
        let turns = {
            let mut st = lock(&self.state);
            st.live.remove(task_id);
            let starts = st.sched.finish(task_id);
            self.prepare(&mut st, starts)
        };
        self.turn_ended.notify_waiters();
        self.spawn(turns);
    }

    /// A turn stopped at a budget that asks: its task waits for the answer with no program
    /// (as one waiting since before a restart), keeping its context; its slot is freed.
    fn park_turn(self: &Arc<Self>, task_id: &str) {
        let turns = {
            let mut st = lock(&self.state);
            if let Some(live) = st.live.get_mut(task_id) {
                live.control = None;
            }
            let starts = st.sched.park(task_id);
            self.prepare(&mut st, starts)
        };
        self.turn_ended.notify_waiters();
        self.spawn(turns);
    }

    /// Sets up the turns the scheduler started: control channel, session args, working
    /// directory. Called under the same lock as the scheduler, so that a started task always
    /// has its control channel.
    fn prepare(&self, st: &mut State, starts: Vec<Start>) -> Vec<turn::Turn> {
        let launch = &self.launch;
        let turns = starts
            .into_iter()
            .map(|start| {
                let Start {
                    context_id,
                    pending,
                    session,
                    cwd,
                } = start;
                let session = match session {
                    Some(s) if launch.can_resume() => SessionArgs::Resume(s),
                    _ if launch.host_chooses_session() => {
                        SessionArgs::New(uuid::Uuid::new_v4().to_string())
                    }
                    _ => SessionArgs::None,
                };
                let (tx, rx) = mpsc::unbounded_channel();
                let live = st
                    .live
                    .entry(pending.task_id.clone())
                    .or_insert_with(|| Live::new(0));
                live.control = Some(tx);
                turn::Turn {
                    task_id: pending.task_id,
                    context_id,
                    prompt: pending.prompt,
                    message_id: pending.message_id,
                    session,
                    cwd: cwd.unwrap_or_else(|| launch.cwd.clone()),
                    notify: live.notify.clone(),
                    control: rx,
                    continuing: pending.continuing,
                    traceparent: pending.traceparent,
                    tool_trace: pending.tool_trace,
                }
            })
            .collect();
        Inner::gauge_load(st);
        turns
    }

    /// Runs each turn in its own tokio task.
    fn spawn(self: &Arc<Self>, turns: Vec<turn::Turn>) {
        for t in turns {
            tokio::spawn(turn::run(self.clone(), Box::new(t)));
        }
    }

    /// Tells the scheduler when a turn's agent starts or stops waiting for an answer (`was`:
    /// it waited until now), and sets or clears the question's expiry; returns whether it
    /// waits now. A waiting turn gives its running slot back (see `schedule`).
    fn track_question(
        self: &Arc<Self>,
        task_id: &str,
        was: bool,
        state: TaskState,
        deadlines: &mut deadline::Deadlines,
    ) -> bool {
        let now = state.is_interrupted();
        if now == was {
            return was;
        }
        let expiry = self.config.limits.input_timeout;
        deadlines.input = (now && !expiry.is_zero())
            .then(|| deadline::after(tokio::time::Instant::now(), expiry));
        let turns = {
            let mut st = lock(&self.state);
            let starts = if now {
                st.sched.wait_for_answer(task_id)
            } else {
                st.sched.answered(task_id);
                Vec::new()
            };
            self.prepare(&mut st, starts)
        };
        self.spawn(turns);
        now
    }

    /// Remembers the CLI session of a context, for resuming it on the next turn.
    async fn set_session(&self, context_id: &str, session_id: &str) {
        let record = lock(&self.state).sched.set_session(context_id, session_id);
        match self.store.put_context(&record).await {
            Ok(()) => {}
            Err(e) if e.is_not_owner() => {
                tracing::warn!(context = %context_id, error = %e, "another host owns this context now; its session from this host is not stored");
                self.reload_context(context_id).await;
            }
            Err(e) => {
                tracing::error!(context = %context_id, error = %e, "could not store the context's session")
            }
        }
    }

    /// Takes the stored context (its new owner's session and folder) in place of what this
    /// host remembers of it.
    async fn reload_context(&self, context_id: &str) {
        match self.store.context(context_id).await {
            Ok(Some(record)) => lock(&self.state).sched.restore_context(record),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(context = %context_id, error = %e, "could not read a context another host owns")
            }
        }
    }
}

/// The refusal of a conversation's remembered directory: `why`, a refusal of
/// `metadata.cwd`, said of that directory instead.
fn remembered_cwd(dir: &std::path::Path, why: &str) -> String {
    let why = why.strip_prefix("metadata.cwd ").unwrap_or(why);
    format!(
        "the working directory of this conversation, {} (chosen by its first message), {why}; start a new conversation",
        dir.display()
    )
}

/// A task's status message while it waits to start.
fn why_it_waits(wait: &schedule::Wait) -> String {
    match wait {
        schedule::Wait::Slot {
            place,
            running,
            max_running,
            live,
            max_live,
        } => format!(
            "Waiting for a free slot: place {place} in the queue ({running} of {max_running} tasks running, {live} of {max_live} agent programs alive)"
        ),
        schedule::Wait::Context { ahead, place } => format!(
            "Waiting for task {ahead} of this conversation to finish: place {place} in its queue"
        ),
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
