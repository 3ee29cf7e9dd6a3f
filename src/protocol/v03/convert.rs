//! Conversions between the v0.3 JSON-RPC objects and the v1.0 internal model.
//!
//! v0.3 → v1 (requests): `From`/`TryFrom` impls on the v1 types. Fallible ones return
//! [`A2AError::InvalidParams`]. Rules:
//! - `configuration.blocking` present ⇒ `returnImmediately = !blocking`; absent ⇒ blocking
//!   (`returnImmediately: false`).
//! - `historyLength: 0` means "unset" in v0.3 ⇒ `None` (in v1.0, 0 would mean "no history").
//! - inline `pushNotificationConfig` ⇒ `taskPushNotificationConfig`, with
//!   `authentication.scheme = schemes[0]`.
//! - a data part flagged `metadata.data_part_compat: true` holding `{"value": x}` is
//!   unwrapped to `x` (the reverse of the wrapping below).
//!
//! v1 → v0.3 (responses, stream events): the `*_to_v03` functions and `From<&v1::…>` impls.
//! They cannot fail. Rules:
//! - v1 `data` that is not a JSON object becomes `{"value": x}` with part metadata
//!   `data_part_compat: true` (what the Python SDK does).
//! - v1 `mediaType`/`filename` on text and data parts have no v0.3 slot and are dropped; on
//!   file parts they become `mimeType`/`name`.
//! - a status update gets `final: true` when its state is terminal or interrupted.
//! - artifact updates always carry `append` and `lastChunk` (as the Python SDK emits them).
//! - send results and stream events are bare objects with `kind` (no v1.0 wrapper).

use super::types::*;
use super::{Role03, TaskState03};
use crate::protocol::v1::{self, Metadata};
use crate::protocol::A2AError;
use serde::Serialize;
use serde_json::{Map, Value};

/// Part metadata key marking a v1 non-object `data` wrapped as `{"value": x}`.
pub const DATA_PART_COMPAT_KEY: &str = "data_part_compat";

// ---------------------------------------------------------------------------------------
// v0.3 → v1
// ---------------------------------------------------------------------------------------

/// v0.3 `historyLength` ⇒ v1: 0 means "unset"; negative is an error.
fn history_length_to_v1(h: Option<i32>) -> Result<Option<i32>, A2AError> {
    match h {
        Some(n) if n < 0 => Err(A2AError::InvalidParams(format!(
            "historyLength must not be negative (got {n})"
        ))),
        Some(0) | None => Ok(None),
        Some(n) => Ok(Some(n)),
    }
}

/// True when part metadata carries `data_part_compat: true`.
fn has_compat_flag(metadata: &Option<Metadata>) -> bool {
    metadata.as_ref().and_then(|m| m.get(DATA_PART_COMPAT_KEY)) == Some(&Value::Bool(true))
}

/// Removes the compat flag; metadata left empty becomes None.
fn strip_compat_flag(metadata: Option<Metadata>) -> Option<Metadata> {
    metadata.and_then(|mut md| {
        md.remove(DATA_PART_COMPAT_KEY);
        (!md.is_empty()).then_some(md)
    })
}

impl From<Part03> for v1::Part {
    fn from(p: Part03) -> Self {
        match p {
            Part03::Text(t) => v1::Part {
                text: Some(t.text),
                metadata: t.metadata,
                ..v1::Part::default()
            },
            Part03::File(f) => {
                let (raw, url, media_type, filename) = match f.file {
                    FileContent03::Bytes {
                        bytes,
                        mime_type,
                        name,
                    } => (Some(bytes), None, mime_type, name),
                    FileContent03::Uri {
                        uri,
                        mime_type,
                        name,
                    } => (None, Some(uri), mime_type, name),
                };
                v1::Part {
                    raw,
                    url,
                    media_type,
                    filename,
                    metadata: f.metadata,
                    ..v1::Part::default()
                }
            }
            Part03::Data(mut d) => {
                // Unwrap only the exact shape we produce: flagged and {"value": x}.
                let unwrapped = if has_compat_flag(&d.metadata) && d.data.len() == 1 {
                    d.data.remove("value")
                } else {
                    None
                };
                let (data, metadata) = match unwrapped {
                    Some(x) => (x, strip_compat_flag(d.metadata)),
                    None => (Value::Object(d.data), d.metadata),
                };
                v1::Part {
                    data: Some(data),
                    metadata,
                    ..v1::Part::default()
                }
            }
        }
    }
}

