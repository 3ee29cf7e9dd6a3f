//! The delivery worker: one job per (task, config) with pending updates, posting them in
//! order; retries with backoff and jitter; dead letters after too many failures.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;
use tokio::sync::{broadcast, mpsc};

use super::{lock, Inner, V03};
use crate::protocol::v03;
use crate::store::{DeadLetter, PushRecord, PushWake};
use crate::task::{LoggedEvent, TaskEvent};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the worker does next.
enum Next {
    /// Wake the jobs of a task's configs.
    Task(String),
    /// Claim the shared queue's due work.
    Scan,
    /// Wake-ups were lost: learn the configs again, then scan.
    Relearn,
    Nothing,
}

/// Waits for tasks with new events and starts (or flags) their delivery jobs; with a shared
/// store, also scans the queue for due work no live claim covers, and follows the store's
/// wake-ups (`wakes`): events any host stored, configs created through any host.
pub(super) async fn worker(
    inner: Arc<Inner>,
    mut rx: mpsc::UnboundedReceiver<String>,
    mut wakes: Option<broadcast::Receiver<PushWake>>,
) {
    let mut stop = inner.stop.subscribe();
    let shared = inner.store.shared();
    // The first tick is at once: a starting host takes over what is pending.
    let mut scan = tokio::time::interval(scan_every(&inner));
    scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // The select only chooses (its stop guard is not held across the work).
        let next = tokio::select! {
            t = rx.recv() => match t {
                Some(t) => Next::Task(t),
                None => return,
            },
            w = store_wake(&mut wakes) => from_store(&inner, w),
            _ = scan.tick(), if shared => Next::Scan,
            _ = stop.wait_for(|s| *s) => return,
        };
        match next {
            Next::Task(t) => wake(&inner, &t).await,
            Next::Scan => scan_due(&inner).await,
            Next::Relearn => {
                relearn(&inner).await;
                scan_due(&inner).await;
            }
            Next::Nothing => {}
        }
    }
}

/// The next wake-up of the store (never, when it has none or they ended).
async fn store_wake(
    wakes: &mut Option<broadcast::Receiver<PushWake>>,
) -> Option<Result<PushWake, broadcast::error::RecvError>> {
    match wakes {
        Some(rx) => {
            let w = rx.recv().await;
            if matches!(w, Err(broadcast::error::RecvError::Closed)) {
                *wakes = None;
            }
            Some(w)
        }
        None => std::future::pending().await,
    }
}

/// What a store wake-up asks for. Events of a task without configs here cost nothing.
fn from_store(inner: &Inner, w: Option<Result<PushWake, broadcast::error::RecvError>>) -> Next {
    match w {
        Some(Ok(PushWake::Events(t))) if lock(&inner.watched).contains(&t) => Next::Task(t),
        Some(Ok(PushWake::Events(_))) => Next::Nothing,
        Some(Ok(PushWake::Config(t))) => {
            lock(&inner.watched).insert(t.clone());
            Next::Task(t)
        }
        Some(Ok(PushWake::Missed) | Err(broadcast::error::RecvError::Lagged(_))) => Next::Relearn,
        Some(Err(broadcast::error::RecvError::Closed)) | None => Next::Nothing,
    }
}

/// Reads which tasks have configs again (wake-ups of configs created meanwhile were lost).
async fn relearn(inner: &Inner) {
    match inner.store.all_push().await {
        Ok(configs) => lock(&inner.watched).extend(configs.into_iter().map(|c| c.task_id)),
        Err(e) => tracing::warn!(error = %e, "cannot read the push configs again"),
    }
}

/// How often a shared store's queue is scanned: a third of the claim lease (so a dead
/// host's work is taken over soon after its claims expire), between 50 ms and 10 s.
fn scan_every(inner: &Inner) -> Duration {
    (inner.settings.claim_lease / 3).clamp(Duration::from_millis(50), Duration::from_secs(10))
}

