//! Budgets and approval rules in a turn, with scripted children under paused time.

use super::*;
use crate::protocol::v1::Part;

/// A new task whose message carries `metadata`.
async fn start_with(
    e: &Engine,
    scripts: &mut mpsc::UnboundedReceiver<Script>,
    metadata: Value,
    context: Option<&str>,
) -> (String, Script) {
    let mut req = request("work", None);
    req.message.metadata = metadata.as_object().cloned();
    req.message.context_id = context.map(str::to_string);
    let acc = e.send(req, None, &RequestOptions::default()).await.unwrap();
    let script = scripts.recv().await.expect("spawned");
    script.emit(json!({"type": "init", "session_id": "s-1", "model": "m"}));
    (acc.task_id, script)
}

fn tool(s: &Script, n: usize) {
    let id = format!("t-{n}");
    s.emit(json!({"type": "tool_use", "id": id, "name": "Bash", "input": {"command": "ls"}}));
    s.emit(json!({"type": "tool_result", "id": id, "output": "ok"}));
}

/// The data part of the task's status message.
fn status_data(s: &Snapshot) -> Value {
    s.task
        .status
        .message
        .as_ref()
        .and_then(|m| m.parts.iter().find_map(|p| p.data.clone()))
        .unwrap_or(Value::Null)
}

async fn answer(e: &Engine, task: &str, text: &str) -> u64 {
    e.send(request(text, Some(task)), None, &RequestOptions::default())
        .await
        .unwrap()
        .from_seq
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_budget_asks_then_continue_runs_more_and_stop_completes() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, script) =
        start_with(&e, &mut scripts, json!({"budget": {"toolCalls": 5}}), None).await;
    for n in 1..=6 {
        tool(&script, n);
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let q = status_data(&snap);
    assert_eq!(q["kind"], "budget");
    assert_eq!(q["scope"], "task");
    assert_eq!(q["spent"]["toolCalls"], 5);
    assert_eq!(q["allowed"]["toolCalls"], 5);
    assert_eq!(q["options"][0]["id"], "continue");
    assert_eq!(q["options"][1]["id"], "stop");
    assert!(script.log().contains(&"terminate".to_string()));
    let md = snap.task.metadata.clone().unwrap();
    assert_eq!(md["budget"]["spent"]["toolCalls"], 5);

    // Continue with 5: the same session resumes and runs 5 more.
    let at = answer(&e, &task, "continue with 5").await;
    let again = scripts.recv().await.expect("resumed");
    for n in 7..=12 {
        tool(&again, n);
    }
    let snap = settled(&e, &task, at).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let q = status_data(&snap);
    assert_eq!(q["spent"]["toolCalls"], 10);
    assert_eq!(q["allowed"]["toolCalls"], 10);

    // Stop: completed, with what was done.
    let at = answer(&e, &task, "stop").await;
    let snap = settled(&e, &task, at).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    assert!(status_text(&snap).contains("Stopped at the budget"));
    assert_eq!(
        snap.task.metadata.unwrap()["budget"]["spent"]["toolCalls"],
        10
    );
    while e.live_count() > 0 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_budget_that_fails_ends_the_task_failed_with_the_figures() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let meta = json!({"budget": {"toolCalls": 5, "onBudget": "fail"}});
    let (task, script) = start_with(&e, &mut scripts, meta, None).await;
    for n in 1..=6 {
        tool(&script, n);
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Failed);
    let md = snap.task.metadata.clone().unwrap();
    assert_eq!(md["errorKind"], "budget");
    assert_eq!(md["budget"]["spent"]["toolCalls"], 5);
    assert_eq!(md["budget"]["allowed"]["toolCalls"], 5);
    assert!(
        status_text(&snap).contains("budget of 5 tool calls"),
        "{}",
        status_text(&snap)
    );
    while e.live_count() > 0 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_wall_time_budget_stops_the_agent_on_time() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let t0 = Instant::now();
    let (task, script) =
        start_with(&e, &mut scripts, json!({"budget": {"seconds": 20}}), None).await;
    let talk = tokio::spawn(async move {
        for _ in 0..10 {
            tokio::time::sleep(Duration::from_secs(5)).await;
            script.emit(json!({"type": "text", "text": "working ", "delta": true}));
        }
        script
    });
    let snap = settled(&e, &task, 0).await;
    let waited = t0.elapsed();
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    assert!(
        waited >= Duration::from_secs(20) && waited < Duration::from_secs(20) + GRACE * 3,
        "{waited:?}"
    );
    let q = status_data(&snap);
    assert_eq!(q["reached"], json!(["seconds"]));
    assert_eq!(q["spent"]["seconds"], 20);
    let script = talk.await.unwrap();
    assert!(script.log().contains(&"terminate".to_string()));
}

