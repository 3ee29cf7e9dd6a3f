//! `opencode-json`: opencode's one-shot output, `opencode run --format json` (one JSON
//! object per line on stdout, `{type, timestamp, sessionID, part | error}`).
//!
//! Every fact here comes from the recorded runs of opencode 1.18.33
//! (tests/fixtures/transcripts/opencode/1.18.33, described in docs/wire-formats.md):
//!
//! | line | AgentEvent |
//! |---|---|
//! | first line carrying `sessionID` | `Init` (there is no init line; model and cwd are not printed) |
//! | `step_start` | nothing |
//! | `text{part.text}` | `Text`, a whole part (`delta: false`: parts are printed once complete) |
//! | `reasoning{part.text}` | `Thinking` (only with `--thinking`) |
//! | `tool_use{part.callID, part.tool, part.state}` | `ToolUse` once per call, and `ToolResult` from the same line when `state.status` is `completed` (output) or `error` (error text) |
//! | `step_finish{part.reason, part.tokens, part.cost}` | `Usage`, summed over the steps so far |
//! | `error{error{name, data{message, statusCode}}}` | `Error`, kind `auth` (401/403), `server` (5xx), else `api` |
//! | other types, non-JSON lines | nothing / `Warning` |
//!
//! **End of the turn.** opencode prints no result line: a turn ends with a `step_finish`
//! whose `reason` is `stop` and the process exits 0. This parser emits no `Done`: the host
//! completes a task whose process exits 0 with the text accumulated from the `text` parts
//! (paragraphs joined by blank lines), and fails it on any other exit with the stderr tail
//! (e.g. `opencode run -s <unknown>`: `Error: Session not found` on stderr, exit 1).
//!
//! **Auto-rejected permissions.** `opencode run` cannot ask: a tool whose permission is
//! `ask` is rejected (stderr `permission requested: …; auto-rejecting`), its part ends with
//! `state.status:"error"` and the recorded text `The user rejected permission to use this
//! specific tool call.`, and the run stops after that step (exit 0). Completing that task
//! would report success for a turn the CLI abandoned, so the parser fails it at the end of
//! that step (`step_finish`, after its usage) with kind `permission`.

use std::collections::HashSet;

use serde_json::Value;

use super::WireParser;
use crate::adapter::{AgentEvent, Usage};

pub const FORMAT: &str = "opencode-json";

/// The error text of a tool call that `opencode run` rejected because it would need an
/// approval (recorded, opencode 1.18.33).
const AUTO_REJECTED: &str = "The user rejected permission to use this specific tool call.";

/// Parser state.
#[derive(Debug, Default)]
pub struct OpencodeParser {
    session_seen: bool,
    /// Tool calls already reported as started.
    started: HashSet<String>,
    /// Usage summed over the finished steps.
    total: Usage,
    /// A tool call of the current step was auto-rejected: (tool, what it wanted).
    rejected: Option<(String, String)>,
}

impl OpencodeParser {
    pub fn new() -> OpencodeParser {
        OpencodeParser::default()
    }
}

/// Error kind for an HTTP status reported by a CLI.
pub(super) fn error_kind_for_status(code: u64) -> &'static str {
    match code {
        401 | 403 => "auth",
        500..=599 => "server",
        _ => "api",
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    }
}

