//! Server-sent events: one frame per task event, the task's sequence number as the SSE `id`,
//! keep-alive comments, closed after the event that ends the stream.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;

use crate::engine::EventStream;
use crate::protocol::v03;
use crate::protocol::v1::StreamResponse;
use crate::task::{LoggedEvent, TaskEvent};

/// How a stream event is written.
#[derive(Debug, Clone)]
pub enum Flavor {
    /// v1.0 JSON-RPC: `{"jsonrpc":"2.0","id":<id>,"result":<StreamResponse>}`.
    V1JsonRpc { id: String },
    /// v0.3 JSON-RPC: `result` is the bare `kind`-tagged event.
    V03JsonRpc { id: String },
    /// v1.0 HTTP+JSON: the bare `StreamResponse`, no envelope.
    V1Rest,
    /// v0.3 HTTP+JSON: the bare v0.3 proto `StreamResponse` (ProtoJSON), no envelope.
    V03Rest,
}

/// The JSON of a stream event in v1.0 shape, computed once per event.
pub fn v1_json(e: &LoggedEvent, sr: &StreamResponse) -> Arc<str> {
    e.v1_json
        .get_or_init(|| {
            serde_json::to_string(sr)
                .unwrap_or_else(|_| "{}".to_string())
                .into()
        })
        .clone()
}

/// The JSON of a stream event in v0.3 shape, computed once per event.
pub fn v03_json(e: &LoggedEvent, sr: &StreamResponse) -> Arc<str> {
    e.v03_json
        .get_or_init(|| v03::stream_event_to_v03(sr).to_string().into())
        .clone()
}

/// The JSON of a stream event in v0.3 REST shape, computed once per event.
pub fn v03_rest_json(e: &LoggedEvent, sr: &StreamResponse) -> Arc<str> {
    e.v03_rest_json
        .get_or_init(|| v03::rest::stream_event_to_rest03(sr).to_string().into())
        .clone()
}

impl Flavor {
    /// The `data:` of one event carrying `event_json` (already serialized): a JSON-RPC
    /// response, or the event itself for HTTP+JSON.
    fn wrap(&self, event_json: &str) -> String {
        match self {
            Flavor::V1JsonRpc { id } | Flavor::V03JsonRpc { id } => {
                format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{event_json}}}"#)
            }
            Flavor::V1Rest | Flavor::V03Rest => event_json.to_string(),
        }
    }

    /// The payload of a logged event, or None when it is not streamed (user messages).
    fn payload(&self, e: &LoggedEvent) -> Option<Arc<str>> {
        let TaskEvent::Stream(sr) = &e.event else {
            return None;
        };
        Some(match self {
            Flavor::V1JsonRpc { .. } | Flavor::V1Rest => v1_json(e, sr),
            Flavor::V03JsonRpc { .. } => v03_json(e, sr),
            Flavor::V03Rest => v03_rest_json(e, sr),
        })
    }

    /// The SSE frame of a logged event (its sequence number as the `id`), or None when the
    /// event is not streamed. The event's JSON is serialized once and cached on the event, so
    /// each further subscriber only pays for the envelope.
    pub fn encode(&self, e: &LoggedEvent) -> Option<Bytes> {
        let json = self.payload(e)?;
        Some(frame(e.seq, &self.wrap(&json)))
    }

    /// A frame for a stream response that is not in the log (a snapshot).
    pub fn frame_for(&self, seq: u64, sr: &StreamResponse) -> Bytes {
        let json = match self {
            Flavor::V1JsonRpc { .. } | Flavor::V1Rest => {
                serde_json::to_string(sr).unwrap_or_default()
            }
            Flavor::V03JsonRpc { .. } => v03::stream_event_to_v03(sr).to_string(),
            Flavor::V03Rest => v03::rest::stream_event_to_rest03(sr).to_string(),
        };
        frame(seq, &self.wrap(&json))
    }
}

fn frame(seq: u64, data: &str) -> Bytes {
    let mut s = String::with_capacity(data.len() + 24);
    s.push_str("id: ");
    s.push_str(&seq.to_string());
    s.push_str("\ndata: ");
    s.push_str(data);
    s.push_str("\n\n");
    Bytes::from(s)
}

struct SseState {
    pending: VecDeque<Bytes>,
    events: EventStream,
    flavor: Flavor,
    keepalive: tokio::time::Interval,
    done: bool,
}

/// An SSE response: `first` frames, then the task's events.
pub fn response(
    first: Vec<Bytes>,
    events: EventStream,
    flavor: Flavor,
    keepalive: Duration,
) -> Response {
    let mut ka = tokio::time::interval(keepalive);
    ka.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ka.reset();
    let state = SseState {
        pending: first.into(),
        events,
        flavor,
        keepalive: ka,
        done: false,
    };
    let stream = futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(b) = st.pending.pop_front() {
                return Some((Ok::<Bytes, std::convert::Infallible>(b), st));
            }
            if st.done {
                return None;
            }
            tokio::select! {
                ev = st.events.next() => match ev {
                    Some(e) => {
                        if let Some(f) = st.flavor.encode(&e) {
                            metrics::counter!("agent_host_sse_events_total").increment(1);
                            // Keep-alives only on a quiet stream.
                            st.keepalive.reset();
                            return Some((Ok(f), st));
                        }
                    }
                    None => st.done = true,
                },
                _ = st.keepalive.tick() => {
                    return Some((Ok(Bytes::from_static(b": ping\n\n")), st));
                }
            }
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}
