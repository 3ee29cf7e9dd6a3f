//! fake-agent run in-process.
use super::*;

/// Runs the program in-process: (stdout lines without their `\n`, stderr, end).
fn run_with(argv: &[&str], stdin: &str) -> (Vec<String>, String, End) {
    let parsed = parse_args(argv.iter().map(|s| s.to_string()));
    let Ok(Command::Run(args)) = parsed else {
        panic!("{parsed:?}")
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let (delay, started) = (Duration::ZERO, false);
    let mut out = Out {
        stdout: &mut stdout,
        stderr: &mut stderr,
        delay,
        started,
    };
    let end = run(&args, &mut out, &mut stdin.as_bytes()).expect("run");
    let text = String::from_utf8_lossy(&stdout).into_owned();
    let lines = text
        .split_inclusive('\n')
        .map(|l| l.trim_end_matches('\n').to_string());
    (
        lines.collect(),
        String::from_utf8_lossy(&stderr).into_owned(),
        end,
    )
}

/// Every stdout line that is JSON, and the last one.
fn values(lines: &[String]) -> (Vec<Value>, Value) {
    let v: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let last = v.last().cloned().unwrap_or_default();
    (v, last)
}

#[test]
fn default_session_is_valid_jsonl_ending_in_done() {
    let (lines, _, end) = run_with(&["--session-id", "s-1", "look around"], "");
    let (v, done) = values(&lines);
    assert_eq!(
        (end, v.len()),
        (End::Exit(0), lines.len()),
        "all lines are JSON"
    );
    let types: Vec<&Value> = v.iter().map(|v| &v["type"]).collect();
    assert_eq!(types[..4], ["init", "thinking", "tool_use", "tool_result"]);
    assert_eq!(
        (&v[0]["session_id"], &v[0]["model"]),
        (&json!("s-1"), &json!("fake-model-1"))
    );
    let texts = v.iter().filter(|v| v["type"] == "text");
    let text: String = texts.clone().filter_map(|v| v["text"].as_str()).collect();
    assert!(texts.count() >= 3 && v.iter().any(|v| v["type"] == "usage"));
    assert_eq!(
        (&done["type"], &done["result"]),
        (&json!("done"), &json!(text))
    );
}

#[test]
fn prompt_from_stdin_and_resume() {
    let (lines, _, _) = run_with(&["--resume", "old-7"], "echo this please\n");
    let (v, done) = values(&lines);
    assert_eq!(v[0]["session_id"], "old-7");
    assert_eq!(done["result"], "echo this please\n");
    let (_, done) = values(&run_with(&["--resume", "old-7", "hello"], "").0);
    assert!(
        done["result"]
            .to_string()
            .contains("Resuming session old-7"),
        "{done}"
    );
}

#[test]
fn approval_waits_for_stdin_and_continues_on_allow() {
    let allow = r#"{"type":"approval_response","id":"appr-1","decision":"allow","option":"allow"}"#;
    let (lines, _, end) = run_with(&["needs approval"], &format!("{allow}\n"));
    let (v, done) = values(&lines);
    let ask = v
        .iter()
        .position(|v| v["type"] == "approval_required")
        .expect("asked");
    assert_eq!(
        (&v[ask]["kind"], &v[ask]["id"]),
        (&json!("command"), &json!("appr-1"))
    );
    assert_eq!(
        (&v[ask + 1]["type"], &v[ask + 1]["is_error"]),
        (&json!("tool_result"), &json!(false))
    );
    assert_eq!((end, &done["type"]), (End::Exit(0), &json!("done")));
}

#[test]
fn approval_deny_and_eof() {
    let deny = r#"{"type":"approval_response","id":"appr-1","decision":"deny","message":"no"}"#;
    let (lines, _, end) = run_with(&["approval"], &format!("{deny}\n"));
    let (v, done) = values(&lines);
    assert_eq!(end, End::Exit(0));
    assert!(v
        .iter()
        .any(|v| v["output"] == "denied by user" && v["is_error"] == true));
    assert!(done["result"].to_string().contains("denied"), "{done}");
    let (lines, _, end) = run_with(&["approval"], "");
    assert_eq!(
        (end, &values(&lines).1["type"]),
        (End::Exit(2), &json!("error"))
    );
}

#[test]
fn question_answer_reaches_the_result() {
    let (lines, _, _) = run_with(
        &["a question"],
        "{\"type\":\"input\",\"text\":\"main.rs\"}\n",
    );
    let (v, done) = values(&lines);
    assert!(v
        .iter()
        .any(|v| v["kind"] == "question" && v["detail"] == "Which file?"));
    assert!(done["result"].to_string().contains("main.rs"), "{done}");
}

#[test]
fn asks_puts_more_questions_one_after_the_other() {
    let (lines, _, end) = run_with(&["question asks=2"], "a\nb\nc\n");
    let (v, done) = values(&lines);
    let asked: Vec<&str> = v
        .iter()
        .filter(|v| v["type"] == "approval_required")
        .filter_map(|v| v["id"].as_str())
        .collect();
    assert_eq!(asked, ["q-1", "ask-1", "ask-2"]);
    assert_eq!((end, &done["type"]), (End::Exit(0), &json!("done")));
    // An answer missing: the agent says stdin closed.
    let (_, _, end) = run_with(&["question asks=2"], "a\nb\n");
    assert_eq!(end, End::Exit(2));
}

#[test]
fn failure_modes() {
    let (lines, _, end) = run_with(&["please fail"], "");
    assert_eq!(
        (end, &values(&lines).1["message"]),
        (End::Exit(1), &json!("simulated failure"))
    );
    assert_eq!(run_with(&["crash"], "").2, End::Abort);
    assert_eq!(run_with(&["exit=3"], "").2, End::Exit(3));
    assert_eq!(run_with(&["hang"], "").2, End::Forever);
}

#[test]
fn noise_stderr_flood_long_line() {
    let (lines, stderr, _) = run_with(&["noise stderr flood=50 long-line=5000"], "");
    assert!(lines.iter().any(|l| l.contains('\x1b')) && lines.iter().any(|l| l.ends_with('\r')));
    assert!(lines.iter().any(|l| l.is_empty()) && lines.iter().any(|l| l == "{\"type\":"));
    assert!(lines.iter().any(|l| l.len() > 5000) && stderr.contains("stderr"));
    let (v, done) = values(&lines);
    assert!(v.iter().filter(|v| v["type"] == "text").count() >= 50);
    assert_eq!(done["type"], "done");
}

#[test]
fn keywords_and_args_parse() {
    let k = parse_keywords("Please APPROVAL, exit=4; sleep=20 flood=3 long-line=9 ignore-sigterm.");
    assert!(k.approval && k.ignore_sigterm && !k.echo);
    assert_eq!(
        (k.exit, k.sleep_ms, k.flood, k.long_line),
        (Some(4), Some(20), Some(3), Some(9))
    );
    assert_eq!(parse_keywords("slow").sleep_ms, Some(300));
    assert_eq!(
        parse_keywords("long-line=5 long-lines=3").long_lines,
        Some(3)
    );
    let parse = |a: &[&str]| parse_args(a.iter().map(|s| s.to_string()));
    assert_eq!(parse(&["--help"]), Ok(Command::Help));
    assert!(parse(&["--bogus"]).is_err() && parse(&["--delay-ms"]).is_err());
}

#[test]
fn scenario_and_replay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (scenario, replay) = (dir.path().join("s.jsonl"), dir.path().join("r.jsonl"));
    let steps = r#"{"emit":{"type":"init","session_id":"x"}}
{"print":"raw"}
{"stderr":"oops"}
{"sleep_ms":1}
{"read_stdin":true}
{"exit":5}
{"print":"never"}"#;
    std::fs::write(&scenario, steps).expect("write");
    let (lines, stderr, end) = run_with(&["--scenario", &scenario.to_string_lossy()], "hi\n");
    assert_eq!(
        (end, lines.len(), lines[1].as_str(), stderr.as_str()),
        (End::Exit(5), 3, "raw", "oops\n")
    );
    let (v, _) = values(&lines[2..]);
    assert_eq!(
        (&v[0]["id"], &v[0]["output"]),
        (&json!("stdin"), &json!("hi"))
    );

    std::fs::write(&replay, "{\"a\":1}\r\nnot json\n{\"b\":2}").expect("write");
    let (lines, _, end) = run_with(&["--replay", &replay.to_string_lossy()], "");
    assert_eq!(
        (end, lines),
        (
            End::Exit(0),
            vec!["{\"a\":1}\r".into(), "not json".into(), "{\"b\":2}".into()]
        )
    );
}
