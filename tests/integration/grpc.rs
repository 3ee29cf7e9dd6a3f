//! The gRPC binding with a tonic client generated from the same `proto/a2a.proto`: every
//! method, errors as statuses with ErrorInfo, authentication (streams: `grpc_streams.rs`).
//! The helpers here serve both files.

use agent_host::server::grpc::pb;
use agent_host::server::grpc::pb::a2a_service_client::A2aServiceClient;
use agent_host::server::grpc::pb::stream_response::Payload;
use agent_host::settings::{Credential, Secret, Security};
use futures::StreamExt;
use tonic::transport::Channel;
use tonic::{Code, Request, Status, Streaming};
use tonic_types::StatusExt;

use crate::common::*;

pub(crate) type Client = A2aServiceClient<Channel>;

pub(crate) async fn grpc_server(o: Options) -> (TestServer, Client) {
    let s = TestServer::with(Options { grpc: true, ..o }).await;
    let url = s.grpc.clone().expect("gRPC on");
    let client = A2aServiceClient::connect(url).await.expect("connect");
    (s, client)
}

pub(crate) fn with_push() -> Options {
    Options {
        push: Some(agent_host::push::PushSettings {
            allow_private: true,
            ..agent_host::push::PushSettings::default()
        }),
        ..Options::default()
    }
}

pub(crate) fn text_message(text: &str) -> pb::Message {
    pb::Message {
        message_id: uuid(),
        role: pb::Role::User as i32,
        parts: vec![pb::Part {
            content: Some(pb::part::Content::Text(text.into())),
            ..Default::default()
        }],
        ..Default::default()
    }
}

