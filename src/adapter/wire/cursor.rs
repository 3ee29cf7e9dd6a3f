//! `cursor-stream-json`: Cursor's agent CLI, `cursor-agent -p --output-format stream-json`.
//!
//! **Documented, not recorded.** Cursor's CLI is not on npm and has no custom model endpoint,
//! so no run was recorded. Every fact here comes from the documented format in
//! docs/wire-formats.md (from Cursor's "Output format" page and community captures); the tests use
//! lines written from those documented examples. Re-check against a real run before
//! adding a version to `tested_versions`.
//!
//! | line | AgentEvent |
//! |---|---|
//! | `system/init{session_id, model, cwd}` | `Init` |
//! | `user` | nothing (the prompt echoed back) |
//! | `thinking/delta{text}` | `Thinking`; `thinking/completed` → nothing |
//! | `assistant{message.content[].text}` | `Text`, a whole message (`delta: false`; without `--stream-partial-output`) |
//! | `tool_call/started{call_id, tool_call{<kind>ToolCall{args}}}` | `ToolUse`, name = the kind without `ToolCall` (`shell`, `read`, …) |
//! | `tool_call/completed{call_id, tool_call{<kind>{args, result}}}` | `ToolResult`: `result.success` → its `stdout` (shell) or its JSON; any other variant → error |
//! | `result{subtype, is_error, result, duration_ms}` | `Usage` (duration only: no tokens, no cost) then `Done` |
//! | other types, non-JSON lines | nothing / `Warning` |
//!
//! Headless Cursor has no approval channel (`--force` or refusals).
//! With `--stream-partial-output` the documented `assistant` lines are deltas followed by a
//! consolidated one, which this parser would show twice: the adapter does not pass it.

use serde_json::Value;

use super::WireParser;
use crate::adapter::{AgentEvent, Usage};

pub const FORMAT: &str = "cursor-stream-json";

/// Stateless parser.
#[derive(Debug, Default)]
pub struct CursorParser;

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The one `<kind>ToolCall` entry under `tool_call`.
fn tool_of(v: &Value) -> Option<(&str, &Value)> {
    v.get("tool_call")
        .and_then(Value::as_object)
        .and_then(|m| m.iter().next())
        .map(|(k, x)| (k.as_str(), x))
}

/// `shellToolCall` → `shell`; an unknown kind stays as it is.
fn tool_name(kind: &str) -> String {
    kind.strip_suffix("ToolCall")
        .filter(|s| !s.is_empty())
        .unwrap_or(kind)
        .to_string()
}

/// A tool's `result`: `{"success":{…}}` or an error variant (exact error shapes are not
/// documented: any key other than `success` is an error, shown as its `message` or JSON).
fn tool_output(result: Option<&Value>) -> (String, bool) {
    let Some(obj) = result.and_then(Value::as_object) else {
        return (String::new(), false);
    };
    if let Some(ok) = obj.get("success") {
        let mut text = match (str_at(ok, "/stdout"), str_at(ok, "/stderr")) {
            (Some(out), Some(err)) if !err.is_empty() => format!("{out}{err}"),
            (Some(out), _) => out.to_string(),
            _ => ok.to_string(),
        };
        if text.is_empty() {
            text = ok.to_string();
        }
        // A shell command that ran but failed.
        let failed = ok
            .get("exitCode")
            .and_then(Value::as_i64)
            .is_some_and(|c| c != 0);
        return (text, failed);
    }
    let err = obj.values().next().unwrap_or(&Value::Null);
    let text = str_at(err, "/message")
        .or_else(|| err.as_str())
        .map_or_else(|| Value::Object(obj.clone()).to_string(), str::to_string);
    (text, true)
}

