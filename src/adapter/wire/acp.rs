//! `acp`: the Agent Client Protocol (JSON-RPC 2.0, one message per line on stdio), spoken by
//! `gemini --acp`, `qwen --acp` and `opencode acp`. The host is the ACP client.
//!
//! The conversation, as recorded with the real CLIs (`tests/fixtures/transcripts/*/…/
//! *-acp-permission.transcript.jsonl`):
//!
//! 1. `start` sends `initialize` (no file system, no terminal: the agent does its own I/O);
//! 2. its response → `session/new` (`cwd`, no MCP servers), or `session/load` when the turn
//!    resumes a session and the agent advertised `loadSession`;
//! 3. that response → `session/prompt`; the session id becomes [`AgentEvent::Init`]. A
//!    `session/load` that fails (Gemini CLI 0.61.0 loses a session resumed in the UTC minute
//!    it was created: its file is named after that minute and the load starts a new recording
//!    under the same name before reading the old one) is followed by `session/new`, and the
//!    prompt then carries the earlier turns given by [`WireParser::set_history`]
//!    ([`AgentEvent::SessionReplaced`], task metadata `sessionReplaced`). After
//!    `session/load` the prompt first waits for the answer to [`SYNC_METHOD`]: Gemini CLI
//!    0.61.0 replays the history *after* answering the load (against the spec); the sync
//!    answer comes after the replay (seen with the real CLI), and updates before the prompt
//!    are dropped;
//! 4. `session/update` notifications stream the turn; `session/request_permission` requests
//!    wait for the user's answer ([`WireParser::encode_decision`]);
//! 5. the `session/prompt` response (`stopReason`) ends the turn.
//!
//! Any other request from the agent gets a "method not found" error at once, so the agent never
//! waits on the host (qwen asks `craft/drainMidTurnQueue` mid-turn).

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use super::{Decision, TurnStart, WireParser};
use crate::adapter::{AgentEvent, ApprovalOption, Usage};

mod json;
use json::*;

pub const FORMAT: &str = "acp";

/// Framing of the earlier turns told to a session that replaces one that could not be loaded.
const HISTORY_PREAMBLE: &str = "[agent-host: your earlier session of this conversation could not be resumed. These are the earlier turns; continue the conversation from them.]\n<earlier-turns>";
const HISTORY_END: &str = "</earlier-turns>\n[The new message follows.]";
/// ACP `protocolVersion` the host speaks (the one the recordings negotiated).
const PROTOCOL_VERSION: u64 = 1;
/// JSON-RPC "method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// ACP "authentication required".
const AUTH_REQUIRED: i64 = -32000;
/// Bytes of answer text kept for the `Done` result.
const ANSWER_MAX: usize = 1 << 20;

/// An extension method (ACP names start with `_`) no agent implements: its answer (an
/// error) only marks a point in the agent's output.
pub const SYNC_METHOD: &str = "_agent_host/sync";

/// What a request the host sent is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Initialize,
    NewSession,
    LoadSession,
    /// The [`SYNC_METHOD`] request after a `session/load`.
    Sync,
    Prompt,
}

impl Pending {
    fn method(self) -> &'static str {
        match self {
            Pending::Initialize => "initialize",
            Pending::NewSession => "session/new",
            Pending::LoadSession => "session/load",
            Pending::Sync => SYNC_METHOD,
            Pending::Prompt => "session/prompt",
        }
    }
}

/// A permission request waiting for the user: its JSON-RPC id and the options offered
/// (`optionId`, `kind`).
#[derive(Debug, Clone)]
struct OpenPermission {
    rpc_id: Value,
    options: Vec<(String, String)>,
}

/// The host's side of one ACP turn.
#[derive(Debug, Default)]
pub struct AcpParser {
    next_id: u64,
    pending: HashMap<u64, Pending>,
    prompt: String,
    cwd: String,
    resume: Option<String>,
    session_id: Option<String>,
    /// True once `session/prompt` went out: updates before it (a `session/load` replaying
    /// history) are not part of this turn.
    prompting: bool,
    permissions: HashMap<String, OpenPermission>,
    /// Tool calls already reported as [`AgentEvent::ToolUse`], with the tool's name when the
    /// agent said it.
    tools: HashMap<String, Option<String>>,
    finished_tools: HashSet<String>,
    answer: String,
    /// A tool call came after the last text, so the next text starts a new message.
    text_broken: bool,
    /// Usage summed from per-request `_meta.usage` (qwen), used when the prompt result has none.
    usage: Option<Usage>,
    /// The context's earlier turns ([`WireParser::set_history`]).
    history: Option<String>,
    /// Why `session/load` failed, once a new session replaces the one to resume.
    replaced: Option<String>,
}

