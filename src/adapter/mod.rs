//! Adapters: what to run for a CLI and how to read it (no I/O).
//!
//! An adapter is a TOML file (`adapters/*.toml`, embedded in the binary; a directory named in
//! the config overrides by `id`). [`AdapterSpec`] is its schema; `adapters/README.md`
//! documents it. [`wire`] holds one parser per output format, producing [`AgentEvent`]s.

pub(crate) mod error_kind;
pub(crate) mod event;
pub(crate) mod retry;
pub(crate) mod sandbox;
pub mod wire;
mod workspace;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

pub use event::{AgentEvent, ApprovalOption, Usage};
pub use sandbox::SandboxSpec;
pub use workspace::WorkspaceMode;

use crate::units::{ByteSize, Dur};

/// How the prompt reaches the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum PromptVia {
    /// As the last command-line argument.
    #[default]
    Arg,
    /// Written to stdin (which is then closed).
    Stdin,
    /// Sent in the CLI's own input protocol by its wire parser (e.g. a stream-json user
    /// message, an ACP `session/prompt`); stdin stays open for the conversation.
    Protocol,
}

/// The longest prompt given as one command-line argument: Linux refuses a single argument of
/// 128 KiB or more (`MAX_ARG_STRLEN`) with "Argument list too long".
pub const MAX_ARG_PROMPT: usize = 128 * 1024 - 1;

/// How an adapter that takes its prompt as an argument takes a longer one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LongPrompt {
    /// On stdin, which is then closed.
    Stdin,
    /// In a file the host writes for the turn (in the task's own folder, which the sandbox
    /// shows the program) and removes after it, named by [`AdapterSpec::prompt_file_args`].
    File,
    /// Not at all: the message is refused with -32602.
    #[default]
    Refuse,
}

/// The placeholder of `prompt_file_args` replaced by the path of the prompt's file.
pub const PROMPT_FILE_PLACEHOLDER: &str = "{prompt_file}";

/// What happens to stdin after the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StdinPolicy {
    /// Closed (or /dev/null): one-shot CLIs that wait for EOF.
    #[default]
    Close,
    /// Kept open: answers to approvals are written there.
    Keep,
}

/// Pipes or a pseudo-terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Io {
    #[default]
    Pipes,
    Pty,
}

/// Environment of the CLI: the host's environment is never passed wholesale.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EnvSpec {
    /// Host variables passed through (on top of the base allow-list: PATH, HOME, LANG, ...).
    #[serde(default)]
    pub pass: Vec<String>,
    /// Variables set for the CLI.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

/// Per-adapter limits; unset values take the host's settings.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_line_bytes: Option<usize>,
    /// Hard time limit of a task, with its unit (`"30m"`).
    pub timeout: Option<Dur>,
    /// A task whose program prints nothing for this long fails.
    pub idle_timeout: Option<Dur>,
    /// Time between SIGTERM and SIGKILL.
    pub cancel_grace: Option<Dur>,
    /// The old names of the three above, in whole milliseconds (still read; the new name
    /// wins when both are given).
    pub timeout_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub cancel_grace_ms: Option<u64>,
    /// Regex for the lines (stderr) where the CLI reports a failed model request it retries.
    pub retry_pattern: Option<String>,
    /// How many such failed attempts pass before the turn fails (see [`retry`]).
    pub retry_limit: Option<u32>,
    /// Memory of one task (sandbox; e.g. `"4G"`).
    pub task_memory: Option<ByteSize>,
    /// Processes (and threads) of one task.
    pub task_pids: Option<u64>,
    /// CPU weight of one task, 1..=10000 (100: like any other process).
    pub task_cpu_weight: Option<u64>,
    /// Largest file one task may write.
    pub task_file_size: Option<ByteSize>,
}

impl Limits {
    /// The hard time limit, from `timeout` or the old `timeout_ms`.
    pub fn timeout(&self) -> Option<Duration> {
        either(self.timeout, self.timeout_ms)
    }

