//! The PostgreSQL store (`--store postgres://...`): the same tables as the SQLite store
//! ([`crate::store`]'s shape: `tasks` index rows, one `events` row per event, `snapshots`
//! checkpoints; contexts, process groups, push configs and dead letters), in a database
//! several hosts can share.
//!
//! The driver is tokio-postgres with the deadpool-postgres pool: both async (no blocking
//! threads, unlike rusqlite), maintained, and small next to sqlx, whose compile-time query
//! checking needs a database at build time. Appends go through one writer task ([`writer`])
//! that commits what is queued in one transaction; reads take a pooled connection and are
//! one statement each ([`read`]), except the reads of events, which are gathered: those
//! asked for while one is under way go together in one statement ([`gather`]). The schema is migrated at open ([`schema`]).
//!
//! **What waits for the database** is what waits for the disk in the SQLite store: an append
//! of streamed progress returns once its events are queued for the writer and in the window
//! (its subscribers see them at once), and the writer commits it with whatever else is
//! queued; an append that carries what a client is answered with or was told was taken (an
//! end, a question, a user's message) returns only after its commit and is not shown before,
//! nor is a new task, and so is the first append of a task this store does not hold live
//! (which checks the host still owns it). A task's writes are committed in the order made.
//! Reads from the database (a task, a listing, events older than the window) first wait for
//! the queued writes they depend on. A background write that fails is reported at the
//! task's next append ([`StoreError::Background`]), and the writes of the task queued after
//! it are not tried.
//!
//! As in the SQLite store, memory holds a bounded window of the recent committed events of
//! the tasks this host writes, from which their live subscribers read: a local stream costs
//! no query per event. The window is dropped when the task ends, when an append fails, and
//! when this host finds its lease gone (another host may have taken its tasks over and
//! written to them since); reads then go to the database.
//!
//! A store can be confined to one PostgreSQL schema (`search_path`): each adapter of a host
//! beside the default one gets its own, and each test its own.

mod cluster;
mod gather;
mod listen;
mod push;
mod read;
mod row;
mod schema;
mod writer;

#[cfg(test)]
pub(crate) mod testing;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::{mpsc, oneshot};

use self::writer::{Queued, Shared, Write};
use super::memory::decode_token;
use super::{ContextRecord, ListPage, ListQuery, Snapshot, StoreError, TaskStore};
use crate::protocol::v1::{StreamResponse, Task};
use crate::store::window::{self, EventWindow};
use crate::task::{LoggedEvent, TaskEvent};

#[cfg(test)]
use schema::{migrate, migrate_to};
pub use schema::{SchemaState, SCHEMA_VERSION};

/// Connections in the pool.
const POOL_SIZE: usize = 8;

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Poisoned
}

/// Position of a task this host writes: its last sequence number, state and recent events.
struct Live {
    last_seq: u64,
    /// Events up to here are committed; the window may hold later ones being written, which
    /// readers must not see yet.
    committed_seq: u64,
    state: String,
    window: EventWindow,
    /// The ticket of the task's last write: all its events are in the database once the
    /// writer is done with it.
    ticket: u64,
    /// Tells this stay in memory from any earlier one (unique in the store): a background
    /// write that failed fails the later ones of its epoch.
    epoch: u64,
}

/// Epochs of [`Live`] entries, unique in the process.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

