//! The engine's settings: `[agent]` (which adapter and how its program runs), `[limits]`
//! (turn time limits, how many turns run and wait, output kept) and `[workspace]` (the
//! directories a message may work in). Each field is one setting: its flag, environment
//! variable, config file key (the `id`), default and help are declared here once; the
//! `settings` module merges them with the config file.

use std::path::PathBuf;

use clap::builder::BoolishValueParser;
use clap::ArgAction;
use serde::{Deserialize, Serialize};

use crate::adapter::PromptVia;
use crate::policy::{Limits, OnBudget};
use crate::units::{ByteSize, Dur};

/// `[agent]`: the adapter served and how its program is started.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Agent")]
pub struct AgentConfig {
    /// Adapter to serve (demo, jsonl, claude-code, ...; several: comma-separated); unset: the first installed known CLI, else demo
    #[arg(
        id = "agent.adapter",
        long = "adapter",
        env = "AGENT_HOST_ADAPTER",
        value_name = "ID"
    )]
    pub adapter: Option<String>,
    /// Directory of adapter TOML files that add to or override the built-in ones (same id wins)
    #[arg(
        id = "agent.adapters_dir",
        long = "adapters-dir",
        env = "AGENT_HOST_ADAPTERS_DIR",
        value_name = "DIR"
    )]
    pub adapters_dir: Option<PathBuf>,
    /// Working directory of the agents (must exist); unset: the directory agent-host was started in
    #[arg(
        id = "agent.repo_path",
        long = "repo-path",
        env = "AGENT_HOST_REPO_PATH",
        value_name = "DIR"
    )]
    pub repo_path: Option<PathBuf>,
    /// Skip the agents' approval prompts (adds the adapter's force_args)
    #[arg(id = "agent.force", long = "force", env = "AGENT_HOST_FORCE", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub force: bool,
    /// With several adapters: a message to the root endpoints may name its adapter in metadata.agent (later calls on its task are routed to it)
    #[arg(id = "agent.route_by_metadata", long = "route-by-metadata", env = "AGENT_HOST_ROUTE_BY_METADATA", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value_t = false)]
    pub route_by_metadata: bool,
    /// Model passed to the agent (the adapter's model_args); unset: the agent's own
    #[arg(
        id = "agent.model",
        long = "model",
        env = "AGENT_HOST_MODEL",
        value_name = "MODEL"
    )]
    pub model: Option<String>,
    /// Program to run: required by the jsonl adapter, replaces any adapter's binary (<ID>_PATH still wins)
    #[arg(
        id = "agent.binary",
        long = "binary",
        env = "AGENT_HOST_BINARY",
        value_name = "PROGRAM"
    )]
    pub binary: Option<String>,
    /// Extra arguments for the program, placed before the adapter's own (flag and variable: shell-style words; file: a list)
    #[arg(
        id = "agent.args",
        long = "args",
        env = "AGENT_HOST_ARGS",
        value_name = "WORDS",
        allow_hyphen_values = true
    )]
    pub args: Option<Words>,
    /// How the prompt reaches the program: arg (last argument), stdin (then closed) or protocol; unset: the adapter's prompt
    #[arg(id = "agent.prompt_via", long = "prompt-via", env = "AGENT_HOST_PROMPT_VIA", value_name = "arg|stdin|protocol", value_parser = parse_prompt_via)]
    pub prompt_via: Option<PromptVia>,
    /// Host environment variables passed to the agents besides the base allow-list and the adapter's env.pass (flag and variable: comma-separated)
    #[arg(
        id = "agent.pass_env",
        long = "pass-env",
        env = "AGENT_HOST_PASS_ENV",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub pass_env: Vec<String>,
    /// Media types a message part may name (type/subtype, type/* or */*), comma-separated; other parts get -32005, binary ones are saved as files for the agent
    #[arg(id = "agent.input_modes", long = "input-modes", env = "AGENT_HOST_INPUT_MODES", value_name = "TYPES", value_delimiter = ',', default_values = ["text/plain", "application/json", "*/*"])]
    pub input_modes: Vec<String>,
    /// Regular expression of an output line that asks the user something (text adapters such as generic: the task goes input-required)
    #[arg(
        id = "agent.approval_pattern",
        long = "approval-pattern",
        env = "AGENT_HOST_APPROVAL_PATTERN",
        value_name = "REGEX"
    )]
    pub approval_pattern: Option<String>,
    /// Text written to the program when the user answers yes (a newline is added); unset: the adapter's ("y")
    #[arg(
        id = "agent.approval_response",
        long = "approval-response",
        env = "AGENT_HOST_APPROVAL_RESPONSE",
        value_name = "TEXT"
    )]
    pub approval_response: Option<String>,
}

