//! The SQLite store's writer thread: every write goes through it, and it commits whatever is
//! queued in one transaction (group commit), so writes never block the async runtime and many
//! busy tasks share commits. It also decides when to checkpoint a task (see the
//! [store's module docs](crate::store)).

use std::collections::HashMap;
use std::sync::mpsc;

use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Transaction};
use tokio::sync::oneshot;

use super::read::load_task;
use crate::protocol::v1::Task;
use crate::store::StoreError;

/// Writes taken into one transaction at most.
const BATCH: usize = 512;

/// Event bytes since a task's checkpoint that always earn a new one (a checkpoint is also
/// written when they reach the size of the last checkpoint: so checkpoints of a growing task
/// are written at doubling sizes, and their total cost stays proportional to the task).
pub const CHECKPOINT_MIN_BYTES: usize = 64 * 1024;

pub(super) type Reply = oneshot::Sender<Result<(), StoreError>>;

pub(super) enum Write {
    Create {
        task: Box<Task>,
        /// The first event (the task as created), encoded.
        first: String,
        owner: Option<String>,
        reply: Reply,
    },
    Append {
        task_id: String,
        rows: Vec<(u64, String)>,
        /// New state and status timestamp, when the events changed the status.
        status: Option<(String, String)>,
        /// Checkpoint now (the task's state changed).
        checkpoint: bool,
        /// The task ended: nothing more will be appended.
        ended: bool,
        reply: Reply,
    },
    /// Deletes these tasks, where terminal, with their rows and orphaned contexts.
    Delete { ids: Vec<String>, reply: Reply },
    /// Any other statement.
    Exec {
        sql: &'static str,
        args: Vec<rusqlite::types::Value>,
        reply: Reply,
    },
}

impl Write {
    fn reply(self) -> Reply {
        match self {
            Write::Create { reply, .. }
            | Write::Append { reply, .. }
            | Write::Delete { reply, .. }
            | Write::Exec { reply, .. } => reply,
        }
    }
}

/// Fewer events than this since a task's checkpoint, together at least
/// [`LARGE_EVENTS_BYTES`], are never checkpointed (see [`Progress::few_and_large`]).
pub const FEW_EVENTS: usize = 16;
/// See [`FEW_EVENTS`]: the size of the store's memory window per task.
pub const LARGE_EVENTS_BYTES: usize = super::WINDOW_BYTES;

/// Bytes of a task's last checkpoint and of its events since, and how many events those are
/// (the PostgreSQL store's writer follows the same rule).
#[derive(Clone, Copy)]
pub(crate) struct Progress {
    pub(crate) snapshot: usize,
    pub(crate) since: usize,
    pub(crate) rows: usize,
}

impl Progress {
    pub(crate) fn fresh(snapshot: usize) -> Progress {
        Progress {
            snapshot,
            since: 0,
            rows: 0,
        }
    }

    /// The events since the checkpoint are a few large ones (long lines of output): no
    /// checkpoint then, not even at a change of state. Replaying a few events costs a read no
    /// more than reading a checkpoint that holds them (each row is parsed and applied, then
    /// dropped), while writing that checkpoint would hold the whole task in memory several
    /// times at once (the task, its JSON, SQLite's copy of the row): for a task with lines of
    /// 15 MB, hundreds of MB.
    fn few_and_large(&self) -> bool {
        self.rows < FEW_EVENTS && self.since >= LARGE_EVENTS_BYTES
    }

    /// Counts `rows` events of `bytes` appended; true when a checkpoint is due: the task's
    /// state changed (`state_changed`, `ended`) or the events since reached the size of the
    /// checkpoint (at least [`CHECKPOINT_MIN_BYTES`]), unless they are few and large.
    pub(crate) fn appended(
        &mut self,
        rows: usize,
        bytes: usize,
        state_changed: bool,
        ended: bool,
    ) -> bool {
        self.since += bytes;
        self.rows += rows;
        let wanted =
            state_changed || ended || self.since >= self.snapshot.max(CHECKPOINT_MIN_BYTES);
        wanted && !self.few_and_large()
    }
}

