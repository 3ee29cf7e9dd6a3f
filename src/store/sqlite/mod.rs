//! The SQLite store, the default: tasks, their event logs and context sessions in one file
//! (WAL mode), so nothing is lost when the host stops or crashes.
//!
//! The tables follow the shape of every store ([`crate::store`]): `tasks` holds each task's
//! small index row (state, status time, owner, last sequence), `events` the event log, one
//! row per batch of a task's events written together ([`rows`]), `snapshots` each task's
//! latest checkpoint. Every write goes through one writer thread ([`writer`]) that commits
//! whatever is queued in one transaction. Memory holds only a bounded window of recent events
//! of the tasks being written (at most [`window::WINDOW_BYTES_MAX`] bytes each, less when many are
//! written at once: see [`window`]),
//! from which live subscribers read, and the last events of the tasks that ended most
//! recently ([`recent`]); older or larger events and every other read come from the
//! database, on blocking threads.
//!
//! **What waits for the disk.** An append of streamed progress (artifact chunks, `working`
//! updates) returns once its events are queued for the writer and in the window, so
//! subscribers see them at once, and the writer commits them within
//! [`LINGER`](queue::LINGER) (group commit: a fast stream costs a few transactions, not one
//! per event). An append that carries what a client is answered with or was told was taken
//! (a terminal state, a question to the user, a user's message) returns only after its
//! commit, and is not shown to readers before; so is every other write (a new task, a
//! context, a process group).
//! Writes are committed in the order they were made, so a committed end means everything
//! before it is committed too. Reads that go to the database (a task, a listing, events
//! older than the window) first wait for the writes they depend on. A background write
//! that fails is reported at the task's next append ([`StoreError::Background`]).
//!
//! Opening the store takes the data folder's [`DataLock`]: one host per database.

mod push;
mod queue;
mod read;
mod recent;
mod rows;
mod schema;
mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use async_trait::async_trait;
use rusqlite::Connection;
use tokio::sync::oneshot;

use self::queue::Write;
use self::queue::{Queue, HIGH_WATER};
use self::recent::{Ended, KnownOwner, Recent};
use self::rows::encode;
use self::writer::Failures;
use super::lock::DataLock;
use super::memory::decode_token;
use super::{
    files, ContextRecord, ListPage, ListQuery, Snapshot, StoreError, TaskStore, TerminalTask,
};
use crate::protocol::v1::{StreamResponse, Task};
use crate::task::{LoggedEvent, TaskEvent};

pub(crate) use writer::Progress;

use crate::store::window::{self, EventWindow, WINDOW_BYTES};
#[cfg(test)]
use schema::SCHEMA_VERSION;
/// Reader connections kept open.
const READERS: usize = 4;

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Poisoned
}

/// Position of a task being written: its last sequence number and recent events.
struct Live {
    id: Arc<str>,
    last_seq: u64,
    /// Readers see events up to here. The window may hold later ones: an end or a question
    /// being committed, which no reader may act on before it is in the database.
    visible_seq: u64,
    /// The task's state as last written (input-required and auth-required are checkpoints).
    state: String,
    /// Its owner, when known (the task was created by this store).
    owner: KnownOwner,
    /// Recent events, contiguous up to `last_seq`.
    window: EventWindow,
    /// The queue ticket of the task's last write: its events are all in the database once
    /// the writer is done with that ticket.
    ticket: u64,
    /// Its epoch in [`Failures`]: moves on each time a failed write is reported.
    epoch: u32,
    /// A write of it failed: the window may hold events the database does not, so it is
    /// not kept once the task ended.
    failed: bool,
}

impl Live {
    fn new(id: &str, last_seq: u64, state: String) -> Live {
        Live {
            id: id.into(),
            last_seq,
            visible_seq: last_seq,
            state,
            owner: KnownOwner::Unknown,
            window: EventWindow::default(),
            ticket: 0,
            epoch: 0,
            failed: false,
        }
    }
}

