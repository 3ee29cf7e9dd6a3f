//! The client's errors: what the remote agent said (with its A2A code and reason), what the
//! transport did, and what the client itself could not do.

use serde_json::Value;

/// An error the remote agent returned: a JSON-RPC error or an HTTP+JSON `google.rpc.Status`.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteError {
    /// The JSON-RPC code (`-32001` task not found, ...); for an HTTP+JSON error, the code of
    /// its `ErrorInfo` reason, else 0.
    pub code: i64,
    /// The `ErrorInfo.reason` (`TASK_NOT_FOUND`, ...), given or derived from the code.
    pub reason: Option<String>,
    pub message: String,
    /// The HTTP status, for the HTTP+JSON binding.
    pub http_status: Option<u16>,
    /// The raw `data` / `details`.
    pub data: Option<Value>,
}

impl std::fmt::Display for RemoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (", self.message)?;
        match (&self.reason, self.code) {
            (Some(r), 0) => write!(f, "{r}")?,
            (Some(r), c) => write!(f, "{r}, {c}")?,
            (None, c) => write!(f, "error {c}")?,
        }
        if let Some(s) = self.http_status {
            write!(f, ", HTTP {s}")?;
        }
        write!(f, ")")
    }
}

/// A2A error reasons with their JSON-RPC codes.
const REASONS: &[(&str, i64)] = &[
    ("TASK_NOT_FOUND", -32001),
    ("TASK_NOT_CANCELABLE", -32002),
    ("PUSH_NOTIFICATION_NOT_SUPPORTED", -32003),
    ("UNSUPPORTED_OPERATION", -32004),
    ("CONTENT_TYPE_NOT_SUPPORTED", -32005),
    ("INVALID_AGENT_RESPONSE", -32006),
    ("EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32007),
    ("EXTENSION_SUPPORT_REQUIRED", -32008),
    ("VERSION_NOT_SUPPORTED", -32009),
];

/// The `ErrorInfo` reason of an A2A JSON-RPC code.
pub fn reason_for_code(code: i64) -> Option<&'static str> {
    REASONS.iter().find(|(_, c)| *c == code).map(|(r, _)| *r)
}

/// The JSON-RPC code of an A2A reason.
pub fn code_for_reason(reason: &str) -> Option<i64> {
    REASONS.iter().find(|(r, _)| *r == reason).map(|(_, c)| *c)
}

/// The first `ErrorInfo.reason` among error details (`data` of JSON-RPC v1.0, `details` of
/// HTTP+JSON).
fn reason_in(details: Option<&Value>) -> Option<String> {
    details?
        .as_array()?
        .iter()
        .find_map(|d| d.get("reason").and_then(Value::as_str))
        .map(str::to_string)
}

impl RemoteError {
    /// From a JSON-RPC `error` object.
    pub fn from_jsonrpc(err: &Value) -> RemoteError {
        let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
        let data = err.get("data").filter(|d| !d.is_null()).cloned();
        let reason = reason_in(data.as_ref()).or_else(|| reason_for_code(code).map(Into::into));
        RemoteError {
            code,
            reason,
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            http_status: None,
            data,
        }
    }

    /// From an HTTP+JSON error body (`{"error":{"code","status","message","details"}}`), or
    /// None when the body is not one.
    pub fn from_rest(status: u16, body: &Value) -> Option<RemoteError> {
        let err = body.get("error")?;
        if !err.is_object() {
            return None;
        }
        let details = err.get("details").filter(|d| !d.is_null()).cloned();
        let reason = reason_in(details.as_ref());
        let code = reason.as_deref().and_then(code_for_reason).unwrap_or(0);
        Some(RemoteError {
            code,
            reason: reason.or_else(|| {
                err.get("status")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            }),
            message: err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            http_status: Some(status),
            data: details,
        })
    }
}

