use super::super::decode_params;
use super::*;
use serde_json::json;

fn send_request(params: Value) -> Result<v1::SendMessageRequest, A2AError> {
    v1::SendMessageRequest::try_from(decode_params::<MessageSendParams03>(params)?)
}

#[test]
fn messages_round_trip_v03_v1_v03_for_every_part_kind() {
    let wire = json!({
        "kind": "message",
        "messageId": "m1",
        "role": "user",
        "contextId": "c1",
        "taskId": "t1",
        "referenceTaskIds": ["t0"],
        "extensions": ["urn:x"],
        "metadata": {"k": "v"},
        "parts": [
            {"kind": "text", "text": "hello", "metadata": {"p": 1}},
            {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "a.txt"}},
            {"kind": "file", "file": {"uri": "https://example.com/f.pdf", "mimeType": "application/pdf"}},
            {"kind": "data", "data": {"n": 42, "nested": {"x": [1, 2]}}},
        ]
    });
    let m03: Message03 = serde_json::from_value(wire.clone()).unwrap();
    let m1 = v1::Message::from(m03);
    assert_eq!(
        serde_json::to_value(&m1).unwrap(),
        json!({
            "messageId": "m1",
            "contextId": "c1",
            "taskId": "t1",
            "role": "ROLE_USER",
            "referenceTaskIds": ["t0"],
            "extensions": ["urn:x"],
            "metadata": {"k": "v"},
            "parts": [
                {"text": "hello", "metadata": {"p": 1}},
                {"raw": "aGk=", "mediaType": "text/plain", "filename": "a.txt"},
                {"url": "https://example.com/f.pdf", "mediaType": "application/pdf"},
                {"data": {"n": 42, "nested": {"x": [1, 2]}}},
            ]
        })
    );
    assert_eq!(serde_json::to_value(message_to_v03(&m1)).unwrap(), wire);

    let agent: Message03 =
        serde_json::from_value(json!({"messageId":"m2","role":"agent","parts":[]})).unwrap();
    assert_eq!(v1::Message::from(agent).role, v1::Role::Agent);
}

#[test]
fn text_part_media_type_and_filename_are_dropped() {
    let p = v1::Part {
        text: Some("x".into()),
        media_type: Some("text/markdown".into()),
        filename: Some("x.md".into()),
        ..v1::Part::default()
    };
    assert_eq!(
        serde_json::to_value(part_to_v03(&p)).unwrap(),
        json!({"kind":"text","text":"x"})
    );
}

#[test]
fn non_object_data_is_wrapped_and_unwrapped() {
    for x in [
        json!([1, 2]),
        json!("s"),
        json!(3),
        json!(null),
        json!(true),
    ] {
        let p = v1::Part::data(x.clone());
        let p03 = part_to_v03(&p);
        assert_eq!(
            serde_json::to_value(&p03).unwrap(),
            json!({"kind":"data","data":{"value": x},"metadata":{"data_part_compat":true}})
        );
        // Through the wire and back.
        let back: Part03 = serde_json::from_value(serde_json::to_value(&p03).unwrap()).unwrap();
        assert_eq!(v1::Part::from(back), p);
    }
    // Other metadata survives both ways.
    let mut md = Metadata::new();
    md.insert("keep".into(), json!(1));
    let p = v1::Part {
        data: Some(json!([1])),
        metadata: Some(md),
        ..v1::Part::default()
    };
    let p03 = part_to_v03(&p);
    assert_eq!(
        serde_json::to_value(&p03).unwrap()["metadata"],
        json!({"keep":1,"data_part_compat":true})
    );
    assert_eq!(v1::Part::from(p03), p);
    // An object is not wrapped, and an unflagged {"value": x} is not unwrapped.
    let obj = v1::Part::data(json!({"value": 1}));
    let p03 = part_to_v03(&obj);
    assert_eq!(
        serde_json::to_value(&p03).unwrap(),
        json!({"kind":"data","data":{"value":1}})
    );
    assert_eq!(v1::Part::from(p03), obj);
    // A flag on some other shape is left alone.
    let odd: Part03 = serde_json::from_value(
        json!({"kind":"data","data":{"a":1},"metadata":{"data_part_compat":true}}),
    )
    .unwrap();
    let p = v1::Part::from(odd);
    assert_eq!(p.data, Some(json!({"a":1})));
    assert_eq!(
        p.metadata,
        json!({"data_part_compat":true}).as_object().cloned()
    );
}