/// Runs the writer until every sender is gone.
pub(super) fn run(mut conn: Connection, rx: mpsc::Receiver<Write>) {
    let mut progress: HashMap<String, Progress> = HashMap::new();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        match write_all(&mut conn, &batch, &mut progress) {
            Ok(()) => {
                for w in batch {
                    let _ = w.reply().send(Ok(()));
                }
            }
            Err(e) => {
                // One failed write must not fail the others of its batch (a duplicate task
                // id beside other tasks' events): each is tried again alone, and answered
                // with its own outcome.
                tracing::debug!(error = %e, writes = batch.len(), "a batch failed; writing one by one");
                // What was counted for the failed batch is recounted from the database.
                progress.clear();
                for w in batch {
                    let outcome = write_all(&mut conn, std::slice::from_ref(&w), &mut progress);
                    let _ = w.reply().send(outcome);
                }
            }
        }
    }
}

/// Writes `batch` in one transaction.
fn write_all(
    conn: &mut Connection,
    batch: &[Write],
    progress: &mut HashMap<String, Progress>,
) -> Result<(), StoreError> {
    let tx = conn.transaction()?;
    let mut due: Vec<(&str, bool)> = Vec::new();
    for w in batch {
        match w {
            Write::Create {
                task, first, owner, ..
            } => {
                create(&tx, task, first, owner.as_deref())?;
                progress.insert(task.id.clone(), Progress::fresh(first.len()));
            }
            Write::Append {
                task_id,
                rows,
                status,
                checkpoint,
                ended,
                ..
            } => {
                let bytes = append(&tx, task_id, rows, status.as_ref())?;
                let p = match progress.get_mut(task_id) {
                    Some(p) => p,
                    None => {
                        let p = measure(&tx, task_id)?;
                        progress.entry(task_id.clone()).or_insert(p)
                    }
                };
                if p.appended(rows.len(), bytes, *checkpoint, *ended) {
                    match due.iter_mut().find(|(id, _)| *id == task_id.as_str()) {
                        Some(d) => d.1 |= *ended,
                        None => due.push((task_id, *ended)),
                    }
                } else if *ended {
                    // Nothing more comes for it.
                    progress.remove(task_id);
                }
            }
            Write::Exec { sql, args, .. } => {
                tx.prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(args.iter()))?;
            }
            Write::Delete { ids, .. } => {
                for id in ids {
                    delete_terminal(&tx, id)?;
                    progress.remove(id);
                }
            }
        }
    }
    for (id, ended) in due {
        let size = checkpoint(&tx, id)?;
        if ended {
            progress.remove(id);
        } else {
            progress.insert(id.to_string(), Progress::fresh(size));
        }
    }
    tx.commit()?;
    Ok(())
}

/// The states in which a task never changes again (as stored, proto names).
pub(super) const TERMINAL: &str =
    "('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')";

/// Deletes task `id` and everything kept for it when it is terminal, then its context when
/// no other task belongs to it.
fn delete_terminal(tx: &Transaction, id: &str) -> Result<(), StoreError> {
    let context: Option<String> = tx
        .prepare_cached(&format!(
            "SELECT context_id FROM tasks WHERE id = ?1 AND state IN {TERMINAL}"
        ))?
        .query_row([id], |r| r.get(0))
        .optional()?;
    let Some(context) = context else {
        return Ok(());
    };
    for sql in [
        "DELETE FROM events WHERE task_id = ?1",
        "DELETE FROM snapshots WHERE task_id = ?1",
        "DELETE FROM push_configs WHERE task_id = ?1",
        "DELETE FROM push_dead_letters WHERE task_id = ?1",
        "DELETE FROM processes WHERE task_id = ?1",
        "DELETE FROM tasks WHERE id = ?1",
    ] {
        tx.prepare_cached(sql)?.execute([id])?;
    }
    tx.prepare_cached(
        "DELETE FROM contexts WHERE context_id = ?1
         AND NOT EXISTS (SELECT 1 FROM tasks WHERE context_id = ?1)",
    )?
    .execute([&context])?;
    Ok(())
}

