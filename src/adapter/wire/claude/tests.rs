use serde_json::{json, Value};

use super::*;
use crate::adapter::wire::golden;
use crate::adapter::Usage;

mod launch;
mod stdio;

const CLAUDE: &str = "claude-code/2.1.330";
const QWEN: &str = "qwen/0.24.4";

fn one_shot() -> ClaudeParser {
    ClaudeParser::new(Options::default())
}

fn two_way(initialize: bool) -> ClaudeParser {
    ClaudeParser::new(Options {
        input: InputMode::StreamJson,
        initialize,
    })
}

fn events_of(fixture: &str) -> Vec<AgentEvent> {
    let mut p = if fixture.ends_with(".transcript.jsonl") {
        two_way(fixture.starts_with(QWEN))
    } else {
        one_shot()
    };
    golden::events(&mut p, fixture)
}

fn parse(p: &mut ClaudeParser, line: &str) -> (Vec<AgentEvent>, Vec<u8>) {
    let (mut out, mut reply) = (Vec::new(), Vec::new());
    p.parse_line(line, &mut out, &mut reply);
    (out, reply)
}

/// The answer text as the task mapping assembles it (whole messages become paragraphs).
fn answer(events: &[AgentEvent]) -> String {
    let mut s = String::new();
    for e in events {
        if let AgentEvent::Text { text, delta } = e {
            if !delta && !s.is_empty() {
                s.push_str("\n\n");
            }
            s.push_str(text);
        }
    }
    s
}

fn last_error(events: &[AgentEvent]) -> (String, String) {
    match events.last() {
        Some(AgentEvent::Error {
            message,
            kind: Some(kind),
        }) => (message.clone(), kind.clone()),
        other => panic!("expected an error last, got {other:?}"),
    }
}

fn usage_of(events: &[AgentEvent]) -> Usage {
    events
        .iter()
        .find_map(|e| match e {
            AgentEvent::Usage(u) => Some(u.clone()),
            _ => None,
        })
        .expect("a usage event")
}

/// The recorded run as (direction, message) pairs.
fn transcript(fixture: &str) -> Vec<(String, Value)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(fixture);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["dir"].as_str().unwrap().to_string(), v["msg"].clone()))
        .collect()
}

/// Snapshots the events and the A2A updates of one recorded stdout.
macro_rules! golden_test {
    ($name:ident, $fixture:expr) => {
        #[test]
        fn $name() {
            let events = events_of($fixture);
            insta::assert_debug_snapshot!(events);
            golden::assert_updates!(golden::updates(&events));
        }
    };
}

golden_test!(
    golden_claude_tool_use,
    "claude-code/2.1.330/claude-code-tool-use.jsonl"
);
golden_test!(
    golden_claude_tool_use_partial,
    "claude-code/2.1.330/claude-code-tool-use-partial.jsonl"
);
golden_test!(
    golden_claude_permission_denied,
    "claude-code/2.1.330/claude-code-permission-denied.jsonl"
);
golden_test!(
    golden_claude_allowed_tools,
    "claude-code/2.1.330/claude-code-allowed-tools.jsonl"
);
golden_test!(
    golden_claude_max_turns,
    "claude-code/2.1.330/claude-code-max-turns.jsonl"
);
golden_test!(
    golden_claude_resume_1_session_id,
    "claude-code/2.1.330/claude-code-resume-1-session-id.jsonl"
);
golden_test!(
    golden_claude_resume_2_resume,
    "claude-code/2.1.330/claude-code-resume-2-resume.jsonl"
);
golden_test!(
    golden_claude_resume_4_fork,
    "claude-code/2.1.330/claude-code-resume-4-fork.jsonl"
);
golden_test!(
    golden_claude_resume_unknown_id,
    "claude-code/2.1.330/claude-code-resume-unknown-id.jsonl"
);
golden_test!(
    golden_claude_auth_401,
    "claude-code/2.1.330/claude-code-auth-401.jsonl"
);
golden_test!(
    golden_claude_server_500,
    "claude-code/2.1.330/claude-code-server-500.jsonl"
);
golden_test!(
    golden_claude_connection_refused,
    "claude-code/2.1.330/claude-code-connection-refused.jsonl"
);
golden_test!(
    golden_claude_no_credentials,
    "claude-code/2.1.330/claude-code-no-credentials.jsonl"
);
golden_test!(
    golden_claude_sigterm,
    "claude-code/2.1.330/claude-code-sigterm.jsonl"
);
golden_test!(
    golden_claude_under_pty,
    "claude-code/2.1.330/claude-code-under-pty.raw"
);
golden_test!(
    golden_claude_output_json,
    "claude-code/2.1.330/claude-code-output-json.json"
);
golden_test!(
    golden_claude_stdio_permission_prompt,
    "claude-code/2.1.330/claude-code-stdio-permission-prompt.transcript.jsonl"
);
golden_test!(
    golden_claude_stdio_interrupt,
    "claude-code/2.1.330/claude-code-stdio-interrupt.transcript.jsonl"
);
golden_test!(golden_qwen_tool_use, "qwen/0.24.4/qwen-tool-use.jsonl");
golden_test!(golden_qwen_auth_401, "qwen/0.24.4/qwen-auth-401.jsonl");
golden_test!(golden_qwen_server_500, "qwen/0.24.4/qwen-server-500.jsonl");
golden_test!(
    golden_qwen_default_approval_headless,
    "qwen/0.24.4/qwen-default-approval-headless.jsonl"
);
golden_test!(
    golden_qwen_sigterm_orphans,
    "qwen/0.24.4/qwen-sigterm-orphans.jsonl"
);
golden_test!(
    golden_qwen_stdio_no_initialize_hangs,
    "qwen/0.24.4/qwen-stdio-no-initialize-hangs.transcript.jsonl"
);
golden_test!(
    golden_qwen_stdio_permission_prompt,
    "qwen/0.24.4/qwen-stdio-permission-prompt.transcript.jsonl"
);