    /// The idle limit, from `idle_timeout` or the old `idle_timeout_ms`.
    pub fn idle_timeout(&self) -> Option<Duration> {
        either(self.idle_timeout, self.idle_timeout_ms)
    }

    /// The grace before SIGKILL, from `cancel_grace` or the old `cancel_grace_ms`.
    pub fn cancel_grace(&self) -> Option<Duration> {
        either(self.cancel_grace, self.cancel_grace_ms)
    }
}

/// A duration given with its unit, else one in the old whole milliseconds.
fn either(with_unit: Option<Dur>, millis: Option<u64>) -> Option<Duration> {
    with_unit
        .map(Duration::from)
        .or(millis.map(Duration::from_millis))
}

/// A skill shown in the agent card.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillSpec {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub examples: Vec<String>,
}

/// One adapter definition (the schema of `adapters/*.toml`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterSpec {
    /// Name used in `AGENT_ADAPTER`.
    pub id: String,
    /// Display name for the card.
    pub name: String,
    pub description: String,
    /// Program to run: a name looked up next to the agent-host binary and on PATH, or a path.
    /// `<ID>_PATH` (e.g. `CLAUDE_CODE_PATH`) overrides it.
    #[serde(default)]
    pub binary: String,
    /// Arguments before the prompt. `{model}`, `{session_id}`, `{cwd}` and `{message_id}`
    /// (the `messageId` of the message that started the turn) are substituted.
    #[serde(default)]
    pub args: Vec<String>,
    /// Added when a model is configured (`AGENT_MODEL`).
    #[serde(default)]
    pub model_args: Vec<String>,
    /// Added on the first turn of a context when the CLI accepts a host-chosen session id.
    #[serde(default)]
    pub session_args: Vec<String>,
    /// Added on a follow-up turn to resume the context's CLI session.
    #[serde(default)]
    pub resume_args: Vec<String>,
    /// Added when approvals are skipped (`AGENT_FORCE=true`).
    #[serde(default)]
    pub force_args: Vec<String>,
    /// What happens when a task of this adapter reaches its budget (`ask` or `fail`);
    /// unset: the host's `[limits] on_budget`. A request's `metadata.budget.onBudget` wins.
    #[serde(default)]
    pub on_budget: Option<OnBudget>,
    /// Where this adapter's contexts work (`auto`, `isolated`, `shared`) when the host's
    /// `[workspace] mode` does not choose.
    #[serde(default)]
    pub workspace: Option<WorkspaceMode>,
    /// The CLI's own limit flags, given the task's budget: `{max_turns}` (the budget's
    /// tool calls) is substituted; a flag whose placeholder has no value is left out with
    /// its neighbours up to the previous flag (`["--max-turns", "{max_turns}"]`).
    #[serde(default)]
    pub budget_args: Vec<String>,
    /// With `prompt = "arg"`: the arguments that carry the prompt, `{prompt}` replaced by it
    /// (e.g. `["-p", "{prompt}"]`), placed last. Empty: the prompt is the last argument.
    #[serde(default)]
    pub prompt_args: Vec<String>,
    /// With `prompt = "arg"` and no `prompt_args`: the CLI's end-of-options marker, put
    /// right before the prompt so that a prompt such as `--help` arrives as the prompt, not
    /// as an option. Default `--`; `""` for a program that takes no such marker (then give
    /// the prompt another way: `prompt_args` with `--option={prompt}`, or `prompt = "stdin"`).
    #[serde(default = "default_end_of_options")]
    pub end_of_options: String,
    /// With `prompt = "arg"`: what happens to a prompt too long for one argument (over
    /// [`MAX_ARG_PROMPT`] bytes): `"stdin"` writes it to stdin instead (then closed, so that
    /// turn takes no answers), `"file"` writes it to a file named by `prompt_file_args`,
    /// `"refuse"` (the default) refuses the message up front.
    #[serde(default)]
    pub long_prompt: LongPrompt,
    /// With `long_prompt = "file"`: the arguments that name the prompt's file, in place of
    /// the prompt's own, placed last; `{prompt_file}` is replaced by its path (aider:
    /// `["--message-file={prompt_file}"]`). The other placeholders of `args` apply too.
    #[serde(default)]
    pub prompt_file_args: Vec<String>,
    /// When the prompt goes to stdin (`prompt = "stdin"`, or a long prompt with
    /// `long_prompt = "stdin"`): the arguments that tell the program to read it there, put
    /// last after `end_of_options` (`["-"]`: `codex exec … -- -`). Empty: none (a program that
    /// reads stdin when it gets no prompt argument).
    #[serde(default)]
    pub stdin_prompt_args: Vec<String>,
    /// The CLI's protocol resumes sessions itself (Codex app-server `thread/resume`, ACP
    /// `session/load`): follow-up turns get the context's session id through the protocol.
    #[serde(default)]
    pub protocol_resume: bool,
    #[serde(default)]
    pub prompt: PromptVia,
    #[serde(default)]
    pub stdin: StdinPolicy,
    #[serde(default)]
    pub io: Io,
    /// Output format, one of [`wire::FORMATS`].
    pub wire: String,
    /// Settings of the wire format (e.g. the JSON-pointer rules of `jsonl-rules`, the prompt
    /// pattern of `text`); each format documents its keys.
    #[serde(default)]
    pub wire_options: toml::Table,
    /// Arguments that make the program print its version (`agent-host adapters`).
    #[serde(default = "default_version_args")]
    pub version_args: Vec<String>,
    /// Versions of the CLI that the tests cover (recorded transcripts, CI runs).
    #[serde(default)]
    pub tested_versions: Vec<String>,
    /// How to install the CLI, for the message when it is missing.
    #[serde(default)]
    pub install: String,
    /// Considered when `AGENT_ADAPTER` is unset: the first installed one is served.
    #[serde(default)]
    pub detect: bool,
    #[serde(default)]
    pub env: EnvSpec,
    #[serde(default)]
    pub limits: Limits,
    /// What the CLI needs inside the sandbox (its state folders).
    #[serde(default)]
    pub sandbox: SandboxSpec,
    #[serde(default)]
    pub skills: Vec<SkillSpec>,
    /// Where the CLI finds its credentials, for `agent-host doctor`.
    #[serde(default)]
    pub doctor: DoctorSpec,
    /// The hosts the CLI reaches through the sandbox's egress proxy (its model API).
    #[serde(default)]
    pub network: NetworkSpec,
}

