use super::*;
use crate::adapter::wire::golden;

const GEMINI: &str = "gemini/0.61.0/gemini-acp-permission.transcript.jsonl";
const QWEN: &str = "qwen/0.24.4/qwen-acp-permission.transcript.jsonl";
const OPENCODE: &str = "opencode/1.18.33/opencode-acp-permission.transcript.jsonl";

/// The turn the recordings ran: drive_acp.py's prompt, in the placeholder working directory.
fn recorded_turn() -> TurnStart<'static> {
    TurnStart {
        prompt: "create a file",
        session_id: None,
        resume: false,
        cwd: "/workspace/project",
        model: None,
    }
}

fn records(fixture: &str) -> Vec<Value> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(fixture);
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn messages(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Replays a recorded ACP run: the parser starts the turn, reads every line the CLI printed,
/// and answers each permission request with the option the recording chose. Returns the
/// events and every message the host wrote, in order.
fn replay(fixture: &str) -> (Vec<AgentEvent>, Vec<Value>) {
    let recs = records(fixture);
    let mut p = AcpParser::new();
    let mut sent = messages(&p.start(&recorded_turn()));
    let mut events = Vec::new();
    for r in recs.iter().filter(|r| r["dir"] == "out") {
        let mut out = Vec::new();
        let mut reply = Vec::new();
        p.parse_line(&r["msg"].to_string(), &mut out, &mut reply);
        sent.extend(messages(&reply));
        for ev in &out {
            if let AgentEvent::ApprovalRequired { id, .. } = ev {
                let answer = recs
                    .iter()
                    .find(|a| a["dir"] == "in" && id_string(&a["msg"]["id"]) == *id)
                    .unwrap();
                let option = answer["msg"]["result"]["outcome"]["optionId"]
                    .as_str()
                    .map(str::to_string);
                let bytes = p
                    .encode_decision(&Decision {
                        message_id: None,
                        id: id.clone(),
                        allow: true,
                        option,
                        message: None,
                    })
                    .unwrap();
                sent.extend(messages(&bytes));
            }
        }
        events.extend(out);
    }
    (events, sent)
}

/// Every message the host wrote matches what the recording's driver wrote, in order (error
/// responses by id and code: their message text is ours).
fn assert_same_conversation(fixture: &str) {
    let recorded: Vec<Value> = records(fixture)
        .into_iter()
        .filter(|r| r["dir"] == "in")
        .map(|r| r["msg"].clone())
        .collect();
    let (_, sent) = replay(fixture);
    assert_eq!(sent.len(), recorded.len(), "{sent:#?}");
    for (ours, theirs) in sent.iter().zip(&recorded) {
        if theirs.get("error").is_some() {
            assert_eq!(ours["id"], theirs["id"]);
            assert_eq!(ours["error"]["code"], theirs["error"]["code"]);
        } else {
            assert_eq!(ours, theirs);
        }
    }
}

#[test]
fn handshake_and_answers_match_the_gemini_recording() {
    assert_same_conversation(GEMINI);
}

#[test]
fn handshake_and_answers_match_the_qwen_recording() {
    assert_same_conversation(QWEN);
}

#[test]
fn handshake_and_answers_match_the_opencode_recording() {
    assert_same_conversation(OPENCODE);
}

#[test]
fn the_handshake_goes_initialize_then_session_new_then_prompt() {
    let (_, sent) = replay(GEMINI);
    let methods: Vec<&str> = sent.iter().filter_map(|m| m["method"].as_str()).collect();
    assert_eq!(methods, ["initialize", "session/new", "session/prompt"]);
    assert_eq!(
        sent[0]["params"]["clientCapabilities"]["fs"]["readTextFile"],
        false
    );
    assert_eq!(
        sent[2]["params"]["sessionId"],
        "2a162ec2-de82-4c8e-81ea-bc770b51269d"
    );
}

#[test]
fn golden_gemini_acp_permission() {
    let (events, _) = replay(GEMINI);
    insta::assert_debug_snapshot!(events);
    golden::assert_updates!(golden::updates(&events));
}

#[test]
fn golden_qwen_acp_permission() {
    let (events, _) = replay(QWEN);
    insta::assert_debug_snapshot!(events);
    golden::assert_updates!(golden::updates(&events));
}

#[test]
fn golden_opencode_acp_permission() {
    let (events, _) = replay(OPENCODE);
    insta::assert_debug_snapshot!(events);
    golden::assert_updates!(golden::updates(&events));
}

#[test]
fn golden_helper_lines_parse_the_same_without_a_handshake() {
    // golden::events feeds the out lines without start(): responses to requests the parser
    // never sent are ignored, so only the request and the notifications count.
    let events = golden::events(&mut AcpParser::new(), OPENCODE);
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::ApprovalRequired { .. })));
    assert!(!events.iter().any(|e| matches!(e, AgentEvent::Done { .. })));
}

