//! The lines the host writes on the CLI's stdin, each ending in a newline, with the keys in
//! the order of the recorded runs (`claude-code-stdio-permission-prompt`,
//! `claude-code-stdio-interrupt`, `qwen-stdio-permission-prompt`).

use serde::Serialize;
use serde_json::Value;

/// The prompt: `{"type":"user","message":{"role":"user","content":PROMPT},
/// "parent_tool_use_id":null,"session_id":""}`. The first message of a process carries an
/// empty session id (the session comes from `--session-id` / `--resume`).
pub(super) fn user(buf: &mut Vec<u8>, prompt: &str) {
    line_into(
        buf,
        &UserLine {
            ty: "user",
            message: UserMessage {
                role: "user",
                content: prompt,
            },
            parent_tool_use_id: Value::Null,
            session_id: "",
        },
    );
}

/// The SDK's `initialize` control request (no hooks).
pub(super) fn initialize(buf: &mut Vec<u8>, request_id: &str) {
    line_into(
        buf,
        &ControlRequest {
            ty: "control_request",
            request_id,
            request: Request::Initialize {
                subtype: "initialize",
                hooks: Value::Null,
            },
        },
    );
}

/// The `interrupt` control request: the CLI ends the turn with an error result.
pub(super) fn interrupt(buf: &mut Vec<u8>, request_id: &str) {
    line_into(
        buf,
        &ControlRequest {
            ty: "control_request",
            request_id,
            request: Request::Interrupt {
                subtype: "interrupt",
            },
        },
    );
}

/// The answer to `can_use_tool`: allow with the tool's input as `updatedInput`, or deny
/// with a message (which the model sees as the tool's error result).
pub(super) fn permission(buf: &mut Vec<u8>, request_id: &str, allow: Result<&Value, &str>) {
    let response = match allow {
        Ok(input) => Permission::Allow {
            behavior: "allow",
            updated_input: input,
        },
        Err(message) => Permission::Deny {
            behavior: "deny",
            message,
        },
    };
    line_into(
        buf,
        &ControlResponse {
            ty: "control_response",
            response: ResponseBody::Success {
                subtype: "success",
                request_id,
                response,
            },
        },
    );
}

/// An error answer to a control request (the SDK's shape, docs/wire-formats.md).
pub(super) fn error(buf: &mut Vec<u8>, request_id: &str, error: &str) {
    line_into(
        buf,
        &ControlResponse {
            ty: "control_response",
            response: ResponseBody::Error {
                subtype: "error",
                request_id,
                error,
            },
        },
    );
}

#[derive(Serialize)]
struct UserLine<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    message: UserMessage<'a>,
    parent_tool_use_id: Value,
    session_id: &'a str,
}

#[derive(Serialize)]
struct UserMessage<'a> {
    role: &'static str,
    content: &'a str,
}

#[derive(Serialize)]
struct ControlRequest<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    request_id: &'a str,
    request: Request,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Request {
    Initialize { subtype: &'static str, hooks: Value },
    Interrupt { subtype: &'static str },
}

#[derive(Serialize)]
struct ControlResponse<'a> {
    #[serde(rename = "type")]
    ty: &'static str,
    response: ResponseBody<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ResponseBody<'a> {
    Success {
        subtype: &'static str,
        request_id: &'a str,
        response: Permission<'a>,
    },
    Error {
        subtype: &'static str,
        request_id: &'a str,
        error: &'a str,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum Permission<'a> {
    Allow {
        behavior: &'static str,
        #[serde(rename = "updatedInput")]
        updated_input: &'a Value,
    },
    Deny {
        behavior: &'static str,
        message: &'a str,
    },
}

/// Appends one JSON line. Serializing these plain structs cannot fail; if it ever did, the
/// line would be left out rather than written half.
fn line_into<T: Serialize>(buf: &mut Vec<u8>, value: &T) {
    if let Ok(mut s) = serde_json::to_vec(value) {
        s.push(b'\n');
        buf.extend_from_slice(&s);
    }
}
