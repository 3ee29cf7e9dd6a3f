//! The v0.3 HTTP+JSON (REST) bodies: ProtoJSON of the v0.3 proto (package `a2a.v1`), which
//! is not the JSON-RPC shape: no `kind`; enums by proto name (`ROLE_USER`,
//! `TASK_STATE_WORKING`, and `TASK_STATE_CANCELLED` with two Ls); `Message.content` instead
//! of `parts`; parts `{"text"}` | `{"file":{"fileWithUri"|"fileWithBytes","mimeType","name"}}`
//! | `{"data":{"data":{…}}}`; results wrapped (`{"task"}` | `{"message"}`, stream events also
//! `{"statusUpdate"}` | `{"artifactUpdate"}`).
//!
//! The conversions go through the v0.3 JSON-RPC objects ([`super::types`]), so every rule of
//! [`super::convert`] (non-object data wrapping, `final`, `historyLength: 0`) applies here too.
//!
//! Input is read as a ProtoJSON parser would: the JSON names (`messageId`) and the proto
//! field names (`message_id`, as the Python SDK sends them), `request` for `message`, `update`
//! for `TaskStatus.message`; unknown fields ignored. One difference to the JSON-RPC shape:
//! `configuration.blocking` is a plain proto `bool`, so a configuration without it means
//! *not* blocking (that is how the SDKs send `blocking: false`: they leave it out); no
//! configuration at all means blocking.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::types::*;
use super::{Role03, TaskState03};
use crate::protocol::v1::{self, Metadata};
use crate::protocol::A2AError;

/// v0.3 REST `TaskState` name.
pub fn state_name(s: TaskState03) -> &'static str {
    match v1::TaskState::from(s) {
        v1::TaskState::Canceled => "TASK_STATE_CANCELLED",
        other => other.as_proto_name(),
    }
}

/// v0.3 REST `Role` name.
pub fn role_name(r: Role03) -> &'static str {
    match r {
        Role03::User => "ROLE_USER",
        Role03::Agent => "ROLE_AGENT",
    }
}

/// `Part`: exactly one of `text`, `file`, `data`, plus `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RestPart03 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<RestFilePart03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<RestDataPart03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `FilePart`: `fileWithUri` or `fileWithBytes` (base64), `mimeType`, `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RestFilePart03 {
    #[serde(
        default,
        alias = "file_with_uri",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_with_uri: Option<String>,
    #[serde(
        default,
        alias = "file_with_bytes",
        skip_serializing_if = "Option::is_none"
    )]
    pub file_with_bytes: Option<String>,
    #[serde(default, alias = "mime_type", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// `DataPart`: `{"data": Struct}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RestDataPart03 {
    #[serde(default)]
    pub data: Option<Map<String, Value>>,
}

/// `Message` (`content`, not `parts`; no `referenceTaskIds` in the v0.3 proto).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RestMessage03 {
    #[serde(default, alias = "message_id")]
    pub message_id: String,
    #[serde(default, alias = "context_id", skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, alias = "task_id", skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// Read liberally (name, number, v0.3 JSON-RPC name); written as `ROLE_*`.
    #[serde(default)]
    pub role: v1::Role,
    #[serde(default)]
    pub content: Vec<RestPart03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// `TaskStatus` (proto field `update`, JSON name `message`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestStatus03 {
    pub state: String,
    #[serde(default, alias = "update", skip_serializing_if = "Option::is_none")]
    pub message: Option<RestMessage03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `Artifact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestArtifact03 {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<RestPart03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// `Task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestTask03 {
    pub id: String,
    pub context_id: String,
    pub status: RestStatus03,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<RestArtifact03>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<RestMessage03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `TaskStatusUpdateEvent` (with `final`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestStatusUpdate03 {
    pub task_id: String,
    pub context_id: String,
    pub status: RestStatus03,
    /// A proto bool: absent (ProtoJSON omits defaults) is false.
    #[serde(rename = "final", default)]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `TaskArtifactUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestArtifactUpdate03 {
    pub task_id: String,
    pub context_id: String,
    pub artifact: RestArtifact03,
    #[serde(default)]
    pub append: bool,
    #[serde(default)]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `StreamResponse` (one SSE event) and, without the update cases, `SendMessageResponse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum RestStreamResponse03 {
    Task(RestTask03),
    /// Proto field `msg`, JSON name `message`.
    #[serde(alias = "msg")]
    Message(RestMessage03),
    StatusUpdate(RestStatusUpdate03),
    ArtifactUpdate(RestArtifactUpdate03),
}

/// `SendMessageConfiguration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RestSendConfiguration03 {
    #[serde(default, alias = "accepted_output_modes")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, alias = "push_notification")]
    pub push_notification: Option<PushNotificationConfig03>,
    #[serde(
        default,
        alias = "history_length",
        deserialize_with = "super::types::lenient_opt_i32"
    )]
    pub history_length: Option<i32>,
    #[serde(default)]
    pub blocking: Option<bool>,
}

