use super::*;
use crate::adapter::wire::golden;
use crate::adapter::Registry;

fn adapter(id: &str) -> AdapterSpec {
    Registry::builtin().unwrap().get(id).unwrap().clone()
}

fn spec_with(options: &str) -> AdapterSpec {
    let mut spec = adapter("generic");
    spec.wire_options = toml::from_str(options).unwrap();
    spec
}

fn parse(p: &mut TextParser, line: &str) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    p.parse_line(line, &mut out, &mut Vec::new());
    out
}

#[test]
fn golden_aider_text() {
    let mut p = TextParser::new(&adapter("aider"));
    let events = golden::events(&mut p, "aider/0.86.2/aider-text.txt");
    assert_eq!(
        events,
        vec![AgentEvent::Text {
            text: "Fake side answer \n".into(),
            delta: true
        }],
        "the banner, the price-map failure and the token line are skipped"
    );
    golden::assert_updates!(golden::updates(&events));
}

#[test]
fn golden_aider_auth_error_fails_the_turn() {
    let mut p = TextParser::new(&adapter("aider"));
    let events = golden::events(&mut p, "aider/0.86.2/aider-auth-401.txt");
    assert!(
        matches!(&events[0], AgentEvent::Error { kind: Some(k), message } if k == "auth" && message.starts_with("litellm.AuthenticationError")),
        "{events:?}"
    );
    insta::assert_debug_snapshot!(events);
}

#[test]
fn lines_are_text_with_their_newline() {
    let mut p = TextParser::new(&spec_with(""));
    assert_eq!(
        parse(&mut p, "hello"),
        vec![AgentEvent::Text {
            text: "hello\n".into(),
            delta: true
        }]
    );
    assert!(parse(&mut p, "   ").is_empty());
}

#[test]
fn a_prompt_line_is_an_approval_answered_with_the_configured_bytes() {
    let mut p = TextParser::new(&adapter("generic"));
    for (i, line) in [
        "Delete build/? [y/N] ",
        "Continue (y/n)?",
        "Overwrite [Y/n]:",
    ]
    .iter()
    .enumerate()
    {
        let ev = parse(&mut p, line);
        assert!(
            matches!(&ev[..], [AgentEvent::ApprovalRequired { id, kind, detail: Some(d), .. }]
                if kind == "other" && *id == format!("prompt-{}", i + 1) && d == line.trim()),
            "{line}: {ev:?}"
        );
    }
    assert!(matches!(
        &parse(&mut p, "y/n is a fraction")[..],
        [AgentEvent::Text { .. }]
    ));
    let d = |allow| Decision {
        message_id: None,
        id: "prompt-1".into(),
        allow,
        option: None,
        message: None,
    };
    assert_eq!(p.encode_decision(&d(true)).unwrap(), b"y\n");
    assert_eq!(p.encode_decision(&d(false)).unwrap(), b"n\n");

    let mut custom = TextParser::new(&spec_with(
        "approval_pattern = 'Proceed\\?'\napproval_response_yes = \"yes\\r\"\napproval_response_no = \"no\\r\"\n",
    ));
    assert!(matches!(
        &parse(&mut custom, "Proceed?")[..],
        [AgentEvent::ApprovalRequired { .. }]
    ));
    assert_eq!(custom.encode_decision(&d(true)).unwrap(), b"yes\r");
    assert_eq!(custom.encode_decision(&d(false)).unwrap(), b"no\r");
}

#[test]
fn aider_questions_are_approvals() {
    let mut p = TextParser::new(&adapter("aider"));
    let ev = parse(&mut p, "Create new file? (Y)es/(N)o [Yes]: ");
    assert!(
        matches!(&ev[..], [AgentEvent::ApprovalRequired { .. }]),
        "{ev:?}"
    );
}

#[test]
fn without_a_pattern_nothing_is_asked_or_answered() {
    let mut p = TextParser::new(&spec_with(""));
    assert!(matches!(
        &parse(&mut p, "Continue? [y/N]")[..],
        [AgentEvent::Text { .. }]
    ));
    assert!(p
        .encode_decision(&Decision {
            message_id: None,
            id: "x".into(),
            allow: true,
            option: None,
            message: None
        })
        .is_none());
}

