//! Wake-ups for followers of tasks another host writes: one dedicated connection per store
//! that `LISTEN`s on the events channel (see [`super::writer`]'s `wake`), fanned out in the
//! process to a watch channel per followed task; and, for push delivery, every events
//! wake-up and every push config wake-up ([`PUSH_CHANNEL`]) to the subscribers of the whole
//! store ([`Listener::subscribe_all`]).
//!
//! A wake-up only says "read again": the rows are the truth, so a lost or doubled one costs a
//! read at most. After the connection drops (and at each reconnect) every follower is woken,
//! since notifications sent meanwhile are lost.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{broadcast, watch};
use tokio_postgres::AsyncMessage;

use super::writer::{parse_wake, EVENTS_CHANNEL};
use crate::store::push::PushWake;

/// The channel of push config wake-ups: `<task id>` when a config of the task was created or
/// replaced, or its claim freed by a takeover (sent in that statement's transaction).
pub(super) const PUSH_CHANNEL: &str = "agent_host_push";

/// Wake-ups a subscriber of the whole store may fall behind by before it is told it missed
/// some ([`PushWake::Missed`]).
const ALL_CAPACITY: usize = 4096;

/// Followed tasks and their channels.
type Watchers = Arc<Mutex<HashMap<String, watch::Sender<u64>>>>;

/// The listening side of a store.
pub(super) struct Listener {
    config: Option<tokio_postgres::Config>,
    watchers: Watchers,
    /// Every wake-up, for subscribers of the whole store.
    all: broadcast::Sender<PushWake>,
    started: OnceLock<()>,
}

fn locked(w: &Watchers) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
    // The map stays consistent through a panic (single inserts and removes).
    w.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Listener {
    /// A listener that connects with `config` once started (None: never; followers poll).
    pub(super) fn new(config: Option<tokio_postgres::Config>) -> Listener {
        Listener {
            config,
            watchers: Watchers::default(),
            all: broadcast::channel(ALL_CAPACITY).0,
            started: OnceLock::new(),
        }
    }

    /// Starts the listening connection (once; later calls do nothing). Needs a runtime.
    pub(super) fn start(&self) {
        let Some(config) = self.config.clone() else {
            return;
        };
        if self.started.set(()).is_err() {
            return;
        }
        tokio::spawn(run(config, self.watchers.clone(), self.all.clone()));
    }

    /// Every wake-up of the store from now on (None when it has no `LISTEN` connection).
    /// A receiver that falls behind gets `Lagged`: it then missed some.
    pub(super) fn subscribe_all(&self) -> Option<broadcast::Receiver<PushWake>> {
        self.config.as_ref()?;
        Some(self.all.subscribe())
    }

    /// A channel that changes when events of `task_id` were stored.
    pub(super) fn watch(&self, task_id: &str) -> watch::Receiver<u64> {
        let mut w = locked(&self.watchers);
        // Channels whose followers are all gone are dropped here, not on every wake-up.
        w.retain(|_, tx| tx.receiver_count() > 0);
        w.entry(task_id.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }
}

/// Wakes every follower (the connection dropped: notifications may have been lost).
fn wake_all(w: &Watchers, all: &broadcast::Sender<PushWake>) {
    for tx in locked(w).values() {
        tx.send_modify(|v| *v += 1);
    }
    // No subscriber is not an error.
    let _ = all.send(PushWake::Missed);
}

/// Listens until the store is dropped (the watcher map with it), reconnecting after a
/// failure.
async fn run(config: tokio_postgres::Config, watchers: Watchers, all: broadcast::Sender<PushWake>) {
    let mut backoff = Duration::from_millis(200);
    loop {
        if Arc::strong_count(&watchers) == 1 {
            return;
        }
        match listen_once(&config, &watchers, &all).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, "the LISTEN connection failed; reconnecting");
                wake_all(&watchers, &all);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// Why the `LISTEN` connection ended (it is made again).
#[derive(Debug, thiserror::Error)]
enum ListenError {
    #[error(transparent)]
    Db(#[from] tokio_postgres::Error),
    #[error("the connection closed")]
    Closed,
}

/// One connection's life: `LISTEN`, then fan out notifications. Ok when the store is gone.
async fn listen_once(
    config: &tokio_postgres::Config,
    watchers: &Watchers,
    all: &broadcast::Sender<PushWake>,
) -> Result<(), ListenError> {
    let (client, mut conn) = config.connect(tokio_postgres::NoTls).await?;
    // The connection's messages (notifications among them) come from polling it.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
    let pump = tokio::spawn(async move {
        let mut messages = std::pin::pin!(messages);
        while let Some(m) = messages.next().await {
            if tx.send(m).is_err() {
                break;
            }
        }
    });
    let listened = client
        .batch_execute(&format!("LISTEN {EVENTS_CHANNEL}; LISTEN {PUSH_CHANNEL}"))
        .await;
    if let Err(e) = listened {
        pump.abort();
        return Err(e.into());
    }
    // Whatever was stored before LISTEN took effect: followers read again.
    wake_all(watchers, all);
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    let outcome = loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == PUSH_CHANNEL => {
                    if all.receiver_count() > 0 {
                        let _ = all.send(PushWake::Config(n.payload().to_string()));
                    }
                }
                Some(Ok(AsyncMessage::Notification(n))) => {
                    let w = locked(watchers);
                    let push = all.receiver_count() > 0;
                    for (id, seq) in parse_wake(n.payload()) {
                        if let Some(tx) = w.get(id) {
                            tx.send_replace(seq);
                        }
                        if push {
                            let _ = all.send(PushWake::Events(id.to_string()));
                        }
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => break Err(e.into()),
                None => break Err(ListenError::Closed),
            },
            _ = tick.tick() => {
                if Arc::strong_count(watchers) == 1 {
                    break Ok(());
                }
                // Finds a dead connection that reports no error.
                if let Err(e) = client.simple_query("SELECT 1").await {
                    break Err(e.into());
                }
            }
        }
    };
    pump.abort();
    outcome
}
