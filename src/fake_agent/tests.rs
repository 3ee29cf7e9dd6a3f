//! fake-agent run in-process.
use super::*;

/// Runs the program in-process: (stdout lines without their `\n`, stderr, end).
fn run_with(argv: &[&str], stdin: &str) -> (Vec<String>, String, End) {
    run_in(&std::env::current_dir().expect("cwd"), argv, stdin)
}

/// `run_with`, the session working in `dir`.
fn run_in(dir: &Path, argv: &[&str], stdin: &str) -> (Vec<String>, String, End) {
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
        clock: Instant::now(),
    };
    let end = run(&args, dir, &mut out, &mut stdin.as_bytes()).expect("run");
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
    assert!(parse_keywords("gate hello").gate);
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

#[test]
fn edit_creates_then_appends_to_a_file_in_the_working_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (lines, _, end) = run_in(dir.path(), &["Add a note, edit"], "");
    let (v, done) = values(&lines);
    assert_eq!(end, End::Exit(0));
    let edit = v
        .iter()
        .find(|v| v["name"] == "Edit")
        .expect("an Edit tool_use");
    assert_eq!(edit["input"]["file_path"], "NOTES.md");
    assert!(v
        .iter()
        .any(|v| v["id"] == "tool-edit" && v["output"] == "created NOTES.md\n+- Add a note, edit"));
    assert!(
        done["result"].to_string().contains("I created NOTES.md"),
        "{done}"
    );
    run_in(dir.path(), &["second note edit=NOTES.md."], "");
    let text = std::fs::read_to_string(dir.path().join("NOTES.md")).expect("NOTES.md");
    assert_eq!(text, "- Add a note, edit\n- second note edit=NOTES.md.\n");
    // A path that leaves the working directory is a failed tool call; nothing is written.
    let (lines, _, end) = run_in(dir.path(), &["edit=../escape.md"], "");
    assert_eq!(end, End::Exit(0));
    assert!(values(&lines)
        .0
        .iter()
        .any(|v| v["id"] == "tool-edit" && v["is_error"] == true));
    assert!(!dir
        .path()
        .parent()
        .expect("parent")
        .join("escape.md")
        .exists());
}

#[test]
fn approval_with_edit_asks_for_the_edit_and_a_deny_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let allow = r#"{"type":"approval_response","id":"appr-1","decision":"allow"}"#;
    let (lines, _, _) = run_in(
        dir.path(),
        &["approval edit=src/plan.md"],
        &format!("{allow}\n"),
    );
    let (v, done) = values(&lines);
    let asks: Vec<&Value> = v
        .iter()
        .filter(|v| v["type"] == "approval_required")
        .collect();
    assert_eq!(asks.len(), 1, "only the edit is asked for: {asks:?}");
    assert_eq!(
        (&asks[0]["kind"], &asks[0]["tool"], &asks[0]["target"]),
        (&json!("file-edit"), &json!("Edit"), &json!("src/plan.md"))
    );
    assert!(done["result"].to_string().contains("src/plan.md"), "{done}");
    assert!(dir.path().join("src/plan.md").is_file());

    let deny = r#"{"type":"approval_response","id":"appr-1","decision":"deny"}"#;
    let (lines, _, end) = run_in(
        dir.path(),
        &["approval edit=other.md"],
        &format!("{deny}\n"),
    );
    assert_eq!(end, End::Exit(0));
    assert!(values(&lines).1["result"].to_string().contains("denied"));
    assert!(!dir.path().join("other.md").exists());
}

#[test]
fn usage_reports_the_time_the_session_took() {
    // 200 ms before each line after the first, and at least 7 lines before usage: over a
    // second, where the demo used to say 850 ms whatever happened.
    let (lines, _, _) = run_with(&["sleep=200 look around"], "");
    let (v, _) = values(&lines);
    let before = v.iter().position(|v| v["type"] == "usage").expect("usage");
    let floor = 200 * (u64::try_from(before).expect("count") - 1);
    let ms = v[before]["duration_ms"].as_u64().expect("duration_ms");
    assert!(ms >= floor && floor > 850, "{ms} ms, at least {floor}");
}

#[test]
fn a_gated_session_starts_once_its_gate_exists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let gate = dir.path().join("GATE");
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        std::fs::write(gate, "").expect("the gate");
    });
    let started = Instant::now();
    let (lines, _, end) = run_in(dir.path(), &["gate hello"], "");
    opener.join().expect("the opener");
    assert!(started.elapsed() >= Duration::from_millis(100));
    let (v, _) = values(&lines);
    assert_eq!((&v[0]["type"], end), (&json!("init"), End::Exit(0)));
}
