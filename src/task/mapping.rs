//! [`AgentEvent`] → A2A updates for one turn.
//!
//! | AgentEvent | update |
//! |---|---|
//! | Init | status `working` with `sessionId`/`model` metadata; `agent-metadata` data artifact |
//! | Text | `assistant-response` artifact, appended |
//! | Thinking | dropped (logged by the engine); with the tool-trace extension, a `working` status whose message is one text part with `metadata.thought: true` |
//! | ToolUse / ToolResult | status `working` with a message naming the tool / its output; with the tool-trace extension the message also has a DataPart `{id, name, args}` / `{id, response, isError}` with `metadata.type` `function_call` / `function_response` |
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

use crate::adapter::{error_kind, AgentEvent};
use crate::protocol::v1::{
    Artifact, Message, Part, StreamResponse, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};

use super::now_timestamp;

mod parts;
pub use parts::approval_data;
use parts::{approval_text, last_lines, prefix, truncate_chars, usage_json};

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

/// Output lines that stand for the error text of a program that failed without stderr.
const EXIT_TAIL_LINES: usize = 5;

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
    /// A question waited longer than the input timeout for its answer.
    InputExpired { secs: u64 },
    /// A client canceled the task.
    Canceled,
    /// The host is shutting down.
    Shutdown,
    /// The host restarted while the task ran, and its CLI session cannot be resumed.
    Restarted,
    /// The host's own code failed (a panic) while it ran the task's turn: the program was
    /// stopped and the task fails, instead of staying `working` with nothing running it.
    Crashed,
    /// The task ran into a limit of its sandbox (`its memory limit (256 MiB, task_memory)`).
    LimitReached(String),
    /// The task store refused the task's events (disk full, database gone): the task was
    /// stopped, since what it does could not be kept.
    StoreFailed(String),
    /// The host running the task (this id) stopped renewing its lease, and another host took
    /// its tasks over (several hosts on one database).
    HostLost(String),
    /// The task reached its budget and fails (`on_budget = "fail"`): why, and the task's
    /// `budget` metadata (allowed and spent).
    BudgetFailed { text: String, budget: Value },
    /// The task reached its budget and asks whether to go on (`on_budget = "ask"`): the
    /// task waits for input (not a terminal state) with the question's data part.
    BudgetPaused {
        text: String,
        question: Value,
        budget: Value,
    },
}

/// The task metadata key that names the limit a task ran into (`memory`, `processes`).
pub const LIMIT_REACHED: &str = "limitReached";

/// The limit that `words` (the sandbox's `its memory limit (256 MiB, task_memory)`, `its
/// process limit (64 processes, task_pids)`) names, for [`LIMIT_REACHED`].
pub fn limit_name(words: &str) -> &'static str {
    if words.starts_with("its memory") {
        "memory"
    } else if words.starts_with("its process") {
        "processes"
    } else {
        "limit"
    }
}

