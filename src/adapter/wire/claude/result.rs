//! The `result` line: usage, then how the turn ended.
//!
//! Recorded facts (Claude Code 2.1.330 unless said):
//! * `is_error` decides, not `subtype`: API errors end with `subtype:"success"` and
//!   `is_error:true` (auth-401, server-500, connection-refused, no-credentials).
//! * `usage.input_tokens` / `usage.output_tokens` and `duration_ms` are the turn's.
//!   `total_cost_usd` is the session's: after `--resume` it adds the earlier turns (0.0016,
//!   then 0.0024 for a 0.0008 turn), and so does a second turn in one stdio process. The
//!   turn's cost is the sum of `model_usage_since_last_result.*.costUSD`; results without that
//!   object (`--output-format json`, unknown session) give `total_cost_usd`; qwen-code gives
//!   neither.
//! * `result` holds the final text; error results without one (max turns, unknown session,
//!   interrupt) list `errors`. qwen-code's error results carry the CLI's own error text in
//!   `error.message` instead (`[API Error: 401 Incorrect API key provided: ...]`).
//! * `api_error_status` (401, 500, null), `api_error` (`connection_failed`),
//!   `terminal_reason` (`completed`, `max_turns`, `api_error`, `aborted_streaming`),
//!   `subtype` (`success`, `error_max_turns`, `error_during_execution`).
//! * The synthetic assistant message before an API-error result has `error`
//!   (`authentication_failed` for a 401 and for no credentials, `server_error` for a 500 and
//!   for connection refused); the parser passes it in as `hint`.

use serde_json::Value;

use super::{str_of, u64_of};
use crate::adapter::{AgentEvent, Usage};

/// `Usage`, then `Done` or `Error`.
pub(super) fn events(v: &Value, hint: Option<&str>) -> Vec<AgentEvent> {
    let usage = v.get("usage");
    let tokens = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
    let mut out = vec![AgentEvent::Usage(Usage {
        input_tokens: tokens("input_tokens"),
        output_tokens: tokens("output_tokens"),
        cost_usd: turn_cost(v),
        duration_ms: u64_of(v, "duration_ms"),
    })];
    let subtype = str_of(v, "subtype").unwrap_or("");
    let is_error = v
        .get("is_error")
        .and_then(Value::as_bool)
        .unwrap_or(subtype != "success");
    let text = str_of(v, "result").filter(|r| !r.is_empty());
    if !is_error {
        out.push(AgentEvent::Done {
            result: text.map(str::to_string),
            is_error: false,
        });
        return out;
    }
    let errors: Vec<&str> = v
        .get("errors")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // qwen-code: `error: {type, message}` (`[API Error: 401 Incorrect API key ...]`).
    let own = v
        .pointer("/error/message")
        .and_then(Value::as_str)
        .filter(|m| !m.trim().is_empty());
    let kind = error_kind(v, subtype, hint, &errors);
    let message = match (kind, text.or(own)) {
        ("interrupted", _) => "The turn was interrupted".to_string(),
        (_, Some(t)) => t.trim().to_string(),
        _ if !errors.is_empty() => errors.join("; "),
        _ => format!("The agent ended its turn with an error ({subtype})"),
    };
    out.push(AgentEvent::Error {
        message,
        kind: Some(kind.to_string()),
    });
    out
}

/// What this turn cost (see the module comment).
fn turn_cost(v: &Value) -> Option<f64> {
    match v
        .get("model_usage_since_last_result")
        .and_then(Value::as_object)
    {
        Some(models) => Some(
            models
                .values()
                .filter_map(|m| m.get("costUSD").and_then(Value::as_f64))
                // Not `sum()`: an empty f64 sum is -0.0.
                .fold(0.0, |total, c| total + c),
        ),
        None => v.get("total_cost_usd").and_then(Value::as_f64),
    }
}

/// Why an error result failed: `auth`, `rate_limit`, `max_turns`, `budget`, `interrupted`,
/// `session_not_found`, `connection`, `server_error`, `billing`, `api_error` or `execution`.
fn error_kind(v: &Value, subtype: &str, hint: Option<&str>, errors: &[&str]) -> &'static str {
    let status = v.get("api_error_status").and_then(Value::as_u64);
    let terminal = str_of(v, "terminal_reason").unwrap_or("");
    match subtype {
        "error_max_turns" => return "max_turns",
        "error_max_budget_usd" => return "budget",
        _ => {}
    }
    // `hint` values other than the two recorded ones are those of the SDK's
    // `assistant.error` enum (docs/wire-formats.md, section Claude Code).
    if status == Some(401)
        || matches!(
            hint,
            Some("authentication_failed" | "oauth_org_not_allowed")
        )
    {
        return "auth";
    }
    if status == Some(429) || hint == Some("rate_limit") {
        return "rate_limit";
    }
    if terminal.starts_with("aborted") {
        return "interrupted";
    }
    if errors
        .iter()
        .any(|e| e.starts_with("No conversation found with session ID"))
    {
        return "session_not_found";
    }
    if str_of(v, "api_error") == Some("connection_failed") {
        return "connection";
    }
    if status.is_some_and(|s| s >= 500) || matches!(hint, Some("server_error" | "overloaded")) {
        return "server_error";
    }
    if hint == Some("billing_error") {
        return "billing";
    }
    if terminal == "api_error" || status.is_some() {
        return "api_error";
    }
    "execution"
}
