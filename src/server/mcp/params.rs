//! The arguments of the MCP tools (their JSON schemas are generated from these types, and
//! `docs/mcp.md` lists them). Unknown arguments are refused, so a misspelt one is an error
//! instead of being ignored.

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// A tool's arguments. rmcp's own `Parameters` answers arguments that do not fit the schema
/// with a tool result marked `isError`, which a client cannot tell from a tool that ran and
/// failed; this one answers them, like every other bad argument here, with the JSON-RPC error
/// -32602 (invalid params) and its reason, before anything runs. (Named `Parameters` so that
/// rmcp's `#[tool]` takes the input schema from it.)
pub struct Parameters<T>(pub T);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        serde_json::from_value(Value::Object(arguments))
            .map(Parameters)
            .map_err(|e| rmcp::ErrorData::invalid_params(format!("invalid arguments: {e}"), None))
    }
}

/// `start_task`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartTask {
    /// What the agent should do.
    pub prompt: String,
    /// The adapter that runs it (an adapter id this host serves, e.g. claude-code, codex);
    /// default: the host's first adapter.
    #[serde(default)]
    pub agent: Option<String>,
    /// Continue this conversation (the contextId of an earlier task).
    #[serde(default)]
    pub context_id: Option<String>,
    /// Working directory of the agent (must lie under the host's allowed directories).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Git ref the context's workspace starts from (message metadata `baseRef`).
    #[serde(default)]
    pub base_ref: Option<String>,
    /// Budget of the task (message metadata `budget`): {usd, tokens, toolCalls, seconds,
    /// context: {...}, onBudget: "ask"|"fail"}; above the host's ceilings it is refused.
    #[serde(default)]
    pub budget: Option<Value>,
    /// Approval rules (message metadata `approvals`): a rule set's name ("read-only",
    /// "workspace-write", ...) or {set, rules} whose rules may only deny or ask.
    #[serde(default)]
    pub approvals: Option<Value>,
    /// Wait until the task has ended or asks for input (default: answer at once with the
    /// task as submitted). While waiting, progress notifications carry its updates when
    /// the call has a progress token.
    #[serde(default)]
    pub wait: bool,
}

/// `get_task`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetTask {
    /// The task's id.
    pub task_id: String,
    /// Also list the task's events with a sequence number above this one (0: from the
    /// start); leave out for no events.
    #[serde(default)]
    pub after_event: Option<u64>,
    /// At most this many events (default 100; 0: none, only lastEvent; more than 1000
    /// counts as 1000).
    #[serde(default)]
    pub max_events: Option<usize>,
}

/// `list_tasks`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListTasks {
    /// Only the tasks of this context.
    #[serde(default)]
    pub context_id: Option<String>,
    /// Only tasks in this state (working, input-required, completed, failed, canceled, ...).
    #[serde(default)]
    pub state: Option<String>,
    /// Tasks per page, 1 to 100 (default 50).
    #[serde(default)]
    pub page_size: Option<i32>,
    /// The nextPageToken of the previous page.
    #[serde(default)]
    pub page_token: Option<String>,
    /// Only tasks whose status changed after this time (RFC 3339).
    #[serde(default)]
    pub status_timestamp_after: Option<String>,
    /// The adapter whose tasks to list (default: the host's first adapter).
    #[serde(default)]
    pub agent: Option<String>,
}

/// `reply`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Reply {
    /// The task that waits for input.
    pub task_id: String,
    /// The answer as text (a question's answer; for an approval also yes or no).
    #[serde(default)]
    pub text: Option<String>,
    /// The answer to an approval.
    #[serde(default)]
    pub decision: Option<Decision>,
    /// With a decision: a message for the agent (e.g. why it was denied).
    #[serde(default)]
    pub message: Option<String>,
    /// Wait until the task has ended or asks again (default true).
    #[serde(default = "yes")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

/// An approval's answer.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

/// `cancel_task`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CancelTask {
    /// The task to cancel (its program and everything it started are stopped).
    pub task_id: String,
}

/// `get_changes`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetChanges {
    /// The context whose latest changes to show.
    #[serde(default)]
    pub context_id: Option<String>,
    /// Or: the changes of this task.
    #[serde(default)]
    pub task_id: Option<String>,
    /// The adapter of the context (default: the host's first adapter).
    #[serde(default)]
    pub agent: Option<String>,
}
