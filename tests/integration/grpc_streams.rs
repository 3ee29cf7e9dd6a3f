//! gRPC streams: cut and resumed by event id, tasks crossing between JSON-RPC and gRPC,
//! shutdown with a stream open, quick answers to a waiting task.

use std::time::Duration;

use agent_host::server::grpc::pb;
use agent_host::server::grpc::pb::stream_response::Payload;
use futures::StreamExt;
use serde_json::json;
use tonic::Code;

use crate::common::*;
use crate::grpc::*;

#[tokio::test]
async fn a_cut_stream_resumes_after_its_last_event_id() {
    limit(async {
        let (s, mut c) = grpc_server(Options::default()).await;
        let mut stream = c
            .send_streaming_message(send("slow", false))
            .await
            .expect("stream")
            .into_inner();
        let mut seen = Vec::new();
        for _ in 0..2 {
            seen.push(stream.next().await.expect("event").expect("ok"));
        }
        drop(stream); // the connection is cut
        let task_id = match &seen[0].payload {
            Some(Payload::Task(t)) => t.id.clone(),
            other => panic!("first event is the task: {other:?}"),
        };
        let last = event_id(&seen[1]);
        let rest = collect(
            c.subscribe_to_task(req(
                pb::SubscribeToTaskRequest {
                    id: task_id.clone(),
                    ..Default::default()
                },
                &[("last-event-id", &last.to_string())],
            ))
            .await
            .expect("resubscribe")
            .into_inner(),
        )
        .await;
        assert!(!rest.is_empty());
        let ids: Vec<u64> = rest.iter().map(event_id).collect();
        assert!(ids[0] > last, "nothing seen twice: {last} then {ids:?}");
        assert!(ids.windows(2).all(|w| w[1] > w[0]), "{ids:?}");
        assert_eq!(
            rest.last().and_then(state_of),
            Some(pb::TaskState::Completed)
        );
        // The same ids as SSE: a JSON-RPC replay from 0 gives every id the two streams gave.
        let frames = s
            .open_stream("SubscribeToTask", json!({"id": task_id}), Some(0))
            .await
            .all()
            .await;
        let sse_ids: Vec<u64> = frames.iter().filter_map(|f| f.id).collect();
        let mut grpc_ids = vec![event_id(&seen[0]), last];
        grpc_ids.extend(ids);
        assert!(
            grpc_ids.iter().skip(1).all(|i| sse_ids.contains(i)),
            "gRPC {grpc_ids:?} vs SSE {sse_ids:?}"
        );
        assert_eq!(sse_ids.last(), grpc_ids.last());
        // A bad event id is refused.
        let st = c
            .subscribe_to_task(req(
                pb::SubscribeToTaskRequest {
                    id: "x".into(),
                    ..Default::default()
                },
                &[("last-event-id", "not-a-number")],
            ))
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn tasks_cross_between_json_rpc_and_grpc() {
    limit(async {
        let (s, mut c) = grpc_server(Options::default()).await;
        // Started over JSON-RPC, streamed over gRPC.
        let mut p = send_params("slow");
        p["configuration"] = json!({"returnImmediately": true});
        let r = s.rpc("SendMessage", p).await;
        let id = r["result"]["task"]["id"]
            .as_str()
            .expect("task id")
            .to_string();
        let events = collect(
            c.subscribe_to_task(pb::SubscribeToTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("subscribe over gRPC")
            .into_inner(),
        )
        .await;
        assert_eq!(
            events.last().and_then(state_of),
            Some(pb::TaskState::Completed)
        );
        let t = c
            .get_task(pb::GetTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        let rpc = s.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(rpc["result"]["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(
            t.artifacts.len(),
            rpc["result"]["artifacts"].as_array().map_or(0, Vec::len)
        );

        // Started over gRPC, streamed over JSON-RPC (SSE), answered and finished there.
        let t = task_of(
            c.send_message(send("question", true))
                .await
                .expect("send")
                .into_inner(),
        );
        task_in(&mut c, &t.id, pb::TaskState::InputRequired).await;
        let mut answer = send_params("main.rs");
        answer["message"]["taskId"] = json!(t.id);
        answer["message"]["contextId"] = json!(t.context_id);
        let mut sse = s.open_stream("SendStreamingMessage", answer, None).await;
        let frames = sse.all().await;
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{frames:?}"
        );
        let done = task_in(&mut c, &t.id, pb::TaskState::Completed).await;
        assert_eq!(done.id, t.id);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn shutdown_ends_open_grpc_streams() {
    limit(async {
        let (s, mut c) = grpc_server(Options::default()).await;
        let mut stream = c
            .send_streaming_message(send("hang", false))
            .await
            .expect("stream")
            .into_inner();
        let first = stream.next().await.expect("first event").expect("ok");
        assert!(matches!(first.payload, Some(Payload::Task(_))));
        // The server stops (as on SIGTERM) with the stream open: the task ends, so does the
        // stream, and the server returns (TestServer::shutdown fails after 20 s otherwise).
        let reader = tokio::spawn(async move {
            let mut rest = Vec::new();
            while let Some(Ok(m)) = stream.next().await {
                rest.push(m);
            }
            rest
        });
        s.shutdown().await;
        let rest = reader.await.expect("reader");
        let last = rest.last().and_then(state_of);
        assert!(
            matches!(last, Some(pb::TaskState::Canceled | pb::TaskState::Failed)),
            "the stream ends with the task's end: {rest:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn quick_answers_to_an_input_required_task_end_blocking_and_streamed_sends() {
    limit(async {
        let (s, mut c) = grpc_server(Options {
            adapter: "conformance",
            ..Options::default()
        })
        .await;
        let mut first = send("start", false);
        if let Some(m) = first.message.as_mut() {
            m.message_id = format!("tck-input-required-{}", uuid());
        }
        let t = task_of(c.send_message(first).await.expect("send").into_inner());
        assert_eq!(task_state(&t), pb::TaskState::InputRequired);
        for text in ["one", "two"] {
            let mut follow = send(text, false);
            if let Some(m) = follow.message.as_mut() {
                m.message_id = format!("tck-input-required-{}", uuid());
                m.task_id = t.id.clone();
            }
            let r = tokio::time::timeout(Duration::from_secs(10), c.send_message(follow))
                .await
                .expect("a blocking follow-up answers once the task waits again")
                .expect("follow-up");
            assert_eq!(
                task_state(&task_of(r.into_inner())),
                pb::TaskState::InputRequired
            );
        }
        // Streamed: the task as it is, and the stream ends once it waits again (the
        // conformance agent answers at once, often before the snapshot is read).
        for _ in 0..3 {
            let mut follow = send("three", false);
            if let Some(m) = follow.message.as_mut() {
                m.message_id = format!("tck-input-required-{}", uuid());
                m.task_id = t.id.clone();
            }
            let stream = c
                .send_streaming_message(follow)
                .await
                .expect("stream")
                .into_inner();
            let events = tokio::time::timeout(Duration::from_secs(10), collect(stream))
                .await
                .expect("the stream ends when the task waits again");
            assert!(matches!(events[0].payload, Some(Payload::Task(_))));
            assert_eq!(
                events.last().and_then(state_of),
                Some(pb::TaskState::InputRequired)
            );
        }
        s.shutdown().await;
    })
    .await;
}
