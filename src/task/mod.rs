//! The task model (no I/O): task events and how they change a task, the event log entry,
//! id rules, and the mapping from [`AgentEvent`](crate::adapter::AgentEvent)s to A2A updates.
//!
//! A task is one turn of a CLI. Every change to a task is a [`TaskEvent`], appended to the
//! task's log with a sequence number and applied to the stored task in place: an update costs
//! the size of the update, never a copy of the whole task.

pub(crate) mod history;
pub(crate) mod mapping;
pub(crate) mod redact;

use std::sync::OnceLock;

use serde_json::{Map, Value};

use crate::protocol::v1::{Artifact, Message, Part, StreamResponse, Task, TaskState};

pub use mapping::{ExitReason, TurnMapper, DIRECT_MESSAGE_KEY};
pub use redact::Redactor;

/// One change to a task. Stored as JSON: `{"stream": StreamResponse}` or
/// `{"userMessage": Message}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TaskEvent {
    /// An update clients see on their streams (task snapshot, status, artifact).
    Stream(StreamResponse),
    /// A user message added to the task's history (not streamed).
    UserMessage(Message),
}

impl TaskEvent {
    /// True when a stream following the task ends after this event: the task reached a
    /// terminal state or waits for input.
    pub fn ends_stream(&self) -> bool {
        match self {
            TaskEvent::Stream(StreamResponse::StatusUpdate(u)) => {
                u.status.state.is_terminal() || u.status.state.is_interrupted()
            }
            TaskEvent::Stream(StreamResponse::Task(t)) => t.status.state.is_terminal(),
            _ => false,
        }
    }
}

/// An event in a task's log, with its sequence number (1, 2, ...) and lazily cached wire
/// encodings, so that many subscribers of one task serialize each event once.
#[derive(Debug)]
pub struct LoggedEvent {
    pub seq: u64,
    pub event: TaskEvent,
    /// Cache for the v1.0 JSON of the stream event.
    pub v1_json: OnceLock<Box<str>>,
    /// Cache for the v0.3 JSON of the stream event.
    pub v03_json: OnceLock<Box<str>>,
    /// Cache for the v0.3 REST (ProtoJSON) JSON of the stream event.
    pub v03_rest_json: OnceLock<Box<str>>,
}

/// Longest event JSON kept in an event's cache ([`LoggedEvent::v1_json`] and the others). A
/// larger event (a long line of output) is serialized straight into each frame, so it is held
/// once per frame being sent, never a second time in a cache that lives as long as the event.
pub const CACHE_MAX: usize = 64 * 1024;

impl LoggedEvent {
    pub fn new(seq: u64, event: TaskEvent) -> LoggedEvent {
        LoggedEvent {
            seq,
            event,
            v1_json: OnceLock::new(),
            v03_json: OnceLock::new(),
            v03_rest_json: OnceLock::new(),
        }
    }

    /// An event as a store keeps it: `stored` is its JSON in the stored form (serde's form of
    /// [`TaskEvent`]), which for a stream event is `{"stream":` + its v1.0 wire JSON + `}`.
    /// That wire JSON becomes the event's v1.0 encoding, so the serialization that stored
    /// the event (or the text read back) also serves every v1.0 subscriber.
    pub fn stored(seq: u64, event: TaskEvent, stored: &str) -> LoggedEvent {
        let logged = LoggedEvent::new(seq, event);
        if let TaskEvent::Stream(_) = logged.event {
            if let Some(wire) = stream_wire(stored).filter(|w| w.len() <= CACHE_MAX) {
                let _ = logged.v1_json.set(wire.into());
            }
        }
        logged
    }

    /// An event read back from a store's stored JSON ([`LoggedEvent::stored`]).
    pub fn parse_stored(seq: u64, stored: &str) -> Result<LoggedEvent, serde_json::Error> {
        Ok(LoggedEvent::stored(
            seq,
            serde_json::from_str(stored)?,
            stored,
        ))
    }
}

