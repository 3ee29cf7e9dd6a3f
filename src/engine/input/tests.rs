use super::*;
use serde_json::json;

fn modes(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn defaults() -> Vec<String> {
    default_input_modes()
}

fn raw_part(bytes: &[u8], media_type: Option<&str>, filename: Option<&str>) -> Part {
    Part {
        raw: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        media_type: media_type.map(str::to_string),
        filename: filename.map(str::to_string),
        ..Part::default()
    }
}

#[test]
fn validation_says_what_is_wrong() {
    let mut m = text_message("hi");
    assert!(validate_message(&m, &defaults()).is_ok());
    m.parts.push(Part::default());
    let e = validate_message(&m, &defaults()).unwrap_err();
    assert_eq!(e.code(), -32602);
    assert!(e.to_string().contains("parts[1]"));
    let mut bad64 = text_message("x");
    bad64.parts = vec![Part {
        raw: Some("not base64!".into()),
        ..Part::default()
    }];
    assert_eq!(
        validate_message(&bad64, &defaults()).unwrap_err().code(),
        -32602
    );
}

/// Issue 37: a prompt with a NUL byte is refused up front (it cannot be an argument of the
/// program), naming the part; a NUL inside a saved binary attachment is fine.
#[test]
fn a_nul_byte_in_the_prompt_is_refused_up_front() {
    let e = validate_message(&text_message("a\0b"), &defaults()).unwrap_err();
    assert_eq!(e.code(), -32602);
    assert!(
        e.to_string().contains("parts[0].text contains a NUL byte"),
        "{e}"
    );
    let mut m = text_message("see the file");
    m.parts.push(raw_part(b"x\0y", Some("text/plain"), None));
    let e = validate_message(&m, &defaults()).unwrap_err();
    assert!(e.to_string().contains("parts[1].raw"), "{e}");
    let mut m = text_message("see the file");
    m.parts.push(raw_part(
        &[0x89, b'P', b'N', b'G', 0, 0],
        Some("image/png"),
        Some("a.png"),
    ));
    assert!(validate_message(&m, &defaults()).is_ok());
}

#[test]
fn media_types_are_checked_against_the_input_modes() {
    let mut img = text_message("x");
    img.parts = vec![raw_part(b"\x89PNG", Some("image/png"), None)];
    let mut tck = text_message("x");
    tck.parts[0].media_type = Some("application/x-unsupported-tck-type".into());
    // The defaults take anything.
    assert!(validate_message(&img, &defaults()).is_ok());
    assert!(validate_message(&tck, &defaults()).is_ok());
    let text_only = modes(&["text/plain", "application/json"]);
    let e = validate_message(&img, &text_only).unwrap_err();
    assert_eq!(e.code(), -32005);
    assert_eq!(
        e.to_string(),
        "message.parts[0] has media type 'image/png'; this agent accepts text/plain, application/json"
    );
    assert_eq!(
        validate_message(&tck, &text_only).unwrap_err().code(),
        -32005
    );
    // Parts that name no media type are accepted whatever the modes.
    let mut plain = text_message("x");
    plain.parts.push(Part::data(json!({"a": 1})));
    plain.parts.push(raw_part(b"\x00\xff", None, None));
    assert!(validate_message(&plain, &modes(&["image/png"])).is_ok());
}

#[test]
fn modes_match_wildcards_and_ignore_parameters_and_case() {
    let m = modes(&["text/plain", "image/*"]);
    assert!(accepts(&m, "text/plain"));
    assert!(accepts(&m, "Text/Plain; charset=utf-8"));
    assert!(!accepts(&m, "text/markdown"));
    assert!(accepts(&m, "image/png"));
    assert!(accepts(&m, "IMAGE/WEBP"));
    assert!(!accepts(&m, "application/pdf"));
    assert!(!accepts(&m, "image"));
    assert!(accepts(&modes(&["*/*"]), "application/x-anything"));
    assert!(accepts(&modes(&["Application/JSON"]), "application/json"));
    assert!(!accepts(&[], "text/plain"));
}

#[test]
fn input_modes_must_be_media_ranges() {
    for ok in ["text/plain", "image/*", "*/*", "application/vnd.api+json"] {
        assert!(check_input_mode(ok).is_ok(), "{ok}");
    }
    for bad in [
        "",
        "text",
        "*/plain",
        "text/",
        "/plain",
        "text/plain; charset=utf-8",
        "a b/c",
    ] {
        let e = check_input_mode(bad).unwrap_err();
        assert_eq!(e, InputModeError::NotAMediaType(bad.to_string()));
        assert!(e.to_string().contains("type/subtype"), "{bad}: {e}");
    }
}

#[test]
fn attachment_names_are_safe_and_unique() {
    let mut m = text_message("look");
    m.parts.extend([
        raw_part(b"\x89PNG", Some("image/png"), Some("../../etc/passwd")),
        raw_part(b"\x89PNG", Some("image/png"), None),
        raw_part(
            b"%PDF",
            Some("application/pdf"),
            Some("C:\\Users\\me\\Report 1.pdf"),
        ),
        raw_part(b"x", Some("application/octet-stream"), Some("..hidden")),
        raw_part(b"y", Some("image/png"), Some("dir/PASSWD")),
        raw_part(b"z", Some("image/jpeg; q=1"), Some("..")),
        raw_part(b"\xff\xfe", None, Some("blob")),
        raw_part(
            &[b'a'; 10],
            Some("application/zip"),
            Some(&format!("{}.zip", "a".repeat(150))),
        ),
        raw_part(b"w", Some("font/woff2"), Some("日本.woff2")),
    ]);
    let names: Vec<(usize, String)> = attachments(&m)
        .into_iter()
        .map(|a| (a.index, a.name))
        .collect();
    assert_eq!(
        names,
        vec![
            (1, "passwd".to_string()),
            (2, "part-2.png".to_string()),
            (3, "Report_1.pdf".to_string()),
            (4, "hidden".to_string()),
            (5, "5-PASSWD".to_string()),
            (6, "part-6.jpg".to_string()),
            (7, "blob".to_string()),
            (8, "a".repeat(100)),
            (9, "__.woff2".to_string()),
        ]
    );
    // The same message gives the same names.
    assert_eq!(attachments(&m), attachments(&m));
}

#[test]
fn text_raw_parts_are_not_attachments() {
    let mut m = text_message("x");
    m.parts.extend([
        raw_part(b"hello", None, Some("a.txt")),
        raw_part(b"{}", Some("application/json"), None),
        raw_part(b"a: 1", Some("application/yaml"), None),
        raw_part(b"{}", Some("application/ld+json"), None),
        raw_part(b"# hi", Some("text/markdown"), None),
    ]);
    assert!(attachments(&m).is_empty());
    m.parts.push(raw_part(b"\xff", None, None));
    let a = attachments(&m);
    assert_eq!(a.len(), 1);
    assert_eq!(
        (a[0].name.as_str(), a[0].media_type.as_str()),
        ("part-6.bin", "application/octet-stream")
    );
}

#[test]
fn prompt_joins_parts() {
    let mut m = text_message("Fix it");
    m.parts.push(Part::data(json!({"file": "a.rs"})));
    m.parts.push(Part {
        raw: Some("aGVsbG8=".into()),
        filename: Some("n.txt".into()),
        ..Part::default()
    });
    assert_eq!(
        prompt_of(&m, None),
        "Fix it\n\n{\"file\":\"a.rs\"}\n\nFile n.txt:\nhello"
    );
}

#[test]
fn prompt_points_to_saved_attachments() {
    let mut m = text_message("What is in the screenshot?");
    m.parts.push(raw_part(
        b"\x89PNG\r\n",
        Some("image/png"),
        Some("shot.png"),
    ));
    let dir = attachments_dir(Path::new("/work/repo"), "t1");
    assert_eq!(dir, Path::new("/work/repo/.agent-host/attachments/t1"));
    assert_eq!(
        prompt_of(&m, Some(&dir)),
        "What is in the screenshot?\n\nAttached file shot.png (image/png, 6 bytes), saved at /work/repo/.agent-host/attachments/t1/shot.png"
    );
    assert_eq!(
        prompt_of(&m, None),
        "What is in the screenshot?\n\nAttached file shot.png (image/png, 6 bytes) (not saved: attachments are kept only for a task's first message)"
    );
}

#[test]
fn decisions_from_text_and_data() {
    assert!(
        decision_of(&text_message("Yes"), "a", "command")
            .unwrap()
            .allow
    );
    assert!(
        !decision_of(&text_message("no."), "a", "command")
            .unwrap()
            .allow
    );
    assert!(decision_of(&text_message("maybe"), "a", "command").is_err());
    let q = decision_of(&text_message("src/main.rs"), "a", "question").unwrap();
    assert_eq!(q.message.as_deref(), Some("src/main.rs"));
    let mut m = text_message("whatever");
    m.parts.push(Part::data(
        json!({"decision": "deny", "message": "too risky"}),
    ));
    let d = decision_of(&m, "a", "command").unwrap();
    assert!(!d.allow);
    assert_eq!(d.message.as_deref(), Some("too risky"));
}

#[test]
fn a_question_is_answered_with_text_not_a_bare_allow() {
    let mut bare = text_message("");
    bare.parts = vec![Part::data(json!({"decision": "allow"}))];
    let e = decision_of(&bare, "a", "question").unwrap_err();
    assert!(e.to_string().contains("answer with text"), "{e}");
    // The text beside the decision, or the data part's own message, is the answer.
    let mut with_text = text_message("src/main.rs");
    with_text
        .parts
        .push(Part::data(json!({"decision": "allow"})));
    let d = decision_of(&with_text, "a", "question").unwrap();
    assert_eq!(d.message.as_deref(), Some("src/main.rs"));
    let mut with_message = text_message("");
    with_message.parts = vec![Part::data(json!({"decision": "allow", "message": "42"}))];
    assert_eq!(
        decision_of(&with_message, "a", "question")
            .unwrap()
            .message
            .as_deref(),
        Some("42")
    );
    // A deny declines the question; an approval still takes a bare decision.
    let mut deny = text_message("");
    deny.parts = vec![Part::data(json!({"decision": "deny"}))];
    assert!(!decision_of(&deny, "a", "question").unwrap().allow);
    assert!(decision_of(&bare, "a", "command").unwrap().allow);
}

#[test]
fn an_answer_for_another_question_is_refused() {
    let mut m = text_message("yes");
    m.parts.push(Part::data(
        json!({"approvalId": "prompt-1", "decision": "allow"}),
    ));
    assert!(decision_of(&m, "prompt-1", "other").unwrap().allow);
    let e = decision_of(&m, "prompt-2", "other").unwrap_err();
    assert_eq!(e.code(), -32602);
    assert!(e.to_string().contains("'prompt-1'") && e.to_string().contains("'prompt-2'"));
    // A text reply that names its question in the message metadata.
    let mut t = text_message("yes");
    t.metadata = Some(serde_json::from_value(json!({"approvalId": "prompt-1"})).unwrap());
    assert!(decision_of(&t, "prompt-1", "other").is_ok());
    assert!(decision_of(&t, "prompt-2", "other").is_err());
}

#[test]
fn cwd_and_base_ref_of_another_type_than_text_are_refused_not_ignored() {
    let with = |md: Value| Message {
        metadata: md.as_object().cloned(),
        ..text_message("x")
    };
    assert_eq!(
        requested_cwd(&with(json!({"cwd": "/srv/p"})), None).unwrap(),
        Some("/srv/p".to_string())
    );
    assert_eq!(
        requested_cwd(&with(json!({"iac_code": {"cwd": "/srv/q"}})), None).unwrap(),
        Some("/srv/q".to_string())
    );
    assert_eq!(
        requested_cwd(&with(json!({"cwd": null})), None).unwrap(),
        None
    );
    for md in [json!({"cwd": 42}), json!({"iac_code": {"cwd": ["/a"]}})] {
        let err = requested_cwd(&with(md), None).unwrap_err();
        assert!(
            matches!(&err, A2AError::InvalidParams(m) if m.contains("cwd must be a string")),
            "{err:?}"
        );
    }
    let request = json!({"baseRef": true});
    let err = requested_base_ref(&with(json!({})), request.as_object()).unwrap_err();
    assert!(
        matches!(&err, A2AError::InvalidParams(m) if m.contains("metadata.baseRef must be a string")),
        "{err:?}"
    );
    assert_eq!(
        requested_base_ref(&with(json!({"baseRef": "v1"})), None).unwrap(),
        Some("v1".to_string())
    );
}