impl From<Message03> for v1::Message {
    fn from(m: Message03) -> Self {
        v1::Message {
            message_id: m.message_id,
            context_id: m.context_id,
            task_id: m.task_id,
            role: m.role.into(),
            parts: m.parts.into_iter().map(Into::into).collect(),
            metadata: m.metadata,
            extensions: m.extensions,
            reference_task_ids: m.reference_task_ids,
        }
    }
}

/// An inline v0.3 push config; the v1 `taskId` is left unset (the task is not known yet).
impl TryFrom<PushNotificationConfig03> for v1::TaskPushNotificationConfig {
    type Error = A2AError;

    fn try_from(c: PushNotificationConfig03) -> Result<Self, A2AError> {
        let authentication = match c.authentication {
            None => None,
            Some(a) => match (a.schemes.into_iter().next(), a.credentials) {
                (Some(scheme), credentials) => Some(v1::AuthenticationInfo {
                    scheme,
                    credentials,
                }),
                (None, None) => None,
                (None, Some(_)) => {
                    return Err(A2AError::InvalidParams(
                        "pushNotificationConfig.authentication has credentials but no schemes"
                            .into(),
                    ));
                }
            },
        };
        Ok(v1::TaskPushNotificationConfig {
            tenant: None,
            id: c.id,
            task_id: None,
            url: c.url,
            token: c.token,
            authentication,
        })
    }
}

impl TryFrom<TaskPushNotificationConfig03> for v1::TaskPushNotificationConfig {
    type Error = A2AError;

    fn try_from(c: TaskPushNotificationConfig03) -> Result<Self, A2AError> {
        let mut out = v1::TaskPushNotificationConfig::try_from(c.push_notification_config)?;
        out.task_id = Some(c.task_id);
        Ok(out)
    }
}

impl TryFrom<MessageSendConfiguration03> for v1::SendMessageConfiguration {
    type Error = A2AError;

    fn try_from(c: MessageSendConfiguration03) -> Result<Self, A2AError> {
        Ok(v1::SendMessageConfiguration {
            accepted_output_modes: c.accepted_output_modes,
            task_push_notification_config: c
                .push_notification_config
                .map(v1::TaskPushNotificationConfig::try_from)
                .transpose()?,
            history_length: history_length_to_v1(c.history_length)?,
            return_immediately: c.blocking.is_some_and(|b| !b),
        })
    }
}

impl TryFrom<MessageSendParams03> for v1::SendMessageRequest {
    type Error = A2AError;

    fn try_from(p: MessageSendParams03) -> Result<Self, A2AError> {
        Ok(v1::SendMessageRequest {
            tenant: None,
            message: p.message.into(),
            configuration: p
                .configuration
                .map(v1::SendMessageConfiguration::try_from)
                .transpose()?,
            metadata: p.metadata,
        })
    }
}

impl TryFrom<TaskQueryParams03> for v1::GetTaskRequest {
    type Error = A2AError;

    fn try_from(q: TaskQueryParams03) -> Result<Self, A2AError> {
        Ok(v1::GetTaskRequest {
            tenant: None,
            id: q.id,
            history_length: history_length_to_v1(q.history_length)?,
        })
    }
}

impl From<TaskIdParams03> for v1::CancelTaskRequest {
    fn from(p: TaskIdParams03) -> Self {
        v1::CancelTaskRequest {
            tenant: None,
            id: p.id,
            metadata: p.metadata,
        }
    }
}

