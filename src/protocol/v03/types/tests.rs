use super::super::decode_params;
use super::*;
use crate::protocol::A2AError;
use serde_json::json;

fn invalid_params_message<T: serde::de::DeserializeOwned + std::fmt::Debug>(v: Value) -> String {
    match decode_params::<T>(v) {
        Err(A2AError::InvalidParams(m)) => m,
        other => panic!("expected InvalidParams, got {other:?}"),
    }
}

#[test]
fn kind_is_optional_on_input_and_always_emitted() {
    let m: Message03 = serde_json::from_value(
        json!({"messageId":"m","role":"user","parts":[{"text":"hi"}],"extra":1}),
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&m).unwrap(),
        json!({"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]})
    );
    let m: Message03 =
        serde_json::from_value(json!({"kind":"message","messageId":"m","role":"agent","parts":[]}))
            .unwrap();
    assert_eq!(m.role, Role03::Agent);
}

#[test]
fn wrong_top_level_kind_is_rejected() {
    let msg = invalid_params_message::<MessageSendParams03>(json!({
        "message": {"kind":"task","messageId":"m","role":"user","parts":[]}
    }));
    assert!(
        msg.contains("\"task\"") && msg.contains("\"message\""),
        "{msg}"
    );
}

#[test]
fn a_part_with_type_instead_of_kind_is_refused() {
    let e = serde_json::from_value::<Part03>(json!({"type": "unsupported_type", "text": "x"}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"type\"") && e.contains("kind"), "{e}");
}

#[test]
fn parts_are_recognised_by_member_without_kind() {
    let parts: Vec<Part03> = serde_json::from_value(json!([
        {"text": "t"},
        {"file": {"uri": "https://x/y", "mimeType": "text/plain"}},
        {"file": {"bytes": "aGk=", "name": "a.txt"}},
        {"data": {"a": 1}, "metadata": {"m": true}},
    ]))
    .unwrap();
    assert_eq!(
        serde_json::to_value(&parts).unwrap(),
        json!([
            {"kind":"text","text":"t"},
            {"kind":"file","file":{"uri":"https://x/y","mimeType":"text/plain"}},
            {"kind":"file","file":{"bytes":"aGk=","name":"a.txt"}},
            {"kind":"data","data":{"a":1},"metadata":{"m":true}},
        ])
    );
}

#[test]
fn bad_parts_name_the_problem() {
    let cases = [
        (json!({"kind":"text"}), "has no \"text\""),
        (json!({"kind":"text","data":{}}), "has no \"text\""),
        (
            json!({"kind":"image","text":"x"}),
            "unknown part kind \"image\"",
        ),
        (json!({"kind":"file","file":{}}), "file.bytes or file.uri"),
        (
            json!({"kind":"file","file":{"bytes":"a","uri":"u"}}),
            "both",
        ),
        (json!({"kind":"file"}), "no \"file\""),
        (json!({"kind":"data","data":[1]}), "must be a JSON object"),
        (json!({"kind":"data"}), "no \"data\""),
        (json!({"metadata":{}}), "none of text, file or data"),
        (json!({"text":"a","data":{}}), "several contents"),
    ];
    for (part, want) in cases {
        let msg = invalid_params_message::<MessageSendParams03>(json!({
            "message": {"messageId":"m","role":"user","parts":[part.clone()]}
        }));
        assert!(msg.contains(want), "{part}: {msg}");
    }
}

#[test]
fn task_id_is_an_alias_of_id() {
    let q: TaskQueryParams03 = decode_params(json!({"taskId":"t1","historyLength":3})).unwrap();
    assert_eq!(q.id, "t1");
    assert_eq!(q.history_length, Some(3));
    let p: TaskIdParams03 = decode_params(json!({"taskId":"t2"})).unwrap();
    assert_eq!(p.id, "t2");
    let p: TaskIdParams03 = decode_params(json!({"id":"t3","x":null})).unwrap();
    assert_eq!(p.id, "t3");
    assert_eq!(serde_json::to_value(&p).unwrap(), json!({"id":"t3"}));
    let g: TaskPushNotificationConfigParams03 =
        decode_params(json!({"id":"t","pushNotificationConfigId":"c"})).unwrap();
    assert_eq!(g.push_notification_config_id.as_deref(), Some("c"));
}

#[test]
fn history_length_accepts_integral_floats_only() {
    let q: TaskQueryParams03 = decode_params(json!({"id":"t","historyLength":2.0})).unwrap();
    assert_eq!(q.history_length, Some(2));
    let q: TaskQueryParams03 = decode_params(json!({"id":"t","historyLength":null})).unwrap();
    assert_eq!(q.history_length, None);
    let msg = invalid_params_message::<TaskQueryParams03>(json!({"id":"t","historyLength":"2"}));
    assert!(msg.contains("historyLength"), "{msg}");
    let msg = invalid_params_message::<TaskQueryParams03>(json!({"id":"t","historyLength":2.5}));
    assert!(msg.contains("historyLength"), "{msg}");
}

#[test]
fn status_update_always_emits_final_and_kind() {
    let ev = TaskStatusUpdateEvent03 {
        task_id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus03 {
            state: TaskState03::Working,
            message: None,
            timestamp: None,
        },
        is_final: false,
        metadata: None,
        kind: StatusUpdateKind,
    };
    assert_eq!(
        serde_json::to_value(&ev).unwrap(),
        json!({"taskId":"t","contextId":"c","status":{"state":"working"},"final":false,"kind":"status-update"})
    );
}
