//! One parser per CLI output format. A parser turns one line of output into zero or more
//! [`AgentEvent`]s and knows how to phrase answers on the CLI's stdin.

pub(crate) mod acp;
pub(crate) mod claude;
pub(crate) mod codex_app_server;
pub(crate) mod codex_exec;
pub(crate) mod cursor;
mod error;
pub(crate) mod gemini;
pub(crate) mod native;
pub(crate) mod opencode;
pub(crate) mod rules;
pub(crate) mod text;

use super::{AdapterSpec, AgentEvent};
pub use error::{OptionsError, RuleProblem};

/// Names of the supported wire formats (the `wire` key of an adapter).
pub const FORMATS: &[&str] = &[
    native::FORMAT,
    claude::FORMAT,
    codex_exec::FORMAT,
    codex_app_server::FORMAT,
    gemini::FORMAT,
    opencode::FORMAT,
    cursor::FORMAT,
    acp::FORMAT,
    rules::FORMAT,
    text::FORMAT,
];

/// The user's answer to an approval request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The approval request's id.
    pub id: String,
    pub allow: bool,
    /// The option chosen, when the request offered options.
    pub option: Option<String>,
    /// Free text from the user (the answer to a question, or a reason).
    pub message: Option<String>,
    /// The `messageId` of the A2A message that carried the answer.
    pub message_id: Option<String>,
}

/// What a protocol needs to know to start a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnStart<'a> {
    /// The user's prompt.
    pub prompt: &'a str,
    /// The CLI session: a host-chosen id for a new session, or the id to resume.
    pub session_id: Option<&'a str>,
    /// True when `session_id` names an existing session to resume.
    pub resume: bool,
    /// Working directory of the CLI.
    pub cwd: &'a str,
    /// Model requested by the configuration.
    pub model: Option<&'a str>,
}

/// A parser (and, for two-way protocols, the host's side of the conversation) for one CLI's
/// output format.
pub trait WireParser: Send {
    /// Bytes to write on the CLI's stdin right after it starts: the prompt in the CLI's input
    /// protocol, or the first step of a JSON-RPC handshake. Default: nothing (the prompt went
    /// as an argument or as raw stdin).
    fn start(&mut self, _turn: &TurnStart<'_>) -> Vec<u8> {
        Vec::new()
    }

    /// Parses one cleaned line of output (no trailing newline), appending events to `out`
    /// and any bytes the protocol must send back at once (JSON-RPC responses, the next
    /// handshake step) to `reply`. Never fails: lines it does not understand become nothing
    /// or a warning.
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>);

    /// The bytes to write on the CLI's stdin to answer an approval request, if the format
    /// supports answering. Default: none (one-way formats: the CLI cannot be asked).
    fn encode_decision(&mut self, _decision: &Decision) -> Option<Vec<u8>> {
        None
    }

    /// The bytes that give the CLI a message from the client while it works (a message for a
    /// task that is working, not waiting for an answer), if the format takes such messages.
    /// Default: none, and the message is refused.
    fn encode_message(&mut self, _text: &str, _message_id: &str) -> Option<Vec<u8>> {
        None
    }

    /// Bytes asking the CLI to end the turn by itself (its own interrupt), sent before the
    /// process group is signalled. Default: none.
    fn interrupt(&mut self) -> Option<Vec<u8>> {
        None
    }

    /// The earlier turns of the context as text, given before [`WireParser::start`] of a
    /// follow-up: a protocol that cannot resume the CLI's session starts a new one and tells
    /// it these (and reports [`AgentEvent::SessionReplaced`]). Default: ignored.
    fn set_history(&mut self, _earlier_turns: &str) {}
}

