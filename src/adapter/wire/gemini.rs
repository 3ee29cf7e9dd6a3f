//! `gemini-stream-json`: Gemini CLI's headless output, `gemini -p … --output-format
//! stream-json` (one JSON object per line on stdout).
//!
//! Every fact here comes from the recorded runs of Gemini CLI 0.61.0
//! (tests/fixtures/transcripts/gemini/0.61.0, described in docs/wire-formats.md), except the
//! `error` line, whose shape is from the CLI's source (no recording has one):
//!
//! | line | AgentEvent |
//! |---|---|
//! | `init{session_id, model}` | `Init` (`model` is `auto` unless `-m` was given) |
//! | `message{role:"user"}` | nothing (the prompt echoed back) |
//! | `message{role:"assistant", content, delta:true}` | `Text` delta; the first chunk after a tool starts a new paragraph |
//! | `tool_use{tool_id, tool_name, parameters}` | `ToolUse` |
//! | `tool_result{tool_id, status, output, error{type,message}}` | `ToolResult`, an error unless `status` is `success` |
//! | `error{severity:"warning", message}` | `Warning` (the turn goes on) |
//! | `error{severity:"error" or other, message}` | `Error` (ends the turn) |
//! | `result{status:"success", stats}` | `Usage` then `Done` (the result is the streamed text) |
//! | `result{status:"error", error{type,message}, stats}` | `Usage` then `Error`, kind `auth` for an invalid key |
//! | other types, non-JSON lines | nothing / `Warning` |
//!
//! Not in this format: thoughts (never emitted in stream-json) and approvals (headless
//! Gemini withholds the tools that need one; the `gemini` adapter uses ACP for those).

use serde_json::Value;

use super::WireParser;
use crate::adapter::{AgentEvent, Usage};

pub const FORMAT: &str = "gemini-stream-json";

/// Parser state: whether the next assistant chunk begins a new message.
#[derive(Debug, Default)]
pub struct GeminiParser {
    /// Some assistant text was streamed.
    text_seen: bool,
    /// A tool ran since the last assistant chunk.
    tool_since_text: bool,
}

impl GeminiParser {
    pub fn new() -> GeminiParser {
        GeminiParser::default()
    }
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A JSON value as text: strings as they are, anything else as JSON.
fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `result.stats` → Usage. Recorded: `{total_tokens, input_tokens, output_tokens, cached,
/// input, duration_ms, tool_calls, models{…}}`, summed over every model (the `auto`
/// router's classifier call included). Gemini reports no cost.
fn usage_of(stats: &Value) -> Option<Usage> {
    if !stats.is_object() {
        return None;
    }
    Some(Usage {
        input_tokens: stats.get("input_tokens").and_then(Value::as_u64),
        output_tokens: stats.get("output_tokens").and_then(Value::as_u64),
        cost_usd: None,
        duration_ms: stats.get("duration_ms").and_then(Value::as_u64),
    })
}

/// The error of a `result{status:"error"}` line, as a message and a kind.
///
/// Recorded (API key rejected): `{"type":"unknown","message":"[API Error: {\"error\":{\"code\":400,
/// \"message\":\"API key not valid. …\",\"status\":\"INVALID_ARGUMENT\",\"details\":[{…,
/// \"reason\":\"API_KEY_INVALID\",…}]}}]"}`: the Google API error, as JSON inside the text.
fn result_error(error: Option<&Value>) -> (String, Option<String>) {
    let raw = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("Gemini CLI reported an error")
        .to_string();
    let inner = raw
        .strip_prefix("[API Error: ")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|s| serde_json::from_str::<Value>(s).ok());
    let Some(api) = inner.as_ref().and_then(|v| v.get("error")) else {
        return (raw, None);
    };
    let code = api.get("code").and_then(Value::as_u64);
    let invalid_key = api
        .get("details")
        .and_then(Value::as_array)
        .is_some_and(|d| {
            d.iter()
                .any(|x| x.get("reason").and_then(Value::as_str) == Some("API_KEY_INVALID"))
        });
    let kind = if invalid_key {
        Some("auth".to_string())
    } else {
        code.map(|c| super::opencode::error_kind_for_status(c).to_string())
    };
    let message = match (code, api.get("message").and_then(Value::as_str)) {
        (Some(c), Some(m)) => format!("Gemini API error {c}: {m}"),
        (None, Some(m)) => format!("Gemini API error: {m}"),
        _ => raw,
    };
    (message, kind)
}

impl WireParser for GeminiParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(line, out, 200) else {
            return;
        };
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "init" => out.push(AgentEvent::Init {
                session_id: str_of(&v, "session_id"),
                model: str_of(&v, "model"),
                cwd: None,
                tools: Vec::new(),
            }),
            "message" if v.get("role").and_then(Value::as_str) == Some("assistant") => {
                let Some(mut text) = str_of(&v, "content").filter(|t| !t.is_empty()) else {
                    return;
                };
                // Chunks of one message follow each other; a tool call between two chunks
                // means the model spoke again after the tool: start a new paragraph.
                if self.text_seen && self.tool_since_text {
                    text.insert_str(0, "\n\n");
                }
                self.text_seen = true;
                self.tool_since_text = false;
                out.push(AgentEvent::Text {
                    text,
                    delta: v.get("delta").and_then(Value::as_bool).unwrap_or(false),
                });
            }
            "tool_use" => {
                self.tool_since_text = true;
                out.push(AgentEvent::ToolUse {
                    id: str_of(&v, "tool_id").unwrap_or_default(),
                    name: str_of(&v, "tool_name").unwrap_or_else(|| "tool".into()),
                    input: v.get("parameters").cloned().unwrap_or(Value::Null),
                });
            }
            "tool_result" => {
                self.tool_since_text = true;
                let is_error = v.get("status").and_then(Value::as_str) != Some("success");
                // Gemini CLI leaves `output` out for some tools: their output is unknown,
                // not empty.
                let output = text_of(v.get("output"))
                    .or_else(|| text_of(v.get("error").and_then(|e| e.get("message"))));
                out.push(AgentEvent::ToolResult {
                    id: str_of(&v, "tool_id").unwrap_or_default(),
                    output,
                    is_error,
                });
            }
            "error" => {
                let message =
                    str_of(&v, "message").unwrap_or_else(|| "Gemini CLI reported an error".into());
                if v.get("severity").and_then(Value::as_str) == Some("warning") {
                    out.push(AgentEvent::Warning { message });
                } else {
                    out.push(AgentEvent::Error {
                        message,
                        kind: None,
                    });
                }
            }
            "result" => {
                if let Some(u) = v.get("stats").and_then(usage_of) {
                    out.push(AgentEvent::Usage(u));
                }
                if v.get("status").and_then(Value::as_str) == Some("success") {
                    // No result text in this format: the mapper uses the streamed answer.
                    out.push(AgentEvent::Done {
                        result: None,
                        is_error: false,
                    });
                } else {
                    let (message, kind) = result_error(v.get("error"));
                    out.push(AgentEvent::Error { message, kind });
                }
            }
            // `message` from the user, and types this version does not print.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::wire::{golden, Decision};

