//! Checking an incoming message and turning it into a prompt or an answer.

use base64::Engine as _;
use serde_json::Value;

use crate::adapter::wire::Decision;
use crate::protocol::v1::{Message, Part, Role};
use crate::protocol::A2AError;

/// Checks the parts of an incoming user message.
pub fn validate_message(m: &Message) -> Result<(), A2AError> {
    if m.message_id.is_empty() {
        return Err(A2AError::InvalidParams(
            "message.messageId is required".into(),
        ));
    }
    if m.role == Role::Agent {
        return Err(A2AError::InvalidParams(
            "message.role must be ROLE_USER (\"user\" in v0.3)".into(),
        ));
    }
    if m.parts.is_empty() {
        return Err(A2AError::InvalidParams(
            "message.parts must contain at least one part".into(),
        ));
    }
    for (i, p) in m.parts.iter().enumerate() {
        match p.content_count() {
            1 => {}
            0 => {
                return Err(A2AError::InvalidParams(format!(
                    "message.parts[{i}] has no content: set one of text, raw, url, data"
                )))
            }
            _ => {
                return Err(A2AError::InvalidParams(format!(
                    "message.parts[{i}] has more than one of text, raw, url, data"
                )))
            }
        }
        if let Some(raw) = &p.raw {
            if base64::engine::general_purpose::STANDARD
                .decode(raw)
                .is_err()
            {
                return Err(A2AError::InvalidParams(format!(
                    "message.parts[{i}].raw is not valid base64"
                )));
            }
            if !is_textual(p.media_type.as_deref()) {
                return Err(A2AError::ContentTypeNotSupported(format!(
                    "message.parts[{i}] has media type '{}'; this agent reads text (text/*, application/json)",
                    p.media_type.as_deref().unwrap_or("")
                )));
            }
        }
        if let Some(mt) = &p.media_type {
            if p.raw.is_none() && p.url.is_none() && !is_textual(Some(mt)) {
                return Err(A2AError::ContentTypeNotSupported(format!(
                    "message.parts[{i}] has media type '{mt}'; this agent reads text (text/*, application/json)"
                )));
            }
        }
    }
    Ok(())
}

fn is_textual(media_type: Option<&str>) -> bool {
    match media_type {
        None => true,
        Some(mt) => {
            let base = mt
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            base.is_empty()
                || base.starts_with("text/")
                || base == "application/json"
                || base.ends_with("+json")
                || base == "application/x-yaml"
                || base == "application/yaml"
        }
    }
}

/// The prompt for the CLI: text parts as they are, data parts as JSON, files inlined (text)
/// or named (URLs), separated by blank lines.
pub fn prompt_of(m: &Message) -> String {
    let mut pieces: Vec<String> = Vec::new();
    for p in &m.parts {
        if let Some(t) = &p.text {
            pieces.push(t.clone());
        } else if let Some(d) = &p.data {
            pieces.push(d.to_string());
        } else if let Some(u) = &p.url {
            match &p.filename {
                Some(f) => pieces.push(format!("Attached file {f}: {u}")),
                None => pieces.push(format!("Attached file: {u}")),
            }
        } else if let Some(raw) = &p.raw {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(raw)
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            match &p.filename {
                Some(f) => pieces.push(format!("File {f}:\n{text}")),
                None => pieces.push(text.into_owned()),
            }
        }
    }
    pieces.join("\n\n")
}

const YES: &[&str] = &[
    "y", "yes", "allow", "allowed", "approve", "approved", "ok", "okay", "accept", "continue",
    "proceed", "go ahead",
];
const NO: &[&str] = &[
    "n", "no", "deny", "denied", "reject", "rejected", "decline", "stop",
];

/// Reads a user's answer to an approval request. A data part `{"decision": "allow"|"deny",
/// "option": "...", "message": "..."}` wins; otherwise the text: yes/allow/approve … or
/// no/deny/reject …. For a question (`kind` "question") any text is the answer.
pub fn decision_of(m: &Message, approval_id: &str, kind: &str) -> Result<Decision, A2AError> {
    for p in &m.parts {
        if let Some(Value::Object(d)) = &p.data {
            if let Some(dec) = d.get("decision").and_then(Value::as_str) {
                let allow = match dec.to_ascii_lowercase().as_str() {
                    "allow" | "approve" | "approved" | "yes" | "accept" => true,
                    "deny" | "reject" | "rejected" | "no" | "decline" => false,
                    other => {
                        return Err(A2AError::InvalidParams(format!(
                            "decision '{other}' is not one of allow, deny"
                        )))
                    }
                };
                return Ok(Decision {
                    message_id: Some(m.message_id.clone()),
                    id: approval_id.to_string(),
                    allow,
                    option: d.get("option").and_then(Value::as_str).map(str::to_string),
                    message: d.get("message").and_then(Value::as_str).map(str::to_string),
                });
            }
        }
    }
    let text = m.text();
    let t = text.trim();
    let norm = t.trim_end_matches(['.', '!']).to_ascii_lowercase();
    let allow = if YES.contains(&norm.as_str()) {
        Some(true)
    } else if NO.contains(&norm.as_str()) {
        Some(false)
    } else {
        None
    };
    match (allow, kind) {
        (Some(allow), _) => Ok(Decision {
            message_id: Some(m.message_id.clone()),
            id: approval_id.to_string(),
            allow,
            option: None,
            message: if kind == "question" { Some(t.to_string()) } else { None },
        }),
        (None, "question") if !t.is_empty() => Ok(Decision {
            message_id: Some(m.message_id.clone()),
            id: approval_id.to_string(),
            allow: true,
            option: None,
            message: Some(t.to_string()),
        }),
        _ => Err(A2AError::InvalidParams(
            "the task waits for an approval: answer 'yes' (allow) or 'no' (deny), or send a data part {\"decision\":\"allow\"|\"deny\"}".into(),
        )),
    }
}

/// The working directory a message asks for: `metadata.cwd`, or the iac-code shape
/// `metadata.iac_code.cwd`, on the message or on the request.
pub fn requested_cwd(
    m: &Message,
    request_metadata: Option<&serde_json::Map<String, Value>>,
) -> Option<String> {
    let from = |md: &serde_json::Map<String, Value>| {
        md.get("cwd")
            .and_then(Value::as_str)
            .or_else(|| md.get("iac_code")?.get("cwd")?.as_str())
            .map(str::to_string)
    };
    m.metadata
        .as_ref()
        .and_then(from)
        .or_else(|| request_metadata.and_then(from))
        .filter(|c| !c.is_empty())
}

/// A text part, for tests and callers building messages.
pub fn text_message(text: &str) -> Message {
    Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        role: Role::User,
        parts: vec![Part::text(text)],
        ..Message::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validation_says_what_is_wrong() {
        let mut m = text_message("hi");
        assert!(validate_message(&m).is_ok());
        m.parts.push(Part::default());
        let e = validate_message(&m).unwrap_err();
        assert_eq!(e.code(), -32602);
        assert!(e.to_string().contains("parts[1]"));
        let mut img = text_message("x");
        img.parts = vec![Part {
            raw: Some("aGk=".into()),
            media_type: Some("image/png".into()),
            ..Part::default()
        }];
        assert_eq!(validate_message(&img).unwrap_err().code(), -32005);
        let mut bad = text_message("x");
        bad.parts[0].media_type = Some("application/x-unsupported-tck-type".into());
        assert_eq!(validate_message(&bad).unwrap_err().code(), -32005);
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
            prompt_of(&m),
            "Fix it\n\n{\"file\":\"a.rs\"}\n\nFile n.txt:\nhello"
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
}
