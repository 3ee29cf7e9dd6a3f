use super::*;
use crate::adapter::wire::golden;
use crate::adapter::wire::Decision;

const DIR: &str = "codex/0.169.0";

fn events_of(fixture: &str) -> Vec<AgentEvent> {
    golden::events(&mut CodexExecParser::new(), &format!("{DIR}/{fixture}"))
}

fn usage_of(events: &[AgentEvent]) -> Vec<(Option<u64>, Option<u64>)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage(u) => Some((u.input_tokens, u.output_tokens)),
            _ => None,
        })
        .collect()
}

fn session_of(events: &[AgentEvent]) -> Option<String> {
    events.iter().find_map(|e| match e {
        AgentEvent::Init { session_id, .. } => session_id.clone(),
        _ => None,
    })
}

/// Every recorded `codex exec --json` stdout, as events and as A2A updates.
#[test]
fn golden_exec_runs() {
    let fixtures = [
        "codex-exec-tool-use.jsonl",
        "codex-exec-file-change-web-search.jsonl",
        "codex-exec-resume-1.jsonl",
        "codex-exec-resume-2.jsonl",
        "codex-exec-resume-3-last.jsonl",
        "codex-exec-sandbox-workspace-write.jsonl",
        "codex-exec-sandbox-read-only.jsonl",
        "codex-exec-escalation-rejected.jsonl",
        "codex-exec-auth-401.jsonl",
        "codex-exec-missing-env-key.jsonl",
        "codex-exec-server-500.jsonl",
        "codex-exec-sigterm.jsonl",
        "codex-exec-default-provider-offline.jsonl",
        "codex-exec-openai-base-url-websocket-fallback.jsonl",
        "codex-openai-base-url-env-ignored.jsonl",
        "codex-exec-under-pty.raw",
    ];
    for fixture in fixtures {
        let events = events_of(fixture);
        let name = fixture.trim_end_matches(".jsonl").trim_end_matches(".raw");
        insta::assert_debug_snapshot!(format!("{name}-events"), events);
        golden::assert_updates!(format!("{name}-updates"), golden::updates(&events));
    }
}

#[test]
fn thread_started_is_init_with_the_thread_id() {
    let events = events_of("codex-exec-tool-use.jsonl");
    assert_eq!(
        events[0],
        AgentEvent::Init {
            session_id: Some("01a2034e-6b20-7d42-97dd-ca820453e938".into()),
            model: None,
            cwd: None,
            tools: vec![],
        }
    );
    // Model and working directory are what the host passed.
    let mut p = CodexExecParser::new();
    assert!(p
        .start(&TurnStart {
            prompt: "say hi",
            model: Some("fake-model"),
            cwd: "/workspace/project",
            ..TurnStart::default()
        })
        .is_empty());
    let mut out = Vec::new();
    p.parse_line(
        r#"{"type":"thread.started","thread_id":"t1"}"#,
        &mut out,
        &mut Vec::new(),
    );
    assert!(
        matches!(&out[0], AgentEvent::Init { model: Some(m), cwd: Some(c), .. }
        if m == "fake-model" && c == "/workspace/project")
    );
}

#[test]
fn command_execution_pairs_use_and_result() {
    let events = events_of("codex-exec-tool-use.jsonl");
    let uses: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::ToolUse { .. } | AgentEvent::ToolResult { .. }
            )
        })
        .collect();
    assert_eq!(
        uses,
        [
            &AgentEvent::ToolUse {
                id: "item_3".into(),
                name: "command_execution".into(),
                input: json!({"command": "/bin/bash -lc 'echo hi'"}),
            },
            &AgentEvent::ToolResult {
                id: "item_3".into(),
                output: Some("hi\n".into()),
                is_error: false,
            },
        ]
    );
    // A failed command: its exit code is the error.
    let mut out = Vec::new();
    CodexExecParser::new().parse_line(
        r#"{"type":"item.completed","item":{"id":"item_9","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}"#,
        &mut out,
        &mut Vec::new(),
    );
    assert_eq!(
        out[1],
        AgentEvent::ToolResult {
            id: "item_9".into(),
            output: Some("exit code 1".into()),
            is_error: true
        }
    );
}

