//! [`AgentEvent`] → A2A updates for one turn (DESIGN.md §4).
//!
//! | AgentEvent | update |
//! |---|---|
//! | Init | status `working` with `sessionId`/`model` metadata; `agent-metadata` data artifact |
//! | Text | `assistant-response` artifact, appended |
//! | Thinking | dropped (logged by the engine) |
//! | ToolUse / ToolResult | status `working` with a message naming the tool / its output |
//! | ApprovalRequired | status `input-required` with the approval as a data part |
//! | Usage | task metadata, sent with the next status update |
//! | Done | `result` artifact + `completed` (or `failed` when `is_error`); no `result` artifact when the agent sent its own |
//! | Error | `failed` |
//! | Artifact | the agent's own artifact (chunk), as sent |
//! | Message | `completed` with the message, task metadata `directMessage: true` (a blocking send answers with the message) |
//! | Rejected | `rejected` |
//! | Warning | nothing |
//!
//! The mapper guarantees at most one terminal state per turn; [`TurnMapper::on_exit`] makes
//! it exactly one, whatever way the CLI ended.

use serde_json::{json, Map, Value};

use crate::adapter::{AgentEvent, Usage};
use crate::protocol::v1::{
    Artifact, Message, Part, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};

use super::now_timestamp;

/// Artifact holding the streamed answer.
pub const ANSWER_ARTIFACT: &str = "assistant-response";
/// Artifact holding the final result.
pub const RESULT_ARTIFACT: &str = "result";
/// Artifact holding what the CLI said about itself at start (session, model, tools).
pub const METADATA_ARTIFACT: &str = "agent-metadata";

/// Task metadata key set when the agent answered with a message instead of working on a
/// task: a blocking send returns that message (the task's final status message).
pub const DIRECT_MESSAGE_KEY: &str = "directMessage";

/// Longest tool output copied into a status message.
const TOOL_OUTPUT_MAX: usize = 2000;
/// Longest answer text kept to fill the result when the CLI ends without one.
const ANSWER_KEEP_MAX: usize = 1 << 20;

/// Why a turn's process ended, when the mapper has not seen a terminal event.
#[derive(Debug, Clone, PartialEq)]
pub enum ExitReason {
    /// The process exited by itself.
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
        stderr_tail: String,
    },
    /// The process could not be started.
    SpawnFailed(String),
    /// No output for too long.
    IdleTimeout { secs: u64 },
    /// The hard time limit of a task.
    HardTimeout { secs: u64 },
    /// A client canceled the task.
    Canceled,
    /// The host is shutting down.
    Shutdown,
    /// The host restarted while the task ran, and its CLI session cannot be resumed.
    Restarted,
}

/// Maps one turn's AgentEvents to task updates.
#[derive(Debug)]
pub struct TurnMapper {
    task_id: String,
    context_id: String,
    state: TaskState,
    answer_started: bool,
    answer: String,
    pending_metadata: Map<String, Value>,
    pending_approval: Option<(String, String)>,
    redactor: super::Redactor,
    /// Bytes of answer text kept; beyond, text is dropped (once noted).
    output_limit: usize,
    answer_bytes: usize,
    truncated: bool,
    /// The agent sent artifacts of its own: the turn adds no `result` artifact.
    own_artifacts: bool,
}

impl TurnMapper {
    pub fn new(task_id: &str, context_id: &str) -> TurnMapper {
        TurnMapper {
            task_id: task_id.to_string(),
            context_id: context_id.to_string(),
            state: TaskState::Submitted,
            answer_started: false,
            answer: String::new(),
            pending_metadata: Map::new(),
            pending_approval: None,
            redactor: super::Redactor::default(),
            output_limit: usize::MAX,
            answer_bytes: 0,
            truncated: false,
            own_artifacts: false,
        }
    }

    /// Hides local paths and secrets in the error texts this mapper produces.
    pub fn with_redactor(mut self, redactor: super::Redactor) -> TurnMapper {
        self.redactor = redactor;
        self
    }

