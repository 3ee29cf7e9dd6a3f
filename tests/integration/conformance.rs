//! The `conformance` adapter through the real server and runner: what the A2A conformance kit
//! (a2aproject/a2a-tck, 1.0-dev) expects for each messageId prefix, over JSON-RPC; and the
//! request shapes the kit sends (proto field names).

use serde_json::{json, Value};

use crate::common::*;

async fn server() -> TestServer {
    TestServer::with(Options {
        adapter: "conformance",
        legacy_card: false,
        ..Options::default()
    })
    .await
}

fn msg(prefix: &str) -> Value {
    json!({"message": {"messageId": format!("{prefix}-0123abcd"), "role": "ROLE_USER",
        "parts": [{"text": "TCK test"}]}})
}

async fn send(s: &TestServer, prefix: &str) -> Value {
    let v = s.rpc("SendMessage", msg(prefix)).await;
    assert!(v.get("error").is_none(), "{prefix}: {v}");
    v["result"].clone()
}

fn first_part(task: &Value) -> Value {
    task["artifacts"][0]["parts"][0].clone()
}

#[tokio::test]
async fn the_v1_prefix_table_over_json_rpc() {
    limit(async {
        let s = server().await;

        let t = &send(&s, "tck-complete-task").await["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        assert_eq!(t["status"]["message"]["parts"][0]["text"], "Hello from TCK");

        let t = &send(&s, "tck-artifact-text").await["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        assert_eq!(t["artifacts"].as_array().map(Vec::len), Some(1), "{t}");
        assert_eq!(first_part(t)["text"], "Generated text content");

        let t = &send(&s, "tck-artifact-file").await["task"];
        let p = first_part(t);
        assert_eq!(p["raw"], "dGNr", "{t}");
        assert_eq!(p["filename"], "output.txt");
        assert_eq!(p["mediaType"], "text/plain");

        let t = &send(&s, "tck-artifact-file-url").await["task"];
        assert_eq!(
            first_part(t)["url"],
            "https://example.com/output.txt",
            "{t}"
        );

        let t = &send(&s, "tck-artifact-data").await["task"];
        assert_eq!(
            first_part(t)["data"],
            json!({"key": "value", "count": 42}),
            "{t}"
        );

        // A Message, not a Task.
        let r = send(&s, "tck-message-response").await;
        assert!(r.get("task").is_none(), "{r}");
        assert_eq!(r["message"]["role"], "ROLE_AGENT");
        assert_eq!(r["message"]["parts"][0]["text"], "Direct message response");
        assert!(r["message"].get("taskId").is_none(), "{r}");

        let t = &send(&s, "tck-reject-task").await["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_REJECTED", "{t}");

        // input-required: answers with tck-input-required keep it waiting, another
        // prefix completes it; every answer is in the history.
        let t = send(&s, "tck-input-required").await["task"].clone();
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{t}");
        let id = t["id"].as_str().unwrap_or_default().to_string();
        for (prefix, want) in [
            ("tck-input-required", "TASK_STATE_INPUT_REQUIRED"),
            ("tck-complete-task", "TASK_STATE_COMPLETED"),
        ] {
            let mut m = msg(prefix);
            m["message"]["taskId"] = json!(id);
            let t = &send_raw(&s, m).await["task"];
            assert_eq!(t["status"]["state"], want, "{t}");
        }
        let full = s.rpc("GetTask", json!({"id": id})).await["result"].clone();
        let users = full["history"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "ROLE_USER")
            .count();
        assert_eq!(users, 3, "{full}");
    })
    .await;
}

async fn send_raw(s: &TestServer, params: Value) -> Value {
    let v = s.rpc("SendMessage", params).await;
    assert!(v.get("error").is_none(), "{v}");
    v["result"].clone()
}

#[tokio::test]
async fn the_v1_stream_scenarios() {
    limit(async {
        let s = server().await;
        let frames = s
            .stream("SendStreamingMessage", msg("tck-stream-artifact-chunked"))
            .await;
        let chunks: Vec<Value> = frames
            .iter()
            .filter_map(|f| f.data["result"].get("artifactUpdate").cloned())
            .collect();
        assert_eq!(chunks.len(), 2, "{chunks:?}");
        assert_eq!(
            chunks[0]["artifact"]["artifactId"],
            chunks[1]["artifact"]["artifactId"]
        );
        assert_eq!(chunks[0]["artifact"]["parts"][0]["text"], "chunk-1 ");
        assert!(chunks[0].get("append").is_none() && chunks[0].get("lastChunk").is_none());
        assert_eq!(chunks[1]["artifact"]["parts"][0]["text"], "chunk-2");
        assert_eq!(chunks[1]["append"], true);
        assert_eq!(chunks[1]["lastChunk"], true);
        let st = states(&frames);
        assert_eq!(st.first().map(String::as_str), Some("TASK_STATE_SUBMITTED"));
        assert!(st.contains(&"TASK_STATE_WORKING".to_string()), "{st:?}");
        assert_eq!(st.last().map(String::as_str), Some("TASK_STATE_COMPLETED"));

        let frames = s
            .stream("SendStreamingMessage", msg("tck-stream-001"))
            .await;
        let text: Vec<&str> = frames
            .iter()
            .filter_map(|f| {
                f.data["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str()
            })
            .collect();
        assert_eq!(text, ["Stream hello from TCK"]);

        // The resubscribe task runs for at least 4 s.
        let started = std::time::Instant::now();
        let t = send(&s, "test-resubscribe-message-id").await;
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        assert!(started.elapsed() >= std::time::Duration::from_secs(4));
    })
    .await;
}

/// The kit's JSON-RPC client sends proto field names (`history_length`, `task_id`); ProtoJSON
/// parsers accept them next to the JSON names.
#[tokio::test]
async fn proto_field_names_are_accepted() {
    limit(async {
        let s = server().await;
        let t = send(&s, "tck-complete-task").await["task"].clone();
        let id = t["id"].as_str().unwrap_or_default();
        let none = s
            .rpc("GetTask", json!({"id": id, "history_length": 0}))
            .await;
        assert!(none["result"].get("history").is_none(), "{none}");
        let one = s
            .rpc("GetTask", json!({"id": id, "history_length": 1}))
            .await;
        assert_eq!(one["result"]["history"].as_array().map(Vec::len), Some(1));
        let page = s
            .rpc(
                "ListTasks",
                json!({"context_id": t["contextId"], "page_size": 1}),
            )
            .await;
        assert_eq!(page["result"]["pageSize"], 1, "{page}");
        assert_eq!(page["result"]["tasks"][0]["id"], id);
    })
    .await;
}

/// The 0.3 kit's expectation: every task stays working; a blocking send (with a wait limit)
/// answers with the working task, messages with the task's id reach the agent while it works
/// and join the history, and the task can be canceled.
#[tokio::test]
async fn v03_mode_keeps_tasks_working_and_takes_messages() {
    limit(async {
        let s = TestServer::with(Options {
            adapter: "conformance",
            env: vec![("CONFORMANCE_VERSION".into(), "0.3".into())],
            blocking_wait: Some(std::time::Duration::from_millis(300)),
            ..Options::default()
        })
        .await;
        let v = s.rpc03("message/send", send_params03("hello")).await;
        let t = &v["result"];
        assert_eq!(t["status"]["state"], "working", "{v}");
        let id = t["id"].as_str().unwrap_or_default();
        let v = s
            .rpc03("tasks/get", json!({"id": id, "historyLength": 1}))
            .await;
        assert_eq!(
            v["result"]["history"].as_array().map(Vec::len),
            Some(1),
            "{v}"
        );
        for text in ["more", "and more"] {
            let mut again = send_params03(text);
            again["message"]["taskId"] = json!(id);
            let v = s.rpc03("message/send", again).await;
            assert_eq!(v["result"]["status"]["state"], "working", "{v}");
        }
        let v = s.rpc03("tasks/get", json!({"id": id})).await;
        let texts: Vec<&str> = v["result"]["history"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["parts"][0]["text"].as_str())
            .collect();
        assert_eq!(texts, ["hello", "more", "and more"], "{v}");
        let v = s.rpc03("tasks/cancel", json!({"id": id})).await;
        assert_eq!(v["result"]["status"]["state"], "canceled", "{v}");
    })
    .await;
}

/// An agent that reads no messages while it works (the demo agent) refuses them with
/// UnsupportedOperationError, and keeps working.
#[tokio::test]
async fn a_working_agent_that_takes_no_messages_refuses_them() {
    limit(async {
        let s = TestServer::start().await;
        let mut p = send_params("hang");
        p["configuration"] = json!({"returnImmediately": true});
        let v = s.rpc("SendMessage", p).await;
        let id = v["result"]["task"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let mut again = send_params("also this");
        again["message"]["taskId"] = json!(id);
        let v = s.rpc("SendMessage", again).await;
        assert_eq!(v["error"]["code"], -32004, "{v}");
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains("takes no messages while it works"), "{m}");
        let v = s.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(v["result"]["status"]["state"], "TASK_STATE_CANCELED", "{v}");
    })
    .await;
}
