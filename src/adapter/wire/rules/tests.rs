use super::*;
use crate::adapter::wire::golden;

const CLAUDE_RULES: &str = include_str!("../../../../adapters/examples/claude-code-rules.toml");

fn claude_spec() -> AdapterSpec {
    AdapterSpec::from_toml("claude-code-rules.toml", CLAUDE_RULES).unwrap()
}

fn spec_with(options: &str) -> AdapterSpec {
    let text = format!(
        "id = \"x\"\nname = \"X\"\ndescription = \"d\"\nwire = \"jsonl-rules\"\n[wire_options]\n{options}"
    );
    let mut spec: AdapterSpec = toml::from_str(&text).unwrap();
    spec.wire = FORMAT.into();
    spec
}

fn parse(p: &mut RulesParser, line: &str) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    p.parse_line(line, &mut out, &mut Vec::new());
    out
}

#[test]
fn golden_claude_tool_use_through_rules() {
    let mut p = RulesParser::new(&claude_spec());
    let events = golden::events(&mut p, "claude-code/2.1.330/claude-code-tool-use.jsonl");
    insta::assert_debug_snapshot!(events);
    golden::assert_updates!(golden::updates(&events));
}

#[test]
fn golden_claude_auth_401_through_rules() {
    let mut p = RulesParser::new(&claude_spec());
    let events = golden::events(&mut p, "claude-code/2.1.330/claude-code-auth-401.jsonl");
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Error { kind: Some(k), message }) if k == "auth" && message.contains("Invalid API key")
    ));
    assert!(!events
        .iter()
        .any(|e| matches!(e, AgentEvent::Text { .. } | AgentEvent::Done { .. })));
    insta::assert_debug_snapshot!(events);
}

#[test]
fn each_element_gets_the_first_matching_item_in_order() {
    let mut p = RulesParser::new(&claude_spec());
    let ev = parse(
        &mut p,
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}},{"type":"image"},{"type":"text","text":"b"}]}}"#,
    );
    assert_eq!(ev.len(), 3);
    assert!(matches!(&ev[0], AgentEvent::Text { text, delta: false } if text == "a"));
    assert!(matches!(&ev[1], AgentEvent::ToolUse { name, .. } if name == "Bash"));
    assert!(matches!(&ev[2], AgentEvent::Text { text, .. } if text == "b"));
}

#[test]
fn tool_output_blocks_are_joined() {
    let mut p = RulesParser::new(&claude_spec());
    let ev = parse(
        &mut p,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}],"is_error":true}]}}"#,
    );
    assert_eq!(
        ev,
        vec![AgentEvent::ToolResult {
            id: "t1".into(),
            output: Some("x\ny".into()),
            is_error: true
        }]
    );
}

