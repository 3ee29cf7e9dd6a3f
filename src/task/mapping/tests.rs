//! Tests of the parent module.

use super::*;
use crate::adapter::Usage;

fn states(updates: &[StreamResponse]) -> Vec<TaskState> {
    updates
        .iter()
        .filter_map(|u| match u {
            StreamResponse::StatusUpdate(s) => Some(s.status.state),
            _ => None,
        })
        .collect()
}

#[test]
fn a_normal_turn() {
    let mut m = TurnMapper::new("t", "c");
    assert_eq!(states(&m.started()), vec![TaskState::Working]);
    let init = m.on_event(AgentEvent::Init {
        session_id: Some("s1".into()),
        model: Some("m1".into()),
        cwd: None,
        tools: vec![],
    });
    match &init[0] {
        StreamResponse::StatusUpdate(u) => {
            assert_eq!(u.metadata.as_ref().unwrap()["sessionId"], "s1")
        }
        other => panic!("{other:?}"),
    }
    let a = m.on_event(AgentEvent::Text {
        text: "Hel".into(),
        delta: true,
    });
    let b = m.on_event(AgentEvent::Text {
        text: "lo".into(),
        delta: true,
    });
    match (&a[0], &b[0]) {
        (StreamResponse::ArtifactUpdate(x), StreamResponse::ArtifactUpdate(y)) => {
            assert!(!x.append);
            assert!(y.append);
            assert_eq!(x.artifact.artifact_id, ANSWER_ARTIFACT);
        }
        other => panic!("{other:?}"),
    }
    m.on_event(AgentEvent::Usage(Usage {
        input_tokens: Some(1),
        ..Usage::default()
    }));
    let done = m.on_event(AgentEvent::Done {
        result: None,
        is_error: false,
    });
    assert_eq!(states(&done), vec![TaskState::Completed]);
    match &done[0] {
        StreamResponse::ArtifactUpdate(r) => {
            assert_eq!(r.artifact.artifact_id, RESULT_ARTIFACT);
            assert_eq!(r.artifact.parts[0].text.as_deref(), Some("Hello"));
        }
        other => panic!("{other:?}"),
    }
    match &done[1] {
        StreamResponse::StatusUpdate(u) => {
            assert_eq!(u.metadata.as_ref().unwrap()["usage"]["inputTokens"], 1)
        }
        other => panic!("{other:?}"),
    }
    // Exactly one terminal state: the exit adds nothing.
    assert!(m
        .on_exit(ExitReason::Exited {
            code: Some(0),
            signal: None,
            stderr_tail: String::new()
        })
        .is_empty());
    assert!(m
        .on_event(AgentEvent::Error {
            message: "late".into(),
            kind: None
        })
        .is_empty());
}

#[test]
fn every_exit_path_gives_one_terminal_state() {
    let cases = [
        (
            ExitReason::Exited {
                code: Some(0),
                signal: None,
                stderr_tail: String::new(),
            },
            TaskState::Completed,
        ),
        (
            ExitReason::Exited {
                code: Some(2),
                signal: None,
                stderr_tail: "boom".into(),
            },
            TaskState::Failed,
        ),
        (
            ExitReason::Exited {
                code: None,
                signal: Some(6),
                stderr_tail: String::new(),
            },
            TaskState::Failed,
        ),
        (ExitReason::SpawnFailed("x".into()), TaskState::Failed),
        (ExitReason::IdleTimeout { secs: 1 }, TaskState::Failed),
        (ExitReason::HardTimeout { secs: 1 }, TaskState::Failed),
        (ExitReason::Canceled, TaskState::Canceled),
        (ExitReason::Shutdown, TaskState::Failed),
        (ExitReason::Restarted, TaskState::Failed),
        (ExitReason::HostLost("h1".into()), TaskState::Failed),
    ];
    for (reason, want) in cases {
        let mut m = TurnMapper::new("t", "c");
        m.started();
        let out = m.on_exit(reason.clone());
        assert_eq!(states(&out), vec![want], "{reason:?}");
        assert!(m.on_exit(reason).is_empty());
    }
}