#[test]
fn blocking_maps_to_inverse_return_immediately() {
    let msg = json!({"messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]});
    let cfg = |blocking: Value| {
        let mut c = json!({});
        if !blocking.is_null() {
            c["blocking"] = blocking;
        }
        send_request(json!({"message": msg, "configuration": c}))
            .unwrap()
            .configuration
            .unwrap()
    };
    assert!(!cfg(json!(true)).return_immediately);
    assert!(cfg(json!(false)).return_immediately);
    assert!(!cfg(Value::Null).return_immediately);
    let req = send_request(json!({"message": msg})).unwrap();
    assert!(req.configuration.is_none());
    // v1 default (returnImmediately false) means blocking, same as v0.3 absent.
    assert!(!req.configuration.unwrap_or_default().return_immediately);
}

#[test]
fn history_length_zero_means_unset_in_v03() {
    let msg = json!({"messageId":"m","role":"user","parts":[{"text":"hi"}]});
    let hl = |h: Value| {
        send_request(json!({"message": msg, "configuration": {"historyLength": h}}))
            .map(|r| r.configuration.and_then(|c| c.history_length))
    };
    assert_eq!(hl(json!(0)).unwrap(), None);
    assert_eq!(hl(json!(5)).unwrap(), Some(5));
    assert!(
        matches!(hl(json!(-1)), Err(A2AError::InvalidParams(m)) if m.contains("historyLength"))
    );

    let get = |p: Value| v1::GetTaskRequest::try_from(decode_params::<TaskQueryParams03>(p)?);
    let g = get(json!({"id":"t","historyLength":0})).unwrap();
    assert_eq!(g.history_length, None);
    assert_eq!(
        serde_json::to_value(&g).unwrap(),
        json!({"id":"t"}),
        "no historyLength: 0 may reach v1, where it means no history"
    );
    assert_eq!(
        get(json!({"taskId":"t","historyLength":2}))
            .unwrap()
            .history_length,
        Some(2)
    );
    assert_eq!(get(json!({"taskId":"t"})).unwrap().id, "t");
}

#[test]
fn task_id_params_convert_to_cancel_and_subscribe() {
    let p: TaskIdParams03 = decode_params(json!({"taskId":"t9","metadata":{"a":1}})).unwrap();
    let c = v1::CancelTaskRequest::from(p.clone());
    assert_eq!(c.id, "t9");
    assert_eq!(
        c.metadata,
        Some(json!({"a":1}).as_object().unwrap().clone())
    );
    assert_eq!(v1::SubscribeToTaskRequest::from(p).id, "t9");
}

#[test]
fn sample_message_send_request_decodes() {
    // Appendix C.5, `message/send` params.
    let req = send_request(json!({"message":{"kind":"message","messageId":"tck-artifact-text-1","role":"user","parts":[{"kind":"text","text":"hi"}]}})).unwrap();
    assert_eq!(
        serde_json::to_value(&req).unwrap(),
        json!({"message":{"messageId":"tck-artifact-text-1","role":"ROLE_USER","parts":[{"text":"hi"}]}})
    );
}

#[test]
fn bad_part_in_send_params_is_invalid_params() {
    let err = send_request(
        json!({"message":{"messageId":"m","role":"user","parts":[{"kind":"text","data":{}}]}}),
    )
    .unwrap_err();
    assert!(
        matches!(&err, A2AError::InvalidParams(m) if m.contains("kind \"text\" has no \"text\"")),
        "{err:?}"
    );
    assert_eq!(err.code(), -32602);
    let err = send_request(
        json!({"message":{"messageId":"m","role":"user","parts":[{"kind":"video","text":"x"}]}}),
    )
    .unwrap_err();
    assert!(
        matches!(&err, A2AError::InvalidParams(m) if m.contains("unknown part kind \"video\"")),
        "{err:?}"
    );
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
            parts: vec![v1::Part::text("Generated text content")],
            ..v1::Artifact::default()
        }],
        history: vec![v1::Message {
            message_id: "tck-artifact-text-1".into(),
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
fn task_matches_sample_exactly() {
    // Appendix C.5 `message/send` result, ids and timestamp filled in.
    let want = json!({"artifacts":[{"artifactId":"A1","parts":[{"kind":"text","text":"Generated text content"}]}],"contextId":"C1","history":[{"contextId":"C1","kind":"message","messageId":"tck-artifact-text-1","parts":[{"kind":"text","text":"hi"}],"role":"user","taskId":"T1"}],"id":"T1","kind":"task","status":{"state":"completed","timestamp":"2026-01-01T00:00:00.000Z"}});
    let t = sample_task();
    assert_eq!(serde_json::to_value(task_to_v03(&t)).unwrap(), want);
    assert_eq!(
        send_response_to_v03(&v1::SendMessageResponse::Task(t.clone())),
        want,
        "v0.3 send results are bare, not {{\"task\":…}}"
    );
    assert_eq!(stream_event_to_v03(&v1::StreamResponse::Task(t)), want);
    // A task without artifacts/history still has every REQUIRED member.
    let bare = v1::Task {
        id: "T".into(),
        status: v1::TaskStatus {
            state: v1::TaskState::Submitted,
            ..v1::TaskStatus::default()
        },
        ..v1::Task::default()
    };
    assert_eq!(
        serde_json::to_value(task_to_v03(&bare)).unwrap(),
        json!({"id":"T","contextId":"","kind":"task","status":{"state":"submitted"}})
    );
}

fn status_event(state: v1::TaskState) -> v1::StreamResponse {
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
}

#[test]
fn status_updates_match_samples_and_set_final() {
    // Appendix C.5 `message/stream` events.
    assert_eq!(
        stream_event_to_v03(&status_event(v1::TaskState::Working)),
        json!({"contextId":"C1","final":false,"kind":"status-update","status":{"state":"working","timestamp":"2026-01-01T00:00:01.000Z"},"taskId":"T1"})
    );
    assert_eq!(
        stream_event_to_v03(&status_event(v1::TaskState::Completed)),
        json!({"contextId":"C1","final":true,"kind":"status-update","status":{"state":"completed","timestamp":"2026-01-01T00:00:01.000Z"},"taskId":"T1"})
    );
    let finals = [
        (v1::TaskState::Unspecified, false),
        (v1::TaskState::Submitted, false),
        (v1::TaskState::Working, false),
        (v1::TaskState::Completed, true),
        (v1::TaskState::Failed, true),
        (v1::TaskState::Canceled, true),
        (v1::TaskState::Rejected, true),
        (v1::TaskState::InputRequired, true),
        (v1::TaskState::AuthRequired, true),
    ];
    for (state, is_final) in finals {
        let v = stream_event_to_v03(&status_event(state));
        assert_eq!(v["final"], json!(is_final), "{state:?}");
        assert_eq!(
            v["status"]["state"],
            json!(TaskState03::from(state).as_str())
        );
    }
    if let v1::StreamResponse::StatusUpdate(ev) = status_event(v1::TaskState::AuthRequired) {
        assert!(!TaskStatusUpdateEvent03::from_v1(&ev, false).is_final);
    }
}

#[test]
fn artifact_update_and_message_events_are_bare_with_kind() {
    let ev = v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
        task_id: "T1".into(),
        context_id: "C1".into(),
        artifact: v1::Artifact {
            artifact_id: "A1".into(),
            parts: vec![v1::Part::text("Ordered output")],
            ..v1::Artifact::default()
        },
        append: false,
        last_chunk: false,
        metadata: None,
    });
    assert_eq!(
        stream_event_to_v03(&ev),
        json!({"append":false,"artifact":{"artifactId":"A1","parts":[{"kind":"text","text":"Ordered output"}]},"contextId":"C1","kind":"artifact-update","lastChunk":false,"taskId":"T1"})
    );
    let m = v1::Message::agent(vec![v1::Part::text("ok")], "T1", "C1");
    let v = stream_event_to_v03(&v1::StreamResponse::Message(m.clone()));
    assert_eq!(v["kind"], "message");
    assert_eq!(v["role"], "agent");
    assert_eq!(
        send_response_to_v03(&v1::SendMessageResponse::Message(m)),
        v
    );
}

#[test]
fn push_configs_convert_both_ways() {
    // Appendix C.4 `tasks/pushNotificationConfig/set` params.
    let wire = json!({"taskId":"T1","pushNotificationConfig":{"id":"cfg03","url":"http://127.0.0.1:9911/hook03","token":"tok-03","authentication":{"schemes":["Bearer"],"credentials":"secret-03"}}});
    let c03: TaskPushNotificationConfig03 = decode_params(wire.clone()).unwrap();
    let c1 = v1::TaskPushNotificationConfig::try_from(c03).unwrap();
    assert_eq!(
        serde_json::to_value(&c1).unwrap(),
        json!({"id":"cfg03","taskId":"T1","url":"http://127.0.0.1:9911/hook03","token":"tok-03","authentication":{"scheme":"Bearer","credentials":"secret-03"}})
    );
    assert_eq!(serde_json::to_value(push_config_to_v03(&c1)).unwrap(), wire);

    // Inline config in message/send: first scheme wins; no task id yet.
    let req = send_request(json!({
        "message": {"messageId":"m","role":"user","parts":[{"text":"hi"}]},
        "configuration": {"blocking": false, "pushNotificationConfig": {"url":"http://h/x","authentication":{"schemes":["Basic","Bearer"]}}}
    }))
    .unwrap();
    let cfg = req.configuration.unwrap();
    assert!(cfg.return_immediately);
    let push = cfg.task_push_notification_config.unwrap();
    assert_eq!(push.url, "http://h/x");
    assert_eq!(push.task_id, None);
    assert_eq!(push.authentication.unwrap().scheme, "Basic");

    // Empty schemes: fine without credentials, an error with them.
    let no_auth = PushNotificationConfig03 {
        id: None,
        url: "u".into(),
        token: None,
        authentication: Some(PushNotificationAuthenticationInfo03 {
            schemes: vec![],
            credentials: None,
        }),
    };
    assert_eq!(
        v1::TaskPushNotificationConfig::try_from(no_auth.clone())
            .unwrap()
            .authentication,
        None
    );
    let mut bad = no_auth;
    if let Some(a) = bad.authentication.as_mut() {
        a.credentials = Some("s".into());
    }
    assert!(matches!(
        v1::TaskPushNotificationConfig::try_from(bad),
        Err(A2AError::InvalidParams(m)) if m.contains("schemes")
    ));
}

#[test]
fn empty_v1_part_becomes_empty_text() {
    assert_eq!(
        serde_json::to_value(part_to_v03(&v1::Part::default())).unwrap(),
        json!({"kind":"text","text":""})
    );
}
