use super::*;
use serde_json::json;

#[test]
fn task_omits_empty_optionals_and_keeps_required() {
    let t = Task {
        id: "t1".into(),
        context_id: "c1".into(),
        status: TaskStatus {
            state: TaskState::Working,
            ..TaskStatus::default()
        },
        ..Task::default()
    };
    assert_eq!(
        serde_json::to_value(&t).unwrap(),
        json!({"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}})
    );
}

#[test]
fn part_discriminates_by_member_and_keeps_null_data() {
    let p: Part = serde_json::from_value(json!({"data": null, "extra": 1})).unwrap();
    assert_eq!(p.data, Some(Value::Null));
    assert_eq!(p.content_count(), 1);
    let p: Part = serde_json::from_value(json!({"text": "hi", "mediaType": "text/plain"})).unwrap();
    assert_eq!(p.text.as_deref(), Some("hi"));
    assert_eq!(
        serde_json::to_value(&p).unwrap(),
        json!({"text":"hi","mediaType":"text/plain"})
    );
}

#[test]
fn stream_response_is_wrapped_by_member_name() {
    let ev = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: "t".into(),
        context_id: "c".into(),
        status: TaskStatus {
            state: TaskState::Completed,
            ..TaskStatus::default()
        },
        metadata: None,
    });
    assert_eq!(
        serde_json::to_value(&ev).unwrap(),
        json!({"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}})
    );
}

#[test]
fn list_response_always_has_all_four_fields() {
    let r = ListTasksResponse {
        tasks: vec![],
        next_page_token: String::new(),
        page_size: 50,
        total_size: 0,
    };
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({"tasks":[],"nextPageToken":"","pageSize":50,"totalSize":0})
    );
}

#[test]
fn enums_read_names_numbers_and_unknowns() {
    let st: TaskState = serde_json::from_value(json!("UNRECOGNIZED")).unwrap();
    assert_eq!(st, TaskState::Unspecified);
    let st: TaskState = serde_json::from_value(json!(3)).unwrap();
    assert_eq!(st, TaskState::Completed);
    let st: TaskState = serde_json::from_value(json!("TASK_STATE_WORKING")).unwrap();
    assert_eq!(st, TaskState::Working);
    assert!(serde_json::from_value::<TaskState>(json!([1])).is_err());
    let r: Role = serde_json::from_value(json!(1)).unwrap();
    assert_eq!(r, Role::User);
    let r: Role = serde_json::from_value(json!("ROLE_AGENT")).unwrap();
    assert_eq!(r, Role::Agent);
    let r: Role = serde_json::from_value(json!("nobody")).unwrap();
    assert_eq!(r, Role::Unspecified);
}

#[test]
fn state_parsing_is_lenient_across_versions() {
    assert_eq!(
        TaskState::parse_lenient("TASK_STATE_CANCELLED"),
        Some(TaskState::Canceled)
    );
    assert_eq!(
        TaskState::parse_lenient("input-required"),
        Some(TaskState::InputRequired)
    );
    assert_eq!(
        TaskState::parse_lenient("TASK_STATE_WORKING"),
        Some(TaskState::Working)
    );
    assert_eq!(TaskState::parse_lenient("bogus"), None);
}
