//! The SQLite store's writer thread: every write goes through it, and it commits whatever is
//! queued in one transaction (group commit; see [`super::queue`] for when it wakes), so writes
//! never block the async runtime and a stream of events shares commits. It also decides when
//! to checkpoint a task (see the [store's module docs](crate::store)).
//!
//! Streamed events are written in the background: their append returned before the commit.
//! When such a write fails, the failure is recorded in [`Failures`] and the task's later
//! writes queued before anyone heard of it are not tried (their events would follow a hole);
//! the store reports the failure at the task's next append.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rusqlite::{params, Connection, ErrorCode, OptionalExtension, Transaction};

use super::queue::{Queue, StopGuard, Write};
use super::read::{load_task, TERMINAL};
use super::rows::{pack, Queued, Row};
use crate::protocol::v1::Task;
use crate::store::StoreError;
use crate::task::apply;

/// The largest task the writer keeps in memory (its last checkpoint and the events since,
/// in bytes) to checkpoint it from there; a larger one is read back from its last checkpoint
/// and the events since at each of its checkpoints. For a long task of small events that
/// reading back cost more than writing the events (a fifth of the store's CPU per event at
/// 100,000 events, when this bound was 1 MiB; see `bench/log`).
const KEEP_TASK_BYTES: usize = 16 * 1024 * 1024;

/// The most the writer keeps of all the tasks it holds together (each counted at its last
/// checkpoint and the events since when it was taken): many long live tasks do not each hold
/// a copy here; beyond it, a task's checkpoints are read back.
const KEEP_ALL_BYTES: usize = 32 * 1024 * 1024;

/// Event bytes since a task's checkpoint that always earn a new one. A checkpoint is also
/// written when the events since reach those before it, so a growing task is checkpointed
/// each time its event log doubles, and its checkpoints together cost at most about three
/// times the task (twice while it grows, and the one at its end); a read replays at most
/// half of its events on top of the checkpoint.
///
/// Counted in event bytes, not against the checkpoint's size: a stream's event carries its
/// task's and artifact's ids besides the text, so a task of short lines is a fifth of its
/// events' size, and "events as large as the checkpoint" came every fifth of growth (a task
/// of 10,000 lines was checkpointed eleven times, writing as many bytes of checkpoints as of
/// events; 100,000 lines wrote more).
pub const CHECKPOINT_MIN_BYTES: usize = 1024 * 1024;

/// Background writes that failed, by task: the task's epoch at the time, and the error.
/// An append made in that epoch is not tried; the store reports the error once, at the
/// task's next append, and moves the task to the next epoch.
#[derive(Default)]
pub(super) struct Failures(Mutex<FailureMap>);

/// Task → the epoch its failed write was made in, and the error.
type FailureMap = HashMap<Arc<str>, (u32, Arc<StoreError>)>;

/// A task's last sequence and latest status in a batch.
type Touched<'a> = (u64, Option<&'a (String, String)>);

impl Failures {
    fn map(&self) -> std::sync::MutexGuard<'_, FailureMap> {
        // Plain data: a panic while it was held left nothing half-done.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The failure of a background write of `task` in `epoch`, if one failed.
    pub(super) fn of(&self, task: &str, epoch: u32) -> Option<StoreError> {
        let map = self.map();
        if map.is_empty() {
            return None;
        }
        of_locked(&map, task, epoch)
    }

    /// Forgets a task's failure (it ended or was deleted).
    pub(super) fn forget(&self, task: &str) {
        let mut map = self.map();
        if !map.is_empty() {
            map.remove(task);
        }
    }

    fn record(&self, task: &Arc<str>, epoch: u32, err: StoreError) -> StoreError {
        let err = Arc::new(err);
        self.map().insert(task.clone(), (epoch, err.clone()));
        StoreError::Background(err)
    }

    /// The error a write gets instead of being tried, when an earlier one of its task in
    /// its epoch failed.
    fn skip(&self, w: &Write) -> Option<StoreError> {
        let Write::Append { task_id, epoch, .. } = w else {
            return None;
        };
        let map = self.map();
        if map.is_empty() {
            return None;
        }
        of_locked(&map, task_id, *epoch)
    }
}

