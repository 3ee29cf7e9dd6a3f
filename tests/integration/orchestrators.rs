//! Orchestrators at full tilt (issue 33): a cancel at any moment of a task's start answers at
//! once and leaves nothing behind; questions fanned out beyond the running slots all reach
//! the caller, and an abandoned one expires; an orchestrator polling its tasks on the default
//! rate limit is never refused.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;
use crate::sandbox::{left_with_mark, sandbox_available};

/// A send that returns at once, with `text` as the prompt.
fn send_now(text: &str) -> Value {
    json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": true}})
}

/// A cancel 0, 5, 10, 20 and 50 ms after a task's start, while bubblewrap sets its sandbox up
/// (the official Python SDK's flows cancel that early): each answers well within the cancel
/// grace (5 s by default, which the cancel used to wait out in full), and no process of the
/// task is left. Not a speed check (the benchmark measures that): the bound only tells an
/// answer at once from one after the grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_during_the_sandbox_setup_answers_at_once_and_leaves_nothing() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        // The default settings: sandbox `auto` (bubblewrap, cgroups) and the default grace.
        let host = HostProcess::spawn(&[], &[]).await;
        let mut took = Vec::new();
        for delay in [0u64, 5, 10, 20, 50] {
            let mark = format!("early{delay}x{}", uuid().replace('-', ""));
            let v = host
                .rpc("/", "SendMessage", send_now(&format!("hang {mark}")), &[])
                .await;
            let id = v["result"]["task"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("no task: {v}"))
                .to_string();
            time_passes(Duration::from_millis(delay)).await;
            let t0 = Instant::now();
            let c = host.rpc("/", "CancelTask", json!({"id": id}), &[]).await;
            let elapsed = t0.elapsed();
            assert_eq!(
                c["result"]["status"]["state"], "TASK_STATE_CANCELED",
                "cancel {delay} ms after the start: {c}"
            );
            let left = left_with_mark(&mark).await;
            assert!(
                left.is_empty(),
                "cancel {delay} ms after the start left processes {left:?}"
            );
            took.push((delay, elapsed));
        }
        println!("cancel after (ms) -> answered in: {took:?}");
        for (delay, elapsed) in took {
            assert!(
                elapsed < Duration::from_secs(1),
                "a cancel {delay} ms after the start took {elapsed:?} (the grace is 5 s)"
            );
        }
    })
    .await;
}

/// The task's state, as the proto name.
fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or("")
}

/// The task once `pred` holds, within 60 s (a loaded machine starts twenty agents slowly; a
/// deadlock never gets there).
async fn task_when_loaded(s: &TestServer, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(
        &format!("task {id} gets on"),
        Duration::from_secs(60),
        async || {
            let t = s.get_task(id).await;
            ready(pred(&t), t)
        },
    )
    .await
}

/// Twenty questions fanned out on the default limits (16 running slots): a task waiting for
/// its answer gives its slot back, so all twenty reach input-required (before, four stayed
/// `submitted` and an orchestrator gathering every question first waited for ever); a task
/// that still waits to start says what for. Answering all completes all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_questions_fanned_out_all_reach_the_caller_and_all_complete() {
    limit_to(Duration::from_secs(180), async {
        let s = TestServer::with(Options {
            host_limits: agent_host::settings::HostLimits {
                rate_per_minute: 0,
                ..agent_host::settings::HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        let mut ids = Vec::new();
        for _ in 0..20 {
            let v = s.rpc("SendMessage", send_now("question")).await;
            let t = &v["result"]["task"];
            if let Some(why) = t["status"]["message"]["parts"][0]["text"].as_str() {
                println!("waits: {why}");
            }
            ids.push(
                t["id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{v}"))
                    .to_string(),
            );
        }
        for id in &ids {
            task_when_loaded(&s, id, |t| state(t) == "TASK_STATE_INPUT_REQUIRED").await;
        }
        for id in &ids {
            let mut p = send_now("src/main.rs");
            p["message"]["taskId"] = json!(id);
            let v = s.rpc("SendMessage", p).await;
            assert!(v["result"].is_object(), "answer of {id}: {v}");
        }
        for id in &ids {
            task_when_loaded(&s, id, |t| state(t) == "TASK_STATE_COMPLETED").await;
        }
        println!("20 questions fanned out: 20 input-required, 20 completed");
    })
    .await;
}

/// A task whose question is never answered ends when its question expires (the input
/// timeout, here 1 s), saying so; its slot and program are freed.
#[tokio::test]
async fn an_abandoned_question_expires_and_says_so() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: agent_host::settings::HostLimits {
                rate_per_minute: 0,
                input_timeout: Duration::from_secs(1),
                ..agent_host::settings::HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        let v = s.rpc("SendMessage", send_now("question")).await;
        let id = v["result"]["task"]["id"]
            .as_str()
            .expect("task")
            .to_string();
        task_when_loaded(&s, &id, |t| state(t) == "TASK_STATE_INPUT_REQUIRED").await;
        let t = task_when_loaded(&s, &id, |t| state(t) == "TASK_STATE_FAILED").await;
        let text = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("question expired"), "{t}");
    })
    .await;
}

