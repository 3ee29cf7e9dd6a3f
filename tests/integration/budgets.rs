//! Budgets and approval rules through the server: the demo agent making tool calls in a loop
//! (`tools=N`), stopped at its budget; "continue with 5" runs 5 more in the same session,
//! "stop" completes it; `onBudget: "fail"` fails it. The same question over v0.3 and gRPC;
//! rule sets answering the agent's request; bad input refused with -32602.

use serde_json::{json, Value};

use crate::common::*;

/// A v1.0 send of `text` with message metadata `md` (and `taskId`, for an answer).
fn send_md(text: &str, md: Value, task: Option<&str>) -> Value {
    let mut p = send_params(text);
    p["message"]["metadata"] = md;
    if let Some(t) = task {
        p["message"]["taskId"] = json!(t);
    }
    p
}

/// The last task state among the frames, and the task's id.
fn last(frames: &[Frame]) -> (String, String) {
    let state = states(frames).last().cloned().unwrap_or_default();
    let id = frames
        .iter()
        .find_map(|f| {
            let r = &f.data["result"];
            r["task"]["id"]
                .as_str()
                .or(r["statusUpdate"]["taskId"].as_str())
                .map(str::to_string)
        })
        .unwrap_or_default();
    (state, id)
}

/// The data part of the task's status message.
fn question(task: &Value) -> Value {
    task["status"]["message"]["parts"]
        .as_array()
        .and_then(|ps| ps.iter().find_map(|p| p.get("data").cloned()))
        .unwrap_or(Value::Null)
}

/// Streams a new task of the looping agent (`prompt`, e.g. `tools=20`) with `budget` as its
/// message's budget until it stops at that budget (asserted: waiting on a budget question);
/// returns its id and the task.
async fn parked_at_budget(s: &TestServer, prompt: &str, budget: Value) -> (String, Value) {
    let frames = s
        .stream(
            "SendStreamingMessage",
            send_md(prompt, json!({ "budget": budget }), None),
        )
        .await;
    let (state, id) = last(&frames);
    assert_eq!(state, "TASK_STATE_INPUT_REQUIRED", "{frames:?}");
    let task = s.get_task(&id).await;
    assert_eq!(question(&task)["kind"], "budget", "{task}");
    (id, task)
}

