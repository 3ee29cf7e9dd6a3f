//! A2A extensions: the ones this host offers, the `A2A-Extensions` request header (v0.3:
//! `X-A2A-Extensions`), required extensions, and the header that names the extensions a
//! response used.
//!
//! | URI | what it changes |
//! |---|---|
//! | [`TOOL_TRACE`] | opt-in: tool calls and results also as DataParts (`metadata.type` = `function_call` / `function_response`), the agent's reasoning as text parts with `metadata.thought: true` |
//! | [`APPROVAL`] | describes the shape of approval questions (`input-required` with a DataPart `{approvalId, kind, tool, target, detail, options}`); always in use |

use axum::http::{HeaderMap, HeaderValue};

use crate::protocol::card::AgentExtension;

/// Tool calls, tool results and reasoning as typed parts.
pub const TOOL_TRACE: &str = "urn:agent-host:tool-trace:v1";
/// The shape of approval questions and answers.
pub const APPROVAL: &str = "urn:agent-host:approval:v1";

/// The extensions a request asked for and whether one the host requires is missing.
#[derive(Debug, Clone, Default)]
pub struct RequestExtensions {
    /// URIs named in the request's extension header that this host offers.
    pub active: Vec<String>,
    /// A required extension the request did not name.
    pub missing_required: Option<String>,
}

impl RequestExtensions {
    /// Whether the tool-trace extension is active for this request.
    pub fn tool_trace(&self) -> bool {
        self.active.iter().any(|u| u == TOOL_TRACE)
    }
}

tokio::task_local! {
    /// The extensions of the request being handled (set by the guard).
    pub static EXTENSIONS: RequestExtensions;
}

/// The current request's extensions (none outside a request).
pub fn current() -> RequestExtensions {
    EXTENSIONS.try_with(|e| e.clone()).unwrap_or_default()
}

/// Reads the extension headers (several headers and comma-separated lists are both allowed).
pub fn from_headers(headers: &HeaderMap, required: &[String]) -> RequestExtensions {
    let named: Vec<String> = ["a2a-extensions", "x-a2a-extensions"]
        .iter()
        .flat_map(|h| headers.get_all(*h).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .collect();
    let mut active: Vec<String> = Vec::new();
    for u in named {
        if (u == TOOL_TRACE || u == APPROVAL) && !active.contains(&u) {
            active.push(u);
        }
    }
    let missing_required = required.iter().find(|r| !active.contains(r)).cloned();
    RequestExtensions {
        active,
        missing_required,
    }
}

/// Names the active extensions in the response (both header spellings).
pub fn echo(headers: &mut HeaderMap, ext: &RequestExtensions) {
    if ext.active.is_empty() {
        return;
    }
    if let Ok(v) = HeaderValue::from_str(&ext.active.join(", ")) {
        headers.insert("a2a-extensions", v.clone());
        headers.insert("x-a2a-extensions", v);
    }
}

/// The card's `capabilities.extensions`.
pub fn card_entries(required: &[String]) -> Vec<AgentExtension> {
    let is_required = |u: &str| required.iter().any(|r| r == u);
    vec![
        AgentExtension {
            uri: TOOL_TRACE.into(),
            description: Some(
                "Tool calls and results as DataParts with metadata.type function_call / function_response, and the agent's reasoning as text parts with metadata.thought = true. Opt in with the A2A-Extensions header."
                    .into(),
            ),
            required: is_required(TOOL_TRACE),
            params: None,
        },
        AgentExtension {
            uri: APPROVAL.into(),
            description: Some(
                "A question of the agent (a tool, a command, a file change) is an input-required status whose message has a DataPart {approvalId, kind, tool, target, detail, options}; answer on the task with text (yes/no) or a DataPart {approvalId, decision: allow|deny}."
                    .into(),
            ),
            required: is_required(APPROVAL),
            params: None,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_parsed_filtered_and_checked_against_required() {
        let mut h = HeaderMap::new();
        h.append(
            "a2a-extensions",
            HeaderValue::from_static("urn:other:x, urn:agent-host:tool-trace:v1"),
        );
        let e = from_headers(&h, &[]);
        assert_eq!(e.active, vec![TOOL_TRACE.to_string()]);
        assert!(e.tool_trace() && e.missing_required.is_none());
        let e = from_headers(&h, &[APPROVAL.to_string()]);
        assert_eq!(e.missing_required.as_deref(), Some(APPROVAL));
        let mut h = HeaderMap::new();
        h.append("x-a2a-extensions", HeaderValue::from_static(APPROVAL));
        let e = from_headers(&h, &[APPROVAL.to_string()]);
        assert!(e.missing_required.is_none() && !e.tool_trace());
        let mut out = HeaderMap::new();
        echo(&mut out, &e);
        assert_eq!(out["a2a-extensions"], APPROVAL);
    }
}