fn create(
    tx: &Transaction,
    task: &Task,
    first: &str,
    owner: Option<&str>,
) -> Result<(), StoreError> {
    let ts = task.status.timestamp.clone().unwrap_or_default();
    let inserted = tx.execute(
        "INSERT INTO tasks (id, context_id, state, status_ts, created_at, last_seq, owner)
         VALUES (?1, ?2, ?3, ?4, ?4, 1, ?5)",
        params![
            task.id,
            task.context_id,
            task.status.state.as_proto_name(),
            ts,
            owner
        ],
    );
    match inserted {
        Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == ErrorCode::ConstraintViolation => {
            return Err(StoreError::Exists(task.id.clone()));
        }
        other => other?,
    };
    // The task as created is both its first event and its first checkpoint.
    tx.execute(
        "INSERT INTO snapshots (task_id, seq, json) VALUES (?1, 1, ?2)",
        params![task.id, serde_json::to_string(task)?],
    )?;
    tx.execute(
        "INSERT INTO events (task_id, seq, json) VALUES (?1, 1, ?2)",
        params![task.id, first],
    )?;
    Ok(())
}

/// Inserts the rows and updates the task's index row; returns the rows' bytes.
fn append(
    tx: &Transaction,
    task_id: &str,
    rows: &[(u64, String)],
    status: Option<&(String, String)>,
) -> Result<usize, StoreError> {
    let mut bytes = 0;
    {
        let mut ins =
            tx.prepare_cached("INSERT INTO events (task_id, seq, json) VALUES (?1, ?2, ?3)")?;
        for (seq, json) in rows {
            ins.execute(params![task_id, *seq as i64, json])?;
            bytes += json.len();
        }
    }
    let last = rows.last().map(|r| r.0).unwrap_or(0) as i64;
    let updated = match status {
        Some((state, ts)) => tx
            .prepare_cached(
                "UPDATE tasks SET last_seq = ?2, state = ?3, status_ts = ?4 WHERE id = ?1",
            )?
            .execute(params![task_id, last, state, ts])?,
        None => tx
            .prepare_cached("UPDATE tasks SET last_seq = ?2 WHERE id = ?1")?
            .execute(params![task_id, last])?,
    };
    if updated == 0 {
        return Err(StoreError::NotFound(task_id.to_string()));
    }
    Ok(bytes)
}

/// The checkpoint progress of a task this writer has not seen yet (after a restart).
fn measure(tx: &Transaction, task_id: &str) -> Result<Progress, StoreError> {
    let (seq, snapshot) = tx
        .query_row(
            "SELECT seq, length(json) FROM snapshots WHERE task_id = ?1",
            [task_id],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )
        .optional()?
        .unwrap_or((0, 0));
    let (since, rows): (i64, i64) = tx.query_row(
        "SELECT COALESCE(SUM(length(json)), 0), COUNT(*) FROM events WHERE task_id = ?1 AND seq > ?2",
        params![task_id, seq],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Progress {
        snapshot: snapshot as usize,
        since: since as usize,
        rows: rows as usize,
    })
}

/// Writes a new checkpoint of a task: its last checkpoint with the events since applied.
/// Returns its size.
fn checkpoint(tx: &Transaction, id: &str) -> Result<usize, StoreError> {
    let Some((task, seq)) = load_task(tx, id)? else {
        return Ok(0);
    };
    let json = serde_json::to_string(&task)?;
    tx.prepare_cached(
        "INSERT INTO snapshots (task_id, seq, json) VALUES (?1, ?2, ?3)
         ON CONFLICT (task_id) DO UPDATE SET seq = ?2, json = ?3",
    )?
    .execute(params![id, seq as i64, json])?;
    Ok(json.len())
}