impl From<TaskIdParams03> for v1::SubscribeToTaskRequest {
    fn from(p: TaskIdParams03) -> Self {
        v1::SubscribeToTaskRequest {
            tenant: None,
            id: p.id,
        }
    }
}

// ---------------------------------------------------------------------------------------
// v1 → v0.3
// ---------------------------------------------------------------------------------------

/// v1 part ⇒ v0.3 part. Content precedence if several are set (invalid in v1): text, raw,
/// url, data. A part with no content becomes an empty text part (keeps part positions).
pub fn part_to_v03(p: &v1::Part) -> Part03 {
    let metadata = p.metadata.clone();
    if let Some(text) = &p.text {
        return Part03::Text(TextPart03 {
            text: text.clone(),
            metadata,
        });
    }
    if let Some(bytes) = &p.raw {
        return Part03::File(FilePart03 {
            file: FileContent03::Bytes {
                bytes: bytes.clone(),
                mime_type: p.media_type.clone(),
                name: p.filename.clone(),
            },
            metadata,
        });
    }
    if let Some(uri) = &p.url {
        return Part03::File(FilePart03 {
            file: FileContent03::Uri {
                uri: uri.clone(),
                mime_type: p.media_type.clone(),
                name: p.filename.clone(),
            },
            metadata,
        });
    }
    match &p.data {
        Some(Value::Object(obj)) => Part03::Data(DataPart03 {
            data: obj.clone(),
            metadata,
        }),
        Some(other) => {
            let mut data = Map::new();
            data.insert("value".into(), other.clone());
            let mut md = metadata.unwrap_or_default();
            md.insert(DATA_PART_COMPAT_KEY.into(), Value::Bool(true));
            Part03::Data(DataPart03 {
                data,
                metadata: Some(md),
            })
        }
        None => Part03::Text(TextPart03 {
            text: String::new(),
            metadata,
        }),
    }
}

/// v1 message ⇒ v0.3 message (`kind: "message"`).
pub fn message_to_v03(m: &v1::Message) -> Message03 {
    Message03 {
        message_id: m.message_id.clone(),
        role: Role03::from(m.role),
        parts: m.parts.iter().map(part_to_v03).collect(),
        context_id: m.context_id.clone(),
        task_id: m.task_id.clone(),
        reference_task_ids: m.reference_task_ids.clone(),
        extensions: m.extensions.clone(),
        metadata: m.metadata.clone(),
        kind: MessageKind,
    }
}

/// v1 status ⇒ v0.3 status.
pub fn status_to_v03(s: &v1::TaskStatus) -> TaskStatus03 {
    TaskStatus03 {
        state: TaskState03::from(s.state),
        message: s.message.as_ref().map(message_to_v03),
        timestamp: s.timestamp.clone(),
    }
}

/// v1 artifact ⇒ v0.3 artifact.
pub fn artifact_to_v03(a: &v1::Artifact) -> Artifact03 {
    Artifact03 {
        artifact_id: a.artifact_id.clone(),
        name: a.name.clone(),
        description: a.description.clone(),
        parts: a.parts.iter().map(part_to_v03).collect(),
        metadata: a.metadata.clone(),
        extensions: a.extensions.clone(),
    }
}

/// v1 task ⇒ v0.3 task (`kind: "task"`).
pub fn task_to_v03(t: &v1::Task) -> Task03 {
    Task03 {
        id: t.id.clone(),
        context_id: t.context_id.clone(),
        status: status_to_v03(&t.status),
        artifacts: t.artifacts.iter().map(artifact_to_v03).collect(),
        history: t.history.iter().map(message_to_v03).collect(),
        metadata: t.metadata.clone(),
        kind: TaskKind,
    }
}

impl TaskStatusUpdateEvent03 {
    /// Converts a v1 status update with an explicit `final` flag.
    pub fn from_v1(ev: &v1::TaskStatusUpdateEvent, is_final: bool) -> Self {
        TaskStatusUpdateEvent03 {
            task_id: ev.task_id.clone(),
            context_id: ev.context_id.clone(),
            status: status_to_v03(&ev.status),
            is_final,
            metadata: ev.metadata.clone(),
            kind: StatusUpdateKind,
        }
    }
}