/// `[network]` of an adapter.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NetworkSpec {
    /// The hosts the CLI needs, in the `proxy` network mode (the default): `api.example.com`,
    /// `api.example.com:8443`, `*.example.com`, or an address with its port. The host's
    /// `[sandbox] allow_hosts` adds to them; a caller cannot.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// `[doctor]` of an adapter: where the CLI's credentials are. They are present when any of
/// the variables is set (not empty) or any of the files exists; both lists empty: the CLI
/// needs none that the host can see.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DoctorSpec {
    /// Environment variables holding an API key or token.
    #[serde(default)]
    pub credentials_env: Vec<String>,
    /// Files a login writes; `~/` is the agent's home directory.
    #[serde(default)]
    pub credentials_files: Vec<String>,
}

fn default_version_args() -> Vec<String> {
    vec!["--version".to_string()]
}

/// An adapter file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error("adapter {source_name}: {message}")]
    Invalid {
        source_name: String,
        message: String,
    },
    #[error("unknown adapter '{0}' (known: {1})")]
    Unknown(String, String),
}

fn default_end_of_options() -> String {
    "--".to_string()
}

impl AdapterSpec {
    /// Parses one TOML file; `source_name` names it in errors (which carry line and column).
    pub fn from_toml(source_name: &str, text: &str) -> Result<AdapterSpec, AdapterError> {
        let spec: AdapterSpec = toml::from_str(text).map_err(|e| AdapterError::Invalid {
            source_name: source_name.to_string(),
            message: e.to_string(),
        })?;
        if !wire::FORMATS.contains(&spec.wire.as_str()) {
            return Err(AdapterError::Invalid {
                source_name: source_name.to_string(),
                message: format!(
                    "unknown wire format '{}' (known: {})",
                    spec.wire,
                    wire::FORMATS.join(", ")
                ),
            });
        }
        if let Err(message) = wire::validate(&spec)
            .map_err(|e| e.to_string())
            .and_then(|()| retry::validate(&spec).map_err(|e| e.to_string()))
        {
            return Err(AdapterError::Invalid {
                source_name: source_name.to_string(),
                message,
            });
        }
        if spec.id.is_empty() {
            return Err(AdapterError::Invalid {
                source_name: source_name.to_string(),
                message: "id must not be empty".into(),
            });
        }
        let names_file = spec
            .prompt_file_args
            .iter()
            .any(|a| a.contains(PROMPT_FILE_PLACEHOLDER));
        if spec.long_prompt == LongPrompt::File && !names_file {
            return Err(AdapterError::Invalid {
                source_name: source_name.to_string(),
                message: format!(
                    "long_prompt = \"file\" needs prompt_file_args naming the file with {PROMPT_FILE_PLACEHOLDER} (e.g. [\"--message-file={PROMPT_FILE_PLACEHOLDER}\"])"
                ),
            });
        }
        Ok(spec)
    }