#[test]
fn invalid_options_are_rejected_at_load_time() {
    assert!(validate(&spec_with("approval_pattern = '('"))
        .unwrap_err()
        .to_string()
        .contains("approval_pattern"));
    assert!(validate(&spec_with("aproval_pattern = 'x'"))
        .unwrap_err()
        .to_string()
        .contains("aproval_pattern"));
    assert!(validate(&spec_with("error_patterns = [{ pattern = '[' }]")).is_err());
    let mut p = TextParser::new(&spec_with("skip_pattern = '('"));
    assert!(
        matches!(&parse(&mut p, "x")[..], [AgentEvent::Error { kind: Some(k), .. }] if k == "config")
    );
    assert!(parse(&mut p, "x").is_empty());
}

/// A pty program that fails prints its error on the terminal (stderr is merged into stdout):
/// the failure message carries its last lines, and `errorKind` comes from them. Recorded
/// aider 401 output, run through the generic adapter (no error patterns) and a failing exit.
#[test]
fn a_failing_pty_program_reports_its_last_lines() {
    use crate::task::{ExitReason, TurnMapper};
    let mut p = TextParser::new(&adapter("generic"));
    let events = golden::events(&mut p, "aider/0.86.2/aider-auth-401.txt");
    let mut m = TurnMapper::new("t", "c");
    m.started();
    for e in events {
        m.on_event(e);
    }
    let out = m.on_exit(ExitReason::Exited {
        code: Some(1),
        signal: None,
        stderr_tail: String::new(),
    });
    let last = serde_json::to_value(out.last().unwrap()).unwrap();
    let status = &last["statusUpdate"];
    assert_eq!(status["status"]["state"], "TASK_STATE_FAILED");
    let text = status["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.starts_with("The agent exited with code 1 before finishing its turn: ")
            && text.contains("litellm.AuthenticationError")
            && text.ends_with("Check your API key."),
        "{text}"
    );
    assert_eq!(status["metadata"]["errorKind"], "auth");
    assert_eq!(status["metadata"]["exitCode"], 1);
}

/// The lines the runner hands over for a pty recording: split at newlines, and a line without
/// its newline delivered where the CLI went quiet (the byte offsets in `<name>.quiet.json`,
/// recorded with the run: there aider waited for an answer).
fn pty_lines(name: &str) -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts/aider/0.86.2");
    let raw = std::fs::read(dir.join(format!("{name}.raw"))).unwrap();
    let quiet: Vec<usize> = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{name}.quiet.json"))).unwrap(),
    )
    .unwrap();
    let mut lines = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut deliver = |bytes: &mut Vec<u8>| {
        let l = crate::runner::clean_line(bytes);
        if !l.is_empty() {
            lines.push(l);
        }
        bytes.clear();
    };
    for (i, b) in raw.iter().enumerate() {
        if quiet.contains(&i) && !pending.is_empty() {
            deliver(&mut pending);
        }
        if *b == b'\n' {
            deliver(&mut pending);
        } else {
            pending.push(*b);
        }
    }
    deliver(&mut pending);
    lines
}

/// aider's first-run questions, recorded on a pty and answered once each: each is one
/// question, the redraw with the typed answer is not a second one, and (slow variant) neither
/// is the redraw of the still-open question after aider's terminal warning.
#[test]
fn golden_aider_first_run_questions_are_asked_once_each() {
    for (name, answers) in [
        ("aider-first-run", [true, true]),
        ("aider-first-run-slow", [true, false]),
    ] {
        let mut p = TextParser::new(&adapter("aider"));
        let mut events = Vec::new();
        let mut answers = answers.iter();
        for line in pty_lines(name) {
            let mut out = Vec::new();
            p.parse_line(&line, &mut out, &mut Vec::new());
            for e in &out {
                if let AgentEvent::ApprovalRequired { id, .. } = e {
                    let allow = *answers
                        .next()
                        .expect("more questions than recorded answers");
                    let bytes = p.encode_decision(&Decision {
                        message_id: None,
                        id: id.clone(),
                        allow,
                        option: None,
                        message: None,
                    });
                    assert_eq!(bytes.unwrap(), if allow { b"y\n" } else { b"n\n" });
                }
            }
            events.extend(out);
        }
        assert!(
            answers.next().is_none(),
            "{name}: a recorded answer had no question"
        );
        let questions: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ApprovalRequired { id, detail, .. } => {
                    assert!(id.starts_with("prompt-"));
                    detail.as_deref()
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            questions,
            vec![
                "No git repo found, create one to track aider's changes (recommended)? (Y)es/(N)o [Yes]:",
                "Would you like to see what's new in this version? (Y)es/(N)o [Yes]:",
            ],
            "{name}: {events:?}"
        );
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            !text.contains("[Yes]"),
            "{name}: a redraw became text: {text}"
        );
        assert!(text.ends_with("Fake side answer \n"), "{name}: {text}");
        insta::assert_debug_snapshot!(name, events);
    }
}