/// `SendMessageRequest` (proto field `request`, JSON name `message`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestSendMessageRequest03 {
    #[serde(alias = "request")]
    pub message: RestMessage03,
    #[serde(default)]
    pub configuration: Option<RestSendConfiguration03>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

// ---------------------------------------------------------------------------------------
// REST → v1 (requests)
// ---------------------------------------------------------------------------------------

fn invalid(msg: impl Into<String>) -> A2AError {
    A2AError::InvalidParams(msg.into())
}

impl TryFrom<RestPart03> for Part03 {
    type Error = A2AError;

    fn try_from(p: RestPart03) -> Result<Self, A2AError> {
        let metadata = p.metadata;
        match (p.text, p.file, p.data) {
            (Some(text), None, None) => Ok(Part03::Text(TextPart03 { text, metadata })),
            (None, Some(f), None) => {
                let file = match (f.file_with_bytes, f.file_with_uri) {
                    (Some(bytes), None) => FileContent03::Bytes {
                        bytes,
                        mime_type: f.mime_type,
                        name: f.name,
                    },
                    (None, Some(uri)) => FileContent03::Uri {
                        uri,
                        mime_type: f.mime_type,
                        name: f.name,
                    },
                    _ => return Err(invalid(
                        "a file part needs exactly one of file.fileWithUri and file.fileWithBytes",
                    )),
                };
                Ok(Part03::File(FilePart03 { file, metadata }))
            }
            (None, None, Some(d)) => Ok(Part03::Data(DataPart03 {
                data: d.data.unwrap_or_default(),
                metadata,
            })),
            _ => Err(invalid("a part needs exactly one of text, file and data")),
        }
    }
}

impl TryFrom<RestMessage03> for Message03 {
    type Error = A2AError;

    fn try_from(m: RestMessage03) -> Result<Self, A2AError> {
        let role = match m.role {
            v1::Role::User => Role03::User,
            v1::Role::Agent => Role03::Agent,
            v1::Role::Unspecified => {
                return Err(invalid("message.role must be ROLE_USER or ROLE_AGENT"))
            }
        };
        if m.message_id.is_empty() {
            return Err(invalid("message.messageId is required"));
        }
        Ok(Message03 {
            message_id: m.message_id,
            role,
            parts: m
                .content
                .into_iter()
                .map(Part03::try_from)
                .collect::<Result<_, _>>()?,
            context_id: m.context_id.filter(|s| !s.is_empty()),
            task_id: m.task_id.filter(|s| !s.is_empty()),
            reference_task_ids: vec![],
            extensions: m.extensions,
            metadata: m.metadata,
            kind: MessageKind,
        })
    }
}

impl TryFrom<RestSendMessageRequest03> for v1::SendMessageRequest {
    type Error = A2AError;