/// The JSON-RPC call `method` with `params` to `host`, and whether the host refused it (HTTP
/// 429 from the rate limit, or any JSON-RPC error).
async fn call(host: &HostProcess, method: &str, params: Value) -> (Value, bool) {
    let v = host.rpc("/", method, params, &[]).await;
    let refused = v.get("result").is_none();
    if refused {
        println!("{method} refused: {v}");
    }
    (v["result"].clone(), refused)
}

/// An orchestrator as the host's callers drive it, on the default settings (rate limit
/// included) and without credentials: 20 contexts at a time, a question in each, every task
/// polled once a second until it asks, answered (every fifth one of every third round
/// cancelled instead), polled until it ends, then a follow-up in each context; for 75 s.
/// Nothing is refused and nothing is stuck. Before the rate limit charged reads less and kept
/// callers without credentials apart, this load ran dry of the shared 600 a minute within
/// the first minute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrator_polling_twenty_tasks_is_never_refused_on_the_defaults() {
    limit_to(Duration::from_secs(240), async {
        let host = HostProcess::spawn(&[], &[]).await;
        let contexts: Vec<String> = (0..20).map(|_| uuid()).collect();
        let start = Instant::now();
        let (mut refused, mut requests, mut rounds, mut tasks) = (0, 0, 0, 0);
        while start.elapsed() < Duration::from_secs(75) {
            rounds += 1;
            let mut ids = Vec::new();
            for ctx in &contexts {
                let mut p = send_now("question");
                p["message"]["contextId"] = json!(ctx);
                let (t, r) = call(&host, "SendMessage", p).await;
                requests += 1;
                refused += usize::from(r);
                ids.extend(t["task"]["id"].as_str().map(str::to_string));
            }
            tasks += ids.len();
            let (r, n) = follow(&host, &ids, rounds).await;
            refused += r;
            requests += n;
        }
        println!(
            "orchestrator load: {rounds} rounds, {tasks} tasks, {requests} requests in {:?}, {refused} refused",
            start.elapsed()
        );
        assert_eq!(refused, 0, "of {requests} requests");
        assert_eq!(tasks, rounds * 20);
    })
    .await;
}

/// Polls each of `ids` once a second: answers a question (or, in every third round, cancels
/// every fifth task), until every task has ended; a task not ended within 60 s is stuck.
/// Returns (refused, requests).
async fn follow(host: &HostProcess, ids: &[String], round: usize) -> (usize, usize) {
    let mut open: Vec<(usize, String)> = ids.iter().cloned().enumerate().collect();
    let (mut refused, mut requests) = (0, 0);
    let no_task_stuck = Duration::from_secs(60);
    eventually("every task of the round ends", no_task_stuck, async || {
        // An orchestrator that polls once a second (the load is the point).
        time_passes(Duration::from_secs(1)).await;
        let mut still = Vec::new();
        for (i, id) in std::mem::take(&mut open) {
            let (t, r) = call(host, "GetTask", json!({"id": id})).await;
            requests += 1;
            refused += usize::from(r);
            let (method, params) = match state(&t) {
                "TASK_STATE_INPUT_REQUIRED" if round.is_multiple_of(3) && i.is_multiple_of(5) => {
                    ("CancelTask", json!({"id": id}))
                }
                "TASK_STATE_INPUT_REQUIRED" => {
                    let mut p = send_now("src/main.rs");
                    p["message"]["taskId"] = json!(id);
                    ("SendMessage", p)
                }
                "TASK_STATE_COMPLETED" | "TASK_STATE_CANCELED" => continue,
                s if s.is_empty() || s.ends_with("FAILED") || s.ends_with("REJECTED") => {
                    panic!("task {id} ended badly: {t}")
                }
                _ => {
                    still.push((i, id));
                    continue;
                }
            };
            let (_, r) = call(host, method, params).await;
            requests += 1;
            refused += usize::from(r);
            still.push((i, id));
        }
        open = still;
        ready(open.is_empty(), open.clone())
    })
    .await;
    (refused, requests)
}
