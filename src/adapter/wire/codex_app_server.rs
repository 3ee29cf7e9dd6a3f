//! `codex-app-server`: agent-host as the JSON-RPC client of `codex app-server` on stdio
//! (Codex CLI 0.169.0; recorded in
//! `tests/fixtures/transcripts/codex/0.169.0/codex-app-server-approval.transcript.jsonl`).
//! Messages are JSON lines without the `"jsonrpc"` member.
//!
//! The handshake, as recorded, each step after the previous one's response:
//!
//! 1. `start()`: `initialize{clientInfo}` (id 1);
//! 2. its response → `initialized` (notification) and `thread/start{cwd, model?}` (id 2), or,
//!    when the turn resumes a session, `thread/resume{threadId, cwd, model?}`;
//! 3. that response (`result.thread.id`) → `Init` (session id = thread id) and
//!    `turn/start{threadId, input:[{type:"text", text: prompt}]}` (id 3).
//!
//! Extra thread parameters (`approvalPolicy`, `sandbox`, `modelProvider`, …) come from the
//! adapter's `wire_options.thread_params` table; without them Codex uses its configuration
//! (`-c approval_policy=…` on the command line). `wire_options.client_name`/`client_title`/
//! `client_version` set `clientInfo`.
//!
//! | from Codex | AgentEvent |
//! |---|---|
//! | response to thread/start or thread/resume; `thread/started` | `Init` (once) |
//! | `item/agentMessage/delta` | `Text` delta (a later message starts with a blank line) |
//! | `item/completed` `agentMessage` without deltas | `Text` (whole) |
//! | `item/completed` `reasoning` (`summary` + `content`), `plan` | `Thinking` |
//! | `item/started` `commandExecution` / `fileChange` / `mcpToolCall` / `webSearch` | `ToolUse` |
//! | `item/completed` of those | `ToolResult` |
//! | request `item/commandExecution/requestApproval` | `ApprovalRequired` kind `command`, target = command, detail = reason |
//! | request `item/fileChange/requestApproval` | `ApprovalRequired` kind `file-edit`, target = the item's paths |
//! | other server requests | answered at once with a JSON-RPC error; `Warning` |
//! | `thread/tokenUsage/updated` | kept; `Usage` of this turn at `turn/completed` |
//! | `turn/completed` status `completed` | `Usage`, `Done` (result = last agent message) |
//! | `turn/completed` status `failed` / `interrupted`; error response to our request | `Error` |
//! | `warning`, `configWarning`, `error` notifications, non-JSON | `Warning` |
//!
//! Usage: `tokenUsage.total` counts the thread, `tokenUsage.last` the latest model request
//! (recorded: total 120 then 240, last 120 both times). The turn's usage is the latest
//! total minus the total before the turn's first request (first total − first last), so it
//! is per turn also on a resumed thread.
//!
//! Approval ids are the JSON-RPC request ids as strings (`0` → `"0"`); the answer is
//! `{"id":<same id>,"result":{"decision":…}}`: `accept` when allowed, `decline` when denied
//! (`cancel` when the request offers `cancel` but not `decline`, as the recorded command
//! approval does), or the offered decision named by the user's `option`.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use super::codex_exec::{change_paths, error_kind, str_at, tool_result, tool_use, ItemNames};
use super::{Decision, TurnStart, WireParser};
use crate::adapter::{AgentEvent, ApprovalOption, Usage};

pub const FORMAT: &str = "codex-app-server";

/// The app server's names for the tool items `codex exec --json` also prints.
const APP_SERVER_ITEMS: ItemNames = ItemNames {
    command: "commandExecution",
    file_change: "fileChange",
    mcp: "mcpToolCall",
    exit_code: "exitCode",
    output: "aggregatedOutput",
    command_cwd: true,
};

/// What a request we sent was.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sent {
    Initialize,
    Thread,
    TurnStart,
    Interrupt,
}

/// A pending approval request: its JSON-RPC id and the decisions it offered.
#[derive(Debug)]
struct Pending {
    rpc_id: Value,
    offered: Option<Vec<Value>>,
}

/// The host's side of one `codex app-server` conversation (one turn per process).
#[derive(Debug, Default)]
pub struct CodexAppServerParser {
    client_info: Value,
    thread_params: Map<String, Value>,
    next_id: u64,
    sent: HashMap<u64, Sent>,
    prompt: String,
    cwd: String,
    model: Option<String>,
    resume_thread: Option<String>,
    thread_id: Option<String>,
    turn_id: Option<String>,
    init_done: bool,
    done: bool,
    /// A denial was sent as `cancel`, which ends the turn (`interrupted`).
    canceled_by_user: bool,
    approvals: HashMap<String, Pending>,
    /// Paths of file changes, by item id (a file approval names only the item).
    file_items: HashMap<String, Vec<String>>,
    tools_started: Vec<String>,
    delta_items: Vec<String>,
    answer_has_text: bool,
    last_message: Option<String>,
    /// Thread tokens before this turn (input, output), and the latest totals.
    usage_base: Option<(u64, u64)>,
    usage_total: Option<(u64, u64)>,
}

