//! `agent-host-jsonl`: agent-host's own line protocol, one JSON object per line, one per
//! [`AgentEvent`] kind. Any program can speak it; `fake-agent` does. Documented in
//! `adapters/README.md`.

use serde_json::{json, Value};

use super::{Decision, WireParser};
use crate::adapter::{AgentEvent, ApprovalOption, Usage};
use crate::protocol::v1::Part;

pub const FORMAT: &str = "agent-host-jsonl";

/// The parser, and the host's side of the stdin protocol.
#[derive(Debug, Default)]
pub struct NativeParser {
    /// The program reads `user_message` lines while it works (wire option `messages`).
    messages: bool,
}

impl NativeParser {
    /// A parser configured by the adapter's `wire_options`: `messages = true` when the program
    /// takes the client's messages while it works.
    pub fn new(options: &toml::Table) -> NativeParser {
        NativeParser {
            messages: options
                .get("messages")
                .and_then(toml::Value::as_bool)
                .unwrap_or(false),
        }
    }
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// A string field taken out of the parsed line (not copied: it may be megabytes of text).
fn take_str(v: &mut Value, key: &str) -> Option<String> {
    match v.get_mut(key).map(Value::take) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn u64_of(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl WireParser for NativeParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        if let Some(ev) = text_line(line) {
            out.push(ev);
            return;
        }
        let Some(mut v) = super::json_line(line, out, 200) else {
            return;
        };
        let ty = take_str(&mut v, "type").unwrap_or_default();
        let ev = match ty.as_str() {
            "init" => AgentEvent::Init {
                session_id: str_of(&v, "session_id"),
                model: str_of(&v, "model"),
                cwd: str_of(&v, "cwd"),
                tools: v
                    .get("tools")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|t| t.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "text" => AgentEvent::Text {
                text: take_str(&mut v, "text").unwrap_or_default(),
                delta: v.get("delta").and_then(Value::as_bool).unwrap_or(true),
            },
            "thinking" => AgentEvent::Thinking {
                text: take_str(&mut v, "text").unwrap_or_default(),
            },
            "tool_use" => AgentEvent::ToolUse {
                id: str_of(&v, "id").unwrap_or_default(),
                name: str_of(&v, "name").unwrap_or_else(|| "tool".into()),
                input: v.get_mut("input").map(Value::take).unwrap_or(Value::Null),
            },
            "tool_result" => AgentEvent::ToolResult {
                id: str_of(&v, "id").unwrap_or_default(),
                output: match v.get_mut("output").map(Value::take) {
                    Some(Value::String(s)) => Some(s),
                    None | Some(Value::Null) => None,
                    Some(other) => Some(other.to_string()),
                },
                is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            },
            "approval_required" => AgentEvent::ApprovalRequired {
                id: str_of(&v, "id").unwrap_or_default(),
                kind: str_of(&v, "kind").unwrap_or_else(|| "other".into()),
                tool: str_of(&v, "tool"),
                target: str_of(&v, "target"),
                detail: str_of(&v, "detail"),
                options: v
                    .get("options")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|o| {
                                let id = str_of(o, "id")?;
                                let label = str_of(o, "label").unwrap_or_else(|| id.clone());
                                Some(ApprovalOption { id, label })
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            "usage" => AgentEvent::Usage(Usage {
                input_tokens: u64_of(&v, "input_tokens"),
                output_tokens: u64_of(&v, "output_tokens"),
                cost_usd: v.get("cost_usd").and_then(Value::as_f64),
                duration_ms: u64_of(&v, "duration_ms"),
            }),
            "done" => AgentEvent::Done {
                result: take_str(&mut v, "result"),
                is_error: v.get("is_error").and_then(Value::as_bool).unwrap_or(false),
            },
            "error" if v.get("rejected").and_then(Value::as_bool) == Some(true) => {
                AgentEvent::Rejected {
                    message: str_of(&v, "message").unwrap_or_else(|| "rejected".into()),
                }
            }
            "error" => AgentEvent::Error {
                message: str_of(&v, "message").unwrap_or_else(|| "agent reported an error".into()),
                kind: str_of(&v, "kind"),
            },
            "artifact" => match artifact(&mut v) {
                Ok(ev) => ev,
                Err(why) => AgentEvent::Warning {
                    message: format!("artifact line ignored: {why}"),
                },
            },
            "message" => AgentEvent::Message {
                text: take_str(&mut v, "text").unwrap_or_default(),
            },
            // Unknown types are ignored: a newer agent may say more than we understand.
            _ => return,
        };
        out.push(ev);
    }

    fn encode_decision(&mut self, d: &Decision) -> Option<Vec<u8>> {
        let mut obj = json!({
            "type": "approval_response",
            "id": d.id,
            "decision": if d.allow { "allow" } else { "deny" },
        });
        if let Some(option) = &d.option {
            obj["option"] = json!(option);
        }
        if let Some(message) = &d.message {
            obj["message"] = json!(message);
        }
        if let Some(message_id) = &d.message_id {
            obj["message_id"] = json!(message_id);
        }
        let mut bytes = obj.to_string().into_bytes();
        bytes.push(b'\n');
        Some(bytes)
    }

    fn encode_message(&mut self, text: &str, message_id: &str) -> Option<Vec<u8>> {
        if !self.messages {
            return None;
        }
        let obj = json!({"type": "user_message", "text": text, "message_id": message_id});
        let mut bytes = obj.to_string().into_bytes();
        bytes.push(b'\n');
        Some(bytes)
    }
}

/// A `text` line, the one a CLI prints most, read straight into its event: no map of the
/// line's fields is built (and freed) for it. Any other line, or a text line this shape does
/// not take (a repeated key, a `delta` that is not a boolean), is `None`, and the general
/// path reads it the same way as before.
fn text_line(line: &str) -> Option<AgentEvent> {
    #[derive(serde::Deserialize)]
    enum Tag {
        #[serde(rename = "text")]
        Text,
    }
    #[derive(serde::Deserialize)]
    struct TextLine {
        #[serde(rename = "type")]
        _tag: Tag,
        text: String,
        #[serde(default)]
        delta: Option<bool>,
    }
    let t: TextLine = serde_json::from_str(line.trim()).ok()?;
    Some(AgentEvent::Text {
        text: t.text,
        delta: t.delta.unwrap_or(true),
    })
}

/// Why an `artifact` line was ignored.
#[derive(Debug, thiserror::Error)]
enum BadArtifact {
    #[error("no artifact_id")]
    NoId,
    #[error("parts: {0}")]
    Parts(#[source] serde_json::Error),
    #[error("no parts")]
    NoParts,
    #[error("parts[{0}] must have exactly one of text, raw, url, data")]
    NotOneContent(usize),
}

/// An `artifact` line: `artifact_id` (required), `name`, `parts` (A2A v1.0 parts, each with
/// exactly one of text, raw, url, data), `append`, `last_chunk`.
fn artifact(v: &mut Value) -> Result<AgentEvent, BadArtifact> {
    let artifact_id = str_of(v, "artifact_id")
        .filter(|id| !id.is_empty())
        .ok_or(BadArtifact::NoId)?;
    let parts: Vec<Part> =
        serde_json::from_value(v.get_mut("parts").map(Value::take).unwrap_or_default())
            .map_err(BadArtifact::Parts)?;
    if parts.is_empty() {
        return Err(BadArtifact::NoParts);
    }
    if let Some(i) = parts.iter().position(|p| p.content_count() != 1) {
        return Err(BadArtifact::NotOneContent(i));
    }
    let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(false);
    Ok(AgentEvent::Artifact {
        artifact_id,
        name: str_of(v, "name"),
        parts,
        append: flag("append"),
        last_chunk: flag("last_chunk"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        NativeParser::default().parse_line(line, &mut out, &mut Vec::new());
        out
    }

    #[test]
    fn text_lines_read_the_same_on_the_short_path_and_the_general_one() {
        let text = |t: &str, delta| {
            vec![AgentEvent::Text {
                text: t.into(),
                delta,
            }]
        };
        // The short path: any key order, other keys ignored, escapes decoded.
        assert_eq!(parse(r#"{"type":"text","text":"hi"}"#), text("hi", true));
        assert_eq!(
            parse(r#" {"delta":false,"x":[1,{"y":2}],"text":"a\"b\u00e9","type":"text"} "#),
            text("a\"b\u{e9}", false)
        );
        assert_eq!(
            parse(r#"{"type":"text","text":"x","delta":null}"#),
            text("x", true)
        );
        assert!(text_line(r#"{"type":"text","text":"x"}"#).is_some());
        // What it leaves to the general path, which reads it as it always did.
        for line in [
            r#"{"type":"text","text":"x","delta":"no"}"#,
            r#"{"type":"text"}"#,
            r#"{"type":"text","text":null}"#,
            r#"{"type":"text","text":"a","text":"b"}"#,
            r#"{"type":"thinking","text":"x"}"#,
        ] {
            assert!(text_line(line).is_none(), "{line}");
        }
        assert_eq!(
            parse(r#"{"type":"text","text":"x","delta":"no"}"#),
            text("x", true)
        );
        assert_eq!(parse(r#"{"type":"text"}"#), text("", true));
        assert_eq!(
            parse(r#"{"type":"text","text":"a","text":"b"}"#),
            text("b", true)
        );
        assert_eq!(
            parse(r#"{"type":"thinking","text":"x"}"#),
            vec![AgentEvent::Thinking { text: "x".into() }]
        );
    }

    #[test]
    fn every_kind_parses_regardless_of_key_order() {
        assert_eq!(
            parse(r#"{"session_id":"s1","type":"init","model":"m","tools":["Bash"]}"#),
            vec![AgentEvent::Init {
                session_id: Some("s1".into()),
                model: Some("m".into()),
                cwd: None,
                tools: vec!["Bash".into()]
            }]
        );
        assert_eq!(
            parse(r#"{"type":"text","text":"hi","delta":false}"#),
            vec![AgentEvent::Text {
                text: "hi".into(),
                delta: false
            }]
        );
        assert!(matches!(
            parse(r#"{"type":"tool_result","id":"1","output":{"a":1},"is_error":true}"#)[0],
            AgentEvent::ToolResult { is_error: true, ref output, .. } if output.as_deref() == Some(r#"{"a":1}"#)
        ));
        assert!(matches!(
            parse(r#"{"type":"approval_required","id":"a","kind":"command","options":[{"id":"allow"}]}"#)[0],
            AgentEvent::ApprovalRequired { ref options, .. } if options[0].label == "allow"
        ));
        assert!(matches!(
            parse(r#"{"type":"done","result":"ok"}"#)[0],
            AgentEvent::Done {
                is_error: false,
                ..
            }
        ));
    }

    #[test]
    fn artifacts_messages_and_rejections() {
        let ev = parse(
            r#"{"type":"artifact","artifact_id":"a1","name":"out","parts":[{"url":"https://x/y","filename":"y","mediaType":"text/plain"}],"append":true,"last_chunk":true}"#,
        );
        match &ev[0] {
            AgentEvent::Artifact {
                artifact_id,
                name,
                parts,
                append: true,
                last_chunk: true,
            } => {
                assert_eq!(artifact_id, "a1");
                assert_eq!(name.as_deref(), Some("out"));
                assert_eq!(parts[0].url.as_deref(), Some("https://x/y"));
                assert_eq!(parts[0].media_type.as_deref(), Some("text/plain"));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            &parse(r#"{"type":"artifact","artifact_id":"d","parts":[{"data":{"k":1}}]}"#)[0],
            AgentEvent::Artifact { append: false, last_chunk: false, parts, .. } if parts[0].data == Some(serde_json::json!({"k":1}))
        ));
        for bad in [
            r#"{"type":"artifact","parts":[{"text":"x"}]}"#,
            r#"{"type":"artifact","artifact_id":"a","parts":[]}"#,
            r#"{"type":"artifact","artifact_id":"a","parts":[{"text":"x","url":"u"}]}"#,
            r#"{"type":"artifact","artifact_id":"a","parts":"x"}"#,
        ] {
            assert!(matches!(parse(bad)[0], AgentEvent::Warning { .. }), "{bad}");
        }
        assert_eq!(
            parse(r#"{"type":"message","text":"hi"}"#),
            vec![AgentEvent::Message { text: "hi".into() }]
        );
        assert_eq!(
            parse(r#"{"type":"error","message":"no","rejected":true}"#),
            vec![AgentEvent::Rejected {
                message: "no".into()
            }]
        );
        assert!(matches!(
            parse(r#"{"type":"error","message":"no","rejected":false}"#)[0],
            AgentEvent::Error { .. }
        ));
    }

    #[test]
    fn noise_is_a_warning_and_unknown_types_are_ignored() {
        assert!(matches!(
            parse("hello there")[0],
            AgentEvent::Warning { .. }
        ));
        assert!(matches!(
            parse(r#"{"type":"#)[0],
            AgentEvent::Warning { .. }
        ));
        assert!(parse(r#"{"type":"brand_new","x":1}"#).is_empty());
        assert!(parse("   ").is_empty());
    }

    #[test]
    fn golden_fake_agent_session_with_noise() {
        let events = crate::adapter::wire::golden::events(
            &mut NativeParser::default(),
            "fake-agent/0.1.0/noise.jsonl",
        );
        let warnings = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::Warning { .. }))
            .count();
        assert_eq!(
            warnings, 8,
            "three text lines and one broken JSON line, twice"
        );
        insta::assert_debug_snapshot!(events
            .iter()
            .filter(|e| !matches!(e, AgentEvent::Warning { .. }))
            .collect::<Vec<_>>());
        crate::adapter::wire::golden::assert_updates!(crate::adapter::wire::golden::updates(
            &events
        ));
    }

    #[test]
    fn messages_while_working_only_when_the_program_takes_them() {
        assert!(NativeParser::default()
            .encode_message("hi", "m-1")
            .is_none());
        let mut options = toml::Table::new();
        options.insert("messages".into(), toml::Value::Boolean(true));
        let bytes = NativeParser::new(&options)
            .encode_message("also check the tests", "m-3")
            .unwrap();
        let s = String::from_utf8(bytes).unwrap();
        assert_eq!(s.matches('\n').count(), 1);
        assert!(s.ends_with('\n'));
        let v: Value = serde_json::from_str(s.trim()).unwrap();
        assert_eq!(
            v,
            json!({"type": "user_message", "text": "also check the tests", "message_id": "m-3"})
        );
    }

    #[test]
    fn decisions_encode_as_one_line() {
        let bytes = NativeParser::default()
            .encode_decision(&Decision {
                message_id: Some("m-2".into()),
                id: "a1".into(),
                allow: false,
                option: None,
                message: Some("no".into()),
            })
            .unwrap();
        let s = String::from_utf8(bytes).unwrap();
        assert!(s.ends_with('\n'));
        let v: Value = serde_json::from_str(s.trim()).unwrap();
        assert_eq!(v["decision"], "deny");
        assert_eq!(v["message"], "no");
        assert_eq!(v["message_id"], "m-2");
    }
}