    /// Keeps at most `bytes` of answer text; more is dropped, with one note.
    pub fn with_output_limit(mut self, bytes: usize) -> TurnMapper {
        self.output_limit = bytes;
        self
    }

    /// The state after the updates produced so far.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// The id and kind of the approval request the task waits on, if any.
    pub fn pending_approval(&self) -> Option<(&str, &str)> {
        self.pending_approval
            .as_ref()
            .map(|(id, kind)| (id.as_str(), kind.as_str()))
    }

    /// Adds metadata sent with the next status update (and merged into the task).
    pub fn add_metadata(&mut self, key: &str, value: Value) {
        self.pending_metadata.insert(key.to_string(), value);
    }

    /// The turn continues a task that already streamed part of its answer: new text is
    /// appended to it.
    pub fn continue_answer(&mut self) {
        self.answer_started = true;
    }

    /// The task started running.
    pub fn started(&mut self) -> Vec<StreamResponse> {
        vec![self.status(TaskState::Working, None)]
    }

    /// The client answered the pending approval; the task works again.
    pub fn resumed(&mut self, note: &str) -> Vec<StreamResponse> {
        self.pending_approval = None;
        vec![self.status(TaskState::Working, Some(self.agent_text(note)))]
    }

    /// Maps one event. After a terminal state, further events produce nothing.
    pub fn on_event(&mut self, ev: AgentEvent) -> Vec<StreamResponse> {
        if self.state.is_terminal() {
            return Vec::new();
        }
        match ev {
            AgentEvent::Init {
                session_id,
                model,
                cwd,
                tools,
            } => {
                let mut data = Map::new();
                if let Some(s) = &session_id {
                    self.pending_metadata.insert("sessionId".into(), json!(s));
                    data.insert("sessionId".into(), json!(s));
                }
                if let Some(m) = &model {
                    self.pending_metadata.insert("model".into(), json!(m));
                    data.insert("model".into(), json!(m));
                }
                if let Some(c) = cwd {
                    data.insert("cwd".into(), json!(c));
                }
                data.insert("tools".into(), json!(tools));
                vec![
                    self.status(TaskState::Working, None),
                    self.artifact(METADATA_ARTIFACT, Part::data(Value::Object(data)), false),
                ]
            }
            AgentEvent::Text { text, delta } => {
                if text.is_empty() {
                    return Vec::new();
                }
                self.answer_bytes = self.answer_bytes.saturating_add(text.len());
                if self.answer_bytes > self.output_limit {
                    if self.truncated {
                        return Vec::new();
                    }
                    self.truncated = true;
                    self.pending_metadata
                        .insert("outputTruncated".into(), json!(true));
                    let note = format!(
                        "The agent's output passed the limit of {} bytes kept per task; the rest is not kept",
                        self.output_limit
                    );
                    let msg = self.agent_text(&note);
                    return vec![self.status(TaskState::Working, Some(msg))];
                }
                let chunk = if !delta && self.answer_started {
                    format!("\n\n{text}")
                } else {
                    text
                };
                if self.answer.len() < ANSWER_KEEP_MAX {
                    self.answer.push_str(&chunk);
                }
                let append = self.answer_started;
                self.answer_started = true;
                let mut out = Vec::new();
                if self.state != TaskState::Working {
                    out.push(self.status(TaskState::Working, None));
                }
                out.push(self.artifact(ANSWER_ARTIFACT, Part::text(chunk), append));
                out
            }
            AgentEvent::Thinking { .. } | AgentEvent::Warning { .. } => Vec::new(),
            AgentEvent::ToolUse { id, name, input } => {
                let mut msg = self.agent_text(&format!("Using tool: {name}"));
                msg.metadata = Some(obj(
                    json!({"toolUseId": id, "toolName": name, "toolInput": input}),
                ));
                vec![self.status(TaskState::Working, Some(msg))]
            }
            AgentEvent::ToolResult {
                id,
                output,
                is_error,
            } => {
                let output = if is_error {
                    self.redactor.clean(&output)
                } else {
                    output
                };
                let shown = truncate_chars(&output, TOOL_OUTPUT_MAX);
                let text = if is_error {
                    format!("Tool failed: {shown}")
                } else {
                    format!("Tool result: {shown}")
                };
                let mut msg = self.agent_text(&text);
                msg.metadata = Some(obj(json!({"toolUseId": id, "isError": is_error})));
                vec![self.status(TaskState::Working, Some(msg))]
            }
            AgentEvent::ApprovalRequired {
                id,
                kind,
                tool,
                target,
                detail,
                options,
            } => {
                let what =
                    approval_text(&kind, tool.as_deref(), target.as_deref(), detail.as_deref());
                let data = approval_data(
                    &id,
                    &kind,
                    tool.as_deref(),
                    target.as_deref(),
                    detail.as_deref(),
                    &options,
                );
                self.pending_approval = Some((id, kind));
                let msg = Message::agent(
                    vec![Part::text(what), Part::data(data)],
                    &self.task_id,
                    &self.context_id,
                );
                vec![self.status(TaskState::InputRequired, Some(msg))]
            }
            AgentEvent::Usage(u) => {
                self.pending_metadata.insert("usage".into(), usage_json(&u));
                Vec::new()
            }
            AgentEvent::Done { result, is_error } => {
                let text = result
                    .filter(|r| !r.is_empty())
                    .unwrap_or_else(|| self.answer.clone());
                if is_error {
                    let text = self.redactor.clean(&text);
                    let msg = self.agent_text(if text.is_empty() {
                        "The agent reported an error"
                    } else {
                        &text
                    });
                    return vec![self.status(TaskState::Failed, Some(msg))];
                }
                self.complete(text)
            }
            AgentEvent::Artifact {
                artifact_id,
                name,
                parts,
                append,
                last_chunk,
            } => {
                self.own_artifacts = true;
                let mut out = Vec::new();
                if self.state != TaskState::Working {
                    out.push(self.status(TaskState::Working, None));
                }
                out.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                    task_id: self.task_id.clone(),
                    context_id: self.context_id.clone(),
                    artifact: Artifact {
                        artifact_id,
                        name,
                        parts,
                        ..Artifact::default()
                    },
                    append,
                    last_chunk,
                    metadata: None,
                }));
                out
            }
            AgentEvent::Message { text } => {
                self.pending_metadata
                    .insert(DIRECT_MESSAGE_KEY.into(), json!(true));
                let msg = self.agent_text(&text);
                vec![self.status(TaskState::Completed, Some(msg))]
            }
            AgentEvent::Rejected { message } => {
                let msg = self.agent_text(&self.redactor.clean(&message));
                vec![self.status(TaskState::Rejected, Some(msg))]
            }
            AgentEvent::Error { message, kind } => {
                if let Some(k) = kind {
                    self.pending_metadata.insert("errorKind".into(), json!(k));
                }
                let msg = self.agent_text(&self.redactor.clean(&message));
                vec![self.status(TaskState::Failed, Some(msg))]
            }
        }
    }

    /// The process ended (or was ended). Produces the terminal state if none was produced.
    pub fn on_exit(&mut self, reason: ExitReason) -> Vec<StreamResponse> {
        if self.state.is_terminal() {
            return Vec::new();
        }
        let (state, text) = match reason {
            ExitReason::Exited {
                code: Some(0),
                signal: None,
                ..
            } => return self.complete(self.answer.clone()),
            ExitReason::Exited {
                code,
                signal,
                stderr_tail,
            } => {
                self.pending_metadata.insert("exitCode".into(), json!(code));
                if let Some(s) = signal {
                    self.pending_metadata.insert("signal".into(), json!(s));
                }
                let how = match (code, signal) {
                    (_, Some(s)) => format!("The agent was killed by signal {s}"),
                    (Some(c), None) => format!("The agent exited with code {c}"),
                    (None, None) => "The agent exited".to_string(),
                };
                let tail = self.redactor.clean(stderr_tail.trim());
                let tail = tail.trim();
                let text = if tail.is_empty() {
                    format!("{how} before finishing its turn")
                } else {
                    format!("{how} before finishing its turn: {tail}")
                };
                (TaskState::Failed, text)
            }
            ExitReason::SpawnFailed(why) => (
                TaskState::Failed,
                format!(
                    "The agent could not be started: {}",
                    self.redactor.clean(&why)
                ),
            ),
            ExitReason::IdleTimeout { secs } => (
                TaskState::Failed,
                format!("The agent printed nothing for {secs} s and was stopped (idle timeout)"),
            ),
            ExitReason::HardTimeout { secs } => (
                TaskState::Failed,
                format!("The task ran longer than its limit of {secs} s and was stopped"),
            ),
            ExitReason::Canceled => (TaskState::Canceled, "The task was canceled".to_string()),
            ExitReason::Shutdown => (
                TaskState::Failed,
                "agent-host shut down before the task finished".to_string(),
            ),
            ExitReason::Restarted => (
                TaskState::Failed,
                "agent-host restarted while this task was running, and the agent's session cannot be resumed; send the message again".to_string(),
            ),
        };
        let msg = self.agent_text(&text);
        vec![self.status(state, Some(msg))]
    }

    fn complete(&mut self, text: String) -> Vec<StreamResponse> {
        if self.own_artifacts {
            let msg = (!text.is_empty()).then(|| self.agent_text(&text));
            return vec![self.status(TaskState::Completed, msg)];
        }
        let result_text = if text.is_empty() {
            "The agent finished without output".to_string()
        } else {
            text
        };
        let artifact = self.artifact(RESULT_ARTIFACT, Part::text(result_text.clone()), false);
        let msg = self.agent_text(&result_text);
        vec![artifact, self.status(TaskState::Completed, Some(msg))]
    }

    fn agent_text(&self, text: &str) -> Message {
        Message::agent(vec![Part::text(text)], &self.task_id, &self.context_id)
    }

    fn status(&mut self, state: TaskState, message: Option<Message>) -> StreamResponse {
        self.state = state;
        let metadata = if self.pending_metadata.is_empty() {
            None
        } else {
            Some(std::mem::take(&mut self.pending_metadata))
        };
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            status: TaskStatus {
                state,
                message,
                timestamp: Some(now_timestamp()),
            },
            metadata,
        })
    }

    fn artifact(&self, id: &str, part: Part, append: bool) -> StreamResponse {
        StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact: Artifact {
                artifact_id: id.to_string(),
                name: Some(id.to_string()),
                parts: vec![part],
                ..Artifact::default()
            },
            append,
            last_chunk: false,
            metadata: None,
        })
    }
}