#[test]
fn first_match_wins_unless_continue() {
    let mut p = RulesParser::new(&spec_with(
        r#"
[[wire_options.rules]]
match = { "/t" = "r" }
event = "usage"
input_tokens = "/n"
continue = true
[[wire_options.rules]]
match = { "/t" = "r" }
event = "done"
result = "/x"
[[wire_options.rules]]
match = { "/t" = "r" }
event = "error"
"#,
    ));
    let ev = parse(&mut p, r#"{"x":"ok","t":"r","n":5}"#);
    assert_eq!(ev.len(), 2);
    assert!(matches!(&ev[0], AgentEvent::Usage(u) if u.input_tokens == Some(5)));
    assert!(matches!(&ev[1], AgentEvent::Done { result: Some(r), is_error: false } if r == "ok"));
    assert!(parse(&mut p, r#"{"t":"other"}"#).is_empty());
}

#[test]
fn match_values_compare_as_json() {
    let mut p = RulesParser::new(&spec_with(
        r#"
[[wire_options.rules]]
match = { "/ok" = true, "/n" = 3, "/a/0" = "x" }
event = "text"
text = "/t"
"#,
    ));
    assert_eq!(
        parse(&mut p, r#"{"ok":true,"n":3,"a":["x"],"t":"hi"}"#).len(),
        1
    );
    assert!(parse(&mut p, r#"{"ok":"true","n":3,"a":["x"],"t":"hi"}"#).is_empty());
}

#[test]
fn non_json_lines_follow_the_setting() {
    let rule = "[[wire_options.rules]]\nmatch = {}\nevent = \"warning\"\n";
    let mut warn = RulesParser::new(&spec_with(rule));
    assert!(matches!(
        &parse(&mut warn, "noise")[..],
        [AgentEvent::Warning { .. }]
    ));
    let mut text = RulesParser::new(&spec_with(&format!("non_json = \"text\"\n{rule}")));
    assert!(
        matches!(&parse(&mut text, "noise")[..], [AgentEvent::Text { text, .. }] if text == "noise\n")
    );
    let mut ignore = RulesParser::new(&spec_with(&format!("non_json = \"ignore\"\n{rule}")));
    assert!(parse(&mut ignore, "noise").is_empty());
}

#[test]
fn invalid_rules_are_rejected_at_load_time_with_the_reason() {
    let cases = [
        ("", "rules is empty"),
        (
            "[[wire_options.rules]]\nevent = \"nope\"\n",
            "unknown event 'nope'",
        ),
        (
            "[[wire_options.rules]]\nevent = \"text\"\nsession_id = \"/s\"\n",
            "has no field 'session_id'",
        ),
        (
            "[[wire_options.rules]]\nevent = \"text\"\ntext = \"t\"\n",
            "not a JSON pointer",
        ),
        (
            "[[wire_options.rules]]\nmatch = { \"type\" = \"x\" }\nevent = \"text\"\n",
            "not a JSON pointer",
        ),
        ("[[wire_options.rules]]\nmatch = {}\n", "'event' is missing"),
        (
            "[[wire_options.rules]]\nevent = \"text\"\ntxet = \"/t\"\n",
            "txet",
        ),
        ("[[wire_options.rules]]\neach = \"/c\"\n", "needs 'items'"),
        (
            "bogus = 1\n[[wire_options.rules]]\nevent = \"text\"\n",
            "bogus",
        ),
    ];
    for (options, want) in cases {
        let err = validate(&spec_with(options)).unwrap_err().to_string();
        assert!(err.contains(want), "{options:?}: {err}");
    }
    // The registry calls it: a bad adapter file fails to load.
    let err = AdapterSpec::from_toml(
        "bad.toml",
        "id = \"x\"\nname = \"X\"\ndescription = \"d\"\nwire = \"jsonl-rules\"\n[[wire_options.rules]]\nevent = \"nope\"\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("bad.toml") && err.contains("unknown event"),
        "{err}"
    );
}

#[test]
fn rule_errors_are_typed_and_name_the_rule() {
    let err = validate(&spec_with(
        "[[wire_options.rules]]\nevent = \"text\"\n[[wire_options.rules]]\neach = \"/c\"\n",
    ))
    .unwrap_err();
    assert!(
        matches!(&err, OptionsError::Rule { at, problem: RuleProblem::EachWithoutItems } if at == "wire_options.rules[1]"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "wire_options.rules[1]: 'each' needs 'items'"
    );
    assert!(matches!(
        validate(&spec_with("")),
        Err(OptionsError::NoRules)
    ));
    // A TOML shape error keeps the parser's error as its source.
    let err = validate(&spec_with("rules = 3\n")).unwrap_err();
    assert!(matches!(err, OptionsError::Shape(_)), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
}

#[test]
fn a_parser_built_from_invalid_rules_fails_the_turn_once() {
    let mut p = RulesParser::new(&spec_with(""));
    assert!(matches!(
        &parse(&mut p, "{}")[..],
        [AgentEvent::Error { kind: Some(k), .. }] if k == "config"
    ));
    assert!(parse(&mut p, "{}").is_empty());
}

#[test]
fn answers_use_the_templates_with_the_id_escaped() {
    let mut p = RulesParser::new(&spec_with(
        r#"answer_allow = '{"id":"{id}","ok":true}'
[[wire_options.rules]]
match = { "/type" = "ask" }
event = "approval"
id = "/id"
tool = "/tool"
set = { kind = "command" }
"#,
    ));
    let ev = parse(&mut p, r#"{"type":"ask","id":"a\"1","tool":"Bash"}"#);
    assert!(
        matches!(&ev[..], [AgentEvent::ApprovalRequired { kind, tool: Some(t), .. }] if kind == "command" && t == "Bash")
    );
    let d = |allow| Decision {
        message_id: None,
        id: "a\"1".into(),
        allow,
        option: None,
        message: None,
    };
    let bytes = p.encode_decision(&d(true)).unwrap();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["id"], "a\"1");
    assert!(bytes.ends_with(b"\n"));
    assert!(p.encode_decision(&d(false)).is_none(), "no deny template");
}
