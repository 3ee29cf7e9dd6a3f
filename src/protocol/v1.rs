//! A2A v1.0 wire types: the canonical internal model.
//!
//! Field names and presence follow `specification/a2a.proto` (ProtoJSON, camelCase). REQUIRED
//! fields are always emitted; optional ones are omitted when unset or empty. Unknown input
//! fields are ignored (no `deny_unknown_fields`). No `kind`, no `final` anywhere in v1.0.
//! Request fields of more than one word also accept their proto name (`task_id`,
//! `history_length`), as ProtoJSON parsers must: the 1.0 conformance kit sends those.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A free-form JSON object (`google.protobuf.Struct`).
pub type Metadata = Map<String, Value>;

fn is_false(b: &bool) -> bool {
    !*b
}

/// `TaskState`, serialized by its proto name. Read liberally, as ProtoJSON parsers do: the
/// proto name, its number, or (for clients of both versions) a v0.3 name; an unknown name is
/// `TASK_STATE_UNSPECIFIED` (what the JS SDK sends as `"UNRECOGNIZED"` for an unset filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
pub enum TaskState {
    #[default]
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Completed, failed, canceled, rejected: nothing more happens to the task.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Input-required and auth-required: the task waits for the client.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }

    /// The proto enum name, e.g. `TASK_STATE_WORKING`.
    pub fn as_proto_name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "TASK_STATE_UNSPECIFIED",
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
            TaskState::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }

    /// Parses a proto name (`TASK_STATE_WORKING`), also accepting the v0.3 REST spelling
    /// `TASK_STATE_CANCELLED` and the v0.3 JSON-RPC names (`working`, `input-required`).
    pub fn parse_lenient(s: &str) -> Option<TaskState> {
        let all = [
            TaskState::Unspecified,
            TaskState::Submitted,
            TaskState::Working,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Canceled,
            TaskState::InputRequired,
            TaskState::Rejected,
            TaskState::AuthRequired,
        ];
        if let Some(st) = all.iter().find(|st| st.as_proto_name() == s) {
            return Some(*st);
        }
        match s {
            "TASK_STATE_CANCELLED" => Some(TaskState::Canceled),
            _ => all.into_iter().find(|st| st.v03_name() == s),
        }
    }

    /// The state's v0.3 JSON-RPC name (`input-required`; `unknown` for `Unspecified`). Kept
    /// here, with the model, so that reading the v0.3 names leniently needs nothing of the
    /// v0.3 module, which converts to and from this model; its state type takes its names
    /// from here.
    pub fn v03_name(self) -> &'static str {
        match self {
            TaskState::Unspecified => "unknown",
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::Completed => "completed",
            TaskState::Canceled => "canceled",
            TaskState::Failed => "failed",
            TaskState::Rejected => "rejected",
            TaskState::AuthRequired => "auth-required",
        }
    }
}

/// `Role`. Read liberally like [`TaskState`]: name, number, or v0.3 `user`/`agent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub enum Role {
    #[default]
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

impl TaskState {
    /// The state with this proto number.
    pub fn from_number(n: i64) -> Option<TaskState> {
        Some(match n {
            0 => TaskState::Unspecified,
            1 => TaskState::Submitted,
            2 => TaskState::Working,
            3 => TaskState::Completed,
            4 => TaskState::Failed,
            5 => TaskState::Canceled,
            6 => TaskState::InputRequired,
            7 => TaskState::Rejected,
            8 => TaskState::AuthRequired,
            _ => return None,
        })
    }
}

/// Reads a proto enum given as a name or a number; `Ok(None)` for an unknown one.
fn enum_value<'de, D, T>(
    d: D,
    by_name: impl Fn(&str) -> Option<T>,
    by_number: impl Fn(i64) -> Option<T>,
) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::de::Error;
    match Value::deserialize(d)? {
        Value::String(s) => Ok(by_name(&s)),
        Value::Number(n) => Ok(n.as_i64().and_then(by_number)),
        Value::Null => Ok(None),
        other => Err(D::Error::custom(format!(
            "expected an enum name or number, found {other}"
        ))),
    }
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(enum_value(d, TaskState::parse_lenient, TaskState::from_number)?.unwrap_or_default())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let by_name = |s: &str| match s {
            "ROLE_USER" | "user" => Some(Role::User),
            "ROLE_AGENT" | "agent" => Some(Role::Agent),
            _ => None,
        };
        let by_number = |n: i64| match n {
            1 => Some(Role::User),
            2 => Some(Role::Agent),
            _ => None,
        };
        Ok(enum_value(d, by_name, by_number)?.unwrap_or_default())
    }
}

