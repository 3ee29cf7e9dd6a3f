//! Following a task's event log: replay, then live.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use tokio::sync::watch;

use super::{lock, Engine, Inner, Owner};
use crate::protocol::A2AError;
use crate::store::Snapshot;
use crate::store::{StoreError, TaskStore};
use crate::task::LoggedEvent;

/// A task's events from a position on: replays the log, then follows it live. Ends after a
/// terminal or input-required status that is the latest event of the log, or when the task
/// is no longer live and the log is read.
pub struct EventStream {
    pub(super) store: Arc<dyn TaskStore>,
    pub(super) health: Arc<super::publish::StoreHealth>,
    pub(super) task_id: String,
    pub(super) cursor: u64,
    pub(super) rx: Option<watch::Receiver<u64>>,
    /// The task's wake-up while it is live on this host: its receiver count tells whether
    /// others follow the task too (weak, so that the task's end still closes `rx`).
    pub(super) notify: Weak<watch::Sender<u64>>,
    /// Set when another host writes the task: `rx` is the store's wake-up, which may be
    /// lost, so the log is also read again after this long without one.
    pub(super) poll: Option<std::time::Duration>,
    /// With several hosts, this host's id and its heartbeat: a task that stops being live
    /// here because another host took it over is then followed through the store, polled
    /// every heartbeat, as a task another host runs.
    pub(super) here: Option<(String, std::time::Duration)>,
    pub(super) buf: VecDeque<Arc<LoggedEvent>>,
    pub(super) done: bool,
    /// The last event returned was a settled state (terminal, or waiting for input).
    pub(super) settled: bool,
    /// Counts the stream among the task's subscribers while it lives.
    pub(super) _slot: Option<SubscriberSlot>,
    /// The read of the log under way, kept across a cancelled [`EventStream::next`] (see
    /// [`InFlight`]).
    pub(super) reading: Option<InFlight<Result<Vec<Arc<LoggedEvent>>, StoreError>>>,
    /// The check whether a task another host writes has ended, kept likewise.
    pub(super) checking: Option<InFlight<bool>>,
    /// When the log of a task another host writes is read again without a wake-up: fixed
    /// when the wait starts, so that a cancelled wait does not start the period over.
    pub(super) poll_at: Option<tokio::time::Instant>,
}

/// A store read that outlives the `next()` call that started it. Callers race `next()`
/// against other work (an SSE response against its keep-alive timer, every 200 ms in the
/// tests): a read dropped unfinished was started again from scratch by the next call, so a
/// read slower than the keep-alive (a task with lines of 15 MB, read back on a busy machine)
/// never finished and the stream stood still, reading and dropping the same events forever.
/// Kept here, the next call goes on waiting for the same read.
pub(super) type InFlight<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One of a task's subscriber slots; freed when dropped.
pub(super) struct SubscriberSlot {
    pub(super) inner: Arc<Inner>,
    pub(super) task_id: String,
}

impl Drop for SubscriberSlot {
    fn drop(&mut self) {
        metrics::gauge!("agent_host_sse_subscribers").decrement(1.0);
        let mut st = lock(&self.inner.state);
        if let Some(n) = st.subscribers.get_mut(&self.task_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.subscribers.remove(&self.task_id);
            }
        }
    }
}

