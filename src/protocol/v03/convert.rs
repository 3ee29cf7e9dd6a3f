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
mod tests;
