use super::*;
use crate::adapter::wire::golden;

const FIXTURE: &str = "codex/0.169.0/codex-app-server-approval.transcript.jsonl";
const THREAD: &str = "01a2035e-b63a-7620-a73f-71a2494bf8f6";
const TURN: &str = "01a2035e-b65a-7f22-a8f9-3b9ed7aae4e3";

/// The parser configured as the recording's driver was (client info, thread parameters).
fn recorded_parser() -> CodexAppServerParser {
    let options: toml::Table = toml::from_str(
        r#"
        client_name = "a2a-probe"
        client_title = "A2A probe"
        client_version = "0.0.1"
        [thread_params]
        modelProvider = "fake"
        approvalPolicy = "on-request"
        sandbox = "read-only"
        "#,
    )
    .unwrap();
    CodexAppServerParser::new(&options)
}

fn recorded_turn() -> TurnStart<'static> {
    TurnStart {
        prompt: "create a file",
        session_id: None,
        resume: false,
        cwd: "/workspace/project",
        model: Some("fake-model"),
    }
}

fn started_parser() -> CodexAppServerParser {
    let mut p = recorded_parser();
    p.start(&recorded_turn());
    p
}

fn json_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn feed(p: &mut CodexAppServerParser, line: &str) -> (Vec<AgentEvent>, Vec<u8>) {
    let (mut out, mut reply) = (Vec::new(), Vec::new());
    p.parse_line(line, &mut out, &mut reply);
    (out, reply)
}

fn allow(id: &str, allow: bool, option: Option<&str>) -> Decision {
    Decision {
        message_id: None,
        id: id.into(),
        allow,
        option: option.map(str::to_string),
        message: None,
    }
}

/// The recorded approval request line.
fn approval_line() -> String {
    golden::stdout_lines(FIXTURE)
        .into_iter()
        .find(|l| l.contains("requestApproval"))
        .unwrap()
}

/// Replays the recording: what the parser writes (start, replies, the approval answer) must
/// be, message for message, what the driver wrote (`"dir":"in"`).
#[test]
fn handshake_and_answers_match_the_recorded_input() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(FIXTURE);
    let records: Vec<Value> = std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<Value> = records
        .iter()
        .filter(|r| r["dir"] == "in")
        .map(|r| r["msg"].clone())
        .collect();
    let mut p = recorded_parser();
    let mut written = json_lines(&p.start(&recorded_turn()));
    for r in records.iter().filter(|r| r["dir"] == "out") {
        let (events, reply) = feed(&mut p, &r["msg"].to_string());
        written.extend(json_lines(&reply));
        for e in events {
            if let AgentEvent::ApprovalRequired { id, .. } = e {
                written.extend(json_lines(
                    &p.encode_decision(&allow(&id, true, None)).unwrap(),
                ));
            }
        }
    }
    assert_eq!(written, expected);
    assert_eq!(
        expected.len(),
        5,
        "initialize, initialized, thread/start, turn/start, answer"
    );
}

#[test]
fn golden_app_server_session() {
    let mut p = started_parser();
    let events = golden::events(&mut p, FIXTURE);
    insta::assert_debug_snapshot!(events);
    golden::assert_updates!(golden::updates(&events));
}

#[test]
fn approval_request_becomes_approval_required() {
    let mut p = started_parser();
    let (events, reply) = feed(&mut p, &approval_line());
    assert!(reply.is_empty());
    assert_eq!(
        events,
        [AgentEvent::ApprovalRequired {
            id: "0".into(),
            kind: "command".into(),
            tool: None,
            target: Some("/bin/bash -lc 'touch fake_created.txt'".into()),
            detail: Some("Create fake_created.txt in the workspace?".into()),
            options: ["accept", "acceptWithExecpolicyAmendment", "cancel"]
                .iter()
                .map(|o| ApprovalOption {
                    id: o.to_string(),
                    label: o.to_string()
                })
                .collect(),
        }]
    );
}

