//! The SQLite store's schema, its migrations, and how a connection is opened.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use crate::store::{files, StoreError};

/// The schema, one step per version; a database is brought up to date by running the steps
/// after its `user_version`, each in its own transaction.
const MIGRATIONS: &[&str] = &[
    // 1: tasks and their event logs.
    "CREATE TABLE tasks (
        id TEXT PRIMARY KEY,
        context_id TEXT NOT NULL,
        state TEXT NOT NULL,
        status_ts TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        snapshot_seq INTEGER NOT NULL,
        snapshot TEXT NOT NULL
     );
     CREATE INDEX tasks_by_status_ts ON tasks (status_ts DESC, id DESC);
     CREATE INDEX tasks_by_context ON tasks (context_id);
     CREATE TABLE events (
        task_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        json TEXT NOT NULL,
        PRIMARY KEY (task_id, seq)
     ) WITHOUT ROWID;",
    // 2: context → CLI session bindings.
    "CREATE TABLE contexts (
        context_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        updated_at TEXT NOT NULL
     );",
    // 3: process groups of running CLIs, for cleaning up after a crash of the host.
    "CREATE TABLE processes (
        task_id TEXT PRIMARY KEY,
        pgid INTEGER NOT NULL,
        start_ticks INTEGER NOT NULL
     );",
    // 4: push-notification configs with their delivery cursor, and given-up updates.
    "CREATE TABLE push_configs (
        task_id TEXT NOT NULL,
        id TEXT NOT NULL,
        url TEXT NOT NULL,
        token TEXT,
        auth_scheme TEXT,
        auth_credentials TEXT,
        version TEXT NOT NULL,
        delivered_seq INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        next_at_ms INTEGER NOT NULL,
        last_error TEXT,
        PRIMARY KEY (task_id, id)
     );
     CREATE TABLE push_dead_letters (
        task_id TEXT NOT NULL,
        config_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        attempts INTEGER NOT NULL,
        error TEXT NOT NULL,
        at TEXT NOT NULL
     );",
    // 5: the credential that created each task; each context's owner and working directory.
    "ALTER TABLE tasks ADD COLUMN owner TEXT;
     ALTER TABLE contexts ADD COLUMN owner TEXT;
     ALTER TABLE contexts ADD COLUMN cwd TEXT;",
    // 6: checkpoints move out of the task's row into their own table. The row of a task is
    // updated at every append (its last sequence); with the snapshot in it, every append
    // rewrote the whole task (SQLite rewrites a row whole), a cost that grew with the task.
    "CREATE TABLE snapshots (
        task_id TEXT PRIMARY KEY,
        seq INTEGER NOT NULL,
        json TEXT NOT NULL
     );
     INSERT INTO snapshots (task_id, seq, json) SELECT id, snapshot_seq, snapshot FROM tasks;
     ALTER TABLE tasks DROP COLUMN snapshot;
     ALTER TABLE tasks DROP COLUMN snapshot_seq;",
    // 7: one row per batch of a task's events instead of one per event (see
    // [`super::rows`]): a row holds events `first_seq..=last_seq`, newline-joined. The rows
    // of an older database become rows of one event each.
    "CREATE TABLE event_rows (
        task_id TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        json TEXT NOT NULL
     );
     INSERT INTO event_rows (task_id, first_seq, last_seq, json)
        SELECT task_id, seq, seq, json FROM events ORDER BY task_id, seq;
     DROP TABLE events;
     ALTER TABLE event_rows RENAME TO events;
     CREATE UNIQUE INDEX events_by_task ON events (task_id, last_seq);",
];

/// The page size of a new database.
pub(super) const PAGE_SIZE: i64 = 8192;

/// The schema version this build writes.
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

/// Creates the database file 0600 before SQLite first opens it (SQLite gives its WAL and
/// shared-memory files the database's mode), or narrows one an older agent-host left wider.
///
/// Called once, before the store's first connection, never beside an open one: SQLite's
/// locks are POSIX record locks, which the kernel drops for the whole process when *any*
/// descriptor of the file closes. A file opened and closed here while a connection was open
/// would leave that connection holding no lock, and another process (a `sqlite3` shell, a
/// command reading the store) could then checkpoint the database and delete its WAL under
/// the host: "disk I/O error" from then on.
pub(super) fn create_private(path: &Path) -> Result<(), StoreError> {
    files::open_private(path).map_err(StoreError::io(path))?;
    Ok(())
}

/// Opens a connection with the settings every connection uses (the file is made private by
/// [`create_private`] first; the side files by their path, which opens no descriptor).
pub(super) fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    // A new database gets 8 KiB pages (fewer page splits and WAL frames per batch of event
    // rows); set before WAL mode writes the first page, a no-op for an existing database.
    conn.pragma_update(None, "page_size", PAGE_SIZE)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    for side in side_files(path) {
        files::restrict_path(&side).map_err(StoreError::io(&side))?;
    }
    Ok(conn)
}

/// The WAL and shared-memory files of the database at `path`.
pub(super) fn side_files(path: &Path) -> [PathBuf; 2] {
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [with("-wal"), with("-shm")]
}

/// Brings the database's schema up to date; returns the version it had.
pub fn migrate(conn: &mut Connection) -> Result<usize, StoreError> {
    migrate_to(conn, SCHEMA_VERSION)
}

/// Brings the database's schema up to `target` (an older one, in tests: a database as an
/// older agent-host left it).
pub(super) fn migrate_to(conn: &mut Connection, target: usize) -> Result<usize, StoreError> {
    let version: usize =
        conn.pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))? as usize;
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, step) in MIGRATIONS.iter().enumerate().take(target).skip(version) {
        let tx = conn.transaction()?;
        tx.execute_batch(step)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
        tracing::debug!(version = i + 1, "database schema step applied");
    }
    if version < target {
        tracing::info!(from = version, to = target, "database schema migrated");
    }
    Ok(version)
}