/// A parser past the handshake of the Gemini recording (session `s1`).
fn prompting() -> AcpParser {
    let mut p = AcpParser::new();
    p.start(&recorded_turn());
    let mut out = Vec::new();
    let mut reply = Vec::new();
    p.parse_line(
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#,
        &mut out,
        &mut reply,
    );
    p.parse_line(
        r#"{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}"#,
        &mut out,
        &mut reply,
    );
    p
}

fn parse(p: &mut AcpParser, line: &str) -> (Vec<AgentEvent>, Vec<Value>) {
    let mut out = Vec::new();
    let mut reply = Vec::new();
    p.parse_line(line, &mut out, &mut reply);
    (out, messages(&reply))
}

const GEMINI_PERMISSION: &str = r#"{"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": {"sessionId": "2a162ec2-de82-4c8e-81ea-bc770b51269d", "options": [{"optionId": "proceed_always", "name": "Allow for this session", "kind": "allow_always"}, {"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"}, {"optionId": "cancel", "name": "Reject", "kind": "reject_once"}], "toolCall": {"toolCallId": "run_shell_command__run_shell_command_1795353058573_0", "status": "pending", "title": "touch fake_created.txt", "content": [{"type": "content", "content": {"type": "text", "text": "[current working directory /workspace/project] (Print hi)"}}], "locations": [], "kind": "execute"}}}"#;

#[test]
fn a_permission_request_is_an_approval_with_the_offered_options() {
    let mut p = prompting();
    let (events, reply) = parse(&mut p, GEMINI_PERMISSION);
    assert!(reply.is_empty(), "the request waits for the user");
    let Some(AgentEvent::ApprovalRequired {
        id,
        kind,
        target,
        detail,
        options,
        ..
    }) = events.last()
    else {
        panic!("{events:?}")
    };
    assert_eq!(id, "0");
    assert_eq!(kind, "command");
    assert_eq!(target.as_deref(), Some("touch fake_created.txt"));
    assert_eq!(
        detail.as_deref(),
        Some("[current working directory /workspace/project] (Print hi)")
    );
    let opts: Vec<(&str, &str)> = options
        .iter()
        .map(|o| (o.id.as_str(), o.label.as_str()))
        .collect();
    assert_eq!(
        opts,
        [
            ("proceed_always", "Allow for this session"),
            ("proceed_once", "Allow"),
            ("cancel", "Reject")
        ]
    );
}

fn decide(p: &mut AcpParser, allow: bool, option: Option<&str>) -> Option<Value> {
    p.encode_decision(&Decision {
        message_id: None,
        id: "0".into(),
        allow,
        option: option.map(str::to_string),
        message: None,
    })
    .map(|b| {
        assert!(b.ends_with(b"\n"));
        messages(&b).remove(0)
    })
}

#[test]
fn decisions_pick_the_offered_option_of_the_right_kind() {
    let mut p = prompting();
    parse(&mut p, GEMINI_PERMISSION);
    assert_eq!(
        decide(&mut p, true, None).unwrap(),
        json!({"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}})
    );
    assert!(decide(&mut p, true, None).is_none(), "answered once only");

    parse(&mut p, GEMINI_PERMISSION);
    let deny = decide(&mut p, false, None).unwrap();
    assert_eq!(deny["result"]["outcome"]["optionId"], "cancel");

    parse(&mut p, GEMINI_PERMISSION);
    let chosen = decide(&mut p, true, Some("proceed_always")).unwrap();
    assert_eq!(chosen["result"]["outcome"]["optionId"], "proceed_always");

    parse(&mut p, GEMINI_PERMISSION);
    let not_offered = decide(&mut p, false, Some("nope")).unwrap();
    assert_eq!(not_offered["result"]["outcome"]["optionId"], "cancel");
}

#[test]
fn a_request_without_a_reject_option_is_answered_cancelled_on_deny() {
    let mut p = prompting();
    parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":"r1","method":"session/request_permission","params":{"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}],"toolCall":{"toolCallId":"t","kind":"edit","title":"edit a.rs"}}}"#,
    );
    let bytes = p
        .encode_decision(&Decision {
            message_id: None,
            id: "r1".into(),
            allow: false,
            option: None,
            message: None,
        })
        .unwrap();
    assert_eq!(
        messages(&bytes)[0],
        json!({"jsonrpc":"2.0","id":"r1","result":{"outcome":{"outcome":"cancelled"}}})
    );
}

