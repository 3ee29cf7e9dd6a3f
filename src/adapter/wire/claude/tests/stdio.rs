//! The two-way stdio mode: the lines the host writes, replayed against the recorded runs.

use serde_json::{json, Value};

use super::super::*;
use super::{events_of, one_shot, parse, transcript, two_way, CLAUDE, QWEN};
#[test]
fn stdio_permission_run_replays_byte_for_byte() {
    let fixture = format!("{CLAUDE}/claude-code-stdio-permission-prompt.transcript.jsonl");
    let mut p = two_way(false);
    let mut approvals = Vec::new();
    let mut answers = 0;
    let mut first_in = true;
    for (dir, msg) in transcript(&fixture) {
        match dir.as_str() {
            "out" => {
                let (events, reply) = parse(&mut p, &msg.to_string());
                assert!(reply.is_empty());
                approvals.extend(
                    events
                        .into_iter()
                        .filter(|e| matches!(e, AgentEvent::ApprovalRequired { .. })),
                );
            }
            "in" if first_in => {
                first_in = false;
                let bytes = p.start(&TurnStart {
                    prompt: "create a file",
                    ..TurnStart::default()
                });
                assert_eq!(
                    String::from_utf8(bytes.clone()).unwrap(),
                    "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"create a file\"},\"parent_tool_use_id\":null,\"session_id\":\"\"}\n"
                );
                assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), msg);
            }
            "in" if msg["type"] == "control_response" => {
                let response = &msg["response"]["response"];
                let decision = Decision {
                    message_id: None,
                    id: msg["response"]["request_id"].as_str().unwrap().to_string(),
                    allow: response["behavior"] == "allow",
                    option: None,
                    message: response["message"].as_str().map(str::to_string),
                };
                let bytes = p.encode_decision(&decision).expect("a pending request");
                assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), msg);
                let expected = if decision.allow {
                    "{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"8e75824b-4862-4132-9733-e755a9adaa19\",\"response\":{\"behavior\":\"allow\",\"updatedInput\":{\"command\":\"touch fake_created.txt\",\"description\":\"Print hi\"}}}}\n"
                } else {
                    "{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"792664f7-8c63-4c58-a688-c27c1ae01e2a\",\"response\":{\"behavior\":\"deny\",\"message\":\"The host user denied this command.\"}}}\n"
                };
                assert_eq!(String::from_utf8(bytes).unwrap(), expected);
                answers += 1;
            }
            _ => {}
        }
    }
    assert_eq!(answers, 2);
    assert_eq!(
        approvals[0],
        AgentEvent::ApprovalRequired {
            id: "8e75824b-4862-4132-9733-e755a9adaa19".into(),
            kind: "command".into(),
            tool: Some("Bash".into()),
            target: Some("touch fake_created.txt".into()),
            detail: Some("Print hi".into()),
            options: vec![
                ApprovalOption {
                    id: "allow".into(),
                    label: "Allow".into()
                },
                ApprovalOption {
                    id: "deny".into(),
                    label: "Deny".into()
                },
            ],
        }
    );
    assert_eq!(approvals.len(), 2);
    // Answered requests cannot be answered twice.
    let again = Decision {
        message_id: None,
        id: "8e75824b-4862-4132-9733-e755a9adaa19".into(),
        allow: true,
        option: None,
        message: None,
    };
    assert_eq!(p.encode_decision(&again), None);
}

#[test]
fn the_denial_of_the_second_turn_fails_the_tool_and_the_turn_still_completes() {
    let events = events_of(&format!(
        "{CLAUDE}/claude-code-stdio-permission-prompt.transcript.jsonl"
    ));
    assert!(events.contains(&AgentEvent::ToolResult {
        id: "toolu_7195b58795e64d9e813d4da4".into(),
        output: Some("The host user denied this command.".into()),
        is_error: true,
    }));
    let dones = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::Done {
                    is_error: false,
                    ..
                }
            )
        })
        .count();
    assert_eq!(dones, 2, "two turns in one process");
    let inits = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::Init { .. }))
        .count();
    assert_eq!(inits, 2, "system/init starts every turn");
}

