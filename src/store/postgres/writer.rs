//! The PostgreSQL store's writer: one async task through which every append and creation
//! goes. It commits whatever is queued in one transaction (group commit): when writes come
//! faster than one round trip, the ones that queued meanwhile share the next commit, and
//! the events of one task are inserted in the order they were queued. It checkpoints tasks
//! the way the SQLite writer does (see the [store's module docs](crate::store)).

use std::collections::HashMap;

use deadpool_postgres::{Pool, Transaction};
use tokio::sync::{mpsc, oneshot};
use tokio_postgres::error::SqlState;

use super::read;
use crate::protocol::v1::Task;
use crate::store::sqlite::Progress;
use crate::store::StoreError;

/// Writes taken into one transaction at most.
const BATCH: usize = 512;

pub(super) type Reply = oneshot::Sender<Result<(), StoreError>>;

pub(super) enum Write {
    Create {
        task: Box<Task>,
        /// The first event (the task as created), encoded.
        first: String,
        owner: Option<String>,
        /// The host that runs it (None: a store of no registered host).
        host: Option<String>,
        reply: Reply,
    },
    Append {
        task_id: String,
        /// Sequence number of the first row; the rows follow it one by one.
        first_seq: u64,
        rows: Vec<String>,
        /// New state and status timestamp, when the events changed the status.
        status: Option<(String, String)>,
        /// Checkpoint now (the task's state changed, or it ended).
        checkpoint: bool,
        ended: bool,
        /// The writing host: the append is refused unless it owns the task (a host whose
        /// tasks were taken over never writes to them again).
        host: Option<String>,
        reply: Reply,
    },
}

impl Write {
    fn reply(self) -> Reply {
        match self {
            Write::Create { reply, .. } | Write::Append { reply, .. } => reply,
        }
    }
}

/// Runs the writer until every sender is gone.
pub(super) async fn run(pool: Pool, mut rx: mpsc::UnboundedReceiver<Write>) {
    let mut progress: HashMap<String, Progress> = HashMap::new();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        match write_all(&pool, &batch, &mut progress).await {
            Ok(()) => {
                for w in batch {
                    let _ = w.reply().send(Ok(()));
                }
            }
            Err(e) => {
                // One failed write must not fail the others of its batch: each is tried
                // again alone and answered with its own outcome.
                tracing::debug!(error = %e, writes = batch.len(), "a batch failed; writing one by one");
                progress.clear();
                for w in batch {
                    let outcome = write_all(&pool, std::slice::from_ref(&w), &mut progress).await;
                    let _ = w.reply().send(outcome);
                }
            }
        }
    }
}

async fn write_all(
    pool: &Pool,
    batch: &[Write],
    progress: &mut HashMap<String, Progress>,
) -> Result<(), StoreError> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    let mut due: Vec<(&str, bool)> = Vec::new();
    for w in batch {
        match w {
            Write::Create {
                task,
                first,
                owner,
                host,
                ..
            } => {
                create(&tx, task, first, owner.as_deref(), host.as_deref()).await?;
                progress.insert(task.id.clone(), Progress::fresh(first.len()));
            }
            Write::Append {
                task_id,
                first_seq,
                rows,
                status,
                checkpoint,
                ended,
                host,
                ..
            } => {
                let bytes = append(
                    &tx,
                    task_id,
                    *first_seq,
                    rows,
                    status.as_ref(),
                    host.as_deref(),
                )
                .await?;
                if !progress.contains_key(task_id) {
                    let measured = measure(&tx, task_id).await?;
                    progress.insert(task_id.clone(), measured);
                }
                let Some(p) = progress.get_mut(task_id) else {
                    continue;
                };
                // The rule of the SQLite store: at state changes and doubling sizes, never for
                // a few large events (long lines of output).
                if p.appended(rows.len(), bytes, *checkpoint, *ended) {
                    match due.iter_mut().find(|(id, _)| *id == task_id.as_str()) {
                        Some(d) => d.1 |= *ended,
                        None => due.push((task_id, *ended)),
                    }
                } else if *ended {
                    progress.remove(task_id);
                }
            }
        }
    }
    wake(&tx, batch).await?;
    for (id, ended) in due {
        let size = checkpoint(&tx, id).await?;
        if ended {
            progress.remove(id);
        } else {
            progress.insert(id.to_string(), Progress::fresh(size));
        }
    }
    tx.commit().await?;
    Ok(())
}

/// The channel other hosts `LISTEN` on for stored events (docs/several-hosts.md).
pub(super) const EVENTS_CHANNEL: &str = "agent_host_events";

/// Sends, in the batch's transaction (so delivered at its commit and only then), one
/// `NOTIFY` per task of the batch: `<task id> <last seq>`.
async fn wake(tx: &Transaction<'_>, batch: &[Write]) -> Result<(), StoreError> {
    let mut last: Vec<(&str, u64)> = Vec::new();
    for w in batch {
        let (id, seq) = match w {
            Write::Create { task, .. } => (task.id.as_str(), 1),
            Write::Append {
                task_id,
                first_seq,
                rows,
                ..
            } => (
                task_id.as_str(),
                first_seq + (rows.len() as u64).saturating_sub(1),
            ),
        };
        match last.iter_mut().find(|(t, _)| *t == id) {
            Some(l) => l.1 = l.1.max(seq),
            None => last.push((id, seq)),
        }
    }
    let payloads: Vec<String> = last.iter().map(|(id, seq)| format!("{id} {seq}")).collect();
    let stmt = tx
        .prepare_cached("SELECT pg_notify($1, p) FROM UNNEST($2::TEXT[]) AS p")
        .await?;
    tx.execute(&stmt, &[&EVENTS_CHANNEL, &payloads]).await?;
    Ok(())
}