    /// The environment variable that overrides the binary: `claude-code` → `CLAUDE_CODE_PATH`.
    pub fn path_env_var(&self) -> String {
        let mut s: String = self
            .id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        s.push_str("_PATH");
        s
    }
}

/// The adapters built into the binary, in detection order.
pub const BUILTIN: &[(&str, &str)] = &[
    ("demo.toml", include_str!("../../adapters/demo.toml")),
    ("jsonl.toml", include_str!("../../adapters/jsonl.toml")),
    (
        "conformance.toml",
        include_str!("../../adapters/conformance.toml"),
    ),
    (
        "claude-code.toml",
        include_str!("../../adapters/claude-code.toml"),
    ),
    ("codex.toml", include_str!("../../adapters/codex.toml")),
    ("gemini.toml", include_str!("../../adapters/gemini.toml")),
    (
        "opencode.toml",
        include_str!("../../adapters/opencode.toml"),
    ),
    ("qwen.toml", include_str!("../../adapters/qwen.toml")),
    ("cursor.toml", include_str!("../../adapters/cursor.toml")),
    ("aider.toml", include_str!("../../adapters/aider.toml")),
    (
        "codex-exec.toml",
        include_str!("../../adapters/codex-exec.toml"),
    ),
    (
        "gemini-json.toml",
        include_str!("../../adapters/gemini-json.toml"),
    ),
    (
        "opencode-json.toml",
        include_str!("../../adapters/opencode-json.toml"),
    ),
    (
        "qwen-acp.toml",
        include_str!("../../adapters/qwen-acp.toml"),
    ),
    ("generic.toml", include_str!("../../adapters/generic.toml")),
];

/// All known adapters: the built-in ones, overridden or extended by extra files.
#[derive(Debug, Clone)]
pub struct Registry {
    adapters: Vec<AdapterSpec>,
}

impl Registry {
    /// The built-in adapters.
    pub fn builtin() -> Result<Registry, AdapterError> {
        let mut adapters = Vec::new();
        for (name, text) in BUILTIN {
            adapters.push(AdapterSpec::from_toml(name, text)?);
        }
        Ok(Registry { adapters })
    }

    /// Adds or replaces (same `id`) an adapter.
    pub fn insert(&mut self, spec: AdapterSpec) {
        if let Some(existing) = self.adapters.iter_mut().find(|a| a.id == spec.id) {
            *existing = spec;
        } else {
            self.adapters.push(spec);
        }
    }

    pub fn get(&self, id: &str) -> Result<&AdapterSpec, AdapterError> {
        self.adapters
            .iter()
            .find(|a| a.id == id)
            .ok_or_else(|| AdapterError::Unknown(id.to_string(), self.ids().join(", ")))
    }

