//! `fake-agent --conformance`: what the A2A conformance kit (a2aproject/a2a-tck) expects of
//! the agent behind the server, keyed on the `messageId` of the message (the adapter passes
//! it with `--message-id {message_id}`).
//!
//! Version `1.0` (branch `1.0-dev`) follows the kit's `scenarios/*.feature`; version `0.3`
//! (branch `0.3.x`) keeps every task working, as the kit's reference agent does: it takes the
//! client's messages (`user_message` lines) while it works, until it is canceled. Tasks whose `messageId` starts
//! with `test-resubscribe-message-id` run 4.5 s and complete, in both versions.

use std::io::{self, BufRead};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use super::{read_reply, End, Out};

/// The kit waits 2 × its streaming timeout (2 s) before it resubscribes.
const LONG_RUNNING: Duration = Duration::from_millis(4500);

/// Which kit the agent plays for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Version {
    V1,
    V03,
}

/// A conformance version other than 1.0 and 0.3.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("conformance version must be 1.0 or 0.3, not '{0}'")]
pub struct UnknownVersion(pub String);

impl Version {
    /// `1.0` / `1` or `0.3`.
    pub fn parse(s: &str) -> Result<Version, UnknownVersion> {
        match s.trim() {
            "1.0" | "1" => Ok(Version::V1),
            "0.3" => Ok(Version::V03),
            other => Err(UnknownVersion(other.to_string())),
        }
    }
}

/// One step of a scenario.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// Print this native-protocol line.
    Emit(Value),
    Sleep(Duration),
    /// Ask for input and wait for the answer. Asks again after an answer whose `message_id`
    /// starts with `again_for` (each message plays its own prefix, as the kit's agent does),
    /// so after every answer when `again_for` is empty; ends the program when stdin closes.
    Ask {
        again_for: &'static str,
    },
    /// Keep working, taking the client's messages (`user_message` lines), until stdin closes.
    Listen,
}

fn artifact(id: &str, parts: Value, append: bool, last_chunk: bool) -> Step {
    Step::Emit(json!({
        "type": "artifact", "artifact_id": id, "parts": parts,
        "append": append, "last_chunk": last_chunk,
    }))
}

fn text_artifact(id: &str, text: &str) -> Step {
    artifact(id, json!([{"text": text}]), false, false)
}

fn file_artifact(id: &str) -> Step {
    let raw = base64::engine::general_purpose::STANDARD.encode(b"tck");
    artifact(
        id,
        json!([{"raw": raw, "filename": "output.txt", "mediaType": "text/plain"}]),
        false,
        false,
    )
}

fn done(result: &str) -> Step {
    Step::Emit(json!({"type": "done", "result": result, "is_error": false}))
}

