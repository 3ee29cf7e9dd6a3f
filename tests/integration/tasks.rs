//! Tasks through the JSON-RPC methods of both versions: send, get, list, cancel, approvals,
//! contexts.
use serde_json::{json, Value};

use crate::common::*;

fn artifact_text(task: &Value, id: &str) -> String {
    task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["artifactId"] == id)
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn v1_blocking_send_get_and_history_length() {
    limit(async {
        let s = TestServer::start().await;
        let v = s
            .rpc("SendMessage", send_params("Add a health check"))
            .await;
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        assert!(t.get("kind").is_none(), "no kind in v1.0");
        let result = artifact_text(t, "result");
        assert!(result.contains("I looked at the project"), "{result}");
        assert_eq!(artifact_text(t, "assistant-response"), result);
        assert_eq!(t["metadata"]["adapter"], "demo");
        assert!(t["metadata"]["sessionId"].is_string());
        assert_eq!(t["metadata"]["usage"]["inputTokens"], 12);
        let id = t["id"].as_str().unwrap();
        // History: the user message and the final agent message.
        let full = s.rpc("GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(full["history"].as_array().unwrap().len(), 2);
        assert_eq!(full["history"][0]["role"], "ROLE_USER");
        assert_eq!(full["history"][0]["taskId"], id);
        let one = s
            .rpc("GetTask", json!({"id": id, "historyLength": 1}))
            .await["result"]
            .clone();
        assert_eq!(one["history"].as_array().unwrap().len(), 1);
        assert_eq!(one["history"][0]["role"], "ROLE_AGENT");
        let none = s
            .rpc("GetTask", json!({"id": id, "historyLength": 0}))
            .await["result"]
            .clone();
        assert!(
            none.get("history").is_none(),
            "historyLength 0 = no history in v1.0"
        );
        // In v0.3, historyLength 0 means unset.
        let v03 = s
            .rpc03("tasks/get", json!({"id": id, "historyLength": 0}))
            .await["result"]
            .clone();
        assert_eq!(v03["history"].as_array().unwrap().len(), 2);
        assert_eq!(v03["kind"], "task");
        assert_eq!(v03["status"]["state"], "completed");
        // taskId is accepted as an alias of id in v0.3.
        let alias = s.rpc03("tasks/get", json!({"taskId": id})).await;
        assert_eq!(alias["result"]["id"], id);
    })
    .await;
}

#[tokio::test]
async fn v03_blocking_and_non_blocking_send_and_cancel() {
    limit(async {
        let s = TestServer::start().await;
        let v = s.rpc03("message/send", send_params03("hello")).await;
        assert_eq!(v["result"]["kind"], "task", "{v}");
        assert_eq!(v["result"]["status"]["state"], "completed");
        assert_eq!(v["result"]["artifacts"][1]["parts"][0]["kind"], "text");
        // Non-blocking: configuration.blocking = false.
        let mut p = send_params03("hang");
        p["configuration"] = json!({"blocking": false});
        let v = s.rpc03("message/send", p).await;
        let st = v["result"]["status"]["state"].as_str().unwrap();
        assert!(st == "submitted" || st == "working", "{v}");
        let id = v["result"]["id"].as_str().unwrap().to_string();
        s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let c = s.rpc03("tasks/cancel", json!({"id": id})).await;
        assert_eq!(c["result"]["status"]["state"], "canceled", "{c}");
        // Canceling again: not cancelable.
        let c = s.rpc03("tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(c["error"]["code"], -32002);
        // Sending to a terminal task: unsupported operation.
        let mut p = send_params03("more");
        p["message"]["taskId"] = json!(id);
        let v = s.rpc03("message/send", p).await;
        assert_eq!(v["error"]["code"], -32004);
    })
    .await;
}

#[tokio::test]
async fn v1_return_immediately_and_cancel() {
    limit(async {
        let s = TestServer::start().await;
        let mut p = send_params("hang");
        p["configuration"] = json!({"returnImmediately": true});
        let v = s.rpc("SendMessage", p).await;
        let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
        let st = v["result"]["task"]["status"]["state"].as_str().unwrap();
        assert!(st == "TASK_STATE_SUBMITTED" || st == "TASK_STATE_WORKING");
        s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let c = s.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
        let g = s.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(g["result"]["status"]["state"], "TASK_STATE_CANCELED");
        let c = s.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(c["error"]["code"], -32002);
        assert_eq!(c["error"]["data"][0]["reason"], "TASK_NOT_CANCELABLE");
        let c = s.rpc("CancelTask", json!({"id": "unknown"})).await;
        assert_eq!(c["error"]["code"], -32001);
    })
    .await;
}

#[tokio::test]
async fn list_tasks_filters_and_pages() {
    limit(async {
        let s = TestServer::start().await;
        let ctx = uuid();
        for i in 0..3 {
            let mut p = send_params(&format!("task {i}"));
            p["message"]["contextId"] = json!(ctx);
            let v = s.rpc("SendMessage", p).await;
            assert_eq!(v["result"]["task"]["contextId"], ctx.as_str());
        }
        s.rpc("SendMessage", send_params("other context")).await;
        let all = s.rpc("ListTasks", json!({})).await["result"].clone();
        assert_eq!(all["totalSize"], 4);
        assert_eq!(all["pageSize"], 50);
        assert_eq!(all["nextPageToken"], "");
        assert!(all["tasks"][0].get("artifacts").is_none(), "artifacts only when asked");
        let mine = s.rpc("ListTasks", json!({"contextId": ctx, "pageSize": 2})).await["result"].clone();
        assert_eq!(mine["totalSize"], 3);
        assert_eq!(mine["tasks"].as_array().unwrap().len(), 2);
        let token = mine["nextPageToken"].as_str().unwrap().to_string();
        assert!(!token.is_empty());
        let rest = s
            .rpc("ListTasks", json!({"contextId": ctx, "pageSize": 2, "pageToken": token}))
            .await["result"]
            .clone();
        assert_eq!(rest["tasks"].as_array().unwrap().len(), 1);
        assert_eq!(rest["nextPageToken"], "");
        let mut ids: Vec<String> = mine["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .chain(rest["tasks"].as_array().unwrap())
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3, "pages do not overlap");
        // Newest status first.
        let ts: Vec<&str> = all["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["status"]["timestamp"].as_str().unwrap())
            .collect();
        assert!(ts.windows(2).all(|w| w[0] >= w[1]), "{ts:?}");
        let with = s
            .rpc("ListTasks", json!({"status": "TASK_STATE_COMPLETED", "includeArtifacts": true, "historyLength": 0}))
            .await["result"]
            .clone();
        assert_eq!(with["totalSize"], 4);
        assert!(with["tasks"][0]["artifacts"].is_array());
        assert!(with["tasks"][0].get("history").is_none());
        let none = s.rpc("ListTasks", json!({"status": "TASK_STATE_FAILED"})).await["result"].clone();
        assert_eq!(none, json!({"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}));
        let later = s
            .rpc("ListTasks", json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}))
            .await["result"]
            .clone();
        assert_eq!(later["totalSize"], 0);
    })
    .await;
}

#[tokio::test]
async fn approval_round_trip_allow_and_deny() {
    limit(async {
        let s = TestServer::start().await;
        for (answer, expect) in [("yes", "looked at the project"), ("no", "denied")] {
            let v = s
                .rpc(
                    "SendMessage",
                    send_params("approval: clean the build directory"),
                )
                .await;
            let t = &v["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
            let msg = &t["status"]["message"];
            let data = msg["parts"]
                .as_array()
                .unwrap()
                .iter()
                .find_map(|p| p.get("data"))
                .expect("approval data part");
            assert_eq!(data["kind"], "command");
            assert_eq!(data["tool"], "Bash");
            assert!(data["approvalId"].is_string());
            let id = t["id"].as_str().unwrap().to_string();
            let ctx = t["contextId"].as_str().unwrap().to_string();
            // A reply that is not an answer is refused; the task still waits.
            let mut bad = send_params("maybe later");
            bad["message"]["taskId"] = json!(id);
            let r = s.rpc("SendMessage", bad).await;
            assert_eq!(r["error"]["code"], -32602, "{r}");
            // A reply naming another context is refused.
            let mut wrong = send_params("yes");
            wrong["message"]["taskId"] = json!(id);
            wrong["message"]["contextId"] = json!("another-context");
            assert_eq!(s.rpc("SendMessage", wrong).await["error"]["code"], -32602);
            let mut reply = send_params(answer);
            reply["message"]["taskId"] = json!(id);
            let r = s.rpc("SendMessage", reply).await;
            let t = &r["result"]["task"];
            assert_eq!(t["id"], id.as_str());
            assert_eq!(
                t["contextId"],
                ctx.as_str(),
                "contextId inferred from the task"
            );
            assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
            let result = artifact_text(t, "result");
            assert!(result.contains(expect), "{answer}: {result}");
            let roles: Vec<&str> = t["history"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap())
                .collect();
            assert_eq!(
                roles,
                ["ROLE_USER", "ROLE_AGENT", "ROLE_USER", "ROLE_AGENT"]
            );
        }
        // A data-part answer works too, over v0.3.
        let v = s
            .rpc03("message/send", send_params03("approval please"))
            .await;
        assert_eq!(v["result"]["status"]["state"], "input-required");
        let mut reply = send_params03("");
        reply["message"]["parts"] = json!([{"kind": "data", "data": {"decision": "allow"}}]);
        reply["message"]["taskId"] = v["result"]["id"].clone();
        let r = s.rpc03("message/send", reply).await;
        assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
        // Answering a task that is not waiting: unsupported; unknown task: not found.
        let mut p = send_params("yes");
        p["message"]["taskId"] = json!("no-such-task");
        assert_eq!(s.rpc("SendMessage", p).await["error"]["code"], -32001);
    })
    .await;
}

#[tokio::test]
async fn a_context_runs_one_turn_at_a_time_and_resumes_its_session() {
    limit(async {
        let s = TestServer::start().await;
        let ctx = uuid();
        let mut first = send_params("slow first turn");
        first["message"]["contextId"] = json!(ctx);
        first["configuration"] = json!({"returnImmediately": true});
        let a = s.rpc("SendMessage", first).await["result"]["task"].clone();
        let mut second = send_params("second turn");
        second["message"]["contextId"] = json!(ctx);
        second["configuration"] = json!({"returnImmediately": true});
        let b = s.rpc("SendMessage", second).await["result"]["task"].clone();
        let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
        // While the first runs, the second waits (queued, not rejected).
        s.task_when(a_id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let bt = s.rpc("GetTask", json!({"id": b_id})).await["result"].clone();
        assert_eq!(bt["status"]["state"], "TASK_STATE_SUBMITTED");
        let a_done = s
            .task_when(a_id, |t| t["status"]["state"] == "TASK_STATE_COMPLETED")
            .await;
        let b_done = s
            .task_when(b_id, |t| t["status"]["state"] == "TASK_STATE_COMPLETED")
            .await;
        // The second turn resumed the first's CLI session.
        let session = a_done["metadata"]["sessionId"].as_str().unwrap();
        assert_eq!(b_done["metadata"]["sessionId"], session);
        assert!(artifact_text(&b_done, "result").contains(&format!("Resuming session {session}")));
        assert!(
            b_done["history"][0]["contextId"] == ctx.as_str()
                && b_done["contextId"] == ctx.as_str()
        );
    })
    .await;
}

#[tokio::test]
async fn different_contexts_run_concurrently() {
    limit(async {
        let s = TestServer::start().await;
        let mut ids = Vec::new();
        for _ in 0..3 {
            let mut p = send_params("hang");
            p["configuration"] = json!({"returnImmediately": true});
            ids.push(
                s.rpc("SendMessage", p).await["result"]["task"]["id"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        for id in &ids {
            s.task_when(id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
                .await;
        }
        for id in &ids {
            let c = s.rpc("CancelTask", json!({"id": id})).await;
            assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
        }
        // A queued task can be canceled before it starts.
        let ctx = uuid();
        let mut p = send_params("hang");
        p["message"]["contextId"] = json!(ctx);
        p["configuration"] = json!({"returnImmediately": true});
        let running = s.rpc("SendMessage", p.clone()).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        p["message"]["messageId"] = json!(uuid());
        let queued = s.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let c = s.rpc("CancelTask", json!({"id": queued})).await;
        assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
        // CancelTask returns once the process is gone.
        s.rpc("CancelTask", json!({"id": running})).await;
    })
    .await;
}

#[tokio::test]
async fn v03_streaming_errors_come_as_a_stream() {
    limit(async {
        let s = TestServer::start().await;
        for (method, params) in [
            ("tasks/resubscribe", json!({"id": "no-such-task"})),
            ("message/stream", json!({"message": {"kind": "message", "messageId": "m-x", "role": "user", "taskId": "no-such-task", "parts": [{"kind": "text", "text": "hi"}]}})),
        ] {
            let resp = s
                .client
                .post(format!("{}/", s.base))
                .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.headers()["content-type"], "text/event-stream", "{method}");
            let body = resp.text().await.unwrap();
            let data = body.strip_prefix("data: ").unwrap_or_else(|| panic!("{body}"));
            let v: serde_json::Value = serde_json::from_str(data.trim()).unwrap();
            assert_eq!(v["id"], 7);
            assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
        }
        // v1.0 streaming methods answer errors as a JSON-RPC response.
        let r = s.rpc("SubscribeToTask", json!({"id": "no-such-task"})).await;
        assert_eq!(r["error"]["code"], -32001);
    })
    .await;
}