/// One line of output as a JSON object, or None: nothing for a blank line, a warning (with
/// the line's first `excerpt` bytes) for anything else that is not a JSON object.
fn json_line(line: &str, out: &mut Vec<AgentEvent>, excerpt: usize) -> Option<serde_json::Value> {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return None;
    }
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(v @ serde_json::Value::Object(_)) => Some(v),
        _ => {
            out.push(AgentEvent::Warning {
                message: format!("non-JSON output: {}", clip(trimmed, excerpt)),
            });
            None
        }
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn clip(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A parser for the adapter's format (configured by its `wire_options`).
pub fn parser_for(spec: &AdapterSpec) -> Option<Box<dyn WireParser>> {
    match spec.wire.as_str() {
        native::FORMAT => Some(Box::new(native::NativeParser::new(&spec.wire_options))),
        claude::FORMAT => Some(Box::new(claude::ClaudeParser::new(
            claude::Options::from_table(&spec.wire_options),
        ))),
        codex_exec::FORMAT => Some(Box::new(codex_exec::CodexExecParser::new())),
        codex_app_server::FORMAT => Some(Box::new(codex_app_server::CodexAppServerParser::new(
            &spec.wire_options,
        ))),
        gemini::FORMAT => Some(Box::new(gemini::GeminiParser::new())),
        opencode::FORMAT => Some(Box::new(opencode::OpencodeParser::new())),
        cursor::FORMAT => Some(Box::new(cursor::CursorParser)),
        acp::FORMAT => Some(Box::new(acp::AcpParser::new())),
        rules::FORMAT => Some(Box::new(rules::RulesParser::new(spec))),
        text::FORMAT => Some(Box::new(text::TextParser::new(spec))),
        _ => None,
    }
}

/// Checks the adapter's `wire_options` for its format (the rules of `jsonl-rules`, the regexes
/// of `text`), so a broken adapter file fails when it is loaded rather than on its first turn.
pub fn validate(spec: &AdapterSpec) -> Result<(), OptionsError> {
    match spec.wire.as_str() {
        rules::FORMAT => rules::validate(spec),
        text::FORMAT => text::validate(spec),
        _ => Ok(()),
    }
}

/// Golden tests: replaying recorded CLI output (tests/fixtures/transcripts) through a parser
/// and the task mapping.
#[cfg(test)]
pub(crate) mod golden {
    use super::*;
    use crate::task::TurnMapper;
    use serde_json::Value;

    /// The lines a CLI printed on stdout, from a fixture under tests/fixtures/transcripts/.
    /// A `.transcript.jsonl` (a driven run) gives its `"dir":"out"` messages and its
    /// `out-nonjson` lines; any other file gives its lines.
    pub fn stdout_lines(fixture: &str) -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/transcripts")
            .join(fixture);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
        if !fixture.ends_with(".transcript.jsonl") {
            // Cleaned as the runner cleans what a CLI prints (CR and escape codes removed).
            return text
                .split('\n')
                .map(|l| crate::runner::clean_line(l.as_bytes()))
                .filter(|l| !l.is_empty())
                .collect();
        }
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| match v["dir"].as_str() {
                Some("out") => Some(v["msg"].to_string()),
                Some("out-nonjson") => v["msg"].as_str().map(str::to_string),
                _ => None,
            })
            .collect()
    }

    /// The events a parser makes of the fixture's lines.
    pub fn events(parser: &mut dyn WireParser, fixture: &str) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        let mut reply = Vec::new();
        for line in stdout_lines(fixture) {
            parser.parse_line(&line, &mut out, &mut reply);
        }
        out
    }

    /// The A2A updates (v1.0 JSON) the events become. Timestamps and generated message ids
    /// change from run to run: snapshot them with [`assert_updates!`], which redacts them.
    pub fn updates(events: &[AgentEvent]) -> Vec<Value> {
        // The recordings' working directory is the placeholder /workspace/project.
        let mut m = TurnMapper::new("task-1", "context-1").with_redactor(crate::task::Redactor {
            workspace: vec!["/workspace/project".into()],
            secrets: vec![],
        });
        let mut out: Vec<Value> = m
            .started()
            .iter()
            .map(|u| serde_json::to_value(u).unwrap_or_default())
            .collect();
        for ev in events {
            out.extend(
                m.on_event(ev.clone())
                    .iter()
                    .map(|u| serde_json::to_value(u).unwrap_or_default()),
            );
        }
        out
    }

    /// `insta::assert_json_snapshot!` of [`updates`] (optionally named) with insta's
    /// redactions for what changes from run to run: every `timestamp` and `messageId`.
    macro_rules! assert_updates {
        ($updates:expr) => {
            insta::assert_json_snapshot!($updates, {
                ".**.timestamp" => "[timestamp]",
                ".**.messageId" => "[message-id]",
            })
        };
        ($name:expr, $updates:expr) => {
            insta::assert_json_snapshot!($name, $updates, {
                ".**.timestamp" => "[timestamp]",
                ".**.messageId" => "[message-id]",
            })
        };
    }
    pub(crate) use assert_updates;
}
