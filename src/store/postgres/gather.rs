//! Reads of event logs from the database, gathered: the reads asked for while one is under
//! way go to the database together, in one statement, instead of one statement each.
//!
//! A host that follows tasks another host writes reads their new events after each wake-up
//! (see [`super::listen`]); one commit on the other host wakes every stream it touched at
//! once. Read one statement each, a hundred streams woken together queued a hundred round
//! trips behind the pool's few connections, and the last stream saw its events tens of
//! milliseconds after the first. Gathered, they cost one or two statements.
//!
//! The first read that finds nothing under way starts at once (no wait is added); the ones
//! that come while [`IN_FLIGHT`] statements are under way wait for one of them to end and go
//! together in the next. A statement that fails is tried again read by read, so that each
//! read gets its own answer (the error of its own task, not another's).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use deadpool_postgres::Pool;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot};

use super::read;
use super::row::{col, unsigned};
use crate::store::StoreError;
use crate::task::LoggedEvent;

/// Statements under way at once.
const IN_FLIGHT: usize = 2;
/// Reads gathered into one statement at most.
const GATHER: usize = 256;

/// The events of every read, in the order asked, the task's `ORDINALITY` first; a task that
/// is not stored has one row of NULL events and `false` in its second column.
const EVENTS: &str = "SELECT w.i, t.id IS NOT NULL, e.seq, e.json
    FROM unnest($1::text[], $2::int8[], $3::int8[]) WITH ORDINALITY AS w(task_id, after, lim, i)
    LEFT JOIN tasks t ON t.id = w.task_id
    LEFT JOIN LATERAL (SELECT ev.seq, ev.json FROM events ev
                       WHERE ev.task_id = w.task_id AND ev.seq > w.after
                       ORDER BY ev.seq LIMIT w.lim) e ON true
    ORDER BY w.i, e.seq";

/// What the rows read here hold, for [`StoreError::BadRow`].
const WHAT: &str = "events";

/// Up to `limit` events of a task after `after`: the answer of a [`Gather::events`].
type Answer = Result<Vec<Arc<LoggedEvent>>, StoreError>;

/// One read asked for.
struct Ask {
    task_id: String,
    after: u64,
    limit: usize,
    reply: oneshot::Sender<Answer>,
}

/// The gathering side of a store: reads go to a task that sends them to the database.
pub(super) struct Gather {
    asks: mpsc::UnboundedSender<Ask>,
    /// For a read alone, when the gathering task is gone.
    pool: Pool,
    /// Gathered statements sent so far.
    #[cfg(test)]
    sent: Arc<AtomicU64>,
}

impl Gather {
    /// Starts the task that reads through `pool`. Needs a runtime.
    pub(super) fn start(pool: Pool) -> Gather {
        let (asks, rx) = mpsc::unbounded_channel();
        let sent = Arc::new(AtomicU64::new(0));
        tokio::spawn(run(pool.clone(), rx, sent.clone()));
        Gather {
            asks,
            pool,
            #[cfg(test)]
            sent,
        }
    }

    /// Gathered statements sent so far.
    #[cfg(test)]
    pub(super) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Up to `limit` events of `task_id` after `after`, with the reads asked for meanwhile;
    /// [`StoreError::NotFound`] when the task is not stored.
    pub(super) async fn events(&self, task_id: &str, after: u64, limit: usize) -> Answer {
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            task_id: task_id.to_string(),
            after,
            limit,
            reply,
        };
        if self.asks.send(ask).is_err() {
            // The gathering task is gone (the runtime is stopping): read alone.
            return alone(&self.pool, task_id, after, limit).await;
        }
        match answer.await {
            Ok(a) => a,
            // The statement's task ended unfinished (the runtime is stopping).
            Err(_) => alone(&self.pool, task_id, after, limit).await,
        }
    }
}