/// The steps for a message with this id.
fn scenario(version: Version, message_id: &str) -> Vec<Step> {
    let is = |prefix: &str| message_id.starts_with(prefix);
    if is("test-resubscribe-message-id") {
        return vec![Step::Sleep(LONG_RUNNING), done("")];
    }
    if version == Version::V03 {
        return vec![Step::Listen];
    }
    // Longer prefixes first: `tck-artifact-file-url` also starts with `tck-artifact-file`.
    if is("tck-artifact-text") {
        vec![text_artifact("text", "Generated text content"), done("")]
    } else if is("tck-artifact-file-url") {
        let part = json!([{"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}]);
        vec![artifact("file-url", part, false, false), done("")]
    } else if is("tck-artifact-file") {
        vec![file_artifact("file"), done("")]
    } else if is("tck-artifact-data") {
        let part = json!([{"data": {"key": "value", "count": 42}}]);
        vec![artifact("data", part, false, false), done("")]
    } else if is("tck-message-response") {
        vec![Step::Emit(
            json!({"type": "message", "text": "Direct message response"}),
        )]
    } else if is("tck-input-required") {
        // The kit answers with `tck-input-required-…` to stay waiting, and
        // `tck-complete-task-…` to complete.
        vec![
            Step::Ask {
                again_for: "tck-input-required",
            },
            done("Hello from TCK"),
        ]
    } else if is("tck-reject-task") {
        vec![Step::Emit(
            json!({"type": "error", "message": "rejected", "rejected": true}),
        )]
    } else if is("tck-stream-001") {
        vec![text_artifact("stream", "Stream hello from TCK"), done("")]
    } else if is("tck-stream-002") {
        vec![done("Hello from TCK")]
    } else if is("tck-stream-003") {
        vec![text_artifact("stream", "Stream task lifecycle"), done("")]
    } else if is("tck-stream-ordering-001") {
        vec![text_artifact("stream", "Ordered output"), done("")]
    } else if is("tck-stream-artifact-text") {
        vec![text_artifact("stream", "Streamed text content"), done("")]
    } else if is("tck-stream-artifact-file") {
        vec![file_artifact("file"), done("")]
    } else if is("tck-stream-artifact-chunked") {
        vec![
            artifact("chunked", json!([{"text": "chunk-1 "}]), false, false),
            artifact("chunked", json!([{"text": "chunk-2"}]), true, true),
            done(""),
        ]
    } else {
        // `tck-complete-task`, and any other message.
        vec![done("Hello from TCK")]
    }
}

fn ask() -> Value {
    json!({
        "type": "approval_required", "id": "input-1", "kind": "question",
        "detail": "The conformance agent waits for input", "options": [],
    })
}

/// Plays the scenario of `message_id`.
pub fn run(
    version: Version,
    message_id: &str,
    out: &mut Out,
    input: &mut dyn BufRead,
) -> io::Result<End> {
    for step in scenario(version, message_id) {
        match step {
            Step::Emit(v) => out.emit(&v)?,
            Step::Sleep(d) => std::thread::sleep(d),
            Step::Listen => while read_reply(input)?.is_some() {},
            Step::Ask { again_for } => loop {
                out.emit(&ask())?;
                let Some(reply) = read_reply(input)? else {
                    return Ok(End::Exit(0));
                };
                let id = reply
                    .get("message_id")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !id.starts_with(again_for) {
                    break;
                }
            },
        }
    }
    Ok(End::Exit(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::wire::native::NativeParser;
    use crate::adapter::wire::WireParser;
    use crate::adapter::AgentEvent;

    fn events(version: Version, message_id: &str, stdin: &str) -> Vec<AgentEvent> {
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut out = Out {
            stdout: &mut stdout,
            stderr: &mut stderr,
            delay: Duration::ZERO,
            started: false,
            clock: std::time::Instant::now(),
        };
        let end = run(version, message_id, &mut out, &mut stdin.as_bytes()).unwrap();
        assert_eq!(end, End::Exit(0));
        let mut evs = Vec::new();
        for line in String::from_utf8(stdout).unwrap().lines() {
            NativeParser::default().parse_line(line, &mut evs, &mut Vec::new());
        }
        evs
    }

    #[test]
    fn every_v1_prefix_parses_to_what_the_kit_expects() {
        let id = |p: &str| format!("{p}-0123abcd");
        let evs = events(Version::V1, &id("tck-complete-task"), "");
        assert!(
            matches!(&evs[..], [AgentEvent::Done { result: Some(r), .. }] if r == "Hello from TCK")
        );
        let evs = events(Version::V1, &id("tck-artifact-file-url"), "");
        assert!(
            matches!(&evs[0], AgentEvent::Artifact { parts, .. } if parts[0].url.as_deref() == Some("https://example.com/output.txt"))
        );
        let evs = events(Version::V1, &id("tck-artifact-file"), "");
        assert!(
            matches!(&evs[0], AgentEvent::Artifact { parts, .. } if parts[0].raw.as_deref() == Some("dGNr") && parts[0].filename.as_deref() == Some("output.txt"))
        );
        let evs = events(Version::V1, &id("tck-message-response"), "");
        assert!(
            matches!(&evs[..], [AgentEvent::Message { text }] if text == "Direct message response")
        );
        let evs = events(Version::V1, &id("tck-reject-task"), "");
        assert!(matches!(&evs[..], [AgentEvent::Rejected { .. }]));
        let answer = |prefix: &str| {
            format!("{{\"type\":\"approval_response\",\"id\":\"input-1\",\"decision\":\"allow\",\"message_id\":\"{prefix}-1\"}}\n")
        };
        let stdin = answer("tck-input-required") + &answer("tck-complete-task");
        let evs = events(Version::V1, &id("tck-input-required"), &stdin);
        assert!(matches!(evs[0], AgentEvent::ApprovalRequired { .. }));
        assert!(matches!(evs[1], AgentEvent::ApprovalRequired { .. }));
        assert!(matches!(evs[2], AgentEvent::Done { .. }));
        let evs = events(Version::V1, &id("tck-stream-artifact-chunked"), "");
        match &evs[..] {
            [AgentEvent::Artifact {
                artifact_id: a,
                append: false,
                last_chunk: false,
                ..
            }, AgentEvent::Artifact {
                artifact_id: b,
                append: true,
                last_chunk: true,
                ..
            }, AgentEvent::Done { .. }] => assert_eq!(a, b),
            other => panic!("{other:?}"),
        }
        let evs = events(Version::V1, "someone-else", "");
        assert!(matches!(&evs[..], [AgentEvent::Done { .. }]));
    }

    #[test]
    fn v03_tasks_keep_working_until_stdin_closes() {
        let messages = "{\"type\":\"user_message\",\"text\":\"more\",\"message_id\":\"m-2\"}\n";
        let evs = events(Version::V03, "msg-1", &messages.repeat(2));
        assert!(evs.is_empty(), "no end of turn: {evs:?}");
        assert_eq!(Version::parse("1.0"), Ok(Version::V1));
        assert!(Version::parse("2").is_err());
    }
}
