//! The operations both HTTP bindings (JSON-RPC and HTTP+JSON) share: blocking send, streamed
//! send and subscribe. Only the encoding differs between bindings; it is chosen by the
//! [`Flavor`] of the stream or by the caller for plain results. The gRPC binding uses the same
//! operations through [`open_send_stream`] and [`open_subscription`].

use axum::http::HeaderMap;
use axum::response::Response;

use super::push_rpc;
use super::sse::{self, Flavor};
use super::AppState;
use crate::engine::EventStream;
use crate::engine::RequestOptions;
use crate::protocol::v1::{SendMessageRequest, SendMessageResponse, StreamResponse, Task};
use crate::protocol::A2AError;
use crate::task;

/// Sends and, unless `returnImmediately`, waits until the task is terminal or waits for input,
/// or (with `blocking_wait` set) until that much time has passed: then the answer is the task
/// as it is, still working. The answer is the task, or the agent's message when it answered with one instead of a
/// task (see [`direct_message`]).
pub async fn send_blocking(
    state: &AppState,
    owner: Option<&str>,
    req: SendMessageRequest,
    opts: &RequestOptions,
    version: &str,
) -> Result<SendMessageResponse, A2AError> {
    let cfg = req.configuration.clone().unwrap_or_default();
    if let Some(n) = cfg.history_length {
        if n < 0 {
            return Err(A2AError::InvalidParams(
                "configuration.historyLength must not be negative".into(),
            ));
        }
    }
    let push_cfg = push_rpc::inline_config(state, &req).await?;
    let acc = state.engine.send(req, owner, opts).await?;
    // A message carried out by another host: that host took its push config.
    let push_cfg = push_cfg.filter(|_| !acc.elsewhere);
    push_rpc::register_inline(state, owner, push_cfg, &acc.task_id, acc.new_task, version).await?;
    let snap = if cfg.return_immediately {
        state.engine.get_snapshot(&acc.task_id, owner).await?
    } else {
        let settled = state.engine.wait_settled(&acc.task_id, acc.from_seq, owner);
        match state.blocking_wait {
            None => settled.await?,
            Some(limit) => match tokio::time::timeout(limit, settled).await {
                Ok(snap) => snap?,
                Err(_) => {
                    tracing::debug!(task = %acc.task_id, "blocking send answers before the task settled (blocking wait limit)");
                    state.engine.get_snapshot(&acc.task_id, owner).await?
                }
            },
        }
    };
    if let Some(msg) = direct_message(&snap.task) {
        return Ok(SendMessageResponse::Message(msg));
    }
    Ok(SendMessageResponse::Task(task::view(
        snap.task,
        cfg.history_length,
        true,
    )))
}

/// The agent's message, when the task ended with the agent answering by a message instead of
/// working on a task (task metadata `directMessage`). The message names no task: there is
/// nothing to follow up on but the context.
fn direct_message(t: &Task) -> Option<crate::protocol::v1::Message> {
    let direct = t
        .metadata
        .as_ref()
        .and_then(|m| m.get(task::DIRECT_MESSAGE_KEY))
        .and_then(serde_json::Value::as_bool)
        == Some(true);
    if !direct || !t.status.state.is_terminal() {
        return None;
    }
    let mut msg = t.status.message.clone()?;
    msg.task_id = None;
    Some(msg)
}

/// What a stream sends: `first` (the task as it is now, with the sequence number it was read
/// at, when the stream starts from a snapshot), then the task's logged events. Every binding
/// streams this; only the encoding differs (SSE frames for HTTP, messages for gRPC).
pub struct TaskStream {
    pub first: Option<(u64, StreamResponse)>,
    pub events: EventStream,
}

impl TaskStream {
    /// As an SSE response of the given flavor.
    fn into_sse(self, state: &AppState, flavor: Flavor) -> Response {
        let first = self
            .first
            .map(|(seq, sr)| flavor.frame_for(seq, &sr))
            .into_iter()
            .collect();
        sse::response(first, self.events, flavor, state.keepalive)
    }
}

/// Sends and streams the task: a new task from its first event (the task as submitted); an
/// answer from the task as it is now.
pub async fn stream_send(
    state: &AppState,
    owner: Option<&str>,
    req: SendMessageRequest,
    opts: &RequestOptions,
    flavor: Flavor,
    version: &str,
) -> Result<Response, A2AError> {
    Ok(open_send_stream(state, owner, req, opts, version)
        .await?
        .into_sse(state, flavor))
}