impl Live {
    fn at(last_seq: u64, state: String) -> Live {
        Live {
            last_seq,
            committed_seq: last_seq,
            state,
            window: EventWindow::default(),
            ticket: 0,
            epoch: EPOCHS.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// The PostgreSQL-backed [`TaskStore`] and [`super::PushStore`].
pub struct PgStore {
    pool: Pool,
    /// The writer's queue and the last ticket handed out (locked while sending, so tickets
    /// follow the queue's order).
    writer: Mutex<(u64, mpsc::UnboundedSender<Queued>)>,
    /// How far the writer has got, and its failed background writes.
    shared: Arc<Shared>,
    live: Mutex<HashMap<String, Live>>,
    /// This host's id once registered ([`crate::store::ClusterStore::register`]): the owner
    /// of the tasks and contexts it creates.
    host: OnceLock<String>,
    /// Wake-ups of other hosts' appends (`LISTEN`).
    listener: listen::Listener,
    /// Reads of events from the database, gathered into one statement.
    gather: gather::Gather,
}

/// The connection settings for `url`, confined to `schema` when given (created if missing).
pub async fn config(url: &str, schema: Option<&str>) -> Result<tokio_postgres::Config, StoreError> {
    let mut config: tokio_postgres::Config = url.parse()?;
    if let Some(schema) = schema {
        let quoted = quote_ident(schema);
        let (mut client, conn) = config.connect(tokio_postgres::NoTls).await?;
        let task = tokio::spawn(conn);
        // Under the migration lock: two hosts creating the schema at once would otherwise
        // collide (IF NOT EXISTS does not guard against a concurrent creation).
        let tx = client.transaction().await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&schema::MIGRATION_LOCK],
        )
        .await?;
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {quoted}"))
            .await?;
        tx.commit().await?;
        drop(client);
        let _ = task.await;
        config.options(format!("-c search_path={quoted}"));
    }
    Ok(config)
}

/// The schema of the database at `url` against this build's, read on one connection that
/// writes nothing (what `agent-host doctor` reports; `serve` migrates instead).
pub async fn inspect(url: &str) -> Result<SchemaState, StoreError> {
    let config: tokio_postgres::Config = url.parse()?;
    let (client, conn) = config.connect(tokio_postgres::NoTls).await?;
    let task = tokio::spawn(conn);
    let state = schema::inspect(&client).await;
    drop(client);
    let _ = task.await;
    state
}

/// A pool of connections with `config`.
fn pool_of(config: tokio_postgres::Config) -> Result<Pool, StoreError> {
    let manager = Manager::from_config(
        config,
        tokio_postgres::NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Ok(Pool::builder(manager).max_size(POOL_SIZE).build()?)
}

/// A pool on `url`, its connections confined to `schema` when given (created if missing).
#[cfg(test)]
async fn pool(url: &str, schema: Option<&str>) -> Result<Pool, StoreError> {
    pool_of(config(url, schema).await?)
}

/// `name` as a quoted SQL identifier.
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl PgStore {
    /// Connects to the database at `url` (confined to `schema` when given) and brings its
    /// schema up to date. Must be called inside a tokio runtime (it starts the writer).
    pub async fn open(url: &str, schema: Option<&str>) -> Result<PgStore, StoreError> {
        let config = config(url, schema).await?;
        let pool = pool_of(config.clone())?;
        let mut store = Self::with_pool(pool).await?;
        store.listener = listen::Listener::new(Some(config));
        Ok(store)
    }

    /// A store on an existing pool; migrates the schema. Without the connection settings it
    /// has no `LISTEN` connection: followers of other hosts' tasks only poll.
    pub async fn with_pool(pool: Pool) -> Result<PgStore, StoreError> {
        {
            let mut client = pool.get().await?;
            schema::migrate(&mut client).await?;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        tokio::spawn(writer::run(pool.clone(), rx, shared.clone()));
        let gather = gather::Gather::start(pool.clone());
        Ok(PgStore {
            pool,
            writer: Mutex::new((0, tx)),
            shared,
            live: Mutex::new(HashMap::new()),
            host: OnceLock::new(),
            listener: listen::Listener::new(None),
            gather,
        })
    }

    /// The pool (for tests and tools that need the database itself).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Forgets the positions and recent events of every task this host writes.
    fn forget_live(&self) -> Result<(), StoreError> {
        self.live.lock().map_err(poisoned)?.clear();
        Ok(())
    }

    /// Queues `w` for the writer; returns its ticket.
    fn send(&self, w: Write) -> Result<u64, StoreError> {
        let mut q = self.writer.lock().map_err(poisoned)?;
        let ticket = q.0 + 1;
        q.1.send(Queued { ticket, write: w })
            .map_err(|_| StoreError::WriterStopped)?;
        q.0 = ticket;
        Ok(ticket)
    }

    /// Waits until every write queued so far is finished.
    async fn flush(&self) -> Result<(), StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Write::Flush { reply })?;
        rx.await.map_err(|_| StoreError::WriterStopped)?
    }

    /// Waits for the queued writes a read of `task_id` depends on (all of them without a
    /// task).
    async fn settle(&self, task_id: Option<&str>) -> Result<(), StoreError> {
        let done = self.shared.done.load(Ordering::Acquire);
        let pending = match task_id {
            Some(id) => self
                .live
                .lock()
                .map_err(poisoned)?
                .get(id)
                .is_some_and(|l| l.ticket > done),
            None => self.writer.lock().map_err(poisoned)?.0 > done,
        };
        if pending {
            self.flush().await?;
        }
        Ok(())
    }

    /// The failure of a background write of the task in `epoch`, once: the task's position
    /// is read again from the database at its next append.
    fn background_failure(&self, task_id: &str, epoch: u64) -> Option<StoreError> {
        let failed = self
            .shared
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        failed
            .get(task_id)
            .filter(|(e, _)| *e == epoch)
            .map(|(_, err)| StoreError::Background(err.clone()))
    }

    /// Numbers, encodes and queues an append of a task held live; returns the receiver of
    /// its outcome when it waits for its commit (else its events are visible at once), its
    /// last sequence number and whether it ends the task.
    #[allow(clippy::type_complexity)]
    fn queue_append(
        &self,
        task_id: &str,
        events: Vec<TaskEvent>,
        wait: bool,
    ) -> Result<(Option<oneshot::Receiver<Result<(), StoreError>>>, u64, bool), StoreError> {
        let mut live = self.live.lock().map_err(poisoned)?;
        let max = window::bound_for(live.len());
        let l = live
            .get_mut(task_id)
            .ok_or_else(|| StoreError::NotFound(task_id.to_string()))?;
        let first_seq = l.last_seq + 1;
        let mut rows = Vec::with_capacity(events.len());
        let (mut status, mut ended, mut checkpoint) = (None, false, false);
        for ev in &events {
            rows.push(serde_json::to_string(ev)?);
            if let TaskEvent::Stream(StreamResponse::StatusUpdate(u)) = ev {
                let state = u.status.state.as_proto_name();
                if state != l.state {
                    checkpoint = true;
                    l.state = state.to_string();
                }
                status = Some((
                    state.to_string(),
                    u.status.timestamp.clone().unwrap_or_default(),
                ));
                ended |= u.status.state.is_terminal();
            }
        }
        for ((seq, ev), json) in (first_seq..).zip(events).zip(&rows) {
            l.window.keep(
                json.len(),
                Arc::new(LoggedEvent::stored(seq, ev, json)),
                max,
            );
        }
        l.last_seq += rows.len() as u64;
        let (reply, rx) = if wait {
            let (reply, rx) = oneshot::channel();
            (Some(reply), Some(rx))
        } else {
            // Streamed progress: visible now, committed in the background.
            l.committed_seq = l.last_seq;
            (None, None)
        };
        // Sent under the lock, so one task's appends reach the writer in order.
        l.ticket = self.send(Write::Append {
            task_id: task_id.to_string(),
            epoch: l.epoch,
            first_seq,
            rows,
            status,
            checkpoint,
            ended,
            host: self.host.get().cloned(),
            reply,
        })?;
        Ok((rx, l.last_seq, ended))
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }

    async fn exec(
        &self,
        sql: &str,
        args: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(sql).await?;
        Ok(c.execute(&stmt, args).await?)
    }
}

/// The terminal states, as stored.
const TERMINAL: &str =
    "('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')";

#[async_trait]
impl TaskStore for PgStore {
    async fn create_owned(&self, task: Task, owner: Option<String>) -> Result<u64, StoreError> {
        let first_event = TaskEvent::Stream(StreamResponse::Task(task.clone()));
        let first = serde_json::to_string(&first_event)?;
        let first_len = first.len();
        let id = task.id.clone();
        let state = task.status.state.as_proto_name().to_string();
        let (reply, rx) = oneshot::channel();
        let ticket = self.send(Write::Create {
            task: Box::new(task),
            first,
            owner,
            host: self.host.get().cloned(),
            reply,
        })?;
        rx.await.map_err(|_| StoreError::WriterStopped)??;
        let mut l = Live::at(1, state);
        l.ticket = ticket;
        let mut live = self.live.lock().map_err(poisoned)?;
        let max = window::bound_for(live.len() + 1);
        l.window
            .keep(first_len, Arc::new(LoggedEvent::new(1, first_event)), max);
        live.insert(id, l);
        Ok(1)
    }

    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError> {
        let known = self
            .live
            .lock()
            .map_err(poisoned)?
            .get(task_id)
            .map(|l| (l.last_seq, l.epoch));
        if let Some((_, epoch)) = known {
            if let Some(e) = self.background_failure(task_id, epoch) {
                // Said once: the position is read again from the database next time.
                self.live.lock().map_err(poisoned)?.remove(task_id);
                return Err(e);
            }
        }
        if known.is_none() {
            // Writes of an earlier stay in memory may still be queued.
            self.settle(None).await?;
            let (last, state) = read::position(&*self.client().await?, task_id)
                .await?
                .ok_or_else(|| StoreError::NotFound(task_id.to_string()))?;
            if events.is_empty() {
                return Ok(last);
            }
            self.live
                .lock()
                .map_err(poisoned)?
                .entry(task_id.to_string())
                .or_insert_with(|| Live::at(last, state));
        }
        if events.is_empty() {
            return Ok(known.map(|k| k.0).unwrap_or_default());
        }
        // The first append of a task not held live waits: it finds out whether this host
        // still owns the task.
        let wait = known.is_none() || events.iter().any(crate::store::sqlite::must_wait);
        let (rx, last, ended) = self.queue_append(task_id, events, wait)?;
        let Some(rx) = rx else {
            return Ok(last);
        };
        let outcome = rx.await.map_err(|_| StoreError::WriterStopped)?;
        let mut live = self.live.lock().map_err(poisoned)?;
        if ended || outcome.is_err() {
            // An ended task is not written again; after a failure the position is read
            // again from the database.
            live.remove(task_id);
        } else if let Some(l) = live.get_mut(task_id) {
            // The writer commits in order, so everything up to `last` is committed.
            l.committed_seq = l.committed_seq.max(last);
        }
        outcome.map(|()| last)
    }