fn of_locked(map: &FailureMap, task: &str, epoch: u32) -> Option<StoreError> {
    match map.get(task) {
        Some((e, err)) if *e == epoch => Some(StoreError::Background(err.clone())),
        _ => None,
    }
}

/// Fewer events than this since a task's checkpoint, together at least
/// [`LARGE_EVENTS_BYTES`], are never checkpointed (see [`Progress::few_and_large`]).
pub const FEW_EVENTS: usize = 16;
/// See [`FEW_EVENTS`]: the size of the store's memory window per task.
pub const LARGE_EVENTS_BYTES: usize = super::WINDOW_BYTES;

/// Bytes of a task's last checkpoint, of its events before it and since, how many events
/// those since are (the PostgreSQL store's writer follows the same rule), and the task as of
/// its last written event when the writer holds it (so a checkpoint need not read the task
/// back; SQLite only).
pub(crate) struct Progress {
    pub(crate) snapshot: usize,
    /// Event bytes up to the last checkpoint; for a task read back after a restart, the
    /// checkpoint's size stands for them (smaller: checkpoints come sooner, never later).
    before: usize,
    pub(crate) since: usize,
    pub(crate) rows: usize,
    task: Option<(Task, u64)>,
}

impl Progress {
    /// A task just created, or just checkpointed at `snapshot` bytes by a writer that did not
    /// follow it before.
    pub(crate) fn fresh(snapshot: usize) -> Progress {
        Progress {
            snapshot,
            before: snapshot,
            since: 0,
            rows: 0,
            task: None,
        }
    }

    /// Read back from the database: nothing held.
    pub(crate) fn measured(snapshot: usize, since: usize, rows: usize) -> Progress {
        Progress {
            since,
            rows,
            ..Progress::fresh(snapshot)
        }
    }

    /// Just checkpointed at `snapshot` bytes, holding `task` when given; `before` were the
    /// progress until then.
    fn holding(snapshot: usize, before: Option<&Progress>, task: Option<(Task, u64)>) -> Progress {
        let mut p = Progress::fresh(snapshot);
        p.task = task;
        if let Some(b) = before {
            p.before = b.before + b.since;
        }
        p
    }