pub(crate) fn send(text: &str, return_immediately: bool) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        message: Some(text_message(text)),
        configuration: Some(pb::SendMessageConfiguration {
            return_immediately,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A request with metadata entries.
pub(crate) fn req<T>(msg: T, metadata: &[(&'static str, &str)]) -> Request<T> {
    let mut r = Request::new(msg);
    for (k, v) in metadata {
        r.metadata_mut()
            .insert(*k, v.parse().expect("metadata value"));
    }
    r
}

pub(crate) fn state_of(sr: &pb::StreamResponse) -> Option<pb::TaskState> {
    let s = match sr.payload.as_ref()? {
        Payload::Task(t) => t.status.as_ref()?.state,
        Payload::StatusUpdate(u) => u.status.as_ref()?.state,
        _ => return None,
    };
    pb::TaskState::try_from(s).ok()
}

/// The `metadata.eventId` of a streamed event.
pub(crate) fn event_id(sr: &pb::StreamResponse) -> u64 {
    let md = match sr.payload.as_ref().expect("payload") {
        Payload::Task(t) => &t.metadata,
        Payload::Message(m) => &m.metadata,
        Payload::StatusUpdate(u) => &u.metadata,
        Payload::ArtifactUpdate(u) => &u.metadata,
    };
    let v = md
        .as_ref()
        .and_then(|m| m.fields.get(agent_host::server::grpc::EVENT_ID_KEY))
        .expect("every streamed event has an eventId");
    match &v.kind {
        Some(agent_host::server::grpc::wkt::value::Kind::StringValue(s)) => {
            s.parse().expect("a number")
        }
        other => panic!("eventId is not a string: {other:?}"),
    }
}

pub(crate) async fn collect(mut s: Streaming<pb::StreamResponse>) -> Vec<pb::StreamResponse> {
    let mut out = Vec::new();
    while let Some(m) = s.next().await {
        out.push(m.expect("stream message"));
    }
    out
}

pub(crate) fn task_of(r: pb::SendMessageResponse) -> pb::Task {
    match r.payload {
        Some(pb::send_message_response::Payload::Task(t)) => t,
        other => panic!("expected a task, got {other:?}"),
    }
}

pub(crate) fn task_state(t: &pb::Task) -> pb::TaskState {
    pb::TaskState::try_from(t.status.as_ref().expect("status").state).expect("state")
}

/// The task once its state is `want` (GetTask over gRPC).
pub(crate) async fn task_in(c: &mut Client, id: &str, want: pb::TaskState) -> pb::Task {
    eventually(&format!("task {id} reaches {want:?}"), WAIT, async || {
        let req = pb::GetTaskRequest {
            id: id.into(),
            ..Default::default()
        };
        let t = c.get_task(req).await.expect("get").into_inner();
        ready(task_state(&t) == want, t)
    })
    .await
}

/// The ErrorInfo reason and domain of a status.
pub(crate) fn reason(st: &Status) -> Option<(String, String)> {
    st.get_details_error_info().map(|i| (i.reason, i.domain))
}

#[allow(
    clippy::too_many_lines,
    reason = "one scenario through every gRPC method in order, each step on the task the earlier ones made"
)]
#[tokio::test]
async fn every_method_answers_over_grpc() {
    limit(async {
        let (s, mut c) = grpc_server(with_push()).await;
        // The card names the gRPC interface.
        let card: serde_json::Value = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .send()
            .await
            .expect("card")
            .json()
            .await
            .expect("json");
        let grpc_addr = s.grpc.as_deref().unwrap().trim_start_matches("http://");
        assert!(
            card["supportedInterfaces"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["protocolBinding"] == "GRPC"
                    && i["url"] == grpc_addr
                    && i["protocolVersion"] == "1.0"),
            "{card}"
        );

        // SendMessage (blocking) → the completed task with its answer.
        let resp = c
            .send_message(req(
                send("hello", false),
                &[
                    ("a2a-version", "1.0"),
                    ("a2a-extensions", "urn:agent-host:tool-trace:v1"),
                ],
            ))
            .await
            .expect("send");
        assert_eq!(
            resp.metadata()
                .get("a2a-extensions")
                .and_then(|v| v.to_str().ok()),
            Some("urn:agent-host:tool-trace:v1"),
            "the extension in use is named in the response"
        );
        let t = task_of(resp.into_inner());
        assert_eq!(task_state(&t), pb::TaskState::Completed);
        assert!(t
            .artifacts
            .iter()
            .any(|a| a.artifact_id == "assistant-response"));

        // GetTask, with history.
        let got = c
            .get_task(pb::GetTaskRequest {
                id: t.id.clone(),
                history_length: Some(10),
                ..Default::default()
            })
            .await
            .expect("get")
            .into_inner();
        assert_eq!(got.id, t.id);
        assert_eq!(got.context_id, t.context_id);
        assert!(!got.history.is_empty());

        // ListTasks.
        let list = c
            .list_tasks(pb::ListTasksRequest::default())
            .await
            .expect("list")
            .into_inner();
        assert!(list.tasks.iter().any(|x| x.id == t.id));
        assert_eq!(list.total_size as usize, list.tasks.len());

        // SendStreamingMessage: the task, then updates until completed; event ids increase.
        let stream = c
            .send_streaming_message(send("hello", false))
            .await
            .expect("stream")
            .into_inner();
        let events = collect(stream).await;
        assert!(
            matches!(events[0].payload, Some(Payload::Task(_))),
            "{events:?}"
        );
        assert_eq!(state_of(&events[0]), Some(pb::TaskState::Submitted));
        assert_eq!(
            events.last().and_then(state_of),
            Some(pb::TaskState::Completed)
        );
        assert!(events
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::ArtifactUpdate(_)))));
        let ids: Vec<u64> = events.iter().map(event_id).collect();
        assert!(ids.windows(2).all(|w| w[1] > w[0]), "{ids:?}");

        // CancelTask on a task that would run forever.
        let hang = task_of(
            c.send_message(send("hang", true))
                .await
                .expect("send hang")
                .into_inner(),
        );
        let canceled = c
            .cancel_task(pb::CancelTaskRequest {
                id: hang.id.clone(),
                ..Default::default()
            })
            .await
            .expect("cancel")
            .into_inner();
        assert_eq!(task_state(&canceled), pb::TaskState::Canceled);

        // SubscribeToTask on a running task: the task as it is, then to the end.
        let slow = task_of(
            c.send_message(send("slow", true))
                .await
                .expect("send")
                .into_inner(),
        );
        let events = collect(
            c.subscribe_to_task(pb::SubscribeToTaskRequest {
                id: slow.id.clone(),
                ..Default::default()
            })
            .await
            .expect("subscribe")
            .into_inner(),
        )
        .await;
        assert!(matches!(events[0].payload, Some(Payload::Task(_))));
        assert_eq!(
            events.last().and_then(state_of),
            Some(pb::TaskState::Completed)
        );

        // The four push-config methods.
        let created = c
            .create_task_push_notification_config(pb::TaskPushNotificationConfig {
                task_id: t.id.clone(),
                url: "http://127.0.0.1:9/hook".into(),
                token: "tok".into(),
                ..Default::default()
            })
            .await
            .expect("create push config")
            .into_inner();
        assert_eq!(created.task_id, t.id);
        assert!(!created.id.is_empty());
        let got = c
            .get_task_push_notification_config(pb::GetTaskPushNotificationConfigRequest {
                task_id: t.id.clone(),
                id: created.id.clone(),
                ..Default::default()
            })
            .await
            .expect("get push config")
            .into_inner();
        assert_eq!(got.url, "http://127.0.0.1:9/hook");
        let listed = c
            .list_task_push_notification_configs(pb::ListTaskPushNotificationConfigsRequest {
                task_id: t.id.clone(),
                ..Default::default()
            })
            .await
            .expect("list push configs")
            .into_inner();
        assert_eq!(listed.configs.len(), 1);
        c.delete_task_push_notification_config(pb::DeleteTaskPushNotificationConfigRequest {
            task_id: t.id.clone(),
            id: created.id.clone(),
            ..Default::default()
        })
        .await
        .expect("delete push config");
        let st = c
            .get_task_push_notification_config(pb::GetTaskPushNotificationConfigRequest {
                task_id: t.id.clone(),
                id: created.id,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::NotFound, "{st:?}");

        // GetExtendedAgentCard: none without authentication (see the auth test for one).
        let st = c
            .get_extended_agent_card(pb::GetExtendedAgentCardRequest::default())
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unimplemented);
        assert_eq!(
            reason(&st),
            Some(("UNSUPPORTED_OPERATION".into(), "a2a-protocol.org".into()))
        );
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn errors_are_statuses_with_error_info() {
    limit(async {
        let (s, mut c) = grpc_server(Options::default()).await;
        // Not found: NOT_FOUND with ErrorInfo TASK_NOT_FOUND and the task id.
        let st = c
            .get_task(pb::GetTaskRequest {
                id: "no-such-task".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::NotFound, "{st:?}");
        let info = st.get_details_error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "TASK_NOT_FOUND");
        assert_eq!(info.domain, "a2a-protocol.org");
        assert_eq!(
            info.metadata.get("taskId").map(String::as_str),
            Some("no-such-task")
        );
        // Invalid params: a message without parts (or without a message at all).
        let st = c
            .send_message(pb::SendMessageRequest::default())
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
        let mut empty = send("x", false);
        if let Some(m) = empty.message.as_mut() {
            m.parts.clear();
        }
        let st = c.send_message(empty).await.unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
        assert!(!st.message().is_empty());
        // Push is off: PUSH_NOTIFICATION_NOT_SUPPORTED.
        let st = c
            .list_task_push_notification_configs(pb::ListTaskPushNotificationConfigsRequest {
                task_id: "t".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unimplemented);
        assert_eq!(
            reason(&st).map(|r| r.0).as_deref(),
            Some("PUSH_NOTIFICATION_NOT_SUPPORTED")
        );
        // A version this binding does not speak.
        let st = c
            .get_task(req(
                pb::GetTaskRequest {
                    id: "x".into(),
                    ..Default::default()
                },
                &[("a2a-version", "0.3")],
            ))
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unimplemented);
        assert_eq!(
            reason(&st).map(|r| r.0).as_deref(),
            Some("VERSION_NOT_SUPPORTED")
        );
        // An unknown tenant.
        let st = c
            .get_task(pb::GetTaskRequest {
                id: "x".into(),
                tenant: "nobody".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument);
        // Subscribing to an ended task without an event id.
        let done = task_of(
            c.send_message(send("hello", false))
                .await
                .expect("send")
                .into_inner(),
        );
        let st = c
            .subscribe_to_task(pb::SubscribeToTaskRequest {
                id: done.id,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unimplemented);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn grpc_needs_credentials_and_keeps_tasks_to_their_owner() {
    limit(async {
        let security = Security {
            credentials: vec![
                Credential {
                    name: "alice".into(),
                    secret: Secret::Bearer("alice-token-0123456789".into()),
                },
                Credential {
                    name: "bob".into(),
                    secret: Secret::ApiKey("bob-key-0123456789".into()),
                },
            ],
            api_key_header: "X-API-Key".into(),
            ..Security::default()
        };
        let (s, mut c) = grpc_server(Options {
            security,
            ..Options::default()
        })
        .await;
        const ALICE: (&str, &str) = ("authorization", "Bearer alice-token-0123456789");
        const BOB: (&str, &str) = ("x-api-key", "bob-key-0123456789");
        // Without credentials, or with wrong ones: UNAUTHENTICATED, on every kind of method.
        let st = c.send_message(send("hello", false)).await.unwrap_err();
        assert_eq!(st.code(), Code::Unauthenticated, "{st:?}");
        let st = c
            .send_message(req(
                send("hello", false),
                &[("authorization", "Bearer wrong")],
            ))
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unauthenticated);
        let st = c
            .send_streaming_message(send("hello", false))
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unauthenticated);
        let st = c
            .get_extended_agent_card(pb::GetExtendedAgentCardRequest::default())
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::Unauthenticated);
        // Alice's task: hers, not Bob's.
        let t = task_of(
            c.send_message(req(send("hello", false), &[ALICE]))
                .await
                .expect("send as alice")
                .into_inner(),
        );
        let mine = c
            .get_task(req(
                pb::GetTaskRequest {
                    id: t.id.clone(),
                    ..Default::default()
                },
                &[ALICE],
            ))
            .await;
        assert!(mine.is_ok());
        let st = c
            .get_task(req(
                pb::GetTaskRequest {
                    id: t.id.clone(),
                    ..Default::default()
                },
                &[BOB],
            ))
            .await
            .unwrap_err();
        assert_eq!(st.code(), Code::NotFound);
        let bobs = c
            .list_tasks(req(pb::ListTasksRequest::default(), &[BOB]))
            .await
            .expect("list as bob")
            .into_inner();
        assert!(bobs.tasks.is_empty());
        // The extended card, for an authenticated caller.
        let card = c
            .get_extended_agent_card(req(pb::GetExtendedAgentCardRequest::default(), &[BOB]))
            .await
            .expect("extended card")
            .into_inner();
        assert!(card
            .capabilities
            .as_ref()
            .expect("capabilities")
            .extensions
            .iter()
            .any(|e| e.uri == "urn:agent-host:runtime:v1"));
        assert!(card.security_schemes.contains_key("bearer"), "{card:?}");
        s.shutdown().await;
    })
    .await;
}

/// With several adapters, gRPC's `tenant` picks one: a message under one tenant that
/// continues another adapter's conversation (its context) is refused with InvalidArgument
/// naming both, as the HTTP bindings refuse it (before, the tenant's adapter started a second
/// conversation under the same context id); under its own tenant it continues.
#[tokio::test]
async fn a_message_under_another_tenant_than_its_conversations_is_refused() {
    limit(async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port()
            .to_string();
        let _host = HostProcess::spawn(
            &[
                ("AGENT_ADAPTER", "demo,jsonl"),
                ("AGENT_HOST_GRPC_PORT", port.as_str()),
            ],
            &[],
        )
        .await;
        let mut c = A2aServiceClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .expect("connect");
        let under = |tenant: &str, context: &str| {
            let mut r = send("echo again", false);
            r.tenant = tenant.into();
            if let Some(m) = r.message.as_mut() {
                m.context_id = context.into();
            }
            r
        };
        let first = task_of(
            c.send_message(under("jsonl", ""))
                .await
                .expect("send")
                .into_inner(),
        );
        let context = first.context_id.clone();
        let st = c.send_message(under("", &context)).await.unwrap_err();
        assert_eq!(st.code(), Code::InvalidArgument, "{st:?}");
        assert!(
            st.message().contains("'jsonl'") && st.message().contains("'demo'"),
            "{st:?}"
        );
        let same = task_of(
            c.send_message(under("jsonl", &context))
                .await
                .expect("a follow-up under its own tenant")
                .into_inner(),
        );
        assert_eq!(same.context_id, context);
    })
    .await;
}