    async fn get(&self, task_id: &str) -> Result<Option<Snapshot>, StoreError> {
        self.settle(Some(task_id)).await?;
        let snap = read::load(&*self.client().await?, task_id).await?;
        if let Some(s) = &snap {
            // What the database showed is committed: the window hands it out too, even
            // before the append that wrote it returned (see the SQLite store's `shown`).
            if let Some(l) = self.live.lock().map_err(poisoned)?.get_mut(task_id) {
                if s.last_seq <= l.last_seq {
                    l.committed_seq = l.committed_seq.max(s.last_seq);
                }
            }
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
                    return Ok(l.window.after(after, l.committed_seq, limit));
                }
            }
        }
        self.settle(Some(task_id)).await?;
        // Followers of tasks another host writes are woken together by its commits.
        self.gather.events(task_id, after, limit).await
    }

    async fn list(&self, query: &ListQuery, with_artifacts: bool) -> Result<ListPage, StoreError> {
        let after_key = match &query.page_token {
            Some(t) if !t.is_empty() => Some(decode_token(t)?),
            _ => None,
        };
        self.settle(None).await?;
        let mut c = self.client().await?;
        // The count and the page from one view of the database.
        let tx = c
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let page = read::list(&*tx, query, after_key, with_artifacts).await?;
        tx.commit().await?;
        Ok(page)
    }

    async fn unfinished(&self) -> Result<Vec<Snapshot>, StoreError> {
        self.settle(None).await?;
        read::unfinished(&**self.client().await?).await
    }

    async fn put_context(&self, ctx: &ContextRecord) -> Result<(), StoreError> {
        // A context another live host owns is not this host's to write (it took this host's
        // contexts over while this one stalled): the row stays the new owner's. One whose
        // owner's lease expired is written, and becomes this host's.
        let n = self
            .exec(
                "INSERT INTO contexts AS c (context_id, session_id, updated_at, owner, cwd, host)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (context_id) DO UPDATE SET session_id = $2, updated_at = $3,
                    owner = $4, cwd = $5, host = COALESCE($6, c.host)
                 WHERE $6 IS NULL OR c.host IS NULL OR c.host = $6 OR NOT EXISTS (
                    SELECT 1 FROM hosts h WHERE h.id = c.host AND h.lease_until >= now())",
                &[
                    &ctx.context_id,
                    &ctx.session_id.as_deref().unwrap_or(""),
                    &crate::task::now_timestamp(),
                    &ctx.owner,
                    &ctx.cwd,
                    &self.host.get(),
                ],
            )
            .await?;
        if n == 1 {
            return Ok(());
        }
        let host = crate::store::ClusterStore::context_host(self, &ctx.context_id).await?;
        Err(StoreError::ContextNotOwned {
            context: ctx.context_id.clone(),
            host: host.unwrap_or_default(),
        })
    }

    async fn terminal_tasks(&self) -> Result<Vec<crate::store::TerminalTask>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                &format!(
                    "SELECT id, context_id, status_ts FROM tasks WHERE state IN {TERMINAL}
                     ORDER BY status_ts DESC, id DESC"
                ),
                &[],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(crate::store::TerminalTask {
                    id: r.try_get(0)?,
                    context_id: r.try_get(1)?,
                    status_ts: r.try_get(2)?,
                })
            })
            .collect()
    }

    async fn delete_terminal(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        // Terminal tasks never change (the writer appends nothing to them), so each is
        // deleted in a transaction of its own that checks its state first.
        let mut client = self.client().await?;
        let mut deleted = Vec::new();
        for id in ids {
            let tx = client.transaction().await?;
            let context: Option<String> = tx
                .query_opt(
                    &format!("SELECT context_id FROM tasks WHERE id = $1 AND state IN {TERMINAL}"),
                    &[id],
                )
                .await?
                .map(|r| r.try_get(0))
                .transpose()?;
            let Some(context) = context else {
                continue;
            };
            for sql in [
                "DELETE FROM events WHERE task_id = $1",
                "DELETE FROM snapshots WHERE task_id = $1",
                "DELETE FROM push_configs WHERE task_id = $1",
                "DELETE FROM push_dead_letters WHERE task_id = $1",
                "DELETE FROM processes WHERE task_id = $1",
                "DELETE FROM tasks WHERE id = $1",
            ] {
                tx.execute(sql, &[id]).await?;
            }
            tx.execute(
                "DELETE FROM contexts WHERE context_id = $1
                 AND NOT EXISTS (SELECT 1 FROM tasks WHERE context_id = $1)",
                &[&context],
            )
            .await?;
            tx.commit().await?;
            deleted.push(id.clone());
        }
        Ok(deleted)
    }

    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT context_id, session_id, owner, cwd FROM contexts",
                &[],
            )
            .await?;
        rows.iter().map(context_record).collect()
    }

    async fn context(&self, context_id: &str) -> Result<Option<ContextRecord>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT context_id, session_id, owner, cwd FROM contexts WHERE context_id = $1",
                &[&context_id],
            )
            .await?;
        row.as_ref().map(context_record).transpose()
    }

    async fn record_process(
        &self,
        task_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError> {
        self.exec(
            "INSERT INTO processes (task_id, pgid, start_ticks) VALUES ($1, $2, $3)
             ON CONFLICT (task_id) DO UPDATE SET pgid = $2, start_ticks = $3",
            &[&task_id, &(pgid as i64), &(start_ticks as i64)],
        )
        .await?;
        Ok(())
    }

    async fn forget_process(&self, task_id: &str) -> Result<(), StoreError> {
        self.exec("DELETE FROM processes WHERE task_id = $1", &[&task_id])
            .await?;
        Ok(())
    }

    async fn recorded_processes(&self) -> Result<Vec<(String, u32, u64)>, StoreError> {
        let rows = self
            .client()
            .await?
            .query("SELECT task_id, pgid, start_ticks FROM processes", &[])
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get(0)?,
                    r.try_get::<_, i64>(1)? as u32,
                    r.try_get::<_, i64>(2)? as u64,
                ))
            })
            .collect()
    }

    fn cluster(&self) -> Option<&dyn crate::store::ClusterStore> {
        Some(self)
    }

    async fn flush_writes(&self) -> Result<(), StoreError> {
        self.flush().await
    }
}

/// A row of `contexts` (context_id, session_id, owner, cwd).
fn context_record(r: &tokio_postgres::Row) -> Result<ContextRecord, StoreError> {
    Ok(ContextRecord {
        context_id: r.try_get(0)?,
        session_id: Some(r.try_get::<_, String>(1)?).filter(|s| !s.is_empty()),
        owner: r.try_get(2)?,
        cwd: r.try_get(3)?,
    })
}

#[cfg(test)]
mod tests;
