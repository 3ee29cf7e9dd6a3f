//! The demo agent through the host, as the README's walk-through uses it: a task asks for
//! approval of an edit, the answer lets it edit a file in the working directory, and its usage
//! says how long it really ran.

use std::time::Instant;

use serde_json::{json, Value};

use crate::common::*;

/// The data part of a task's status message (an approval's description).
fn approval(task: &Value) -> Value {
    task["status"]["message"]["parts"]
        .as_array()
        .and_then(|parts| parts.iter().find_map(|p| p.get("data")))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn an_approved_edit_changes_the_working_directory_and_a_denied_one_does_not() {
    limit(async {
        let s = TestServer::start().await;
        let notes = s.dir().join("NOTES.md");
        let mut allowed = false;
        for answer in ["no", "yes"] {
            let v = s
                .rpc("SendMessage", send_params("Note the demo: approval edit"))
                .await;
            let t = &v["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
            let asked = approval(t);
            assert_eq!(
                (&asked["kind"], &asked["tool"], &asked["target"]),
                (&json!("file-edit"), &json!("Edit"), &json!("NOTES.md")),
                "{asked}"
            );
            assert!(!notes.exists(), "nothing is written before the answer");
            let mut reply = send_params(answer);
            reply["message"]["taskId"] = t["id"].clone();
            let r = s.rpc("SendMessage", reply).await;
            let t = &r["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
            allowed = answer == "yes";
            assert_eq!(notes.exists(), allowed, "{answer}: {r}");
        }
        assert!(allowed);
        let text = std::fs::read_to_string(&notes).expect("NOTES.md");
        assert_eq!(text, "- Note the demo: approval edit\n");
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_demo_reports_how_long_it_ran() {
    limit(async {
        let s = TestServer::start().await;
        let sent = Instant::now();
        // 300 ms between the demo's lines, and seven lines before its usage: at least 1.8 s,
        // where the demo used to say 850 ms whatever happened.
        let v = s
            .rpc("SendMessage", send_params("look around sleep=300"))
            .await;
        let elapsed = u64::try_from(sent.elapsed().as_millis()).expect("ms");
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        let ms = t["metadata"]["usage"]["durationMs"]
            .as_u64()
            .unwrap_or_else(|| panic!("usage.durationMs: {v}"));
        assert!(
            (1800..=elapsed).contains(&ms),
            "the demo ran {ms} ms of the {elapsed} ms the request took"
        );
        s.shutdown().await;
    })
    .await;
}