#[test]
fn decisions_encode_as_json_rpc_responses() {
    let mut p = started_parser();
    feed(&mut p, &approval_line());
    assert_eq!(
        p.encode_decision(&allow("0", true, None)).unwrap(),
        b"{\"id\":0,\"result\":{\"decision\":\"accept\"}}\n"
    );
    // Answered once: the request is gone.
    assert!(p.encode_decision(&allow("0", true, None)).is_none());

    // Denied: the recorded request offers cancel, not decline.
    feed(&mut p, &approval_line());
    assert_eq!(
        p.encode_decision(&allow("0", false, None)).unwrap(),
        b"{\"id\":0,\"result\":{\"decision\":\"cancel\"}}\n"
    );
    // An option names one of the offered decisions, objects included.
    feed(&mut p, &approval_line());
    let bytes = p
        .encode_decision(&allow("0", true, Some("acceptWithExecpolicyAmendment")))
        .unwrap();
    assert_eq!(
        json_lines(&bytes),
        [
            json!({"id": 0, "result": {"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["touch", "fake_created.txt"]}}}})
        ]
    );
    // A request that offers no list (or offers decline) is declined.
    let no_list = approval_line().replace("\"availableDecisions\"", "\"otherDecisions\"");
    feed(&mut p, &no_list);
    assert_eq!(
        p.encode_decision(&allow("0", false, None)).unwrap(),
        b"{\"id\":0,\"result\":{\"decision\":\"decline\"}}\n"
    );
}

#[test]
fn file_change_approval_names_the_paths_of_its_item() {
    // No recording has a file change through the app-server: the item is the recorded
    // exec `file_change` item in the app-server's naming (fileChange, item/started), and the
    // request is the recorded command request with the file-change method.
    let mut p = started_parser();
    let (events, _) = feed(
        &mut p,
        r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"call_1","changes":[{"path":"/workspace/project/hello.txt","kind":"add"}],"status":"inProgress"}}}"#,
    );
    assert!(matches!(&events[0], AgentEvent::ToolUse { name, .. } if name == "fileChange"));
    let request = approval_line()
        .replace(
            "item/commandExecution/requestApproval",
            "item/fileChange/requestApproval",
        )
        .replace("call_07ee36cbb0964f5da00c8675", "call_1");
    let (events, _) = feed(&mut p, &request);
    assert!(
        matches!(&events[0], AgentEvent::ApprovalRequired { kind, target: Some(t), .. }
        if kind == "file-edit" && t == "/workspace/project/hello.txt")
    );
}

#[test]
fn other_server_requests_are_refused_at_once() {
    let mut p = started_parser();
    let line = approval_line().replace(
        "item/commandExecution/requestApproval",
        "item/tool/requestUserInput",
    );
    let (events, reply) = feed(&mut p, &line);
    assert!(matches!(&events[0], AgentEvent::Warning { .. }));
    assert_eq!(
        json_lines(&reply),
        [
            json!({"id": 0, "error": {"code": -32601, "message": "item/tool/requestUserInput is not supported by agent-host"}})
        ]
    );
}

#[test]
fn deltas_stream_the_answer_and_the_turn_ends_with_usage_and_done() {
    let events = golden::events(&mut started_parser(), FIXTURE);
    let answer: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Text { text, delta: true } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        answer,
        "I'll run the command now. \n\nDone: the command printed hi "
    );
    let n = events.len();
    assert_eq!(
        events[n - 2..],
        [
            AgentEvent::Usage(Usage {
                input_tokens: Some(200),
                output_tokens: Some(40),
                cost_usd: None,
                duration_ms: Some(516),
            }),
            AgentEvent::Done {
                result: Some("Done: the command printed hi".into()),
                is_error: false
            }
        ]
    );
    assert_eq!(
        events[0],
        AgentEvent::Warning {
            message: "Codex could not find bubblewrap on PATH. Install bubblewrap with your OS package manager. See the sandbox prerequisites: https://developers.openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the bundled bubblewrap in the meantime.".into()
        }
    );
    assert!(events.contains(&AgentEvent::Init {
        session_id: Some(THREAD.into()),
        model: Some("fake-model".into()),
        cwd: Some("/workspace/project".into()),
        tools: vec![],
    }));
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Init { .. }))
            .count(),
        1
    );
}