impl OpencodeParser {
    fn tool(&mut self, part: &Value, out: &mut Vec<AgentEvent>) {
        let id = str_at(part, "/callID")
            .or_else(|| str_at(part, "/id"))
            .unwrap_or_default()
            .to_string();
        let name = str_at(part, "/tool").unwrap_or("tool").to_string();
        let state = part.get("state").unwrap_or(&Value::Null);
        if self.started.insert(id.clone()) {
            out.push(AgentEvent::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: state.get("input").cloned().unwrap_or(Value::Null),
            });
        }
        match str_at(state, "/status") {
            Some("completed") => out.push(AgentEvent::ToolResult {
                id,
                output: Some(text_of(state.get("output"))),
                is_error: false,
            }),
            Some("error") => {
                let error = text_of(state.get("error"));
                if error == AUTO_REJECTED {
                    let what = str_at(state, "/title")
                        .or_else(|| str_at(state, "/input/command"))
                        .unwrap_or_default();
                    self.rejected = Some((name, what.to_string()));
                }
                out.push(AgentEvent::ToolResult {
                    id,
                    output: Some(error),
                    is_error: true,
                });
            }
            // Not printed by `run` (parts come once finished), but harmless: the call is
            // reported as started and its result comes with a later line.
            _ => {}
        }
    }

    fn step_finish(&mut self, part: &Value, out: &mut Vec<AgentEvent>) {
        let tokens = part.get("tokens").unwrap_or(&Value::Null);
        let step = Usage {
            input_tokens: tokens.get("input").and_then(Value::as_u64),
            output_tokens: tokens.get("output").and_then(Value::as_u64),
            cost_usd: part.get("cost").and_then(Value::as_f64),
            duration_ms: None,
        };
        self.total = Usage {
            input_tokens: add(self.total.input_tokens, step.input_tokens),
            output_tokens: add(self.total.output_tokens, step.output_tokens),
            cost_usd: match (self.total.cost_usd, step.cost_usd) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
            },
            duration_ms: None,
        };
        // Task metadata keeps the last usage sent, so each one is the total so far.
        out.push(AgentEvent::Usage(self.total.clone()));
        if let Some((tool, what)) = self.rejected.take() {
            let target = if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            };
            out.push(AgentEvent::Error {
                message: format!(
                    "opencode rejected the {tool} tool{target}: it needs an approval, which `opencode run` cannot ask for; allow it in opencode's permission config, run with AGENT_FORCE (--auto), or use opencode's ACP adapter"
                ),
                kind: Some("permission".into()),
            });
        }
    }
}