    /// The progress of a task just checkpointed at `snapshot` bytes.
    pub(crate) fn checkpointed(&mut self, snapshot: usize) {
        self.before += self.since;
        self.snapshot = snapshot;
        self.since = 0;
        self.rows = 0;
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
    /// state changed (`state_changed`, `ended`) or the events since reached those before the
    /// checkpoint (and at least its size and [`CHECKPOINT_MIN_BYTES`]), unless they are few
    /// and large.
    pub(crate) fn appended(
        &mut self,
        rows: usize,
        bytes: usize,
        state_changed: bool,
        ended: bool,
    ) -> bool {
        self.since += bytes;
        self.rows += rows;
        let grown = self.since >= self.before.max(self.snapshot).max(CHECKPOINT_MIN_BYTES);
        let wanted = state_changed || ended || grown;
        wanted && !self.few_and_large()
    }
}

impl Progress {
    /// Applies an append's events to the task held, or lets go of a task grown too large or
    /// made of a few large events (long lines of output: no checkpoint comes for those, so
    /// holding them would only hold their bytes).
    fn apply(&mut self, rows: &[Queued]) {
        if self.few_and_large() || self.snapshot + self.since > KEEP_TASK_BYTES {
            self.task = None;
        }
        if let Some((task, seq)) = &mut self.task {
            for q in rows {
                apply(task, &q.event.event);
                *seq = q.event.seq;
            }
        }
    }
}

/// Runs the writer until the store is closed and everything queued is written.
pub(super) fn run(mut conn: Connection, queue: Arc<Queue>, failures: Arc<Failures>) {
    let _stop = StopGuard(&queue);
    let mut progress: HashMap<String, Progress> = HashMap::new();
    let mut batch = Vec::new();
    while let Some(ticket) = queue.take(&mut batch) {
        // Writes after a failed one of their task are answered, not tried.
        let mut i = 0;
        while i < batch.len() {
            match failures.skip(&batch[i]) {
                // In order: the batch keeps the queue's order.
                Some(e) => batch.remove(i).answer(Err(e)),
                None => i += 1,
            }
        }
        match write_all(&mut conn, &batch, &mut progress) {
            Ok(()) => {
                for w in batch.drain(..) {
                    w.answer(Ok(()));
                }
            }
            Err(e) => {
                // One failed write must not fail the others of its batch (a duplicate task
                // id beside other tasks' events): each is tried again alone, and answered
                // with its own outcome.
                tracing::debug!(error = %e, writes = batch.len(), "a batch failed; writing one by one");
                // What was counted for the failed batch is recounted from the database.
                progress.clear();
                for w in batch.drain(..) {
                    if let Some(e) = failures.skip(&w) {
                        w.answer(Err(e));
                        continue;
                    }
                    let outcome = match write_all(
                        &mut conn,
                        std::slice::from_ref(&w),
                        &mut progress,
                    ) {
                        Err(e) => {
                            // The held tasks may have taken events the rollback undid.
                            progress.clear();
                            match &w {
                                Write::Append { task_id, epoch, .. } => {
                                    tracing::debug!(task = %task_id, error = %e, "a task's events could not be written");
                                    Err(failures.record(task_id, *epoch, e))
                                }
                                _ => Err(e),
                            }
                        }
                        ok => ok,
                    };
                    w.answer(outcome);
                }
            }
        }
        queue.finished(ticket);
    }
}

/// Writes `batch` in one transaction: each task's events packed into rows (see
/// [`super::rows`]), then one update of each task's index row (its last sequence and status),
/// then the checkpoints that are due.
fn write_all(
    conn: &mut Connection,
    batch: &[Write],
    progress: &mut HashMap<String, Progress>,
) -> Result<(), StoreError> {
    let tx = conn.transaction()?;
    let mut due: Vec<(&str, bool)> = Vec::new();
    // Task → its last sequence and latest status in this batch.
    let mut touched: HashMap<&str, Touched> = HashMap::new();
    // Task → the rows of its events in this batch, inserted together.
    let mut packed: HashMap<&str, Vec<Row>> = HashMap::new();
    for w in batch {
        match w {
            Write::Create {
                task, first, owner, ..
            } => {
                create(&tx, task, owner.as_deref())?;
                pack(
                    packed.entry(task.id.as_str()).or_default(),
                    1,
                    [first, "", ""],
                );
                // No checkpoint: the first event is the task as created.
                progress.insert(
                    task.id.clone(),
                    Progress {
                        since: first.len(),
                        rows: 1,
                        task: Some(((**task).clone(), 1)),
                        ..Progress::fresh(0)
                    },
                );
            }
            Write::Append {
                task_id,
                rows,
                status,
                checkpoint,
                ended,
                ..
            } => {
                let into = packed.entry(&**task_id).or_default();
                let mut bytes = 0;
                for q in rows {
                    pack(into, q.event.seq, q.pieces());
                    bytes += q.len();
                }
                let t = touched.entry(task_id).or_insert((0, None));
                t.0 = rows.last().map(|q| q.event.seq).unwrap_or(t.0);
                if status.is_some() {
                    t.1 = status.as_ref();
                }
                let p = match progress.get_mut(&**task_id) {
                    Some(p) => p,
                    None => {
                        let p = measure(&tx, task_id)?;
                        progress.entry(task_id.to_string()).or_insert(p)
                    }
                };
                let due_now = p.appended(rows.len(), bytes, *checkpoint, *ended);
                p.apply(rows);
                if due_now {
                    match due.iter_mut().find(|(id, _)| *id == &**task_id) {
                        Some(d) => d.1 |= *ended,
                        None => due.push((task_id, *ended)),
                    }
                } else if *ended {
                    // Nothing more comes for it.
                    progress.remove(&**task_id);
                }
            }
            Write::Exec { sql, args, .. } => {
                tx.prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(args.iter()))?;
            }
            Write::Delete { ids, .. } => {
                // Rows of a task deleted here must not be inserted after it.
                insert_rows(&tx, &mut packed)?;
                for id in ids {
                    delete_terminal(&tx, id)?;
                    progress.remove(id);
                }
            }
            Write::Flush { .. } => {}
        }
    }
    insert_rows(&tx, &mut packed)?;
    for (id, (last, status)) in touched {
        update_index(&tx, id, last, status)?;
    }
    for (id, ended) in due {
        let held = progress.get_mut(id).and_then(|p| p.task.take());
        let (size, task) = checkpoint(&tx, id, held)?;
        if ended {
            progress.remove(id);
        } else {
            let room = may_hold(progress, size);
            let next = Progress::holding(size, progress.get(id), task.filter(|_| room));
            progress.insert(id.to_string(), next);
        }
    }
    tx.commit()?;
    Ok(())
}

