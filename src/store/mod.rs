//! Task storage: the [`TaskStore`] trait and its implementations.
//!
//! # The shape of a store
//!
//! Every store, whatever holds it (memory, SQLite, PostgreSQL), keeps the same three
//! things, and an append costs the same whatever the task's length:
//!
//! - **the event log**: the events, each with its sequence number in its task, sequence 1
//!   being the task as created; in *rows* keyed by the task id and a sequence number (one row
//!   per event, or, in SQLite, one row per batch of a task's events written together, keyed
//!   by its last one). Rows are only ever inserted, never rewritten; [`TaskStore::append`]
//!   inserts the new events' rows (a store with a writer batches the rows of many appends into
//!   one transaction) and updates the task's small index row (last sequence, state, status
//!   time: what listing filters on), never the task itself.
//! - **checkpoints**: a snapshot of the whole task as of some sequence number, written when the
//!   task ends or waits for input (the PostgreSQL store: at any change of state) and when the events since the last
//!   checkpoint have grown as large as the snapshot itself; so the cost of writing snapshots,
//!   spread over the events, does not grow with the task, and a read never has to replay more
//!   than one snapshot's worth of events.
//! - **reads** rebuild a task from its latest checkpoint plus the events after it
//!   ([`crate::task::apply`]). [`TaskStore::events_after`] reads the log alone.
//!
//! The memory store is the degenerate case: its checkpoint is the task kept current in place,
//! so it has no events after it. The SQLite store keeps the index row in `tasks`, the rows in
//! `events` and the checkpoint in `snapshots` (see [`sqlite`]; a task that has none yet is
//! rebuilt from its first event); the PostgreSQL store
//! ([`postgres`]) has the same three tables, with appends as `INSERT`s in one transaction per
//! batch.
//!
//! An SQLite store ([`SqliteStore`]) belongs to one host at a time: it holds a
//! [`lock::DataLock`] on its database while it is open. A PostgreSQL database can be shared
//! by several hosts: its store has a [`ClusterStore`] part ([`TaskStore::cluster`]; see
//! docs/several-hosts.md).

pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod files;
pub(crate) mod lock;
pub(crate) mod memory;
pub(crate) mod postgres;
pub(crate) mod push;
pub(crate) mod sqlite;
#[cfg(test)]
pub(crate) mod suite;
pub(crate) mod window;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::protocol::v1::{Task, TaskState};
use crate::task::{LoggedEvent, TaskEvent};

