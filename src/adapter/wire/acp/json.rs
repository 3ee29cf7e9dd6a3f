//! JSON helpers of the ACP parser: reading the agent's messages (texts, tools, usage,
//! errors) and writing the host's.

use serde_json::Value;

use super::{Pending, AUTH_REQUIRED};
use crate::adapter::{AgentEvent, Usage};

/// What a tool call acts on: its command or file (`rawInput`, else the first location), else
/// its title.
pub(super) fn target_of(call: &Value) -> Option<String> {
    [
        "/rawInput/command",
        "/rawInput/filePath",
        "/rawInput/file_path",
        "/rawInput/path",
    ]
    .iter()
    .find_map(|p| str_at(call, p).filter(|t| !t.is_empty()))
    .or_else(|| str_at(call, "/locations/0/path"))
    .or_else(|| str_at(call, "/title"))
}

pub(super) fn line(v: &Value) -> Vec<u8> {
    let mut bytes = v.to_string().into_bytes();
    bytes.push(b'\n');
    bytes
}

pub(super) fn str_at(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// A JSON-RPC id as the approval id: numbers as digits, strings as they are.
pub(super) fn id_string(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The text of a `session/update` chunk (text content only; empty chunks are nothing).
pub(super) fn chunk_text(update: &Value) -> Option<&str> {
    let content = update.get("content")?;
    if content.get("type").and_then(Value::as_str) != Some("text") {
        return None;
    }
    content
        .get("text")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
}

/// The text blocks of a tool call's `content` (`[{type:"content", content:{type:"text",…}}]`;
/// diffs are named by their path).
pub(super) fn content_text(content: Option<&Value>) -> Option<String> {
    let parts: Vec<String> = content?
        .as_array()?
        .iter()
        .filter_map(|c| match c.get("type").and_then(Value::as_str) {
            Some("content") => str_at(c, "/content/text"),
            Some("diff") => str_at(c, "/path").map(|p| format!("diff of {p}")),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// What a finished tool call produced: its content text, else `rawOutput.output`, else the
/// whole `rawOutput`.
pub(super) fn tool_output(update: &Value) -> String {
    if let Some(t) = content_text(update.get("content")) {
        return t;
    }
    match update.get("rawOutput") {
        Some(raw) => match raw.get("output") {
            Some(Value::String(s)) => s.clone(),
            _ => raw.to_string(),
        },
        None => String::new(),
    }
}

/// The model the session runs: `models.currentModelId` (Gemini, qwen) or the `model` config
/// option's `currentValue` (opencode).
pub(super) fn current_model(result: &Value) -> Option<String> {
    str_at(result, "/models/currentModelId").or_else(|| {
        result
            .get("configOptions")?
            .as_array()?
            .iter()
            .find(|o| o.get("id").and_then(Value::as_str) == Some("model"))
            .and_then(|o| str_at(o, "/currentValue"))
    })
}

/// ACP usage `{inputTokens, outputTokens}`.
pub(super) fn acp_usage(u: &Value) -> Option<Usage> {
    let input_tokens = u.get("inputTokens").and_then(Value::as_u64);
    let output_tokens = u.get("outputTokens").and_then(Value::as_u64);
    (input_tokens.is_some() || output_tokens.is_some()).then(|| Usage {
        input_tokens,
        output_tokens,
        ..Usage::default()
    })
}

/// Usage in a `session/prompt` result: `usage` (opencode) or `_meta.quota.token_count`
/// (Gemini).
pub(super) fn prompt_usage(result: &Value) -> Option<Usage> {
    if let Some(u) = result.get("usage").and_then(acp_usage) {
        return Some(u);
    }
    let tc = result.pointer("/_meta/quota/token_count")?;
    Some(Usage {
        input_tokens: tc.get("input_tokens").and_then(Value::as_u64),
        output_tokens: tc.get("output_tokens").and_then(Value::as_u64),
        ..Usage::default()
    })
}

pub(super) fn add_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

pub(super) fn rpc_error(what: Pending, err: &Value) -> AgentEvent {
    let code = err.get("code").and_then(Value::as_i64);
    let msg = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("error");
    // Gemini gives the reason of an "Internal error" in `data.details`.
    let msg = match err.pointer("/data/details").and_then(Value::as_str) {
        Some(d) if !d.is_empty() => format!("{msg} ({d})"),
        _ => msg.to_string(),
    };
    let lower = msg.to_ascii_lowercase();
    let auth =
        code == Some(AUTH_REQUIRED) || lower.contains("authenticat") || lower.contains("api key");
    AgentEvent::Error {
        message: format!("{} failed: {msg}", what.method()),
        kind: auth.then(|| "auth".to_string()),
    }
}