/// Whether the writer may hold a task just checkpointed at `size` bytes beside the ones it
/// holds (each counted at its last checkpoint and the events since). Asked at a checkpoint
/// only: a sum over the live tasks, not a count kept up at every event.
fn may_hold(progress: &HashMap<String, Progress>, size: usize) -> bool {
    let held: usize = progress
        .values()
        .filter(|p| p.task.is_some())
        .map(|p| p.snapshot + p.since)
        .sum();
    size <= KEEP_TASK_BYTES && held + size <= KEEP_ALL_BYTES
}

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

/// Inserts a new task's index row (its first event, the task as created, is packed with the
/// batch's rows; it stands for the first checkpoint).
fn create(tx: &Transaction, task: &Task, owner: Option<&str>) -> Result<(), StoreError> {
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
    Ok(())
}

/// Inserts the rows packed so far, and forgets them.
fn insert_rows(tx: &Transaction, packed: &mut HashMap<&str, Vec<Row>>) -> Result<(), StoreError> {
    if packed.is_empty() {
        return Ok(());
    }
    let mut ins = tx.prepare_cached(
        "INSERT INTO events (task_id, first_seq, last_seq, json) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (task_id, rows) in packed.drain() {
        for row in rows {
            ins.execute(params![
                task_id,
                row.first as i64,
                row.last as i64,
                row.json
            ])?;
        }
    }
    Ok(())
}

/// Updates a task's index row: its last sequence, and its status when that changed.
fn update_index(
    tx: &Transaction,
    task_id: &str,
    last: u64,
    status: Option<&(String, String)>,
) -> Result<(), StoreError> {
    let updated = match status {
        Some((state, ts)) => tx
            .prepare_cached(
                "UPDATE tasks SET last_seq = ?2, state = ?3, status_ts = ?4 WHERE id = ?1",
            )?
            .execute(params![task_id, last as i64, state, ts])?,
        None => tx
            .prepare_cached("UPDATE tasks SET last_seq = ?2 WHERE id = ?1")?
            .execute(params![task_id, last as i64])?,
    };
    if updated == 0 {
        return Err(StoreError::NotFound(task_id.to_string()));
    }
    Ok(())
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
    // The row the checkpoint falls in counts whole in bytes.
    let (since, rows): (i64, i64) = tx.query_row(
        "SELECT COALESCE(SUM(length(json)), 0), COALESCE(SUM(last_seq - max(first_seq, ?2 + 1) + 1), 0)
         FROM events WHERE task_id = ?1 AND last_seq > ?2",
        params![task_id, seq],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Progress::measured(
        snapshot as usize,
        since as usize,
        rows as usize,
    ))
}

/// Writes a new checkpoint of a task: the task the writer holds (`held`), or else its last
/// checkpoint read back with the events since applied. Returns its size and the task.
fn checkpoint(
    tx: &Transaction,
    id: &str,
    held: Option<(Task, u64)>,
) -> Result<(usize, Option<(Task, u64)>), StoreError> {
    let held = match held {
        Some(h) => Some(h),
        None => load_task(tx, id)?,
    };
    let Some((task, seq)) = held else {
        return Ok((0, None));
    };
    let json = serde_json::to_string(&task)?;
    tx.prepare_cached(
        "INSERT INTO snapshots (task_id, seq, json) VALUES (?1, ?2, ?3)
         ON CONFLICT (task_id) DO UPDATE SET seq = ?2, json = ?3",
    )?
    .execute(params![id, seq as i64, json])?;
    Ok((json.len(), Some((task, seq))))
}

#[cfg(test)]
mod tests;