#[tokio::test(start_paused = true)]
async fn a_cost_budget_counts_the_usage_lines() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, script) = start_with(&e, &mut scripts, json!({"budget": {"usd": 0.5}}), None).await;
    script.emit(json!({"type": "usage", "input_tokens": 100, "cost_usd": 0.2}));
    tool(&script, 1);
    script.emit(json!({"type": "usage", "input_tokens": 300, "cost_usd": 0.55}));
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let q = status_data(&snap);
    assert_eq!(q["reached"], json!(["usd"]));
    assert_eq!(q["spent"]["usd"], 0.55);
    assert_eq!(q["spent"]["tokens"], 300);
}

#[tokio::test(start_paused = true)]
async fn a_context_budget_stops_the_third_follow_up() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let meta = json!({"budget": {"context": {"toolCalls": 5}}});
    let (first, mut script) = start_with(&e, &mut scripts, meta, None).await;
    let ctx = e.get(&first, None, None).await.unwrap().context_id;
    for n in 1..=2 {
        tool(&script, n);
    }
    script.emit(json!({"type": "done", "result": "ok"}));
    script.exit(0);
    assert_eq!(
        settled(&e, &first, 0).await.task.status.state,
        TaskState::Completed
    );
    // The follow-ups name no budget: they keep the context's.
    let (second, mut script) = start_with(&e, &mut scripts, json!({}), Some(&ctx)).await;
    for n in 3..=4 {
        tool(&script, n);
    }
    script.emit(json!({"type": "done", "result": "ok"}));
    script.exit(0);
    assert_eq!(
        settled(&e, &second, 0).await.task.status.state,
        TaskState::Completed
    );
    let (third, script) = start_with(&e, &mut scripts, json!({}), Some(&ctx)).await;
    for n in 5..=6 {
        tool(&script, n);
    }
    let snap = settled(&e, &third, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let q = status_data(&snap);
    assert_eq!(q["scope"], "context");
    assert_eq!(q["spent"]["toolCalls"], 5);
    let md = snap.task.metadata.unwrap();
    assert_eq!(md["budget"]["context"]["spent"]["toolCalls"], 5);
    assert_eq!(md["budget"]["spent"]["toolCalls"], 1);
}

#[tokio::test(start_paused = true)]
async fn bad_budgets_and_rule_sets_are_refused_before_anything_starts() {
    let config = EngineConfig {
        controls: Arc::new(crate::policy::Controls {
            ceiling: "usd=5".parse().unwrap(),
            ..Default::default()
        }),
        ..EngineConfig::default()
    };
    let (e, mut scripts) = engine_with(HARD, IDLE, config);
    for (meta, field) in [
        (json!({"budget": {"usd": 10}}), "metadata.budget.usd"),
        (
            json!({"budget": {"toolCalls": -1}}),
            "metadata.budget.toolCalls",
        ),
        (
            json!({"budget": {"tokens": "lots"}}),
            "metadata.budget.tokens",
        ),
        (json!({"approvals": "yolo"}), "metadata.approvals"),
        (
            json!({"approvals": {"set": "read-only", "rules": [{"decision": "allow"}]}}),
            "metadata.approvals.rules[0].decision",
        ),
        (
            json!({"approvals": {"rules": [{"decision": "deny", "target_regex": "("}]}}),
            "metadata.approvals.rules[0]",
        ),
    ] {
        let mut req = request("work", None);
        req.message.metadata = meta.as_object().cloned();
        let err = e
            .send(req, None, &RequestOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), -32602, "{meta}");
        assert!(err.to_string().contains(field), "{meta}: {err}");
    }
    assert!(scripts.try_recv().is_err(), "nothing started");
    assert_eq!(e.live_count(), 0);
}

/// The `working` statuses that carry a rule's decision.
fn rule_decisions(s: &Snapshot) -> Vec<Value> {
    s.task
        .history
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p: &Part| p.data.clone())
        .filter(|d| d["kind"] == "rule-decision")
        .collect()
}

