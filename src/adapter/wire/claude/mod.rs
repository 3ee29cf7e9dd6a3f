//! `claude-stream-json`: Claude Code's `--output-format stream-json --verbose` lines, also
//! spoken by qwen-code (`-o stream-json`). Every fact here comes from the recorded runs in
//! `tests/fixtures/transcripts/claude-code/2.1.330/` and `.../qwen/0.24.4/` (described in
//! docs/wire-formats.md, sections Claude Code and Qwen Code).
//!
//! Two modes, chosen by `wire_options.input`:
//!
//! * `"text"` (default): one-shot, `claude -p PROMPT --output-format stream-json --verbose`;
//!   the parser only reads.
//! * `"stream-json"`: two-way, `claude -p --input-format stream-json --output-format
//!   stream-json --verbose --permission-prompt-tool stdio`. [`WireParser::start`] writes the
//!   prompt as a `user` line; `control_request can_use_tool` becomes an approval request,
//!   answered by a `control_response`; cancel sends a `control_request interrupt`.
//!   `wire_options.initialize = true` sends the SDK's `initialize` control request first:
//!   qwen-code only asks `can_use_tool` after it (without it it waits forever).
//!
//! | line | AgentEvent |
//! |---|---|
//! | `system/init` | `Init` (session_id, model, cwd, tools) |
//! | `system/api_retry`, `system/permission_denied` | `Warning` |
//! | `assistant` text / thinking / tool_use block | `Text` (whole) / `Thinking` / `ToolUse` |
//! | `assistant` with `is_api_error_message` | nothing (its `error` names the kind of the failed `result`) |
//! | `stream_event` `text_delta` / `thinking_delta` | `Text` (delta) / `Thinking`; the whole block that follows is not repeated |
//! | `user` `tool_result` blocks | `ToolResult` |
//! | `result` | `Usage`, then `Done` (`is_error` false) or `Error` with a kind |
//! | `control_request can_use_tool` | `ApprovalRequired` |
//! | `control_request` of another subtype | error `control_response` + `Warning` |
//! | `control_cancel_request` | `Warning` (the request is forgotten) |
//! | non-JSON line | `Warning` |
//!
//! Anything else (`system/status`, `system/thinking_tokens`, `control_response`, qwen's
//! `goal_state` stream events, unknown types and fields) is ignored.

mod result;
mod write;

use std::collections::HashMap;

use serde_json::Value;

use super::{Decision, TurnStart, WireParser};
use crate::adapter::{AgentEvent, ApprovalOption};

pub const FORMAT: &str = "claude-stream-json";

/// Message sent back when the user denies and gives no reason.
const DEFAULT_DENY_MESSAGE: &str = "The user denied this request.";

/// How the CLI gets its input (`wire_options.input`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputMode {
    /// Prompt as an argument; nothing written on stdin.
    #[default]
    Text,
    /// `--input-format stream-json`: prompt, answers and interrupt as JSON lines on stdin.
    StreamJson,
}

/// The format's `wire_options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Options {
    pub input: InputMode,
    /// Send an `initialize` control request before the prompt (qwen-code needs it).
    pub initialize: bool,
}

impl Options {
    /// Reads `input = "text" | "stream-json"` and `initialize = bool`; other keys and values
    /// keep the defaults.
    pub fn from_table(t: &toml::Table) -> Options {
        Options {
            input: match t.get("input").and_then(toml::Value::as_str) {
                Some("stream-json") => InputMode::StreamJson,
                _ => InputMode::Text,
            },
            initialize: t
                .get("initialize")
                .and_then(toml::Value::as_bool)
                .unwrap_or(false),
        }
    }
}

