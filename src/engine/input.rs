//! Checking an incoming message and turning it into a prompt or an answer.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use crate::adapter::wire::Decision;
use crate::protocol::v1::{Message, Part, Role};
use crate::protocol::A2AError;

/// Media types accepted when none are configured: text, JSON, and anything else (a binary
/// part is saved as a file the agent can open).
pub const DEFAULT_INPUT_MODES: &[&str] = &["text/plain", "application/json", "*/*"];

/// The directory under a task's working directory where agent-host keeps its files.
pub const HOST_DIR: &str = ".agent-host";

/// A configured list of input modes that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputModeError {
    #[error("input mode '{0}' is not a media type: use type/subtype, type/* or */* (e.g. image/png, image/*)")]
    NotAMediaType(String),
    #[error("input modes are empty: name at least one media type (e.g. text/plain)")]
    Empty,
}

/// Checks one configured input mode: `type/subtype`, `type/*` or `*/*`, without parameters.
pub fn check_input_mode(mode: &str) -> Result<(), InputModeError> {
    let token = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&^_.+-".contains(c))
    };
    let ok = match mode.split_once('/') {
        Some(("*", "*")) => true,
        Some((t, "*")) => token(t),
        Some((t, s)) => token(t) && token(s),
        None => false,
    };
    if ok {
        Ok(())
    } else {
        Err(InputModeError::NotAMediaType(mode.to_string()))
    }
}

/// [`DEFAULT_INPUT_MODES`] as owned strings.
pub fn default_input_modes() -> Vec<String> {
    DEFAULT_INPUT_MODES.iter().map(|m| m.to_string()).collect()
}

/// The input modes as configured (`None`: the defaults), trimmed and checked.
pub fn input_modes(configured: Option<Vec<String>>) -> Result<Vec<String>, InputModeError> {
    let Some(list) = configured else {
        return Ok(default_input_modes());
    };
    let modes: Vec<String> = list
        .iter()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .collect();
    if modes.is_empty() {
        return Err(InputModeError::Empty);
    }
    modes.iter().try_for_each(|m| check_input_mode(m))?;
    Ok(modes)
}

/// A media type without its parameters, trimmed and lower-case.
fn base_type(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// Whether one of `modes` (`type/subtype`, `type/*`, `*/*`) covers `media_type`; parameters
/// (`; charset=...`) are ignored, case does not matter.
pub fn accepts(modes: &[String], media_type: &str) -> bool {
    let base = base_type(media_type);
    let ty = base.split_once('/').map(|(t, _)| t);
    modes.iter().any(|m| {
        let m = m.trim().to_ascii_lowercase();
        match m.split_once('/') {
            Some(("*", "*")) => true,
            Some((t, "*")) => ty == Some(t),
            _ => m == base,
        }
    })
}

/// Refuses a message with more file parts (`raw` or `url`) than `max`: each raw one may
/// become a file in the working directory.
pub fn check_file_count(m: &Message, max: usize) -> Result<(), A2AError> {
    let files = m
        .parts
        .iter()
        .filter(|p| p.raw.is_some() || p.url.is_some())
        .count();
    if files > max {
        return Err(A2AError::InvalidParams(format!(
            "message has {files} file parts; at most {max} are accepted per message (limits.max_files_per_message)"
        )));
    }
    Ok(())
}

/// Checks the parts of an incoming user message; a part that names its media type must be
/// of one of `modes` (the agent's input modes).
pub fn validate_message(m: &Message, modes: &[String]) -> Result<(), A2AError> {
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
        }
        if let Some(mt) = media_type_of(p) {
            if !accepts(modes, mt) {
                return Err(A2AError::ContentTypeNotSupported(format!(
                    "message.parts[{i}] has media type '{mt}'; this agent accepts {}",
                    modes.join(", ")
                )));
            }
        }
    }
    check_no_nul(m)
}

/// The prompt reaches the program as an argument, a line or a file: a NUL byte cannot be
/// passed as an argument (the program would not start) and cuts C strings short, so a
/// message whose prompt text would hold one is refused before anything starts.
fn check_no_nul(m: &Message) -> Result<(), A2AError> {
    let saved: Vec<usize> = attachments(m).iter().map(|a| a.index).collect();
    for (i, p) in m.parts.iter().enumerate() {
        let inlined_raw = || {
            p.raw
                .as_deref()
                .filter(|_| !saved.contains(&i))
                .and_then(|r| base64::engine::general_purpose::STANDARD.decode(r).ok())
                .is_some_and(|b| b.contains(&0))
        };
        let field = [
            ("text", &p.text),
            ("url", &p.url),
            ("filename", &p.filename),
        ]
        .into_iter()
        .find(|(_, v)| v.as_deref().is_some_and(|t| t.contains('\0')))
        .map(|(name, _)| name)
        .or_else(|| inlined_raw().then_some("raw"));
        if let Some(field) = field {
            return Err(A2AError::InvalidParams(format!(
                "message.parts[{i}].{field} contains a NUL byte (U+0000), which cannot be passed to the agent program"
            )));
        }
    }
    Ok(())
}