#[test]
fn unknown_agent_requests_get_method_not_found_at_once() {
    let mut p = prompting();
    let (events, reply) = parse(
        &mut p,
        r#"{"jsonrpc": "2.0", "id": 1, "method": "craft/drainMidTurnQueue", "params": {"sessionId": "s1", "todoStopGuardWatchQueuedPrompt": true}}"#,
    );
    assert!(events.is_empty());
    assert_eq!(reply.len(), 1);
    assert_eq!(reply[0]["id"], 1);
    assert_eq!(reply[0]["error"]["code"], -32601);
    // The file system is not offered, but an agent asking anyway is answered too.
    let (_, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":7,"method":"fs/read_text_file","params":{"path":"/etc/passwd"}}"#,
    );
    assert_eq!(reply[0]["error"]["code"], -32601);
}

#[test]
fn stop_reasons_end_the_turn() {
    let mut p = prompting();
    parse(
        &mut p,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}"#,
    );
    let (events, _) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":100,"outputTokens":20,"totalTokens":120}}}"#,
    );
    assert_eq!(
        events,
        vec![
            AgentEvent::Usage(Usage {
                input_tokens: Some(100),
                output_tokens: Some(20),
                ..Usage::default()
            }),
            AgentEvent::Done {
                result: Some("hi".into()),
                is_error: false
            }
        ]
    );
    for (reason, kind) in [
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("cancelled", "canceled"),
    ] {
        let mut p = prompting();
        let (events, _) = parse(
            &mut p,
            &format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"stopReason":"{reason}"}}}}"#),
        );
        assert!(
            matches!(&events[..], [AgentEvent::Error { kind: Some(k), .. }] if k == kind),
            "{reason}: {events:?}"
        );
    }
}

#[test]
fn json_rpc_errors_are_errors_and_auth_is_recognized() {
    let mut p = AcpParser::new();
    p.start(&recorded_turn());
    let (events, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}"#,
    );
    assert!(events.is_empty());
    assert_eq!(reply[0]["method"], "session/new");
    let (events, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"Authentication required"}}"#,
    );
    assert!(reply.is_empty());
    assert!(matches!(
        &events[..],
        [AgentEvent::Error { kind: Some(k), message }] if k == "auth" && message.contains("session/new")
    ));
    let mut p = prompting();
    let (events, _) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}}"#,
    );
    assert!(matches!(
        &events[..],
        [AgentEvent::Error { kind: None, .. }]
    ));
    // Gemini's reason for an internal error is in data.details.
    let mut p = AcpParser::new();
    p.start(&TurnStart {
        session_id: Some("s-old"),
        resume: true,
        ..recorded_turn()
    });
    parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#,
    );
    let (events, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603,"message":"Internal error","data":{"details":"No previous sessions found for this project."}}}"#,
    );
    // A failed load is not the end of the turn: a new session replaces it.
    assert!(
        matches!(&events[..], [AgentEvent::Warning { message }] if message == "session/load failed: Internal error (No previous sessions found for this project.); starting a new session"),
        "{events:?}"
    );
    assert_eq!(reply[0]["method"], "session/new");
}

#[test]
fn a_resumed_turn_loads_the_session_and_skips_the_replayed_history() {
    let mut p = AcpParser::new();
    p.start(&TurnStart {
        session_id: Some("s-old"),
        resume: true,
        ..recorded_turn()
    });
    let (_, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}"#,
    );
    assert_eq!(
        reply[0],
        json!({"jsonrpc":"2.0","id":2,"method":"session/load","params":{"sessionId":"s-old","cwd":"/workspace/project","mcpServers":[]}})
    );
    let (events, _) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-old","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"old answer"}}}}"#,
    );
    assert!(events.is_empty(), "history replayed by session/load");
    let (events, reply) = parse(&mut p, r#"{"jsonrpc":"2.0","id":2,"result":null}"#);
    assert!(matches!(&events[..], [AgentEvent::Init { session_id: Some(s), .. }] if s == "s-old"));
    // Gemini CLI 0.61.0 replays the history after answering session/load: the prompt waits
    // for the answer to a sync request, which comes after the replay.
    assert_eq!(
        reply[0],
        json!({"jsonrpc":"2.0","id":3,"method":"_agent_host/sync","params":{}})
    );
    let (events, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s-old","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"replayed late"}}}}"#,
    );
    assert!(
        events.is_empty() && reply.is_empty(),
        "replayed after the load answer"
    );
    let (events, reply) = parse(
        &mut p,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}"#,
    );
    assert!(events.is_empty(), "the sync answer is no error of the turn");
    assert_eq!(reply[0]["method"], "session/prompt");
    assert_eq!(reply[0]["params"]["sessionId"], "s-old");

    // An agent that cannot load sessions gets a new one.
    let mut p = AcpParser::new();
    p.start(&TurnStart {
        session_id: Some("s-old"),
        resume: true,
        ..recorded_turn()
    });
    let (events, reply) = parse(&mut p, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert!(matches!(&events[..], [AgentEvent::Warning { .. }]));
    assert_eq!(reply[0]["method"], "session/new");
}