/// Starts (or flags) the jobs of a task's configs.
async fn wake(inner: &Arc<Inner>, task_id: &str) {
    let configs = match inner.store.list_push(task_id).await {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(task = %task_id, error = %e, "cannot read push configs");
            return;
        }
    };
    if configs.is_empty() {
        lock(&inner.watched).remove(task_id);
    }
    for cfg in configs {
        start(inner, (cfg.task_id, cfg.id));
    }
}

/// Claims the due work of a shared store (in batches) and starts its jobs.
async fn scan_due(inner: &Arc<Inner>) {
    const BATCH: usize = 64;
    loop {
        let claimed = match inner
            .store
            .claim_due_push(&inner.claim, now_ms(), BATCH)
            .await
        {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "cannot scan the push delivery queue");
                return;
            }
        };
        let n = claimed.len();
        for rec in claimed {
            tracing::debug!(task = %rec.task_id, config = %rec.id, after = rec.delivered_seq, "push deliveries claimed from the queue");
            // Its next updates wake the job here directly.
            lock(&inner.watched).insert(rec.task_id.clone());
            start(inner, (rec.task_id, rec.id));
        }
        if n < BATCH || *inner.stop.borrow() {
            return;
        }
    }
}

/// Starts the job of a config, or tells the running one that more work arrived.
fn start(inner: &Arc<Inner>, key: (String, String)) {
    let spawn = {
        let mut jobs = lock(&inner.jobs);
        match jobs.get_mut(&key) {
            Some(more) => {
                *more = true;
                false
            }
            None => {
                jobs.insert(key.clone(), false);
                true
            }
        }
    };
    if spawn {
        tokio::spawn(job(inner.clone(), key));
    }
}

/// How a round of deliveries of one config ended.
enum Round {
    /// Every update so far is delivered (or skipped); the cursor is at this sequence.
    CaughtUp(u64),
    /// An update failed; try again at this time (ms since the epoch).
    RetryAt(u64),
    /// The claim passed to another host: it delivers from here.
    Lost,
    /// The events could not be read; the next wake or scan tries again.
    Failed,
    /// The host is stopping.
    Stopped,
}

/// Delivers one config's pending updates until it is caught up, holding its claim.
async fn job(inner: Arc<Inner>, key: (String, String)) {
    let shared = inner.store.shared();
    let mut stop = inner.stop.subscribe();
    loop {
        if let Some(more) = lock(&inner.jobs).get_mut(&key) {
            *more = false;
        }
        let round = match inner.store.claim_push(&key.0, &key.1, &inner.claim).await {
            Ok(Some(rec)) => Some(deliver_pending(&inner, rec).await),
            // Deleted, or another host holds the claim (and delivers).
            Ok(None) => None,
            Err(e) => {
                tracing::error!(task = %key.0, error = %e, "cannot claim a push config");
                None
            }
        };
        let mut again = false;
        match round {
            Some(Round::CaughtUp(seq)) => {
                release(&inner, &key).await;
                // An update that came while the claim was held, and whose wake on another
                // host was refused the claim, is this holder's to deliver: look once more
                // after releasing.
                if shared {
                    again = matches!(inner.tasks.events_after(&key.0, seq, 1).await, Ok(e) if !e.is_empty());
                }
            }
            Some(Round::RetryAt(at)) => {
                // The claim is not held while waiting: another host may take the retry
                // over when it is due (this one then finds the claim taken and ends).
                release(&inner, &key).await;
                let pause = Duration::from_millis(at.saturating_sub(now_ms()));
                tokio::select! {
                    _ = tokio::time::sleep(pause) => again = true,
                    _ = stop.wait_for(|s| *s) => {}
                }
            }
            Some(Round::Failed) => release(&inner, &key).await,
            Some(Round::Stopped) => {
                release(&inner, &key).await;
                lock(&inner.jobs).remove(&key);
                return;
            }
            Some(Round::Lost) | None => {}
        }
        if again && !*stop.borrow() {
            continue;
        }
        let mut jobs = lock(&inner.jobs);
        if jobs.get(&key).copied().unwrap_or(false) && !*stop.borrow() {
            continue;
        }
        jobs.remove(&key);
        return;
    }
}

