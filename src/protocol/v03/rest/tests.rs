use super::*;
use serde_json::json;

#[test]
fn sample_send_request_decodes() {
    // Appendix C.5, REST 0.3 `POST /v1/message:send`.
    let req = decode_send_request(json!({"message":{"messageId":"tck-artifact-file-r03","role":"ROLE_USER","content":[{"text":"hi"}]}})).unwrap();
    assert_eq!(
        serde_json::to_value(&req).unwrap(),
        json!({"message":{"messageId":"tck-artifact-file-r03","role":"ROLE_USER","parts":[{"text":"hi"}]}})
    );
    assert!(req.configuration.is_none(), "no configuration: blocking");
}

#[test]
fn python_sdk_proto_field_names_decode() {
    // The Python SDK sends MessageToDict(preserving_proto_field_name=True).
    let req = decode_send_request(json!({
        "request": {"message_id": "m1", "context_id": "c1", "task_id": "t1", "role": "ROLE_USER",
                    "content": [{"text": "hi"},
                                {"file": {"file_with_uri": "https://x/f", "mime_type": "text/plain", "name": "f"}},
                                {"data": {"data": {"k": 1}}, "metadata": {"m": true}}]},
        "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 3, "blocking": true},
        "metadata": {"a": 1}
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_value(&req).unwrap(),
        json!({
            "message": {"messageId": "m1", "contextId": "c1", "taskId": "t1", "role": "ROLE_USER",
                        "parts": [{"text": "hi"},
                                  {"url": "https://x/f", "mediaType": "text/plain", "filename": "f"},
                                  {"data": {"k": 1}, "metadata": {"m": true}}]},
            "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3},
            "metadata": {"a": 1}
        })
    );
}

#[test]
fn blocking_is_a_proto_bool() {
    let msg = json!({"messageId": "m", "role": "ROLE_USER", "content": [{"text": "hi"}]});
    let ri = |body: Value| {
        decode_send_request(body)
            .unwrap()
            .configuration
            .unwrap_or_default()
            .return_immediately
    };
    assert!(!ri(json!({"message": msg})), "no configuration: blocking");
    assert!(
        ri(json!({"message": msg, "configuration": {}})),
        "absent bool is false"
    );
    assert!(ri(
        json!({"message": msg, "configuration": {"blocking": false}})
    ));
    assert!(!ri(
        json!({"message": msg, "configuration": {"blocking": true}})
    ));
    let h = decode_send_request(
        json!({"message": msg, "configuration": {"blocking": true, "historyLength": 0}}),
    )
    .unwrap();
    assert_eq!(h.configuration.unwrap().history_length, None, "0 is unset");
}

#[test]
fn bad_bodies_are_invalid_params() {
    for body in [
        json!({}),
        json!({"message": {"messageId": "m", "content": [{"text": "x"}]}}),
        json!({"message": {"role": "ROLE_USER", "content": [{"text": "x"}]}}),
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{}]}}),
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"text": "x", "data": {}}]}}),
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"file": {}}]}}),
    ] {
        let e = decode_send_request(body.clone()).unwrap_err();
        assert_eq!(e.code(), -32602, "{body}");
        assert_eq!(e.http_status(), 400, "{body}");
    }
}

fn sample_task() -> v1::Task {
    v1::Task {
        id: "T1".into(),
        context_id: "C1".into(),
        status: v1::TaskStatus {
            state: v1::TaskState::Completed,
            message: None,
            timestamp: Some("2026-01-01T00:00:00.000Z".into()),
        },
        artifacts: vec![v1::Artifact {
            artifact_id: "A1".into(),
            parts: vec![v1::Part {
                raw: Some("dGNr".into()),
                media_type: Some("text/plain".into()),
                filename: Some("output.txt".into()),
                ..v1::Part::default()
            }],
            ..v1::Artifact::default()
        }],
        history: vec![v1::Message {
            message_id: "tck-artifact-file-r03".into(),
            context_id: Some("C1".into()),
            task_id: Some("T1".into()),
            role: v1::Role::User,
            parts: vec![v1::Part::text("hi")],
            ..v1::Message::default()
        }],
        metadata: None,
    }
}

