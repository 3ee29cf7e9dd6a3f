//! A subscriber slower than its agent gets every event, in order (issue 20: the bench saw
//! "lost" events under load). The agent prints thousands of lines as fast as it can and
//! exits; the stream is read a few frames at a time with pauses, so it falls far behind
//! what the store keeps in memory for live readers, and the agent has long exited, with lines
//! still waiting in its pipe, when the reader gets to its end.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// Lines the agent prints.
const LINES: usize = 3000;

/// A program that prints `LINES` text deltas back to back, then its end, and exits 0.
fn fast_agent(dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("fast-agent.sh");
    let body = format!(
        "#!/bin/sh\nawk 'BEGIN {{ for (i = 0; i < {LINES}; i++) printf \"{{\\\"type\\\":\\\"text\\\",\\\"text\\\":\\\"line %05d \\\",\\\"delta\\\":true}}\\n\", i; print \"{{\\\"type\\\":\\\"done\\\",\\\"result\\\":\\\"ok\\\"}}\" }}'\n"
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The text an artifact-update frame carries.
fn text_of(f: &Value) -> Option<String> {
    let parts = f["result"]["artifactUpdate"]["artifact"]["parts"].as_array()?;
    Some(parts.iter().filter_map(|p| p["text"].as_str()).collect())
}

async fn slow_reader_gets_everything(sqlite: bool) {
    let bin = tempfile::tempdir().unwrap();
    let s = TestServer::with(Options {
        program: Some(fast_agent(bin.path())),
        sqlite,
        ..Options::default()
    })
    .await;
    let mut r = s
        .open_stream("SendStreamingMessage", send_params("go"), None)
        .await;
    let mut frames = Vec::new();
    while let Some(f) = r.next().await {
        frames.push(f);
        // Slower than the agent: a pause every few frames.
        if frames.len() % 8 == 0 {
            time_passes(Duration::from_millis(1)).await;
        }
    }
    let ids: Vec<u64> = frames.iter().map(|f| f.id.expect("an id")).collect();
    assert!(
        ids.windows(2).all(|w| w[1] > w[0]),
        "in order: {:?}",
        ids.windows(2).find(|w| w[1] <= w[0])
    );
    assert_eq!(
        states(&frames).last().map(String::as_str),
        Some("TASK_STATE_COMPLETED")
    );
    let text: String = frames.iter().filter_map(|f| text_of(&f.data)).collect();
    // Every line, then the end's result.
    let mut want: String = (0..LINES).map(|i| format!("line {i:05} ")).collect();
    want.push_str("ok");
    assert_eq!(text.len(), want.len(), "store sqlite={sqlite}");
    assert!(text == want, "the lines arrive in order (sqlite={sqlite})");
}

#[tokio::test]
async fn a_slow_reader_gets_every_line_of_a_fast_agent_in_order() {
    limit(async {
        slow_reader_gets_everything(false).await;
        slow_reader_gets_everything(true).await;
    })
    .await;
}