/// Gives up this host's claim on a config (nothing for stores one host owns).
async fn release(inner: &Inner, key: &(String, String)) {
    if let Err(e) = inner.store.release_push(&key.0, &key.1, &inner.claim).await {
        // The claim then expires by itself.
        tracing::warn!(task = %key.0, config = %key.1, error = %e, "cannot release a push claim");
    }
}

async fn deliver_pending(inner: &Inner, mut rec: PushRecord) -> Round {
    let open = |sealed: &str| match inner.sealer.open(sealed) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::error!(task = %rec.task_id, config = %rec.id, error = %e, "cannot open a stored push secret; sending without it");
            None
        }
    };
    let token = rec.token.as_deref().and_then(open);
    let auth = match (&rec.auth_scheme, &rec.auth_credentials) {
        (Some(scheme), Some(c)) => open(c).map(|cred| format!("{scheme} {cred}")),
        (Some(scheme), None) => Some(scheme.clone()),
        _ => None,
    };
    // The trace of the request that created the task, passed on to the receiver.
    let traceparent = match inner.tasks.get(&rec.task_id).await {
        Ok(Some(s)) => s
            .task
            .metadata
            .as_ref()
            .and_then(|m| m.get("traceparent"))
            .and_then(|v| v.as_str())
            .map(str::to_string),
        _ => None,
    };
    let stop = inner.stop.subscribe();
    if rec.next_at_ms > now_ms() {
        return Round::RetryAt(rec.next_at_ms);
    }
    loop {
        if *stop.borrow() {
            return Round::Stopped;
        }
        let events = match inner
            .tasks
            .events_after(&rec.task_id, rec.delivered_seq, 64)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(task = %rec.task_id, error = %e, "cannot read events for push");
                return Round::Failed;
            }
        };
        if events.is_empty() {
            return Round::CaughtUp(rec.delivered_seq);
        }
        for ev in events {
            if *stop.borrow() {
                break;
            }
            let Some(body) = payload(&ev, &rec.version) else {
                rec.delivered_seq = ev.seq;
                continue;
            };
            let headers = Headers {
                seq: ev.seq,
                token: token.as_deref(),
                auth: auth.as_deref(),
                traceparent: traceparent.as_deref(),
            };
            match post(inner, &rec, &body, &headers).await {
                Ok(()) => {
                    metrics::counter!("agent_host_push_deliveries_total").increment(1);
                    rec.delivered_seq = ev.seq;
                    rec.attempts = 0;
                    rec.next_at_ms = 0;
                    rec.last_error = None;
                    if !save(inner, &rec).await {
                        return Round::Lost;
                    }
                }
                Err(err) => {
                    let err = err.to_string();
                    metrics::counter!("agent_host_push_failures_total").increment(1);
                    rec.attempts += 1;
                    tracing::warn!(task = %rec.task_id, config = %rec.id, seq = ev.seq, attempt = rec.attempts, error = %err, "push delivery failed");
                    if rec.attempts >= inner.settings.max_attempts {
                        let dead = DeadLetter {
                            task_id: rec.task_id.clone(),
                            config_id: rec.id.clone(),
                            seq: ev.seq,
                            attempts: rec.attempts,
                            error: err.clone(),
                        };
                        if let Err(e) = inner.store.dead_letter(&dead).await {
                            tracing::error!(error = %e, "cannot record a dead letter");
                        }
                        tracing::error!(task = %rec.task_id, config = %rec.id, seq = ev.seq, "push update given up after {} attempts", rec.attempts);
                        rec.delivered_seq = ev.seq;
                        rec.attempts = 0;
                        rec.next_at_ms = 0;
                        rec.last_error = Some(err);
                        if !save(inner, &rec).await {
                            return Round::Lost;
                        }
                        continue;
                    }
                    rec.next_at_ms = now_ms() + backoff(inner, rec.attempts).as_millis() as u64;
                    rec.last_error = Some(err);
                    if !save(inner, &rec).await {
                        return Round::Lost;
                    }
                    return Round::RetryAt(rec.next_at_ms);
                }
            }
        }
        if !save(inner, &rec).await {
            return Round::Lost;
        }
    }
}