#[test]
fn usage_of_a_resumed_thread_is_this_turns_share() {
    // The recorded updates (total 120 then 240, last 120) as if 1000/300 came before.
    let mut p = started_parser();
    for line in golden::stdout_lines(FIXTURE) {
        let mut v: Value = serde_json::from_str(&line).unwrap();
        if let Some(total) = v.pointer_mut("/params/tokenUsage/total") {
            total["inputTokens"] = json!(total["inputTokens"].as_u64().unwrap() + 1000);
            total["outputTokens"] = json!(total["outputTokens"].as_u64().unwrap() + 300);
        }
        feed(&mut p, &v.to_string());
    }
    assert_eq!(p.usage_total.map(|t| t.0), Some(1200));
    assert_eq!(p.usage_base, Some((1000, 300)));
    let done = golden::stdout_lines(FIXTURE).pop().unwrap();
    let mut q = started_parser();
    q.usage_base = p.usage_base;
    q.usage_total = p.usage_total;
    let (events, _) = feed(&mut q, &done);
    assert!(
        matches!(&events[0], AgentEvent::Usage(u) if u.input_tokens == Some(200) && u.output_tokens == Some(40))
    );
}

#[test]
fn a_follow_up_resumes_the_thread() {
    let mut p = recorded_parser();
    let first = json_lines(&p.start(&TurnStart {
        session_id: Some(THREAD),
        resume: true,
        ..recorded_turn()
    }));
    assert_eq!(first[0]["method"], "initialize");
    let init_response = &golden::stdout_lines(FIXTURE)[0];
    let (_, reply) = feed(&mut p, init_response);
    let sent = json_lines(&reply);
    assert_eq!(sent[0], json!({"method": "initialized"}));
    assert_eq!(sent[1]["method"], "thread/resume");
    assert_eq!(sent[1]["params"]["threadId"], THREAD);
    assert_eq!(sent[1]["params"]["cwd"], "/workspace/project");
    // Codex refuses (an unknown thread, say): the turn fails.
    let (events, reply) = feed(
        &mut p,
        r#"{"id":2,"error":{"code":-32600,"message":"no rollout found"}}"#,
    );
    assert!(reply.is_empty());
    assert_eq!(
        events,
        [AgentEvent::Error {
            message: "codex app-server thread/resume failed: no rollout found".into(),
            kind: None
        }]
    );
}

#[test]
fn interrupt_names_the_running_turn() {
    let mut p = started_parser();
    assert!(p.interrupt().is_none(), "no thread yet");
    let lines = golden::stdout_lines(FIXTURE);
    let until_approval = lines.iter().take_while(|l| !l.contains("requestApproval"));
    for l in until_approval {
        feed(&mut p, l);
    }
    let bytes = p.interrupt().unwrap();
    assert_eq!(
        json_lines(&bytes),
        [
            json!({"id": 4, "method": "turn/interrupt", "params": {"threadId": THREAD, "turnId": TURN}})
        ]
    );
    // The turn ends as interrupted.
    let mut done: Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    done["params"]["turn"]["status"] = json!("interrupted");
    let (events, _) = feed(&mut p, &done.to_string());
    assert!(
        matches!(events.last(), Some(AgentEvent::Error { kind: Some(k), .. }) if k == "interrupted")
    );
    assert!(p.interrupt().is_none(), "the turn is over");
}

#[test]
fn noise_is_a_warning() {
    let mut p = started_parser();
    let (events, reply) = feed(&mut p, "not json");
    assert!(matches!(&events[0], AgentEvent::Warning { .. }));
    assert!(reply.is_empty());
    let (events, _) = feed(&mut p, r#"{"method":"brand/new","params":{}}"#);
    assert!(events.is_empty());
}

#[test]
fn a_denial_sent_as_cancel_ends_the_turn_without_failing_it() {
    let mut p = started_parser();
    feed(&mut p, &approval_line());
    p.encode_decision(&allow("0", false, None)).unwrap();
    let mut done: Value =
        serde_json::from_str(&golden::stdout_lines(FIXTURE).pop().unwrap()).unwrap();
    done["params"]["turn"]["status"] = json!("interrupted");
    let (events, _) = feed(&mut p, &done.to_string());
    assert!(
        matches!(events.last(), Some(AgentEvent::Done { is_error: false, result: Some(r) })
        if r.contains("declined"))
    );
}