/// `[limits]`: how long a turn may take, how many turns run and wait, what is kept of them.
/// The four turn limits (timeout, idle_timeout, cancel_grace, max_line) win over an
/// adapter's own `[limits]` when set; unset, the adapter's value applies, else the default
/// in their help.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Limits")]
pub struct LimitsConfig {
    /// Hard time limit of a task; unset: the adapter's, else 30m
    #[arg(
        id = "limits.timeout",
        long = "timeout",
        env = "AGENT_HOST_TIMEOUT",
        value_name = "DURATION"
    )]
    pub timeout: Option<Dur>,
    /// A task whose agent prints nothing for this long fails (not counted while it waits for input); unset: the adapter's, else 10m
    #[arg(
        id = "limits.idle_timeout",
        long = "idle-timeout",
        env = "AGENT_HOST_IDLE_TIMEOUT",
        value_name = "DURATION"
    )]
    pub idle_timeout: Option<Dur>,
    /// Time between SIGTERM and SIGKILL when an agent is stopped (also how long it may run after it reported its turn's end); unset: the adapter's, else 5s
    #[arg(
        id = "limits.cancel_grace",
        long = "cancel-grace",
        env = "AGENT_HOST_CANCEL_GRACE",
        value_name = "DURATION"
    )]
    pub cancel_grace: Option<Dur>,
    /// Longest agent output line kept (a longer one is skipped with a warning); unset: the adapter's, else 16MiB
    #[arg(
        id = "limits.max_line",
        long = "max-line",
        env = "AGENT_HOST_MAX_LINE",
        value_name = "SIZE"
    )]
    pub max_line: Option<ByteSize>,
    /// Turns running at once (at least 1); more wait in a queue
    #[arg(
        id = "limits.max_running_tasks",
        long = "max-running-tasks",
        env = "AGENT_HOST_MAX_RUNNING_TASKS",
        value_name = "N",
        default_value_t = 16
    )]
    pub max_running_tasks: usize,
    /// Tasks waiting to start; more are refused with HTTP 429 / JSON-RPC -32050
    #[arg(
        id = "limits.max_queued_tasks",
        long = "max-queued-tasks",
        env = "AGENT_HOST_MAX_QUEUED_TASKS",
        value_name = "N",
        default_value_t = 256
    )]
    pub max_queued_tasks: usize,
    /// Agent programs alive at once: running turns plus turns waiting for an answer, which give their running slot back while they wait; at least --max-running-tasks
    #[arg(
        id = "limits.max_live_tasks",
        long = "max-live-tasks",
        env = "AGENT_HOST_MAX_LIVE_TASKS",
        value_name = "N",
        default_value_t = 64
    )]
    pub max_live_tasks: usize,
    /// How long a question (input-required) waits for its answer before the task ends, saying so; 0 = until the turn's hard timeout
    #[arg(
        id = "limits.input_timeout",
        long = "input-timeout",
        env = "AGENT_HOST_INPUT_TIMEOUT",
        value_name = "DURATION",
        default_value = "10m"
    )]
    pub input_timeout: Dur,
    /// Answer text kept per task; the rest is dropped with a status message saying so
    #[arg(
        id = "limits.max_output",
        long = "max-output",
        env = "AGENT_HOST_MAX_OUTPUT",
        value_name = "SIZE",
        default_value = "64MiB"
    )]
    pub max_output: ByteSize,
    /// File parts (raw or url) one message may carry (at least 1); more refuse the message with -32602
    #[arg(
        id = "limits.max_files_per_message",
        long = "max-files-per-message",
        env = "AGENT_HOST_MAX_FILES_PER_MESSAGE",
        value_name = "N",
        default_value_t = 100
    )]
    pub max_files_per_message: usize,
    /// Budget of a task whose request sets none in metadata.budget (usd=2,tokens=500000,toolCalls=50,seconds=1200; kinds left out: no limit)
    #[arg(
        id = "limits.budget",
        long = "budget",
        env = "AGENT_HOST_BUDGET",
        value_name = "LIMITS"
    )]
    pub budget: Option<Limits>,
    /// Highest task budget a request may set (same form as budget; kinds left out: no ceiling); a request above it gets -32602, and the kinds a request and `budget` leave out take it
    #[arg(
        id = "limits.max_budget",
        long = "max-budget",
        env = "AGENT_HOST_MAX_BUDGET",
        value_name = "LIMITS"
    )]
    pub max_budget: Option<Limits>,
    /// Highest budget a request may set for a whole conversation, the sum over its tasks (metadata.budget.context); also the conversation's budget of the kinds a request leaves out
    #[arg(
        id = "limits.max_context_budget",
        long = "max-context-budget",
        env = "AGENT_HOST_MAX_CONTEXT_BUDGET",
        value_name = "LIMITS"
    )]
    pub max_context_budget: Option<Limits>,
    /// At a budget's limit: ask (stop the agent keeping its session; the task asks whether to continue) or fail; an adapter's on_budget and metadata.budget.onBudget win
    #[arg(
        id = "limits.on_budget",
        long = "on-budget",
        env = "AGENT_HOST_ON_BUDGET",
        value_name = "ask|fail",
        default_value = "ask"
    )]
    pub on_budget: OnBudget,
}

