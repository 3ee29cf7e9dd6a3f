//! The PostgreSQL store's writer: one async task through which every append and creation
//! goes. It commits whatever is queued in one transaction (group commit): when writes come
//! faster than a commit, the ones that queued meanwhile share the next one. It checkpoints
//! tasks the way the SQLite writer does (see the [store's module docs](crate::store)).
//!
//! Every write has a ticket (1, 2, ... in queue order); the writer publishes how far every
//! write is finished ([`Shared::done`]) and answers a flush once the writes queued before it
//! are, so a read can wait for exactly the writes it depends on. A streamed append is written
//! in the background (nobody waits for it): when it fails, the failure is kept for the task's
//! next append, and the task's later writes of the same stay in memory (its epoch) are
//! answered with it untried, so no later event is stored after a missing one.
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

/// A write as queued: its ticket (1, 2, ... in queue order) and what it writes. A flush
/// writes nothing: it is answered once every write queued before it is finished.
pub(super) struct Queued {
    pub(super) ticket: u64,
    pub(super) write: Write,
}

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
        /// The task's epoch in the store ([`Shared::failed`]): a failed background write
        /// fails the later writes of the same epoch without trying them.
        epoch: u64,
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
        /// None: written in the background (the append returned at once); a failure is
        /// kept in [`Shared::failed`] for the task's next append.
        reply: Option<Reply>,
    },
    Flush {
        reply: Reply,
    },
}

impl Write {
    fn answer(self, outcome: Result<(), StoreError>, shared: &Shared) {
        match self {
            Write::Create { reply, .. } | Write::Flush { reply } => {
                let _ = reply.send(outcome);
            }
            Write::Append {
                reply: Some(reply), ..
            } => {
                let _ = reply.send(outcome);
            }
            Write::Append {
                reply: None,
                task_id,
                epoch,
                ..
            } => {
                if let Err(e) = outcome {
                    tracing::warn!(task = %task_id, error = %e, "a background write failed");
                    shared.fail(task_id, epoch, e);
                }
            }
        }
    }

    fn task_id(&self) -> &str {
        match self {
            Write::Create { task, .. } => &task.id,
            Write::Append { task_id, .. } => task_id,
            Write::Flush { .. } => "",
        }
    }
}

/// What the writer shares with the store: how far it has got, and the background writes
/// that failed.
#[derive(Default)]
pub(super) struct Shared {
    /// Every write with a ticket up to here is finished (committed or failed).
    pub(super) done: std::sync::atomic::AtomicU64,
    /// Failed background writes: task → its epoch then and the error. Reported at the
    /// task's next append; the writes of that epoch queued after it fail without a try.
    pub(super) failed: std::sync::Mutex<HashMap<String, (u64, std::sync::Arc<StoreError>)>>,
}

impl Shared {
    fn fail(&self, task_id: String, epoch: u64, e: StoreError) {
        let mut f = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.entry(task_id)
            .or_insert_with(|| (epoch, std::sync::Arc::new(e)));
    }

    /// The failure a write of `task_id` in `epoch` follows, if any.
    fn failure_of(&self, task_id: &str, epoch: u64) -> Option<std::sync::Arc<StoreError>> {
        let f = self
            .failed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.get(task_id)
            .filter(|(e, _)| *e == epoch)
            .map(|(_, err)| err.clone())
    }
}

/// Tickets of the writes not finished yet, and the flushes waiting for them.
#[derive(Default)]
struct Tickets {
    unfinished: std::collections::BTreeSet<u64>,
    /// The highest ticket received.
    received: u64,
    flushes: Vec<(u64, Reply)>,
}

impl Tickets {
    /// Takes in a queued write: a flush waits (or is answered), a write is counted and
    /// returned.
    fn accept(&mut self, q: Queued) -> Option<(u64, Write)> {
        self.received = self.received.max(q.ticket);
        match q.write {
            Write::Flush { reply } => {
                self.flushes.push((q.ticket, reply));
                None
            }
            w => {
                self.unfinished.insert(q.ticket);
                Some((q.ticket, w))
            }
        }
    }