pub use cluster::{ClusterStore, HostInfo, HostRecord, Takeover};
pub use memory::MemoryStore;
pub use postgres::PgStore;
pub use push::{Claim, DeadLetter, PushRecord, PushStore, PushWake};
pub use sqlite::SqliteStore;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("task {0} not found")]
    NotFound(String),
    #[error("task {0} already exists")]
    Exists(String),
    #[error("invalid page token")]
    BadPageToken,
    /// The database refused or failed a statement.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused or failed a statement, or could not be reached.
    #[error("postgres: {}", postgres_detail(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// No pooled PostgreSQL connection could be had.
    #[error("postgres: {}", pool_detail(.0))]
    Pool(#[from] deadpool_postgres::PoolError),
    /// The PostgreSQL pool could not be built from the settings.
    #[error("postgres pool settings: {0}")]
    PoolSettings(#[from] deadpool_postgres::BuildError),
    /// A database row that does not read as the store wrote it: a column missing, of
    /// another type, or a number out of range.
    #[error("bad stored row ({what}, column {column}): {detail}")]
    BadRow {
        /// What the row holds (a table's name).
        what: &'static str,
        column: usize,
        detail: String,
    },
    /// A stored task or event that does not decode, or one that does not encode.
    #[error("bad stored data: {0}")]
    Json(#[from] serde_json::Error),
    /// A file or folder of the store could not be created, opened or changed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The database was written by a newer agent-host.
    #[error("the database has schema version {found}, newer than this agent-host ({supported}); use a newer agent-host")]
    NewerSchema { found: usize, supported: usize },
    /// Another host holds the data folder's lock.
    #[error(transparent)]
    Locked(#[from] lock::LockedError),
    /// The thread that writes to the database has stopped (it panicked).
    #[error("the store's writer thread has stopped")]
    WriterStopped,
    /// A blocking read ended without an answer (it panicked or the runtime is stopping).
    #[error("a store read did not finish: {0}")]
    Read(#[from] tokio::task::JoinError),
    /// Another host owns the task now (it took over this host's tasks): this host may no
    /// longer write to it.
    #[error("task {task} is owned by agent-host {host} now; this host no longer writes to it")]
    NotOwner { task: String, host: String },
    /// Another live host owns the context now (it took this host's contexts over): this
    /// host may no longer record its session.
    #[error("context {context} is owned by agent-host {host} now; this host no longer records it")]
    ContextNotOwned { context: String, host: String },
    /// Another live host has registered this host id.
    #[error("host id '{}' is in use by a live host (pid {} on {}, {}, since {}); give this host another --host-id", .0.record.id, .0.record.pid, .0.record.machine, .0.record.address, .0.started_at)]
    HostIdInUse(Box<HostInfo>),
    /// A write made in the background (an append that returned before its commit) failed;
    /// reported at the task's next append, and to the writes of the task queued after it,
    /// which were not tried.
    #[error("{0}")]
    Background(Arc<StoreError>),
    /// A lock inside the store was poisoned by a panic.
    #[error("a store lock was poisoned by a panic")]
    Poisoned,
}

impl StoreError {
    /// The write was refused because another host owns the task or context now (it took
    /// this host's tasks over): the store works, this host merely no longer writes to it.
    pub fn is_not_owner(&self) -> bool {
        match self {
            StoreError::NotOwner { .. } | StoreError::ContextNotOwned { .. } => true,
            StoreError::Background(e) => e.is_not_owner(),
            _ => false,
        }
    }
}

/// A PostgreSQL error with what the server said (the driver's own text is only "db error").
/// What the pool says, with the database's own reason when a connection failed (the pool's
/// words alone, "Error occurred while creating a new object: db error", do not tell a missing
/// database from a wrong user or a refused connection).
fn pool_detail(e: &deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(pg) => postgres_detail(pg),
        other => format!("connection pool: {other}"),
    }
}

fn postgres_detail(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

impl StoreError {
    /// An I/O error on `path`.
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
        move |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A task and the sequence number of the last event applied to it.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub task: Task,
    pub last_seq: u64,
    /// The credential that created the task (None: created without authentication).
    pub owner: Option<String>,
}

/// A conversation as stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ContextRecord {
    pub context_id: String,
    /// The CLI session its turns resume.
    pub session_id: Option<String>,
    /// The credential whose conversation it is.
    pub owner: Option<String>,
    /// Its working directory, when a message chose one.
    pub cwd: Option<String>,
}

/// A task in a terminal state (completed, failed, canceled, rejected), as retention sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalTask {
    pub id: String,
    pub context_id: String,
    /// Its status timestamp (ISO 8601 UTC, as written by [`crate::task::now_timestamp`]).
    pub status_ts: String,
}

/// Filters and paging of a task listing.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only tasks of this owner, and tasks without one.
    pub owner: Option<String>,
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Only tasks whose status timestamp is at or after this (ISO 8601, same format).
    pub status_after: Option<String>,
    pub page_size: usize,
    pub page_token: Option<String>,
}

/// The order of every listing: newest status timestamp first, then the greater id.
pub fn newest_first(a: &Task, b: &Task) -> std::cmp::Ordering {
    memory::key(b).cmp(&memory::key(a))
}

/// The page token of a listing that goes on after `task`, in [`newest_first`] order: what
/// every store answers as `next_page_token` when `task` ends a page, so listings of several
/// stores can be merged and continued from one token.
pub fn page_token_after(task: &Task) -> String {
    memory::encode_token(&memory::key(task))
}

/// One page of tasks, newest status first.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub total_size: usize,
}

