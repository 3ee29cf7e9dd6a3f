//! The PostgreSQL store's writer: one async task through which every append and creation
//! goes. It commits whatever is queued in one transaction (group commit): when writes come
//! faster than a commit, the ones that queued meanwhile share the next one. It checkpoints
//! tasks the way the SQLite writer does (see the [store's module docs](crate::store)).
//!
//! A commit that takes long (a slow WAL flush, a database far away) need not hold the next
//! batch back: once the latest transaction has been under way for [`OVERLAP_AFTER`], another
//! one starts on another connection, up to [`IN_FLIGHT`] at once (the server flushes
//! concurrent commits together). Sooner than that the queued writes wait and join one
//! bigger batch, which costs less per write than two small ones: with the database on the
//! same busy machine, three transactions in flight at once from the start cost half as
//! much CPU again per event as one (bench/run.sh, `cpu-10x1000`). A task is in one
//! transaction at most: a write for a task whose earlier write is still being committed
//! waits for that commit, so the events of one task are committed in the order they were
//! queued.
//!
//! A batch costs a fixed number of round trips, whatever its size: every write of one kind
//! goes into one statement over arrays (`UNNEST`), and the statements of a step are sent
//! together without waiting for each answer (tokio-postgres pipelines the queries that are
//! polled at once on one connection; the server runs them in the order sent):
//!
//! 1. `BEGIN`; the checkpoint progress of tasks this writer has not seen; the new tasks
//!    (index rows, first checkpoints, first events); the appends (one statement: the index
//!    rows updated where this host still owns the task, and the event rows of exactly those
//!    tasks); one `pg_notify` per 8,000 bytes of wake-ups.
//! 2. When the owner check refused a task: the batch is abandoned (and each of its writes
//!    tried again alone, so that only the refused one fails).
//! 3. When checkpoints are due: their tasks read back (one statement).
//! 4. The checkpoints (one statement) and `COMMIT`.

mod batch;

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use deadpool_postgres::{Object, Pool};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::protocol::v1::Task;
use crate::store::sqlite::Progress;
use crate::store::StoreError;

/// Writes taken into one transaction at most.
const BATCH: usize = 512;
/// Transactions under way at once (each holds a connection of the pool while it lasts).
const IN_FLIGHT: usize = 3;
/// How long the latest transaction is under way before another may start beside it.
const OVERLAP_AFTER: Duration = Duration::from_millis(5);

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

    fn task_id(&self) -> &str {
        match self {
            Write::Create { task, .. } => &task.id,
            Write::Append { task_id, .. } => task_id,
        }
    }
}

/// Runs the writer until every sender is gone.
pub(super) async fn run(pool: Pool, mut rx: mpsc::UnboundedReceiver<Write>) {
    let mut progress: HashMap<String, Progress> = HashMap::new();
    // Tasks with a write being committed, and writes waiting for them (in queued order).
    let mut busy: HashSet<String> = HashSet::new();
    let mut waiting: VecDeque<Write> = VecDeque::new();
    let mut flights = FuturesUnordered::new();
    let mut open = true;
    let mut started = Instant::now();
    loop {
        while flights.len() < IN_FLIGHT
            && (flights.is_empty() || started.elapsed() >= OVERLAP_AFTER)
        {
            let batch = next_batch(&mut rx, &mut waiting, &busy);
            if batch.is_empty() {
                break;
            }
            let ids: Vec<String> = batch.iter().map(|w| w.task_id().to_string()).collect();
            // Each task's progress goes with its batch and comes back with its outcome.
            let mut mine = HashMap::new();
            for id in &ids {
                if let Some(p) = progress.remove(id) {
                    mine.insert(id.clone(), p);
                }
                busy.insert(id.clone());
            }
            let pool = pool.clone();
            flights.push(async move {
                let mine = settle(&pool, batch, mine).await;
                (ids, mine)
            });
            started = Instant::now();
        }
        if !open && flights.is_empty() && waiting.is_empty() {
            return;
        }
        // Writes that could start beside the flights (not those waiting for their task's).
        let ready = waiting.iter().any(|w| !busy.contains(w.task_id()));
        tokio::select! {
            Some((ids, mine)) = flights.next(), if !flights.is_empty() => {
                for id in &ids {
                    busy.remove(id);
                }
                progress.extend(mine);
            }
            w = rx.recv(), if open && flights.len() < IN_FLIGHT => match w {
                Some(w) => {
                    waiting.push_back(w);
                    while let Ok(w) = rx.try_recv() {
                        waiting.push_back(w);
                    }
                }
                None => open = false,
            },
            // Time for another transaction beside the slow one.
            _ = tokio::time::sleep_until(started + OVERLAP_AFTER),
                if ready && !flights.is_empty() && flights.len() < IN_FLIGHT => {}
        }
    }
}