#[test]
fn tool_use_pairs_with_its_result_and_the_turn_ends_with_the_result_text() {
    let events = events_of(&format!("{CLAUDE}/claude-code-tool-use.jsonl"));
    assert!(
        matches!(&events[0], AgentEvent::Init { session_id: Some(s), model: Some(m), cwd: Some(c), tools }
        if s == "e1a2eac0-adcf-4c23-bb71-d05a83f2236e" && m == "claude-opus-5-5"
            && c == "/workspace/project" && tools.len() == 22 && tools.contains(&"Bash".to_string()))
    );
    let uses: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolUse { id, name, input } => Some((id, name, input)),
            _ => None,
        })
        .collect();
    assert_eq!(uses.len(), 1);
    assert_eq!(uses[0].0, "toolu_1277b66f0db845a38224e017");
    assert_eq!(uses[0].1, "Bash");
    assert_eq!(
        uses[0].2,
        &json!({"command": "echo hi", "description": "Print hi"})
    );
    assert!(events.contains(&AgentEvent::ToolResult {
        id: "toolu_1277b66f0db845a38224e017".into(),
        output: Some("hi".into()),
        is_error: false,
    }));
    assert_eq!(
        usage_of(&events),
        Usage {
            input_tokens: Some(200),
            output_tokens: Some(40),
            cost_usd: Some(0.0016),
            duration_ms: Some(665),
        }
    );
    assert_eq!(
        events.last(),
        Some(&AgentEvent::Done {
            result: Some("Done: the command printed hi".into()),
            is_error: false,
        })
    );
    assert!(
        matches!(events[events.len() - 2], AgentEvent::Usage(_)),
        "usage comes before done"
    );
    assert_eq!(
        answer(&events),
        "I'll run the command now.\n\nDone: the command printed hi"
    );
    let thinking = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Thinking { .. }))
        .count();
    assert_eq!(thinking, 1);
}

#[test]
fn partial_messages_stream_deltas_without_repeating_the_whole_blocks() {
    let partial = events_of(&format!("{CLAUDE}/claude-code-tool-use-partial.jsonl"));
    assert!(partial
        .iter()
        .all(|e| !matches!(e, AgentEvent::Text { delta: false, .. })));
    let deltas = partial
        .iter()
        .filter(|e| matches!(e, AgentEvent::Text { .. }))
        .count();
    assert_eq!(deltas, 10, "five text_delta lines per text block");
    // The same answer as without partial messages, paragraph break included.
    let whole = events_of(&format!("{CLAUDE}/claude-code-tool-use.jsonl"));
    assert_eq!(answer(&partial), answer(&whole));
    let thinking: String = partial
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Thinking { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        thinking,
        "The user wants me to say hi; I will run echo hi in the shell."
    );
    let uses = partial
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolUse { input, .. } if input["command"] == "echo hi"))
        .count();
    assert_eq!(uses, 1, "the tool use comes once, with its whole input");
}