impl AcpParser {
    pub fn new() -> Self {
        AcpParser::default()
    }

    /// A request from the host: its line, remembering what it waits for.
    fn request(&mut self, what: Pending, params: Value) -> Vec<u8> {
        self.next_id += 1;
        self.pending.insert(self.next_id, what);
        line(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": what.method(), "params": params}),
        )
    }

    fn send_prompt(&mut self, session_id: &str, reply: &mut Vec<u8>) {
        self.prompting = true;
        let prompt = match (&self.replaced, &self.history) {
            (Some(_), Some(h)) => format!(
                "{HISTORY_PREAMBLE}\n\n{h}\n\n{HISTORY_END}\n\n{}",
                self.prompt
            ),
            _ => self.prompt.clone(),
        };
        reply.extend(self.request(
            Pending::Prompt,
            json!({"sessionId": session_id, "prompt": [{"type": "text", "text": prompt}]}),
        ));
    }

    fn on_response(&mut self, v: &Value, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let Some(what) = v
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| self.pending.remove(&id))
        else {
            return;
        };
        if what == Pending::Sync {
            // Whatever the answer (normally "method not found"): the replay is over.
            if let Some(id) = self.session_id.clone() {
                self.send_prompt(&id, reply);
            }
            return;
        }
        if let Some(err) = v.get("error") {
            if what == Pending::LoadSession && self.replaced.is_none() {
                // Gemini CLI 0.61.0 loses a session resumed within the minute it was created
                // ("No previous sessions found", then "Invalid session identifier"): start a
                // new one and tell it the earlier turns rather than fail the follow-up.
                let AgentEvent::Error { message, .. } = rpc_error(what, err) else {
                    return;
                };
                out.push(AgentEvent::Warning {
                    message: format!("{message}; starting a new session"),
                });
                self.replaced = Some(message);
                let cwd = self.cwd.clone();
                reply.extend(
                    self.request(Pending::NewSession, json!({"cwd": cwd, "mcpServers": []})),
                );
                return;
            }
            out.push(rpc_error(what, err));
            return;
        }
        let result = v.get("result").unwrap_or(&Value::Null);
        match what {
            Pending::Initialize => {
                let can_load = result
                    .pointer("/agentCapabilities/loadSession")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let cwd = self.cwd.clone();
                match self.resume.clone() {
                    Some(id) if can_load => reply.extend(self.request(
                        Pending::LoadSession,
                        json!({"sessionId": id, "cwd": cwd, "mcpServers": []}),
                    )),
                    resume => {
                        if resume.is_some() {
                            out.push(AgentEvent::Warning {
                                message: "the agent cannot load sessions; starting a new one"
                                    .into(),
                            });
                        }
                        reply.extend(
                            self.request(
                                Pending::NewSession,
                                json!({"cwd": cwd, "mcpServers": []}),
                            ),
                        );
                    }
                }
            }
            Pending::NewSession | Pending::LoadSession => {
                let id = match what {
                    Pending::NewSession => result
                        .get("sessionId")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                    _ => self.resume.clone(),
                };
                let Some(id) = id else {
                    out.push(AgentEvent::Error {
                        message: "the agent created no session (no sessionId in session/new)"
                            .into(),
                        kind: None,
                    });
                    return;
                };
                out.push(AgentEvent::Init {
                    session_id: Some(id.clone()),
                    model: current_model(result),
                    cwd: Some(self.cwd.clone()),
                    tools: Vec::new(),
                });
                if let Some(reason) = self.replaced.clone() {
                    out.push(AgentEvent::SessionReplaced {
                        reason,
                        history_told: self.history.is_some(),
                    });
                }
                self.session_id = Some(id.clone());
                if what == Pending::LoadSession {
                    reply.extend(self.request(Pending::Sync, json!({})));
                } else {
                    self.send_prompt(&id, reply);
                }
            }
            Pending::Sync => {}
            Pending::Prompt => self.on_prompt_result(result, out),
        }
    }

    fn on_prompt_result(&mut self, result: &Value, out: &mut Vec<AgentEvent>) {
        if let Some(u) = prompt_usage(result).or_else(|| self.usage.take()) {
            out.push(AgentEvent::Usage(u));
        }
        let reason = result
            .get("stopReason")
            .and_then(Value::as_str)
            .unwrap_or("end_turn");
        let (message, kind) = match reason {
            "max_tokens" => ("the agent stopped: it reached its token limit", reason),
            "max_turn_requests" => ("the agent stopped: it reached its turn limit", reason),
            "refusal" => ("the agent refused to continue", reason),
            "cancelled" => ("the agent cancelled the turn", "canceled"),
            // end_turn, and reasons newer than this parser: the turn ended normally.
            _ => {
                out.push(AgentEvent::Done {
                    result: Some(std::mem::take(&mut self.answer)),
                    is_error: false,
                });
                return;
            }
        };
        out.push(AgentEvent::Error {
            message: message.into(),
            kind: Some(kind.into()),
        });
    }

    fn on_update(&mut self, params: &Value, out: &mut Vec<AgentEvent>) {
        if !self.prompting {
            return;
        }
        let Some(u) = params.get("update") else {
            return;
        };
        match u.get("sessionUpdate").and_then(Value::as_str).unwrap_or("") {
            "agent_message_chunk" => {
                if let Some(add) = u.pointer("/_meta/usage").and_then(acp_usage) {
                    let sum = self.usage.get_or_insert_with(Usage::default);
                    sum.input_tokens = add_opt(sum.input_tokens, add.input_tokens);
                    sum.output_tokens = add_opt(sum.output_tokens, add.output_tokens);
                }
                if let Some(text) = chunk_text(u) {
                    // A new message after a tool call: kept apart from the text before.
                    let new_message = std::mem::take(&mut self.text_broken);
                    if new_message && !self.answer.is_empty() {
                        self.answer.push_str("\n\n");
                    }
                    if self.answer.len() + text.len() <= ANSWER_MAX {
                        self.answer.push_str(text);
                    }
                    out.push(AgentEvent::Text {
                        text: text.to_string(),
                        delta: !new_message,
                    });
                }
            }
            "agent_thought_chunk" => {
                if let Some(text) = chunk_text(u) {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
            }
            "tool_call" => {
                self.text_broken = true;
                self.tool_seen(u, true, out)
            }
            "tool_call_update" => {
                self.text_broken = true;
                self.tool_seen(u, false, out);
                let status = u.get("status").and_then(Value::as_str).unwrap_or("");
                if status != "completed" && status != "failed" {
                    return;
                }
                let id = str_at(u, "/toolCallId").unwrap_or_default();
                if self.finished_tools.insert(id.clone()) {
                    out.push(AgentEvent::ToolResult {
                        id,
                        output: Some(tool_output(u)),
                        is_error: status == "failed",
                    });
                }
            }
            // plan, available_commands_update, current_mode_update, user_message_chunk
            // (history), and whatever newer agents send: nothing for the task.
            _ => {}
        }
    }

    /// Reports a tool call the first time its id shows up (Gemini sends no `tool_call`, only
    /// the permission request and the final `tool_call_update`). One naming rule for every
    /// ACP agent: the name is the tool's ACP `kind` (`execute`, `edit`, `read`, ...), whatever
    /// the title says (Gemini titles a call it runs without asking by its command, `echo hi`;
    /// opencode by its tool, `bash`); the command or file is in the input (`rawInput`, else the
    /// title and locations). Without a kind: `_meta.toolName` (qwen), else the title.
    fn tool_seen(&mut self, call: &Value, announced: bool, out: &mut Vec<AgentEvent>) {
        let Some(id) = str_at(call, "/toolCallId") else {
            return;
        };
        if self.tools.contains_key(&id) {
            return;
        }
        let known = str_at(call, "/kind")
            .filter(|k| !k.is_empty())
            .or_else(|| str_at(call, "/_meta/toolName"))
            .or_else(|| announced.then(|| str_at(call, "/title")).flatten());
        let name = known.clone().unwrap_or_else(|| "tool".into());
        let input = match call.get("rawInput") {
            Some(Value::Object(m)) if !m.is_empty() => Value::Object(m.clone()),
            _ => {
                let mut m = serde_json::Map::new();
                for key in ["title", "kind", "locations"] {
                    if let Some(x) = call.get(key) {
                        m.insert(key.into(), x.clone());
                    }
                }
                Value::Object(m)
            }
        };
        self.tools.insert(id.clone(), known);
        out.push(AgentEvent::ToolUse { id, name, input });
    }

    fn on_permission(&mut self, rpc_id: &Value, params: &Value, out: &mut Vec<AgentEvent>) {
        let call = params.get("toolCall").unwrap_or(&Value::Null);
        self.tool_seen(call, false, out);
        let options_json = params
            .get("options")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut options = Vec::new();
        let mut offered = Vec::new();
        for o in &options_json {
            let Some(id) = str_at(o, "/optionId") else {
                continue;
            };
            let label = str_at(o, "/name").unwrap_or_else(|| id.clone());
            offered.push((id.clone(), str_at(o, "/kind").unwrap_or_default()));
            options.push(ApprovalOption { id, label });
        }
        let kind = match call.get("kind").and_then(Value::as_str) {
            Some("execute") => "command",
            Some("edit" | "delete" | "move") => "file-edit",
            _ => "tool",
        };
        let tool = str_at(call, "/toolCallId")
            .and_then(|id| self.tools.get(&id).cloned().flatten())
            .or_else(|| str_at(call, "/kind"))
            .or_else(|| str_at(call, "/_meta/toolName"));
        let detail = content_text(call.get("content")).or_else(|| {
            let paths: Vec<String> = call
                .get("locations")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|l| str_at(l, "/path")).collect())
                .unwrap_or_default();
            (!paths.is_empty()).then(|| paths.join("\n"))
        });
        let id = id_string(rpc_id);
        self.permissions.insert(
            id.clone(),
            OpenPermission {
                rpc_id: rpc_id.clone(),
                options: offered,
            },
        );
        out.push(AgentEvent::ApprovalRequired {
            id,
            kind: kind.into(),
            tool,
            target: target_of(call),
            detail,
            options,
        });
    }
}