/// The start of a stream event's stored JSON: serde's form of [`TaskEvent::Stream`] is
/// `{"stream":` + its v1.0 wire JSON + `}`.
pub const STREAM_OPEN: &str = "{\"stream\":";

/// The v1.0 wire JSON inside a stream event's stored JSON, when it is in the form serde
/// writes (no space around the tag); any other text, even if it parses, gives none.
fn stream_wire(stored: &str) -> Option<&str> {
    stored.strip_prefix(STREAM_OPEN)?.strip_suffix('}')
}

/// Marks (in its message's metadata) a `working` status message that also goes to the
/// task's history: a decision the host's rules made on the caller's behalf.
pub const RULE_DECISION_KEY: &str = "ruleDecision";

fn kept_in_history(s: &crate::protocol::v1::TaskStatus) -> bool {
    s.message
        .as_ref()
        .and_then(|m| m.metadata.as_ref())
        .is_some_and(|md| md.get(RULE_DECISION_KEY).is_some())
}

/// Applies one event to a task in place.
pub fn apply(task: &mut Task, event: &TaskEvent) {
    match event {
        TaskEvent::UserMessage(m) => task.history.push(m.clone()),
        TaskEvent::Stream(StreamResponse::Task(t)) => *task = t.clone(),
        TaskEvent::Stream(StreamResponse::Message(m)) => task.history.push(m.clone()),
        TaskEvent::Stream(StreamResponse::StatusUpdate(u)) => {
            task.status = u.status.clone();
            if let Some(md) = &u.metadata {
                merge_metadata(&mut task.metadata, md);
            }
            let state = u.status.state;
            if state.is_terminal() || state.is_interrupted() || kept_in_history(&u.status) {
                if let Some(m) = &u.status.message {
                    task.history.push(m.clone());
                }
            }
        }
        TaskEvent::Stream(StreamResponse::ArtifactUpdate(u)) => {
            let existing = task
                .artifacts
                .iter_mut()
                .find(|a| a.artifact_id == u.artifact.artifact_id);
            match existing {
                Some(a) if u.append => append_parts(a, &u.artifact.parts),
                Some(a) => *a = u.artifact.clone(),
                None => task.artifacts.push(u.artifact.clone()),
            }
        }
    }
}

/// [`apply`] of an event the caller gives away: what it carries (a new artifact, a status
/// message) is moved into the task, not copied.
pub fn apply_owned(task: &mut Task, event: TaskEvent) {
    match event {
        TaskEvent::Stream(StreamResponse::Task(t)) => *task = t,
        TaskEvent::Stream(StreamResponse::ArtifactUpdate(u)) if !u.append => {
            let artifact = u.artifact;
            match task
                .artifacts
                .iter_mut()
                .find(|a| a.artifact_id == artifact.artifact_id)
            {
                Some(a) => *a = artifact,
                None => task.artifacts.push(artifact),
            }
        }
        TaskEvent::Stream(StreamResponse::ArtifactUpdate(u))
            if !task
                .artifacts
                .iter()
                .any(|a| a.artifact_id == u.artifact.artifact_id) =>
        {
            task.artifacts.push(u.artifact)
        }
        other => apply(task, &other),
    }
}

/// Appended text at least this long grows an artifact's text exactly (see [`append_parts`]).
const EXACT_GROWTH: usize = 1 << 20;

/// Appends parts to an artifact, merging consecutive plain text so that a streamed answer is
/// one growing text part rather than thousands of small ones.
fn append_parts(artifact: &mut Artifact, parts: &[Part]) {
    for p in parts {
        let plain_text = p.metadata.is_none() && p.media_type.is_none() && p.filename.is_none();
        if let (Some(text), true) = (&p.text, plain_text) {
            if let Some(last) = artifact.parts.last_mut() {
                if let (Some(acc), None, None) = (&mut last.text, &last.metadata, &last.filename) {
                    if text.len() >= EXACT_GROWTH {
                        // A long chunk grows the text by its size, not to twice the text's.
                        acc.reserve_exact(text.len());
                    }
                    acc.push_str(text);
                    continue;
                }
            }
        }
        artifact.parts.push(p.clone());
    }
}

