//! The OpenAI Chat Completions API of the scripted model server (`POST .../chat/completions`),
//! as Qwen Code 0.24.4 calls it: `stream: true` with `stream_options.include_usage`, tools as
//! `{"type": "function", "function": {"name": ...}}`, tool results as `role: "tool"` messages.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

use super::{decide, has_tools, json_response, short_id, Reply, Scenario, Sse, FIRST_TEXT};

pub(super) fn completions(scenario: Scenario, b: &Value) -> Response {
    let has_result = b["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool");
    let names: Vec<&str> = b["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    // (content, tool call as (id, name, arguments), finish reason)
    let (content, call, finish) = match decide(scenario, has_tools(b), has_result) {
        Reply::ToolCall { command } => {
            let name = ["run_shell_command", "bash", "shell"]
                .into_iter()
                .find(|n| names.contains(n))
                .unwrap_or("run_shell_command");
            let args = json!({"command": command, "description": "Run a command"});
            (
                FIRST_TEXT.to_string(),
                Some((format!("call_{}", short_id()), name, args.to_string())),
                "tool_calls",
            )
        }
        Reply::Text(t) => (t.to_string(), None, "stop"),
        Reply::Json(v) => (v.to_string(), None, "stop"),
    };
    let model = b["model"].as_str().unwrap_or("fake-model").to_string();
    let id = format!("chatcmpl-{}", short_id());
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120});
    if b["stream"] != true {
        let mut message = json!({"role": "assistant", "content": content});
        if let Some((cid, name, args)) = &call {
            message["tool_calls"] = json!([{"id": cid, "type": "function",
                                            "function": {"name": name, "arguments": args}}]);
        }
        return json_response(
            StatusCode::OK,
            json!({"id": id, "object": "chat.completion", "created": 0, "model": model,
                   "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                   "usage": usage}),
        );
    }
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut s = Sse::default();
    s.event(
        None,
        &chunk(json!({"role": "assistant", "content": content}), None),
    );
    if let Some((cid, name, args)) = &call {
        s.event(
            None,
            &chunk(
                json!({"tool_calls": [{"index": 0, "id": cid, "type": "function",
                                       "function": {"name": name, "arguments": args}}]}),
                None,
            ),
        );
    }
    s.event(None, &chunk(json!({}), Some(finish)));
    if b["stream_options"]["include_usage"] == true {
        s.event(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                    "choices": [], "usage": usage}),
        );
    }
    s.raw("[DONE]");
    s.done()
}
