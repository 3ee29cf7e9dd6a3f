//! `AgentEvent`: what a CLI did, normalized across CLIs. Parsers produce these; the task
//! engine maps them to A2A updates.

use serde_json::Value;

use crate::protocol::v1::Part;

/// One choice offered with an approval request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalOption {
    pub id: String,
    pub label: String,
}

/// Token usage and cost reported by a CLI.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Usage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub duration_ms: Option<u64>,
}

/// A normalized event from an agent CLI.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The CLI started a session.
    Init {
        session_id: Option<String>,
        model: Option<String>,
        cwd: Option<String>,
        tools: Vec<String>,
    },
    /// Assistant text: a chunk to append (`delta`) or a whole message.
    Text { text: String, delta: bool },
    /// Reasoning text.
    Thinking { text: String },
    /// The CLI started using a tool.
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// A tool finished.
    ToolResult {
        id: String,
        /// What the tool printed; `None` when the CLI does not report it (not the same as an
        /// empty output: Gemini CLI leaves `output` out for some tools).
        output: Option<String>,
        is_error: bool,
    },
    /// The CLI asks the user something (a permission or a question) and waits.
    ApprovalRequired {
        /// The CLI's id for the request (used to answer it).
        id: String,
        /// `command`, `file-edit`, `tool`, `question` or `other`.
        kind: String,
        /// The tool that asks (e.g. `Bash`), when the CLI says.
        tool: Option<String>,
        target: Option<String>,
        detail: Option<String>,
        options: Vec<ApprovalOption>,
    },
    /// Tokens and cost.
    Usage(Usage),
    /// The turn ended.
    Done {
        result: Option<String>,
        is_error: bool,
    },
    /// The CLI reported an error that ends the turn.
    Error {
        message: String,
        kind: Option<String>,
    },
    /// An artifact (or a chunk of one) the agent produced itself, with parts in A2A v1.0
    /// form (text, raw, url or data). Agents that send artifacts get no `result` artifact.
    Artifact {
        artifact_id: String,
        name: Option<String>,
        parts: Vec<Part>,
        /// Add the parts to the artifact sent before with this id.
        append: bool,
        /// This is the artifact's last chunk.
        last_chunk: bool,
    },
    /// The agent answers with a message and no task: the turn ends, and a blocking send
    /// returns this message instead of the task.
    Message { text: String },
    /// The agent refuses the task (A2A state `rejected`), with why.
    Rejected { message: String },
    /// A line the host noticed but that changes nothing (non-JSON noise, an over-long line).
    Warning { message: String },
    /// The CLI's session could not be resumed (`reason`: the CLI's error); a new one was
    /// started, told the earlier turns when `history_told`.
    SessionReplaced { reason: String, history_told: bool },
}