#[test]
fn a_whole_block_adds_what_the_deltas_missed() {
    let mut p = one_shot();
    let delta = r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}},"parent_tool_use_id":null}"#;
    let whole = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"Hello"}]},"parent_tool_use_id":null}"#;
    assert_eq!(parse(&mut p, delta).0.len(), 1);
    assert_eq!(
        parse(&mut p, whole).0,
        vec![AgentEvent::Text {
            text: "lo".into(),
            delta: true
        }]
    );
    // The next whole block, not streamed, comes whole.
    assert_eq!(
        parse(&mut p, whole).0,
        vec![AgentEvent::Text {
            text: "Hello".into(),
            delta: false
        }]
    );
}

#[test]
fn error_results_fail_with_a_kind_whatever_the_subtype() {
    let cases = [
        (
            "claude-code-auth-401.jsonl",
            "auth",
            "Invalid API key · Fix external API key",
        ),
        (
            "claude-code-no-credentials.jsonl",
            "auth",
            "Not logged in · Please run /login",
        ),
        (
            "claude-code-max-turns.jsonl",
            "max_turns",
            "Reached maximum number of turns (1)",
        ),
        (
            "claude-code-resume-unknown-id.jsonl",
            "session_not_found",
            "No conversation found with session ID: 99999999-2222-4333-8444-555555555555",
        ),
        (
            "claude-code-connection-refused.jsonl",
            "connection",
            "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
        ),
        (
            "claude-code-stdio-interrupt.transcript.jsonl",
            "interrupted",
            "The turn was interrupted",
        ),
    ];
    for (file, kind, message) in cases {
        let events = events_of(&format!("{CLAUDE}/{file}"));
        assert_eq!(
            last_error(&events),
            (message.to_string(), kind.to_string()),
            "{file}"
        );
        assert!(
            !events.iter().any(|e| matches!(e, AgentEvent::Done { .. })),
            "{file}"
        );
        if file.contains("401") || file.contains("credentials") || file.contains("refused") {
            // The synthetic assistant message repeating the API error is not an answer.
            assert_eq!(answer(&events), "", "{file}");
        }
    }
}

#[test]
fn usage_reports_the_cost_of_the_turn_not_of_the_session() {
    let resumed = events_of(&format!("{CLAUDE}/claude-code-resume-2-resume.jsonl"));
    // total_cost_usd is 0.0024: the first turn (0.0016) and this one.
    assert_eq!(usage_of(&resumed).cost_usd, Some(0.0008));
    assert_eq!(usage_of(&resumed).input_tokens, Some(100));
    let json = events_of(&format!("{CLAUDE}/claude-code-output-json.json"));
    assert_eq!(
        usage_of(&json).cost_usd,
        Some(0.0008),
        "no per-turn figure: the total"
    );
}

#[test]
fn server_500_warns_on_each_retry_then_fails() {
    let events = events_of(&format!("{CLAUDE}/claude-code-server-500.jsonl"));
    let retries: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Warning { message } => Some(message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        retries,
        [
            "API error 500 (server_error), retry 1 of 2 in 539 ms",
            "API error 500 (server_error), retry 2 of 2 in 1051 ms"
        ]
    );
    let (message, kind) = last_error(&events);
    assert_eq!(kind, "server_error");
    assert!(
        message.starts_with("API Error: 500 Internal server error."),
        "{message}"
    );
    assert_eq!(usage_of(&events).cost_usd, Some(0.0));
}

#[test]
fn one_shot_permission_denial_is_a_warning_and_a_failed_tool() {
    let events = events_of(&format!("{CLAUDE}/claude-code-permission-denied.jsonl"));
    assert!(events.iter().any(|e| matches!(e, AgentEvent::Warning { message }
        if message.starts_with("Bash was denied without asking: touch in '/workspace/project/fake_created.txt' needs approval."))));
    assert!(events.iter().any(
        |e| matches!(e, AgentEvent::ToolResult { id, is_error: true, output }
        if id == "toolu_58e725495c9145a0873e0f50" && output.as_deref().is_some_and(|o| o.contains("needs approval")))
    ));
    assert!(!events
        .iter()
        .any(|e| matches!(e, AgentEvent::ApprovalRequired { .. })));
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            is_error: false,
            ..
        })
    ));
}