#[test]
fn interrupt_is_the_recorded_control_request() {
    let fixture = format!("{CLAUDE}/claude-code-stdio-interrupt.transcript.jsonl");
    let recorded = transcript(&fixture)
        .into_iter()
        .find(|(dir, m)| dir == "in" && m["request"]["subtype"] == "interrupt")
        .unwrap()
        .1;
    let bytes = two_way(false).interrupt().unwrap();
    assert_eq!(
        String::from_utf8(bytes.clone()).unwrap(),
        "{\"type\":\"control_request\",\"request_id\":\"interrupt-1\",\"request\":{\"subtype\":\"interrupt\"}}\n"
    );
    assert_eq!(serde_json::from_slice::<Value>(&bytes).unwrap(), recorded);
    // One-shot mode has nothing to write.
    assert_eq!(one_shot().interrupt(), None);
}

#[test]
fn qwen_gets_initialize_first_and_its_approval_answered() {
    let fixture = format!("{QWEN}/qwen-stdio-permission-prompt.transcript.jsonl");
    let run = transcript(&fixture);
    let mut p = two_way(true);
    let opening = p.start(&TurnStart {
        prompt: "create a file",
        ..TurnStart::default()
    });
    let lines: Vec<Value> = String::from_utf8(opening)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let recorded_in: Vec<&Value> = run
        .iter()
        .filter(|(d, _)| d == "in")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(&lines[0], recorded_in[0], "initialize");
    assert_eq!(&lines[1], recorded_in[1], "the prompt");
    let mut approval = None;
    for (dir, msg) in &run {
        if dir == "out" {
            let (events, _) = parse(&mut p, &msg.to_string());
            approval = approval.or(events
                .into_iter()
                .find(|e| matches!(e, AgentEvent::ApprovalRequired { .. })));
        }
        if approval.is_some() {
            break; // answered below, as the recorded driver did at this point
        }
    }
    assert_eq!(
        approval,
        Some(AgentEvent::ApprovalRequired {
            id: "d6dd2c21-76e3-4823-b216-1cee122521ac".into(),
            kind: "command".into(),
            tool: Some("run_shell_command".into()),
            target: Some("touch fake_created.txt".into()),
            detail: None,
            options: vec![
                ApprovalOption {
                    id: "allow".into(),
                    label: "Allow Command".into()
                },
                ApprovalOption {
                    id: "deny".into(),
                    label: "Deny".into()
                },
            ],
        })
    );
    let bytes = p
        .encode_decision(&Decision {
            message_id: None,
            id: "d6dd2c21-76e3-4823-b216-1cee122521ac".into(),
            allow: true,
            option: None,
            message: None,
        })
        .unwrap();
    assert_eq!(
        &serde_json::from_slice::<Value>(&bytes).unwrap(),
        recorded_in[2]
    );
}

#[test]
fn one_shot_mode_writes_nothing() {
    let mut p = one_shot();
    assert!(p
        .start(&TurnStart {
            prompt: "hi",
            ..TurnStart::default()
        })
        .is_empty());
    let decision = Decision {
        message_id: None,
        id: "x".into(),
        allow: true,
        option: None,
        message: None,
    };
    assert_eq!(p.encode_decision(&decision), None);
}

#[test]
fn other_control_requests_get_an_error_answer() {
    let mut p = two_way(false);
    let (events, reply) = parse(
        &mut p,
        r#"{"type":"control_request","request_id":"r9","request":{"subtype":"hook_callback"}}"#,
    );
    assert!(matches!(&events[0], AgentEvent::Warning { .. }));
    let v: Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(
        v,
        json!({"type":"control_response","response":{"subtype":"error","request_id":"r9",
            "error":"agent-host does not handle control requests of type 'hook_callback'"}})
    );
}

#[test]
fn a_withdrawn_request_cannot_be_answered() {
    let mut p = two_way(false);
    let (events, _) = parse(
        &mut p,
        r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"file_path":"/workspace/project/a.txt"},"blocked_path":null}}"#,
    );
    assert!(
        matches!(&events[0], AgentEvent::ApprovalRequired { kind, target: Some(t), .. }
        if kind == "file-edit" && t == "/workspace/project/a.txt")
    );
    let (events, _) = parse(
        &mut p,
        r#"{"type":"control_cancel_request","request_id":"r1"}"#,
    );
    assert!(matches!(&events[0], AgentEvent::Warning { .. }));
    let decision = Decision {
        message_id: None,
        id: "r1".into(),
        allow: false,
        option: None,
        message: None,
    };
    assert_eq!(p.encode_decision(&decision), None);
}