impl CodexAppServerParser {
    /// A parser configured by the adapter's `wire_options`.
    pub fn new(options: &toml::Table) -> CodexAppServerParser {
        let opt = |k: &str, default: &str| {
            options
                .get(k)
                .and_then(toml::Value::as_str)
                .unwrap_or(default)
                .to_string()
        };
        let thread_params = options
            .get("thread_params")
            .and_then(|t| serde_json::to_value(t).ok())
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .unwrap_or_default();
        CodexAppServerParser {
            client_info: json!({
                "name": opt("client_name", "agent-host"),
                "title": opt("client_title", "agent-host"),
                "version": opt("client_version", env!("CARGO_PKG_VERSION")),
            }),
            thread_params,
            next_id: 1,
            ..CodexAppServerParser::default()
        }
    }

    fn request(&mut self, kind: Sent, method: &str, params: Value) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        self.sent.insert(id, kind);
        line(&json!({"id": id, "method": method, "params": params}))
    }

    fn thread_request(&mut self) -> Vec<u8> {
        let mut params = Map::new();
        let method = match self.resume_thread.clone() {
            Some(t) => {
                params.insert("threadId".into(), json!(t));
                "thread/resume"
            }
            None => "thread/start",
        };
        params.insert("cwd".into(), json!(self.cwd));
        if let Some(m) = &self.model {
            params.insert("model".into(), json!(m));
        }
        for (k, v) in &self.thread_params {
            params.insert(k.clone(), v.clone());
        }
        self.request(Sent::Thread, method, Value::Object(params))
    }

    fn init_event(&mut self, thread: &Value, result: &Value, out: &mut Vec<AgentEvent>) {
        let Some(id) = str_at(thread, "id") else {
            return;
        };
        self.thread_id = Some(id.clone());
        if self.init_done {
            return;
        }
        self.init_done = true;
        out.push(AgentEvent::Init {
            session_id: Some(id),
            model: str_at(result, "model").or_else(|| str_at(thread, "model")),
            cwd: str_at(result, "cwd").or_else(|| str_at(thread, "cwd")),
            tools: Vec::new(),
        });
    }

    fn on_response(&mut self, v: &Value, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let Some(kind) = v
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| self.sent.remove(&id))
        else {
            return;
        };
        if let Some(err) = v.get("error") {
            let message = str_at(err, "message").unwrap_or_else(|| err.to_string());
            if kind == Sent::Interrupt {
                out.push(AgentEvent::Warning {
                    message: format!("turn/interrupt failed: {message}"),
                });
            } else if !self.done {
                self.done = true;
                let what = match kind {
                    Sent::Initialize => "initialize",
                    Sent::Thread if self.resume_thread.is_some() => "thread/resume",
                    Sent::Thread => "thread/start",
                    _ => "turn/start",
                };
                out.push(AgentEvent::Error {
                    kind: error_kind(&message),
                    message: format!("codex app-server {what} failed: {message}"),
                });
            }
            return;
        }
        let result = v.get("result").unwrap_or(&Value::Null);
        match kind {
            Sent::Initialize => {
                reply.extend(line(&json!({"method": "initialized"})));
                let req = self.thread_request();
                reply.extend(req);
            }
            Sent::Thread => {
                let thread = result.get("thread").unwrap_or(&Value::Null);
                self.init_event(thread, result, out);
                let Some(thread_id) = self.thread_id.clone() else {
                    self.done = true;
                    out.push(AgentEvent::Error {
                        message: "codex app-server returned no thread id".into(),
                        kind: None,
                    });
                    return;
                };
                let params = json!({
                    "threadId": thread_id,
                    "input": [{"type": "text", "text": self.prompt}],
                });
                let req = self.request(Sent::TurnStart, "turn/start", params);
                reply.extend(req);
            }
            Sent::TurnStart => {
                if let Some(t) = result.pointer("/turn/id").and_then(Value::as_str) {
                    self.turn_id = Some(t.to_string());
                }
            }
            Sent::Interrupt => {}
        }
    }

    fn on_request(&mut self, v: &Value, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let rpc_id = v.get("id").cloned().unwrap_or(Value::Null);
        let id = match &rpc_id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let params = v.get("params").unwrap_or(&Value::Null);
        let method = str_at(v, "method").unwrap_or_default();
        let (kind, target) = match method.as_str() {
            "item/commandExecution/requestApproval" => ("command", str_at(params, "command")),
            "item/fileChange/requestApproval" => {
                let paths = str_at(params, "itemId")
                    .and_then(|i| self.file_items.get(&i))
                    .map(|p| p.join(", "))
                    .filter(|p| !p.is_empty());
                ("file-edit", paths)
            }
            _ => {
                reply.extend(line(&json!({
                    "id": rpc_id,
                    "error": {"code": -32601, "message": format!("{method} is not supported by agent-host")},
                })));
                out.push(AgentEvent::Warning {
                    message: format!("declined an unsupported codex request: {method}"),
                });
                return;
            }
        };
        let offered = params
            .get("availableDecisions")
            .and_then(Value::as_array)
            .cloned();
        let options = offered
            .iter()
            .flatten()
            .filter_map(decision_name)
            .map(|name| ApprovalOption {
                id: name.clone(),
                label: name,
            })
            .collect();
        self.approvals
            .insert(id.clone(), Pending { rpc_id, offered });
        out.push(AgentEvent::ApprovalRequired {
            id,
            kind: kind.to_string(),
            tool: None,
            target,
            detail: str_at(params, "reason"),
            options,
        });
    }

    fn on_item(&mut self, started: bool, params: &Value, out: &mut Vec<AgentEvent>) {
        let Some(item) = params.get("item") else {
            return;
        };
        let id = str_at(item, "id").unwrap_or_default();
        let ty = str_at(item, "type").unwrap_or_default();
        match ty.as_str() {
            "agentMessage" if !started => {
                let text = str_at(item, "text").unwrap_or_default();
                if text.is_empty() {
                    return;
                }
                if !self.delta_items.contains(&id) {
                    self.answer_has_text = true;
                    out.push(AgentEvent::Text {
                        text: text.clone(),
                        delta: false,
                    });
                }
                self.last_message = Some(text);
            }
            "reasoning" if !started => {
                let parts: Vec<&str> = ["summary", "content"]
                    .iter()
                    .filter_map(|k| item.get(*k).and_then(Value::as_array))
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if !parts.is_empty() {
                    out.push(AgentEvent::Thinking {
                        text: parts.join("\n\n"),
                    });
                }
            }
            "plan" if !started => {
                if let Some(text) = str_at(item, "text").filter(|t| !t.is_empty()) {
                    out.push(AgentEvent::Thinking { text });
                }
            }
            "commandExecution" | "fileChange" | "mcpToolCall" | "webSearch" => {
                if ty == "fileChange" {
                    self.file_items.insert(id.clone(), change_paths(item));
                }
                if !self.tools_started.contains(&id) {
                    self.tools_started.push(id.clone());
                    out.push(tool_use(&APP_SERVER_ITEMS, &ty, &id, item));
                }
                if !started {
                    out.push(tool_result(&APP_SERVER_ITEMS, &ty, &id, item));
                }
            }
            _ => {}
        }
    }

    fn on_delta(&mut self, params: &Value, out: &mut Vec<AgentEvent>) {
        let Some(delta) = str_at(params, "delta").filter(|d| !d.is_empty()) else {
            return;
        };
        let item = str_at(params, "itemId").unwrap_or_default();
        let text = if self.delta_items.contains(&item) {
            delta
        } else {
            self.delta_items.push(item);
            if self.answer_has_text {
                format!("\n\n{delta}")
            } else {
                delta
            }
        };
        self.answer_has_text = true;
        out.push(AgentEvent::Text { text, delta: true });
    }

    fn on_usage(&mut self, params: &Value) {
        let pair = |v: Option<&Value>| {
            let v = v?;
            Some((
                v.get("inputTokens").and_then(Value::as_u64)?,
                v.get("outputTokens").and_then(Value::as_u64)?,
            ))
        };
        let Some(total) = pair(params.pointer("/tokenUsage/total")) else {
            return;
        };
        if self.usage_base.is_none() {
            let last = pair(params.pointer("/tokenUsage/last")).unwrap_or(total);
            self.usage_base = Some((
                total.0.saturating_sub(last.0),
                total.1.saturating_sub(last.1),
            ));
        }
        self.usage_total = Some(total);
    }

    fn on_turn_completed(&mut self, params: &Value, out: &mut Vec<AgentEvent>) {
        if self.done {
            return;
        }
        self.done = true;
        let turn = params.get("turn").unwrap_or(&Value::Null);
        let (input_tokens, output_tokens) = match (self.usage_total, self.usage_base) {
            (Some(t), Some(b)) => (Some(t.0.saturating_sub(b.0)), Some(t.1.saturating_sub(b.1))),
            _ => (None, None),
        };
        let duration_ms = turn.get("durationMs").and_then(Value::as_u64);
        if input_tokens.is_some() || duration_ms.is_some() {
            out.push(AgentEvent::Usage(Usage {
                input_tokens,
                output_tokens,
                cost_usd: None,
                duration_ms,
            }));
        }
        match turn.get("status").and_then(Value::as_str) {
            Some("failed") => {
                let message = turn
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("codex reported a failed turn")
                    .to_string();
                let info = turn
                    .pointer("/error/codexErrorInfo")
                    .map(Value::to_string)
                    .unwrap_or_default();
                let kind = error_kind(&message).or_else(|| error_kind(&info));
                out.push(AgentEvent::Error { message, kind });
            }
            Some("interrupted") if self.canceled_by_user => out.push(AgentEvent::Done {
                result: Some("Codex ended the turn: the request was declined.".into()),
                is_error: false,
            }),
            Some("interrupted") => out.push(AgentEvent::Error {
                message: "the turn was interrupted".into(),
                kind: Some("interrupted".into()),
            }),
            _ => out.push(AgentEvent::Done {
                result: self.last_message.clone(),
                is_error: false,
            }),
        }
    }
}

