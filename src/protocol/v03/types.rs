//! v0.3 JSON-RPC wire objects (the `specification/json/a2a.json` shape at tag v0.3.0).

use super::{Role03, TaskState03};
use crate::protocol::v1::Metadata;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Declares a unit type for a fixed `kind` discriminator: it always serializes as its value;
/// on input the member may be absent (`#[serde(default)]`) or null, but any other value must
/// be the right string.
macro_rules! kind_marker {
    ($(#[$doc:meta])* $name:ident, $value:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
        pub struct $name;

        impl $name {
            /// The wire value of this `kind`.
            pub const VALUE: &'static str = $value;
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($value)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                match Option::<String>::deserialize(d)? {
                    None => Ok($name),
                    Some(k) if k == $value => Ok($name),
                    Some(k) => Err(serde::de::Error::custom(format!(
                        "kind is \"{k}\" but \"{}\" was expected",
                        $value
                    ))),
                }
            }
        }
    };
}

kind_marker!(
    /// `kind: "task"`.
    TaskKind,
    "task"
);
kind_marker!(
    /// `kind: "message"`.
    MessageKind,
    "message"
);
kind_marker!(
    /// `kind: "status-update"`.
    StatusUpdateKind,
    "status-update"
);
kind_marker!(
    /// `kind: "artifact-update"`.
    ArtifactUpdateKind,
    "artifact-update"
);

/// Accepts an integer, an integral float (`5.0`, as protobuf-based clients send) or null.
pub(super) fn lenient_opt_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    use serde::de::Error;
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let as_int = n
                .as_i64()
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64));
            as_int
                .and_then(|i| i32::try_from(i).ok())
                .map(Some)
                .ok_or_else(|| {
                    D::Error::custom(format!("historyLength {n} is not a 32-bit integer"))
                })
        }
        Some(other) => Err(D::Error::custom(format!(
            "historyLength must be an integer, got {other}"
        ))),
    }
}

/// v0.3 `Task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task03 {
    pub id: String,
    pub context_id: String,
    pub status: TaskStatus03,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact03>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub kind: TaskKind,
}

/// v0.3 `TaskStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus03 {
    pub state: TaskState03,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// v0.3 `Message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message03 {
    pub message_id: String,
    pub role: Role03,
    pub parts: Vec<Part03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_task_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub kind: MessageKind,
}

/// v0.3 `Part`, tagged by `kind` on output. On input `kind` may be missing (the part is then
/// recognised by its `text`/`file`/`data` member); a wrong `kind` or missing content is an
/// error naming the problem.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", try_from = "RawPart03")]
pub enum Part03 {
    Text(TextPart03),
    File(FilePart03),
    Data(DataPart03),
}