    pub fn ids(&self) -> Vec<&str> {
        self.adapters.iter().map(|a| a.id.as_str()).collect()
    }

    pub fn all(&self) -> &[AdapterSpec] {
        &self.adapters
    }
}

/// What happens when a budget is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnBudget {
    /// Stop the program (keeping its session) and ask whether to continue.
    #[default]
    Ask,
    /// Stop the program; the task fails.
    Fail,
}

impl OnBudget {
    pub fn word(self) -> &'static str {
        match self {
            OnBudget::Ask => "ask",
            OnBudget::Fail => "fail",
        }
    }
}

/// An `on_budget` value that is neither `ask` nor `fail`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not one of ask, fail")]
pub struct BadOnBudget(pub String);

impl std::str::FromStr for OnBudget {
    type Err = BadOnBudget;
    fn from_str(s: &str) -> Result<OnBudget, BadOnBudget> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ask" => Ok(OnBudget::Ask),
            "fail" => Ok(OnBudget::Fail),
            other => Err(BadOnBudget(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_adapters_parse() {
        let r = Registry::builtin().unwrap();
        assert!(r.get("demo").is_ok());
        assert!(r.get("jsonl").is_ok());
        assert!(r.get("nope").unwrap_err().to_string().contains("demo"));
    }

    #[test]
    fn unknown_keys_are_errors_with_line_and_column() {
        let err = AdapterSpec::from_toml(
            "x.toml",
            "id = \"x\"\nname = \"X\"\ndescription = \"d\"\nwire = \"agent-host-jsonl\"\nbinnary = \"x\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("binnary"), "{err}");
        assert!(err.contains("line 5"), "{err}");
    }

    #[test]
    fn unknown_wire_format_is_an_error() {
        let err = AdapterSpec::from_toml(
            "x.toml",
            "id = \"x\"\nname = \"X\"\ndescription = \"d\"\nwire = \"nope\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown wire format"), "{err}");
    }

    /// adapters/README.md's `[limits]` table lists keys an adapter file takes, none of them
    /// the old `..._ms` names, with the durations by their names with units; the examples in
    /// adapters/examples/ parse and use those names too.
    #[test]
    fn the_readme_and_the_examples_give_the_limits_as_they_are_read() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters");
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let table = readme
            .split("### `[limits]`")
            .nth(1)
            .and_then(|s| s.split("\n### ").next())
            .expect("a [limits] section");
        let keys: Vec<&str> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        for key in ["timeout", "idle_timeout", "cancel_grace", "max_line_bytes"] {
            assert!(keys.contains(&key), "{key} not in {keys:?}");
        }
        for key in &keys {
            assert!(!key.ends_with("_ms"), "the old {key} is documented");
            // A key the file takes is refused for its value's type, not as unknown.
            let err = toml::from_str::<Limits>(&format!("{key} = {{}}"))
                .unwrap_err()
                .to_string();
            assert!(!err.contains("unknown field"), "{key}: {err}");
        }
        let mut examples = 0;
        for entry in std::fs::read_dir(root.join("examples")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().and_then(|e| e.to_str()) != Some("toml") {
                continue;
            }
            examples += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let spec = AdapterSpec::from_toml(&path.display().to_string(), &text)
                .unwrap_or_else(|e| panic!("{e}"));
            let l = &spec.limits;
            assert_eq!(
                (l.timeout_ms, l.idle_timeout_ms, l.cancel_grace_ms),
                (None, None, None),
                "{} uses an old ..._ms key",
                path.display()
            );
        }
        assert!(examples >= 2, "the examples were not found");
    }

    #[test]
    fn path_env_var_names() {
        let mut r = Registry::builtin().unwrap();
        let mut spec = r.get("demo").unwrap().clone();
        spec.id = "claude-code".into();
        assert_eq!(spec.path_env_var(), "CLAUDE_CODE_PATH");
        r.insert(spec);
        assert!(r.get("claude-code").is_ok());
    }
}