/// `Part`: exactly one of `text`, `raw`, `url`, `data`, plus optional metadata, filename and
/// media type. The member name is the discriminator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// base64 bytes, kept encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Any JSON value. `Some(Value::Null)` is a data part holding `null`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "deserialize_present"
    )]
    pub data: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(alias = "media_type", default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
}

/// Makes a present `null` become `Some(Value::Null)` instead of `None`.
fn deserialize_present<'de, D>(d: D) -> Result<Option<Value>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Value::deserialize(d).map(Some)
}

impl Part {
    pub fn text(text: impl Into<String>) -> Part {
        Part {
            text: Some(text.into()),
            ..Part::default()
        }
    }

    pub fn data(data: Value) -> Part {
        Part {
            data: Some(data),
            ..Part::default()
        }
    }

    /// How many content members are set (a valid part has exactly one).
    pub fn content_count(&self) -> usize {
        [
            self.text.is_some(),
            self.raw.is_some(),
            self.url.is_some(),
            self.data.is_some(),
        ]
        .iter()
        .filter(|b| **b)
        .count()
    }
}

/// `Message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(alias = "context_id", default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(alias = "task_id", default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(
        alias = "reference_task_ids",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// A message from the agent with the given parts.
    pub fn agent(parts: Vec<Part>, task_id: &str, context_id: &str) -> Message {
        Message {
            message_id: uuid::Uuid::new_v4().to_string(),
            context_id: Some(context_id.to_string()),
            task_id: Some(task_id.to_string()),
            role: Role::Agent,
            parts,
            ..Message::default()
        }
    }

    /// The text parts joined with blank lines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| p.text.as_deref())
            .collect();
        texts.join("\n\n")
    }
}

/// `TaskStatus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// ISO 8601 UTC with milliseconds and `Z`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

/// `Artifact`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// `Task`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `TaskStatusUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `TaskArtifactUpdateEvent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    pub task_id: String,
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `StreamResponse`: one of task, message, status update, artifact update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

/// `SendMessageResponse`: a task or a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// `AuthenticationInfo` (push notifications).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AuthenticationInfo {
    pub scheme: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<String>,
}

/// `TaskPushNotificationConfig`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TaskPushNotificationConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(alias = "task_id", default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<AuthenticationInfo>,
}

/// `SendMessageConfiguration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageConfiguration {
    #[serde(
        alias = "accepted_output_modes",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub accepted_output_modes: Vec<String>,
    #[serde(
        alias = "task_push_notification_config",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub task_push_notification_config: Option<TaskPushNotificationConfig>,
    /// Presence matters: unset = no limit, 0 = no history.
    #[serde(
        alias = "history_length",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    #[serde(
        alias = "return_immediately",
        default,
        skip_serializing_if = "is_false"
    )]
    pub return_immediately: bool,
}

/// `SendMessageRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendMessageRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub message: Message,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configuration: Option<SendMessageConfiguration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `GetTaskRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(
        alias = "history_length",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
}

/// `ListTasksRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    #[serde(alias = "context_id", default, skip_serializing_if = "Option::is_none")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TaskState>,
    #[serde(alias = "page_size", default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<i32>,
    #[serde(alias = "page_token", default, skip_serializing_if = "Option::is_none")]
    pub page_token: Option<String>,
    #[serde(
        alias = "history_length",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub history_length: Option<i32>,
    #[serde(
        alias = "status_timestamp_after",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub status_timestamp_after: Option<String>,
    #[serde(
        alias = "include_artifacts",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub include_artifacts: Option<bool>,
}

/// `ListTasksResponse`: all four fields REQUIRED, emitted even when empty or zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResponse {
    pub tasks: Vec<Task>,
    pub next_page_token: String,
    pub page_size: i32,
    pub total_size: i32,
}

/// `CancelTaskRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// `SubscribeToTaskRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscribeToTaskRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub id: String,
}

#[cfg(test)]
mod tests;