impl WireParser for CodexAppServerParser {
    fn start(&mut self, turn: &TurnStart<'_>) -> Vec<u8> {
        self.prompt = turn.prompt.to_string();
        self.cwd = turn.cwd.to_string();
        self.model = turn.model.map(str::to_string);
        self.resume_thread = turn
            .session_id
            .filter(|s| turn.resume && !s.is_empty())
            .map(str::to_string);
        let params = json!({"clientInfo": self.client_info});
        self.request(Sent::Initialize, "initialize", params)
    }

    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(line, out, 300) else {
            return;
        };
        let Some(method) = str_at(&v, "method") else {
            self.on_response(&v, out, reply);
            return;
        };
        if v.get("id").is_some() {
            self.on_request(&v, out, reply);
            return;
        }
        let params = v.get("params").unwrap_or(&Value::Null);
        match method.as_str() {
            "thread/started" => {
                let thread = params.get("thread").unwrap_or(&Value::Null);
                self.init_event(thread, &Value::Null, out);
            }
            "turn/started" => {
                if let Some(t) = params.pointer("/turn/id").and_then(Value::as_str) {
                    self.turn_id = Some(t.to_string());
                }
            }
            "item/started" => self.on_item(true, params, out),
            "item/completed" => self.on_item(false, params, out),
            "item/agentMessage/delta" => self.on_delta(params, out),
            "thread/tokenUsage/updated" => self.on_usage(params),
            "turn/completed" => self.on_turn_completed(params, out),
            "warning" | "configWarning" | "error" => {
                let message = str_at(params, "message")
                    .or_else(|| str_at(params, "summary"))
                    .or_else(|| {
                        params
                            .pointer("/error/message")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| params.to_string());
                out.push(AgentEvent::Warning { message });
            }
            _ => {}
        }
    }

