//! Building messages and reading what a task asks for.

use serde::Serialize;
use serde_json::Value;

use crate::protocol::v1::{
    Message, Metadata, Part, Role, SendMessageConfiguration, SendMessageRequest, TaskStatus,
};

/// Builds a `SendMessageRequest` with one text part.
///
/// ```
/// use agent_host::client::Request;
/// let req = Request::text("fix the tests").context("ctx-1").metadata("cwd", "/src/app").build();
/// assert_eq!(req.message.context_id.as_deref(), Some("ctx-1"));
/// ```
#[derive(Debug, Clone)]
pub struct Request(SendMessageRequest);

impl Request {
    /// A user message with this text.
    pub fn text(text: impl Into<String>) -> Request {
        Request::parts(vec![Part::text(text)])
    }

    /// A user message with these parts.
    pub fn parts(parts: Vec<Part>) -> Request {
        Request(SendMessageRequest {
            tenant: None,
            message: Message {
                message_id: uuid::Uuid::new_v4().to_string(),
                role: Role::User,
                parts,
                ..Message::default()
            },
            configuration: None,
            metadata: None,
        })
    }

    /// Continue this conversation (context).
    pub fn context(mut self, context_id: impl Into<String>) -> Request {
        self.0.message.context_id = Some(context_id.into());
        self
    }

    /// Answer this task (one that waits for input).
    pub fn task(mut self, task_id: impl Into<String>) -> Request {
        self.0.message.task_id = Some(task_id.into());
        self
    }

    /// Sets `message.metadata[key]`.
    pub fn metadata(mut self, key: &str, value: impl Into<Value>) -> Request {
        self.0
            .message
            .metadata
            .get_or_insert_with(Metadata::new)
            .insert(key.to_string(), value.into());
        self
    }

    /// Adds a part.
    pub fn part(mut self, part: Part) -> Request {
        self.0.message.parts.push(part);
        self
    }

    /// Non-blocking send: the answer comes at once, the task runs on.
    pub fn return_immediately(mut self) -> Request {
        self.config().return_immediately = true;
        self
    }

    /// At most this many history messages in the returned task.
    pub fn history_length(mut self, n: i32) -> Request {
        self.config().history_length = Some(n);
        self
    }

    fn config(&mut self) -> &mut SendMessageConfiguration {
        self.0.configuration.get_or_insert_with(Default::default)
    }

    pub fn build(self) -> SendMessageRequest {
        self.0
    }
}

impl From<Request> for SendMessageRequest {
    fn from(r: Request) -> Self {
        r.0
    }
}

/// One option of an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApprovalOption {
    pub id: String,
    pub label: String,
}

/// What an `input-required` task asks: the data part agent-host puts in the status message
/// (`approvalId`, `kind`, `tool`, `target`, `detail`, `options`), or just the question text
/// for other agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Approval {
    pub approval_id: Option<String>,
    /// `command`, `file-edit`, `tool`, `question`, `other` (or empty when unknown).
    pub kind: String,
    pub tool: Option<String>,
    pub target: Option<String>,
    /// What is asked, in words.
    pub detail: String,
    pub options: Vec<ApprovalOption>,
}

impl Approval {
    /// A yes/no decision (not a free-text question).
    pub fn is_decision(&self) -> bool {
        self.kind != "question" && (self.approval_id.is_some() || !self.options.is_empty())
    }

    /// What an `input-required` status asks; None without a message.
    pub fn from_status(status: &TaskStatus) -> Option<Approval> {
        let msg = status.message.as_ref()?;
        let text = msg.text();
        let data = msg
            .parts
            .iter()
            .filter_map(|p| p.data.as_ref())
            .find(|d| d.get("approvalId").is_some() || d.get("kind").is_some());
        let s = |v: Option<&Value>, k: &str| {
            v.and_then(|d| d.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let options = data
            .and_then(|d| d.get("options"))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|o| {
                        Some(ApprovalOption {
                            id: o.get("id")?.as_str()?.to_string(),
                            label: o
                                .get("label")
                                .and_then(Value::as_str)
                                .unwrap_or_default()
                                .to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Approval {
            approval_id: s(data, "approvalId"),
            kind: s(data, "kind").unwrap_or_default(),
            tool: s(data, "tool"),
            target: s(data, "target"),
            detail: s(data, "detail").unwrap_or(text),
            options,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn approvals_are_read_from_the_status_message() {
        let st: TaskStatus = serde_json::from_value(json!({"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [
                {"text": "The agent wants to run a shell command: ls"},
                {"data": {"approvalId": "appr-1", "kind": "command", "tool": "Bash", "target": "ls",
                          "detail": "run ls", "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]}}]}}))
        .unwrap();
        let a = Approval::from_status(&st).unwrap();
        assert_eq!(a.approval_id.as_deref(), Some("appr-1"));
        assert_eq!(a.tool.as_deref(), Some("Bash"));
        assert_eq!(a.options.len(), 2);
        assert!(a.is_decision());
        let q: TaskStatus = serde_json::from_value(json!({"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "Which file?"}]}}))
        .unwrap();
        let a = Approval::from_status(&q).unwrap();
        assert_eq!(a.detail, "Which file?");
        assert!(!a.is_decision());
    }
}
