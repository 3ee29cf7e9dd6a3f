//! What the MCP tools answer: a task, its events and its changes in a compact shape, and a
//! readable line or two of each (the text content next to the structured content). Pure:
//! built from the A2A model the engine answers with.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::protocol::v1::{Artifact, Part, StreamResponse, Task, TaskState};
use crate::task::{LoggedEvent, TaskEvent};

/// The name of the artifact a turn's workspace changes arrive in: a data part with the
/// changed files and a file part `changes.patch`.
pub const CHANGES_ARTIFACT: &str = "changes";

/// The artifact of the whole answer of a finished turn.
const RESULT_ARTIFACT: &str = "result";

/// A task as the MCP tools answer it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    /// Task id (the same id over A2A, in the console and in `agent-host tasks`).
    pub id: String,
    /// Context (conversation) id: pass it to `start_task` to continue the conversation.
    pub context_id: String,
    /// submitted, working, input-required, completed, failed, canceled, rejected or
    /// auth-required.
    pub state: String,
    /// The adapter that runs the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The status message's text (the answer when completed, the question when waiting, the
    /// error when failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The agent's whole answer, once the task has ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// While `input-required`: what is asked (`approvalId`, `kind`, `tool`, `target`,
    /// `detail`, `options`); answer it with `reply`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<Value>,
    /// The summary of the task's `changes` artifact (the changed files), when it has one;
    /// `get_changes` gives the patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Value>,
    /// When failed: what kind of error it was (the A2A task's `errorKind`: auth, model,
    /// budget, timeout, config, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// When failed because the agent's program ended: its exit code (`exitCode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    /// When failed because the agent's program was killed: the signal (`signal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i64>,
}

impl TaskView {
    /// The view of `task`.
    pub fn of(task: &Task) -> TaskView {
        let status = task.status.message.as_ref();
        let answer = task
            .status
            .state
            .is_terminal()
            .then(|| artifact_text(task, RESULT_ARTIFACT))
            .flatten();
        let failed = is_failure(task.status.state);
        let meta = |key: &str| {
            task.metadata
                .as_ref()
                .and_then(|m| m.get(key))
                .filter(|_| failed)
        };
        TaskView {
            error_kind: meta("errorKind")
                .and_then(Value::as_str)
                .map(str::to_string),
            exit_code: meta("exitCode").and_then(Value::as_i64),
            signal: meta("signal").and_then(Value::as_i64),
            id: task.id.clone(),
            context_id: task.context_id.clone(),
            state: state_name(task.status.state).to_string(),
            agent: task
                .metadata
                .as_ref()
                .and_then(|m| m.get("adapter"))
                .and_then(Value::as_str)
                .map(str::to_string),
            message: status.map(|m| m.text()).filter(|t| !t.is_empty()),
            answer,
            question: (task.status.state == TaskState::InputRequired)
                .then(|| status.and_then(|m| first_data(&m.parts)))
                .flatten()
                .map(mcp_question),
            changes: changes_artifact(task)
                .and_then(|a| first_data(&a.parts))
                .filter(has_changes),
        }
    }

    /// Whether the task failed: the tool's answer is then marked `isError`.
    pub fn is_error(&self) -> bool {
        matches!(self.state.as_str(), "failed" | "rejected")
    }

    /// What the task says: its error when it failed, else its answer (or status message).
    fn said(&self) -> Option<&str> {
        let (answer, message) = (self.answer.as_deref(), self.message.as_deref());
        if self.is_error() {
            message.or(answer)
        } else {
            answer.or(message)
        }
    }

