//! Every task ends honestly (issue 15): replies by context, replays, stores that fail,
//! restarts that keep work.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

async fn start_task(s: &TestServer, prompt: &str) -> (String, String) {
    let mut p = send_params(prompt);
    p["configuration"] = json!({"returnImmediately": true});
    let r = s.rpc("SendMessage", p).await;
    let t = &r["result"]["task"];
    (
        t["id"].as_str().unwrap().to_string(),
        t["contextId"].as_str().unwrap().to_string(),
    )
}

fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or("")
}

/// Item 9: a reply naming only the context (no taskId) answers the context's task that waits
/// for input, as the coding-agent-a2a API does; before, it was queued behind that task and the
/// blocking call never returned.
#[tokio::test]
async fn a_reply_naming_only_the_context_answers_the_waiting_task() {
    limit(async {
        let s = TestServer::start().await;
        let (id, ctx) = start_task(&s, "approval: clean the build directory").await;
        s.task_when(&id, |t| state(t) == "TASK_STATE_INPUT_REQUIRED")
            .await;
        let mut p = send_params("yes");
        p["message"]["contextId"] = json!(ctx);
        let r = limit_to_value(s.rpc("SendMessage", p)).await;
        let t = &r["result"]["task"];
        assert_eq!(
            t["id"],
            json!(id),
            "the reply answered the waiting task: {r}"
        );
        let t = s
            .task_when(&id, |t| {
                matches!(state(t), "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED")
            })
            .await;
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{t}");
    })
    .await;
}

/// A call that must answer well within the test's limit.
async fn limit_to_value<F: std::future::Future<Output = Value>>(f: F) -> Value {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the call never returned")
}

/// Item 10: a `Last-Event-ID` beyond the end of the log gives the task as it is now (and the
/// stream closes, the task being terminal), not an empty stream.
#[tokio::test]
async fn a_last_event_id_beyond_the_log_gives_the_current_state() {
    limit(async {
        let s = TestServer::start().await;
        let (id, _) = start_task(&s, "hello").await;
        s.task_when(&id, |t| state(t) == "TASK_STATE_COMPLETED")
            .await;
        let mut r = s
            .open_stream("SubscribeToTask", json!({"id": id}), Some(1_000_000))
            .await;
        let frames = r.all().await;
        let st = states(&frames);
        println!("beyond the end: {st:?}");
        assert_eq!(
            st.last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{st:?}"
        );
    })
    .await;
}

/// Item 10: replaying from 0 a task whose question was answered goes on past the old
/// `input-required` to the task's end.
#[tokio::test]
async fn a_replay_goes_past_an_answered_question() {
    limit(async {
        let s = TestServer::start().await;
        let (id, _) = start_task(&s, "approval: clean the build directory").await;
        s.task_when(&id, |t| state(t) == "TASK_STATE_INPUT_REQUIRED")
            .await;
        let mut p = send_params("yes");
        p["message"]["taskId"] = json!(id);
        s.rpc("SendMessage", p).await;
        s.task_when(&id, |t| state(t) == "TASK_STATE_COMPLETED")
            .await;
        let mut r = s
            .open_stream("SubscribeToTask", json!({"id": id}), Some(0))
            .await;
        let st = states(&r.all().await);
        println!("replay from 0: {st:?}");
        assert!(
            st.iter().any(|s| s == "TASK_STATE_INPUT_REQUIRED"),
            "{st:?}"
        );
        assert_eq!(
            st.last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{st:?}"
        );
    })
    .await;
}

/// Item 8: a prompt over 128 KiB reaches an argv adapter that takes it on stdin (demo), and
/// is refused up front with -32602 naming the limit by one that does not (jsonl); before, the
/// task failed "could not be started" (`Argument list too long` only in the log).
#[tokio::test]
async fn a_prompt_too_long_for_an_argument_goes_to_stdin_or_is_refused() {
    limit(async {
        let long = format!("echo {}", "x".repeat(200 * 1024));
        let s = TestServer::start().await;
        let (id, _) = start_task(&s, &long).await;
        let t = s
            .task_when(&id, |t| {
                matches!(state(t), "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED")
            })
            .await;
        println!("demo, 200 KiB prompt: {}", state(&t));
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{}", t["status"]);

        let s = TestServer::with(Options {
            adapter: "jsonl",
            ..Options::default()
        })
        .await;
        let r = s.rpc("SendMessage", send_params(&long)).await;
        println!("jsonl, 200 KiB prompt: {}", r["error"]);
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains("128 KiB"),
            "{r}"
        );
    })
    .await;
}

/// The text of a task's streamed answer artifact.
fn answer_text(t: &Value) -> String {
    t["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["artifactId"] == "assistant-response"))
        .and_then(|a| a["parts"][0]["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Item 7: three lines of 15 MB (each under the 16 MiB line limit, together under the 64 MiB
/// kept per task) end the task `completed` with the whole output kept, on the default store:
/// the blocking answer, a later GetTask and a stream all have the three lines whole and in
/// order. (What it costs in memory is measured by `bench/memory.sh`, not here.)
#[tokio::test]
async fn three_lines_of_15_mb_complete_and_are_kept_whole() {
    // 90 MB through a debug build: 25 s alone on 2 cores, up to 100 s beside the whole suite.
    limit_to(Duration::from_secs(300), async {
        let s = TestServer::with(Options {
            sqlite: true,
            ..Options::default()
        })
        .await;
        const LINE: usize = 15_000_000;
        let prompt = format!("long-line={LINE} long-lines=3");
        let check = |t: &Value| {
            assert_eq!(state(t), "TASK_STATE_COMPLETED", "{}", t["status"]);
            let text = answer_text(t);
            let tail = &text[text.len() - 3 * LINE..];
            for (i, letter) in ['x', 'y', 'z'].into_iter().enumerate() {
                let line = &tail[i * LINE..(i + 1) * LINE];
                assert!(line.chars().all(|c| c == letter), "line {i} is not whole");
            }
        };
        let r = s.rpc("SendMessage", send_params(&prompt)).await;
        let t = &r["result"]["task"];
        check(t);
        let id = t["id"].as_str().unwrap();
        let got = s.rpc("GetTask", json!({"id": id})).await;
        check(&got["result"]);

        let frames = s.stream("SendStreamingMessage", send_params(&prompt)).await;
        let long: Vec<usize> = frames
            .iter()
            .filter_map(|f| {
                f.data["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str()
            })
            .map(str::len)
            .filter(|&n| n == LINE)
            .collect();
        assert_eq!(long.len(), 3, "each long line streamed once, whole");
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED")
        );
    })
    .await;
}
