//! The store's part in running several hosts on one database (docs/several-hosts.md): each
//! host's lease, the host owning each task and context, taking over the tasks of a host whose
//! lease expired, and wake-ups when another host stored events.
//!
//! Only a store several hosts can share has it ([`super::TaskStore::cluster`]): the
//! PostgreSQL store. The memory and SQLite stores belong to one host and return `None`, and
//! the engine then behaves as a single host.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;

use super::{Snapshot, StoreError};

/// A host as it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRecord {
    /// Stable across restarts of the same host (see docs/several-hosts.md).
    pub id: String,
    /// Where other hosts reach it (`http://...`).
    pub address: String,
    /// The machine it runs on (its host name): process groups are only stopped by a host on
    /// the same machine.
    pub machine: String,
    pub pid: u32,
}

/// A registered host, as the database has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInfo {
    pub record: HostRecord,
    /// When it registered (RFC 3339, database time).
    pub started_at: String,
    /// Whether its lease runs (by the database's clock).
    pub live: bool,
}

/// The tasks of a host whose lease expired, claimed by this one.
#[derive(Debug, Clone)]
pub struct Takeover {
    /// The dead host.
    pub host: HostRecord,
    /// Its unfinished tasks, now owned by the claiming host, oldest first.
    pub tasks: Vec<Snapshot>,
    /// Every context it owned (with an unfinished task or not), now the claiming host's.
    pub contexts: Vec<String>,
}

/// The cluster side of a shared store.
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// Registers this host with a lease of `lease` from now (database time); tasks and
    /// contexts this store creates from now on are owned by it, and wake-ups start. Fails
    /// with [`StoreError::HostIdInUse`] (naming the holder) when a row of the same id has a
    /// live lease, unless `replace`: the caller recognised the holder as a previous run of
    /// this host (same machine, its process gone).
    async fn register(
        &self,
        me: &HostRecord,
        lease: Duration,
        replace: bool,
    ) -> Result<(), StoreError>;

    /// Renews the lease. False when the host's row is gone: another host took its tasks over.
    async fn heartbeat(&self, host_id: &str, lease: Duration) -> Result<bool, StoreError>;

    /// Whether `me` owns the task while its lease is live, in one statement: what a host
    /// checks before it starts or resumes a task's program. False when `me`'s row is gone
    /// (another host claimed its tasks), its lease has expired (a claim may come any
    /// moment), or the task belongs to another host. The claim of an expired host locks its
    /// row, so the two are ordered: either this statement finds the lease live first (and
    /// no host may claim `me` before it expires), or it finds the row claimed and the task
    /// moved.
    async fn hold_task(&self, task_id: &str, me: &str) -> Result<bool, StoreError>;

    /// Every registered host.
    async fn hosts(&self) -> Result<Vec<HostInfo>, StoreError>;

    /// The host owning a task (None: a task of no host, or unknown).
    async fn task_host(&self, task_id: &str) -> Result<Option<HostInfo>, StoreError>;

    /// The host owning a context (None: no host, or unknown).
    async fn context_host(&self, context_id: &str) -> Result<Option<String>, StoreError>;

    /// Makes `host` the owner of a context (it runs a turn in it now).
    async fn set_context_host(&self, context_id: &str, host: &str) -> Result<(), StoreError>;

    /// The unfinished tasks owned by `me`, and those of no host (written before hosts had
    /// ids), now all `me`'s: what a restart of `me` picks up. Oldest first.
    async fn claim_own(&self, me: &str) -> Result<Vec<Snapshot>, StoreError>;

    /// Claims one host (not `me`) whose lease expired, atomically: its row goes, its
    /// unfinished tasks and its contexts become `me`'s. None when no lease expired, or when
    /// every expired host is being claimed by another host right now.
    async fn claim_expired(&self, me: &str) -> Result<Option<Takeover>, StoreError>;

    /// A channel that changes whenever events of `task_id` were stored, by any host. Drop
    /// the receiver to stop watching. Wake-ups may be lost (a dropped connection): a
    /// follower polls too.
    fn watch_task(&self, task_id: &str) -> watch::Receiver<u64>;
}