/// The SQLite-backed [`TaskStore`].
pub struct SqliteStore {
    path: PathBuf,
    queue: Arc<Queue>,
    failures: Arc<Failures>,
    /// The writer thread, joined when the store is dropped (so what is queued is written).
    writer: Mutex<Option<JoinHandle<()>>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    live: Mutex<HashMap<String, Live>>,
    /// The last events of the tasks that ended most recently. Locked after `live` when both
    /// are.
    recent: Mutex<Recent>,
    lock: DataLock,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    /// Refuses, naming the other host, when another agent-host has it open. A folder it
    /// creates is 0700; the database, its WAL and shared-memory files and the lock file are
    /// 0600.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::check_path(path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            files::create_dir_all(dir).map_err(StoreError::io(path))?;
        }
        let lock = DataLock::acquire(path)?;
        schema::create_private(path)?;
        let mut conn = schema::connect(path)?;
        schema::migrate(&mut conn)?;
        let queue = Arc::new(Queue::new());
        let failures = Arc::new(Failures::default());
        let writer = {
            let (queue, failures) = (queue.clone(), failures.clone());
            std::thread::Builder::new()
                .name("agent-host-store".into())
                .spawn(move || writer::run(conn, queue, failures))
                .map_err(StoreError::io(path))?
        };
        Ok(SqliteStore {
            path: path.to_path_buf(),
            queue,
            failures,
            writer: Mutex::new(Some(writer)),
            readers: Arc::new(Mutex::new(Vec::new())),
            live: Mutex::new(HashMap::new()),
            recent: Mutex::new(Recent::default()),
            lock,
        })
    }

    /// Whether a database can be at `path`, looked at without writing: not a folder, and no
    /// file where a folder of its path should be. What `open` checks first, and `doctor`.
    pub fn check_path(path: &Path) -> Result<(), StoreError> {
        let at = |source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        };
        if path.is_dir() {
            return Err(at(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory, not a database file",
            )));
        }
        match path.parent().and_then(files::blocked_at) {
            Some(part) => Err(at(files::not_a_directory(&part))),
            None => Ok(()),
        }
    }

    /// Where the database is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records in the data folder's lock file the port this host listens on, so that a
    /// second host started on the same folder names it.
    pub fn record_port(&self, port: u16) -> Result<(), StoreError> {
        self.lock.record_port(port)
    }

    /// Waits until every write made so far is in the database.
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.write(|reply| Write::Flush { reply }).await
    }

    /// Waits for the writes a read of `task_id` depends on (all of them without a task).
    async fn settle(&self, task_id: Option<&str>) -> Result<(), StoreError> {
        let pending = match task_id {
            Some(id) => {
                let ticket = self
                    .live
                    .lock()
                    .map_err(poisoned)?
                    .get(id)
                    .map(|l| l.ticket);
                ticket.is_some_and(|t| t > self.queue.done())
            }
            None => self.queue.busy(),
        };
        if pending {
            self.flush().await?;
        }
        Ok(())
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
            let conn = pool.lock().map_err(poisoned)?.pop();
            let mut conn = match conn {
                Some(c) => c,
                None => schema::connect(&path)?,
            };
            let result = f(&mut conn);
            let mut pool = pool.lock().map_err(poisoned)?;
            if pool.len() < READERS {
                pool.push(conn);
            }
            result
        })
        .await?
    }

    /// Runs `f` in a read transaction (one consistent view of the database).
    async fn read_tx<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.read(move |c| {
            let tx = c.transaction()?;
            f(&tx)
        })
        .await
    }

    /// Sends a write and waits for its commit.
    async fn write(&self, w: impl FnOnce(queue::Reply) -> Write) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.queue.push(w(reply), true)?;
        rx.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Runs one statement through the writer and waits for its commit.
    async fn exec(
        &self,
        sql: &'static str,
        args: Vec<rusqlite::types::Value>,
    ) -> Result<(), StoreError> {
        self.write(|reply| Write::Exec { sql, args, reply }).await
    }

    /// A reader was given the task at `seq` from the database: everything up to there is
    /// committed, so the window shows it too, even before the append that wrote it returned
    /// (the writer's reply reaches that append later). Without this a stream that starts
    /// where the snapshot ends would wait for events the window does not yet hand out, and
    /// when the last one is a question, nothing ever wakes it (issue 33).
    fn shown(&self, task_id: &str, seq: u64) -> Result<(), StoreError> {
        if let Some(l) = self.live.lock().map_err(poisoned)?.get_mut(task_id) {
            if seq <= l.last_seq {
                l.visible_seq = l.visible_seq.max(seq);
            }
        }
        Ok(())
    }

    /// The last sequence number and state of a task, from the database.
    async fn position(&self, task_id: &str) -> Result<(u64, String), StoreError> {
        let id = task_id.to_string();
        self.read(move |c| read::position(c, &id)?.ok_or(StoreError::NotFound(id)))
            .await
    }
}

