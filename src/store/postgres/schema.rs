//! The PostgreSQL store's schema and its versioned migrations.
//!
//! The applied versions are rows of `agent_host_schema`; a database is brought up to date by
//! running the steps after its highest version in one transaction, under an advisory
//! lock so that hosts starting together on one database migrate it once.

use tokio_postgres::Client;

use crate::store::StoreError;

/// The schema, one step per version. Text columns that are ordered or compared (ids, status
/// times) use the "C" collation: byte order, the order every other store pages in.
const MIGRATIONS: &[&str] = &[
    // 1: tasks (index rows), their event rows and checkpoints, contexts, process groups, push
    // configs with their delivery cursor, given-up updates.
    "CREATE TABLE tasks (
        id TEXT COLLATE \"C\" PRIMARY KEY,
        context_id TEXT COLLATE \"C\" NOT NULL,
        state TEXT NOT NULL,
        status_ts TEXT COLLATE \"C\" NOT NULL,
        created_at TEXT COLLATE \"C\" NOT NULL,
        last_seq BIGINT NOT NULL,
        owner TEXT
     );
     CREATE INDEX tasks_by_status_ts ON tasks (status_ts DESC, id DESC);
     CREATE INDEX tasks_by_context ON tasks (context_id);
     CREATE TABLE events (
        task_id TEXT COLLATE \"C\" NOT NULL,
        seq BIGINT NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (task_id, seq)
     );
     CREATE TABLE snapshots (
        task_id TEXT COLLATE \"C\" PRIMARY KEY,
        seq BIGINT NOT NULL,
        json TEXT NOT NULL
     );
     CREATE TABLE contexts (
        context_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        owner TEXT,
        cwd TEXT
     );
     CREATE TABLE processes (
        task_id TEXT PRIMARY KEY,
        pgid BIGINT NOT NULL,
        start_ticks BIGINT NOT NULL
     );
     CREATE TABLE push_configs (
        task_id TEXT NOT NULL,
        id TEXT NOT NULL,
        url TEXT NOT NULL,
        token TEXT,
        auth_scheme TEXT,
        auth_credentials TEXT,
        version TEXT NOT NULL,
        delivered_seq BIGINT NOT NULL,
        attempts BIGINT NOT NULL,
        next_at_ms BIGINT NOT NULL,
        last_error TEXT,
        PRIMARY KEY (task_id, id)
     );
     CREATE TABLE push_dead_letters (
        n BIGSERIAL PRIMARY KEY,
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        attempts BIGINT NOT NULL,
        error TEXT NOT NULL,
        at TEXT NOT NULL
     );",
    // 2: the unfinished tasks (what a starting host picks up) without a scan of every task.
    "CREATE INDEX tasks_unfinished ON tasks (created_at, id) WHERE state NOT IN
        ('TASK_STATE_COMPLETED','TASK_STATE_FAILED','TASK_STATE_CANCELED','TASK_STATE_REJECTED');",
    // 3: several hosts (docs/several-hosts.md): each host's lease, and the host owning each
    // task (the one running its program) and each context (where its session lives).
    // `owner` of both stays the credential.
    "CREATE TABLE hosts (
        id TEXT COLLATE \"C\" PRIMARY KEY,
        address TEXT NOT NULL,
        machine TEXT NOT NULL,
        pid BIGINT NOT NULL,
        started_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        lease_until TIMESTAMPTZ NOT NULL
     );
     CREATE INDEX hosts_by_lease ON hosts (lease_until);
     ALTER TABLE tasks ADD COLUMN host TEXT COLLATE \"C\";
     CREATE INDEX tasks_unfinished_by_host ON tasks (host) WHERE state NOT IN
        ('TASK_STATE_COMPLETED','TASK_STATE_FAILED','TASK_STATE_CANCELED','TASK_STATE_REJECTED');
     ALTER TABLE contexts ADD COLUMN host TEXT COLLATE \"C\";
     CREATE INDEX contexts_by_host ON contexts (host);",
    // 4: push delivery claims (several hosts on one database: each config's updates are
    // delivered by the one host holding its claim; see `crate::store::push`). `claimed_by` is
    // the holder, `claimed_until` when its lease ends (the database's clock); NULL: unclaimed.
    // Self-contained: touches only `push_configs`.
    "ALTER TABLE push_configs ADD COLUMN claimed_by TEXT, ADD COLUMN claimed_until TIMESTAMPTZ;",
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

/// An arbitrary key for the advisory lock taken while migrating.
pub(super) const MIGRATION_LOCK: i64 = 0x6167_656e_7468_6f73;

/// Brings the schema up to `target` (at most [`SCHEMA_VERSION`]); returns the version it had.
pub async fn migrate_to(client: &mut Client, target: usize) -> Result<usize, StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS agent_host_schema (
            version INTEGER PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         )",
    )
    .await?;
    let found: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM agent_host_schema",
            &[],
        )
        .await?
        .try_get(0)?;
    let found = found as usize;
    if found > SCHEMA_VERSION {
        // Ended here rather than on drop, which rolls back only once the connection is
        // polled again: the advisory lock must not outlive this call.
        tx.rollback().await?;
        return Err(StoreError::NewerSchema {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    // Every step runs in this one transaction, under the lock: a host that starts at the
    // same time waits, then finds the schema up to date.
    for (i, step) in MIGRATIONS
        .iter()
        .enumerate()
        .take(target.min(SCHEMA_VERSION))
        .skip(found)
    {
        tx.batch_execute(step).await?;
        let version = (i + 1) as i32;
        tx.execute(
            "INSERT INTO agent_host_schema (version) VALUES ($1)",
            &[&version],
        )
        .await?;
        tracing::info!(version, "postgres schema migrated");
    }
    tx.commit().await?;
    Ok(found)
}

/// How a database's schema stands against this build's, read without changing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaState {
    /// No agent-host schema yet: it is made at the first start.
    Missing,
    /// An older version (the one found): migrated at the next start.
    Older(usize),
    /// This build's version.
    Current,
    /// A newer version (the one found): this build refuses to start on it.
    Newer(usize),
}

/// Reads the schema version of the database `client` is connected to (its `search_path`),
/// writing nothing: no table, no schema, no lock.
pub async fn inspect(client: &Client) -> Result<SchemaState, StoreError> {
    let made: bool = client
        .query_one("SELECT to_regclass('agent_host_schema') IS NOT NULL", &[])
        .await?
        .try_get(0)?;
    if !made {
        return Ok(SchemaState::Missing);
    }
    let found: i32 = client
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM agent_host_schema",
            &[],
        )
        .await?
        .try_get(0)?;
    let found = usize::try_from(found).unwrap_or(0);
    Ok(match found {
        0 => SchemaState::Missing,
        v if v < SCHEMA_VERSION => SchemaState::Older(v),
        v if v > SCHEMA_VERSION => SchemaState::Newer(v),
        _ => SchemaState::Current,
    })
}

/// Brings the schema up to date; returns the version it had.
pub async fn migrate(client: &mut Client) -> Result<usize, StoreError> {
    migrate_to(client, SCHEMA_VERSION).await
}
