//! Streams of task events that survive a dropped connection: when the connection breaks (an
//! error, no data within the idle timeout, or the end of the body before the task ended or
//! stopped for input), the stream resubscribes to the task with `Last-Event-ID` = the id of
//! the last event it delivered, so the server replays what was missed; at most
//! `max_resubscribes` attempts in a row, with a growing pause.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt};

use super::error::ClientError;
use super::sse::{SseEvent, SseParser};
use super::transport::StreamOp;
use super::Client;
use crate::protocol::v1::{StreamResponse, TaskState};

/// One event of a task stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The SSE `id` (agent-host: the task's event sequence number), when the server sends one.
    pub id: Option<String>,
    pub response: StreamResponse,
}

impl Event {
    /// The task this event belongs to.
    pub fn task_id(&self) -> Option<&str> {
        match &self.response {
            StreamResponse::Task(t) => Some(&t.id),
            StreamResponse::Message(m) => m.task_id.as_deref(),
            StreamResponse::StatusUpdate(s) => Some(&s.task_id),
            StreamResponse::ArtifactUpdate(a) => Some(&a.task_id),
        }
    }

    /// The task state this event reports, if any.
    pub fn state(&self) -> Option<TaskState> {
        match &self.response {
            StreamResponse::Task(t) => Some(t.status.state),
            StreamResponse::StatusUpdate(s) => Some(s.status.state),
            _ => None,
        }
    }

    /// True when nothing follows on this stream: a direct message, a terminal state, or a
    /// status update that waits for input.
    pub fn ends_stream(&self) -> bool {
        match &self.response {
            StreamResponse::Message(_) => true,
            StreamResponse::Task(t) => t.status.state.is_terminal(),
            StreamResponse::StatusUpdate(s) => {
                s.status.state.is_terminal() || s.status.state.is_interrupted()
            }
            StreamResponse::ArtifactUpdate(_) => false,
        }
    }
}

type Body = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// The events of one task, as an async [`Stream`]. Ends after the event that
/// [ends the stream](Event::ends_stream); yields at most one error, then ends.
pub struct EventStream {
    inner: Pin<Box<dyn Stream<Item = Result<Event, ClientError>> + Send>>,
}

impl EventStream {
    /// The same events, each shown to `f` first.
    pub fn inspected(
        self,
        f: impl FnMut(&Result<Event, ClientError>) + Send + 'static,
    ) -> EventStream {
        EventStream {
            inner: Box::pin(futures::StreamExt::inspect(self, f)),
        }
    }
}

impl Stream for EventStream {
    type Item = Result<Event, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

struct State {
    client: Client,
    body: Option<Body>,
    parser: SseParser,
    pending: VecDeque<SseEvent>,
    task_id: Option<String>,
    last_id: Option<String>,
    /// Numeric ids seen so far, to drop replays a server might repeat.
    last_seq: Option<u64>,
    failures: u32,
    finished: bool,
    /// The last event delivered was the task waiting for input (a subscription to such a
    /// task gets it, and then the server ends the stream).
    waiting: bool,
}

enum Step {
    Yield(Box<Result<Event, ClientError>>),
    Continue,
}

impl EventStream {
    pub(super) fn new(
        client: Client,
        resp: reqwest::Response,
        task_id: Option<String>,
        last_id: Option<String>,
    ) -> EventStream {
        let last_seq = last_id.as_deref().and_then(|s| s.parse().ok());
        let st = State {
            client,
            body: Some(Box::pin(resp.bytes_stream())),
            parser: SseParser::new(),
            pending: VecDeque::new(),
            task_id,
            last_id,
            last_seq,
            failures: 0,
            finished: false,
            waiting: false,
        };
        let s = futures::stream::unfold(st, |mut st| async move {
            loop {
                if st.finished {
                    return None;
                }
                match st.step().await {
                    Step::Yield(item) => return Some((*item, st)),
                    Step::Continue => continue,
                }
            }
        });
        EventStream { inner: Box::pin(s) }
    }
}

impl State {
    async fn step(&mut self) -> Step {
        if let Some(ev) = self.pending.pop_front() {
            return self.deliver(ev);
        }
        let idle = self.client.inner.opts.idle_timeout;
        let broke = match self.body.as_mut() {
            Some(body) => match tokio::time::timeout(idle, body.next()).await {
                Ok(Some(Ok(chunk))) => {
                    let evs = self.parser.push(&chunk);
                    self.pending.extend(evs);
                    return Step::Continue;
                }
                Ok(Some(Err(e))) => ClientError::Transport {
                    url: self.client.endpoint().url.clone(),
                    source: e,
                },
                // The server ends a subscription to a task that waits for input after the
                // task: the stream ends there too, as after a status that stops for input.
                Ok(None) if self.waiting && self.pending.is_empty() => {
                    self.finished = true;
                    return Step::Continue;
                }
                Ok(None) => ClientError::InvalidResponse {
                    url: self.client.endpoint().url.clone(),
                    detail: "the stream closed before the task ended".into(),
                },
                Err(_) => ClientError::Timeout {
                    url: self.client.endpoint().url.clone(),
                    seconds: idle.as_secs_f64(),
                },
            },
            None => ClientError::InvalidResponse {
                url: self.client.endpoint().url.clone(),
                detail: "no stream".into(),
            },
        };
        self.body = None;
        self.resubscribe(broke).await
    }