impl LimitsConfig {
    /// The budget settings, for [`crate::policy::config::controls`].
    pub fn budget_settings(&self) -> crate::policy::config::BudgetSettings {
        crate::policy::config::BudgetSettings {
            default: self.budget.unwrap_or_default(),
            ceiling: self.max_budget.unwrap_or_default(),
            context_ceiling: self.max_context_budget.unwrap_or_default(),
            on_budget: self.on_budget,
        }
    }
}

/// Arguments as shell-style words in a flag or variable (`--args "-v 'a b'"`), a list in the
/// config file (`args = ["-v", "a b"]`).
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(transparent)]
pub struct Words(pub Vec<String>);

impl std::str::FromStr for Words {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Words, ValueError> {
        Ok(Words(shell_words::split(s)?))
    }
}

/// A value of the agent's settings that does not read.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("cannot be split into words: {0}")]
    Words(#[from] shell_words::ParseError),
    #[error("'{0}' is not one of arg, stdin, protocol")]
    PromptVia(String),
}

impl<'de> Deserialize<'de> for Words {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            List(Vec<String>),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::List(v) => Ok(Words(v)),
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

fn parse_prompt_via(s: &str) -> Result<PromptVia, ValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "arg" | "argument" => Ok(PromptVia::Arg),
        "stdin" => Ok(PromptVia::Stdin),
        "protocol" => Ok(PromptVia::Protocol),
        other => Err(ValueError::PromptVia(other.to_string())),
    }
}

/// Streams following one task at once; one more is refused like a full queue. A constant:
/// no one needed to tune it (it was `[limits] max_subscribers_per_task`).
pub const MAX_SUBSCRIBERS_PER_TASK: usize = 64;

/// Resource limits of the host, resolved from `[limits]` and `[server]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostLimits {
    /// Turns running at once; more wait in a queue.
    pub max_running: usize,
    /// Tasks waiting to start; more are refused (HTTP 429 / JSON-RPC -32050).
    pub max_queued: usize,
    /// Agent programs alive at once: running turns plus turns waiting for an answer (which
    /// give their running slot back while they wait). At least `max_running`.
    pub max_live: usize,
    /// How long a question may wait for its answer before the task ends (failed, saying
    /// so); zero: only the turn's hard timeout ends it.
    pub input_timeout: std::time::Duration,
    /// Requests per minute per caller (token bucket; a read costs a tenth); 0 = no limit.
    pub rate_per_minute: u32,
    /// Answer text kept per task; more is dropped with a note.
    pub max_output_bytes: usize,
    /// Streams following one task at once.
    pub max_subscribers: usize,
    /// Failed authentications per minute per client address before further failures from
    /// it are answered 429 (token bucket, burst of the same size); 0 = no limit.
    pub auth_failures_per_minute: u32,
    /// Files (attachment parts) one message may carry; more are refused (-32602).
    pub max_files_per_message: usize,
}

impl Default for HostLimits {
    fn default() -> Self {
        HostLimits {
            max_running: 16,
            max_queued: 256,
            max_live: 64,
            input_timeout: std::time::Duration::from_secs(600),
            rate_per_minute: 1200,
            max_output_bytes: 64 * 1024 * 1024,
            max_subscribers: MAX_SUBSCRIBERS_PER_TASK,
            auth_failures_per_minute: 20,
            max_files_per_message: 100,
        }
    }
}