    fn encode_decision(&mut self, d: &Decision) -> Option<Vec<u8>> {
        let pending = self.approvals.remove(&d.id)?;
        let offered = pending.offered.unwrap_or_default();
        let named = |name: &str| {
            offered
                .iter()
                .find(|o| decision_name(o).as_deref() == Some(name))
        };
        let decision = match d.option.as_deref().and_then(named) {
            Some(chosen) => chosen.clone(),
            None if d.allow => json!("accept"),
            None if offered.is_empty() || named("decline").is_some() => json!("decline"),
            None if named("cancel").is_some() => json!("cancel"),
            None => json!("decline"),
        };
        self.canceled_by_user |= decision == json!("cancel");
        Some(line(
            &json!({"id": pending.rpc_id, "result": {"decision": decision}}),
        ))
    }

    fn interrupt(&mut self) -> Option<Vec<u8>> {
        if self.done {
            return None;
        }
        let params = json!({"threadId": self.thread_id.clone()?, "turnId": self.turn_id.clone()?});
        Some(self.request(Sent::Interrupt, "turn/interrupt", params))
    }
}

/// A decision's name: the string, or the single key of an object decision
/// (`{"acceptWithExecpolicyAmendment": {…}}`).
fn decision_name(d: &Value) -> Option<String> {
    match d {
        Value::String(s) => Some(s.clone()),
        Value::Object(m) => m.keys().next().cloned(),
        _ => None,
    }
}

fn line(v: &Value) -> Vec<u8> {
    let mut bytes = v.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests;