    /// Marks `tickets` finished; publishes how far every write is done and answers the
    /// flushes that waited for no more.
    fn finish(&mut self, tickets: &[u64], shared: &Shared) {
        for t in tickets {
            self.unfinished.remove(t);
        }
        let done = match self.unfinished.first() {
            Some(first) => first - 1,
            None => self.received,
        };
        shared
            .done
            .store(done, std::sync::atomic::Ordering::Release);
        let mut i = 0;
        while i < self.flushes.len() {
            if self.flushes[i].0 <= done + 1 {
                let (_, reply) = self.flushes.swap_remove(i);
                let _ = reply.send(Ok(()));
            } else {
                i += 1;
            }
        }
    }
}

/// Runs the writer until every sender is gone.
pub(super) async fn run(
    pool: Pool,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    shared: std::sync::Arc<Shared>,
) {
    let mut progress: HashMap<String, Progress> = HashMap::new();
    // Tasks with a write being committed, and writes waiting for them (in queued order).
    let mut busy: HashSet<String> = HashSet::new();
    let mut waiting = Waiting::default();
    let mut tickets = Tickets::default();
    let mut flights = FuturesUnordered::new();
    let mut open = true;
    let mut started = Instant::now();
    // Whether a waiting write's task may have no commit under way (one could start beside
    // the flights): kept as writes arrive and commits end, where asking it of every waiting
    // write at each wake-up cost a hash per waiting write per event.
    let mut ready = false;
    loop {
        // A batch starts when none is under way, or beside them when one has been for a
        // while and a waiting write's task is not in one (only then can a batch take it).
        while flights.len() < IN_FLIGHT
            && (flights.is_empty() || (ready && started.elapsed() >= OVERLAP_AFTER))
        {
            let batch = next_batch(&mut rx, &mut waiting, &busy, &mut tickets);
            // Below the size limit, only the writes of tasks being committed were held.
            ready = batch.len() >= BATCH;
            let (batch, skipped) = skip_failed(batch, &shared);
            if !skipped.is_empty() {
                tickets.finish(&skipped, &shared);
            }
            if batch.is_empty() {
                // Flushes queued behind nothing are answered.
                tickets.finish(&[], &shared);
                break;
            }
            // The batch's tasks (each once); each task's progress goes with its batch and
            // comes back with its outcome.
            let mut ids: Vec<String> = Vec::new();
            let mut mine = HashMap::new();
            for (_, w) in &batch {
                let id = w.task_id();
                if busy.contains(id) {
                    continue;
                }
                busy.insert(id.to_string());
                ids.push(id.to_string());
                if let Some(p) = progress.remove(id) {
                    mine.insert(id.to_string(), p);
                }
            }
            let pool = pool.clone();
            let shared = shared.clone();
            flights.push(async move {
                let nums: Vec<u64> = batch.iter().map(|(t, _)| *t).collect();
                let writes = batch.into_iter().map(|(_, w)| w).collect();
                let mine = settle(&pool, writes, mine, &shared).await;
                (ids, nums, mine)
            });
            started = Instant::now();
        }
        if !open && flights.is_empty() && waiting.is_empty() {
            tickets.finish(&[], &shared);
            return;
        }
        tokio::select! {
            Some((ids, nums, mine)) = flights.next(), if !flights.is_empty() => {
                for id in &ids {
                    busy.remove(id);
                }
                ready = !waiting.is_empty();
                progress.extend(mine);
                tickets.finish(&nums, &shared);
            }
            w = rx.recv(), if open && flights.len() < IN_FLIGHT => match w {
                Some(q) => {
                    let mut next = Some(q);
                    while let Some(q) = next {
                        ready |= waiting.accept(q, &mut tickets, &busy);
                        next = rx.try_recv().ok();
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

/// Answers, without trying them, the writes of a batch that follow a failed background
/// write of their task (same epoch); returns the rest and the tickets answered.
fn skip_failed(batch: Vec<(u64, Write)>, shared: &Shared) -> (Vec<(u64, Write)>, Vec<u64>) {
    let mut keep = Vec::with_capacity(batch.len());
    let mut skipped = Vec::new();
    for (t, w) in batch {
        let failure = match &w {
            Write::Append { task_id, epoch, .. } => shared.failure_of(task_id, *epoch),
            _ => None,
        };
        match failure {
            Some(e) => {
                if let Write::Append {
                    reply: Some(reply), ..
                } = w
                {
                    let _ = reply.send(Err(StoreError::Background(e)));
                }
                skipped.push(t);
            }
            None => keep.push((t, w)),
        }
    }
    (keep, skipped)
}

/// The writes not in a batch yet: each task's in the order they were queued, the tasks in the
/// order their first waiting write was. Kept by task so that making a batch looks at each
/// waiting task once, not at each waiting write: when the database falls behind, thousands of
/// writes wait, and asking of each whether its task was being committed (a hash of its id),
/// at every batch, was a quarter of the host's CPU (50 tasks of 1,000 events).
#[derive(Default)]
struct Waiting {
    by_task: HashMap<String, VecDeque<(u64, Write)>>,
    /// Each task with waiting writes, once.
    order: VecDeque<String>,
}

impl Waiting {
    /// Takes in a queued write (a flush only waits among the tickets); true when it is a
    /// write of a task not in `busy`, which a batch beside the ones under way could take.
    fn accept(&mut self, q: Queued, tickets: &mut Tickets, busy: &HashSet<String>) -> bool {
        let Some(w) = tickets.accept(q) else {
            return false;
        };
        let free = !busy.contains(w.1.task_id());
        self.push(w);
        free
    }

    fn push(&mut self, w: (u64, Write)) {
        match self.by_task.get_mut(w.1.task_id()) {
            Some(queue) => queue.push_back(w),
            None => {
                let id = w.1.task_id().to_string();
                self.order.push_back(id.clone());
                self.by_task.insert(id, VecDeque::from([w]));
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Up to `max` writes of the tasks not in `busy`: task by task in order, each task's
    /// in order (a task cut at `max` keeps the rest, first in line).
    fn take(&mut self, busy: &HashSet<String>, max: usize) -> Vec<(u64, Write)> {
        let mut batch = Vec::new();
        let mut order = VecDeque::with_capacity(self.order.len());
        for id in self.order.drain(..) {
            if batch.len() < max && !busy.contains(&id) {
                if let Some(queue) = self.by_task.get_mut(&id) {
                    let n = queue.len().min(max - batch.len());
                    batch.extend(queue.drain(..n));
                    if queue.is_empty() {
                        self.by_task.remove(&id);
                        continue;
                    }
                }
            }
            order.push_back(id);
        }
        self.order = order;
        batch
    }
}

/// The next batch: the queued writes join the waiting ones, and the batch takes them in
/// order, except those of a task being committed, which wait.
fn next_batch(
    rx: &mut mpsc::UnboundedReceiver<Queued>,
    waiting: &mut Waiting,
    busy: &HashSet<String>,
    tickets: &mut Tickets,
) -> Vec<(u64, Write)> {
    while let Ok(q) = rx.try_recv() {
        waiting.accept(q, tickets, busy);
    }
    waiting.take(busy, BATCH)
}

/// Commits `batch` and answers its writes; returns the progress of its tasks.
async fn settle(
    pool: &Pool,
    batch: Vec<Write>,
    mut progress: HashMap<String, Progress>,
    shared: &Shared,
) -> HashMap<String, Progress> {
    match write_all(pool, &batch, &mut progress).await {
        Ok(()) => {
            for w in batch {
                w.answer(Ok(()), shared);
            }
        }
        Err(e) => {
            // One failed write must not fail the others of its batch: each is tried again
            // alone and answered with its own outcome (a write after a failed background
            // one of its task is not tried).
            tracing::debug!(error = %e, writes = batch.len(), "a batch failed; writing one by one");
            progress.clear();
            for w in batch {
                let outcome = match &w {
                    Write::Append { task_id, epoch, .. } => {
                        match shared.failure_of(task_id, *epoch) {
                            Some(e) => Err(StoreError::Background(e)),
                            None => write_all(pool, std::slice::from_ref(&w), &mut progress).await,
                        }
                    }
                    _ => write_all(pool, std::slice::from_ref(&w), &mut progress).await,
                };
                w.answer(outcome, shared);
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
            epoch: 0,
            first_seq,
            rows: vec!["{}".into()],
            status: None,
            checkpoint: false,
            ended: false,
            host: None,
            reply: Some(oneshot::channel().0),
        }
    }

    fn names(ws: &[(u64, Write)]) -> Vec<(String, u64)> {
        ws.iter()
            .map(|(_, w)| match w {
                Write::Append {
                    task_id, first_seq, ..
                } => (task_id.clone(), *first_seq),
                Write::Create { task, .. } => (task.id.clone(), 1),
                Write::Flush { .. } => (String::new(), 0),
            })
            .collect()
    }

    #[test]
    fn a_task_being_committed_waits_with_its_later_writes_in_order() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        for (i, (t, s)) in [("a", 2), ("b", 2), ("a", 3), ("c", 2)]
            .into_iter()
            .enumerate()
        {
            tx.send(Queued {
                ticket: i as u64 + 1,
                write: append(t, s),
            })
            .unwrap();
        }
        let mut waiting = Waiting::default();
        let mut tickets = Tickets::default();
        let busy: HashSet<String> = ["a".to_string()].into();
        let batch = next_batch(&mut rx, &mut waiting, &busy, &mut tickets);
        assert_eq!(names(&batch), [("b".into(), 2), ("c".into(), 2)]);
        tx.send(Queued {
            ticket: 5,
            write: append("b", 3),
        })
        .unwrap();
        // `b` is being committed now; `a` is free again.
        let busy: HashSet<String> = ["b".to_string(), "c".to_string()].into();
        let batch = next_batch(&mut rx, &mut waiting, &busy, &mut tickets);
        assert_eq!(names(&batch), [("a".into(), 2), ("a".into(), 3)]);
        assert_eq!(
            names(&waiting.take(&HashSet::new(), BATCH)),
            [("b".into(), 3)]
        );
        assert!(waiting.is_empty());
    }

    #[test]
    fn a_task_cut_at_the_batch_limit_goes_on_first_in_the_next_batch() {
        let mut waiting = Waiting::default();
        for seq in 0..BATCH as u64 + 5 {
            waiting.push((seq + 1, append("x", seq + 2)));
        }
        waiting.push((BATCH as u64 + 6, append("y", 2)));
        let first = waiting.take(&HashSet::new(), BATCH);
        assert_eq!(first.len(), BATCH);
        assert!(first.iter().all(|(_, w)| w.task_id() == "x"));
        let second = names(&waiting.take(&HashSet::new(), BATCH));
        let want: Vec<(String, u64)> = (BATCH as u64 + 2..BATCH as u64 + 7)
            .map(|s| ("x".to_string(), s))
            .chain([("y".to_string(), 2)])
            .collect();
        assert_eq!(second, want);
        assert!(waiting.is_empty());
    }

    #[test]
    fn a_flush_is_answered_once_every_write_queued_before_it_is_finished() {
        use std::sync::atomic::Ordering;
        let shared = Shared::default();
        let mut t = Tickets::default();
        assert!(t
            .accept(Queued {
                ticket: 1,
                write: append("a", 2),
            })
            .is_some());
        let (reply, mut rx) = oneshot::channel();
        assert!(t
            .accept(Queued {
                ticket: 2,
                write: Write::Flush { reply },
            })
            .is_none());
        t.accept(Queued {
            ticket: 3,
            write: append("b", 2),
        });
        // A later write finished first: the flush still waits for the earlier one.
        t.finish(&[3], &shared);
        assert!(rx.try_recv().is_err());
        assert_eq!(shared.done.load(Ordering::Acquire), 0);
        t.finish(&[1], &shared);
        assert!(matches!(rx.try_recv(), Ok(Ok(()))));
        assert_eq!(shared.done.load(Ordering::Acquire), 3);
    }

    #[test]
    fn a_failed_background_write_fails_the_later_writes_of_its_epoch_only() {
        let shared = Shared::default();
        shared.fail("a".into(), 0, StoreError::WriterStopped);
        let (reply, mut rx) = oneshot::channel();
        let waited = Write::Append {
            task_id: "a".into(),
            epoch: 0,
            first_seq: 3,
            rows: vec!["{}".into()],
            status: None,
            checkpoint: false,
            ended: false,
            host: None,
            reply: Some(reply),
        };
        let mut later = append("a", 4);
        if let Write::Append { epoch, .. } = &mut later {
            *epoch = 1;
        }
        let batch = vec![(1, waited), (2, append("b", 2)), (3, later)];
        let (kept, skipped) = skip_failed(batch, &shared);
        assert_eq!(skipped, [1]);
        assert_eq!(names(&kept), [("b".into(), 2), ("a".into(), 4)]);
        assert!(matches!(rx.try_recv(), Ok(Err(StoreError::Background(_)))));
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