    /// A line or two for a person: the task, its state, and what it says.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "Task {} (context {}) is {}.",
            self.id, self.context_id, self.state
        );
        if let Some(q) = &self.question {
            s.push_str(&format!(
                "\nThe agent asks: {}\nAnswer with reply (taskId {}).",
                self.message.as_deref().unwrap_or(""),
                self.id
            ));
            if let Some(tool) = q.get("tool").and_then(Value::as_str) {
                s.push_str(&format!(" Tool: {tool}."));
            }
        } else if let Some(text) = self.said() {
            s.push('\n');
            s.push_str(text);
        }
        let mut why = Vec::new();
        if let Some(k) = &self.error_kind {
            why.push(format!("error kind {k}"));
        }
        if let Some(c) = self.exit_code {
            why.push(format!("exit code {c}"));
        }
        if let Some(sig) = self.signal {
            why.push(format!("signal {sig}"));
        }
        if !why.is_empty() {
            s.push_str(&format!("\n({})", why.join(", ")));
        }
        let changes = self.changes.as_ref();
        if let Some(files) = changes
            .and_then(|c| c.get("files"))
            .and_then(Value::as_array)
        {
            s.push_str(&format!(
                "\nChanged {} file(s); get_changes gives the patch.",
                files.len()
            ));
        } else if let Some(why) = changes.and_then(|c| c.get("error")).and_then(Value::as_str) {
            s.push_str(&format!("\nThe change could not be taken: {why}"));
        }
        s
    }
}

fn is_failure(state: TaskState) -> bool {
    matches!(state, TaskState::Failed | TaskState::Rejected)
}

/// A question's data part as an MCP caller answers it: its `answer` hint (written for A2A,
/// "reply on this task ... a data part ...") says how to answer with the `reply` tool.
fn mcp_question(mut q: Value) -> Value {
    let Some(o) = q.as_object_mut() else {
        return q;
    };
    if !o.contains_key("answer") {
        return q;
    }
    let how = match o.get("kind").and_then(Value::as_str) {
        Some("question") => "Answer with the reply tool: your answer as text.",
        Some("budget") => {
            "Answer with the reply tool: text 'continue' (or 'continue with N') or 'stop'."
        }
        _ => "Answer with the reply tool: decision allow or deny (or text yes or no).",
    };
    o.insert("answer".into(), Value::String(how.into()));
    q
}

/// Whether a `changes` artifact's data part is worth showing: it lists changed files, or
/// says why the change could not be taken (`error`, no `files`). An empty file list (the
/// workspace is as its base: a turn that waits for input before any edit, failed, was
/// canceled or had its edit denied) is nothing to show.
fn has_changes(data: &Value) -> bool {
    match data.get("files") {
        Some(Value::Array(files)) => !files.is_empty(),
        _ => data.get("error").is_some(),
    }
}

/// The state's name in the tools' answers (the A2A state, lower case with dashes).
pub fn state_name(s: TaskState) -> &'static str {
    match s {
        TaskState::Unspecified => "unknown",
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input-required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth-required",
    }
}

/// The text parts of the task's artifact of that name, joined.
fn artifact_text(task: &Task, name: &str) -> Option<String> {
    let a = task
        .artifacts
        .iter()
        .rev()
        .find(|a| a.name.as_deref() == Some(name))?;
    let text: Vec<&str> = a.parts.iter().filter_map(|p| p.text.as_deref()).collect();
    Some(text.concat()).filter(|t| !t.is_empty())
}

fn first_data(parts: &[Part]) -> Option<Value> {
    parts.iter().find_map(|p| p.data.clone())
}

/// The task's `changes` artifact, if it has one.
pub fn changes_artifact(task: &Task) -> Option<&Artifact> {
    task.artifacts
        .iter()
        .rev()
        .find(|a| a.name.as_deref() == Some(CHANGES_ARTIFACT))
}

/// A context's changes as `get_changes` answers them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChangesView {
    /// The context whose workspace changed.
    pub context_id: String,
    /// The task whose turn made the latest change.
    pub task_id: String,
    /// The changed files as the `changes` artifact lists them.
    pub files: Value,
    /// The whole change as a unified diff (`changes.patch`).
    pub patch: String,
}

impl ChangesView {
    /// The changes of `task`, when it has a `changes` artifact.
    pub fn of(task: &Task) -> Option<ChangesView> {
        let a = changes_artifact(task)?;
        let data = first_data(&a.parts).unwrap_or(Value::Null);
        let files = data.get("files").cloned().unwrap_or(data);
        let patch = a
            .parts
            .iter()
            .find(|p| p.filename.as_deref() == Some("changes.patch"))
            .and_then(part_text)
            .unwrap_or_default();
        Some(ChangesView {
            context_id: task.context_id.clone(),
            task_id: task.id.clone(),
            files,
            patch,
        })
    }