#[test]
fn task_matches_sample() {
    // Appendix C.5, the REST 0.3 send result (ids, timestamp and bytes filled in).
    let want_task = json!({"id":"T1","contextId":"C1","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-01-01T00:00:00.000Z"},"artifacts":[{"artifactId":"A1","parts":[{"file":{"fileWithBytes":"dGNr","mimeType":"text/plain","name":"output.txt"}}]}],"history":[{"messageId":"tck-artifact-file-r03","contextId":"C1","taskId":"T1","role":"ROLE_USER","content":[{"text":"hi"}]}]});
    let t = sample_task();
    assert_eq!(task_to_rest03(&t), want_task);
    assert_eq!(
        send_response_to_rest03(&v1::SendMessageResponse::Task(t.clone())),
        json!({"task": want_task})
    );
    assert_eq!(
        stream_event_to_rest03(&v1::StreamResponse::Task(t)),
        json!({"task": want_task})
    );
}

#[test]
fn canceled_is_spelled_cancelled_and_status_message_is_message() {
    let mut t = sample_task();
    t.status.state = v1::TaskState::Canceled;
    t.status.message = Some(v1::Message::agent(vec![v1::Part::text("bye")], "T1", "C1"));
    let v = task_to_rest03(&t);
    assert_eq!(v["status"]["state"], "TASK_STATE_CANCELLED");
    assert_eq!(v["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(v["status"]["message"]["content"][0]["text"], "bye");
    assert!(v["status"]["message"].get("parts").is_none());
    // `update` (the proto field name) is read as `message`.
    let s: RestStatus03 = serde_json::from_value(json!({"state":"TASK_STATE_WORKING","update":{"messageId":"m","role":"ROLE_AGENT","content":[]}})).unwrap();
    assert_eq!(s.message.unwrap().message_id, "m");
    for (st, name) in [
        (TaskState03::Submitted, "TASK_STATE_SUBMITTED"),
        (TaskState03::InputRequired, "TASK_STATE_INPUT_REQUIRED"),
        (TaskState03::Canceled, "TASK_STATE_CANCELLED"),
        (TaskState03::Unknown, "TASK_STATE_UNSPECIFIED"),
    ] {
        assert_eq!(state_name(st), name);
    }
}

#[test]
fn stream_events_match_the_proto_shape() {
    let status = |state| {
        v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: "T1".into(),
            context_id: "C1".into(),
            status: v1::TaskStatus {
                state,
                message: None,
                timestamp: Some("2026-01-01T00:00:01.000Z".into()),
            },
            metadata: None,
        })
    };
    assert_eq!(
        stream_event_to_rest03(&status(v1::TaskState::Working)),
        json!({"statusUpdate":{"taskId":"T1","contextId":"C1","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-01-01T00:00:01.000Z"},"final":false}})
    );
    assert_eq!(
        stream_event_to_rest03(&status(v1::TaskState::Completed))["statusUpdate"]["final"],
        true
    );
    let art = v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
        task_id: "T1".into(),
        context_id: "C1".into(),
        artifact: v1::Artifact {
            artifact_id: "A1".into(),
            parts: vec![v1::Part::data(json!([1, 2]))],
            ..v1::Artifact::default()
        },
        append: true,
        last_chunk: false,
        metadata: None,
    });
    assert_eq!(
        stream_event_to_rest03(&art),
        json!({"artifactUpdate":{"taskId":"T1","contextId":"C1","artifact":{"artifactId":"A1","parts":[{"data":{"data":{"value":[1,2]}},"metadata":{"data_part_compat":true}}]},"append":true,"lastChunk":false}})
    );
    let m = v1::Message::agent(vec![v1::Part::text("ok")], "T1", "C1");
    let v = stream_event_to_rest03(&v1::StreamResponse::Message(m.clone()));
    assert_eq!(v["message"]["role"], "ROLE_AGENT");
    assert_eq!(v["message"]["content"][0]["text"], "ok");
    assert_eq!(
        send_response_to_rest03(&v1::SendMessageResponse::Message(m)),
        v
    );
    // What we write, a ProtoJSON reader reads back (the `msg` alias included).
    let back: RestStreamResponse03 = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(to_json(&back), v);
    let alias: RestStreamResponse03 =
        serde_json::from_value(json!({"msg": v["message"].clone()})).unwrap();
    assert_eq!(to_json(&alias), v);
}

