//! `AgentEvent`: what a CLI did, normalized across CLIs. Parsers produce these; the task
//! engine maps them to A2A updates.

use serde_json::Value;

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
        output: String,
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
    /// A line the host noticed but that changes nothing (non-JSON noise, an over-long line).
    Warning { message: String },
}