#[test]
fn interrupt_cancels_the_session_once_prompting() {
    let mut p = AcpParser::new();
    p.start(&recorded_turn());
    assert!(p.interrupt().is_none(), "no session yet");
    let mut p = prompting();
    let bytes = p.interrupt().unwrap();
    assert_eq!(
        messages(&bytes)[0],
        json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}})
    );
}

#[test]
fn noise_is_a_warning_and_unknown_notifications_are_ignored() {
    let mut p = prompting();
    assert!(matches!(
        &parse(&mut p, "Ripgrep is not available.").0[..],
        [AgentEvent::Warning { .. }]
    ));
    assert!(parse(
        &mut p,
        r#"{"jsonrpc":"2.0","method":"something/new","params":{}}"#
    )
    .0
    .is_empty());
    assert!(parse(
        &mut p,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"update":{"sessionUpdate":"plan","entries":[]}}}"#
    )
    .0
    .is_empty());
    assert!(parse(&mut p, "  ").0.is_empty());
}

/// One naming rule: the ACP kind names the tool (with the command or file in its input and
/// the approval's target), whatever the agent's title says: opencode titles the call `bash`,
/// qwen names it `run_shell_command`, Gemini only asks, and titles a call it runs without
/// asking by its command.
#[test]
fn tools_are_named_by_their_kind() {
    for fixture in [GEMINI, QWEN, OPENCODE] {
        let (events, _) = replay(fixture);
        let mut names = Vec::new();
        for e in &events {
            match e {
                AgentEvent::ToolUse { name, .. } => names.push(name.clone()),
                AgentEvent::ApprovalRequired {
                    tool: Some(t),
                    target: Some(c),
                    ..
                } => {
                    assert!(c.contains("touch fake_created.txt"), "{fixture}: {c}");
                    names.push(t.clone());
                }
                _ => {}
            }
        }
        assert!(!names.is_empty(), "{fixture}");
        assert!(names.iter().all(|n| n == "execute"), "{fixture}: {names:?}");
    }
}

/// A follow-up whose `session/load` fails (Gemini CLI 0.61.0 within the minute of the first
/// turn answers "Internal error" with details "No previous sessions found for this project.")
/// goes on in a new session that is told the earlier turns, and says so.
#[test]
fn a_failed_session_load_falls_back_to_a_new_session_told_the_history() {
    let mut p = AcpParser::new();
    p.set_history("User: my name is Ada\n\nAgent: Hello Ada");
    let first = messages(&p.start(&TurnStart {
        prompt: "what is my name?",
        session_id: Some("old-session"),
        resume: true,
        cwd: "/workspace/project",
        model: None,
    }));
    assert_eq!(first[0]["method"], "initialize");
    let feed = |p: &mut AcpParser, v: Value| {
        let (mut out, mut reply) = (Vec::new(), Vec::new());
        p.parse_line(&v.to_string(), &mut out, &mut reply);
        (out, messages(&reply))
    };
    let (_, sent) = feed(
        &mut p,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": true}}}),
    );
    assert_eq!(sent[0]["method"], "session/load");
    assert_eq!(sent[0]["params"]["sessionId"], "old-session");
    let (out, sent) = feed(
        &mut p,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Internal error",
               "data": {"details": "No previous sessions found for this project."}}}),
    );
    assert!(
        out.iter().all(|e| !matches!(e, AgentEvent::Error { .. })),
        "{out:?}"
    );
    assert_eq!(sent[0]["method"], "session/new");
    let (out, sent) = feed(
        &mut p,
        json!({"jsonrpc": "2.0", "id": 3, "result": {"sessionId": "new-session"}}),
    );
    assert!(matches!(&out[0], AgentEvent::Init { session_id: Some(s), .. } if s == "new-session"));
    assert!(
        matches!(&out[1], AgentEvent::SessionReplaced { reason, history_told: true }
        if reason.contains("No previous sessions found"))
    );
    assert_eq!(sent[0]["method"], "session/prompt");
    assert_eq!(sent[0]["params"]["sessionId"], "new-session");
    let text = sent[0]["params"]["prompt"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("User: my name is Ada") && text.ends_with("what is my name?"),
        "{text}"
    );
    // The task says so in its metadata.
    let mut turn = out.clone();
    turn.push(AgentEvent::Done {
        result: Some("Ada".into()),
        is_error: false,
    });
    let meta = golden::updates(&turn)
        .iter()
        .find_map(|u| {
            u["statusUpdate"]["metadata"]["sessionReplaced"]
                .as_object()
                .cloned()
        })
        .expect("sessionReplaced in the task's metadata");
    assert_eq!(meta["historyTold"], true);
    assert!(meta["reason"]
        .as_str()
        .unwrap()
        .contains("No previous sessions found"));
}