/// A blocking send of a new task (`prompt`, with `budget`), which returns waiting on its
/// budget question (asserted); the task.
async fn sent_until_budget(s: &TestServer, prompt: &str, budget: Value) -> Value {
    let r = s
        .rpc(
            "SendMessage",
            send_md(prompt, json!({ "budget": budget }), None),
        )
        .await;
    let task = r["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
    task
}

#[tokio::test]
async fn a_looping_agent_stops_at_its_tool_calls_continues_and_stops() {
    limit(async {
        let s = TestServer::start().await;
        let (id, task) = parked_at_budget(&s, "tools=20", json!({"toolCalls": 5})).await;
        let q = question(&task);
        assert_eq!(q["spent"]["toolCalls"], 5);
        assert_eq!(q["allowed"]["toolCalls"], 5);
        assert_eq!(task["metadata"]["budget"]["spent"]["toolCalls"], 5);
        let session = task["metadata"]["sessionId"].clone();

        // Continue with 5: the same session, 5 more tool calls.
        let frames = s
            .stream(
                "SendStreamingMessage",
                send_md("continue with 5", json!({}), Some(&id)),
            )
            .await;
        assert_eq!(last(&frames).0, "TASK_STATE_INPUT_REQUIRED", "{frames:?}");
        let task = s.rpc("GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(question(&task)["spent"]["toolCalls"], 10);
        assert_eq!(question(&task)["allowed"]["toolCalls"], 10);
        assert_eq!(task["metadata"]["sessionId"], session);
        let resumed = frames.iter().any(|f| {
            f.data
                .to_string()
                .contains("Continuing the agent's session with the raised budget")
        });
        assert!(resumed, "{frames:?}");

        // Stop: completed with what was done.
        let frames = s
            .stream(
                "SendStreamingMessage",
                send_md("stop", json!({}), Some(&id)),
            )
            .await;
        assert_eq!(last(&frames).0, "TASK_STATE_COMPLETED", "{frames:?}");
        let task = s.rpc("GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(task["metadata"]["budget"]["spent"]["toolCalls"], 10);

        // onBudget "fail": failed, errorKind budget, the figures in the metadata.
        let md = json!({"budget": {"toolCalls": 5, "onBudget": "fail"}});
        let frames = s
            .stream("SendStreamingMessage", send_md("tools=20", md, None))
            .await;
        let (state, id) = last(&frames);
        assert_eq!(state, "TASK_STATE_FAILED", "{frames:?}");
        let task = s.rpc("GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(task["metadata"]["errorKind"], "budget");
        assert_eq!(task["metadata"]["budget"]["spent"]["toolCalls"], 5);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn bad_budgets_and_rule_sets_get_invalid_params_naming_the_field() {
    limit(async {
        let s = TestServer::start().await;
        for (md, field) in [
            (json!({"budget": {"usd": -1}}), "metadata.budget.usd"),
            (json!({"budget": {"toolCalls": "many"}}), "metadata.budget.toolCalls"),
            (json!({"budget": {"toolCalls": "5"}}), "metadata.budget.toolCalls"),
            (json!({"approvals": "anything-goes"}), "metadata.approvals"),
            (
                json!({"approvals": {"set": "read-only", "rules": [{"decision": "allow", "kind": "command"}]}}),
                "metadata.approvals.rules[0].decision",
            ),
        ] {
            let r = s.rpc("SendMessage", send_md("hi", md.clone(), None)).await;
            assert_eq!(r["error"]["code"], -32602, "{md}: {r}");
            let text = r["error"]["message"].as_str().unwrap_or_default();
            assert!(text.contains(field), "{md}: {r}");
        }
        let listed = s.rpc("ListTasks", json!({})).await;
        assert_eq!(listed["result"]["tasks"], json!([]), "nothing started");
        s.shutdown().await;
    })
    .await;
}

/// The v0.3 task (`tasks/get`) once its state is `want`.
async fn task03_in(s: &TestServer, id: &str, want: &str) -> Value {
    eventually(&format!("task {id} becomes {want}"), WAIT, async || {
        let t = s.rpc03("tasks/get", json!({"id": id})).await["result"].clone();
        ready(t["status"]["state"] == want, t)
    })
    .await
}

#[tokio::test]
async fn the_budget_question_is_the_same_over_v03() {
    limit(async {
        let s = TestServer::start().await;
        let mut p = send_params03("tools=20");
        p["message"]["metadata"] = json!({"budget": {"toolCalls": 3}});
        let r = s.rpc03("message/send", p).await;
        let id = r["result"]["id"].as_str().expect("a task").to_string();
        let task = task03_in(&s, &id, "input-required").await;
        let q = question(&task);
        assert_eq!(q["kind"], "budget");
        assert_eq!(q["spent"]["toolCalls"], 3);
        let mut stop = send_params03("stop");
        stop["message"]["taskId"] = json!(id);
        s.rpc03("message/send", stop).await;
        let t = task03_in(&s, &id, "completed").await;
        assert_eq!(t["metadata"]["budget"]["spent"]["toolCalls"], 3);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_budget_question_is_the_same_over_grpc() {
    use agent_host::server::grpc::pb;
    use agent_host::server::grpc::wkt::{value::Kind, Struct, Value as PbValue};
    limit(async {
        let (s, mut c) = crate::grpc::grpc_server(Options::default()).await;
        let num = |n: f64| PbValue {
            kind: Some(Kind::NumberValue(n)),
        };
        let budget = Struct {
            fields: [("toolCalls".to_string(), num(3.0))].into_iter().collect(),
        };
        let mut req = crate::grpc::send("tools=20", true);
        if let Some(m) = req.message.as_mut() {
            m.metadata = Some(Struct {
                fields: [(
                    "budget".to_string(),
                    PbValue {
                        kind: Some(Kind::StructValue(budget)),
                    },
                )]
                .into_iter()
                .collect(),
            });
        }
        let task = crate::grpc::task_of(c.send_message(req).await.expect("send").into_inner());
        let t = crate::grpc::task_in(&mut c, &task.id, pb::TaskState::InputRequired).await;
        let json = s.rpc("GetTask", json!({"id": t.id})).await["result"].clone();
        assert_eq!(question(&json)["kind"], "budget");
        assert_eq!(question(&json)["spent"]["toolCalls"], 3);
        let mut again = crate::grpc::send("continue with 2", true);
        if let Some(m) = again.message.as_mut() {
            m.task_id = t.id.clone();
        }
        c.send_message(again).await.expect("answer");
        crate::grpc::task_in(&mut c, &t.id, pb::TaskState::InputRequired).await;
        let json = s
            .task_when(&t.id, |j| question(j)["spent"]["toolCalls"] == 5)
            .await;
        assert_eq!(question(&json)["allowed"]["toolCalls"], 5);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn workspace_write_answers_the_demo_agents_ls_without_asking_and_read_only_asks() {
    limit(async {
        let s = TestServer::start().await;
        // The demo agent asks before its `ls` (a command): read-only asks it, a set that
        // allows it answers without a round trip.
        let frames = s
            .stream(
                "SendStreamingMessage",
                send_md("approval", json!({"approvals": "read-only"}), None),
            )
            .await;
        assert_eq!(last(&frames).0, "TASK_STATE_INPUT_REQUIRED");
        let frames = s
            .stream(
                "SendStreamingMessage",
                send_md("approval", json!({"approvals": "workspace-write"}), None),
            )
            .await;
        let (state, id) = last(&frames);
        assert_eq!(state, "TASK_STATE_COMPLETED", "{frames:?}");
        let task = s
            .rpc("GetTask", json!({"id": id, "historyLength": 100}))
            .await["result"]
            .clone();
        let decided: Vec<&Value> = task["history"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap().iter())
            .filter(|p| p["data"]["kind"] == "rule-decision")
            .collect();
        assert_eq!(decided.len(), 1, "{task}");
        assert_eq!(decided[0]["data"]["decision"], "allow");
        assert_eq!(decided[0]["data"]["request"]["target"], "ls");
        s.shutdown().await;
    })
    .await;
}

/// A task parked at its budget question has no program: the host stops without waiting for
/// it. The grace is longer than the wait for the stop, which fails when the host waits it.
#[tokio::test]
async fn a_task_parked_at_its_budget_does_not_hold_up_the_shutdown() {
    limit(async {
        let s = TestServer::with(Options {
            grace: std::time::Duration::from_secs(60),
            ..Options::default()
        })
        .await;
        parked_at_budget(&s, "tools=20", json!({"toolCalls": 2})).await;
        // Within TestServer::shutdown's limit (20 s), well before the grace (60 s).
        s.shutdown().await;
    })
    .await;
}

/// An answer that names the question it answers must name the budget question the task
/// waits on: one meant for another question is refused (-32602) and the question keeps
/// waiting; one that names it, or none, is taken.
#[tokio::test]
async fn a_budget_question_refuses_an_answer_for_another_question() {
    limit(async {
        let s = TestServer::start().await;
        let (id, task) = parked_at_budget(&s, "tools=20", json!({"toolCalls": 1})).await;
        let q = question(&task);
        let mut data = send_md("", json!({}), Some(&id));
        data["message"]["parts"] = json!([{"data": {"approvalId": "wrong", "option": "continue"}}]);
        let by_meta = send_md("stop", json!({"approvalId": "wrong"}), Some(&id));
        for p in [data, by_meta] {
            let r = s.rpc("SendMessage", p.clone()).await;
            assert_eq!(r["error"]["code"], -32602, "{p}: {r}");
            let text = r["error"]["message"].as_str().unwrap_or_default();
            assert!(
                text.contains("'wrong'") && text.contains(q["approvalId"].as_str().unwrap()),
                "{r}"
            );
        }
        let task = s.get_task(&id).await;
        assert_eq!(question(&task), q, "the question keeps waiting");
        assert_eq!(task["metadata"]["budget"]["allowed"]["toolCalls"], 1);
        let right = send_md("stop", json!({"approvalId": q["approvalId"]}), Some(&id));
        let r = s.rpc("SendMessage", right).await;
        assert!(r["error"].is_null(), "{r}");
        s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_COMPLETED")
            .await;
        s.shutdown().await;
    })
    .await;
}

/// The time budget counts the task's runs, not the time it waits for the caller's answer:
/// a question pending longer than the budget stays that question, and its answer goes to
/// the agent.
#[tokio::test]
async fn the_time_budget_does_not_count_the_wait_for_an_answer() {
    limit(async {
        let s = TestServer::start().await;
        let r = s
            .rpc(
                "SendMessage",
                send_md("approval", json!({"budget": {"seconds": 2}}), None),
            )
            .await;
        let id = r["result"]["task"]["id"]
            .as_str()
            .expect("a task")
            .to_string();
        let task = s
            .task_when(&id, |t| t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
            .await;
        let q = question(&task);
        assert_ne!(q["kind"], "budget", "{task}");
        // Longer than the budget: the wait is not counted.
        time_passes(std::time::Duration::from_secs(3)).await;
        let task = s.get_task(&id).await;
        assert_eq!(question(&task), q, "the question keeps waiting: {task}");
        let yes = send_md("yes", json!({"approvalId": q["approvalId"]}), Some(&id));
        let r = s.rpc("SendMessage", yes).await;
        assert!(r["error"].is_null(), "{r}");
        let task = s
            .task_when(&id, |t| t["status"]["state"] == "TASK_STATE_COMPLETED")
            .await;
        let spent = task["metadata"]["budget"]["spent"]["seconds"].as_u64();
        assert!(spent.is_some_and(|s| s < 2), "{task}");
        s.shutdown().await;
    })
    .await;
}

/// A task told to continue while every running slot is taken waits for one, and says so
/// in its status, with its place in the queue, as a queued task does.
#[tokio::test]
async fn a_budget_task_continued_while_the_slots_are_taken_says_it_waits() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: agent_host::settings::HostLimits {
                max_running: 1,
                ..agent_host::settings::HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        let (id, _) = parked_at_budget(&s, "tools=20", json!({"toolCalls": 1})).await;
        // Another task takes the one slot.
        let mut p = send_params("hang");
        p["configuration"] = json!({"returnImmediately": true});
        let other = s.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .expect("a task")
            .to_string();
        s.task_when(&other, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let mut go_on = send_md("continue", json!({}), Some(&id));
        go_on["configuration"] = json!({"returnImmediately": true});
        let r = s.rpc("SendMessage", go_on).await;
        assert!(r["error"].is_null(), "{r}");
        let task = s.get_task(&id).await;
        let text = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            text.contains("Waiting for a free slot: place 1 in the queue"),
            "{task}"
        );
        // The slot freed, it runs on to its next stop.
        s.rpc("CancelTask", json!({"id": other})).await;
        s.task_when(&id, |t| question(t)["allowed"]["toolCalls"] == 2)
            .await;
        s.shutdown().await;
    })
    .await;
}

/// Under the default sandbox (each run its own `/tmp`) the demo agent's session still knows
/// its `tools=N` when a budget's "continue" resumes it: it keeps it in its state folder, the
/// context's own.
#[tokio::test]
async fn a_continued_session_keeps_its_tool_calls_in_the_sandbox() {
    if !crate::sandbox::sandbox_available() {
        return;
    }
    limit(async {
        let home = tempfile::tempdir().unwrap();
        let s = TestServer::with(crate::common::Options {
            sandbox: agent_host::settings::sandbox::SandboxSettings {
                mode: Some(agent_host::runner::sandbox::Mode::Auto),
                ..Default::default()
            },
            home: Some(home.path().to_path_buf()),
            ..crate::common::Options::default()
        })
        .await;
        let (id, _) = parked_at_budget(&s, "tools=12", json!({"toolCalls": 5})).await;
        let frames = s
            .stream(
                "SendStreamingMessage",
                send_md("continue with 5", json!({}), Some(&id)),
            )
            .await;
        assert_eq!(last(&frames).0, "TASK_STATE_INPUT_REQUIRED", "{frames:?}");
        let task = s.rpc("GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(question(&task)["spent"]["toolCalls"], 10, "{task}");
        s.shutdown().await;
    })
    .await;
}

/// Concurrent answers ("continue", "continue", "stop") to a task parked at its budget: one
/// is taken and the others refused (-32004), one program resumes, the task ends once; with
/// one running slot, every round's task still runs (no slot is lost).
#[tokio::test]
async fn concurrent_answers_to_a_budget_question_are_taken_once() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: agent_host::settings::HostLimits {
                max_running: 1,
                rate_per_minute: 0,
                auth_failures_per_minute: 0,
                ..agent_host::settings::HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        for round in 0..6 {
            let task = sent_until_budget(&s, "tools=30", json!({"toolCalls": 2})).await;
            let id = task["id"].as_str().unwrap_or_default().to_string();
            let answer = |w: &'static str| s.rpc("SendMessage", send_md(w, json!({}), Some(&id)));
            let (a, b, c) = tokio::join!(answer("continue"), answer("continue"), answer("stop"));
            let taken = [&a, &b, &c].iter().filter(|r| r["error"].is_null()).count();
            assert_eq!(taken, 1, "round {round}: {a}\n{b}\n{c}");
            for r in [&a, &b, &c] {
                if !r["error"].is_null() {
                    assert_eq!(r["error"]["code"], -32004, "round {round}: {r}");
                }
            }
            let t = s
                .task_when(&id, |t| {
                    let st = &t["status"]["state"];
                    st == "TASK_STATE_COMPLETED" || st == "TASK_STATE_INPUT_REQUIRED"
                })
                .await;
            if t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" {
                // Continued once: two more tool calls, not four.
                assert_eq!(question(&t)["allowed"]["toolCalls"], 4, "{t}");
                let r = s
                    .rpc("SendMessage", send_md("stop", json!({}), Some(&id)))
                    .await;
                assert!(r["error"].is_null(), "{r}");
            }
            s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_COMPLETED")
                .await;
        }
        s.shutdown().await;
    })
    .await;
}

/// An adapter that cannot resume sessions (jsonl): the budget question says so, and
/// "continue" starts the program again with the task's request (the demo agent's
/// `tools=30` makes its tool calls again, to the raised budget), not with a bare "continue".
#[tokio::test]
async fn continue_on_an_adapter_without_sessions_starts_again_with_the_request() {
    limit(async {
        let s = TestServer::with(Options {
            adapter: "jsonl",
            ..Options::default()
        })
        .await;
        let task = sent_until_budget(&s, "tools=30", json!({"toolCalls": 2})).await;
        let text = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(text.contains("cannot resume its session"), "{text}");
        let id = task["id"].as_str().unwrap_or_default().to_string();
        let r = s
            .rpc("SendMessage", send_md("continue", json!({}), Some(&id)))
            .await;
        let task = r["result"]["task"].clone();
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{r}");
        assert_eq!(question(&task)["spent"]["toolCalls"], 4, "{task}");
        s.rpc("SendMessage", send_md("stop", json!({}), Some(&id)))
            .await;
        s.shutdown().await;
    })
    .await;
}