/// A JSON value as text: strings as they are, anything else as JSON.
fn text_of(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// `error.error` → Error. Recorded: `{"name":"APIError","data":{"message":"Incorrect API key
/// provided: sk-test.","statusCode":401,"isRetryable":false,…}}`; a refused connection has
/// no `statusCode`.
fn error_event(error: Option<&Value>) -> AgentEvent {
    let error = error.unwrap_or(&Value::Null);
    let name = str_at(error, "/name");
    let status = error.pointer("/data/statusCode").and_then(Value::as_u64);
    let text = str_at(error, "/data/message")
        .or_else(|| str_at(error, "/message"))
        .or(name)
        .unwrap_or("opencode reported an error");
    let message = match (name, status) {
        (Some(n), Some(s)) => format!("{n} (HTTP {s}): {text}"),
        (Some(n), None) if n != text => format!("{n}: {text}"),
        _ => text.to_string(),
    };
    AgentEvent::Error {
        message,
        kind: Some(status.map_or("api", error_kind_for_status).to_string()),
    }
}

impl WireParser for OpencodeParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        let Some(v) = super::json_line(line, out, 200) else {
            return;
        };
        if !self.session_seen {
            if let Some(s) = str_at(&v, "/sessionID") {
                self.session_seen = true;
                out.push(AgentEvent::Init {
                    session_id: Some(s.to_string()),
                    model: None,
                    cwd: None,
                    tools: Vec::new(),
                });
            }
        }
        let part = v.get("part").unwrap_or(&Value::Null);
        match str_at(&v, "/type").unwrap_or("") {
            "text" => {
                let text = str_at(part, "/text").unwrap_or_default();
                if !text.is_empty() {
                    out.push(AgentEvent::Text {
                        text: text.to_string(),
                        delta: false,
                    });
                }
            }
            "reasoning" => {
                let text = str_at(part, "/text").unwrap_or_default();
                if !text.is_empty() {
                    out.push(AgentEvent::Thinking {
                        text: text.to_string(),
                    });
                }
            }
            "tool_use" => self.tool(part, out),
            "step_finish" => self.step_finish(part, out),
            "error" => out.push(error_event(v.get("error"))),
            // `step_start`, and types this version does not print.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::wire::golden;

    const DIR: &str = "opencode/1.18.33";

    fn recorded(name: &str) -> Vec<AgentEvent> {
        golden::events(&mut OpencodeParser::new(), &format!("{DIR}/{name}"))
    }

    fn last_status(events: &[AgentEvent]) -> Value {
        golden::updates(events)
            .into_iter()
            .rev()
            .find(|u| u.get("statusUpdate").is_some())
            .map(|u| u["statusUpdate"].clone())
            .unwrap_or_default()
    }

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

    golden_test!(golden_tool_use, "opencode-tool-use.jsonl");
    golden_test!(golden_thinking, "opencode-thinking.jsonl");
    golden_test!(
        golden_default_permissions,
        "opencode-default-permissions.jsonl"
    );
    golden_test!(
        golden_permission_ask_autorejected,
        "opencode-permission-ask-autorejected.jsonl"
    );
    golden_test!(golden_resume_1, "opencode-resume-1.jsonl");
    golden_test!(golden_resume_2, "opencode-resume-2.jsonl");
    golden_test!(golden_auth_401, "opencode-auth-401.jsonl");
    golden_test!(golden_server_500, "opencode-server-500.jsonl");
    golden_test!(
        golden_connection_refused,
        "opencode-connection-refused.jsonl"
    );

    #[test]
    fn init_once_from_the_first_session_id() {
        let events = recorded("opencode-tool-use.jsonl");
        let inits: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Init { .. }))
            .collect();
        assert_eq!(
            inits,
            [&AgentEvent::Init {
                session_id: Some("ses_dfca74bdcffeD4DaCa64iTaRlH".into()),
                model: None,
                cwd: None,
                tools: vec![],
            }]
        );
        assert!(matches!(&events[0], AgentEvent::Init { .. }));
        // `run -s <id>` continues the session: same id on the second run.
        let first = recorded("opencode-resume-1.jsonl");
        let second = recorded("opencode-resume-2.jsonl");
        assert_eq!(first[0], second[0]);
        // Even an error line carries the session id.
        assert!(matches!(&recorded("opencode-auth-401.jsonl")[0],
            AgentEvent::Init { session_id: Some(s), .. } if s == "ses_dfca679c8ffepzkZUoXqyR4zsa"));
    }

    #[test]
    fn tool_use_and_result_come_from_the_same_line() {
        let mut p = OpencodeParser::new();
        let lines = golden::stdout_lines(&format!("{DIR}/opencode-tool-use.jsonl"));
        let tool_line = lines
            .iter()
            .find(|l| l.contains(r#""type":"tool_use""#))
            .unwrap();
        let mut out = Vec::new();
        p.session_seen = true;
        p.parse_line(tool_line, &mut out, &mut Vec::new());
        assert_eq!(
            out,
            vec![
                AgentEvent::ToolUse {
                    id: "call_ea2663ec097f443fba43fc5b".into(),
                    name: "bash".into(),
                    input: serde_json::json!({"command":"echo hi","description":"Print hi"}),
                },
                AgentEvent::ToolResult {
                    id: "call_ea2663ec097f443fba43fc5b".into(),
                    output: Some("hi\n".into()),
                    is_error: false,
                },
            ]
        );
        // The same line again (a later state of the call) does not start it twice.
        out.clear();
        p.parse_line(tool_line, &mut out, &mut Vec::new());
        assert!(matches!(&out[..], [AgentEvent::ToolResult { .. }]));
    }

    #[test]
    fn exit_zero_completes_with_the_text_parts_and_summed_usage() {
        let events = recorded("opencode-thinking.jsonl");
        assert!(events.contains(&AgentEvent::Thinking {
            text: "The user wants me to say hi; I will run echo hi in the shell.".into()
        }));
        assert!(!events.iter().any(|e| matches!(e, AgentEvent::Done { .. })));
        assert_eq!(
            events.last(),
            Some(&AgentEvent::Usage(Usage {
                input_tokens: Some(200),
                output_tokens: Some(40),
                cost_usd: Some(0.0),
                duration_ms: None,
            }))
        );
        // What the host does when the process then exits 0.
        let mut m = crate::task::TurnMapper::new("t", "c");
        for e in events {
            m.on_event(e);
        }
        let done = m.on_exit(crate::task::ExitReason::Exited {
            code: Some(0),
            signal: None,
            stderr_tail: String::new(),
        });
        let done: Vec<Value> = done
            .iter()
            .map(|u| serde_json::to_value(u).unwrap())
            .collect();
        let status = &done.last().unwrap()["statusUpdate"];
        assert_eq!(status["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            status["status"]["message"]["parts"][0]["text"],
            "I'll run the command now. \n\nDone: the command printed hi "
        );
    }

    #[test]
    fn http_401_is_an_auth_error_and_500_a_server_error() {
        assert_eq!(
            recorded("opencode-auth-401.jsonl").last(),
            Some(&AgentEvent::Error {
                message: "APIError (HTTP 401): Incorrect API key provided: sk-test.".into(),
                kind: Some("auth".into()),
            })
        );
        let events = recorded("opencode-server-500.jsonl");
        assert_eq!(
            events.last(),
            Some(&AgentEvent::Error {
                message: "APIError (HTTP 500): The server had an error".into(),
                kind: Some("server".into()),
            })
        );
        assert_eq!(last_status(&events)["status"]["state"], "TASK_STATE_FAILED");
        assert_eq!(last_status(&events)["metadata"]["errorKind"], "model");
        assert!(
            matches!(recorded("opencode-connection-refused.jsonl").last(),
            Some(AgentEvent::Error { kind: Some(k), message }) if k == "api" && message.starts_with("APIError: Cannot connect"))
        );
    }

    #[test]
    fn auto_rejected_permission_fails_the_task_after_the_step() {
        let events = recorded("opencode-permission-ask-autorejected.jsonl");
        assert!(events.iter().any(|e| matches!(e,
            AgentEvent::ToolResult { is_error: true, output, .. } if output.as_deref() == Some(AUTO_REJECTED))));
        let n = events.len();
        assert!(matches!(events[n - 2], AgentEvent::Usage(_)));
        assert!(
            matches!(&events[n - 1], AgentEvent::Error { kind: Some(k), message }
            if k == "permission" && message.contains("bash tool (touch fake_created.txt)"))
        );
        let status = last_status(&events);
        assert_eq!(status["status"]["state"], "TASK_STATE_FAILED");
        assert_eq!(status["metadata"]["errorKind"], "permission");
        assert_eq!(status["metadata"]["usage"]["inputTokens"], 100);
        // With the default permissions the same request runs the tool and completes.
        let events = recorded("opencode-default-permissions.jsonl");
        assert!(!events.iter().any(|e| matches!(e, AgentEvent::Error { .. })));
    }

    #[test]
    fn sigterm_and_unknown_session_print_nothing() {
        assert!(recorded("opencode-sigterm.jsonl").is_empty());
        assert!(recorded("opencode-resume-unknown.txt").is_empty());
    }

    #[test]
    fn noise_and_unknown_lines() {
        let mut out = Vec::new();
        let mut p = OpencodeParser::new();
        p.parse_line(
            "\u{1b}[91mError: Session not found",
            &mut out,
            &mut Vec::new(),
        );
        p.parse_line(r#"{"type":"brand_new"}"#, &mut out, &mut Vec::new());
        assert!(matches!(&out[..], [AgentEvent::Warning { .. }]));
        assert_eq!(error_kind_for_status(403), "auth");
        assert_eq!(error_kind_for_status(429), "api");
    }

    #[test]
    fn adapter_arguments_for_first_and_follow_up_turns() {
        use crate::engine::launch::{Launch, SessionArgs};
        let r = crate::adapter::Registry::builtin().unwrap();
        let spec = r.get("opencode-json").unwrap().clone();
        assert!(crate::adapter::wire::parser_for(&spec).is_some());
        assert!(!spec.detect);
        let launch = Launch {
            prompt_via: spec.prompt,
            adapter: spec,
            program: "opencode".into(),
            extra_args: vec![],
            cwd: "/workspace/project".into(),
            env: vec![],
            model: None,
            force: false,
            max_line_bytes: 1 << 20,
            timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
            cancel_grace: std::time::Duration::from_secs(1),
            sandbox: None,
        };
        // opencode picks its session ids: the host cannot choose one up front.
        assert!(!launch.host_chooses_session());
        let first = launch.spawn_spec("say hi", &SessionArgs::None);
        assert_eq!(first.args, ["run", "--format", "json", "--", "say hi"]);
        let next = launch.spawn_spec(
            "and again",
            &SessionArgs::Resume("ses_dfca6a408ffetf4YDf7HFub4y1".into()),
        );
        assert_eq!(
            next.args,
            [
                "run",
                "--format",
                "json",
                "-s",
                "ses_dfca6a408ffetf4YDf7HFub4y1",
                "--",
                "and again"
            ]
        );
    }
}