/// Sends the reads to the database until the store is dropped.
async fn run(pool: Pool, mut rx: mpsc::UnboundedReceiver<Ask>, sent: Arc<AtomicU64>) {
    let mut under_way = FuturesUnordered::new();
    let mut open = true;
    while open || !under_way.is_empty() {
        tokio::select! {
            first = rx.recv(), if open && under_way.len() < IN_FLIGHT => match first {
                Some(first) => {
                    let asks = gathered(first, &mut rx);
                    sent.fetch_add(1, Ordering::Relaxed);
                    under_way.push(answer(pool.clone(), asks));
                }
                None => open = false,
            },
            Some(()) = under_way.next(), if !under_way.is_empty() => {}
        }
    }
}

/// `first` and the reads queued behind it, up to [`GATHER`].
fn gathered(first: Ask, rx: &mut mpsc::UnboundedReceiver<Ask>) -> Vec<Ask> {
    let mut asks = vec![first];
    while asks.len() < GATHER {
        match rx.try_recv() {
            Ok(a) => asks.push(a),
            Err(_) => break,
        }
    }
    asks
}

/// Reads `asks` in one statement and answers each; read by read when it fails.
async fn answer(pool: Pool, asks: Vec<Ask>) {
    match together(&pool, &asks).await {
        Ok(answers) => {
            for (ask, a) in asks.into_iter().zip(answers) {
                // A reader that stopped waiting is not an error.
                let _ = ask.reply.send(a);
            }
        }
        Err(e) => {
            tracing::debug!(error = %e, reads = asks.len(), "a gathered read failed; reading each alone");
            for ask in asks {
                let a = alone(&pool, &ask.task_id, ask.after, ask.limit).await;
                let _ = ask.reply.send(a);
            }
        }
    }
}

/// The answers of `asks` from one statement, in their order.
async fn together(pool: &Pool, asks: &[Ask]) -> Result<Vec<Answer>, StoreError> {
    let ids: Vec<&str> = asks.iter().map(|a| a.task_id.as_str()).collect();
    let afters: Vec<i64> = asks.iter().map(|a| clamp(a.after)).collect();
    let limits: Vec<i64> = asks.iter().map(|a| clamp(a.limit)).collect();
    let c = pool.get().await?;
    let stmt = c.prepare_cached(EVENTS).await?;
    let rows = c.query(&stmt, &[&ids, &afters, &limits]).await?;
    let mut answers: Vec<Answer> = asks.iter().map(|_| Ok(Vec::new())).collect();
    for row in &rows {
        let i: usize = unsigned(row, WHAT, 0)?;
        let Some(slot) = i.checked_sub(1).and_then(|i| answers.get_mut(i)) else {
            return Err(StoreError::BadRow {
                what: WHAT,
                column: 0,
                detail: format!("read {i} was not asked for"),
            });
        };
        *slot = answered(row, i - 1, asks, std::mem::replace(slot, Ok(Vec::new())));
    }
    Ok(answers)
}

/// `so_far` with the event of `row` (the read `asks[i]`) added, or the task not found.
fn answered(row: &tokio_postgres::Row, i: usize, asks: &[Ask], so_far: Answer) -> Answer {
    let mut evs = so_far?;
    if !col::<bool>(row, WHAT, 1)? {
        let id = asks.get(i).map(|a| a.task_id.clone()).unwrap_or_default();
        return Err(StoreError::NotFound(id));
    }
    let Some(json) = col::<Option<&str>>(row, WHAT, 3)? else {
        return Ok(evs);
    };
    evs.push(Arc::new(LoggedEvent::parse_stored(
        unsigned(row, WHAT, 2)?,
        json,
    )?));
    Ok(evs)
}

/// A number for a BIGINT parameter (the largest one when it does not fit).
fn clamp<N: TryInto<i64>>(n: N) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// One read on its own: up to `limit` events of `task_id` after `after`, in statements of
/// their own.
async fn alone(pool: &Pool, task_id: &str, after: u64, limit: usize) -> Answer {
    let c = pool.get().await?;
    let evs = read::events(&c, task_id, after, limit).await?;
    if evs.is_empty() && read::position(&c, task_id).await?.is_none() {
        return Err(StoreError::NotFound(task_id.to_string()));
    }
    Ok(evs)
}