#[tokio::test(start_paused = true)]
async fn read_only_answers_a_read_without_a_round_trip_and_asks_for_a_write() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, mut script) =
        start_with(&e, &mut scripts, json!({"approvals": "read-only"}), None).await;
    script.emit(json!({"type": "approval_required", "id": "a-1", "kind": "tool", "tool": "Read", "target": "src/lib.rs"}));
    let got: Value = serde_json::from_slice(&script.stdin.recv().await.unwrap()).unwrap();
    assert_eq!(got["type"], "approval_response");
    assert_eq!(got["id"], "a-1");
    assert_eq!(got["decision"], "allow");
    script.emit(json!({"type": "approval_required", "id": "a-2", "kind": "file-edit", "tool": "Write", "target": "src/lib.rs"}));
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    assert_eq!(status_data(&snap)["approvalId"], "a-2");
    let decided = rule_decisions(&snap);
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["decision"], "allow");
    assert_eq!(decided[0]["set"], "read-only");
    assert_eq!(decided[0]["request"]["approvalId"], "a-1");
    assert_eq!(decided[0]["request"]["target"], "src/lib.rs");
    assert_eq!(snap.task.metadata.unwrap()["approvals"]["set"], "read-only");
}

#[tokio::test(start_paused = true)]
async fn the_requests_deny_beats_the_sets_allow_and_each_decision_is_in_the_history() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let meta = json!({"approvals": {"set": "workspace-write", "rules": [
        {"decision": "deny", "kind": "command", "target": "cargo publish*"}
    ]}});
    let (task, mut script) = start_with(&e, &mut scripts, meta, None).await;
    for (id, target) in [("a-1", "cargo test"), ("a-2", "cargo publish --dry-run")] {
        script.emit(json!({"type": "approval_required", "id": id, "kind": "command", "tool": "Bash", "target": target}));
    }
    let allow: Value = serde_json::from_slice(&script.stdin.recv().await.unwrap()).unwrap();
    let deny: Value = serde_json::from_slice(&script.stdin.recv().await.unwrap()).unwrap();
    assert_eq!(
        (allow["id"].as_str(), allow["decision"].as_str()),
        (Some("a-1"), Some("allow"))
    );
    assert_eq!(
        (deny["id"].as_str(), deny["decision"].as_str()),
        (Some("a-2"), Some("deny"))
    );
    script.emit(json!({"type": "done", "result": "ok"}));
    script.exit(0);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    let decided = rule_decisions(&snap);
    assert_eq!(decided.len(), 2);
    assert_eq!(decided[1]["decision"], "deny");
    assert_eq!(decided[1]["by"], "rule 1 of the request");
    let texts: Vec<String> = snap.task.history.iter().map(|m| m.text()).collect();
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("Denied by rule 1 of the request")),
        "{texts:?}"
    );
}

