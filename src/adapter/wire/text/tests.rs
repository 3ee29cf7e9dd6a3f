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
    insta::assert_json_snapshot!(golden::updates(&events));
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
        .contains("approval_pattern"));
    assert!(validate(&spec_with("aproval_pattern = 'x'"))
        .unwrap_err()
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