async fn create(
    tx: &Transaction<'_>,
    task: &Task,
    first: &str,
    owner: Option<&str>,
    host: Option<&str>,
) -> Result<(), StoreError> {
    let ts = task.status.timestamp.clone().unwrap_or_default();
    let stmt = tx
        .prepare_cached(
            "INSERT INTO tasks (id, context_id, state, status_ts, created_at, last_seq, owner, host)
             VALUES ($1, $2, $3, $4, $4, 1, $5, $6)",
        )
        .await?;
    let inserted = tx
        .execute(
            &stmt,
            &[
                &task.id,
                &task.context_id,
                &task.status.state.as_proto_name(),
                &ts,
                &owner,
                &host,
            ],
        )
        .await;
    match inserted {
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            return Err(StoreError::Exists(task.id.clone()));
        }
        other => other?,
    };
    // The task as created is both its first event and its first checkpoint.
    let snap = serde_json::to_string(task)?;
    let stmt = tx
        .prepare_cached("INSERT INTO snapshots (task_id, seq, json) VALUES ($1, 1, $2)")
        .await?;
    tx.execute(&stmt, &[&task.id, &snap]).await?;
    let stmt = tx
        .prepare_cached("INSERT INTO events (task_id, seq, json) VALUES ($1, 1, $2)")
        .await?;
    tx.execute(&stmt, &[&task.id, &first]).await?;
    Ok(())
}

/// Inserts the rows (one statement whatever their number) and updates the task's index row;
/// returns the rows' bytes.
async fn append(
    tx: &Transaction<'_>,
    task_id: &str,
    first_seq: u64,
    rows: &[String],
    status: Option<&(String, String)>,
    host: Option<&str>,
) -> Result<usize, StoreError> {
    let seqs: Vec<i64> = (0..rows.len() as i64)
        .map(|i| first_seq as i64 + i)
        .collect();
    let last = seqs.last().copied().unwrap_or(0);
    // The index row first: its condition on the owning host fences the rows below.
    let (state, ts) = match status {
        Some((state, ts)) => (Some(state.as_str()), Some(ts.as_str())),
        None => (None, None),
    };
    let stmt = tx
        .prepare_cached(
            "UPDATE tasks SET last_seq = $2, state = COALESCE($3, state),
                status_ts = COALESCE($4, status_ts)
             WHERE id = $1 AND ($5::TEXT IS NULL OR host IS NULL OR host = $5)",
        )
        .await?;
    let updated = tx
        .execute(&stmt, &[&task_id, &last, &state, &ts, &host])
        .await?;
    if updated == 0 {
        let owner = tx
            .query_opt("SELECT host FROM tasks WHERE id = $1", &[&task_id])
            .await?;
        return Err(match owner {
            Some(row) => StoreError::NotOwner {
                task: task_id.to_string(),
                host: row.try_get::<_, Option<String>>(0)?.unwrap_or_default(),
            },
            None => StoreError::NotFound(task_id.to_string()),
        });
    }
    let stmt = tx
        .prepare_cached(
            "INSERT INTO events (task_id, seq, json)
             SELECT $1, s, j FROM UNNEST($2::BIGINT[], $3::TEXT[]) AS r(s, j)",
        )
        .await?;
    tx.execute(&stmt, &[&task_id, &seqs, &rows]).await?;
    Ok(rows.iter().map(String::len).sum())
}

/// The checkpoint progress of a task this writer has not seen yet (after a restart).
async fn measure(tx: &Transaction<'_>, task_id: &str) -> Result<Progress, StoreError> {
    let row = tx
        .query_one(
            "SELECT COALESCE(s.seq, 0), COALESCE(octet_length(s.json), 0),
                    COALESCE((SELECT SUM(octet_length(e.json)) FROM events e
                              WHERE e.task_id = $1 AND e.seq > COALESCE(s.seq, 0)), 0)::BIGINT,
                    (SELECT COUNT(*) FROM events e
                     WHERE e.task_id = $1 AND e.seq > COALESCE(s.seq, 0))
             FROM (SELECT 1) one LEFT JOIN snapshots s ON s.task_id = $1",
            &[&task_id],
        )
        .await?;
    Ok(Progress::measured(
        row.try_get::<_, i32>(1)? as usize,
        row.try_get::<_, i64>(2)? as usize,
        row.try_get::<_, i64>(3)? as usize,
    ))
}

/// Writes a new checkpoint of a task: its last checkpoint with the events since applied.
/// Returns its size.
async fn checkpoint(tx: &Transaction<'_>, id: &str) -> Result<usize, StoreError> {
    let Some(snap) = read::load(&**tx, id).await? else {
        return Ok(0);
    };
    let json = serde_json::to_string(&snap.task)?;
    let stmt = tx
        .prepare_cached(
            "INSERT INTO snapshots (task_id, seq, json) VALUES ($1, $2, $3)
             ON CONFLICT (task_id) DO UPDATE SET seq = $2, json = $3",
        )
        .await?;
    tx.execute(&stmt, &[&id, &(snap.last_seq as i64), &json])
        .await?;
    Ok(json.len())
}