impl WireParser for AcpParser {
    fn start(&mut self, turn: &TurnStart<'_>) -> Vec<u8> {
        self.prompt = turn.prompt.to_string();
        self.cwd = turn.cwd.to_string();
        self.resume = turn.session_id.filter(|_| turn.resume).map(str::to_string);
        self.request(
            Pending::Initialize,
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {
                    "fs": {"readTextFile": false, "writeTextFile": false},
                    "terminal": false
                }
            }),
        )
    }

    fn set_history(&mut self, earlier_turns: &str) {
        self.history = Some(earlier_turns.to_string()).filter(|h| !h.trim().is_empty());
    }

    fn parse_line(&mut self, text: &str, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(text, out, 200) else {
            return;
        };
        let method = v.get("method").and_then(Value::as_str);
        let params = v.get("params").unwrap_or(&Value::Null);
        match (method, v.get("id")) {
            (Some("session/request_permission"), Some(id)) => {
                self.text_broken = true;
                self.on_permission(id, params, out)
            }
            (Some(other), Some(id)) => {
                reply.extend(line(&json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": METHOD_NOT_FOUND, "message": format!("method not found: {other}")}
                })));
            }
            (Some("session/update"), None) => self.on_update(params, out),
            (Some(_), None) => {}
            (None, Some(_)) => self.on_response(&v, out, reply),
            (None, None) => {}
        }
    }

    fn encode_decision(&mut self, d: &Decision) -> Option<Vec<u8>> {
        let open = self.permissions.remove(&d.id)?;
        let by_id = d
            .option
            .as_deref()
            .filter(|o| open.options.iter().any(|(id, _)| id == o))
            .map(str::to_string);
        let wanted: &[&str] = if d.allow {
            &["allow_once", "allow_always"]
        } else {
            &["reject_once", "reject_always"]
        };
        let by_kind = || {
            wanted.iter().find_map(|k| {
                open.options
                    .iter()
                    .find(|(_, kind)| kind == k)
                    .map(|(id, _)| id.clone())
            })
        };
        // With no option to reject, the request is answered "cancelled" (the ACP outcome for a
        // prompt the client dismissed).
        let outcome = match by_id.or_else(by_kind) {
            Some(option_id) => json!({"outcome": "selected", "optionId": option_id}),
            None => json!({"outcome": "cancelled"}),
        };
        Some(line(&json!({
            "jsonrpc": "2.0",
            "id": open.rpc_id,
            "result": {"outcome": outcome}
        })))
    }

    fn interrupt(&mut self) -> Option<Vec<u8>> {
        let session = self.session_id.as_ref()?;
        if !self.prompting {
            return None;
        }
        Some(line(&json!({
            "jsonrpc": "2.0",
            "method": "session/cancel",
            "params": {"sessionId": session}
        })))
    }
}

#[cfg(test)]
mod tests;
