//! The SQLite store, the default: tasks, their event logs and context sessions in one file
//! (WAL mode), so nothing is lost when the host stops or crashes.
//!
//! Every write goes through one writer thread that commits whatever is queued in one
//! transaction (group commit), so writes never block the async runtime and many busy tasks
//! share commits. An append costs one row per event, never a rewrite of the task: a task is
//! its last snapshot plus the events after it, and the writer folds the events into a new
//! snapshot now and then (every [`SNAPSHOT_EVERY`] events and when the task ends). Memory
//! holds only a bounded window of recent events of the tasks being written, from which live
//! subscribers read; older events and every other read come from the database, on blocking
//! threads.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::oneshot;

use super::memory::{decode_token, encode_token};
use super::{ContextRecord, ListPage, ListQuery, Snapshot, StoreError, TaskStore};
use crate::protocol::v1::{StreamResponse, Task};
use crate::task::{apply, LoggedEvent, TaskEvent};

/// Events kept in memory per task being written.
const WINDOW: usize = 1024;
/// Events between two snapshots of a task.
pub const SNAPSHOT_EVERY: u64 = 1000;
/// Reader connections kept open.
const READERS: usize = 4;

/// The schema, one step per version; a database is brought up to date by running the steps
/// after its `user_version`.
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
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: usize = MIGRATIONS.len();

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn poisoned() -> StoreError {
    StoreError::Backend("a store lock was poisoned by a panic".into())
}

/// Opens a connection with the settings every connection uses.
fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(backend)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(backend)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(backend)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(backend)?;
    Ok(conn)
}

/// Brings the database's schema up to date.
pub fn migrate(conn: &mut Connection) -> Result<usize, StoreError> {
    let version: usize = conn
        .pragma_query_value(None, "user_version", |r| r.get::<_, i64>(0))
        .map_err(backend)? as usize;
    if version > SCHEMA_VERSION {
        return Err(StoreError::Backend(format!(
            "the database has schema version {version}, newer than this agent-host ({SCHEMA_VERSION}); use a newer agent-host"
        )));
    }
    for (i, step) in MIGRATIONS.iter().enumerate().skip(version) {
        let tx = conn.transaction().map_err(backend)?;
        tx.execute_batch(step).map_err(backend)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .map_err(backend)?;
        tx.commit().map_err(backend)?;
        tracing::debug!(version = i + 1, "database schema step applied");
    }
    if version < MIGRATIONS.len() {
        tracing::info!(
            from = version,
            to = MIGRATIONS.len(),
            "database schema migrated"
        );
    }
    Ok(version)
}

enum Write {
    Create {
        task: Box<Task>,
        first: String,
        owner: Option<String>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    Append {
        task_id: String,
        rows: Vec<(u64, String)>,
        /// New state and status timestamp, when the events changed the status.
        status: Option<(String, String)>,
        compact: bool,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
    /// Any other statement, run in the batch's transaction.
    Exec {
        sql: &'static str,
        args: Vec<rusqlite::types::Value>,
        reply: oneshot::Sender<Result<(), StoreError>>,
    },
}

/// Position of a task being written: its last sequence number and recent events.
struct Live {
    last_seq: u64,
    /// Events up to here are committed; the window may hold later ones being written, which
    /// readers must not see yet (a reader could otherwise act on an event that a following
    /// read of the database does not show).
    committed_seq: u64,
    since_snapshot: u64,
    window: VecDeque<Arc<LoggedEvent>>,
}

/// The SQLite-backed [`TaskStore`].
pub struct SqliteStore {
    path: PathBuf,
    writer: Mutex<mpsc::Sender<Write>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    live: Mutex<HashMap<String, Live>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| {
                StoreError::Backend(format!("cannot create {}: {e}", dir.display()))
            })?;
        }
        let mut conn = connect(path)?;
        migrate(&mut conn)?;
        let (tx, rx) = mpsc::channel::<Write>();
        std::thread::Builder::new()
            .name("agent-host-store".into())
            .spawn(move || writer_loop(conn, rx))
            .map_err(backend)?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            writer: Mutex::new(tx),
            readers: Arc::new(Mutex::new(Vec::new())),
            live: Mutex::new(HashMap::new()),
        })
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn send(&self, w: Write) -> Result<(), StoreError> {
        let tx = self.writer.lock().map_err(|_| poisoned())?;
        tx.send(w)
            .map_err(|_| StoreError::Backend("the store's writer thread has stopped".into()))
    }

    /// Runs `f` with a reader connection on a blocking thread.
    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let pool = self.readers.clone();
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = pool.lock().map_err(|_| poisoned())?.pop();
            let mut conn = match conn {
                Some(c) => c,
                None => connect(&path)?,
            };
            let result = f(&mut conn);
            let mut pool = pool.lock().map_err(|_| poisoned())?;
            if pool.len() < READERS {
                pool.push(conn);
            }
            result
        })
        .await
        .map_err(backend)?
    }

    /// Runs one statement through the writer and waits for its commit.
    async fn exec(
        &self,
        sql: &'static str,
        args: Vec<rusqlite::types::Value>,
    ) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Write::Exec { sql, args, reply })?;
        rx.await.map_err(backend)?
    }

    /// The last sequence number of a task, from memory or the database.
    async fn last_seq(&self, task_id: &str) -> Result<u64, StoreError> {
        let id = task_id.to_string();
        self.read(move |c| {
            c.query_row("SELECT last_seq FROM tasks WHERE id = ?1", [&id], |r| {
                r.get::<_, i64>(0)
            })
            .optional()
            .map_err(backend)?
            .map(|v| v as u64)
            .ok_or(StoreError::NotFound(id))
        })
        .await
    }
}