impl WireParser for CursorParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(line, out, 200) else {
            return;
        };
        let sub = str_at(&v, "/subtype").unwrap_or("");
        match (str_at(&v, "/type").unwrap_or(""), sub) {
            ("system", "init") => out.push(AgentEvent::Init {
                session_id: str_at(&v, "/session_id").map(str::to_string),
                model: str_at(&v, "/model").map(str::to_string),
                cwd: str_at(&v, "/cwd").map(str::to_string),
                tools: Vec::new(),
            }),
            ("thinking", "delta") => {
                if let Some(t) = str_at(&v, "/text").filter(|t| !t.is_empty()) {
                    out.push(AgentEvent::Thinking {
                        text: t.to_string(),
                    });
                }
            }
            ("assistant", _) => {
                let text: String = v
                    .pointer("/message/content")
                    .and_then(Value::as_array)
                    .map(|blocks| {
                        blocks
                            .iter()
                            .filter(|b| str_at(b, "/type") == Some("text"))
                            .filter_map(|b| str_at(b, "/text"))
                            .collect()
                    })
                    .unwrap_or_default();
                if !text.is_empty() {
                    out.push(AgentEvent::Text { text, delta: false });
                }
            }
            ("tool_call", "started") => {
                let (kind, call) = tool_of(&v).unwrap_or(("tool", &Value::Null));
                out.push(AgentEvent::ToolUse {
                    id: str_at(&v, "/call_id").unwrap_or_default().to_string(),
                    name: tool_name(kind),
                    input: call.get("args").cloned().unwrap_or(Value::Null),
                });
            }
            ("tool_call", "completed") => {
                let call = tool_of(&v).map_or(&Value::Null, |(_, c)| c);
                let (output, is_error) = tool_output(call.get("result"));
                out.push(AgentEvent::ToolResult {
                    id: str_at(&v, "/call_id").unwrap_or_default().to_string(),
                    output: Some(output),
                    is_error,
                });
            }
            ("result", _) => {
                let duration = v.get("duration_ms").and_then(Value::as_u64);
                if duration.is_some() {
                    out.push(AgentEvent::Usage(Usage {
                        duration_ms: duration,
                        ..Usage::default()
                    }));
                }
                let is_error = v
                    .get("is_error")
                    .and_then(Value::as_bool)
                    .unwrap_or(sub != "success");
                out.push(AgentEvent::Done {
                    result: str_at(&v, "/result").map(str::to_string),
                    is_error,
                });
            }
            // `user`, `thinking/completed`, and anything not documented.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines written from the DOCUMENTED examples in docs/wire-formats.md (Cursor docs "Output
    // format" and community captures), with the documented placeholders (`<uuid>`, `…`)
    // filled in. NOT recorded from a real cursor-agent: no binary exists here.
    const SID: &str = "0f6c6c1e-8a9d-4f3e-9b1a-2d5e7c9a1b20";

    fn documented_session() -> Vec<String> {
        [
            r#"{"type":"system","subtype":"init","apiKeySource":"env","cwd":"/abs/path","session_id":"SID","model":"<model display name>","permissionMode":"default"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"say hi"}]},"session_id":"SID"}"#,
            r#"{"type":"thinking","subtype":"delta","text":"token","session_id":"SID","timestamp_ms":1770823434041}"#,
            r#"{"type":"thinking","subtype":"completed","session_id":"SID","timestamp_ms":1770823435070}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"I'll run the command now."}]},"session_id":"SID","model_call_id":"mc_1","timestamp_ms":1770823449274}"#,
            r#"{"type":"tool_call","subtype":"started","call_id":"call_xxx\nwith a newline","tool_call":{"shellToolCall":{"args":{"command":"echo hi","workingDirectory":"/workspace/project","timeout":30000}}},"model_call_id":"mc_1","session_id":"SID","timestamp_ms":1770823449300}"#,
            r#"{"type":"tool_call","subtype":"completed","call_id":"call_xxx\nwith a newline","tool_call":{"shellToolCall":{"args":{"command":"echo hi","workingDirectory":"/workspace/project","timeout":30000},"result":{"success":{"exitCode":0,"stdout":"hi\n","stderr":"","executionTime":12}}}},"session_id":"SID"}"#,
            r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Done: the command printed hi"}]},"session_id":"SID","model_call_id":"mc_2","timestamp_ms":1770823450000}"#,
            r#"{"type":"result","subtype":"success","duration_ms":4986,"duration_api_ms":4986,"is_error":false,"result":"I'll run the command now.Done: the command printed hi","session_id":"SID","request_id":"5b1d2c3e-0000-4000-8000-000000000000"}"#,
        ]
        .iter()
        .map(|l| l.replace("SID", SID))
        .collect()
    }

    fn parse_all(lines: &[String]) -> Vec<AgentEvent> {
        let mut p = CursorParser;
        let mut out = Vec::new();
        for l in lines {
            p.parse_line(l, &mut out, &mut Vec::new());
        }
        out
    }

    #[test]
    fn documented_session_maps_every_line() {
        let events = parse_all(&documented_session());
        insta::assert_debug_snapshot!(events);
        crate::adapter::wire::golden::assert_updates!(crate::adapter::wire::golden::updates(
            &events
        ));
    }

    #[test]
    fn documented_init_carries_the_chat_id_for_resume() {
        let events = parse_all(&documented_session()[..1]);
        assert_eq!(
            events,
            vec![AgentEvent::Init {
                session_id: Some(SID.into()),
                model: Some("<model display name>".into()),
                cwd: Some("/abs/path".into()),
                tools: vec![],
            }]
        );
    }

    #[test]
    fn documented_tool_call_pairs_by_call_id_even_with_a_newline() {
        let events = parse_all(&documented_session());
        let id = "call_xxx\nwith a newline";
        assert!(events.iter().any(|e| matches!(e,
            AgentEvent::ToolUse { id: i, name, input } if i == id && name == "shell" && input["command"] == "echo hi")));
        assert!(events.iter().any(|e| matches!(e,
            AgentEvent::ToolResult { id: i, output, is_error: false } if i == id && output.as_deref() == Some("hi\n"))));
    }

    #[test]
    fn documented_result_ends_the_turn_with_its_text() {
        let events = parse_all(&documented_session());
        assert_eq!(
            &events[events.len() - 2..],
            &[
                AgentEvent::Usage(Usage {
                    duration_ms: Some(4986),
                    ..Usage::default()
                }),
                AgentEvent::Done {
                    result: Some("I'll run the command now.Done: the command printed hi".into()),
                    is_error: false,
                }
            ]
        );
        // A documented error result (`is_error:true`) fails the task.
        let failed = parse_all(&[r#"{"type":"result","subtype":"error","is_error":true,"result":"boom","session_id":"s"}"#.to_string()]);
        assert!(matches!(
            failed[..],
            [AgentEvent::Done { is_error: true, .. }]
        ));
    }

    #[test]
    fn tool_error_variants_and_failed_commands_are_errors() {
        // Error variants are documented only as "an error variant": any key but `success`.
        let (out, err) = tool_output(Some(
            &serde_json::json!({"error": {"message": "file not found"}}),
        ));
        assert_eq!((out.as_str(), err), ("file not found", true));
        let (_, err) = tool_output(Some(
            &serde_json::json!({"success": {"exitCode": 1, "stdout": "", "stderr": "no"}}),
        ));
        assert!(err);
        let (out, err) = tool_output(Some(
            &serde_json::json!({"success": {"content": "file text"}}),
        ));
        assert_eq!((out.as_str(), err), (r#"{"content":"file text"}"#, false));
        assert_eq!(tool_name("readToolCall"), "read");
        assert_eq!(tool_name("ToolCall"), "ToolCall");
    }

    #[test]
    fn noise_and_unknown_lines() {
        let events = parse_all(&[
            "Warning: something".to_string(),
            r#"{"type":"brand_new"}"#.to_string(),
        ]);
        assert!(matches!(events[..], [AgentEvent::Warning { .. }]));
        assert_eq!(crate::adapter::wire::clip("héllo", 2), "h");
    }

    #[test]
    fn adapter_is_detected_and_untested() {
        use crate::engine::launch::{Launch, SessionArgs};
        let r = crate::adapter::Registry::builtin().unwrap();
        let spec = r.get("cursor").unwrap().clone();
        assert!(crate::adapter::wire::parser_for(&spec).is_some());
        assert!(spec.detect);
        assert!(spec.tested_versions.is_empty(), "no recording exists");
        assert!(spec.install.contains("https://cursor.com/install"));
        let launch = Launch {
            prompt_via: spec.prompt,
            adapter: spec,
            program: "cursor-agent".into(),
            extra_args: vec![],
            cwd: "/workspace/project".into(),
            env: vec![],
            model: None,
            force: true,
            max_line_bytes: 1 << 20,
            timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
            cancel_grace: std::time::Duration::from_secs(1),
            sandbox: None,
        };
        let next = launch.spawn_spec("again", &SessionArgs::Resume("chat-1".into()));
        assert_eq!(
            next.args,
            [
                "-p",
                "--output-format",
                "stream-json",
                "--resume",
                "chat-1",
                "--force",
                "--",
                "again"
            ]
        );
    }
}
