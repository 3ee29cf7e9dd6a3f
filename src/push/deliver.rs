//! The delivery worker: one job per (task, config) with pending updates, posting them in
//! order; retries with backoff and jitter; dead letters after too many failures.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rand::Rng;
use tokio::sync::mpsc;

use super::{lock, Inner, V03};
use crate::protocol::v03;
use crate::store::{DeadLetter, PushRecord};
use crate::task::{LoggedEvent, TaskEvent};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Waits for tasks with new events and starts (or flags) their delivery jobs.
pub(super) async fn worker(inner: Arc<Inner>, mut rx: mpsc::UnboundedReceiver<String>) {
    let mut stop = inner.stop.subscribe();
    loop {
        let task_id = tokio::select! {
            t = rx.recv() => match t {
                Some(t) => t,
                None => return,
            },
            _ = stop.wait_for(|s| *s) => return,
        };
        let configs = match inner.store.list_push(&task_id).await {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(task = %task_id, error = %e, "cannot read push configs");
                continue;
            }
        };
        if configs.is_empty() {
            lock(&inner.watched).remove(&task_id);
        }
        for cfg in configs {
            let key = (cfg.task_id.clone(), cfg.id.clone());
            let start = {
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
            if start {
                tokio::spawn(job(inner.clone(), key));
            }
        }
    }
}

/// Delivers one config's pending updates until it is caught up.
async fn job(inner: Arc<Inner>, key: (String, String)) {
    loop {
        if let Some(more) = lock(&inner.jobs).get_mut(&key) {
            *more = false;
        }
        match inner.store.get_push(&key.0, &key.1).await {
            Ok(Some(rec)) => deliver_pending(&inner, rec).await,
            Ok(None) => {}
            Err(e) => tracing::error!(task = %key.0, error = %e, "cannot read a push config"),
        }
        let mut jobs = lock(&inner.jobs);
        if jobs.get(&key).copied().unwrap_or(false) {
            continue;
        }
        jobs.remove(&key);
        return;
    }
}

async fn deliver_pending(inner: &Inner, mut rec: PushRecord) {
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
    let mut stop = inner.stop.subscribe();
    loop {
        if *stop.borrow() {
            return;
        }
        if rec.next_at_ms > now_ms() {
            let pause = Duration::from_millis(rec.next_at_ms - now_ms());
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            // The config may have been deleted meanwhile.
            match inner.store.get_push(&rec.task_id, &rec.id).await {
                Ok(Some(_)) => {}
                _ => return,
            }
        }
        let events = match inner
            .tasks
            .events_after(&rec.task_id, rec.delivered_seq, 64)
            .await
        {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(task = %rec.task_id, error = %e, "cannot read events for push");
                return;
            }
        };
        if events.is_empty() {
            return;
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
                    save(inner, &rec).await;
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
                        save(inner, &rec).await;
                        continue;
                    }
                    rec.next_at_ms = now_ms() + backoff(inner, rec.attempts).as_millis() as u64;
                    rec.last_error = Some(err);
                    save(inner, &rec).await;
                    break;
                }
            }
        }
        save(inner, &rec).await;
    }
}

async fn save(inner: &Inner, rec: &PushRecord) {
    if let Err(e) = inner
        .store
        .push_progress(
            &rec.task_id,
            &rec.id,
            rec.delivered_seq,
            rec.attempts,
            rec.next_at_ms,
            rec.last_error.as_deref(),
        )
        .await
    {
        tracing::error!(task = %rec.task_id, error = %e, "cannot record push progress");
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