fn merge_metadata(target: &mut Option<Map<String, Value>>, add: &Map<String, Value>) {
    let t = target.get_or_insert_with(Map::new);
    for (k, v) in add {
        t.insert(k.clone(), v.clone());
    }
}

/// The task as a client asked for it: the last `history_length` messages (0 = none, unset =
/// all) and, when `include_artifacts` is false, no artifacts. Takes the task, so that its
/// artifacts (possibly megabytes of output) are never copied.
pub fn view(mut task: Task, history_length: Option<i32>, include_artifacts: bool) -> Task {
    match history_length {
        Some(n) if n <= 0 => task.history.clear(),
        Some(n) => {
            let skip = task.history.len().saturating_sub(n as usize);
            task.history.drain(..skip);
        }
        None => {}
    }
    if !include_artifacts {
        task.artifacts.clear();
    }
    task
}

/// The current time as A2A writes it: ISO 8601 UTC with milliseconds and `Z`.
pub fn now_timestamp() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// Longest task or context id accepted from a client.
pub const MAX_ID_LEN: usize = 128;

/// A client-supplied id that is refused; `what` names the field (`message.taskId`, `id`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidId {
    #[error("{what} must not be empty")]
    Empty { what: String },
    #[error("{what} is longer than {MAX_ID_LEN} characters")]
    TooLong { what: String },
    #[error("{what} contains '{}'; allowed are letters, digits and _ . : -", .found.escape_default())]
    BadChar { what: String, found: char },
}

impl From<InvalidId> for crate::protocol::A2AError {
    fn from(e: InvalidId) -> Self {
        crate::protocol::A2AError::InvalidParams(e.to_string())
    }
}

/// Checks a client-supplied task or context id: 1–128 characters of letters, digits and
/// `_ . : -`.
pub fn check_id(what: &str, id: &str) -> Result<(), InvalidId> {
    let what = || what.to_string();
    if id.is_empty() {
        return Err(InvalidId::Empty { what: what() });
    }
    if id.len() > MAX_ID_LEN {
        return Err(InvalidId::TooLong { what: what() });
    }
    if let Some(found) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(InvalidId::BadChar {
            what: what(),
            found,
        });
    }
    Ok(())
}