/// Says in the update that ends a turn (among `updates`) that a process of the task ran into
/// `limit` although the turn ended otherwise (a child killed at the memory limit while the
/// agent went on): the metadata's [`LIMIT_REACHED`] and a line after the status message.
pub fn note_limit(updates: &mut [StreamResponse], limit: &str) {
    let Some(StreamResponse::StatusUpdate(u)) = updates
        .iter_mut()
        .rev()
        .find(|u| matches!(u, StreamResponse::StatusUpdate(s) if s.status.state.is_terminal()))
    else {
        return;
    };
    u.metadata
        .get_or_insert_with(Map::new)
        .insert(LIMIT_REACHED.into(), json!(limit_name(limit)));
    let line = format!("(A process of this task was stopped at {limit}.)");
    match &mut u.status.message {
        Some(m) => match m.parts.iter_mut().rev().find_map(|p| p.text.as_mut()) {
            Some(t) => {
                t.push_str("\n\n");
                t.push_str(&line);
            }
            None => m.parts.push(Part::text(line)),
        },
        None => {
            u.status.message = Some(Message::agent(
                vec![Part::text(line)],
                &u.task_id,
                &u.context_id,
            ));
        }
    }
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
    /// The tool-trace extension: tool calls and results also as typed DataParts, reasoning
    /// as `thought` text parts.
    tool_trace: bool,
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
            tool_trace: false,
        }
    }

    /// Adds the tool-trace extension's typed parts (see the module doc).
    pub fn with_tool_trace(mut self, on: bool) -> TurnMapper {
        self.tool_trace = on;
        self
    }

    /// Masks secrets (and shortens workspace paths) in the error texts this mapper produces.
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

    /// Maps one event, each kind by a method of its own. After a terminal state, further
    /// events produce nothing.
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
            } => self.on_init(session_id, model, cwd, tools),
            AgentEvent::Text { text, delta } => self.on_text(text, delta),
            AgentEvent::Thinking { text } => self.on_thinking(text),
            AgentEvent::Warning { .. } => Vec::new(),
            AgentEvent::SessionReplaced {
                reason,
                history_told,
            } => self.on_session_replaced(&reason, history_told),
            AgentEvent::ToolUse { id, name, input } => self.on_tool_use(&id, &name, input),
            AgentEvent::ToolResult {
                id,
                output,
                is_error,
            } => self.on_tool_result(&id, output, is_error),
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
                self.on_approval_required(id, kind, what, data)
            }
            AgentEvent::Usage(u) => {
                self.pending_metadata.insert("usage".into(), usage_json(&u));
                Vec::new()
            }
            AgentEvent::Done { result, is_error } => self.on_done(result, is_error),
            AgentEvent::Artifact {
                artifact_id,
                name,
                parts,
                append,
                last_chunk,
            } => {
                let artifact = Artifact {
                    artifact_id,
                    name,
                    parts,
                    ..Artifact::default()
                };
                self.on_artifact(artifact, append, last_chunk)
            }
            AgentEvent::Message { text } => self.on_message(&text),
            AgentEvent::Rejected { message } => {
                let msg = self.agent_text(&self.redactor.clean(&message));
                vec![self.status(TaskState::Rejected, Some(msg))]
            }
            AgentEvent::Error { message, kind } => self.on_error(&message, kind.as_deref()),
        }
    }

    /// The CLI's session, model, working directory and tools: the metadata artifact.
    fn on_init(
        &mut self,
        session_id: Option<String>,
        model: Option<String>,
        cwd: Option<String>,
        tools: Vec<String>,
    ) -> Vec<StreamResponse> {
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

    /// A piece of the answer (`delta`: the continuation of the previous one): the answer
    /// artifact, up to the output limit.
    fn on_text(&mut self, text: String, delta: bool) -> Vec<StreamResponse> {
        if text.is_empty() {
            return Vec::new();
        }
        self.answer_bytes = self.answer_bytes.saturating_add(text.len());
        if self.answer_bytes > self.output_limit {
            return self.over_output_limit();
        }
        let mut chunk = text;
        if !delta && self.answer_started {
            // In place: a chunk may be megabytes, and is not copied.
            chunk.insert_str(0, "\n\n");
        }
        // Only the first MiB is kept here (the artifact has it all).
        let room = ANSWER_KEEP_MAX.saturating_sub(self.answer.len());
        if room > 0 {
            self.answer.push_str(prefix(&chunk, room));
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

    /// The answer passed the output limit: said once, the rest dropped.
    fn over_output_limit(&mut self) -> Vec<StreamResponse> {
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
        vec![self.status(TaskState::Working, Some(msg))]
    }

    /// The agent's reasoning: a thought part, with the tool-trace extension only.
    fn on_thinking(&mut self, text: String) -> Vec<StreamResponse> {
        if !self.tool_trace || text.is_empty() {
            return Vec::new();
        }
        let mut part = Part::text(text);
        part.metadata = Some(obj(json!({"thought": true})));
        let mut msg = self.agent_text("");
        msg.parts = vec![part];
        vec![self.status(TaskState::Working, Some(msg))]
    }

    /// The CLI started a new session instead of resuming its own: said in the task's
    /// metadata, since the agent's own memory of the context is gone and what it knows of it
    /// is what it was told.
    fn on_session_replaced(&mut self, reason: &str, history_told: bool) -> Vec<StreamResponse> {
        self.pending_metadata.insert(
            "sessionReplaced".into(),
            json!({"reason": self.redactor.clean(reason), "historyTold": history_told}),
        );
        Vec::new()
    }

    fn on_tool_use(&mut self, id: &str, name: &str, input: Value) -> Vec<StreamResponse> {
        let mut msg = self.agent_text(&format!("Using tool: {name}"));
        if self.tool_trace {
            let mut part = Part::data(json!({"id": id, "name": name, "args": input.clone()}));
            part.metadata = Some(obj(json!({"type": "function_call"})));
            msg.parts.push(part);
        }
        msg.metadata = Some(obj(
            json!({"toolUseId": id, "toolName": name, "toolInput": input}),
        ));
        vec![self.status(TaskState::Working, Some(msg))]
    }

    fn on_tool_result(
        &mut self,
        id: &str,
        output: Option<String>,
        is_error: bool,
    ) -> Vec<StreamResponse> {
        let output = match output {
            Some(o) if is_error => Some(self.redactor.clean(&o)),
            other => other,
        };
        let shown = output.map(|o| truncate_chars(&o, TOOL_OUTPUT_MAX));
        let mut msg = self.agent_text(&tool_result_text(shown.as_deref(), is_error));
        if self.tool_trace {
            let mut part = Part::data(json!({"id": id, "response": shown, "isError": is_error}));
            part.metadata = Some(obj(json!({"type": "function_response"})));
            msg.parts.push(part);
        }
        msg.metadata = Some(obj(json!({"toolUseId": id, "isError": is_error})));
        vec![self.status(TaskState::Working, Some(msg))]
    }

    /// The agent asks (`what`, and `data` for a program): `input-required`.
    fn on_approval_required(
        &mut self,
        id: String,
        kind: String,
        what: String,
        data: Value,
    ) -> Vec<StreamResponse> {
        self.pending_approval = Some((id, kind));
        let msg = Message::agent(
            vec![Part::text(what), Part::data(data)],
            &self.task_id,
            &self.context_id,
        );
        vec![self.status(TaskState::InputRequired, Some(msg))]
    }

    /// The agent ended its turn: completed with its result (or the answer so far), or failed.
    fn on_done(&mut self, result: Option<String>, is_error: bool) -> Vec<StreamResponse> {
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

    /// An artifact of the agent's own (the native protocol).
    fn on_artifact(
        &mut self,
        artifact: Artifact,
        append: bool,
        last_chunk: bool,
    ) -> Vec<StreamResponse> {
        self.own_artifacts = true;
        let mut out = Vec::new();
        if self.state != TaskState::Working {
            out.push(self.status(TaskState::Working, None));
        }
        out.push(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
            task_id: self.task_id.clone(),
            context_id: self.context_id.clone(),
            artifact,
            append,
            last_chunk,
            metadata: None,
        }));
        out
    }

    /// A direct answer with no task work: the task completes with it as its message.
    fn on_message(&mut self, text: &str) -> Vec<StreamResponse> {
        self.pending_metadata
            .insert(DIRECT_MESSAGE_KEY.into(), json!(true));
        let msg = self.agent_text(text);
        vec![self.status(TaskState::Completed, Some(msg))]
    }

    /// The agent's error: failed, with its `errorKind`.
    fn on_error(&mut self, message: &str, kind: Option<&str>) -> Vec<StreamResponse> {
        let k = error_kind::kind_of(kind, message);
        self.pending_metadata.insert("errorKind".into(), json!(k));
        let msg = self.agent_text(&self.redactor.clean(message));
        vec![self.status(TaskState::Failed, Some(msg))]
    }

    /// A permission request the host's rules answered without asking: a `working` status
    /// with the decision's text and its data part (the rule and the request).
    pub fn rule_decided(&mut self, text: &str, data: Value) -> Vec<StreamResponse> {
        let mut msg = Message::agent(
            vec![Part::text(text), Part::data(data)],
            &self.task_id,
            &self.context_id,
        );
        let mut md = Map::new();
        md.insert(super::RULE_DECISION_KEY.into(), json!(true));
        msg.metadata = Some(md);
        vec![self.status(TaskState::Working, Some(msg))]
    }

    /// The process ended (or was ended). Produces the terminal state if none was produced
    /// (or, at a budget that asks, the question: `input-required`).
    pub fn on_exit(&mut self, reason: ExitReason) -> Vec<StreamResponse> {
        if self.state.is_terminal() {
            return Vec::new();
        }
        let (state, text) = match reason {
            ExitReason::BudgetPaused {
                text,
                question,
                budget,
            } => return self.budget_question(text, question, budget),
            ExitReason::Exited {
                code: Some(0),
                signal: None,
                ..
            } if self.pending_approval.is_none() => return self.complete(self.answer.clone()),
            ExitReason::Exited {
                code,
                signal,
                stderr_tail,
            } => (
                TaskState::Failed,
                self.exited_early(code, signal, stderr_tail),
            ),
            other => self.stopped(other),
        };
        let msg = self.agent_text(&text);
        vec![self.status(state, Some(msg))]
    }

    /// The turn stopped at a budget that asks: the question, `input-required`.
    fn budget_question(
        &mut self,
        text: String,
        question: Value,
        budget: Value,
    ) -> Vec<StreamResponse> {
        self.pending_approval = None;
        self.pending_metadata.insert("budget".into(), budget);
        let msg = Message::agent(
            vec![Part::text(text), Part::data(question)],
            &self.task_id,
            &self.context_id,
        );
        vec![self.status(TaskState::InputRequired, Some(msg))]
    }

    /// The program exited before it ended its turn (or, having asked a question, without
    /// waiting for the answer): the failure's text, with the program's own error text.
    fn exited_early(
        &mut self,
        code: Option<i32>,
        signal: Option<i32>,
        stderr_tail: String,
    ) -> String {
        if code == Some(0) && signal.is_none() {
            // It asked a question and exited without waiting for the answer: it did not
            // finish its turn, and what it asked for never happened.
            self.pending_metadata.insert("exitCode".into(), json!(0));
            return "The agent asked for input and then exited without waiting for the answer"
                .to_string();
        }
        self.pending_metadata.insert("exitCode".into(), json!(code));
        if let Some(s) = signal {
            self.pending_metadata.insert("signal".into(), json!(s));
        }
        let how = match (code, signal) {
            (_, Some(s)) => format!("The agent was killed by signal {s}"),
            (Some(c), None) => format!("The agent exited with code {c}"),
            (None, None) => "The agent exited".to_string(),
        };
        // On a pty stderr is merged into stdout: the last output lines are the
        // program's own error text then.
        let tail = if stderr_tail.trim().is_empty() {
            last_lines(&self.answer, EXIT_TAIL_LINES)
        } else {
            stderr_tail
        };
        let tail = self.redactor.clean(tail.trim());
        let tail = tail.trim();
        self.pending_metadata
            .insert("errorKind".into(), json!(error_kind::kind_of(None, tail)));
        if tail.is_empty() {
            format!("{how} before finishing its turn")
        } else {
            format!("{how} before finishing its turn: {tail}")
        }
    }

    /// A turn the host stopped (or could not start): the end state and its text.
    fn stopped(&mut self, reason: ExitReason) -> (TaskState, String) {
        match reason {
        ExitReason::SpawnFailed(why) => (
            {
                self.pending_metadata
                    .insert("errorKind".into(), json!(error_kind::CONFIG));
                TaskState::Failed
            },
            format!(
                "The agent could not be started: {}",
                self.redactor.clean(&why)
            ),
        ),
        ExitReason::IdleTimeout { secs } => (
            {
                self.pending_metadata
                    .insert("errorKind".into(), json!(error_kind::TIMEOUT));
                TaskState::Failed
            },
            format!("The agent printed nothing for {secs} s and was stopped (idle timeout)"),
        ),
        ExitReason::HardTimeout { secs } => (
            {
                self.pending_metadata
                    .insert("errorKind".into(), json!(error_kind::TIMEOUT));
                TaskState::Failed
            },
            format!("The task ran longer than its limit of {secs} s and was stopped"),
        ),
        ExitReason::InputExpired { secs } => (
            {
                self.pending_metadata
                    .insert("errorKind".into(), json!(error_kind::TIMEOUT));
                TaskState::Failed
            },
            format!("No answer came within {secs} s, so the question expired and the task was stopped (input timeout); send the message again"),
        ),
        ExitReason::LimitReached(limit) => (
            {
                self.pending_metadata
                    .insert(LIMIT_REACHED.into(), json!(limit_name(&limit)));
                TaskState::Failed
            },
            format!("The task reached {limit} and was stopped"),
        ),
        ExitReason::StoreFailed(why) => (
            TaskState::Failed,
            format!("The task store failed, so the task was stopped: {why}"),
        ),
        ExitReason::BudgetFailed { text, budget } => {
            self.pending_metadata.insert("budget".into(), budget);
            self.pending_metadata
                .insert("errorKind".into(), json!(error_kind::BUDGET));
            (TaskState::Failed, text)
        }
        // Handled by on_exit.
        ExitReason::BudgetPaused { .. } | ExitReason::Exited { .. } => {
            (TaskState::Failed, String::new())
        }
        ExitReason::Canceled => (TaskState::Canceled, "The task was canceled".to_string()),
        ExitReason::Shutdown => (
            TaskState::Failed,
            "agent-host shut down before the task finished".to_string(),
        ),
        ExitReason::HostLost(host) => (
            TaskState::Failed,
            format!("agent-host host {host}, which was running this task, was lost (its lease expired), so the task was stopped; send the message again"),
        ),
        ExitReason::Restarted => (
            TaskState::Failed,
            "agent-host restarted while this task was running, and the agent's session cannot be resumed; send the message again".to_string(),
        ),
        ExitReason::Crashed => (
            TaskState::Failed,
            "agent-host hit an internal error while running this task (see the host log), so the agent was stopped; send the message again".to_string(),
        ),
        }
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

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// The status text of a finished tool; never empty (Codex reports a declined command with no
/// output), and "no output" only when the CLI said the output was empty.
fn tool_result_text(shown: Option<&str>, is_error: bool) -> String {
    let empty = shown.is_none_or(|s| s.trim().is_empty());
    match (is_error, shown) {
        (true, Some(s)) if !empty => format!("Tool failed: {s}"),
        (true, _) => "Tool failed (it gave no reason)".to_string(),
        (false, None) => "Tool finished".to_string(),
        (false, Some(_)) if empty => "Tool finished (no output)".to_string(),
        (false, Some(s)) => format!("Tool result: {s}"),
    }
}

#[cfg(test)]
mod tests;
