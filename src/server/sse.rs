//! Server-sent events: one frame per task event, the task's sequence number as the SSE `id`,
//! keep-alive comments, closed after the event that ends the stream.

use std::collections::VecDeque;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;

use crate::engine::EventStream;
use crate::protocol::v03;
use crate::protocol::v1::StreamResponse;
use crate::task::{LoggedEvent, TaskEvent, CACHE_MAX};

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

const RPC_HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
const RPC_RESULT: &str = r#","result":"#;

impl Flavor {
    /// The cache of this flavor's JSON on an event.
    fn cache<'a>(&self, e: &'a LoggedEvent) -> &'a std::sync::OnceLock<Box<str>> {
        match self {
            Flavor::V1JsonRpc { .. } | Flavor::V1Rest => &e.v1_json,
            Flavor::V03JsonRpc { .. } => &e.v03_json,
            Flavor::V03Rest => &e.v03_rest_json,
        }
    }

    /// Writes the event's JSON in this flavor's shape.
    fn write_json(&self, sr: &StreamResponse, out: &mut Vec<u8>) {
        let written = match self {
            Flavor::V1JsonRpc { .. } | Flavor::V1Rest => serde_json::to_writer(&mut *out, sr),
            Flavor::V03JsonRpc { .. } => {
                serde_json::to_writer(&mut *out, &v03::stream_event_to_v03(sr))
            }
            Flavor::V03Rest => {
                serde_json::to_writer(&mut *out, &v03::rest::stream_event_to_rest03(sr))
            }
        };
        if written.is_err() {
            // Serializing our own types into memory does not fail; an empty object at worst.
            out.extend_from_slice(b"{}");
        }
    }

    /// The JSON-RPC id of the envelope, if this flavor has one.
    fn rpc_id(&self) -> Option<&str> {
        match self {
            Flavor::V1JsonRpc { id } | Flavor::V03JsonRpc { id } => Some(id.as_str()),
            Flavor::V1Rest | Flavor::V03Rest => None,
        }
    }

    /// The SSE frame of a logged event (its sequence number as the `id`), or None when the
    /// event is not streamed (user messages). The event's JSON is serialized once and cached
    /// on the event when it is small, so each further subscriber only pays for the envelope:
    /// one allocation, the frame's own.
    pub fn encode(&self, e: &LoggedEvent) -> Option<Bytes> {
        self.encode_keep(e, true)
    }

    /// [`Flavor::encode`], keeping a new encoding on the event only when `keep` (others will
    /// read the event too): the cache lives as long as the event, in the memory store as
    /// long as the task, so a task's only stream would double each event's size for nothing.
    /// An encoding already cached is used either way.
    pub fn encode_keep(&self, e: &LoggedEvent, keep: bool) -> Option<Bytes> {
        let TaskEvent::Stream(sr) = &e.event else {
            return None;
        };
        let cache = self.cache(e);
        if let Some(json) = cache.get() {
            return Some(self.frame(e.seq, json));
        }
        let (frame, json) = self.frame_of(e.seq, sr);
        if keep && json.len() <= CACHE_MAX {
            if let Ok(text) = std::str::from_utf8(&frame[json]) {
                let _ = cache.set(text.into());
            }
        }
        Some(frame)
    }

    /// A frame for a stream response that is not in the log (a snapshot).
    pub fn frame_for(&self, seq: u64, sr: &StreamResponse) -> Bytes {
        self.frame_of(seq, sr).0
    }

    /// The frame of `sr`, serialized into the frame's buffer, and where its JSON is in it.
    fn frame_of(&self, seq: u64, sr: &StreamResponse) -> (Bytes, std::ops::Range<usize>) {
        let mut b = Vec::with_capacity(256);
        self.head(&mut b, seq);
        let start = b.len();
        self.write_json(sr, &mut b);
        let end = b.len();
        self.tail(&mut b);
        (Bytes::from(b), start..end)
    }

    /// `id: <seq>\ndata: <data>\n\n`, the data being `event_json` in this flavor's envelope
    /// (a JSON-RPC response, or the bare event for HTTP+JSON), written into one buffer of the
    /// exact size.
    fn frame(&self, seq: u64, event_json: &str) -> Bytes {
        let envelope = self
            .rpc_id()
            .map_or(0, |id| RPC_HEAD.len() + id.len() + RPC_RESULT.len() + 1);
        let mut b = Vec::with_capacity(4 + 20 + 7 + envelope + event_json.len() + 2);
        self.head(&mut b, seq);
        b.extend_from_slice(event_json.as_bytes());
        self.tail(&mut b);
        Bytes::from(b)
    }

    /// Everything before the event's JSON: the id line, `data: ` and the envelope's start.
    fn head(&self, b: &mut Vec<u8>, seq: u64) {
        let mut num = itoa::Buffer::new();
        b.extend_from_slice(b"id: ");
        b.extend_from_slice(num.format(seq).as_bytes());
        b.extend_from_slice(b"\ndata: ");
        if let Some(id) = self.rpc_id() {
            b.extend_from_slice(RPC_HEAD.as_bytes());
            b.extend_from_slice(id.as_bytes());
            b.extend_from_slice(RPC_RESULT.as_bytes());
        }
    }

    /// Everything after the event's JSON: the envelope's end and the blank line.
    fn tail(&self, b: &mut Vec<u8>) {
        if self.rpc_id().is_some() {
            b.push(b'}');
        }
        b.extend_from_slice(b"\n\n");
    }
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
                        if let Some(f) = st.flavor.encode_keep(&e, st.events.shared()) {
                            super::metrics::sse_events().increment(1);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{Message, Part, Role};

    fn event() -> LoggedEvent {
        let msg = Message {
            message_id: "m1".into(),
            role: Role::Agent,
            parts: vec![Part::text("hi")],
            ..Default::default()
        };
        LoggedEvent::new(42, TaskEvent::Stream(StreamResponse::Message(msg)))
    }

    fn data(frame: &Bytes) -> serde_json::Value {
        let s = std::str::from_utf8(frame).expect("utf-8");
        let rest = s.strip_prefix("id: 42\ndata: ").expect("id line");
        let json = rest.strip_suffix("\n\n").expect("frame end");
        serde_json::from_str(json).expect("data is JSON")
    }

    #[test]
    fn frames_carry_the_seq_and_the_envelope_of_their_flavor() {
        let e = event();
        let rpc = Flavor::V1JsonRpc { id: "\"a\"".into() }
            .encode(&e)
            .expect("streamed");
        let v = data(&rpc);
        assert_eq!(v["jsonrpc"], "2.0");
        assert_eq!(v["id"], "a");
        assert_eq!(v["result"]["message"]["messageId"], "m1");
        let rest = Flavor::V1Rest.encode(&e).expect("streamed");
        assert_eq!(data(&rest)["message"]["messageId"], "m1");
        // The second subscriber gets the same bytes from the cache.
        let again = Flavor::V1JsonRpc { id: "\"a\"".into() }
            .encode(&e)
            .expect("streamed");
        assert_eq!(rpc, again);
        let v03 = Flavor::V03JsonRpc { id: "7".into() }
            .encode(&e)
            .expect("streamed");
        let v = data(&v03);
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["kind"], "message");
    }

    #[test]
    fn a_large_event_is_framed_but_not_cached() {
        let big = "x".repeat(CACHE_MAX + 1);
        let msg = Message {
            message_id: "m2".into(),
            role: Role::Agent,
            parts: vec![Part::text(big.clone())],
            ..Default::default()
        };
        let e = LoggedEvent::new(42, TaskEvent::Stream(StreamResponse::Message(msg)));
        let f = Flavor::V1JsonRpc { id: "1".into() };
        let frame = f.encode(&e).expect("streamed");
        assert!(e.v1_json.get().is_none(), "not kept beside the event");
        assert_eq!(data(&frame)["result"]["message"]["parts"][0]["text"], big);
        // A small one is cached, and the cached frame is the same as a fresh one.
        let small = event();
        let first = f.encode(&small).expect("streamed");
        assert!(small.v1_json.get().is_some());
        assert_eq!(f.encode(&small).expect("streamed"), first);
    }

    #[test]
    fn an_event_read_by_one_stream_is_not_cached() {
        let e = event();
        let f = Flavor::V1JsonRpc { id: "1".into() };
        let alone = f.encode_keep(&e, false).expect("streamed");
        assert!(
            e.v1_json.get().is_none(),
            "no copy kept for a single reader"
        );
        let shared = f.encode_keep(&e, true).expect("streamed");
        assert!(e.v1_json.get().is_some(), "kept when others read it too");
        assert_eq!(alone, shared);
        assert_eq!(f.encode_keep(&e, false).expect("streamed"), shared);
    }

    #[test]
    fn snapshot_frames_match_logged_ones() {
        let e = event();
        let TaskEvent::Stream(sr) = &e.event else {
            unreachable!("built as a stream event")
        };
        for f in [
            Flavor::V1JsonRpc { id: "1".into() },
            Flavor::V03JsonRpc { id: "1".into() },
            Flavor::V1Rest,
            Flavor::V03Rest,
        ] {
            assert_eq!(f.frame_for(42, sr), f.encode(&e).expect("streamed"));
        }
    }
}