    fn deliver(&mut self, ev: SseEvent) -> Step {
        let id = ev.id.clone();
        if let Some(seq) = id.as_deref().and_then(|s| s.parse::<u64>().ok()) {
            if self.last_seq.is_some_and(|last| seq <= last) {
                return Step::Continue; // already delivered before a resubscribe
            }
            self.last_seq = Some(seq);
        }
        match self.client.decode_event(&ev) {
            Err(e) => {
                self.finished = true;
                yld(Err(e))
            }
            Ok(response) => {
                let event = Event { id, response };
                if self.task_id.is_none() {
                    self.task_id = event.task_id().map(str::to_string);
                }
                if event.id.is_some() {
                    self.last_id = event.id.clone();
                }
                self.failures = 0;
                self.waiting = matches!(&event.response,
                    StreamResponse::Task(t) if t.status.state.is_interrupted());
                if event.ends_stream() {
                    self.finished = true;
                }
                yld(Ok(event))
            }
        }
    }

    async fn resubscribe(&mut self, broke: ClientError) -> Step {
        let Some(task_id) = self.task_id.clone() else {
            self.finished = true;
            return yld(Err(broke));
        };
        let opts = &self.client.inner.opts;
        let (max, delay) = (opts.max_resubscribes, opts.resubscribe_delay);
        let mut last = broke;
        while self.failures < max {
            self.failures += 1;
            tokio::time::sleep(delay * self.failures).await;
            tracing::debug!(task = %task_id, attempt = self.failures, last_event_id = ?self.last_id, "resubscribing");
            let op = StreamOp::Subscribe(task_id.clone());
            match self.client.open_stream(&op, self.last_id.as_deref()).await {
                Ok(resp) => {
                    self.body = Some(Box::pin(resp.bytes_stream()));
                    self.parser = SseParser::new();
                    return Step::Continue;
                }
                Err(ClientError::Remote(r))
                    if r.reason.as_deref() == Some("UNSUPPORTED_OPERATION") =>
                {
                    // The task ended meanwhile (and the server keeps no replay): its final state.
                    self.finished = true;
                    return match self.client.get_task(&task_id).await {
                        Ok(t) => yld(Ok(Event {
                            id: None,
                            response: StreamResponse::Task(t),
                        })),
                        Err(e) => yld(Err(e)),
                    };
                }
                Err(e) if e.is_transient() => last = e,
                Err(e) => {
                    self.finished = true;
                    return yld(Err(e));
                }
            }
        }
        self.finished = true;
        if max == 0 {
            return yld(Err(last));
        }
        yld(Err(ClientError::StreamLost {
            task_id,
            attempts: self.failures,
            last: Box::new(last),
        }))
    }
}

/// Collects a stream; stops at the first error.
pub async fn collect(mut s: EventStream) -> Result<Vec<Event>, ClientError> {
    let mut out = Vec::new();
    while let Some(ev) = s.next().await {
        out.push(ev?);
    }
    Ok(out)
}

fn yld(r: Result<Event, ClientError>) -> Step {
    Step::Yield(Box::new(r))
}