/// Where tasks and their event logs live (the shape every store follows is in the
/// [module docs](self): rows, checkpoints, reads that rebuild).
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Stores a new task owned by `owner`; its first log entry (sequence 1) is a snapshot
    /// of it.
    async fn create_owned(&self, task: Task, owner: Option<String>) -> Result<u64, StoreError>;

    /// Stores a new task without an owner.
    async fn create(&self, task: Task) -> Result<u64, StoreError> {
        self.create_owned(task, None).await
    }

    /// Appends events to a task's log in new rows (never a rewrite of the task), and
    /// checkpoints the task when it ends or waits for input, or its events since the last
    /// checkpoint have grown large. Returns the last sequence number.
    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError>;

    /// The task as it is now: its latest checkpoint with the events after it applied.
    async fn get(&self, task_id: &str) -> Result<Option<Snapshot>, StoreError>;

    /// Up to `limit` log entries with sequence numbers greater than `after`.
    async fn events_after(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<LoggedEvent>>, StoreError>;

    /// Tasks matching the query, newest status first; artifacts only `with_artifacts`.
    async fn list(&self, query: &ListQuery, with_artifacts: bool) -> Result<ListPage, StoreError>;

    /// Tasks not in a terminal state, oldest first (what a restarted host must pick up).
    async fn unfinished(&self) -> Result<Vec<Snapshot>, StoreError>;

    /// Records a context: its CLI session (so later turns, also after a restart, resume
    /// it), its owner and its working directory. With several hosts, refused
    /// ([`StoreError::ContextNotOwned`]) when another live host owns the context: the one
    /// that took it over from this host.
    async fn put_context(&self, ctx: &ContextRecord) -> Result<(), StoreError>;

    /// Every recorded context.
    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError>;

    /// One recorded context.
    async fn context(&self, context_id: &str) -> Result<Option<ContextRecord>, StoreError> {
        Ok(self
            .contexts()
            .await?
            .into_iter()
            .find(|c| c.context_id == context_id))
    }

    /// Records the process group running a task's CLI and its leader's start time, so that
    /// a host restarted after a crash can stop what the dead host left running.
    async fn record_process(
        &self,
        task_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError>;

    /// The task's process group is gone.
    async fn forget_process(&self, task_id: &str) -> Result<(), StoreError>;

    /// Every recorded process group: (task id, pgid, start ticks).
    async fn recorded_processes(&self) -> Result<Vec<(String, u32, u64)>, StoreError>;

    /// Every task in a terminal state, newest status first (ties: greater id first). What
    /// retention chooses from ([`crate::retention`]).
    async fn terminal_tasks(&self) -> Result<Vec<TerminalTask>, StoreError>;

    /// Deletes those of `ids` that are in a terminal state, with everything kept for them:
    /// the index row, every event row, the checkpoint, push configs and given-up
    /// deliveries, a recorded process group; then the contexts of the deleted tasks that no
    /// remaining task belongs to. A task not terminal (or unknown) is left alone: this never
    /// deletes a task that can still change. Returns the ids deleted. Deleting is idempotent
    /// (a store may do it in one transaction, or per task: terminal tasks never change).
    async fn delete_terminal(&self, ids: &[String]) -> Result<Vec<String>, StoreError>;

    /// Whether what is stored outlives the host (a restart on it picks up unfinished
    /// tasks). A clean stop leaves resumable tasks unfinished only in such a store.
    fn durable(&self) -> bool {
        true
    }

    /// The store's part in several hosts sharing it (leases, owners, takeover, wake-ups);
    /// None for a store that belongs to one host.
    fn cluster(&self) -> Option<&dyn ClusterStore> {
        None
    }

    /// Waits until every write made so far is in the database, appends that returned before
    /// their commit included (called when the host stops; a store that writes everything
    /// before it returns, or on being dropped, has nothing to do).
    async fn flush_writes(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