/// The part's media type, when it names one.
fn media_type_of(p: &Part) -> Option<&str> {
    p.media_type.as_deref().filter(|t| !t.trim().is_empty())
}

/// Whether a media type is one the agent reads as text (inlined in the prompt).
fn is_textual(media_type: &str) -> bool {
    let base = base_type(media_type);
    base.starts_with("text/")
        || base == "application/json"
        || base.ends_with("+json")
        || base == "application/x-yaml"
        || base == "application/yaml"
}

/// A `raw` part that is not text, saved as a file for the agent.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    /// The part's index in the message.
    pub index: usize,
    /// The file name: safe, unique within the message.
    pub name: String,
    /// The part's media type (`application/octet-stream` when it names none).
    pub media_type: String,
    pub bytes: Vec<u8>,
}

/// The raw parts of `m` that are not text (a textual media type, or none and valid UTF-8),
/// with the names they are saved under. Deterministic: the same message gives the same names.
pub fn attachments(m: &Message) -> Vec<Attachment> {
    let mut out: Vec<Attachment> = Vec::new();
    let mut taken = std::collections::HashSet::new();
    for (index, p) in m.parts.iter().enumerate() {
        let Some(raw) = &p.raw else { continue };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(raw) else {
            continue;
        };
        let binary = match media_type_of(p) {
            Some(mt) => !is_textual(mt),
            None => std::str::from_utf8(&bytes).is_err(),
        };
        if !binary {
            continue;
        }
        let media_type = media_type_of(p)
            .unwrap_or("application/octet-stream")
            .to_string();
        let mut name = file_name(p.filename.as_deref(), index, &media_type);
        // Compared without case: on a case-insensitive file system `A.png` is `a.png`.
        while !taken.insert(name.to_ascii_lowercase()) {
            name = format!("{index}-{name}");
        }
        out.push(Attachment {
            index,
            name,
            media_type,
            bytes,
        });
    }
    out
}

/// A safe file name for a part: the last component of its `filename` with characters other
/// than `A-Za-z0-9._-` replaced by `_`, no leading dots or dashes (a name never reads as an
/// option to a program the agent runs on it), at most 100 bytes; else
/// `part-<index>` with an extension for the media type.
fn file_name(filename: Option<&str>, index: usize, media_type: &str) -> String {
    let last = filename
        .unwrap_or("")
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("");
    let safe: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut name = safe.trim_start_matches(['.', '-']).to_string();
    // Every character is ASCII now, so any length is a character boundary.
    name.truncate(100);
    if name.is_empty() {
        let ext = match base_type(media_type).as_str() {
            "image/png" => "png",
            "image/jpeg" | "image/jpg" => "jpg",
            "image/gif" => "gif",
            "image/webp" => "webp",
            "application/pdf" => "pdf",
            "application/zip" => "zip",
            _ => "bin",
        };
        name = format!("part-{index}.{ext}");
    }
    name
}

/// Where the attachments of task `task_id` are saved, under its working directory.
pub fn attachments_dir(work_dir: &Path, task_id: &str) -> PathBuf {
    work_dir.join(HOST_DIR).join("attachments").join(task_id)
}

/// The name of a long prompt's file in the task's attachments folder: it starts with a dot,
/// which no attachment's name does ([`attachments`]).
pub const PROMPT_FILE_NAME: &str = ".prompt.txt";

/// Where a turn of task `task_id` finds its prompt when it goes in a file (an adapter with
/// `long_prompt = "file"`): in the task's own folder, which the sandbox shows it.
pub fn prompt_file(work_dir: &Path, task_id: &str) -> PathBuf {
    attachments_dir(work_dir, task_id).join(PROMPT_FILE_NAME)
}