/// Parser state for one process.
#[derive(Debug, Default)]
pub struct ClaudeParser {
    opts: Options,
    /// Inputs of the `can_use_tool` requests not answered yet, by request id: an allow
    /// sends the input back as `updatedInput`.
    pending: HashMap<String, Value>,
    /// Answer text was emitted in this turn (streamed blocks after it start a paragraph).
    text_emitted: bool,
    /// A text block started streaming and has had no delta yet.
    text_block_opened: bool,
    /// Text / thinking streamed as deltas since the last whole block of that kind.
    streamed_text: String,
    streamed_thinking: String,
    /// `error` of the last synthetic API-error assistant message (`authentication_failed`...).
    api_error: Option<String>,
    /// Numbering of the host's own control requests.
    next_request: u64,
}

impl ClaudeParser {
    pub fn new(opts: Options) -> ClaudeParser {
        ClaudeParser {
            opts,
            ..ClaudeParser::default()
        }
    }

    fn request_id(&mut self, prefix: &str) -> String {
        self.next_request += 1;
        format!("{prefix}-{}", self.next_request)
    }

    fn system(&mut self, v: &Value, out: &mut Vec<AgentEvent>) {
        match str_of(v, "subtype") {
            Some("init") => {
                self.new_turn();
                out.push(AgentEvent::Init {
                    session_id: string_of(v, "session_id"),
                    model: string_of(v, "model"),
                    cwd: string_of(v, "cwd"),
                    tools: v
                        .get("tools")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|t| t.as_str().map(str::to_string))
                                .collect()
                        })
                        .unwrap_or_default(),
                });
            }
            Some("api_retry") => {
                let status = match v.get("error_status").and_then(Value::as_u64) {
                    Some(s) => format!("API error {s}"),
                    None => "API request failed".to_string(),
                };
                let mut message = format!(
                    "{status} ({}), retry {} of {}",
                    str_of(v, "error").unwrap_or("unknown"),
                    u64_of(v, "attempt").unwrap_or(0),
                    u64_of(v, "max_retries").unwrap_or(0)
                );
                if let Some(ms) = u64_of(v, "retry_delay_ms") {
                    message.push_str(&format!(" in {ms} ms"));
                }
                out.push(AgentEvent::Warning { message });
            }
            Some("permission_denied") => out.push(AgentEvent::Warning {
                message: format!(
                    "{} was denied without asking: {}",
                    str_of(v, "tool_name").unwrap_or("a tool"),
                    str_of(v, "message").unwrap_or("")
                ),
            }),
            _ => {}
        }
    }

    fn assistant(&mut self, v: &Value, out: &mut Vec<AgentEvent>) {
        if v.get("is_api_error_message").and_then(Value::as_bool) == Some(true) {
            // A synthetic message repeating the API error; the `result` line carries it.
            self.api_error = string_of(v, "error");
            return;
        }
        let subagent = v.get("parent_tool_use_id").is_some_and(Value::is_string);
        let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) else {
            return;
        };
        for b in blocks {
            match str_of(b, "type") {
                Some("text") => {
                    let text = str_of(b, "text").unwrap_or("");
                    if subagent {
                        // A subagent's words are not the answer.
                        push_thinking(out, text);
                    } else {
                        self.whole_text(text, out);
                    }
                }
                Some("thinking") => {
                    let text = str_of(b, "thinking").unwrap_or("");
                    let streamed = std::mem::take(&mut self.streamed_thinking);
                    if streamed.is_empty() {
                        push_thinking(out, text);
                    } else if let Some(rest) = text.strip_prefix(streamed.as_str()) {
                        push_thinking(out, rest);
                    }
                }
                Some("tool_use") => out.push(AgentEvent::ToolUse {
                    id: string_of(b, "id").unwrap_or_default(),
                    name: string_of(b, "name").unwrap_or_else(|| "tool".into()),
                    input: b.get("input").cloned().unwrap_or(Value::Null),
                }),
                _ => {}
            }
        }
    }

    /// A whole text block: emitted as a message, or, when it was streamed as deltas, only
    /// what the deltas missed.
    fn whole_text(&mut self, text: &str, out: &mut Vec<AgentEvent>) {
        let streamed = std::mem::take(&mut self.streamed_text);
        if streamed.is_empty() {
            if !text.is_empty() {
                self.text_emitted = true;
                out.push(AgentEvent::Text {
                    text: text.to_string(),
                    delta: false,
                });
            }
        } else if let Some(rest) = text.strip_prefix(streamed.as_str()) {
            if !rest.is_empty() {
                out.push(AgentEvent::Text {
                    text: rest.to_string(),
                    delta: true,
                });
            }
        }
    }

    fn stream_event(&mut self, v: &Value, out: &mut Vec<AgentEvent>) {
        if v.get("parent_tool_use_id").is_some_and(Value::is_string) {
            return; // a subagent's stream; its whole blocks follow
        }
        let Some(ev) = v.get("event") else { return };
        match str_of(ev, "type") {
            Some("message_start") => {
                self.streamed_text.clear();
                self.streamed_thinking.clear();
            }
            Some("content_block_start")
                if ev.pointer("/content_block/type").and_then(Value::as_str) == Some("text") =>
            {
                self.text_block_opened = true;
            }
            Some("content_block_delta") => {
                let Some(delta) = ev.get("delta") else { return };
                match str_of(delta, "type") {
                    Some("text_delta") => {
                        let text = str_of(delta, "text").unwrap_or("");
                        if text.is_empty() {
                            return;
                        }
                        self.streamed_text.push_str(text);
                        let chunk = if self.text_block_opened && self.text_emitted {
                            format!("\n\n{text}")
                        } else {
                            text.to_string()
                        };
                        self.text_block_opened = false;
                        self.text_emitted = true;
                        out.push(AgentEvent::Text {
                            text: chunk,
                            delta: true,
                        });
                    }
                    Some("thinking_delta") => {
                        let text = str_of(delta, "thinking").unwrap_or("");
                        self.streamed_thinking.push_str(text);
                        push_thinking(out, text);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn user(&mut self, v: &Value, out: &mut Vec<AgentEvent>) {
        let Some(blocks) = v.pointer("/message/content").and_then(Value::as_array) else {
            return; // a replayed prompt
        };
        for b in blocks {
            if str_of(b, "type") != Some("tool_result") {
                continue; // e.g. "[Request interrupted by user]"
            }
            out.push(AgentEvent::ToolResult {
                id: string_of(b, "tool_use_id").unwrap_or_default(),
                output: Some(tool_output(b.get("content"))),
                is_error: b.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            });
        }
    }

    fn control_request(&mut self, v: &Value, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let Some(id) = str_of(v, "request_id") else {
            out.push(AgentEvent::Warning {
                message: "control_request without request_id".into(),
            });
            return;
        };
        let req = v.get("request").unwrap_or(&Value::Null);
        let subtype = str_of(req, "subtype").unwrap_or("");
        if subtype != "can_use_tool" {
            // Nobody on this side handles it: say so, so the CLI does not wait for an answer.
            let error = format!("agent-host does not handle control requests of type '{subtype}'");
            write::error(reply, id, &error);
            out.push(AgentEvent::Warning { message: error });
            return;
        }
        let tool = str_of(req, "tool_name").unwrap_or("tool");
        let input = req.get("input").cloned().unwrap_or(Value::Null);
        let target = input
            .get("command")
            .and_then(Value::as_str)
            .or_else(|| str_of(req, "blocked_path"))
            .or_else(|| path_field(&input))
            .map(str::to_string);
        out.push(AgentEvent::ApprovalRequired {
            id: id.to_string(),
            kind: approval_kind(tool).to_string(),
            tool: Some(tool.to_string()),
            target,
            detail: string_of(req, "description"),
            options: options_of(req),
        });
        self.pending.insert(id.to_string(), input);
    }

    /// Per-turn state starts over (one process can run several turns).
    fn new_turn(&mut self) {
        self.text_emitted = false;
        self.text_block_opened = false;
        self.streamed_text.clear();
        self.streamed_thinking.clear();
        self.api_error = None;
    }
}

impl WireParser for ClaudeParser {
    fn start(&mut self, turn: &TurnStart<'_>) -> Vec<u8> {
        let mut bytes = Vec::new();
        if self.opts.input != InputMode::StreamJson {
            return bytes;
        }
        if self.opts.initialize {
            let id = self.request_id("init");
            write::initialize(&mut bytes, &id);
        }
        write::user(&mut bytes, turn.prompt);
        bytes
    }

    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(line, out, 200) else {
            return;
        };
        match str_of(&v, "type") {
            Some("system") => self.system(&v, out),
            Some("assistant") => self.assistant(&v, out),
            Some("stream_event") => self.stream_event(&v, out),
            Some("user") => self.user(&v, out),
            Some("result") => {
                out.extend(result::events(&v, self.api_error.as_deref()));
                self.pending.clear();
                self.new_turn();
            }
            Some("control_request") => self.control_request(&v, out, reply),
            Some("control_cancel_request") => {
                // The CLI no longer needs the answer (the turn was interrupted, say). The
                // field name is that of every other control message; no recording has one.
                let id = str_of(&v, "request_id").unwrap_or("");
                self.pending.remove(id);
                out.push(AgentEvent::Warning {
                    message: format!("the agent withdrew its approval request {id}"),
                });
            }
            _ => {}
        }
    }

    fn encode_decision(&mut self, d: &Decision) -> Option<Vec<u8>> {
        if self.opts.input != InputMode::StreamJson {
            return None;
        }
        // Only a request the CLI still waits on can be answered.
        let input = self.pending.remove(&d.id)?;
        let mut bytes = Vec::new();
        let answer = if d.allow {
            Ok(&input)
        } else {
            Err(d.message.as_deref().unwrap_or(DEFAULT_DENY_MESSAGE))
        };
        write::permission(&mut bytes, &d.id, answer);
        Some(bytes)
    }

    fn interrupt(&mut self) -> Option<Vec<u8>> {
        if self.opts.input != InputMode::StreamJson {
            return None;
        }
        let id = self.request_id("interrupt");
        let mut bytes = Vec::new();
        write::interrupt(&mut bytes, &id);
        Some(bytes)
    }
}

/// `command` for shell tools, `file-edit` for the editing tools, `tool` for the rest
/// (Claude Code's and qwen-code's tool names, as listed by their `system/init`).
fn approval_kind(tool: &str) -> &'static str {
    match tool {
        "Bash" | "run_shell_command" => "command",
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "write_file" | "edit"
        | "notebook_edit" => "file-edit",
        _ => "tool",
    }
}

/// A path the tool works on, when its input names one (a string field whose name ends in
/// `path`); the recordings only show `command` and `blocked_path`.
fn path_field(input: &Value) -> Option<&str> {
    input
        .as_object()?
        .iter()
        .find(|(k, v)| k.ends_with("path") && v.is_string())
        .and_then(|(_, v)| v.as_str())
}

/// Allow and deny, labelled as qwen-code's `permission_suggestions` label them when present.
fn options_of(req: &Value) -> Vec<ApprovalOption> {
    let label = |behavior: &str, default: &str| {
        req.get("permission_suggestions")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|s| str_of(s, "type") == Some(behavior)))
            .and_then(|s| string_of(s, "label"))
            .unwrap_or_else(|| default.to_string())
    };
    vec![
        ApprovalOption {
            id: "allow".into(),
            label: label("allow", "Allow"),
        },
        ApprovalOption {
            id: "deny".into(),
            label: label("deny", "Deny"),
        },
    ]
}

/// A tool_result's content: a string, or a list of blocks whose text parts are joined.
fn tool_output(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match (str_of(b, "type"), str_of(b, "text")) {
                (_, Some(text)) => text.to_string(),
                (Some(ty), None) => format!("[{ty}]"),
                (None, None) => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

fn push_thinking(out: &mut Vec<AgentEvent>, text: &str) {
    if !text.is_empty() {
        out.push(AgentEvent::Thinking {
            text: text.to_string(),
        });
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn string_of(v: &Value, key: &str) -> Option<String> {
    str_of(v, key).map(str::to_string)
}

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

#[cfg(test)]
mod tests;
