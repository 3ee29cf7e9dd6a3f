//! `codex-exec-json`: the JSONL that `codex exec --json` prints (Codex CLI 0.169.0, recorded in
//! `tests/fixtures/transcripts/codex/0.169.0/`). One-shot: no approvals (exec forces the
//! approval policy to never), nothing is written on stdin, which must be closed (codex exec
//! waits for EOF before it starts).
//!
//! | line | AgentEvent |
//! |---|---|
//! | `thread.started{thread_id}` | `Init` (session id = thread id; model and cwd as configured) |
//! | `item.started` `command_execution` / `file_change` / `mcp_tool_call` / `web_search` | `ToolUse` (id = the item's id) |
//! | `item.completed` of those | `ToolResult` (preceded by its `ToolUse` when no `item.started` came) |
//! | `item.completed` `agent_message{text}` | `Text` (whole message, `delta: false`) |
//! | `item.completed` `reasoning{text}`, `todo_list`, `plan` | `Thinking` |
//! | `item.*` `error{message}` | `Warning` (e.g. unknown model metadata, WebSocket fallback) |
//! | `error{message}` | `Warning` (retry notices; the fatal one is repeated by `turn.failed`) |
//! | `turn.completed{usage}` | `Usage` then `Done` (result = the last agent message) |
//! | `turn.failed{error{message}}` | `Error` (kind `auth` for 401/403 and a missing key variable) |
//! | anything else, non-JSON | nothing / `Warning` |
//!
//! Usage: `turn.completed.usage` counts the whole thread, including the turns before a
//! `resume` (recorded: 200/40, then 400/80 after `exec resume`). A process runs one turn, so on
//! a new thread the numbers are the turn's own; on a resumed thread the parser cannot know the
//! earlier totals and reports the thread's totals (the `Usage` of a resumed turn is cumulative
//! for the context).
//!
//! Lines are read as `serde_json::Value`: Codex 0.169 repeats the `id` key in `web_search`
//! items (`{"id":"item_1","type":"web_search","id":"ws_…"}`); the last one wins, and
//! `item.started` and `item.completed` of one search carry the same pair.

use serde_json::{json, Value};

use super::{TurnStart, WireParser};
use crate::adapter::{AgentEvent, Usage};

pub const FORMAT: &str = "codex-exec-json";

/// Parser state for one `codex exec` run.
#[derive(Debug, Default)]
pub struct CodexExecParser {
    model: Option<String>,
    cwd: Option<String>,
    /// Tool items announced by `item.started` (so `item.completed` alone still pairs).
    started: Vec<String>,
    last_message: Option<String>,
    done: bool,
}

impl CodexExecParser {
    pub fn new() -> CodexExecParser {
        CodexExecParser::default()
    }

    fn on_item(&mut self, phase: &str, item: &Value, out: &mut Vec<AgentEvent>) {
        let id = str_at(item, "id").unwrap_or_default();
        match str_at(item, "type").unwrap_or_default().as_str() {
            "agent_message" if phase == "item.completed" => {
                let text = str_at(item, "text").unwrap_or_default();
                if !text.is_empty() {
                    self.last_message = Some(text.clone());
                    out.push(AgentEvent::Text { text, delta: false });
                }
            }
            "reasoning" | "plan" if phase == "item.completed" => {
                if let Some(text) = str_at(item, "text").filter(|t| !t.is_empty()) {
                    out.push(AgentEvent::Thinking { text });
                }
            }
            "todo_list" => {
                let text = todo_text(item);
                if !text.is_empty() {
                    out.push(AgentEvent::Thinking { text });
                }
            }
            "error" if phase == "item.completed" => out.push(AgentEvent::Warning {
                message: str_at(item, "message").unwrap_or_default(),
            }),
            ty @ ("command_execution" | "file_change" | "mcp_tool_call" | "web_search") => {
                let announced = self.started.contains(&id);
                if !announced {
                    self.started.push(id.clone());
                    out.push(tool_use(&EXEC_ITEMS, ty, &id, item));
                }
                if phase == "item.completed" {
                    out.push(tool_result(&EXEC_ITEMS, ty, &id, item));
                }
            }
            _ => {}
        }
    }
}

impl WireParser for CodexExecParser {
    fn start(&mut self, turn: &TurnStart<'_>) -> Vec<u8> {
        self.model = turn.model.map(str::to_string);
        self.cwd = Some(turn.cwd.to_string()).filter(|c| !c.is_empty());
        Vec::new()
    }

    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(line, out, 300) else {
            return;
        };
        match str_at(&v, "type").unwrap_or_default().as_str() {
            "thread.started" => out.push(AgentEvent::Init {
                session_id: str_at(&v, "thread_id"),
                model: self.model.clone(),
                cwd: self.cwd.clone(),
                tools: Vec::new(),
            }),
            phase @ ("item.started" | "item.updated" | "item.completed") => {
                if let Some(item) = v.get("item") {
                    self.on_item(phase, item, out);
                }
            }
            "error" => out.push(AgentEvent::Warning {
                message: str_at(&v, "message").unwrap_or_default(),
            }),
            "turn.completed" if !self.done => {
                self.done = true;
                let usage = v.get("usage").unwrap_or(&Value::Null);
                out.push(AgentEvent::Usage(Usage {
                    input_tokens: usage.get("input_tokens").and_then(Value::as_u64),
                    output_tokens: usage.get("output_tokens").and_then(Value::as_u64),
                    cost_usd: None,
                    duration_ms: None,
                }));
                out.push(AgentEvent::Done {
                    result: self.last_message.clone(),
                    is_error: false,
                });
            }
            "turn.failed" if !self.done => {
                self.done = true;
                let message = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("codex reported a failed turn")
                    .to_string();
                let kind = error_kind(&message);
                out.push(AgentEvent::Error { message, kind });
            }
            // turn.started, item.plan.delta, request_user_input (cannot be answered in exec),
            // and anything newer.
            _ => {}
        }
    }
}