/// The prompt for the CLI: text parts as they are, data parts as JSON, files inlined (text),
/// named (URLs) or pointed to (binary, saved in `attachments_dir`; None: not saved),
/// separated by blank lines.
pub fn prompt_of(m: &Message, attachments_dir: Option<&Path>) -> String {
    let files = attachments(m);
    let mut pieces: Vec<String> = Vec::new();
    for (i, p) in m.parts.iter().enumerate() {
        if let Some(t) = &p.text {
            pieces.push(t.clone());
        } else if let Some(d) = &p.data {
            pieces.push(d.to_string());
        } else if let Some(u) = &p.url {
            match &p.filename {
                Some(f) => pieces.push(format!("Attached file {f}: {u}")),
                None => pieces.push(format!("Attached file: {u}")),
            }
        } else if let Some(a) = files.iter().find(|a| a.index == i) {
            let head = format!(
                "Attached file {} ({}, {} bytes)",
                a.name,
                a.media_type,
                a.bytes.len()
            );
            pieces.push(match attachments_dir {
                Some(dir) => format!("{head}, saved at {}", dir.join(&a.name).display()),
                None => format!(
                    "{head} (not saved: attachments are kept only for a task's first message)"
                ),
            });
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
///
/// An answer that names the question it answers (`approvalId` in a data part or in the
/// message's metadata) must name the one waiting: an answer meant for an earlier question
/// never answers a later one the client has not seen.
pub fn decision_of(m: &Message, approval_id: &str, kind: &str) -> Result<Decision, A2AError> {
    answers_the_question(m, approval_id)?;
    decision_in(m, approval_id, kind)
}

/// Refuses an answer that names a question (`approvalId` in a data part or in the
/// message's metadata) other than `approval_id`, the one the task waits on. An answer that
/// names none is for the question waiting.
pub fn answers_the_question(m: &Message, approval_id: &str) -> Result<(), A2AError> {
    let named = m
        .parts
        .iter()
        .filter_map(|p| p.data.as_ref()?.get("approvalId")?.as_str())
        .chain(
            m.metadata
                .as_ref()
                .and_then(|md| md.get("approvalId")?.as_str()),
        )
        .find(|id| !approval_id.is_empty() && *id != approval_id);
    if let Some(other) = named {
        return Err(A2AError::InvalidParams(format!(
            "the answer is for approval '{other}', but the task now waits for approval '{approval_id}'; read the task's status and answer that question"
        )));
    }
    Ok(())
}

/// The decision an answer to `approval_id` gives.
fn decision_in(m: &Message, approval_id: &str, kind: &str) -> Result<Decision, A2AError> {
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
                let option = d.get("option").and_then(Value::as_str).map(str::to_string);
                let mut message = d.get("message").and_then(Value::as_str).map(str::to_string);
                // A question's answer is its text (the data part's, else the message's): a
                // bare "allow" would give it none (a "deny" declines the question).
                let empty = message.as_deref().is_none_or(|t| t.trim().is_empty());
                if kind == "question" && allow && option.is_none() && empty {
                    let text = m.text();
                    if text.trim().is_empty() {
                        return Err(A2AError::InvalidParams(
                            "the task asks a question, not for an approval: answer with text (a text part; over MCP, reply's text)".into(),
                        ));
                    }
                    message = Some(text.trim().to_string());
                }
                return Ok(Decision {
                    message_id: Some(m.message_id.clone()),
                    id: approval_id.to_string(),
                    allow,
                    option,
                    message,
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
            "the task waits for an approval: answer 'yes' (allow) or 'no' (deny), or give a decision (a data part {\"decision\":\"allow\"|\"deny\"}; over MCP, reply's decision)".into(),
        )),
    }
}

/// The working directory a message asks for: `metadata.cwd`, or the iac-code shape
/// `metadata.iac_code.cwd`, on the message or on the request. A value that is not a string
/// (nor null) is refused rather than taken for absent.
pub fn requested_cwd(
    m: &Message,
    request_metadata: Option<&serde_json::Map<String, Value>>,
) -> Result<Option<String>, A2AError> {
    let from = |md: &serde_json::Map<String, Value>| -> Result<Option<String>, A2AError> {
        if let Some(cwd) = text_field(md.get("cwd"), "metadata.cwd", "an absolute path")? {
            return Ok(Some(cwd));
        }
        let iac = md.get("iac_code").and_then(|v| v.get("cwd"));
        text_field(iac, "metadata.iac_code.cwd", "an absolute path")
    };
    let asked = message_or_request(m, request_metadata, from)?;
    Ok(asked.filter(|c| !c.is_empty()))
}

/// The base a new context's workspace starts from: `metadata.baseRef` of the message, else
/// of the request.
pub fn requested_base_ref(
    m: &Message,
    request_metadata: Option<&serde_json::Map<String, Value>>,
) -> Result<Option<String>, A2AError> {
    let from = |md: &serde_json::Map<String, Value>| {
        text_field(
            md.get("baseRef"),
            "metadata.baseRef",
            "a branch, tag or commit",
        )
    };
    message_or_request(m, request_metadata, from)
}

/// What `from` reads in the message's metadata, else in the request's.
fn message_or_request(
    m: &Message,
    request_metadata: Option<&serde_json::Map<String, Value>>,
    from: impl Fn(&serde_json::Map<String, Value>) -> Result<Option<String>, A2AError>,
) -> Result<Option<String>, A2AError> {
    match m.metadata.as_ref().map(&from).transpose()?.flatten() {
        Some(v) => Ok(Some(v)),
        None => Ok(request_metadata.map(&from).transpose()?.flatten()),
    }
}

/// A metadata field that must be text when present (null counts as absent).
fn text_field(v: Option<&Value>, name: &str, what: &str) -> Result<Option<String>, A2AError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(A2AError::InvalidParams(format!(
            "{name} must be a string ({what}), not {other}"
        ))),
    }
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
mod tests;
