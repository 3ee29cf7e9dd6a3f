//! The texts and data parts the mapping writes: approval questions, usage, clipped tool
//! output, the last lines of a failed program's output.

use serde_json::{json, Map, Value};

use crate::adapter::Usage;

/// The last `n` non-empty lines of `text`.
pub(super) fn last_lines(text: &str, n: usize) -> String {
    let mut lines: Vec<&str> = text
        .lines()
        .rev()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .collect();
    lines.reverse();
    lines.join("\n")
}

/// The readable text of an approval request: a question as asked; a permission request as
/// "The agent asks to use Bash: rm -rf build (detail)".
pub(super) fn approval_text(
    kind: &str,
    tool: Option<&str>,
    target: Option<&str>,
    detail: Option<&str>,
) -> String {
    if kind == "question" {
        return detail
            .or(target)
            .map(str::to_string)
            .unwrap_or_else(|| "The agent asks a question".to_string());
    }
    let mut s = match tool {
        Some(t) => format!("The agent asks for approval to use {t}"),
        None => format!("The agent asks for approval ({kind})"),
    };
    if let Some(t) = target {
        s.push_str(": ");
        s.push_str(t);
    }
    if let Some(d) = detail.filter(|d| Some(*d) != target) {
        s.push_str(&format!(" ({d})"));
    }
    s.push_str(". Answer yes or no.");
    s
}

/// The cross-CLI shape of an approval request, sent as a data part of the input-required
/// status message: `approvalId`, `kind` (command, file-edit, tool, question, other), `tool`,
/// `target`, `detail`, `options` (each `{id, label}`), and how to answer.
pub fn approval_data(
    id: &str,
    kind: &str,
    tool: Option<&str>,
    target: Option<&str>,
    detail: Option<&str>,
    options: &[crate::adapter::ApprovalOption],
) -> Value {
    let options: Vec<Value> = options
        .iter()
        .map(|o| json!({"id": o.id, "label": o.label}))
        .collect();
    json!({
        "approvalId": id,
        "kind": kind,
        "tool": tool,
        "target": target,
        "detail": detail,
        "options": options,
        "answer": "Reply on this task: text yes/no, or a data part {\"approvalId\": ..., \"decision\": \"allow\"|\"deny\"}",
    })
}

pub(super) fn usage_json(u: &Usage) -> Value {
    let mut m = Map::new();
    if let Some(v) = u.input_tokens {
        m.insert("inputTokens".into(), json!(v));
    }
    if let Some(v) = u.output_tokens {
        m.insert("outputTokens".into(), json!(v));
    }
    if let Some(v) = u.cost_usd {
        m.insert("costUsd".into(), json!(v));
    }
    if let Some(v) = u.duration_ms {
        m.insert("durationMs".into(), json!(v));
    }
    Value::Object(m)
}

pub(super) fn truncate_chars(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &s[..end], s.len())
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub(super) fn prefix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