pub(super) fn str_at(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The `kind` of a fatal error, from its message. Recorded: `unexpected status 401
/// Unauthorized: …` and ``Missing environment variable: `FAKE_KEY`.`` (the provider's key).
pub(super) fn error_kind(message: &str) -> Option<String> {
    let m = message.to_ascii_lowercase();
    let auth = [
        "401 unauthorized",
        "403 forbidden",
        "unauthorized",
        "missing environment variable",
        "incorrect api key",
    ];
    auth.iter()
        .any(|p| m.contains(p))
        .then(|| "auth".to_string())
}

/// A command's result text: its output; its exit code when it printed nothing or failed.
pub(super) fn command_output(output: &str, exit_code: Option<i64>) -> String {
    match exit_code {
        Some(c) if output.is_empty() => format!("exit code {c}"),
        Some(0) | None => output.to_string(),
        Some(c) => format!("{output}\n(exit code {c})"),
    }
}

/// True when a finished item's `status` says it did not complete (`failed`, `declined`).
pub(super) fn failed_status(status: Option<&str>) -> bool {
    matches!(status, Some(s) if s != "completed")
}

/// The names one codex protocol gives its tool items and their fields: `codex exec --json`
/// writes snake_case, the app server camelCase; the items are otherwise the same.
pub(super) struct ItemNames {
    pub command: &'static str,
    pub file_change: &'static str,
    pub mcp: &'static str,
    pub exit_code: &'static str,
    pub output: &'static str,
    /// The command item carries its working directory (shown in the tool input).
    pub command_cwd: bool,
}

const EXEC_ITEMS: ItemNames = ItemNames {
    command: "command_execution",
    file_change: "file_change",
    mcp: "mcp_tool_call",
    exit_code: "exit_code",
    output: "aggregated_output",
    command_cwd: false,
};

pub(super) fn tool_use(names: &ItemNames, ty: &str, id: &str, item: &Value) -> AgentEvent {
    let (name, input) = if ty == names.command {
        let input = if names.command_cwd {
            json!({"command": item.get("command"), "cwd": item.get("cwd")})
        } else {
            json!({"command": item.get("command")})
        };
        (ty.to_string(), input)
    } else if ty == names.file_change {
        (ty.to_string(), json!({"changes": item.get("changes")}))
    } else if ty == names.mcp {
        (
            mcp_name(item),
            item.get("arguments").cloned().unwrap_or(Value::Null),
        )
    } else {
        (
            ty.to_string(),
            json!({"query": item.get("query"), "action": item.get("action")}),
        )
    };
    AgentEvent::ToolUse {
        id: id.to_string(),
        name,
        input,
    }
}

pub(super) fn tool_result(names: &ItemNames, ty: &str, id: &str, item: &Value) -> AgentEvent {
    let status = item.get("status").and_then(Value::as_str);
    let (output, is_error) = if ty == names.command {
        let code = item.get(names.exit_code).and_then(Value::as_i64);
        let out = str_at(item, names.output).unwrap_or_default();
        (
            command_output(&out, code),
            failed_status(status) || code.is_some_and(|c| c != 0),
        )
    } else if ty == names.file_change {
        (changes_text(item, "kind"), failed_status(status))
    } else if ty == names.mcp {
        match item.pointer("/error/message").and_then(Value::as_str) {
            Some(e) => (e.to_string(), true),
            None => (
                content_text(item.pointer("/result/content")),
                failed_status(status),
            ),
        }
    } else {
        (str_at(item, "query").unwrap_or_default(), false)
    };
    AgentEvent::ToolResult {
        id: id.to_string(),
        output: Some(output),
        is_error,
    }
}

pub(super) fn mcp_name(item: &Value) -> String {
    match (str_at(item, "server"), str_at(item, "tool")) {
        (Some(s), Some(t)) => format!("{s}/{t}"),
        (None, Some(t)) => t,
        _ => "mcp_tool_call".to_string(),
    }
}

/// One line per changed file: `add /path`. `kind_key` names the field holding the kind.
pub(super) fn changes_text(item: &Value, kind_key: &str) -> String {
    item.get("changes")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| {
                    let path = str_at(c, "path").unwrap_or_default();
                    match c.get(kind_key) {
                        Some(Value::String(k)) => format!("{k} {path}"),
                        Some(Value::Object(o)) => match o.get("type").and_then(Value::as_str) {
                            Some(k) => format!("{k} {path}"),
                            None => path,
                        },
                        _ => path,
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The paths of a file change item.
pub(super) fn change_paths(item: &Value) -> Vec<String> {
    item.get("changes")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|c| str_at(c, "path")).collect())
        .unwrap_or_default()
}

/// The text of MCP result content blocks (`[{type:"text",text}]`), or the JSON.
pub(super) fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match b.get("text").and_then(Value::as_str) {
                Some(t) => t.to_string(),
                None => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => String::new(),
    }
}

fn todo_text(item: &Value) -> String {
    item.get("items")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|t| {
                    let done = t.get("completed").and_then(Value::as_bool).unwrap_or(false);
                    let text = str_at(t, "text").unwrap_or_default();
                    format!("[{}] {text}", if done { "x" } else { " " })
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