/// True if the state is one a task can be canceled from.
pub fn cancelable(state: TaskState) -> bool {
    !state.is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent};

    fn artifact_update(text: &str, append: bool) -> TaskEvent {
        TaskEvent::Stream(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            artifact: Artifact {
                artifact_id: "a".into(),
                parts: vec![Part::text(text)],
                ..Artifact::default()
            },
            append,
            last_chunk: false,
            metadata: None,
        }))
    }

    #[test]
    fn a_stored_stream_event_brings_its_wire_json_and_nothing_else_does() {
        let ev = artifact_update("a \"quoted\" line\n", false);
        let stored = serde_json::to_string(&ev).unwrap();
        let TaskEvent::Stream(sr) = &ev else {
            unreachable!()
        };
        let wire = serde_json::to_string(sr).unwrap();
        let read = LoggedEvent::parse_stored(7, &stored).unwrap();
        assert_eq!((read.seq, &read.event), (7, &ev));
        assert_eq!(read.v1_json.get().map(|j| &**j), Some(wire.as_str()));
        assert!(read.v03_json.get().is_none());
        // A user message has no wire form; text in another layout is parsed, not cached.
        let msg = TaskEvent::UserMessage(Message::default());
        let read = LoggedEvent::parse_stored(1, &serde_json::to_string(&msg).unwrap()).unwrap();
        assert!(read.v1_json.get().is_none());
        let spaced = stored.replacen('{', "{ ", 1);
        let read = LoggedEvent::parse_stored(1, &spaced).unwrap();
        assert_eq!(read.event, ev);
        assert!(read.v1_json.get().is_none());
        // Nor is an event over the cache's bound.
        let big = artifact_update(&"x".repeat(CACHE_MAX), false);
        let stored = serde_json::to_string(&big).unwrap();
        assert!(LoggedEvent::stored(1, big, &stored).v1_json.get().is_none());
        assert!(LoggedEvent::parse_stored(1, "{\"stream\":{}").is_err());
    }

    #[test]
    fn appended_text_merges_into_one_part() {
        let mut t = Task::default();
        apply(&mut t, &artifact_update("Hello", false));
        apply(&mut t, &artifact_update(", ", true));
        apply(&mut t, &artifact_update("world", true));
        assert_eq!(t.artifacts.len(), 1);
        assert_eq!(t.artifacts[0].parts.len(), 1);
        assert_eq!(
            t.artifacts[0].parts[0].text.as_deref(),
            Some("Hello, world")
        );
        // Not appending replaces.
        apply(&mut t, &artifact_update("new", false));
        assert_eq!(t.artifacts[0].parts[0].text.as_deref(), Some("new"));
    }

    #[test]
    fn apply_owned_matches_apply() {
        let events = [
            artifact_update("Hello", true),
            artifact_update(", world", true),
            artifact_update("new", false),
            artifact_update(" and more", true),
        ];
        let (mut by_ref, mut owned) = (Task::default(), Task::default());
        for e in events {
            apply(&mut by_ref, &e);
            apply_owned(&mut owned, e);
            assert_eq!(by_ref, owned);
        }
        assert_eq!(
            owned.artifacts[0].parts[0].text.as_deref(),
            Some("new and more")
        );
    }

    #[test]
    fn terminal_status_message_goes_to_history_and_metadata_merges() {
        let mut t = Task::default();
        let mut md = Map::new();
        md.insert("sessionId".into(), Value::String("s".into()));
        let msg = Message::agent(vec![Part::text("done")], "t", "c");
        apply(
            &mut t,
            &TaskEvent::Stream(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: TaskStatus {
                    state: TaskState::Completed,
                    message: Some(msg),
                    timestamp: None,
                },
                metadata: Some(md),
            })),
        );
        assert_eq!(t.status.state, TaskState::Completed);
        assert_eq!(t.history.len(), 1);
        assert_eq!(t.metadata.unwrap()["sessionId"], "s");
    }

    #[test]
    fn history_length_zero_means_none_and_unset_means_all() {
        let mut t = Task::default();
        for i in 0..3 {
            t.history.push(Message {
                message_id: i.to_string(),
                ..Message::default()
            });
        }
        assert_eq!(view(t.clone(), Some(0), true).history.len(), 0);
        assert_eq!(view(t.clone(), None, true).history.len(), 3);
        let last2 = view(t, Some(2), true).history;
        assert_eq!(last2[0].message_id, "1");
        assert_eq!(last2[1].message_id, "2");
    }

    #[test]
    fn ids_are_validated() {
        assert!(check_id("contextId", "ctx-1.a:b_c").is_ok());
        assert!(check_id("contextId", "").is_err());
        assert!(check_id("contextId", &"x".repeat(129)).is_err());
        assert!(check_id("contextId", "a/b")
            .unwrap_err()
            .to_string()
            .contains("'/'"));
        assert_eq!(
            check_id("id", "a\nb"),
            Err(InvalidId::BadChar {
                what: "id".into(),
                found: '\n'
            })
        );
        assert_eq!(
            check_id("id", "a\nb").unwrap_err().to_string(),
            "id contains '\\n'; allowed are letters, digits and _ . : -"
        );
    }

    #[test]
    fn timestamps_have_millis_and_z() {
        let ts = now_timestamp();
        assert!(ts.ends_with('Z'));
        assert_eq!(ts.len(), "2026-01-01T00:00:00.000Z".len());
    }
}