fn writer_loop(mut conn: Connection, rx: mpsc::Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 512 {
                break;
            }
        }
        let outcome = write_batch(&mut conn, &batch);
        for w in batch {
            let reply = match w {
                Write::Create { reply, .. }
                | Write::Append { reply, .. }
                | Write::Exec { reply, .. } => reply,
            };
            let _ = reply.send(outcome.clone().map_err(StoreError::Backend));
        }
    }
}

fn write_batch(conn: &mut Connection, batch: &[Write]) -> Result<(), String> {
    let tx = conn.transaction().map_err(|e| e.to_string())?;
    let mut compact = Vec::new();
    for w in batch {
        match w {
            Write::Create {
                task, first, owner, ..
            } => {
                let ts = task.status.timestamp.clone().unwrap_or_default();
                let snapshot = serde_json::to_string(task.as_ref()).map_err(|e| e.to_string())?;
                tx.execute(
                    "INSERT INTO tasks (id, context_id, state, status_ts, created_at, last_seq, snapshot_seq, snapshot, owner)
                     VALUES (?1, ?2, ?3, ?4, ?4, 1, 1, ?5, ?6)",
                    params![task.id, task.context_id, task.status.state.as_proto_name(), ts, snapshot, owner],
                )
                .map_err(|e| e.to_string())?;
                tx.execute(
                    "INSERT INTO events (task_id, seq, json) VALUES (?1, 1, ?2)",
                    params![task.id, first],
                )
                .map_err(|e| e.to_string())?;
            }
            Write::Append {
                task_id,
                rows,
                status,
                compact: c,
                ..
            } => {
                {
                    let mut ins = tx
                        .prepare_cached(
                            "INSERT INTO events (task_id, seq, json) VALUES (?1, ?2, ?3)",
                        )
                        .map_err(|e| e.to_string())?;
                    for (seq, json) in rows {
                        ins.execute(params![task_id, *seq as i64, json])
                            .map_err(|e| e.to_string())?;
                    }
                }
                let last = rows.last().map(|r| r.0).unwrap_or(0) as i64;
                match status {
                    Some((state, ts)) => tx.execute(
                        "UPDATE tasks SET last_seq = ?2, state = ?3, status_ts = ?4 WHERE id = ?1",
                        params![task_id, last, state, ts],
                    ),
                    None => tx.execute(
                        "UPDATE tasks SET last_seq = ?2 WHERE id = ?1",
                        params![task_id, last],
                    ),
                }
                .map_err(|e| e.to_string())?;
                if *c {
                    compact.push(task_id.clone());
                }
            }
            Write::Exec { sql, args, .. } => {
                tx.prepare_cached(sql)
                    .and_then(|mut st| st.execute(rusqlite::params_from_iter(args.iter())))
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    for id in compact {
        if let Some((task, seq)) = load_task(&tx, &id).map_err(|e| e.to_string())? {
            let json = serde_json::to_string(&task).map_err(|e| e.to_string())?;
            tx.execute(
                "UPDATE tasks SET snapshot = ?2, snapshot_seq = ?3 WHERE id = ?1",
                params![id, json, seq as i64],
            )
            .map_err(|e| e.to_string())?;
        }
    }
    tx.commit().map_err(|e| e.to_string())
}

fn text(s: &str) -> rusqlite::types::Value {
    rusqlite::types::Value::Text(s.to_string())
}

fn int(v: u64) -> rusqlite::types::Value {
    rusqlite::types::Value::Integer(v as i64)
}

fn opt_text(s: Option<&str>) -> rusqlite::types::Value {
    s.map(text).unwrap_or(rusqlite::types::Value::Null)
}

fn decode_event(json: &str) -> Result<TaskEvent, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Backend(format!("bad stored event: {e}")))
}

/// A task as stored: its snapshot with the later events applied, and its last sequence.
fn load_task(conn: &Connection, id: &str) -> Result<Option<(Task, u64)>, StoreError> {
    Ok(load_owned(conn, id)?.map(|s| (s.task, s.last_seq)))
}

/// A task as stored, with its owner.
fn load_owned(conn: &Connection, id: &str) -> Result<Option<Snapshot>, StoreError> {
    let row = conn
        .query_row(
            "SELECT snapshot, snapshot_seq, last_seq, owner FROM tasks WHERE id = ?1",
            [id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            },
        )
        .optional()
        .map_err(backend)?;
    let Some((snapshot, snapshot_seq, last_seq, owner)) = row else {
        return Ok(None);
    };
    let mut task: Task = serde_json::from_str(&snapshot)
        .map_err(|e| StoreError::Backend(format!("bad stored task: {e}")))?;
    let mut stmt = conn
        .prepare_cached("SELECT json FROM events WHERE task_id = ?1 AND seq > ?2 ORDER BY seq")
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![id, snapshot_seq], |r| r.get::<_, String>(0))
        .map_err(backend)?;
    for json in rows {
        apply(&mut task, &decode_event(&json.map_err(backend)?)?);
    }
    Ok(Some(Snapshot {
        task,
        last_seq: last_seq as u64,
        owner,
    }))
}