/// Through agent-host's pty, aider 0.86.2 redrew the answered question twice (after the
/// keystroke and after Enter) with only cursor moves between, so the runner handed over one
/// line holding both redraws (seen in the real-CLI test, tests/integration/real_cli_aider.rs):
/// still the redraw, not text.
#[test]
fn a_question_redrawn_twice_on_one_line_is_not_text() {
    let q =
        "No git repo found, create one to track aider's changes (recommended)? (Y)es/(N)o [Yes]:";
    let mut p = TextParser::new(&adapter("aider"));
    let asked = parse(&mut p, &format!("{q} "));
    let [AgentEvent::ApprovalRequired { id, .. }] = &asked[..] else {
        panic!("{asked:?}");
    };
    let decision = Decision {
        message_id: None,
        id: id.clone(),
        allow: true,
        option: None,
        message: None,
    };
    assert_eq!(p.encode_decision(&decision).unwrap(), b"y\n");
    assert!(parse(&mut p, &format!("{q} y{q} y")).is_empty());
    assert!(matches!(
        &parse(&mut p, "Added .aider* to .gitignore")[..],
        [AgentEvent::Text { .. }]
    ));
    // Another answer than the one typed is text (the line is not the question's redraw).
    let mut p = TextParser::new(&adapter("aider"));
    parse(&mut p, q);
    p.encode_decision(&decision).unwrap();
    assert!(matches!(
        &parse(&mut p, &format!("{q} y{q} n"))[..],
        [AgentEvent::Text { .. }]
    ));
}

/// Without the end anchor, the redraw `... [Yes]: y` would be a second question: a pattern
/// that matches mid-line is not a question.
#[test]
fn a_question_must_end_its_line() {
    let mut p = TextParser::new(&spec_with("approval_pattern = '\\(Y\\)es/\\(N\\)o'\n"));
    assert!(matches!(
        &parse(&mut p, "Create new file? (Y)es/(N)o [Yes]: y")[..],
        [AgentEvent::Text { .. }]
    ));
    assert!(matches!(
        &parse(&mut p, "Create new file? (Y)es/(N)o")[..],
        [AgentEvent::ApprovalRequired { .. }]
    ));
    let mut g = TextParser::new(&adapter("generic"));
    assert!(matches!(
        &parse(&mut g, "Overwrite? [y/N] ")[..],
        [AgentEvent::ApprovalRequired { .. }]
    ));
    let d = Decision {
        message_id: None,
        id: "prompt-1".into(),
        allow: true,
        option: None,
        message: None,
    };
    g.encode_decision(&d);
    // The terminal's echo of the answer and the redraw are dropped; what follows is text.
    assert!(parse(&mut g, "y").is_empty());
    assert!(parse(&mut g, "Overwrite? [y/N] y").is_empty());
    assert!(matches!(
        &parse(&mut g, "done")[..],
        [AgentEvent::Text { .. }]
    ));
    // The same question asked again later is a new question.
    assert!(
        matches!(&parse(&mut g, "Overwrite? [y/N] ")[..], [AgentEvent::ApprovalRequired { id, .. }] if id == "prompt-2")
    );
}

/// aider 0.86.2 against a model API answering every request with HTTP 500 (the scripted
/// model server's `ServerError` body): litellm names the error `InternalServerError`, one
/// word, and the task's `errorKind` is `model`, as for every other adapter's 500.
#[test]
fn golden_aider_http_500_is_a_model_error() {
    use crate::task::{ExitReason, TurnMapper};
    let mut p = TextParser::new(&adapter("aider"));
    let events = golden::events(&mut p, "aider/0.86.2/aider-server-error-500.txt");
    let mut m = TurnMapper::new("t", "c");
    m.started();
    let mut out = Vec::new();
    for e in events {
        out.extend(m.on_event(e));
    }
    out.extend(m.on_exit(ExitReason::Exited {
        code: Some(1),
        signal: None,
        stderr_tail: String::new(),
    }));
    let failed = out
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .find(|v| v["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED")
        .expect("a failed status");
    let status = &failed["statusUpdate"];
    let text = status["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        text.contains("litellm.InternalServerError") && text.contains("Scripted"),
        "{text}"
    );
    assert_eq!(status["metadata"]["errorKind"], "model", "{failed}");
}