/// v1 status update ⇒ v0.3, with `final: true` when the state is terminal
/// (completed/failed/canceled/rejected) or interrupted (input-required/auth-required).
pub fn status_update_to_v03(ev: &v1::TaskStatusUpdateEvent) -> TaskStatusUpdateEvent03 {
    let st = ev.status.state;
    TaskStatusUpdateEvent03::from_v1(ev, st.is_terminal() || st.is_interrupted())
}

/// v1 artifact update ⇒ v0.3 (`append` and `lastChunk` always present).
pub fn artifact_update_to_v03(ev: &v1::TaskArtifactUpdateEvent) -> TaskArtifactUpdateEvent03 {
    TaskArtifactUpdateEvent03 {
        task_id: ev.task_id.clone(),
        context_id: ev.context_id.clone(),
        artifact: artifact_to_v03(&ev.artifact),
        append: Some(ev.append),
        last_chunk: Some(ev.last_chunk),
        metadata: ev.metadata.clone(),
        kind: ArtifactUpdateKind,
    }
}

impl From<&v1::StreamResponse> for StreamEvent03 {
    fn from(ev: &v1::StreamResponse) -> Self {
        match ev {
            v1::StreamResponse::Task(t) => StreamEvent03::Task(task_to_v03(t)),
            v1::StreamResponse::Message(m) => StreamEvent03::Message(message_to_v03(m)),
            v1::StreamResponse::StatusUpdate(s) => {
                StreamEvent03::StatusUpdate(status_update_to_v03(s))
            }
            v1::StreamResponse::ArtifactUpdate(a) => {
                StreamEvent03::ArtifactUpdate(artifact_update_to_v03(a))
            }
        }
    }
}

impl From<&v1::SendMessageResponse> for SendResult03 {
    fn from(r: &v1::SendMessageResponse) -> Self {
        match r {
            v1::SendMessageResponse::Task(t) => SendResult03::Task(task_to_v03(t)),
            v1::SendMessageResponse::Message(m) => SendResult03::Message(message_to_v03(m)),
        }
    }
}

/// Serializes a value that cannot fail to serialize (string keys only, no custom
/// serializers that error); Null is the unreachable fallback.
fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A v1 stream event as the v0.3 JSON-RPC `result` of one SSE event (bare, with `kind`).
pub fn stream_event_to_v03(ev: &v1::StreamResponse) -> Value {
    to_json(&StreamEvent03::from(ev))
}

/// A v1 `SendMessageResponse` as the v0.3 `message/send` result: a bare task or message.
pub fn send_response_to_v03(r: &v1::SendMessageResponse) -> Value {
    to_json(&SendResult03::from(r))
}

/// v1 push config ⇒ v0.3 inline config (`schemes = [scheme]`; tenant and taskId dropped).
impl From<&v1::TaskPushNotificationConfig> for PushNotificationConfig03 {
    fn from(c: &v1::TaskPushNotificationConfig) -> Self {
        PushNotificationConfig03 {
            id: c.id.clone(),
            url: c.url.clone(),
            token: c.token.clone(),
            authentication: c.authentication.as_ref().map(|a| {
                PushNotificationAuthenticationInfo03 {
                    schemes: vec![a.scheme.clone()],
                    credentials: a.credentials.clone(),
                }
            }),
        }
    }
}