#[test]
fn parts_round_trip_through_rest() {
    let parts = vec![
        v1::Part::text("t"),
        v1::Part {
            raw: Some("aGk=".into()),
            media_type: Some("text/plain".into()),
            filename: Some("a.txt".into()),
            ..v1::Part::default()
        },
        v1::Part {
            url: Some("https://x/f".into()),
            ..v1::Part::default()
        },
        v1::Part::data(json!({"k": [1]})),
        v1::Part::data(json!("scalar")),
    ];
    for p in parts {
        let rest = RestPart03::from(&super::super::part_to_v03(&p));
        let wire = serde_json::to_value(&rest).unwrap();
        let back: RestPart03 = serde_json::from_value(wire).unwrap();
        let p03 = Part03::try_from(back).unwrap();
        assert_eq!(v1::Part::from(p03), p);
    }
}

#[test]
fn create_push_config_takes_json_and_proto_field_names() {
    // Python SDK 1.3.0 (proto field names).
    let sdk = decode_create_push_config(json!({
        "parent": "tasks/T",
        "config": {"name": "tasks/T/pushNotificationConfigs/c1",
                   "push_notification_config": {"url": "https://h/hook", "token": "tok",
                       "authentication": {"schemes": ["Bearer"], "credentials": "x"}}}
    }))
    .unwrap();
    assert_eq!(sdk.url, "https://h/hook");
    assert_eq!(sdk.token.as_deref(), Some("tok"));
    assert_eq!(sdk.id.as_deref(), Some("c1"), "the id from config.name");
    assert_eq!(sdk.authentication.unwrap().schemes, vec!["Bearer"]);
    // JSON names, with configId.
    let js = decode_create_push_config(json!({
        "parent": "tasks/T", "configId": "c2",
        "config": {"pushNotificationConfig": {"url": "https://h/hook"}}
    }))
    .unwrap();
    assert_eq!(js.id.as_deref(), Some("c2"));
    let proto_id = decode_create_push_config(json!({
        "parent": "tasks/T", "config_id": "c3",
        "config": {"push_notification_config": {"url": "https://h/hook"}}
    }))
    .unwrap();
    assert_eq!(proto_id.id.as_deref(), Some("c3"));
    // A bare config, with its own id.
    let bare = decode_create_push_config(json!({"id": "c4", "url": "https://h/hook"})).unwrap();
    assert_eq!(bare.id.as_deref(), Some("c4"));
    // No url anywhere: invalid params, saying what is missing.
    let err =
        decode_create_push_config(json!({"config": {"push_notification_config": {}}})).unwrap_err();
    assert!(err.to_string().contains("url"), "{err}");
}

#[test]
fn a_send_with_the_python_sdk_push_config_decodes() {
    // message:stream with a push config in the configuration (proto names throughout).
    let req = decode_send_request(json!({
        "request": {"message_id": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}]},
        "configuration": {"push_notification": {"url": "https://h/hook", "token": "t"},
                          "blocking": false}
    }))
    .unwrap();
    let cfg = req.configuration.unwrap();
    assert_eq!(
        cfg.task_push_notification_config.unwrap().url,
        "https://h/hook"
    );
}