    fn try_from(r: RestSendMessageRequest03) -> Result<Self, A2AError> {
        let configuration = r.configuration.map(|c| MessageSendConfiguration03 {
            accepted_output_modes: c.accepted_output_modes,
            // A proto bool: absent is false.
            blocking: Some(c.blocking.unwrap_or(false)),
            history_length: c.history_length,
            push_notification_config: c.push_notification,
        });
        v1::SendMessageRequest::try_from(MessageSendParams03 {
            message: Message03::try_from(r.message)?,
            configuration,
            metadata: r.metadata,
        })
    }
}

/// Decodes a v0.3 REST `SendMessageRequest` body into the v1 request.
pub fn decode_send_request(body: Value) -> Result<v1::SendMessageRequest, A2AError> {
    let r: RestSendMessageRequest03 =
        serde_json::from_value(body).map_err(|e| invalid(format!("Invalid request body: {e}")))?;
    v1::SendMessageRequest::try_from(r)
}

/// Decodes a v0.3 REST `CreateTaskPushNotificationConfigRequest` body: `{parent, configId,
/// config: {name, pushNotificationConfig}}` with JSON or proto field names (`config_id`,
/// `push_notification_config`, as the Python SDK sends them), or a bare
/// `PushNotificationConfig`. The config's id is its own `id`, else `configId`, else the last
/// segment of `config.name` (`tasks/{t}/pushNotificationConfigs/{id}`).
pub fn decode_create_push_config(body: Value) -> Result<PushNotificationConfig03, A2AError> {
    let field = |v: &Value, json: &str, proto: &str| v.get(json).or_else(|| v.get(proto)).cloned();
    let config = body.get("config");
    let inner = config
        .and_then(|c| field(c, "pushNotificationConfig", "push_notification_config"))
        .or_else(|| field(&body, "pushNotificationConfig", "push_notification_config"))
        .unwrap_or_else(|| body.clone());
    let mut pnc: PushNotificationConfig03 = serde_json::from_value(inner)
        .map_err(|e| invalid(format!("Invalid push notification config: {e}")))?;
    if pnc.id.is_none() {
        let from_name = config
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .and_then(|n| n.rsplit_once("/pushNotificationConfigs/"))
            .map(|(_, id)| id.to_string());
        pnc.id = field(&body, "configId", "config_id")
            .and_then(|v| v.as_str().map(str::to_string))
            .or(from_name)
            .filter(|id| !id.is_empty());
    }
    Ok(pnc)
}

// ---------------------------------------------------------------------------------------
// v1 → REST (responses, stream events), through the v0.3 JSON-RPC objects
// ---------------------------------------------------------------------------------------

impl From<&Part03> for RestPart03 {
    fn from(p: &Part03) -> Self {
        match p {
            Part03::Text(t) => RestPart03 {
                text: Some(t.text.clone()),
                metadata: t.metadata.clone(),
                ..RestPart03::default()
            },
            Part03::File(f) => {
                let mut file = RestFilePart03::default();
                match &f.file {
                    FileContent03::Bytes {
                        bytes,
                        mime_type,
                        name,
                    } => {
                        file.file_with_bytes = Some(bytes.clone());
                        file.mime_type = mime_type.clone();
                        file.name = name.clone();
                    }
                    FileContent03::Uri {
                        uri,
                        mime_type,
                        name,
                    } => {
                        file.file_with_uri = Some(uri.clone());
                        file.mime_type = mime_type.clone();
                        file.name = name.clone();
                    }
                }
                RestPart03 {
                    file: Some(file),
                    metadata: f.metadata.clone(),
                    ..RestPart03::default()
                }
            }
            Part03::Data(d) => RestPart03 {
                data: Some(RestDataPart03 {
                    data: Some(d.data.clone()),
                }),
                metadata: d.metadata.clone(),
                ..RestPart03::default()
            },
        }
    }
}