    pub fn summary(&self) -> String {
        let n = self.files.as_array().map_or(0, Vec::len);
        format!(
            "Context {}: {n} changed file(s) (task {}).\n{}",
            self.context_id, self.task_id, self.patch
        )
    }
}

/// A file part's content as text: inline text, or base64 `raw` bytes.
fn part_text(p: &Part) -> Option<String> {
    if let Some(t) = &p.text {
        return Some(t.clone());
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(p.raw.as_deref()?)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// One event of a task's log, as `get_task` lists them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventView {
    /// Sequence number: pass the last one seen as `afterEvent` to get only newer ones.
    pub seq: u64,
    /// status, artifact, task or user-message.
    pub kind: String,
    /// The task's state after a status event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The artifact's name (assistant-response, result, changes, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<String>,
    /// The event's text (a tool use, a piece of the answer, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The first data part (an approval's details, a tool's input, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl EventView {
    pub fn of(e: &LoggedEvent) -> EventView {
        let mut v = EventView {
            seq: e.seq,
            kind: String::new(),
            state: None,
            artifact: None,
            text: None,
            data: None,
        };
        let text = |parts: &[Part]| {
            let t: Vec<&str> = parts.iter().filter_map(|p| p.text.as_deref()).collect();
            Some(t.concat()).filter(|t| !t.is_empty())
        };
        match &e.event {
            TaskEvent::Stream(StreamResponse::StatusUpdate(u)) => {
                v.kind = "status".into();
                v.state = Some(state_name(u.status.state).into());
                if let Some(m) = &u.status.message {
                    v.text = text(&m.parts);
                    v.data = first_data(&m.parts);
                }
            }
            TaskEvent::Stream(StreamResponse::ArtifactUpdate(u)) => {
                v.kind = "artifact".into();
                v.artifact = u.artifact.name.clone();
                v.text = text(&u.artifact.parts);
                v.data = first_data(&u.artifact.parts);
            }
            TaskEvent::Stream(StreamResponse::Task(t)) => {
                v.kind = "task".into();
                v.state = Some(state_name(t.status.state).into());
            }
            TaskEvent::Stream(StreamResponse::Message(m)) => {
                v.kind = "message".into();
                v.text = text(&m.parts);
            }
            TaskEvent::UserMessage(m) => {
                v.kind = "user-message".into();
                v.text = text(&m.parts);
                v.data = first_data(&m.parts);
            }
        }
        v
    }

    /// The line a progress notification carries: the event's text, or what happened.
    pub fn progress_line(&self) -> Option<String> {
        match (self.kind.as_str(), &self.text) {
            (_, Some(t)) => Some(t.clone()),
            ("status", None) => self.state.as_ref().map(|s| format!("task is {s}")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{Message, Role, TaskStatus};

    fn task(state: TaskState) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state,
                message: Some(Message {
                    message_id: "m".into(),
                    role: Role::Agent,
                    parts: vec![
                        Part::text("May I run ls?"),
                        Part::data(serde_json::json!({"approvalId": "a1", "tool": "Bash"})),
                    ],
                    ..Message::default()
                }),
                timestamp: None,
            },
            artifacts: vec![Artifact {
                artifact_id: "r".into(),
                name: Some("result".into()),
                parts: vec![Part::text("done")],
                ..Artifact::default()
            }],
            ..Task::default()
        }
    }

    #[test]
    fn a_waiting_task_shows_its_question_and_no_answer() {
        let v = TaskView::of(&task(TaskState::InputRequired));
        assert_eq!(v.state, "input-required");
        assert_eq!(v.question.unwrap()["approvalId"], "a1");
        assert!(v.answer.is_none());
    }

    #[test]
    fn an_ended_task_shows_its_answer_and_changes() {
        let mut t = task(TaskState::Completed);
        t.artifacts.push(Artifact {
            artifact_id: "ch".into(),
            name: Some(CHANGES_ARTIFACT.into()),
            parts: vec![
                Part::data(serde_json::json!({"files": [{"path": "a.txt"}]})),
                Part {
                    filename: Some("changes.patch".into()),
                    raw: Some(base64::engine::general_purpose::STANDARD.encode("+a\n")),
                    ..Part::default()
                },
            ],
            ..Artifact::default()
        });
        let v = TaskView::of(&t);
        assert_eq!(v.answer.as_deref(), Some("done"));
        assert!(v.question.is_none());
        assert!(v.summary().contains("Changed 1 file(s)"));
        let c = ChangesView::of(&t).unwrap();
        assert_eq!(c.patch, "+a\n");
        assert_eq!(c.files[0]["path"], "a.txt");
    }

    #[test]
    fn a_failed_task_is_an_error_that_says_why() {
        let mut t = task(TaskState::Failed);
        t.status.message = Some(Message {
            message_id: "m".into(),
            role: Role::Agent,
            parts: vec![Part::text(
                "The agent exited with code 3 before finishing its turn",
            )],
            ..Message::default()
        });
        t.metadata = serde_json::json!({"adapter": "demo", "errorKind": "auth", "exitCode": 3})
            .as_object()
            .cloned();
        let v = TaskView::of(&t);
        assert!(v.is_error());
        let text = v.summary();
        assert!(
            text.contains("exited with code 3") && text.contains("error kind auth, exit code 3"),
            "{text}"
        );
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(
            (&json["errorKind"], &json["exitCode"]),
            (&serde_json::json!("auth"), &serde_json::json!(3))
        );
        // A task that did not fail is no error, whatever its metadata says.
        t.status.state = TaskState::Completed;
        let v = TaskView::of(&t);
        assert!(!v.is_error() && v.error_kind.is_none() && v.exit_code.is_none());
        assert!(!TaskView::of(&task(TaskState::Canceled)).is_error());
    }

    #[test]
    fn a_question_says_to_answer_it_with_the_reply_tool() {
        let asked = |kind: &str| {
            let mut t = task(TaskState::InputRequired);
            if let Some(m) = t.status.message.as_mut() {
                m.parts[1] = Part::data(serde_json::json!({"approvalId": "a1", "kind": kind,
                    "answer": "Reply on this task: text yes/no, or a data part {...}"}));
            }
            let q = TaskView::of(&t).question.unwrap();
            q["answer"].as_str().unwrap().to_string()
        };
        for kind in ["command", "question", "budget"] {
            let how = asked(kind);
            assert!(
                how.contains("reply tool") && !how.contains("data part"),
                "{kind}: {how}"
            );
        }
        assert!(asked("command").contains("decision allow or deny"));
        assert!(asked("question").contains("as text"));
    }

    fn with_changes(state: TaskState, data: Value) -> Task {
        let mut t = task(state);
        t.artifacts.push(Artifact {
            artifact_id: "ch".into(),
            name: Some(CHANGES_ARTIFACT.into()),
            parts: vec![Part::data(data)],
            ..Artifact::default()
        });
        t
    }

    #[test]
    fn a_turn_that_changed_nothing_shows_no_changes() {
        let empty = serde_json::json!({"base": {"ref": "main"}, "files": [], "truncated": false});
        for state in [
            TaskState::InputRequired,
            TaskState::Failed,
            TaskState::Canceled,
            TaskState::Completed,
        ] {
            let v = TaskView::of(&with_changes(state, empty.clone()));
            assert!(v.changes.is_none(), "{state:?}: {:?}", v.changes);
            let text = v.summary();
            assert!(!text.contains("Changed"), "{state:?}: {text}");
            let json = serde_json::to_value(&v).unwrap();
            assert!(json.get("changes").is_none(), "{state:?}: {json}");
        }
        // A change that could not be taken is still told.
        let failed = serde_json::json!({"base": {"ref": "main"}, "error": "the workspace's git folder (.git) is gone"});
        let v = TaskView::of(&with_changes(TaskState::Completed, failed));
        assert!(v.changes.is_some());
        assert!(v
            .summary()
            .contains("could not be taken: the workspace's git folder"));
    }
}