/// The next batch: the waiting writes and then the queued ones, in order, except those of
/// a task being committed (and every later write of such a task), which wait.
fn next_batch(
    rx: &mut mpsc::UnboundedReceiver<Write>,
    waiting: &mut VecDeque<Write>,
    busy: &HashSet<String>,
) -> Vec<Write> {
    let mut batch = Vec::new();
    let mut held: VecDeque<Write> = VecDeque::new();
    let mut held_ids: HashSet<String> = HashSet::new();
    let mut take = |w: Write, batch: &mut Vec<Write>| {
        let id = w.task_id();
        if batch.len() >= BATCH || busy.contains(id) || held_ids.contains(id) {
            held_ids.insert(id.to_string());
            held.push_back(w);
        } else {
            batch.push(w);
        }
    };
    while let Some(w) = waiting.pop_front() {
        take(w, &mut batch);
    }
    while batch.len() < BATCH {
        match rx.try_recv() {
            Ok(w) => take(w, &mut batch),
            Err(_) => break,
        }
    }
    *waiting = held;
    batch
}

/// Commits `batch` and answers its writes; returns the progress of its tasks.
async fn settle(
    pool: &Pool,
    batch: Vec<Write>,
    mut progress: HashMap<String, Progress>,
) -> HashMap<String, Progress> {
    match write_all(pool, &batch, &mut progress).await {
        Ok(()) => {
            for w in batch {
                let _ = w.reply().send(Ok(()));
            }
        }
        Err(e) => {
            // One failed write must not fail the others of its batch: each is tried again
            // alone and answered with its own outcome.
            tracing::debug!(error = %e, writes = batch.len(), "a batch failed; writing one by one");
            progress.clear();
            for w in batch {
                let outcome = write_all(pool, std::slice::from_ref(&w), &mut progress).await;
                let _ = w.reply().send(outcome);
            }
        }
    }
    progress
}

/// Writes `batch` in one transaction. On failure the transaction is rolled back before the
/// connection goes back to the pool (a connection that cannot roll back is dropped).
async fn write_all(
    pool: &Pool,
    batch: &[Write],
    progress: &mut HashMap<String, Progress>,
) -> Result<(), StoreError> {
    let client = pool.get().await?;
    let outcome = batch::write_in(&client, batch, progress).await;
    if outcome.is_err() && client.batch_execute("ROLLBACK").await.is_err() {
        drop(Object::take(client));
    }
    outcome
}

/// The channel other hosts `LISTEN` on for stored events (docs/several-hosts.md).
pub(super) const EVENTS_CHANNEL: &str = "agent_host_events";

/// The largest payload sent in one notification (PostgreSQL refuses 8,000 bytes and more).
const PAYLOAD_MAX: usize = 7900;

/// The wake-ups of a batch, sent in its transaction (so delivered at its commit and only
/// then): one line `<task id> <last seq>` per task, as few notifications as fit.
fn wake_payloads(last: &[(&str, i64)]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for (id, seq) in last {
        let line = format!("{id} {seq}");
        if !cur.is_empty() && cur.len() + 1 + line.len() > PAYLOAD_MAX {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(&line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The tasks and last sequence numbers a notification names.
pub(super) fn parse_wake(payload: &str) -> impl Iterator<Item = (&str, u64)> {
    payload.lines().filter_map(|line| {
        let (id, seq) = line.rsplit_once(' ')?;
        Some((id, seq.parse().unwrap_or(0)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(task: &str, first_seq: u64) -> Write {
        Write::Append {
            task_id: task.into(),
            first_seq,
            rows: vec!["{}".into()],
            status: None,
            checkpoint: false,
            ended: false,
            host: None,
            reply: oneshot::channel().0,
        }
    }

    fn names(ws: &[Write]) -> Vec<(String, u64)> {
        ws.iter()
            .map(|w| match w {
                Write::Append {
                    task_id, first_seq, ..
                } => (task_id.clone(), *first_seq),
                Write::Create { task, .. } => (task.id.clone(), 1),
            })
            .collect()
    }

    #[test]
    fn a_task_being_committed_waits_with_its_later_writes_in_order() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (t, s) in [("a", 2), ("b", 2), ("a", 3), ("c", 2)] {
            tx.send(append(t, s)).unwrap();
        }
        let mut waiting = VecDeque::new();
        let busy: HashSet<String> = ["a".to_string()].into();
        let batch = next_batch(&mut rx, &mut waiting, &busy);
        assert_eq!(names(&batch), [("b".into(), 2), ("c".into(), 2)]);
        tx.send(append("b", 3)).unwrap();
        // `b` is being committed now; `a` is free again.
        let busy: HashSet<String> = ["b".to_string(), "c".to_string()].into();
        let batch = next_batch(&mut rx, &mut waiting, &busy);
        assert_eq!(names(&batch), [("a".into(), 2), ("a".into(), 3)]);
        assert_eq!(names(waiting.make_contiguous()), [("b".into(), 3)]);
    }

    #[test]
    fn wake_ups_fit_in_notifications_and_read_back() {
        let ids: Vec<String> = (0..1000)
            .map(|i| format!("task-{i:04}-{}", "x".repeat(30)))
            .collect();
        let last: Vec<(&str, i64)> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i as i64))
            .collect();
        let payloads = wake_payloads(&last);
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|p| p.len() < 8000));
        let back: Vec<(String, u64)> = payloads
            .iter()
            .flat_map(|p| {
                parse_wake(p)
                    .map(|(id, s)| (id.to_string(), s))
                    .collect::<Vec<_>>()
            })
            .collect();
        let want: Vec<(String, u64)> = last
            .iter()
            .map(|(id, s)| (id.to_string(), *s as u64))
            .collect();
        assert_eq!(back, want);
        assert!(wake_payloads(&[]).is_empty());
    }
}