/// v1 push config ⇒ v0.3 `TaskPushNotificationConfig` {taskId, pushNotificationConfig}.
pub fn push_config_to_v03(c: &v1::TaskPushNotificationConfig) -> TaskPushNotificationConfig03 {
    TaskPushNotificationConfig03 {
        task_id: c.task_id.clone().unwrap_or_default(),
        push_notification_config: PushNotificationConfig03::from(c),
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode_params;
    use super::*;
    use serde_json::json;

    fn send_request(params: Value) -> Result<v1::SendMessageRequest, A2AError> {
        v1::SendMessageRequest::try_from(decode_params::<MessageSendParams03>(params)?)
    }

    #[test]
    fn messages_round_trip_v03_v1_v03_for_every_part_kind() {
        let wire = json!({
            "kind": "message",
            "messageId": "m1",
            "role": "user",
            "contextId": "c1",
            "taskId": "t1",
            "referenceTaskIds": ["t0"],
            "extensions": ["urn:x"],
            "metadata": {"k": "v"},
            "parts": [
                {"kind": "text", "text": "hello", "metadata": {"p": 1}},
                {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}},
                {"kind": "file", "file": {"uri": "https://example.com/f.pdf", "mimeType": "application/pdf"}},
                {"kind": "data", "data": {"n": 42, "nested": {"x": [1, 2]}}},
            ]
        });
        let m03: Message03 = serde_json::from_value(wire.clone()).unwrap();
        let m1 = v1::Message::from(m03);
        assert_eq!(
            serde_json::to_value(&m1).unwrap(),
            json!({
                "messageId": "m1",
                "contextId": "c1",
                "taskId": "t1",
                "role": "ROLE_USER",
                "referenceTaskIds": ["t0"],
                "extensions": ["urn:x"],
                "metadata": {"k": "v"},
                "parts": [
                    {"text": "hello", "metadata": {"p": 1}},
                    {"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"},
                    {"url": "https://example.com/f.pdf", "mediaType": "application/pdf"},
                    {"data": {"n": 42, "nested": {"x": [1, 2]}}},
                ]
            })
        );
        assert_eq!(serde_json::to_value(message_to_v03(&m1)).unwrap(), wire);

        let agent: Message03 =
            serde_json::from_value(json!({"messageId":"m2","role":"agent","parts":[]})).unwrap();
        assert_eq!(v1::Message::from(agent).role, v1::Role::Agent);
    }

    #[test]
    fn text_part_media_type_and_filename_are_dropped() {
        let p = v1::Part {
            text: Some("x".into()),
            media_type: Some("text/markdown".into()),
            filename: Some("x.md".into()),
            ..v1::Part::default()
        };
        assert_eq!(
            serde_json::to_value(part_to_v03(&p)).unwrap(),
            json!({"kind":"text","text":"x"})
        );
    }

    #[test]
    fn non_object_data_is_wrapped_and_unwrapped() {
        for x in [
            json!([1, 2]),
            json!("s"),
            json!(3),
            json!(null),
            json!(true),
        ] {
            let p = v1::Part::data(x.clone());
            let p03 = part_to_v03(&p);
            assert_eq!(
                serde_json::to_value(&p03).unwrap(),
                json!({"kind":"data","data":{"value": x},"metadata":{"data_part_compat":true}})
            );
            // Through the wire and back.
            let back: Part03 = serde_json::from_value(serde_json::to_value(&p03).unwrap()).unwrap();
            assert_eq!(v1::Part::from(back), p);
        }
        // Other metadata survives both ways.
        let mut md = Metadata::new();
        md.insert("keep".into(), json!(1));
        let p = v1::Part {
            data: Some(json!([1])),
            metadata: Some(md),
            ..v1::Part::default()
        };
        let p03 = part_to_v03(&p);
        assert_eq!(
            serde_json::to_value(&p03).unwrap()["metadata"],
            json!({"keep":1,"data_part_compat":true})
        );
        assert_eq!(v1::Part::from(p03), p);
        // An object is not wrapped, and an unflagged {"value": x} is not unwrapped.
        let obj = v1::Part::data(json!({"value": 1}));
        let p03 = part_to_v03(&obj);
        assert_eq!(
            serde_json::to_value(&p03).unwrap(),
            json!({"kind":"data","data":{"value":1}})
        );
        assert_eq!(v1::Part::from(p03), obj);
        // A flag on some other shape is left alone.
        let odd: Part03 = serde_json::from_value(
            json!({"kind":"data","data":{"a":1},"metadata":{"data_part_compat":true}}),
        )
        .unwrap();
        let p = v1::Part::from(odd);
        assert_eq!(p.data, Some(json!({"a":1})));
        assert_eq!(
            p.metadata,
            json!({"data_part_compat":true}).as_object().cloned()
        );
    }

    #[test]
    fn blocking_maps_to_inverse_return_immediately() {
        let msg = json!({"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]});
        let cfg = |blocking: Value| {
            let mut c = json!({});
            if !blocking.is_null() {
                c["blocking"] = blocking;
            }
            send_request(json!({"message": msg, "configuration": c}))
                .unwrap()
                .configuration
                .unwrap()
        };
        assert!(!cfg(json!(true)).return_immediately);
        assert!(cfg(json!(false)).return_immediately);
        assert!(!cfg(Value::Null).return_immediately);
        let req = send_request(json!({"message": msg})).unwrap();
        assert!(req.configuration.is_none());
        // v1 default (returnImmediately false) means blocking, same as v0.3 absent.
        assert!(!req.configuration.unwrap_or_default().return_immediately);
    }

    #[test]
    fn history_length_zero_means_unset_in_v03() {
        let msg = json!({"messageId":"m","role":"user","parts":[{"text":"hi"}]});
        let hl = |h: Value| {
            send_request(json!({"message": msg, "configuration": {"historyLength": h}}))
                .map(|r| r.configuration.and_then(|c| c.history_length))
        };
        assert_eq!(hl(json!(0)).unwrap(), None);
        assert_eq!(hl(json!(5)).unwrap(), Some(5));
        assert!(
            matches!(hl(json!(-1)), Err(A2AError::InvalidParams(m)) if m.contains("historyLength"))
        );

        let get = |p: Value| v1::GetTaskRequest::try_from(decode_params::<TaskQueryParams03>(p)?);
        let g = get(json!({"id":"t","historyLength":0})).unwrap();
        assert_eq!(g.history_length, None);
        assert_eq!(
            serde_json::to_value(&g).unwrap(),
            json!({"id":"t"}),
            "no historyLength: 0 may reach v1, where it means no history"
        );
        assert_eq!(
            get(json!({"taskId":"t","historyLength":2}))
                .unwrap()
                .history_length,
            Some(2)
        );
        assert_eq!(get(json!({"taskId":"t"})).unwrap().id, "t");
    }

    #[test]
    fn task_id_params_convert_to_cancel_and_subscribe() {
        let p: TaskIdParams03 = decode_params(json!({"taskId":"t9","metadata":{"a":1}})).unwrap();
        let c = v1::CancelTaskRequest::from(p.clone());
        assert_eq!(c.id, "t9");
        assert_eq!(
            c.metadata,
            Some(json!({"a":1}).as_object().unwrap().clone())
        );
        assert_eq!(v1::SubscribeToTaskRequest::from(p).id, "t9");
    }

    #[test]
    fn sample_message_send_request_decodes() {
        // Appendix C.5, `message/send` params.
        let req = send_request(json!({"message":{"kind":"message","messageId":"tck-artifact-text-1","role":"user","parts":[{"kind":"text","text":"hi"}]}})).unwrap();
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({"message":{"messageId":"tck-artifact-text-1","role":"ROLE_USER","parts":[{"text":"hi"}]}})
        );
    }

    #[test]
    fn bad_part_in_send_params_is_invalid_params() {
        let err = send_request(
            json!({"message":{"messageId":"m","role":"user","parts":[{"kind":"text","data":{}}]}}),
        )
        .unwrap_err();
        assert!(
            matches!(&err, A2AError::InvalidParams(m) if m.contains("kind \"text\" has no \"text\"")),
            "{err:?}"
        );
        assert_eq!(err.code(), -32602);
        let err = send_request(json!({"message":{"messageId":"m","role":"user","parts":[{"kind":"video","text":"x"}]}})).unwrap_err();
        assert!(
            matches!(&err, A2AError::InvalidParams(m) if m.contains("unknown part kind \"video\"")),
            "{err:?}"
        );
    }

    fn sample_task() -> v1::Task {
        v1::Task {
            id: "T1".into(),
            context_id: "C1".into(),
            status: v1::TaskStatus {
                state: v1::TaskState::Completed,
                message: None,
                timestamp: Some("2026-01-01T00:00:00.000Z".into()),
            },
            artifacts: vec![v1::Artifact {
                artifact_id: "A1".into(),
                parts: vec![v1::Part::text("Generated text content")],
                ..v1::Artifact::default()
            }],
            history: vec![v1::Message {
                message_id: "tck-artifact-text-1".into(),
                context_id: Some("C1".into()),
                task_id: Some("T1".into()),
                role: v1::Role::User,
                parts: vec![v1::Part::text("hi")],
                ..v1::Message::default()
            }],
            metadata: None,
        }
    }

    #[test]
    fn task_matches_sample_exactly() {
        // Appendix C.5 `message/send` result, ids and timestamp filled in.
        let want = json!({"artifacts":[{"artifactId":"A1","parts":[{"kind":"text","text":"Generated text content"}]}],"contextId":"C1","history":[{"contextId":"C1","kind":"message","messageId":"tck-artifact-text-1","parts":[{"kind":"text","text":"hi"}],"role":"user","taskId":"T1"}],"id":"T1","kind":"task","status":{"state":"completed","timestamp":"2026-01-01T00:00:00.000Z"}});
        let t = sample_task();
        assert_eq!(serde_json::to_value(task_to_v03(&t)).unwrap(), want);
        assert_eq!(
            send_response_to_v03(&v1::SendMessageResponse::Task(t.clone())),
            want,
            "v0.3 send results are bare, not {{\"task\":…}}"
        );
        assert_eq!(stream_event_to_v03(&v1::StreamResponse::Task(t)), want);
        // A task without artifacts/history still has every REQUIRED member.
        let bare = v1::Task {
            id: "T".into(),
            status: v1::TaskStatus {
                state: v1::TaskState::Submitted,
                ..v1::TaskStatus::default()
            },
            ..v1::Task::default()
        };
        assert_eq!(
            serde_json::to_value(task_to_v03(&bare)).unwrap(),
            json!({"id":"T","contextId":"","kind":"task","status":{"state":"submitted"}})
        );
    }

    fn status_event(state: v1::TaskState) -> v1::StreamResponse {
        v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: "T1".into(),
            context_id: "C1".into(),
            status: v1::TaskStatus {
                state,
                message: None,
                timestamp: Some("2026-01-01T00:00:01.000Z".into()),
            },
            metadata: None,
        })
    }

    #[test]
    fn status_updates_match_samples_and_set_final() {
        // Appendix C.5 `message/stream` events.
        assert_eq!(
            stream_event_to_v03(&status_event(v1::TaskState::Working)),
            json!({"contextId":"C1","final":false,"kind":"status-update","status":{"state":"working","timestamp":"2026-01-01T00:00:01.000Z"},"taskId":"T1"})
        );
        assert_eq!(
            stream_event_to_v03(&status_event(v1::TaskState::Completed)),
            json!({"contextId":"C1","final":true,"kind":"status-update","status":{"state":"completed","timestamp":"2026-01-01T00:00:01.000Z"},"taskId":"T1"})
        );
        let finals = [
            (v1::TaskState::Unspecified, false),
            (v1::TaskState::Submitted, false),
            (v1::TaskState::Working, false),
            (v1::TaskState::Completed, true),
            (v1::TaskState::Failed, true),
            (v1::TaskState::Canceled, true),
            (v1::TaskState::Rejected, true),
            (v1::TaskState::InputRequired, true),
            (v1::TaskState::AuthRequired, true),
        ];
        for (state, is_final) in finals {
            let v = stream_event_to_v03(&status_event(state));
            assert_eq!(v["final"], json!(is_final), "{state:?}");
            assert_eq!(
                v["status"]["state"],
                json!(TaskState03::from(state).as_str())
            );
        }
        if let v1::StreamResponse::StatusUpdate(ev) = status_event(v1::TaskState::AuthRequired) {
            assert!(!TaskStatusUpdateEvent03::from_v1(&ev, false).is_final);
        }
    }

    #[test]
    fn artifact_update_and_message_events_are_bare_with_kind() {
        let ev = v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
            task_id: "T1".into(),
            context_id: "C1".into(),
            artifact: v1::Artifact {
                artifact_id: "A1".into(),
                parts: vec![v1::Part::text("Ordered output")],
                ..v1::Artifact::default()
            },
            append: false,
            last_chunk: false,
            metadata: None,
        });
        assert_eq!(
            stream_event_to_v03(&ev),
            json!({"append":false,"artifact":{"artifactId":"A1","parts":[{"kind":"text","text":"Ordered output"}]},"contextId":"C1","kind":"artifact-update","lastChunk":false,"taskId":"T1"})
        );
        let m = v1::Message::agent(vec![v1::Part::text("ok")], "T1", "C1");
        let v = stream_event_to_v03(&v1::StreamResponse::Message(m.clone()));
        assert_eq!(v["kind"], "message");
        assert_eq!(v["role"], "agent");
        assert_eq!(
            send_response_to_v03(&v1::SendMessageResponse::Message(m)),
            v
        );
    }

    #[test]
    fn push_configs_convert_both_ways() {
        // Appendix C.4 `tasks/pushNotificationConfig/set` params.
        let wire = json!({"taskId":"T1","pushNotificationConfig":{"id":"cfg03","url":"http://127.0.0.1:9911/hook03","token":"tok-03","authentication":{"schemes":["Bearer"],"credentials":"secret-03"}}});
        let c03: TaskPushNotificationConfig03 = decode_params(wire.clone()).unwrap();
        let c1 = v1::TaskPushNotificationConfig::try_from(c03).unwrap();
        assert_eq!(
            serde_json::to_value(&c1).unwrap(),
            json!({"id":"cfg03","taskId":"T1","url":"http://127.0.0.1:9911/hook03","token":"tok-03","authentication":{"scheme":"Bearer","credentials":"secret-03"}})
        );
        assert_eq!(serde_json::to_value(push_config_to_v03(&c1)).unwrap(), wire);

        // Inline config in message/send: first scheme wins; no task id yet.
        let req = send_request(json!({
            "message": {"messageId":"m","role":"user","parts":[{"text":"hi"}]},
            "configuration": {"blocking": false, "pushNotificationConfig": {"url":"http://h/x","authentication":{"schemes":["Basic","Bearer"]}}}
        }))
        .unwrap();
        let cfg = req.configuration.unwrap();
        assert!(cfg.return_immediately);
        let push = cfg.task_push_notification_config.unwrap();
        assert_eq!(push.url, "http://h/x");
        assert_eq!(push.task_id, None);
        assert_eq!(push.authentication.unwrap().scheme, "Basic");

        // Empty schemes: fine without credentials, an error with them.
        let no_auth = PushNotificationConfig03 {
            id: None,
            url: "u".into(),
            token: None,
            authentication: Some(PushNotificationAuthenticationInfo03 {
                schemes: vec![],
                credentials: None,
            }),
        };
        assert_eq!(
            v1::TaskPushNotificationConfig::try_from(no_auth.clone())
                .unwrap()
                .authentication,
            None
        );
        let mut bad = no_auth;
        if let Some(a) = bad.authentication.as_mut() {
            a.credentials = Some("s".into());
        }
        assert!(matches!(
            v1::TaskPushNotificationConfig::try_from(bad),
            Err(A2AError::InvalidParams(m)) if m.contains("schemes")
        ));
    }

    #[test]
    fn empty_v1_part_becomes_empty_text() {
        assert_eq!(
            serde_json::to_value(part_to_v03(&v1::Part::default())).unwrap(),
            json!({"kind":"text","text":""})
        );
    }
}