/// [`stream_send`] before its encoding.
pub async fn open_send_stream(
    state: &AppState,
    owner: Option<&str>,
    req: SendMessageRequest,
    opts: &RequestOptions,
    version: &str,
) -> Result<TaskStream, A2AError> {
    let push_cfg = push_rpc::inline_config(state, &req).await?;
    let acc = state.engine.send(req, owner, opts).await?;
    // A message carried out by another host: that host took its push config.
    let push_cfg = push_cfg.filter(|_| !acc.elsewhere);
    push_rpc::register_inline(state, owner, push_cfg, &acc.task_id, acc.new_task, version).await?;
    if acc.new_task {
        let events = state.engine.subscribe(&acc.task_id, 0, owner).await?;
        return Ok(TaskStream {
            first: None,
            events,
        });
    }
    // An answer: the task as it is now, then what follows the answer, ending at the first
    // settled state after it (which may already be the one the snapshot shows).
    let (snap, events) = state
        .engine
        .follow_answer(&acc.task_id, acc.from_seq, owner)
        .await?;
    Ok(TaskStream {
        first: Some((snap.last_seq, StreamResponse::Task(snap.task))),
        events,
    })
}

/// The current task, then its events.
async fn follow_from_snapshot(
    state: &AppState,
    owner: Option<&str>,
    task_id: &str,
) -> Result<TaskStream, A2AError> {
    let snap = state.engine.get_snapshot(task_id, owner).await?;
    let mut events = state
        .engine
        .subscribe(task_id, snap.last_seq, owner)
        .await?;
    // A task waiting for input: the task is the event that puts it there, and the stream
    // ends after it.
    if snap.task.status.state.is_interrupted() {
        events = events.settled();
    }
    Ok(TaskStream {
        first: Some((snap.last_seq, StreamResponse::Task(snap.task))),
        events,
    })
}

/// The `Last-Event-ID` header, when present and not blank.
pub fn last_event_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Subscribe (`SubscribeToTask`, `tasks/resubscribe`, `…:subscribe`). With a
/// `Last-Event-ID`, replays what the client missed after that event; otherwise sends the task
/// as it is now, then what follows.
pub async fn subscribe(
    state: &AppState,
    owner: Option<&str>,
    last_event_id: Option<&str>,
    task_id: &str,
    flavor: Flavor,
) -> Result<Response, A2AError> {
    Ok(open_subscription(state, owner, last_event_id, task_id)
        .await?
        .into_sse(state, flavor))
}

/// How long a subscription with an id beyond the stored log waits for the log to reach it.
const CATCH_UP: std::time::Duration = std::time::Duration::from_secs(1);

/// The task's stream from `from` read on to `after` (the events the client has), when the
/// log reaches `after` within [`CATCH_UP`]; None otherwise.
async fn catch_up(
    state: &AppState,
    owner: Option<&str>,
    task_id: &str,
    from: u64,
    after: u64,
) -> Result<Option<EventStream>, A2AError> {
    let mut events = state.engine.subscribe(task_id, from, owner).await?;
    let reached = tokio::time::timeout(CATCH_UP, async {
        while events.cursor() < after {
            if events.next().await.is_none() {
                return false;
            }
        }
        true
    })
    .await;
    Ok(matches!(reached, Ok(true)).then_some(events))
}

/// [`subscribe`] before its encoding.
pub async fn open_subscription(
    state: &AppState,
    owner: Option<&str>,
    last_event_id: Option<&str>,
    task_id: &str,
) -> Result<TaskStream, A2AError> {
    if let Some(raw) = last_event_id {
        let after: u64 = raw.parse().map_err(|_| {
            A2AError::InvalidRequest(format!(
                "Last-Event-ID '{raw}' is not an event id of this server (a number)"
            ))
        })?;
        let snap = state.engine.get_snapshot(task_id, owner).await?;
        if after > snap.last_seq {
            // Another host of the same database may have shown the client events it has not
            // committed yet (its streams see progress at once): they are read here once they
            // are, within a commit's time.
            if !snap.task.status.state.is_terminal() {
                if let Some(events) = catch_up(state, owner, task_id, snap.last_seq, after).await? {
                    return Ok(TaskStream {
                        first: None,
                        events,
                    });
                }
            }
            // An id beyond the end of the log (another server's, or a log cut since): the
            // client gets the task as it is now, then what follows, instead of an empty
            // stream.
            return follow_from_snapshot(state, owner, task_id).await;
        }
        let events = state.engine.subscribe(task_id, after, owner).await?;
        return Ok(TaskStream {
            first: None,
            events,
        });
    }
    let snap = state.engine.get_snapshot(task_id, owner).await?;
    if snap.task.status.state.is_terminal() {
        return Err(A2AError::UnsupportedOperation(format!(
            "task {task_id} has already ended; read it with GetTask (or resubscribe with Last-Event-ID to replay its events)"
        )));
    }
    follow_from_snapshot(state, owner, task_id).await
}
