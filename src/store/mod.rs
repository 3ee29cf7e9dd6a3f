//! Task storage: the [`TaskStore`] trait and its implementations.
//!
//! A store holds each task (kept current by applying events in place) and each task's event
//! log, so that a client that drops can resubscribe from any sequence number.

pub mod memory;
pub mod push;
pub mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;

use crate::protocol::v1::{Task, TaskState};
use crate::task::{LoggedEvent, TaskEvent};

pub use memory::MemoryStore;
pub use push::{DeadLetter, PushRecord, PushStore};
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
    #[error("storage error: {0}")]
    Backend(String),
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

/// One page of tasks, newest status first.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub total_size: usize,
}

/// Where tasks and their event logs live.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Stores a new task owned by `owner`; its first log entry (sequence 1) is a snapshot
    /// of it.
    async fn create_owned(&self, task: Task, owner: Option<String>) -> Result<u64, StoreError>;

    /// Stores a new task without an owner.
    async fn create(&self, task: Task) -> Result<u64, StoreError> {
        self.create_owned(task, None).await
    }

    /// Appends events to a task's log and applies them to the task. Returns the last sequence
    /// number.
    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError>;

    /// The task as it is now.
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
    /// it), its owner and its working directory.
    async fn put_context(&self, ctx: &ContextRecord) -> Result<(), StoreError>;

    /// Every recorded context.
    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError>;

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
}