fn read_events(
    conn: &Connection,
    id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, json FROM events WHERE task_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )
        .map_err(backend)?;
    let rows = stmt
        .query_map(params![id, after as i64, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(backend)?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, json) = row.map_err(backend)?;
        out.push(Arc::new(LoggedEvent::new(seq as u64, decode_event(&json)?)));
    }
    Ok(out)
}

fn task_exists(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    conn.query_row("SELECT 1 FROM tasks WHERE id = ?1", [id], |_| Ok(()))
        .optional()
        .map_err(backend)
        .map(|r| r.is_some())
}

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create_owned(&self, task: Task, owner: Option<String>) -> Result<u64, StoreError> {
        let first_event = TaskEvent::Stream(StreamResponse::Task(task.clone()));
        let first = serde_json::to_string(&first_event).map_err(backend)?;
        let id = task.id.clone();
        let (reply, rx) = oneshot::channel();
        self.send(Write::Create {
            task: Box::new(task),
            first,
            owner,
            reply,
        })?;
        rx.await.map_err(backend)?.map_err(|e| match e {
            StoreError::Backend(m) if m.contains("UNIQUE") => StoreError::Exists(id.clone()),
            other => other,
        })?;
        let mut live = self.live.lock().map_err(|_| poisoned())?;
        let mut window = VecDeque::new();
        window.push_back(Arc::new(LoggedEvent::new(1, first_event)));
        live.insert(
            id,
            Live {
                last_seq: 1,
                committed_seq: 1,
                since_snapshot: 0,
                window,
            },
        );
        Ok(1)
    }

    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError> {
        if events.is_empty() {
            let known = self
                .live
                .lock()
                .map_err(|_| poisoned())?
                .get(task_id)
                .map(|l| l.last_seq);
            return match known {
                Some(s) => Ok(s),
                None => self.last_seq(task_id).await,
            };
        }
        let known = {
            let live = self.live.lock().map_err(|_| poisoned())?;
            live.contains_key(task_id)
        };
        if !known {
            let last = self.last_seq(task_id).await?;
            let mut live = self.live.lock().map_err(|_| poisoned())?;
            live.entry(task_id.to_string()).or_insert(Live {
                last_seq: last,
                committed_seq: last,
                since_snapshot: 0,
                window: VecDeque::new(),
            });
        }
        let (rx, last, ended) = {
            let mut live = self.live.lock().map_err(|_| poisoned())?;
            let l = live
                .get_mut(task_id)
                .ok_or_else(|| StoreError::NotFound(task_id.to_string()))?;
            let mut rows = Vec::with_capacity(events.len());
            let mut status = None;
            let mut ended = false;
            for ev in events {
                l.last_seq += 1;
                l.since_snapshot += 1;
                let json = serde_json::to_string(&ev).map_err(backend)?;
                if let TaskEvent::Stream(StreamResponse::StatusUpdate(u)) = &ev {
                    status = Some((
                        u.status.state.as_proto_name().to_string(),
                        u.status.timestamp.clone().unwrap_or_default(),
                    ));
                    ended |= u.status.state.is_terminal();
                }
                rows.push((l.last_seq, json));
                if l.window.len() == WINDOW {
                    l.window.pop_front();
                }
                l.window
                    .push_back(Arc::new(LoggedEvent::new(l.last_seq, ev)));
            }
            let compact = ended || l.since_snapshot >= SNAPSHOT_EVERY;
            if compact {
                l.since_snapshot = 0;
            }
            let (reply, rx) = oneshot::channel();
            // Sent under the lock, so one task's appends reach the writer in order.
            self.send(Write::Append {
                task_id: task_id.to_string(),
                rows,
                status,
                compact,
                reply,
            })?;
            (rx, l.last_seq, ended)
        };
        rx.await.map_err(backend)??;
        let mut live = self.live.lock().map_err(|_| poisoned())?;
        if ended {
            // A task that ended is read from the database from now on; memory keeps only
            // the tasks being written.
            live.remove(task_id);
        } else if let Some(l) = live.get_mut(task_id) {
            // The writer commits in order, so everything up to `last` is committed.
            l.committed_seq = l.committed_seq.max(last);
        }
        Ok(last)
    }

    async fn get(&self, task_id: &str) -> Result<Option<Snapshot>, StoreError> {
        let id = task_id.to_string();
        self.read(move |c| {
            let tx = c.transaction().map_err(backend)?;
            load_owned(&tx, &id)
        })
        .await
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
        {
            let live = self.live.lock().map_err(|_| poisoned())?;
            if let Some(l) = live.get(task_id) {
                let first = l.window.front().map(|e| e.seq).unwrap_or(l.last_seq + 1);
                if after + 1 >= first {
                    return Ok(l
                        .window
                        .iter()
                        .filter(|e| e.seq > after && e.seq <= l.committed_seq)
                        .take(limit)
                        .cloned()
                        .collect());
                }
            }
        }
        let id = task_id.to_string();
        self.read(move |c| {
            let tx = c.transaction().map_err(backend)?;
            let evs = read_events(&tx, &id, after, limit)?;
            if evs.is_empty() && !task_exists(&tx, &id)? {
                return Err(StoreError::NotFound(id));
            }
            Ok(evs)
        })
        .await
    }

    async fn list(&self, query: &ListQuery, with_artifacts: bool) -> Result<ListPage, StoreError> {
        let after_key = match &query.page_token {
            Some(t) if !t.is_empty() => Some(decode_token(t)?),
            _ => None,
        };
        let q = query.clone();
        self.read(move |c| {
            let tx = c.transaction().map_err(backend)?;
            let mut filter = String::from(" WHERE 1=1");
            let mut args: Vec<String> = Vec::new();
            if let Some(owner) = &q.owner {
                args.push(owner.clone());
                filter.push_str(&format!(" AND (owner IS NULL OR owner = ?{})", args.len()));
            }
            if let Some(ctx) = &q.context_id {
                args.push(ctx.clone());
                filter.push_str(&format!(" AND context_id = ?{}", args.len()));
            }
            if let Some(st) = q.state {
                args.push(st.as_proto_name().to_string());
                filter.push_str(&format!(" AND state = ?{}", args.len()));
            }
            if let Some(after) = &q.status_after {
                args.push(after.clone());
                filter.push_str(&format!(" AND status_ts >= ?{}", args.len()));
            }
            let total: i64 = tx
                .query_row(
                    &format!("SELECT COUNT(*) FROM tasks{filter}"),
                    rusqlite::params_from_iter(args.iter()),
                    |r| r.get(0),
                )
                .map_err(backend)?;
            let mut page_filter = filter.clone();
            let mut page_args = args.clone();
            if let Some((ts, id)) = &after_key {
                page_args.push(ts.clone());
                page_args.push(id.clone());
                page_filter.push_str(&format!(
                    " AND (status_ts, id) < (?{}, ?{})",
                    page_args.len() - 1,
                    page_args.len()
                ));
            }
            let sql = format!(
                "SELECT id, status_ts FROM tasks{page_filter} ORDER BY status_ts DESC, id DESC LIMIT {}",
                q.page_size + 1
            );
            let mut stmt = tx.prepare(&sql).map_err(backend)?;
            let keys: Vec<(String, String)> = stmt
                .query_map(rusqlite::params_from_iter(page_args.iter()), |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(backend)?
                .collect::<Result<_, _>>()
                .map_err(backend)?;
            let more = keys.len() > q.page_size;
            let mut tasks = Vec::new();
            for (id, _) in keys.iter().take(q.page_size) {
                if let Some((mut t, _)) = load_task(&tx, id)? {
                    if !with_artifacts {
                        t.artifacts.clear();
                    }
                    tasks.push(t);
                }
            }
            let next_page_token = if more {
                keys.get(q.page_size - 1)
                    .map(|(id, ts)| encode_token(&(ts.clone(), id.clone())))
                    .unwrap_or_default()
            } else {
                String::new()
            };
            Ok(ListPage {
                tasks,
                next_page_token,
                total_size: total as usize,
            })
        })
        .await
    }

    async fn unfinished(&self) -> Result<Vec<Snapshot>, StoreError> {
        self.read(|c| {
            let tx = c.transaction().map_err(backend)?;
            let ids: Vec<String> = {
                let mut stmt = tx
                    .prepare(
                        "SELECT id FROM tasks WHERE state NOT IN
                         ('TASK_STATE_COMPLETED','TASK_STATE_FAILED','TASK_STATE_CANCELED','TASK_STATE_REJECTED')
                         ORDER BY created_at, id",
                    )
                    .map_err(backend)?;
                let rows = stmt.query_map([], |r| r.get(0)).map_err(backend)?;
                rows.collect::<Result<_, _>>().map_err(backend)?
            };
            let mut out = Vec::new();
            for id in ids {
                if let Some(snap) = load_owned(&tx, &id)? {
                    out.push(snap);
                }
            }
            Ok(out)
        })
        .await
    }

    async fn put_context(&self, ctx: &ContextRecord) -> Result<(), StoreError> {
        self.exec(
            "INSERT INTO contexts (context_id, session_id, updated_at, owner, cwd) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (context_id) DO UPDATE SET session_id = ?2, updated_at = ?3, owner = ?4, cwd = ?5",
            vec![
                text(&ctx.context_id),
                text(ctx.session_id.as_deref().unwrap_or("")),
                text(&crate::task::now_timestamp()),
                opt_text(ctx.owner.as_deref()),
                opt_text(ctx.cwd.as_deref()),
            ],
        )
        .await
    }

    async fn record_process(
        &self,
        task_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError> {
        self.exec(
            "INSERT OR REPLACE INTO processes (task_id, pgid, start_ticks) VALUES (?1, ?2, ?3)",
            vec![text(task_id), int(pgid as u64), int(start_ticks)],
        )
        .await
    }

    async fn forget_process(&self, task_id: &str) -> Result<(), StoreError> {
        self.exec(
            "DELETE FROM processes WHERE task_id = ?1",
            vec![text(task_id)],
        )
        .await
    }

    async fn recorded_processes(&self) -> Result<Vec<(String, u32, u64)>, StoreError> {
        self.read(|c| {
            let mut stmt = c
                .prepare("SELECT task_id, pgid, start_ticks FROM processes")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, i64>(1)? as u32,
                        r.get::<_, i64>(2)? as u64,
                    ))
                })
                .map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)
        })
        .await
    }

    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError> {
        self.read(|c| {
            let mut stmt = c
                .prepare("SELECT context_id, session_id, owner, cwd FROM contexts")
                .map_err(backend)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(ContextRecord {
                        context_id: r.get(0)?,
                        session_id: Some(r.get::<_, String>(1)?).filter(|s| !s.is_empty()),
                        owner: r.get(2)?,
                        cwd: r.get(3)?,
                    })
                })
                .map_err(backend)?;
            rows.collect::<Result<_, _>>().map_err(backend)
        })
        .await
    }
}

mod push;

#[cfg(test)]
mod tests;