impl EventStream {
    /// The next event; None at the end.
    pub async fn next(&mut self) -> Option<Arc<LoggedEvent>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(e) = self.buf.pop_front() {
                self.cursor = e.seq;
                // A settled state ends the stream only when it is the latest: a replay
                // goes on past a question that was answered since.
                self.settled = e.event.ends_stream();
                return Some(e);
            }
            let read = self.reading.get_or_insert_with(|| {
                let (store, id, after) = (self.store.clone(), self.task_id.clone(), self.cursor);
                Box::pin(async move { store.events_after(&id, after, 512).await })
            });
            let got = read.as_mut().await;
            self.reading = None;
            match got {
                Ok(evs) if !evs.is_empty() => {
                    self.buf.extend(evs);
                    continue;
                }
                // The end the store refused (kept in memory).
                Ok(_) if !self.settled => {
                    if let Some(end) = self.health.unstored_after(&self.task_id, self.cursor) {
                        self.buf.push_back(end);
                        continue;
                    }
                }
                Ok(_) if self.settled => {
                    self.done = true;
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(task = %self.task_id, error = %e, "could not read task events");
                    return None;
                }
            }
            match (&mut self.rx, self.poll) {
                (Some(rx), None) => {
                    if rx.changed().await.is_err() {
                        // The task is no longer live here: read what is left, then end;
                        // unless another host took it over, which writes its end.
                        self.rx = self.taken_over().await;
                    }
                }
                (Some(rx), Some(every)) => {
                    let at = *self
                        .poll_at
                        .get_or_insert_with(|| tokio::time::Instant::now() + every);
                    let woken = tokio::time::timeout_at(at, rx.changed()).await.is_ok();
                    if !woken && self.ended_elsewhere().await {
                        self.done = true;
                        return None;
                    }
                    self.poll_at = None;
                }
                (None, _) => return None,
            }
        }
    }

    /// The store's wake-up for a task no longer live here that another host owns now (it
    /// took the task over from this host), polled every heartbeat from now on. None when
    /// this host still owns it (it ended here, or this host stops) or is the only one.
    async fn taken_over(&mut self) -> Option<watch::Receiver<u64>> {
        let (me, every) = self.here.clone()?;
        let c = self.store.cluster()?;
        match c.task_host(&self.task_id).await {
            Ok(Some(owner)) if owner.record.id != me => {}
            Ok(_) => return None,
            Err(e) => {
                tracing::warn!(task = %self.task_id, error = %e, "could not tell which host runs the task now; the stream ends");
                return None;
            }
        }
        self.here = None;
        self.poll = Some(every);
        Some(c.watch_task(&self.task_id))
    }

    /// Whether a task another host writes has ended (or is gone) with nothing after the
    /// cursor: a log whose last event is not a settled state, which no wake-up will follow.
    async fn ended_elsewhere(&mut self) -> bool {
        let check = self.checking.get_or_insert_with(|| {
            let (store, id, cursor) = (self.store.clone(), self.task_id.clone(), self.cursor);
            Box::pin(async move {
                match store.get(&id).await {
                    Ok(Some(snap)) => {
                        snap.task.status.state.is_terminal() && snap.last_seq <= cursor
                    }
                    Ok(None) => true,
                    Err(_) => false,
                }
            })
        });
        let ended = check.as_mut().await;
        self.checking = None;
        ended
    }

    /// Whether another stream (or a waiting request) follows the same live task on this
    /// host: only then is an event's encoding worth keeping on the event for the next
    /// reader; a task's only follower would keep a second copy of every event for nothing.
    pub fn shared(&self) -> bool {
        self.notify
            .upgrade()
            .is_some_and(|n| n.receiver_count() > 1)
    }

    /// Sequence number of the last event returned.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The stream of a client that was shown the task settled at the cursor (waiting for
    /// input): it ends there, unless events follow already.
    pub fn settled(mut self) -> EventStream {
        self.settled = true;
        self
    }
}

impl Engine {
    /// A client's stream of a task's log from after `after`: counted against the task's
    /// subscriber limit.
    pub async fn subscribe(
        &self,
        task_id: &str,
        after: u64,
        owner: Owner<'_>,
    ) -> Result<EventStream, A2AError> {
        self.snapshot_for(task_id, owner).await?;
        let slot = {
            let mut st = lock(&self.inner.state);
            let n = st.subscribers.entry(task_id.to_string()).or_insert(0);
            if *n >= self.inner.config.limits.max_subscribers {
                return Err(A2AError::Busy(format!(
                    "task {task_id} already has {n} streams following it; close one and retry"
                )));
            }
            *n += 1;
            metrics::gauge!("agent_host_sse_subscribers").increment(1.0);
            SubscriberSlot {
                inner: self.inner.clone(),
                task_id: task_id.to_string(),
            }
        };
        let mut s = self.follow(task_id, after);
        s._slot = Some(slot);
        Ok(s)
    }

    /// Follows a task's log from after `after` (the caller checked the task exists).
    pub(super) fn follow(&self, task_id: &str, after: u64) -> EventStream {
        // Subscribe to the watch before reading the store, so no wake-up is missed.
        let local = {
            let st = lock(&self.inner.state);
            st.live
                .get(task_id)
                .map(|l| (l.notify.subscribe(), Arc::downgrade(&l.notify)))
        };
        // Not live here: with several hosts, it may run on another; its appends wake us
        // through the store.
        let (rx, poll, notify) = match local {
            Some((rx, notify)) => (Some(rx), None, notify),
            None => match self.remote_watch(task_id) {
                Some((rx, every)) => (Some(rx), Some(every), Weak::new()),
                None => (None, None, Weak::new()),
            },
        };
        let here = match (poll, self.inner.cluster.get()) {
            (None, Some(c)) => Some((c.me.id.clone(), c.heartbeat)),
            _ => None,
        };
        EventStream {
            store: self.inner.store.clone(),
            health: self.inner.health.clone(),
            task_id: task_id.to_string(),
            cursor: after,
            rx,
            notify,
            poll,
            here,
            buf: VecDeque::new(),
            done: false,
            settled: false,
            _slot: None,
            reading: None,
            checking: None,
            poll_at: None,
        }
    }

    /// Waits until the task is terminal or waits for input (following from `after`), and
    /// returns it.
    pub async fn wait_settled(
        &self,
        task_id: &str,
        after: u64,
        owner: Owner<'_>,
    ) -> Result<Snapshot, A2AError> {
        self.snapshot_for(task_id, owner).await?;
        let mut s = self.follow(task_id, after);
        while s.next().await.is_some() {}
        self.snapshot(task_id).await
    }
}