#[test]
fn the_answer_is_the_last_agent_message() {
    let events = events_of("codex-exec-tool-use.jsonl");
    let texts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Text { text, delta: false } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        texts,
        ["I'll run the command now.", "Done: the command printed hi"]
    );
    assert_eq!(
        events.last(),
        Some(&AgentEvent::Done {
            result: Some("Done: the command printed hi".into()),
            is_error: false
        })
    );
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::Thinking { text } if text.starts_with("**Planning**"))));
}

#[test]
fn web_search_with_a_duplicate_id_key_parses() {
    let line = golden::stdout_lines(&format!("{DIR}/codex-exec-file-change-web-search.jsonl"))
        .into_iter()
        .find(|l| l.contains("web_search"))
        .unwrap();
    // The recorded line really repeats the key: a strict struct refuses it.
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Item {
        id: String,
    }
    #[derive(serde::Deserialize, Debug)]
    #[allow(dead_code)]
    struct Line {
        item: Item,
    }
    let strict = serde_json::from_str::<Line>(&line).unwrap_err().to_string();
    assert!(strict.contains("duplicate field `id`"), "{strict}");

    let events = events_of("codex-exec-file-change-web-search.jsonl");
    let search: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(e, AgentEvent::ToolUse { name, .. } if name == "web_search")
                || matches!(e, AgentEvent::ToolResult { id, .. } if id.starts_with("ws_"))
        })
        .collect();
    assert_eq!(
        search,
        [
            &AgentEvent::ToolUse {
                id: "ws_6e9b1819f84b4b0e89037493".into(),
                name: "web_search".into(),
                input: json!({"query": "fake query", "action": {"type": "search", "query": "fake query"}}),
            },
            &AgentEvent::ToolResult {
                id: "ws_6e9b1819f84b4b0e89037493".into(),
                output: Some("fake query".into()),
                is_error: false
            },
        ]
    );
    assert!(events.contains(&AgentEvent::ToolResult {
        id: "item_4".into(),
        output: Some("add /workspace/project/hello.txt".into()),
        is_error: false
    }));
}

#[test]
fn usage_is_cumulative_over_a_resumed_thread() {
    let first = events_of("codex-exec-resume-1.jsonl");
    let second = events_of("codex-exec-resume-2.jsonl");
    let third = events_of("codex-exec-resume-3-last.jsonl");
    assert_eq!(session_of(&first), session_of(&second));
    assert_eq!(session_of(&first), session_of(&third));
    // Thread totals, as Codex reports them: the resumed turns include the earlier ones.
    assert_eq!(usage_of(&first), [(Some(200), Some(40))]);
    assert_eq!(usage_of(&second), [(Some(400), Some(80))]);
    assert_eq!(usage_of(&third), [(Some(500), Some(100))]);
}

#[test]
fn failures_end_the_turn_with_a_kind() {
    let events = events_of("codex-exec-auth-401.jsonl");
    let retries = events
        .iter()
        .filter(
            |e| matches!(e, AgentEvent::Warning { message } if message.starts_with("Reconnecting")),
        )
        .count();
    assert_eq!(retries, 5);
    assert_eq!(
        events.last(),
        Some(&AgentEvent::Error {
            message: "unexpected status 401 Unauthorized: Incorrect API key provided: sk-test., url: http://127.0.0.1:39057/v1/responses".into(),
            kind: Some("auth".into()),
        })
    );
    let missing = events_of("codex-exec-missing-env-key.jsonl");
    assert!(matches!(missing.last(), Some(AgentEvent::Error { kind: Some(k), .. }) if k == "auth"));
    let server = events_of("codex-exec-server-500.jsonl");
    assert!(matches!(
        server.last(),
        Some(AgentEvent::Error { kind: None, .. })
    ));
    // Killed mid-turn, or retrying forever: no terminal event (the host's exit/timeouts decide).
    for f in [
        "codex-exec-sigterm.jsonl",
        "codex-exec-default-provider-offline.jsonl",
    ] {
        assert!(!events_of(f)
            .iter()
            .any(|e| matches!(e, AgentEvent::Done { .. } | AgentEvent::Error { .. })));
    }
}