#[test]
fn approval_goes_input_required_with_a_data_part() {
    let mut m = TurnMapper::new("t", "c");
    let out = m.on_event(AgentEvent::ApprovalRequired {
        id: "a1".into(),
        kind: "command".into(),
        tool: Some("Bash".into()),
        target: Some("rm -rf build".into()),
        detail: None,
        options: vec![],
    });
    assert_eq!(states(&out), vec![TaskState::InputRequired]);
    assert_eq!(m.pending_approval(), Some(("a1", "command")));
    match &out[0] {
        StreamResponse::StatusUpdate(u) => {
            let msg = u.status.message.as_ref().unwrap();
            assert_eq!(msg.parts[1].data.as_ref().unwrap()["approvalId"], "a1");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(states(&m.resumed("Approved")), vec![TaskState::Working]);
    assert_eq!(m.pending_approval(), None);
}

#[test]
fn own_artifacts_replace_the_result_artifact() {
    let mut m = TurnMapper::new("t", "c");
    m.started();
    let chunk = |text: &str, append, last_chunk| AgentEvent::Artifact {
        artifact_id: "a".into(),
        name: None,
        parts: vec![Part::text(text)],
        append,
        last_chunk,
    };
    let first = m.on_event(chunk("one ", false, false));
    let second = m.on_event(chunk("two", true, true));
    match (&first[0], &second[0]) {
        (StreamResponse::ArtifactUpdate(x), StreamResponse::ArtifactUpdate(y)) => {
            assert_eq!(x.artifact.artifact_id, "a");
            assert!(!x.append && !x.last_chunk);
            assert!(y.append && y.last_chunk);
            assert_eq!(y.artifact.parts[0].text.as_deref(), Some("two"));
        }
        other => panic!("{other:?}"),
    }
    let done = m.on_event(AgentEvent::Done {
        result: Some("Hello".into()),
        is_error: false,
    });
    assert_eq!(done.len(), 1, "no result artifact: {done:?}");
    assert_eq!(states(&done), vec![TaskState::Completed]);
}

#[test]
fn direct_messages_and_rejections_end_the_turn() {
    let mut m = TurnMapper::new("t", "c");
    m.started();
    let out = m.on_event(AgentEvent::Message {
        text: "Direct".into(),
    });
    assert_eq!(states(&out), vec![TaskState::Completed]);
    match &out[0] {
        StreamResponse::StatusUpdate(u) => {
            assert_eq!(u.metadata.as_ref().unwrap()[DIRECT_MESSAGE_KEY], true);
            assert_eq!(u.status.message.as_ref().unwrap().text(), "Direct");
        }
        other => panic!("{other:?}"),
    }
    let mut m = TurnMapper::new("t", "c");
    let out = m.on_event(AgentEvent::Rejected {
        message: "rejected".into(),
    });
    assert_eq!(states(&out), vec![TaskState::Rejected]);
    assert!(m.on_exit(ExitReason::Canceled).is_empty());
}

#[test]
fn tool_output_is_truncated() {
    let mut m = TurnMapper::new("t", "c");
    let out = m.on_event(AgentEvent::ToolResult {
        id: "1".into(),
        output: Some("x".repeat(10_000)),
        is_error: false,
    });
    match &out[0] {
        StreamResponse::StatusUpdate(u) => {
            let t = u.status.message.as_ref().unwrap().text();
            assert!(t.len() < 2100, "{}", t.len());
            assert!(t.contains("10000 bytes"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tool_trace_adds_typed_parts() {
    let parts = |out: &[StreamResponse]| match &out[0] {
        StreamResponse::StatusUpdate(u) => u.status.message.as_ref().unwrap().parts.clone(),
        other => panic!("{other:?}"),
    };
    // Off: thinking is dropped and tool messages are text only.
    let mut m = TurnMapper::new("t", "c");
    assert!(m
        .on_event(AgentEvent::Thinking { text: "hmm".into() })
        .is_empty());
    let plain = m.on_event(AgentEvent::ToolUse {
        id: "u1".into(),
        name: "Bash".into(),
        input: json!({"command": "ls"}),
    });
    assert_eq!(parts(&plain).len(), 1);
    // On.
    let mut m = TurnMapper::new("t", "c").with_tool_trace(true);
    let thought = parts(&m.on_event(AgentEvent::Thinking { text: "hmm".into() }));
    assert_eq!(thought[0].text.as_deref(), Some("hmm"));
    assert_eq!(thought[0].metadata.as_ref().unwrap()["thought"], true);
    let call = parts(&m.on_event(AgentEvent::ToolUse {
        id: "u1".into(),
        name: "Bash".into(),
        input: json!({"command": "ls"}),
    }));
    assert_eq!(call[1].metadata.as_ref().unwrap()["type"], "function_call");
    assert_eq!(
        call[1].data,
        Some(json!({"id": "u1", "name": "Bash", "args": {"command": "ls"}}))
    );
    let resp = parts(&m.on_event(AgentEvent::ToolResult {
        id: "u1".into(),
        output: Some("a.txt".into()),
        is_error: false,
    }));
    assert_eq!(
        resp[1].metadata.as_ref().unwrap()["type"],
        "function_response"
    );
    assert_eq!(
        resp[1].data,
        Some(json!({"id": "u1", "response": "a.txt", "isError": false}))
    );
}

#[test]
fn tool_results_never_have_an_empty_text() {
    let mut m = TurnMapper::new("t", "c");
    m.started();
    for (is_error, output, want) in [
        (true, Some(""), "Tool failed (it gave no reason)"),
        (true, Some(" \n"), "Tool failed (it gave no reason)"),
        (true, None, "Tool failed (it gave no reason)"),
        (false, Some(""), "Tool finished (no output)"),
        // Issue 37: Gemini CLI leaves the output out for some tools; agent-host does not
        // know that there was none.
        (false, None, "Tool finished"),
        (true, Some("denied"), "Tool failed: denied"),
        (false, Some("hi"), "Tool result: hi"),
    ] {
        let out = m.on_event(AgentEvent::ToolResult {
            id: "x".into(),
            output: output.map(str::to_string),
            is_error,
        });
        let v = serde_json::to_value(out.last().unwrap()).unwrap();
        assert_eq!(
            v["statusUpdate"]["status"]["message"]["parts"][0]["text"],
            want
        );
    }
}

/// Issue 15 item 10: a program that asks and then exits 0 without waiting did not finish its
/// turn: the task fails saying so, instead of `completed` "The agent finished without output".
#[test]
fn asking_then_exiting_zero_fails_honestly() {
    let mut m = TurnMapper::new("t", "c");
    m.started();
    m.on_event(AgentEvent::ApprovalRequired {
        id: "a-1".into(),
        kind: "command".into(),
        tool: Some("Bash".into()),
        target: Some("rm -rf build".into()),
        detail: None,
        options: Vec::new(),
    });
    assert_eq!(m.state(), TaskState::InputRequired);
    let out = m.on_exit(ExitReason::Exited {
        code: Some(0),
        signal: None,
        stderr_tail: String::new(),
    });
    match out.last() {
        Some(StreamResponse::StatusUpdate(u)) => {
            assert_eq!(u.status.state, TaskState::Failed);
            let text = u.status.message.as_ref().unwrap().text();
            assert!(text.contains("without waiting for the answer"), "{text}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_chunks_go_to_the_artifact_whole_and_the_kept_answer_is_capped() {
    let mut m = TurnMapper::new("t", "c");
    m.started();
    let chunk = "é".repeat(ANSWER_KEEP_MAX / 2 + 1);
    for _ in 0..2 {
        let out = m.on_event(AgentEvent::Text {
            text: chunk.clone(),
            delta: true,
        });
        let StreamResponse::ArtifactUpdate(u) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(u.artifact.parts[0].text.as_deref(), Some(chunk.as_str()));
    }
    // Ended without a result: the result is the first MiB of the answer (cut on a character).
    let out = m.on_exit(ExitReason::Exited {
        code: Some(0),
        signal: None,
        stderr_tail: String::new(),
    });
    let StreamResponse::ArtifactUpdate(result) = &out[0] else {
        panic!("{out:?}")
    };
    let text = result.artifact.parts[0].text.as_deref().unwrap();
    assert!(text.len() <= ANSWER_KEEP_MAX && text.len() > ANSWER_KEEP_MAX - 4);
    assert!(text.chars().all(|c| c == 'é'));
}