impl From<&Message03> for RestMessage03 {
    fn from(m: &Message03) -> Self {
        RestMessage03 {
            message_id: m.message_id.clone(),
            context_id: m.context_id.clone(),
            task_id: m.task_id.clone(),
            role: v1::Role::from(m.role),
            content: m.parts.iter().map(RestPart03::from).collect(),
            metadata: m.metadata.clone(),
            extensions: m.extensions.clone(),
        }
    }
}

impl From<&TaskStatus03> for RestStatus03 {
    fn from(s: &TaskStatus03) -> Self {
        RestStatus03 {
            state: state_name(s.state).to_string(),
            message: s.message.as_ref().map(RestMessage03::from),
            timestamp: s.timestamp.clone(),
        }
    }
}

impl From<&Artifact03> for RestArtifact03 {
    fn from(a: &Artifact03) -> Self {
        RestArtifact03 {
            artifact_id: a.artifact_id.clone(),
            name: a.name.clone(),
            description: a.description.clone(),
            parts: a.parts.iter().map(RestPart03::from).collect(),
            metadata: a.metadata.clone(),
            extensions: a.extensions.clone(),
        }
    }
}

impl From<&Task03> for RestTask03 {
    fn from(t: &Task03) -> Self {
        RestTask03 {
            id: t.id.clone(),
            context_id: t.context_id.clone(),
            status: RestStatus03::from(&t.status),
            artifacts: t.artifacts.iter().map(RestArtifact03::from).collect(),
            history: t.history.iter().map(RestMessage03::from).collect(),
            metadata: t.metadata.clone(),
        }
    }
}

impl From<&StreamEvent03> for RestStreamResponse03 {
    fn from(ev: &StreamEvent03) -> Self {
        match ev {
            StreamEvent03::Task(t) => RestStreamResponse03::Task(t.into()),
            StreamEvent03::Message(m) => RestStreamResponse03::Message(m.into()),
            StreamEvent03::StatusUpdate(s) => {
                RestStreamResponse03::StatusUpdate(RestStatusUpdate03 {
                    task_id: s.task_id.clone(),
                    context_id: s.context_id.clone(),
                    status: RestStatus03::from(&s.status),
                    is_final: s.is_final,
                    metadata: s.metadata.clone(),
                })
            }
            StreamEvent03::ArtifactUpdate(a) => {
                RestStreamResponse03::ArtifactUpdate(RestArtifactUpdate03 {
                    task_id: a.task_id.clone(),
                    context_id: a.context_id.clone(),
                    artifact: RestArtifact03::from(&a.artifact),
                    append: a.append.unwrap_or(false),
                    last_chunk: a.last_chunk.unwrap_or(false),
                    metadata: a.metadata.clone(),
                })
            }
        }
    }
}

/// Serializes a value made of strings, vectors and maps (cannot fail; Null is the
/// unreachable fallback).
fn to_json<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A v1 task as the v0.3 REST `Task` (`GET /v1/tasks/{id}`, `:cancel`).
pub fn task_to_rest03(t: &v1::Task) -> Value {
    to_json(&RestTask03::from(&super::task_to_v03(t)))
}

/// A v1 send result as the v0.3 REST `SendMessageResponse` (`{"task"}` | `{"message"}`).
pub fn send_response_to_rest03(r: &v1::SendMessageResponse) -> Value {
    let ev = match r {
        v1::SendMessageResponse::Task(t) => {
            RestStreamResponse03::Task((&super::task_to_v03(t)).into())
        }
        v1::SendMessageResponse::Message(m) => {
            RestStreamResponse03::Message((&super::message_to_v03(m)).into())
        }
    };
    to_json(&ev)
}

/// A v1 stream event as the v0.3 REST `StreamResponse` (one SSE `data:`).
pub fn stream_event_to_rest03(ev: &v1::StreamResponse) -> Value {
    to_json(&RestStreamResponse03::from(&StreamEvent03::from(ev)))
}

#[cfg(test)]
mod tests;