#[test]
fn under_a_pty_the_stderr_line_is_a_warning_and_the_rest_parses() {
    let pty = events_of("codex-exec-under-pty.raw");
    assert!(
        matches!(&pty[0], AgentEvent::Warning { message } if message.contains("WARNING: proceeding"))
    );
    let pipes = events_of("codex-exec-tool-use.jsonl");
    // Same run apart from the thread id.
    assert_eq!(pty.len(), pipes.len() + 1);
    assert_eq!(pty[2..], pipes[1..]);
}

#[test]
fn nothing_to_answer_in_exec() {
    let mut p = CodexExecParser::new();
    assert!(p
        .encode_decision(&Decision {
            message_id: None,
            id: "x".into(),
            allow: true,
            option: None,
            message: None
        })
        .is_none());
    assert!(p.interrupt().is_none());
    let mut out = Vec::new();
    p.parse_line(r#"{"type":"brand.new","x":1}"#, &mut out, &mut Vec::new());
    p.parse_line("", &mut out, &mut Vec::new());
    assert!(out.is_empty());
}

fn launch(id: &str, force: bool) -> crate::engine::Launch {
    let r = crate::adapter::Registry::builtin().unwrap();
    let adapter = r.get(id).unwrap().clone();
    crate::engine::Launch {
        prompt_via: adapter.prompt,
        adapter,
        program: std::path::PathBuf::from("/usr/bin/codex"),
        extra_args: vec![],
        cwd: std::path::PathBuf::from("/workspace/project"),
        env: vec![],
        model: Some("fake-model".into()),
        force,
        max_line_bytes: 1024,
        timeout: std::time::Duration::from_secs(1),
        idle_timeout: std::time::Duration::from_secs(1),
        cancel_grace: std::time::Duration::from_secs(1),
        sandbox: None,
    }
}

/// The recorded command shapes: `codex exec --json --skip-git-repo-check -m M [-c …]
/// --dangerously-bypass-approvals-and-sandbox PROMPT`, and `… resume <thread_id> PROMPT`;
/// `--` before the prompt (clap ends options there).
#[test]
fn exec_adapter_arguments_follow_the_recorded_commands() {
    use crate::engine::SessionArgs;
    use crate::runner::StdinMode;
    let l = launch("codex-exec", true);
    let first = l.spawn_spec("say hi", &SessionArgs::None);
    assert_eq!(
        first.args,
        [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "-c",
            "sandbox_mode=\"workspace-write\"",
            "-m",
            "fake-model",
            "--dangerously-bypass-approvals-and-sandbox",
            "--",
            "say hi"
        ]
    );
    // stdin closed: codex exec reads it to EOF before starting.
    assert!(matches!(first.stdin, StdinMode::Null));
    assert!(l.can_resume() && !l.host_chooses_session());
    let next = l.spawn_spec("and again", &SessionArgs::Resume("01a2034f".into()));
    assert_eq!(
        next.args[5..],
        [
            "-m",
            "fake-model",
            "resume",
            "01a2034f",
            "--dangerously-bypass-approvals-and-sandbox",
            "--",
            "and again"
        ]
    );
}

#[test]
fn app_server_adapter_speaks_the_protocol_on_an_open_stdin() {
    use crate::engine::SessionArgs;
    use crate::runner::StdinMode;
    let l = launch("codex", false);
    assert!(l.adapter.detect);
    let spec = l.spawn_spec("create a file", &SessionArgs::None);
    assert_eq!(spec.args[0], "app-server");
    assert!(!spec.args.iter().any(|a| a == "create a file"));
    assert!(spec
        .args
        .contains(&"approval_policy=\"on-request\"".to_string()));
    assert!(matches!(
        spec.stdin,
        StdinMode::Write {
            keep_open: true,
            ..
        }
    ));
    // AGENT_FORCE: the later `-c` wins.
    let forced = launch("codex", true).spawn_spec("x", &SessionArgs::None);
    let policies: Vec<_> = forced
        .args
        .iter()
        .filter(|a| a.starts_with("approval_policy="))
        .collect();
    assert_eq!(
        policies,
        [
            "approval_policy=\"on-request\"",
            "approval_policy=\"never\""
        ]
    );
    assert!(crate::adapter::wire::parser_for(&l.adapter).is_some());
}