    const DIR: &str = "gemini/0.61.0";

    fn recorded(name: &str) -> Vec<AgentEvent> {
        golden::events(&mut GeminiParser::new(), &format!("{DIR}/{name}"))
    }

    fn parse(line: &str) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        GeminiParser::new().parse_line(line, &mut out, &mut Vec::new());
        out
    }

    fn final_state(events: &[AgentEvent]) -> String {
        let updates = golden::updates(events);
        updates
            .iter()
            .rev()
            .find_map(|u| u["statusUpdate"]["status"]["state"].as_str())
            .unwrap_or("")
            .to_string()
    }

    /// Every recorded stream-json stdout: events and A2A updates, snapshotted.
    macro_rules! golden_test {
        ($name:ident, $file:literal) => {
            #[test]
            fn $name() {
                let events = recorded($file);
                insta::assert_debug_snapshot!(events);
                golden::assert_updates!(golden::updates(&events));
            }
        };
    }

    golden_test!(golden_tool_use, "gemini-tool-use.jsonl");
    golden_test!(
        golden_tool_use_auto_model,
        "gemini-tool-use-auto-model.jsonl"
    );
    golden_test!(
        golden_default_approval_headless,
        "gemini-default-approval-headless.jsonl"
    );
    golden_test!(
        golden_resume_1_session_id,
        "gemini-resume-1-session-id.jsonl"
    );
    golden_test!(golden_resume_2_by_id, "gemini-resume-2-by-id.jsonl");
    golden_test!(golden_resume_3_latest, "gemini-resume-3-latest.jsonl");
    golden_test!(golden_auth_400, "gemini-auth-400.jsonl");
    golden_test!(golden_server_500, "gemini-server-500.jsonl");
    golden_test!(
        golden_sigterm_no_relaunch,
        "gemini-sigterm-no-relaunch.jsonl"
    );
    golden_test!(
        golden_sigterm_parent_only,
        "gemini-sigterm-parent-only.jsonl"
    );
    golden_test!(
        golden_sigterm_process_group,
        "gemini-sigterm-process-group.jsonl"
    );

    #[test]
    fn init_carries_the_session_id_and_model() {
        let events = recorded("gemini-resume-1-session-id.jsonl");
        assert_eq!(
            events[0],
            AgentEvent::Init {
                session_id: Some("22222222-3333-4444-8555-666666666666".into()),
                model: Some("gemini-2.5-pro".into()),
                cwd: None,
                tools: vec![],
            }
        );
        // A resumed run reports the same session (the host records it from Init).
        for f in [
            "gemini-resume-2-by-id.jsonl",
            "gemini-resume-3-latest.jsonl",
        ] {
            assert!(matches!(&recorded(f)[0],
                AgentEvent::Init { session_id: Some(s), .. } if s == "22222222-3333-4444-8555-666666666666"));
        }
        assert!(matches!(&recorded("gemini-tool-use-auto-model.jsonl")[0],
            AgentEvent::Init { model: Some(m), .. } if m == "auto"));
    }

    #[test]
    fn tool_use_and_result_pair_by_tool_id() {
        let events = recorded("gemini-tool-use.jsonl");
        let id = "run_shell_command__run_shell_command_1795352056244_0";
        assert!(events.iter().any(|e| matches!(e,
            AgentEvent::ToolUse { id: i, name, input } if i == id && name == "run_shell_command" && input["command"] == "echo hi")));
        assert!(events.iter().any(|e| matches!(e,
            AgentEvent::ToolResult { id: i, output, is_error: false } if i == id && output.as_deref() == Some("hi"))));
        // A failing tool (the model called a read-only tool with bad parameters) is an
        // error result, not a failed task.
        let events = recorded("gemini-default-approval-headless.jsonl");
        assert!(events.iter().any(|e| matches!(e,
            AgentEvent::ToolResult { is_error: true, output, .. } if output.as_deref().is_some_and(|o| o.starts_with("params must have")))));
        assert_eq!(final_state(&events), "TASK_STATE_COMPLETED");
    }

    /// Issue 37: a `tool_result` without `output` (Gemini CLI leaves it out when the tool's
    /// display is not text) is a result whose output is unknown, not an empty one.
    #[test]
    fn a_result_without_output_is_unknown_not_empty() {
        let line = r#"{"type":"tool_result","timestamp":"2026-11-22T12:54:16.383Z","tool_id":"write_file__write_file_1795352056244_0","status":"success"}"#;
        let out = parse(line);
        assert!(
            matches!(
                &out[..],
                [AgentEvent::ToolResult {
                    output: None,
                    is_error: false,
                    ..
                }]
            ),
            "{out:?}"
        );
    }

    #[test]
    fn result_text_is_the_streamed_answer_with_usage() {
        let events = recorded("gemini-tool-use.jsonl");
        assert!(events.contains(&AgentEvent::Usage(Usage {
            input_tokens: Some(200),
            output_tokens: Some(40),
            cost_usd: None,
            duration_ms: Some(216),
        })));
        assert_eq!(
            events.last(),
            Some(&AgentEvent::Done {
                result: None,
                is_error: false
            })
        );
        let updates = golden::updates(&events);
        let done = updates.last().unwrap();
        assert_eq!(
            done["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert_eq!(
            done["statusUpdate"]["status"]["message"]["parts"][0]["text"],
            "I'll run the command now.\n\nDone: the command printed hi"
        );
        assert_eq!(
            done["statusUpdate"]["metadata"]["usage"]["inputTokens"],
            200
        );
    }

    #[test]
    fn invalid_api_key_is_an_auth_error() {
        let events = recorded("gemini-auth-400.jsonl");
        assert_eq!(
            events.last(),
            Some(&AgentEvent::Error {
                message: "Gemini API error 400: API key not valid. Please pass a valid API key."
                    .into(),
                kind: Some("auth".into()),
            })
        );
        assert_eq!(final_state(&events), "TASK_STATE_FAILED");
    }

    #[test]
    fn server_500_is_retried_silently_so_only_the_host_timeout_ends_it() {
        // Gemini retried the 500 for over 200 s printing nothing on stdout (the retries are
        // on stderr): the parser sees the start only; the idle timeout fails the task.
        let events = recorded("gemini-server-500.jsonl");
        assert_eq!(events.len(), 1);
        assert!(matches!(events[0], AgentEvent::Init { .. }));
        // Were a result with a 5xx to come, it would fail the task as a server error
        // (the Google API error shape as recorded for the 400, with code 500; the body is
        // the one on the recorded stderr).
        let line = r#"{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":500,\"message\":\"Internal error encountered.\",\"status\":\"INTERNAL\"}}]"}}"#;
        assert_eq!(
            parse(line),
            vec![AgentEvent::Error {
                message: "Gemini API error 500: Internal error encountered.".into(),
                kind: Some("server".into()),
            }]
        );
    }

    #[test]
    fn exits_without_stdout_give_no_events() {
        // Untrusted folder (55), unknown --resume id (42), no key (41): stderr only; the
        // host fails the task from the exit code and the stderr tail.
        for f in [
            "gemini-untrusted-folder.txt",
            "gemini-resume-unknown-id.txt",
            "gemini-no-key.txt",
        ] {
            assert!(recorded(f).is_empty(), "{f}");
        }
    }

    // `error` lines: shape from the CLI's source (docs/wire-formats.md), not recorded.
    #[test]
    fn src_documented_warning_error_line_does_not_fail_the_task() {
        let mut events = recorded("gemini-resume-2-by-id.jsonl");
        let warning = parse(
            r#"{"type":"error","timestamp":"2026-11-22T12:54:36.070Z","severity":"warning","message":"Loop detected, stopping execution"}"#,
        );
        assert_eq!(
            warning,
            vec![AgentEvent::Warning {
                message: "Loop detected, stopping execution".into()
            }]
        );
        events.splice(2..2, warning);
        assert_eq!(final_state(&events), "TASK_STATE_COMPLETED");
    }

    #[test]
    fn src_documented_error_severity_fails_the_task() {
        let events = parse(
            r#"{"type":"error","timestamp":"…","severity":"error","message":"Maximum session turns exceeded"}"#,
        );
        assert!(
            matches!(&events[..], [AgentEvent::Error { message, kind: None }] if message == "Maximum session turns exceeded")
        );
    }

    #[test]
    fn noise_and_unknown_lines() {
        assert!(matches!(
            parse("YOLO mode is enabled.")[..],
            [AgentEvent::Warning { .. }]
        ));
        assert!(parse(r#"{"type":"something_new","x":1}"#).is_empty());
        assert!(parse(r#"{"type":"message","role":"user","content":"say hi"}"#).is_empty());
        assert!(GeminiParser::new()
            .encode_decision(&Decision {
                message_id: None,
                id: "x".into(),
                allow: true,
                option: None,
                message: None
            })
            .is_none());
    }

    /// The adapter's arguments on a first and a follow-up turn: the prompt is the value of
    /// `-p`, after every other argument, and stdin is /dev/null (as recorded).
    #[test]
    fn adapter_arguments_for_first_and_follow_up_turns() {
        use crate::engine::launch::{Launch, SessionArgs};
        use crate::runner::StdinMode;
        let r = crate::adapter::Registry::builtin().unwrap();
        let spec = r.get("gemini-json").unwrap().clone();
        assert!(crate::adapter::wire::parser_for(&spec).is_some());
        assert!(!spec.detect);
        let launch = Launch {
            prompt_via: spec.prompt,
            adapter: spec,
            program: "gemini".into(),
            extra_args: vec![],
            cwd: "/workspace/project".into(),
            env: vec![],
            model: Some("gemini-2.5-pro".into()),
            force: true,
            max_line_bytes: 1 << 20,
            timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
            cancel_grace: std::time::Duration::from_secs(1),
            sandbox: None,
        };
        let first = launch.spawn_spec(
            "say hi",
            &SessionArgs::New("22222222-3333-4444-8555-666666666666".into()),
        );
        assert_eq!(
            first.args,
            [
                "--output-format",
                "stream-json",
                "--skip-trust",
                "-m",
                "gemini-2.5-pro",
                "--session-id",
                "22222222-3333-4444-8555-666666666666",
                "--yolo",
                "--prompt=say hi",
            ]
        );
        assert_eq!(first.stdin, StdinMode::Null);
        let next = launch.spawn_spec(
            "and again",
            &SessionArgs::Resume("22222222-3333-4444-8555-666666666666".into()),
        );
        assert_eq!(
            &next.args[5..7],
            ["--resume", "22222222-3333-4444-8555-666666666666"]
        );
        assert_eq!(&next.args[8..], ["--prompt=and again"]);
        assert!(
            next.env.is_empty(),
            "env is computed by child_env, not here"
        );
        let env = crate::engine::launch::child_env(
            &launch.adapter,
            &[
                ("GEMINI_API_KEY".into(), "k".into()),
                ("OTHER_SECRET".into(), "s".into()),
            ],
            &[],
        );
        assert!(env.contains(&("GEMINI_API_KEY".into(), "k".into())));
        assert!(env.contains(&("GEMINI_CLI_NO_RELAUNCH".into(), "true".into())));
        assert!(!env.iter().any(|(k, _)| k == "OTHER_SECRET"));
    }
}
