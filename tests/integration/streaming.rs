//! SSE: streamed sends in both versions, resubscribe with replay, disconnects.

use serde_json::{json, Value};

use crate::common::*;

fn has_key_anywhere(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(m) => m.contains_key(key) || m.values().any(|x| has_key_anywhere(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key_anywhere(x, key)),
        _ => false,
    }
}

#[tokio::test]
async fn v1_stream_goes_task_working_artifacts_completed() {
    limit(async {
        let s = TestServer::start().await;
        let frames = s.stream("SendStreamingMessage", send_params("hello")).await;
        assert!(frames.len() >= 5, "{frames:?}");
        assert!(
            frames[0].data["result"]["task"].is_object(),
            "first event is the task"
        );
        assert_eq!(
            frames[0].data["id"], "s1",
            "JSON-RPC id echoed in every frame"
        );
        let ids: Vec<u64> = frames
            .iter()
            .map(|f| f.id.expect("every frame has an id"))
            .collect();
        assert!(ids.windows(2).all(|w| w[1] > w[0]), "ids increase: {ids:?}");
        let st = states(&frames);
        assert_eq!(st.first().map(String::as_str), Some("TASK_STATE_SUBMITTED"));
        assert!(st.contains(&"TASK_STATE_WORKING".to_string()));
        assert_eq!(st.last().map(String::as_str), Some("TASK_STATE_COMPLETED"));
        assert!(frames
            .iter()
            .any(
                |f| f.data["result"]["artifactUpdate"]["artifact"]["artifactId"]
                    == "assistant-response"
            ));
        for f in &frames {
            assert!(
                !has_key_anywhere(&f.data, "kind"),
                "no kind in v1.0: {}",
                f.data
            );
            assert!(!has_key_anywhere(&f.data, "final"), "no final in v1.0");
        }
    })
    .await;
}

#[tokio::test]
async fn v03_stream_marks_the_last_event_final() {
    limit(async {
        let s = TestServer::start().await;
        let frames = s.stream("message/stream", send_params03("hello")).await;
        assert_eq!(frames[0].data["result"]["kind"], "task");
        let last = &frames.last().unwrap().data["result"];
        assert_eq!(last["kind"], "status-update");
        assert_eq!(last["status"]["state"], "completed");
        assert_eq!(last["final"], true);
        let finals = frames
            .iter()
            .filter(|f| f.data["result"]["final"] == true)
            .count();
        assert_eq!(finals, 1);
        assert!(frames
            .iter()
            .any(|f| f.data["result"]["kind"] == "artifact-update"));
        // An input-required status ends the stream too, marked final.
        let frames = s.stream("message/stream", send_params03("approval")).await;
        let last = &frames.last().unwrap().data["result"];
        assert_eq!(last["status"]["state"], "input-required");
        assert_eq!(last["final"], true);
        let id = last["taskId"].as_str().unwrap().to_string();
        // Answering by stream: the task as it is now, then the rest of the turn.
        let mut p = send_params03("yes");
        p["message"]["taskId"] = json!(id);
        let frames = s.stream("message/stream", p).await;
        assert_eq!(frames[0].data["result"]["kind"], "task");
        assert_eq!(
            frames.last().unwrap().data["result"]["status"]["state"],
            "completed"
        );
    })
    .await;
}

#[tokio::test]
async fn resubscribe_with_last_event_id_replays_what_was_missed() {
    limit(async {
        let s = TestServer::start().await;
        let mut r = s
            .open_stream("SendStreamingMessage", send_params("slow"), None)
            .await;
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(r.next().await.expect("frame"));
        }
        let task_id = seen[0].data["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let when_dropped = s.get_task(&task_id).await;
        drop(r); // the client drops the connection
                 // The task moves on while no one listens: there is something to miss.
        eventually("the task moves on while no one listens", WAIT, async || {
            let t = s.get_task(&task_id).await;
            ready(t != when_dropped, t)
        })
        .await;
        let last = seen.last().unwrap().id.unwrap();
        let mut r = s
            .open_stream("SubscribeToTask", json!({"id": task_id}), Some(last))
            .await;
        let rest = r.all().await;
        assert!(!rest.is_empty());
        let ids: Vec<u64> = seen
            .iter()
            .chain(rest.iter())
            .map(|f| f.id.unwrap())
            .collect();
        let expected: Vec<u64> = (1..=ids.len() as u64).collect();
        assert_eq!(ids, expected, "no event lost, none repeated");
        assert_eq!(
            states(&rest).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED")
        );
        // The same over v0.3.
        let mut r = s
            .open_stream("message/stream", send_params03("slow"), None)
            .await;
        let first = r.next().await.unwrap();
        let task_id = first.data["result"]["id"].as_str().unwrap().to_string();
        drop(r);
        let mut r = s
            .open_stream("tasks/resubscribe", json!({"id": task_id}), first.id)
            .await;
        let rest = r.all().await;
        assert_eq!(rest[0].id, Some(first.id.unwrap() + 1));
        assert_eq!(rest.last().unwrap().data["result"]["final"], true);
    })
    .await;
}