/// Records a config's progress under this host's claim. False: the claim passed to another
/// host (nothing recorded). A database failure is logged and counts as held: the next
/// recorded delivery tells, and an update delivered meanwhile is at worst sent again.
async fn save(inner: &Inner, rec: &PushRecord) -> bool {
    match inner.store.save_claimed_push(rec, &inner.claim).await {
        Ok(held) => {
            if !held {
                tracing::info!(task = %rec.task_id, config = %rec.id, "push claim taken over by another host; it delivers from here");
            }
            held
        }
        Err(e) => {
            tracing::error!(task = %rec.task_id, error = %e, "cannot record push progress");
            true
        }
    }
}

/// Delay before attempt `attempts + 1`: base × 2^(attempts − 1), at most the maximum, ±20%.
fn backoff(inner: &Inner, attempts: u32) -> Duration {
    let s = &inner.settings;
    let exp = s
        .retry_base
        .saturating_mul(1u32 << attempts.saturating_sub(1).min(20));
    let capped = exp.min(s.retry_max);
    let jitter: f64 = rand::thread_rng().gen_range(0.8..1.2);
    capped.mul_f64(jitter)
}

/// The body for one event: the v1.0 `StreamResponse`, or the v0.3 event for v0.3 configs.
/// None for events that are not updates (user messages).
fn payload(ev: &LoggedEvent, version: &str) -> Option<String> {
    let TaskEvent::Stream(sr) = &ev.event else {
        return None;
    };
    Some(if version == V03 {
        v03::stream_event_to_v03(sr).to_string()
    } else {
        serde_json::to_string(sr).ok()?
    })
}

/// Headers of a webhook request beyond the content type.
struct Headers<'a> {
    /// The event's sequence number in the task's log: receivers deduplicate with it.
    seq: u64,
    token: Option<&'a str>,
    auth: Option<&'a str>,
    traceparent: Option<&'a str>,
}

/// Why one webhook request did not deliver its event.
#[derive(Debug, thiserror::Error)]
enum DeliveryError {
    #[error(transparent)]
    Url(#[from] super::guard::UrlError),
    /// reqwest's message includes the URL; it is kept (the client configured it).
    #[error("request failed: {0}")]
    Request(#[source] reqwest::Error),
    #[error("the receiver answered HTTP {0}")]
    Status(u16),
}

async fn post(
    inner: &Inner,
    rec: &PushRecord,
    body: &str,
    h: &Headers<'_>,
) -> Result<(), DeliveryError> {
    // The resolver refuses non-public addresses for names; literal addresses are checked
    // here (the resolver never sees them).
    super::guard::check_url(&rec.url, inner.settings.allow_private).await?;
    let mut req = inner
        .client
        .post(&rec.url)
        .header("content-type", "application/json")
        .header("X-A2A-Event-Seq", h.seq.to_string())
        .body(body.to_string());
    if let Some(t) = h.token {
        req = req.header("X-A2A-Notification-Token", t);
    }
    if let Some(a) = h.auth {
        req = req.header("authorization", a);
    }
    if let Some(t) = h.traceparent {
        req = req.header("traceparent", t);
    }
    let resp = req.send().await.map_err(DeliveryError::Request)?;
    let status = resp.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(DeliveryError::Status(status.as_u16()))
    }
}