impl Drop for SqliteStore {
    /// Writes what is queued before the store goes (the writer stops when it is done).
    fn drop(&mut self) {
        self.queue.close();
        let writer = self
            .writer
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(w) = writer {
            if w.join().is_err() {
                tracing::error!("the store's writer thread panicked");
            }
        }
    }
}

/// Whether an append must be committed before it returns (and before readers see it): what
/// a client is answered with (an end, a question) or was told was taken (a user's message).
/// Streamed progress is committed in the background.
pub(crate) fn must_wait(ev: &TaskEvent) -> bool {
    matches!(ev, TaskEvent::UserMessage(_)) || ev.ends_stream()
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

#[async_trait]
impl TaskStore for SqliteStore {
    async fn create_owned(&self, task: Task, owner: Option<String>) -> Result<u64, StoreError> {
        let queued = encode(1, TaskEvent::Stream(StreamResponse::Task(task.clone())))?;
        let first_event = queued.event.clone();
        let first = queued.into_text();
        let first_len = first.len();
        let id = task.id.clone();
        let state = task.status.state.as_proto_name().to_string();
        self.write(|reply| Write::Create {
            task: Box::new(task),
            first,
            owner: owner.clone(),
            reply,
        })
        .await?;
        let mut live = self.live.lock().map_err(poisoned)?;
        let mut l = Live::new(&id, 1, state);
        l.owner = KnownOwner::Is(owner);
        let max = window::bound_for(live.len() + 1);
        l.window.keep(first_len, first_event, max);
        live.insert(id, l);
        Ok(1)
    }

    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError> {
        let known = self
            .live
            .lock()
            .map_err(poisoned)?
            .get(task_id)
            .map(|l| l.last_seq);
        if events.is_empty() {
            return match known {
                Some(s) => Ok(s),
                None => Ok(self.position(task_id).await?.0),
            };
        }
        if known.is_none() {
            // Not expected of an ended task, but then it is no longer one.
            self.recent.lock().map_err(poisoned)?.forget(task_id);
            let (last, state) = self.position(task_id).await?;
            let mut live = self.live.lock().map_err(poisoned)?;
            live.entry(task_id.to_string())
                .or_insert_with(|| Live::new(task_id, last, state));
        }
        let wait = events.iter().any(must_wait);
        let (rx, first, last, ended, epoch, queued) = {
            let mut live = self.live.lock().map_err(poisoned)?;
            let max = window::bound_for(live.len());
            let l = live
                .get_mut(task_id)
                .ok_or_else(|| StoreError::NotFound(task_id.to_string()))?;
            if let Some(e) = self.failures.of(task_id, l.epoch) {
                // A background write of this task failed: said once, and the next append
                // is tried again.
                l.epoch += 1;
                l.failed = true;
                return Err(e);
            }
            let first = l.last_seq + 1;
            let mut rows = Vec::with_capacity(events.len());
            let mut status = None;
            let mut ended = false;
            let mut checkpoint = false;
            for ev in events {
                l.last_seq += 1;
                if let TaskEvent::Stream(StreamResponse::StatusUpdate(u)) = &ev {
                    let state = u.status.state.as_proto_name();
                    if state != l.state {
                        // Waiting for the client is a checkpoint (so is an end); the other
                        // changes (submitted, working) are rebuilt from the events.
                        checkpoint |= u.status.state.is_interrupted();
                        l.state = state.to_string();
                    }
                    status = Some((
                        state.to_string(),
                        u.status.timestamp.clone().unwrap_or_default(),
                    ));
                    ended |= u.status.state.is_terminal();
                }
                let queued = encode(l.last_seq, ev)?;
                let size = queued.len();
                l.window.keep(size, queued.event.clone(), max);
                rows.push(queued);
            }
            let (reply, rx) = if wait {
                let (reply, rx) = oneshot::channel();
                (Some(reply), Some(rx))
            } else {
                l.visible_seq = l.last_seq;
                (None, None)
            };
            // Queued under the lock, so one task's appends reach the writer in order.
            let (ticket, queued) = self.queue.push(
                Write::Append {
                    task_id: l.id.clone(),
                    epoch: l.epoch,
                    rows,
                    status,
                    checkpoint,
                    ended,
                    reply,
                },
                wait,
            )?;
            l.ticket = ticket;
            (rx, first, l.last_seq, ended, l.epoch, queued)
        };
        match rx {
            Some(rx) => {
                let outcome = rx.await.map_err(|_| StoreError::WriterStopped)?;
                let mut live = self.live.lock().map_err(poisoned)?;
                match outcome {
                    Ok(()) if ended => {
                        // A task that ended is read from the database from now on, but for
                        // the last events of the most recent ones.
                        if let Some(l) = live.remove(task_id).filter(|l| !l.failed) {
                            let ended = Ended {
                                owner: l.owner,
                                last_seq: l.last_seq,
                                window: l.window,
                            };
                            self.recent.lock().map_err(poisoned)?.keep(l.id, ended);
                        }
                        self.failures.forget(task_id);
                    }
                    Ok(()) => {
                        if let Some(l) = live.get_mut(task_id) {
                            l.visible_seq = l.visible_seq.max(last);
                        }
                    }
                    Err(e) => {
                        if let Some(l) = live.get_mut(task_id) {
                            // Said here, so not again at the next append; the events that
                            // are not stored leave the window unseen.
                            if l.epoch == epoch {
                                l.epoch += 1;
                            }
                            l.failed = true;
                            l.window.forget(first, last);
                        }
                        return Err(e);
                    }
                }
            }
            // A producer faster than the disk waits for it.
            None if queued >= HIGH_WATER => self.flush().await?,
            None => {}
        }
        Ok(last)
    }

    async fn get(&self, task_id: &str) -> Result<Option<Snapshot>, StoreError> {
        if let Some(snap) = self.recent.lock().map_err(poisoned)?.snapshot(task_id) {
            return Ok(Some(snap));
        }
        self.settle(Some(task_id)).await?;
        let id = task_id.to_string();
        let snap = self.read_tx(move |c| read::load_owned(c, &id)).await?;
        if let Some(s) = &snap {
            self.shown(task_id, s.last_seq)?;
        }
        Ok(snap)
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
        {
            let live = self.live.lock().map_err(poisoned)?;
            if let Some(l) = live.get(task_id) {
                let first = l.window.first_seq().unwrap_or(l.last_seq + 1);
                if after + 1 >= first {
                    return Ok(l.window.after(after, l.visible_seq, limit));
                }
            }
        }
        let recent = self
            .recent
            .lock()
            .map_err(poisoned)?
            .events_after(task_id, after, limit);
        if let Some(evs) = recent {
            return Ok(evs);
        }
        self.settle(Some(task_id)).await?;
        let id = task_id.to_string();
        self.read_tx(move |c| {
            let evs = read::read_events(c, &id, after, limit)?;
            if evs.is_empty() && !read::task_exists(c, &id)? {
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
        self.settle(None).await?;
        let q = query.clone();
        self.read_tx(move |c| read::list(c, &q, after_key, with_artifacts))
            .await
    }

    async fn unfinished(&self) -> Result<Vec<Snapshot>, StoreError> {
        self.settle(None).await?;
        self.read_tx(read::unfinished).await
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
            let mut stmt = c.prepare("SELECT task_id, pgid, start_ticks FROM processes")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)? as u32,
                    r.get::<_, i64>(2)? as u64,
                ))
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }

    async fn terminal_tasks(&self) -> Result<Vec<TerminalTask>, StoreError> {
        self.read(read::terminal_tasks).await
    }

    async fn delete_terminal(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        // Terminal tasks never change, so those found terminal now are the ones the writer
        // deletes (it checks the state again in its transaction).
        let wanted = ids.to_vec();
        let deleted = self.read(move |c| read::which_terminal(c, &wanted)).await?;
        if deleted.is_empty() {
            return Ok(deleted);
        }
        let ids = deleted.clone();
        self.write(|reply| Write::Delete { ids, reply }).await?;
        let mut live = self.live.lock().map_err(poisoned)?;
        let mut recent = self.recent.lock().map_err(poisoned)?;
        for id in &deleted {
            live.remove(id);
            recent.forget(id);
            self.failures.forget(id);
        }
        Ok(deleted)
    }

    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare("SELECT context_id, session_id, owner, cwd FROM contexts")?;
            let rows = stmt.query_map([], |r| {
                Ok(ContextRecord {
                    context_id: r.get(0)?,
                    session_id: Some(r.get::<_, String>(1)?).filter(|s| !s.is_empty()),
                    owner: r.get(2)?,
                    cwd: r.get(3)?,
                })
            })?;
            Ok(rows.collect::<Result<_, _>>()?)
        })
        .await
    }
}

#[cfg(test)]
mod tests;