#[test]
fn qwen_results_have_no_cost_and_keep_their_text() {
    let events = events_of(&format!("{QWEN}/qwen-tool-use.jsonl"));
    assert_eq!(
        usage_of(&events),
        Usage {
            input_tokens: Some(200),
            output_tokens: Some(40),
            cost_usd: None,
            duration_ms: Some(953),
        }
    );
    assert_eq!(
        events.last(),
        Some(&AgentEvent::Done {
            result: Some("Done: the command printed hi ".into()),
            is_error: false
        })
    );
    assert!(events.contains(&AgentEvent::ToolResult {
        id: "call_ac837202893647eb8f7b247c".into(),
        output: Some("hi".into()),
        is_error: false
    }));
}

#[test]
fn runs_cut_short_end_without_a_terminal_event() {
    for fixture in [
        format!("{CLAUDE}/claude-code-sigterm.jsonl"),
        format!("{QWEN}/qwen-sigterm-orphans.jsonl"),
        format!("{QWEN}/qwen-stdio-no-initialize-hangs.transcript.jsonl"),
    ] {
        let events = events_of(&fixture);
        assert!(matches!(events[0], AgentEvent::Init { .. }), "{fixture}");
        assert!(
            !events.iter().any(|e| matches!(
                e,
                AgentEvent::Done { .. }
                    | AgentEvent::Error { .. }
                    | AgentEvent::ApprovalRequired { .. }
            )),
            "{fixture}"
        );
    }
}

#[test]
fn the_pty_recording_parses_like_the_pipe_one() {
    let pty = events_of(&format!("{CLAUDE}/claude-code-under-pty.raw"));
    assert!(!pty.iter().any(|e| matches!(e, AgentEvent::Warning { .. })));
    assert_eq!(
        answer(&pty),
        "I'll run the command now.\n\nDone: the command printed hi"
    );
    assert!(matches!(
        pty.last(),
        Some(AgentEvent::Done {
            is_error: false,
            ..
        })
    ));
}

#[test]
fn noise_unknown_types_and_block_lists() {
    let mut p = one_shot();
    assert!(matches!(
        &parse(&mut p, "Warning: no stdin data received in 3s").0[0],
        AgentEvent::Warning { .. }
    ));
    assert!(matches!(
        &parse(&mut p, "[1,2]").0[0],
        AgentEvent::Warning { .. }
    ));
    assert!(parse(&mut p, r#"{"type":"rate_limit_event","x":1}"#)
        .0
        .is_empty());
    assert!(parse(
        &mut p,
        r#"{"type":"system","subtype":"status","status":"requesting"}"#
    )
    .0
    .is_empty());
    assert!(parse(&mut p, "  ").0.is_empty());
    let (events, _) = parse(
        &mut p,
        r#"{"message":{"content":[{"content":[{"type":"text","text":"a"},{"type":"image"}],"type":"tool_result","tool_use_id":"t1"}]},"type":"user"}"#,
    );
    assert_eq!(
        events,
        vec![AgentEvent::ToolResult {
            id: "t1".into(),
            output: Some("a\n[image]".into()),
            is_error: false
        }]
    );
}

#[test]
fn qwen_failures_carry_the_clis_error_text_and_kind() {
    for (fixture, text, kind) in [
        (
            "qwen-auth-401.jsonl",
            "[API Error: 401 Incorrect API key provided: sk-test.]",
            "auth",
        ),
        (
            "qwen-server-500.jsonl",
            "[API Error: 500 The server had an error]",
            "model",
        ),
    ] {
        let events = events_of(&format!("{QWEN}/{fixture}"));
        let (message, _) = last_error(&events);
        assert_eq!(message, text, "{fixture}");
        let updates = golden::updates(&events);
        let last = &updates.last().unwrap()["statusUpdate"];
        assert_eq!(last["status"]["state"], "TASK_STATE_FAILED", "{fixture}");
        assert_eq!(last["metadata"]["errorKind"], kind, "{fixture}");
        assert_eq!(
            last["status"]["message"]["parts"][0]["text"], text,
            "{fixture}"
        );
    }
}