/// A budget stopped task answered at once, as soon as its question is published (while the
/// turn that stopped still writes its last record): the answer is taken, not refused as
/// "ended before the answer was delivered".
#[tokio::test(start_paused = true)]
async fn a_budget_question_answered_at_once_is_taken() {
    let (store, e, mut scripts) = super::failing::Disk::engine(Duration::ZERO, Duration::ZERO);
    // The turn's last write, after the question, takes a while.
    store
        .forget_delay_ms
        .store(60_000, std::sync::atomic::Ordering::SeqCst);
    let (task, script) =
        start_with(&e, &mut scripts, json!({"budget": {"toolCalls": 1}}), None).await;
    for n in 1..=2 {
        tool(&script, n);
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let acc = e
        .send(
            request("stop", Some(&task)),
            None,
            &RequestOptions::default(),
        )
        .await;
    let acc = acc.expect("the answer to a task shown waiting is taken");
    let snap = settled(&e, &task, acc.from_seq).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
}

/// Concurrent answers to a task parked at its budget (no program waits for them): one is
/// taken, the others are refused (-32004) as answers to a task no longer waiting; one
/// program resumes, the task ends once, the slot is given back.
#[tokio::test(start_paused = true)]
async fn concurrent_answers_to_a_parked_task_are_taken_once() {
    // Reads and writes that take time: each answer reads the task before it acts, and
    // stores the answer before it starts a turn.
    let (_store, e, mut scripts) =
        super::failing::Disk::engine(Duration::from_millis(50), Duration::from_millis(50));
    let (task, script) =
        start_with(&e, &mut scripts, json!({"budget": {"toolCalls": 2}}), None).await;
    for n in 1..=3 {
        tool(&script, n);
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let opts = RequestOptions::default();
    let send = |w: &str| e.send(request(w, Some(&task)), None, &opts);
    let (a, b, c) = tokio::join!(send("continue"), send("continue"), send("stop"));
    let taken: Vec<_> = [&a, &b, &c].into_iter().filter(|r| r.is_ok()).collect();
    assert_eq!(taken.len(), 1, "{a:?} {b:?} {c:?}");
    for r in [&a, &b, &c] {
        if let Err(err) = r {
            assert_eq!(err.code(), -32004, "{err}");
        }
    }
    if a.is_ok() || b.is_ok() {
        // Continued: one program resumes, and no other.
        let again = scripts.recv().await.expect("resumed");
        for n in 4..=6 {
            tool(&again, n);
        }
        let snap = settled(&e, &task, taken[0].as_ref().unwrap().from_seq).await;
        assert_eq!(snap.task.status.state, TaskState::InputRequired);
        assert!(scripts.try_recv().is_err(), "a second program started");
        let at = answer(&e, &task, "stop").await;
        settled(&e, &task, at).await;
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    while e.live_count() > 0 {
        tokio::task::yield_now().await;
    }
    assert_eq!(e.load(), (0, 0));
}

/// A time budget far beyond any clock (near 2^63 seconds) is refused naming the field and
/// the limit; the longest one taken runs (its deadline computed without overflow).
#[tokio::test(start_paused = true)]
async fn a_huge_time_budget_is_refused_and_the_longest_one_runs() {
    let (e, mut scripts) = engine(HARD, IDLE);
    for meta in [
        json!({"budget": {"seconds": 9_223_372_036_854_775_807_u64}}),
        json!({"budget": {"context": {"seconds": 9_223_372_036_854_775_807_u64}}}),
    ] {
        let mut req = request("work", None);
        req.message.metadata = meta.as_object().cloned();
        let err = e
            .send(req, None, &RequestOptions::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), -32602, "{meta}");
        assert!(
            err.to_string().contains("seconds") && err.to_string().contains("315360000"),
            "{err}"
        );
    }
    let max = crate::policy::budget::MAX_SECONDS;
    let (task, mut script) = start_with(
        &e,
        &mut scripts,
        json!({"budget": {"seconds": max, "context": {"seconds": max}}}),
        None,
    )
    .await;
    script.emit(json!({"type": "done", "result": "ok"}));
    script.exit(0);
    assert_eq!(
        settled(&e, &task, 0).await.task.status.state,
        TaskState::Completed
    );
}

/// Timeouts too long for an instant to hold (a hard timeout of `Duration::MAX`) do not
/// panic the turn.
#[tokio::test(start_paused = true)]
async fn timeouts_too_long_for_the_clock_do_not_panic_the_turn() {
    let (e, mut scripts) = engine(Duration::MAX, Duration::MAX);
    let (task, mut script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "done", "result": "ok"}));
    script.exit(0);
    let snap = tokio::time::timeout(Duration::from_secs(60), settled(&e, &task, 0))
        .await
        .expect("the task ends");
    assert_eq!(snap.task.status.state, TaskState::Completed);
}

/// A budget of $0, reached: a bare "continue" has nothing to add and says what to answer
/// (not "the host's ceiling ()", there being none); "continue with 1" goes on.
#[tokio::test(start_paused = true)]
async fn a_zero_budget_continued_without_an_amount_says_what_to_answer() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, script) = start_with(&e, &mut scripts, json!({"budget": {"usd": 0}}), None).await;
    script.emit(json!({"type": "usage", "input_tokens": 1, "cost_usd": 0.01}));
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    let err = e
        .send(
            request("continue", Some(&task)),
            None,
            &RequestOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), -32602);
    let text = err.to_string();
    assert!(
        text.contains("continue with N") && !text.contains("ceiling"),
        "{text}"
    );
    answer(&e, &task, "continue with 1").await;
    scripts.recv().await.expect("resumed");
}

/// An adapter that cannot resume sessions: the budget question says the session is not
/// kept, and "continue" starts the program again with the task's request in its prompt.
#[tokio::test(start_paused = true)]
async fn continue_without_sessions_starts_again_with_the_request() {
    let mut adapter = Registry::builtin().unwrap().get("demo").unwrap().clone();
    adapter.resume_args.clear();
    adapter.protocol_resume = false;
    let (e, mut scripts) = engine_of(adapter, HARD, IDLE, EngineConfig::default());
    let mut req = request("refactor the parser", None);
    req.message.metadata = json!({"budget": {"toolCalls": 1}}).as_object().cloned();
    let task = e
        .send(req, None, &RequestOptions::default())
        .await
        .unwrap()
        .task_id;
    let script = scripts.recv().await.expect("spawned");
    for n in 1..=2 {
        tool(&script, n);
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    assert!(
        status_text(&snap).contains("cannot resume its session"),
        "{}",
        status_text(&snap)
    );
    let at = answer(&e, &task, "continue").await;
    let again = scripts.recv().await.expect("started again");
    let prompt = again.args.last().cloned().unwrap_or_default();
    assert!(
        prompt.contains("refactor the parser") && prompt.contains("reached your budget"),
        "{prompt}"
    );
    again.emit(json!({"type": "done", "result": "ok"}));
    drop(again);
    let snap = settled(&e, &task, at).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
}