/// Everything that can go wrong in a client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The agent answered with an A2A / JSON-RPC error.
    #[error("{kind}: {0}", kind = remote_kind(.0))]
    Remote(RemoteError),
    /// An HTTP error status without an A2A error body.
    #[error("HTTP {status} from {url}: {body}")]
    Http {
        status: u16,
        url: String,
        body: String,
    },
    /// Connecting, sending or reading failed.
    #[error("cannot talk to {url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// Nothing listens at the address (or it cannot be reached at all).
    #[error("{detail}: is agent-host running at {url}?")]
    Unreachable { url: String, detail: String },
    /// No answer (or, on a stream, no data) within the configured time.
    #[error("no answer from {url} within {seconds:.0} s")]
    Timeout { url: String, seconds: f64 },
    /// The answer was not what the protocol says.
    #[error("unexpected answer from {url}: {detail}")]
    InvalidResponse { url: String, detail: String },
    /// The agent card could not be read or used.
    #[error("agent card at {url}: {detail}")]
    Card { url: String, detail: String },
    /// The card lists no interface this client can use.
    #[error("no usable interface in the agent card: {0}")]
    NoInterface(String),
    /// The operation does not exist in the protocol version in use (ListTasks in v0.3).
    #[error("{operation} is not available over A2A {version}")]
    Unsupported {
        operation: &'static str,
        version: &'static str,
    },
    /// A stream broke and could not be resumed.
    #[error(
        "the stream of task {task_id} broke and {attempts} resubscribe attempts failed: {last}"
    )]
    StreamLost {
        task_id: String,
        attempts: u32,
        last: Box<ClientError>,
    },
    /// A bad argument (URL, header value).
    #[error("{0}")]
    Usage(String),
}

/// What a remote error says of the agent: a refusal, unless the host could not carry the
/// request out (busy, another host that owns the task out of reach, an internal failure).
fn remote_kind(r: &RemoteError) -> &'static str {
    match r.code {
        crate::protocol::error::UNAVAILABLE_CODE => "the agent is unavailable",
        crate::protocol::error::BUSY_CODE => "the agent is busy",
        -32603 => "the agent failed",
        _ => "the agent refused",
    }
}

impl ClientError {
    /// The A2A / JSON-RPC code of a remote error.
    pub fn code(&self) -> Option<i64> {
        match self {
            ClientError::Remote(r) => Some(r.code),
            ClientError::StreamLost { last, .. } => last.code(),
            _ => None,
        }
    }

    /// The `ErrorInfo` reason of a remote error (`TASK_NOT_FOUND`, ...).
    pub fn reason(&self) -> Option<&str> {
        match self {
            ClientError::Remote(r) => r.reason.as_deref(),
            ClientError::StreamLost { last, .. } => last.reason(),
            _ => None,
        }
    }

    /// True for a connection-level failure worth retrying (not an answer of the agent).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClientError::Transport { .. }
                | ClientError::Timeout { .. }
                | ClientError::Unreachable { .. }
        ) || matches!(self, ClientError::Http { status, .. } if *status >= 500)
    }
}

/// A failed request as a client error: [`ClientError::Unreachable`] when no connection could
/// be made (saying why: refused, no such host, ...), else [`ClientError::Transport`].
pub(super) fn transport_error(url: &str, e: reqwest::Error) -> ClientError {
    if !e.is_connect() {
        return ClientError::Transport {
            url: url.to_string(),
            source: e,
        };
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    let mut detail = "cannot connect".to_string();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            detail = match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
                _ => format!("cannot connect ({io})"),
            };
            break;
        }
        source = s.source();
    }
    ClientError::Unreachable {
        url: url.to_string(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jsonrpc_errors_keep_code_and_reason() {
        let e = RemoteError::from_jsonrpc(&json!({"code": -32001, "message": "Task not found",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND"}]}));
        assert_eq!(e.code, -32001);
        assert_eq!(e.reason.as_deref(), Some("TASK_NOT_FOUND"));
        // v0.3: no data; the reason comes from the code.
        let e = RemoteError::from_jsonrpc(&json!({"code": -32002, "message": "ended"}));
        assert_eq!(e.reason.as_deref(), Some("TASK_NOT_CANCELABLE"));
        assert_eq!(e.to_string(), "ended (TASK_NOT_CANCELABLE, -32002)");
    }

    #[test]
    fn rest_errors_map_reason_to_code() {
        let body = json!({"error": {"code": 404, "status": "NOT_FOUND", "message": "Task not found",
            "details": [{"reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}});
        let e = RemoteError::from_rest(404, &body).unwrap();
        assert_eq!((e.code, e.http_status), (-32001, Some(404)));
        let err = ClientError::Remote(e);
        assert_eq!(err.reason(), Some("TASK_NOT_FOUND"));
        assert_eq!(err.code(), Some(-32001));
        assert!(RemoteError::from_rest(500, &json!({"error": "x"})).is_none());
    }

    #[test]
    fn only_a_refusal_reads_as_one() {
        let said = |code: i64| {
            let e = RemoteError::from_jsonrpc(&json!({"code": code, "message": "m"}));
            ClientError::Remote(e).to_string()
        };
        // The host that owns the task cannot be reached: not the agent's refusal.
        assert!(
            said(-32051).starts_with("the agent is unavailable: m"),
            "{}",
            said(-32051)
        );
        assert!(said(-32050).starts_with("the agent is busy"));
        assert!(said(-32001).starts_with("the agent refused: m"));
    }
}