/// `TextPart` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextPart03 {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `FilePart` content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilePart03 {
    pub file: FileContent03,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `DataPart` content: in v0.3 `data` is always a JSON object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataPart03 {
    pub data: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `FileWithBytes` | `FileWithUri`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FileContent03 {
    #[serde(rename_all = "camelCase")]
    Bytes {
        /// base64, kept encoded.
        bytes: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    #[serde(rename_all = "camelCase")]
    Uri {
        uri: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
}

/// What a part may look like on input, before it is checked.
#[derive(Deserialize)]
struct RawPart03 {
    #[serde(default)]
    kind: Option<String>,
    /// Not a v0.3 member: a part that names its type here (an older draft's or another
    /// protocol's spelling) is refused rather than guessed.
    #[serde(default, rename = "type")]
    type_: Option<Value>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    file: Option<RawFile03>,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFile03 {
    #[serde(default)]
    bytes: Option<String>,
    #[serde(default)]
    uri: Option<String>,
    #[serde(default)]
    mime_type: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// Why a v0.3 part could not be read (serde reports the message with its position).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadPart03 {
    #[error("part has \"type\" {0} but no \"kind\"; a v0.3 part names its kind in \"kind\": text, file or data")]
    TypeWithoutKind(String),
    #[error("part has no kind and none of text, file or data")]
    NoContent,
    #[error("part has no kind and several contents ({0}); set kind")]
    SeveralContents(String),
    #[error("part of kind \"{kind}\" has no \"{field}\" {what}")]
    Missing {
        kind: &'static str,
        field: &'static str,
        what: &'static str,
    },
    #[error("file part has both file.bytes and file.uri")]
    BytesAndUri,
    #[error("file part needs file.bytes or file.uri")]
    NoBytesOrUri,
    #[error("data part: \"data\" must be a JSON object in v0.3")]
    DataNotObject,
    #[error("unknown part kind \"{0}\" (expected text, file or data)")]
    UnknownKind(String),
}

impl TryFrom<RawPart03> for Part03 {
    type Error = BadPart03;

    fn try_from(raw: RawPart03) -> Result<Self, BadPart03> {
        let kind = match raw.kind.as_deref() {
            Some(k) => k.to_string(),
            None if raw.type_.is_some() => {
                return Err(BadPart03::TypeWithoutKind(
                    raw.type_.as_ref().map(Value::to_string).unwrap_or_default(),
                ));
            }
            None => {
                let present: Vec<&str> = [
                    (raw.text.is_some(), "text"),
                    (raw.file.is_some(), "file"),
                    (raw.data.as_ref().is_some_and(|d| !d.is_null()), "data"),
                ]
                .into_iter()
                .filter_map(|(p, n)| p.then_some(n))
                .collect();
                match present.as_slice() {
                    [one] => (*one).to_string(),
                    [] => {
                        return Err(BadPart03::NoContent);
                    }
                    many => {
                        return Err(BadPart03::SeveralContents(many.join(", ")));
                    }
                }
            }
        };
        let metadata = raw.metadata;
        match kind.as_str() {
            "text" => {
                let text = raw.text.ok_or(BadPart03::Missing {
                    kind: "text",
                    field: "text",
                    what: "string",
                })?;
                Ok(Part03::Text(TextPart03 { text, metadata }))
            }
            "file" => {
                let f = raw.file.ok_or(BadPart03::Missing {
                    kind: "file",
                    field: "file",
                    what: "object",
                })?;
                let file = match (f.bytes, f.uri) {
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
                    (Some(_), Some(_)) => {
                        return Err(BadPart03::BytesAndUri);
                    }
                    (None, None) => {
                        return Err(BadPart03::NoBytesOrUri);
                    }
                };
                Ok(Part03::File(FilePart03 { file, metadata }))
            }
            "data" => match raw.data {
                Some(Value::Object(data)) => Ok(Part03::Data(DataPart03 { data, metadata })),
                None | Some(Value::Null) => Err(BadPart03::Missing {
                    kind: "data",
                    field: "data",
                    what: "object",
                }),
                Some(_) => Err(BadPart03::DataNotObject),
            },
            other => Err(BadPart03::UnknownKind(other.to_string())),
        }
    }
}

/// v0.3 `Artifact` (no `kind`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact03 {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// v0.3 `TaskStatusUpdateEvent`; `final` is REQUIRED and always emitted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent03 {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus03,
    #[serde(rename = "final", default)]
    pub is_final: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub kind: StatusUpdateKind,
}

/// v0.3 `TaskArtifactUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent03 {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact03,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub append: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_chunk: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub kind: ArtifactUpdateKind,
}

/// A `message/send` result: a bare task or message (not wrapped, unlike v1.0).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SendResult03 {
    Task(Task03),
    Message(Message03),
}

/// One `message/stream` / `tasks/resubscribe` event: a bare object with its `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum StreamEvent03 {
    Task(Task03),
    Message(Message03),
    StatusUpdate(TaskStatusUpdateEvent03),
    ArtifactUpdate(TaskArtifactUpdateEvent03),
}

/// `message/send` / `message/stream` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendParams03 {
    pub message: Message03,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<MessageSendConfiguration03>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `MessageSendConfiguration`. `blocking` absent means blocking; `historyLength: 0` means
/// unset (see [`crate::protocol::v03::convert`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct MessageSendConfiguration03 {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_output_modes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_i32"
    )]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config: Option<PushNotificationConfig03>,
}

/// v0.3 `PushNotificationConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationConfig03 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<PushNotificationAuthenticationInfo03>,
}

/// v0.3 `PushNotificationAuthenticationInfo`: a list of schemes (v1.0 has one `scheme`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PushNotificationAuthenticationInfo03 {
    #[serde(default)]
    pub schemes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// v0.3 `TaskPushNotificationConfig` (`tasks/pushNotificationConfig/set` params and the
/// result of set/get/list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig03 {
    pub task_id: String,
    pub push_notification_config: PushNotificationConfig03,
}

/// `tasks/get` params. `taskId` is accepted for `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskQueryParams03 {
    #[serde(alias = "taskId")]
    pub id: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_opt_i32"
    )]
    pub history_length: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `tasks/cancel`, `tasks/resubscribe` and `tasks/pushNotificationConfig/list` params.
/// `taskId` is accepted for `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams03 {
    #[serde(alias = "taskId")]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `tasks/pushNotificationConfig/get` and `/delete` params: `id` is the **task** id and
/// `pushNotificationConfigId` the config id (REQUIRED for delete; for get, absent means the
/// task's only/first config). `taskId` is accepted for `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfigParams03 {
    #[serde(alias = "taskId")]
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_notification_config_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[cfg(test)]
mod tests;