#[tokio::test]
async fn subscribe_starts_with_the_task_and_ends_at_terminal() {
    limit(async {
        let s = TestServer::start().await;
        let mut p = send_params("slow");
        p["configuration"] = json!({"returnImmediately": true});
        let id = s.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let frames = s.stream("SubscribeToTask", json!({"id": id})).await;
        assert_eq!(frames[0].data["result"]["task"]["id"], id.as_str());
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED")
        );
        // Two subscribers see the same events in the same order.
        let mut p = send_params("slow");
        p["configuration"] = json!({"returnImmediately": true});
        let id = s.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let (a, b) = tokio::join!(
            s.stream("SubscribeToTask", json!({"id": id})),
            s.stream("SubscribeToTask", json!({"id": id}))
        );
        let tail = |f: &[Frame]| -> Vec<u64> { f.iter().skip(1).map(|x| x.id.unwrap()).collect() };
        let (ta, tb) = (tail(&a), tail(&b));
        let common = ta.iter().filter(|i| tb.contains(i)).count();
        assert!(common > 0 && ta.ends_with(&tb[tb.len() - common..]));
        // A terminal task cannot be subscribed to (without Last-Event-ID).
        let v = s.rpc("SubscribeToTask", json!({"id": id})).await;
        assert_eq!(v["error"]["code"], -32004, "{v}");
        // With Last-Event-ID its log can still be replayed.
        let mut r = s
            .open_stream("SubscribeToTask", json!({"id": id}), Some(1))
            .await;
        assert!(r.is_sse);
        let replay = r.all().await;
        assert_eq!(replay[0].id, Some(2));
        let v = s.rpc("SubscribeToTask", json!({"id": "nope"})).await;
        assert_eq!(v["error"]["code"], -32001);
    })
    .await;
}

#[tokio::test]
async fn a_client_that_disconnects_does_not_cancel_the_task() {
    limit(async {
        let s = TestServer::start().await;
        let mut r = s
            .open_stream("SendStreamingMessage", send_params("slow"), None)
            .await;
        let first = r.next().await.unwrap();
        drop(r);
        let id = first.data["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let t = s
            .task_when(&id, |t| t["status"]["state"] == "TASK_STATE_COMPLETED")
            .await;
        assert!(t["artifacts"].is_array());
    })
    .await;
}

#[tokio::test]
async fn keep_alive_comments_flow_while_the_agent_is_quiet() {
    limit(async {
        let s = TestServer::start().await;
        let mut r = s
            .open_stream("SendStreamingMessage", send_params("hang"), None)
            .await;
        let first = r.next().await.unwrap();
        let id = first.data["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        // Read until the init status; then the agent prints nothing: pings only.
        while states(&[r.next().await.unwrap()])
            .first()
            .map(String::as_str)
            != Some("TASK_STATE_WORKING")
        {}
        // Two keep-alives while the agent is quiet; then the task is canceled.
        assert!(
            r.read_pings(2).await,
            "the stream ended before two keep-alives"
        );
        s.rpc("CancelTask", json!({"id": id})).await;
        let rest = r.all().await;
        assert!(r.pings >= 2, "pings: {}", r.pings);
        assert_eq!(
            states(&rest).last().map(String::as_str),
            Some("TASK_STATE_CANCELED")
        );
    })
    .await;
}

#[tokio::test]
async fn the_sqlite_store_serves_the_same_flows() {
    limit(async {
        let s = TestServer::with(Options {
            sqlite: true,
            ..Options::default()
        })
        .await;
        let v = s.rpc("SendMessage", send_params("hello")).await;
        assert_eq!(
            v["result"]["task"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let frames = s
            .stream("SendStreamingMessage", send_params("flood=300"))
            .await;
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED")
        );
        let id = frames[0].data["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let mut r = s
            .open_stream("SubscribeToTask", json!({"id": id}), Some(5))
            .await;
        let replay = r.all().await;
        let ids: Vec<u64> = replay.iter().map(|f| f.id.unwrap()).collect();
        assert_eq!(
            ids,
            (6..=frames.last().unwrap().id.unwrap()).collect::<Vec<_>>()
        );
        let t = s
            .rpc("GetTask", json!({"id": id, "historyLength": 1}))
            .await["result"]
            .clone();
        let answer = t["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["artifactId"] == "assistant-response")
            .unwrap()["parts"][0]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            answer.ends_with(" chunk 300"),
            "{}",
            &answer[answer.len() - 40..]
        );
        let list = s.rpc("ListTasks", json!({"pageSize": 1})).await["result"].clone();
        assert_eq!(list["totalSize"], 2);
        assert_eq!(list["tasks"][0]["id"], id.as_str());
    })
    .await;
}

/// Subscribing to a task that already waits for input: the stream is the task, and ends
/// there (JSON-RPC v1.0 and v0.3, HTTP+JSON), as a stream ends at an input-required event.
#[tokio::test]
async fn subscribing_to_a_waiting_task_ends_after_the_task() {
    limit(async {
        let s = TestServer::start().await;
        let r = s.rpc("SendMessage", send_params("approval")).await;
        let id = r["result"]["task"]["id"]
            .as_str()
            .expect("a task")
            .to_string();
        s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED")
            .await;
        let ends = std::time::Duration::from_secs(10);
        for method in ["SubscribeToTask", "tasks/resubscribe"] {
            let frames = tokio::time::timeout(ends, s.stream(method, json!({"id": id})))
                .await
                .unwrap_or_else(|_| panic!("{method}: the stream did not end"));
            assert_eq!(frames.len(), 1, "{method}: {frames:?}");
        }
        for (path, version) in [("/a2a/rest", Some("1.0")), ("/a2a/rest03/v1", None)] {
            let mut req = s
                .client
                .get(format!("{}{path}/tasks/{id}:subscribe", s.base));
            if let Some(v) = version {
                req = req.header("A2A-Version", v);
            }
            let mut r = SseReader::from_response(req.send().await.expect("subscribe"));
            assert!(r.is_sse, "{path}");
            let frames = tokio::time::timeout(ends, r.all())
                .await
                .unwrap_or_else(|_| panic!("{path}: the stream did not end"));
            assert_eq!(frames.len(), 1, "{path}: {frames:?}");
        }
        s.shutdown().await;
    })
    .await;
}