/// The readable text of an approval request: a question as asked; a permission request as
/// "The agent asks to use Bash: rm -rf build (detail)".
fn approval_text(
    kind: &str,
    tool: Option<&str>,
    target: Option<&str>,
    detail: Option<&str>,
) -> String {
    if kind == "question" {
        return detail
            .or(target)
            .map(str::to_string)
            .unwrap_or_else(|| "The agent asks a question".to_string());
    }
    let mut s = match tool {
        Some(t) => format!("The agent asks for approval to use {t}"),
        None => format!("The agent asks for approval ({kind})"),
    };
    if let Some(t) = target {
        s.push_str(": ");
        s.push_str(t);
    }
    if let Some(d) = detail.filter(|d| Some(*d) != target) {
        s.push_str(&format!(" ({d})"));
    }
    s.push_str(". Answer yes or no.");
    s
}

/// The cross-CLI shape of an approval request, sent as a data part of the input-required
/// status message: `approvalId`, `kind` (command, file-edit, tool, question, other), `tool`,
/// `target`, `detail`, `options` (each `{id, label}`), and how to answer.
pub fn approval_data(
    id: &str,
    kind: &str,
    tool: Option<&str>,
    target: Option<&str>,
    detail: Option<&str>,
    options: &[crate::adapter::ApprovalOption],
) -> Value {
    let options: Vec<Value> = options
        .iter()
        .map(|o| json!({"id": o.id, "label": o.label}))
        .collect();
    json!({
        "approvalId": id,
        "kind": kind,
        "tool": tool,
        "target": target,
        "detail": detail,
        "options": options,
        "answer": "Reply on this task: text yes/no, or a data part {\"approvalId\": ..., \"decision\": \"allow\"|\"deny\"}",
    })
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn usage_json(u: &Usage) -> Value {
    let mut m = Map::new();
    if let Some(v) = u.input_tokens {
        m.insert("inputTokens".into(), json!(v));
    }
    if let Some(v) = u.output_tokens {
        m.insert("outputTokens".into(), json!(v));
    }
    if let Some(v) = u.cost_usd {
        m.insert("costUsd".into(), json!(v));
    }
    if let Some(v) = u.duration_ms {
        m.insert("durationMs".into(), json!(v));
    }
    Value::Object(m)
}

fn truncate_chars(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &s[..end], s.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(updates: &[StreamResponse]) -> Vec<TaskState> {
        updates
            .iter()
            .filter_map(|u| match u {
                StreamResponse::StatusUpdate(s) => Some(s.status.state),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_normal_turn() {
        let mut m = TurnMapper::new("t", "c");
        assert_eq!(states(&m.started()), vec![TaskState::Working]);
        let init = m.on_event(AgentEvent::Init {
            session_id: Some("s1".into()),
            model: Some("m1".into()),
            cwd: None,
            tools: vec![],
        });
        match &init[0] {
            StreamResponse::StatusUpdate(u) => {
                assert_eq!(u.metadata.as_ref().unwrap()["sessionId"], "s1")
            }
            other => panic!("{other:?}"),
        }
        let a = m.on_event(AgentEvent::Text {
            text: "Hel".into(),
            delta: true,
        });
        let b = m.on_event(AgentEvent::Text {
            text: "lo".into(),
            delta: true,
        });
        match (&a[0], &b[0]) {
            (StreamResponse::ArtifactUpdate(x), StreamResponse::ArtifactUpdate(y)) => {
                assert!(!x.append);
                assert!(y.append);
                assert_eq!(x.artifact.artifact_id, ANSWER_ARTIFACT);
            }
            other => panic!("{other:?}"),
        }
        m.on_event(AgentEvent::Usage(Usage {
            input_tokens: Some(1),
            ..Usage::default()
        }));
        let done = m.on_event(AgentEvent::Done {
            result: None,
            is_error: false,
        });
        assert_eq!(states(&done), vec![TaskState::Completed]);
        match &done[0] {
            StreamResponse::ArtifactUpdate(r) => {
                assert_eq!(r.artifact.artifact_id, RESULT_ARTIFACT);
                assert_eq!(r.artifact.parts[0].text.as_deref(), Some("Hello"));
            }
            other => panic!("{other:?}"),
        }
        match &done[1] {
            StreamResponse::StatusUpdate(u) => {
                assert_eq!(u.metadata.as_ref().unwrap()["usage"]["inputTokens"], 1)
            }
            other => panic!("{other:?}"),
        }
        // Exactly one terminal state: the exit adds nothing.
        assert!(m
            .on_exit(ExitReason::Exited {
                code: Some(0),
                signal: None,
                stderr_tail: String::new()
            })
            .is_empty());
        assert!(m
            .on_event(AgentEvent::Error {
                message: "late".into(),
                kind: None
            })
            .is_empty());
    }

    #[test]
    fn every_exit_path_gives_one_terminal_state() {
        let cases = [
            (
                ExitReason::Exited {
                    code: Some(0),
                    signal: None,
                    stderr_tail: String::new(),
                },
                TaskState::Completed,
            ),
            (
                ExitReason::Exited {
                    code: Some(2),
                    signal: None,
                    stderr_tail: "boom".into(),
                },
                TaskState::Failed,
            ),
            (
                ExitReason::Exited {
                    code: None,
                    signal: Some(6),
                    stderr_tail: String::new(),
                },
                TaskState::Failed,
            ),
            (ExitReason::SpawnFailed("x".into()), TaskState::Failed),
            (ExitReason::IdleTimeout { secs: 1 }, TaskState::Failed),
            (ExitReason::HardTimeout { secs: 1 }, TaskState::Failed),
            (ExitReason::Canceled, TaskState::Canceled),
            (ExitReason::Shutdown, TaskState::Failed),
            (ExitReason::Restarted, TaskState::Failed),
        ];
        for (reason, want) in cases {
            let mut m = TurnMapper::new("t", "c");
            m.started();
            let out = m.on_exit(reason.clone());
            assert_eq!(states(&out), vec![want], "{reason:?}");
            assert!(m.on_exit(reason).is_empty());
        }
    }

    #[test]
    fn approval_goes_input_required_with_a_data_part() {
        let mut m = TurnMapper::new("t", "c");
        let out = m.on_event(AgentEvent::ApprovalRequired {
            id: "a1".into(),
            kind: "command".into(),
            tool: Some("Bash".into()),
            target: Some("rm -rf build".into()),
            detail: None,
            options: vec![],
        });
        assert_eq!(states(&out), vec![TaskState::InputRequired]);
        assert_eq!(m.pending_approval(), Some(("a1", "command")));
        match &out[0] {
            StreamResponse::StatusUpdate(u) => {
                let msg = u.status.message.as_ref().unwrap();
                assert_eq!(msg.parts[1].data.as_ref().unwrap()["approvalId"], "a1");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(states(&m.resumed("Approved")), vec![TaskState::Working]);
        assert_eq!(m.pending_approval(), None);
    }

    #[test]
    fn own_artifacts_replace_the_result_artifact() {
        let mut m = TurnMapper::new("t", "c");
        m.started();
        let chunk = |text: &str, append, last_chunk| AgentEvent::Artifact {
            artifact_id: "a".into(),
            name: None,
            parts: vec![Part::text(text)],
            append,
            last_chunk,
        };
        let first = m.on_event(chunk("one ", false, false));
        let second = m.on_event(chunk("two", true, true));
        match (&first[0], &second[0]) {
            (StreamResponse::ArtifactUpdate(x), StreamResponse::ArtifactUpdate(y)) => {
                assert_eq!(x.artifact.artifact_id, "a");
                assert!(!x.append && !x.last_chunk);
                assert!(y.append && y.last_chunk);
                assert_eq!(y.artifact.parts[0].text.as_deref(), Some("two"));
            }
            other => panic!("{other:?}"),
        }
        let done = m.on_event(AgentEvent::Done {
            result: Some("Hello".into()),
            is_error: false,
        });
        assert_eq!(done.len(), 1, "no result artifact: {done:?}");
        assert_eq!(states(&done), vec![TaskState::Completed]);
    }

    #[test]
    fn direct_messages_and_rejections_end_the_turn() {
        let mut m = TurnMapper::new("t", "c");
        m.started();
        let out = m.on_event(AgentEvent::Message {
            text: "Direct".into(),
        });
        assert_eq!(states(&out), vec![TaskState::Completed]);
        match &out[0] {
            StreamResponse::StatusUpdate(u) => {
                assert_eq!(u.metadata.as_ref().unwrap()[DIRECT_MESSAGE_KEY], true);
                assert_eq!(u.status.message.as_ref().unwrap().text(), "Direct");
            }
            other => panic!("{other:?}"),
        }
        let mut m = TurnMapper::new("t", "c");
        let out = m.on_event(AgentEvent::Rejected {
            message: "rejected".into(),
        });
        assert_eq!(states(&out), vec![TaskState::Rejected]);
        assert!(m.on_exit(ExitReason::Canceled).is_empty());
    }

    #[test]
    fn tool_output_is_truncated() {
        let mut m = TurnMapper::new("t", "c");
        let out = m.on_event(AgentEvent::ToolResult {
            id: "1".into(),
            output: "x".repeat(10_000),
            is_error: false,
        });
        match &out[0] {
            StreamResponse::StatusUpdate(u) => {
                let t = u.status.message.as_ref().unwrap().text();
                assert!(t.len() < 2100, "{}", t.len());
                assert!(t.contains("10000 bytes"));
            }
            other => panic!("{other:?}"),
        }
    }
}
