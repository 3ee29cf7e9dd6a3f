//! Protocol errors: the one place that maps an error to its JSON-RPC code, its `ErrorInfo`
//! reason, its HTTP status and its gRPC status code.

use serde_json::{json, Map, Value};

/// An error a client sees. Messages are meant for the client: they say what was wrong and
/// never carry local paths, secrets or provider details.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum A2AError {
    #[error("{0}")]
    Parse(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    MethodNotFound(String),
    #[error("{0}")]
    InvalidParams(String),
    #[error("{0}")]
    Internal(String),
    #[error("Task not found: {0}")]
    TaskNotFound(String),
    /// A task's push notification config that does not exist: A2A has no error of its own
    /// for it, so it is the task-not-found error (code, reason, status) naming both ids.
    #[error("push notification config '{config_id}' of task {task_id} not found")]
    PushConfigNotFound { task_id: String, config_id: String },
    #[error("{0}")]
    TaskNotCancelable(String),
    #[error("Push notifications are not supported by this agent")]
    PushNotificationNotSupported,
    #[error("{0}")]
    UnsupportedOperation(String),
    #[error("{0}")]
    ContentTypeNotSupported(String),
    #[error("{0}")]
    InvalidAgentResponse(String),
    #[error("The extended agent card is not configured")]
    ExtendedAgentCardNotConfigured,
    #[error("{0}")]
    ExtensionSupportRequired(String),
    #[error("{0}")]
    VersionNotSupported(String),
    /// The host is at capacity (a documented server error outside A2A's -32001…-32009).
    #[error("{0}")]
    Busy(String),
    /// The host that runs the task (with several hosts on one store) could not be reached,
    /// though its lease says it is alive: retry later (a server error outside A2A's codes).
    #[error("{0}")]
    Unavailable(String),
}

/// The `domain` of every `google.rpc.ErrorInfo` this host sends.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// The `google.rpc.Code` numbers the gRPC binding uses.
pub mod grpc_code {
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const NOT_FOUND: i32 = 5;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const FAILED_PRECONDITION: i32 = 9;
    pub const UNIMPLEMENTED: i32 = 12;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
}

/// JSON-RPC code for the host being at capacity (server-defined range, outside A2A's codes).
pub const BUSY_CODE: i64 = -32050;

/// JSON-RPC code for the task's owner host being out of reach (server-defined range).
pub const UNAVAILABLE_CODE: i64 = -32051;

impl A2AError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            A2AError::Parse(_) => -32700,
            A2AError::InvalidRequest(_) => -32600,
            A2AError::MethodNotFound(_) => -32601,
            A2AError::InvalidParams(_) => -32602,
            A2AError::Internal(_) => -32603,
            A2AError::TaskNotFound(_) | A2AError::PushConfigNotFound { .. } => -32001,
            A2AError::TaskNotCancelable(_) => -32002,
            A2AError::PushNotificationNotSupported => -32003,
            A2AError::UnsupportedOperation(_) => -32004,
            A2AError::ContentTypeNotSupported(_) => -32005,
            A2AError::InvalidAgentResponse(_) => -32006,
            A2AError::ExtendedAgentCardNotConfigured => -32007,
            A2AError::ExtensionSupportRequired(_) => -32008,
            A2AError::VersionNotSupported(_) => -32009,
            A2AError::Busy(_) => BUSY_CODE,
            A2AError::Unavailable(_) => UNAVAILABLE_CODE,
        }
    }

    /// The error of a JSON-RPC `code` with its `message`, as another agent-host sent it (a
    /// command passed to the host that owns the task answers with that host's error). A
    /// code this host does not send is an internal error.
    pub fn from_code(code: i64, message: String) -> A2AError {
        match code {
            -32700 => A2AError::Parse(message),
            -32600 => A2AError::InvalidRequest(message),
            -32601 => A2AError::MethodNotFound(message),
            -32602 => A2AError::InvalidParams(message),
            -32001 => A2AError::TaskNotFound(
                message
                    .strip_prefix("Task not found: ")
                    .map(str::to_string)
                    .unwrap_or(message),
            ),
            -32002 => A2AError::TaskNotCancelable(message),
            -32003 => A2AError::PushNotificationNotSupported,
            -32004 => A2AError::UnsupportedOperation(message),
            -32005 => A2AError::ContentTypeNotSupported(message),
            -32006 => A2AError::InvalidAgentResponse(message),
            -32007 => A2AError::ExtendedAgentCardNotConfigured,
            -32008 => A2AError::ExtensionSupportRequired(message),
            -32009 => A2AError::VersionNotSupported(message),
            BUSY_CODE => A2AError::Busy(message),
            UNAVAILABLE_CODE => A2AError::Unavailable(message),
            _ => A2AError::Internal(message),
        }
    }

    /// The `google.rpc.ErrorInfo` reason for A2A-defined errors; None for plain JSON-RPC ones.
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            A2AError::TaskNotFound(_) | A2AError::PushConfigNotFound { .. } => "TASK_NOT_FOUND",
            A2AError::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            A2AError::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2AError::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            A2AError::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            A2AError::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            A2AError::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            A2AError::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            A2AError::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            A2AError::Busy(_) => "RESOURCE_EXHAUSTED",
            A2AError::Unavailable(_) => "UNAVAILABLE",
            _ => return None,
        })
    }

    /// HTTP status for the HTTP+JSON binding (the v1.0.0 table, which the conformance kit
    /// expects; see `docs/errors.md`).
    pub fn http_status(&self) -> u16 {
        match self {
            A2AError::Parse(_) | A2AError::InvalidRequest(_) | A2AError::InvalidParams(_) => 400,
            A2AError::MethodNotFound(_) => 404,
            A2AError::Internal(_) => 500,
            A2AError::TaskNotFound(_) | A2AError::PushConfigNotFound { .. } => 404,
            A2AError::TaskNotCancelable(_) => 409,
            A2AError::ContentTypeNotSupported(_) => 415,
            A2AError::InvalidAgentResponse(_) => 502,
            A2AError::Busy(_) => 429,
            A2AError::Unavailable(_) => 503,
            _ => 400,
        }
    }

    /// The `google.rpc.Code` name sent as `error.status` in HTTP+JSON error bodies. A2A errors
    /// use the spec's gRPC column (v1.0.1: `FAILED_PRECONDITION` rather than v1.0.0's
    /// `UNIMPLEMENTED`, which would imply HTTP 501); the others the canonical name of their
    /// HTTP status.
    pub fn rest_status_name(&self) -> &'static str {
        match self {
            A2AError::Parse(_) | A2AError::InvalidRequest(_) | A2AError::InvalidParams(_) => {
                "INVALID_ARGUMENT"
            }
            A2AError::MethodNotFound(_)
            | A2AError::TaskNotFound(_)
            | A2AError::PushConfigNotFound { .. } => "NOT_FOUND",
            A2AError::Internal(_) | A2AError::InvalidAgentResponse(_) => "INTERNAL",
            A2AError::ContentTypeNotSupported(_) => "INVALID_ARGUMENT",
            A2AError::Busy(_) => "RESOURCE_EXHAUSTED",
            A2AError::Unavailable(_) => "UNAVAILABLE",
            A2AError::TaskNotCancelable(_)
            | A2AError::PushNotificationNotSupported
            | A2AError::UnsupportedOperation(_)
            | A2AError::ExtendedAgentCardNotConfigured
            | A2AError::ExtensionSupportRequired(_)
            | A2AError::VersionNotSupported(_) => "FAILED_PRECONDITION",
        }
    }

    /// The gRPC status code (`google.rpc.Code` number) of the gRPC binding: the names
    /// [`rest_status_name`](Self::rest_status_name) sends, except that an unknown method and
    /// the three "not offered" errors (unsupported operation, push notifications, protocol
    /// version) are `UNIMPLEMENTED`, as the v1.0.0 table has them and the 1.0 conformance
    /// kit checks over gRPC (v1.0.1 moved them to `FAILED_PRECONDITION`, which REST keeps
    /// for its HTTP 400).
    pub fn grpc_code(&self) -> i32 {
        match self {
            A2AError::MethodNotFound(_)
            | A2AError::UnsupportedOperation(_)
            | A2AError::PushNotificationNotSupported
            | A2AError::VersionNotSupported(_) => grpc_code::UNIMPLEMENTED,
            _ => match self.rest_status_name() {
                "INVALID_ARGUMENT" => grpc_code::INVALID_ARGUMENT,
                "NOT_FOUND" => grpc_code::NOT_FOUND,
                "RESOURCE_EXHAUSTED" => grpc_code::RESOURCE_EXHAUSTED,
                "FAILED_PRECONDITION" => grpc_code::FAILED_PRECONDITION,
                "UNAVAILABLE" => grpc_code::UNAVAILABLE,
                _ => grpc_code::INTERNAL,
            },
        }
    }

    /// The `metadata` of the error's `google.rpc.ErrorInfo` (the task id of TaskNotFound).
    pub fn error_info_metadata(&self) -> Vec<(String, String)> {
        match self {
            A2AError::TaskNotFound(id) => vec![("taskId".into(), id.clone())],
            A2AError::PushConfigNotFound { task_id, config_id } => vec![
                ("taskId".into(), task_id.clone()),
                ("configId".into(), config_id.clone()),
            ],
            _ => Vec::new(),
        }
    }

    /// The `google.rpc.ErrorInfo` of an A2A error (None for plain protocol errors).
    fn error_info(&self) -> Option<Value> {
        let reason = self.reason()?;
        let md: Map<String, Value> = self
            .error_info_metadata()
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        Some(json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": ERROR_DOMAIN,
            "metadata": md,
        }))
    }

    /// The HTTP+JSON error body (`google.rpc.Status` as JSON, AIP-193):
    /// `{"error":{"code":<http>,"status":…,"message":…,"details":[ErrorInfo]}}`.
    pub fn to_rest_error(&self) -> Value {
        let details: Vec<Value> = self.error_info().into_iter().collect();
        json!({"error": {
            "code": self.http_status(),
            "status": self.rest_status_name(),
            "message": self.to_string(),
            "details": details,
        }})
    }

    /// The JSON-RPC `error` object. With `error_info`, A2A errors carry a
    /// `google.rpc.ErrorInfo` in `data` (v1.0); v0.3 responses leave `data` out.
    pub fn to_jsonrpc_error(&self, error_info: bool) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), json!(self.code()));
        obj.insert("message".into(), json!(self.to_string()));
        if error_info {
            if let Some(info) = self.error_info() {
                obj.insert("data".into(), json!([info]));
            }
        }
        Value::Object(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_error_info() {
        let e = A2AError::TaskNotFound("t1".into());
        assert_eq!(e.code(), -32001);
        let j = e.to_jsonrpc_error(true);
        assert_eq!(j["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(j["data"][0]["domain"], "a2a-protocol.org");
        assert_eq!(j["data"][0]["metadata"]["taskId"], "t1");
        assert!(A2AError::TaskNotFound("x".into())
            .to_jsonrpc_error(false)
            .get("data")
            .is_none());
        assert!(A2AError::InvalidParams("x".into())
            .to_jsonrpc_error(true)
            .get("data")
            .is_none());
        assert_eq!(A2AError::VersionNotSupported("v".into()).code(), -32009);
    }

    #[test]
    fn rest_error_bodies() {
        let e = A2AError::TaskNotFound("t1".into());
        let j = e.to_rest_error();
        assert_eq!(j["error"]["code"], 404);
        assert_eq!(j["error"]["status"], "NOT_FOUND");
        assert_eq!(j["error"]["message"], "Task not found: t1");
        assert_eq!(
            j["error"]["details"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(j["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(j["error"]["details"][0]["domain"], "a2a-protocol.org");
        let cases = [
            (
                A2AError::TaskNotCancelable("x".into()),
                409,
                "FAILED_PRECONDITION",
            ),
            (
                A2AError::PushNotificationNotSupported,
                400,
                "FAILED_PRECONDITION",
            ),
            (
                A2AError::UnsupportedOperation("x".into()),
                400,
                "FAILED_PRECONDITION",
            ),
            (
                A2AError::ContentTypeNotSupported("x".into()),
                415,
                "INVALID_ARGUMENT",
            ),
            (A2AError::InvalidAgentResponse("x".into()), 502, "INTERNAL"),
            (
                A2AError::VersionNotSupported("x".into()),
                400,
                "FAILED_PRECONDITION",
            ),
            (A2AError::InvalidParams("x".into()), 400, "INVALID_ARGUMENT"),
            (A2AError::Parse("x".into()), 400, "INVALID_ARGUMENT"),
            (A2AError::Internal("x".into()), 500, "INTERNAL"),
            (A2AError::Busy("x".into()), 429, "RESOURCE_EXHAUSTED"),
            (A2AError::Unavailable("x".into()), 503, "UNAVAILABLE"),
        ];
        for (e, code, status) in cases {
            let j = e.to_rest_error();
            assert_eq!(j["error"]["code"], code, "{e:?}");
            assert_eq!(j["error"]["status"], status, "{e:?}");
            assert_eq!(
                j["error"]["details"].as_array().map(Vec::len),
                Some(usize::from(e.reason().is_some())),
                "{e:?}"
            );
        }
    }

    #[test]
    fn grpc_codes_follow_the_spec_table() {
        use grpc_code::*;
        let cases = [
            (A2AError::TaskNotFound("t".into()), NOT_FOUND),
            (A2AError::TaskNotCancelable("x".into()), FAILED_PRECONDITION),
            (A2AError::PushNotificationNotSupported, UNIMPLEMENTED),
            (A2AError::UnsupportedOperation("x".into()), UNIMPLEMENTED),
            (
                A2AError::ContentTypeNotSupported("x".into()),
                INVALID_ARGUMENT,
            ),
            (A2AError::InvalidAgentResponse("x".into()), INTERNAL),
            (
                A2AError::ExtendedAgentCardNotConfigured,
                FAILED_PRECONDITION,
            ),
            (
                A2AError::ExtensionSupportRequired("x".into()),
                FAILED_PRECONDITION,
            ),
            (A2AError::VersionNotSupported("x".into()), UNIMPLEMENTED),
            (A2AError::InvalidParams("x".into()), INVALID_ARGUMENT),
            (A2AError::InvalidRequest("x".into()), INVALID_ARGUMENT),
            (A2AError::MethodNotFound("x".into()), UNIMPLEMENTED),
            (A2AError::Internal("x".into()), INTERNAL),
            (A2AError::Busy("x".into()), RESOURCE_EXHAUSTED),
            (A2AError::Unavailable("x".into()), UNAVAILABLE),
        ];
        for (e, code) in cases {
            assert_eq!(e.grpc_code(), code, "{e:?}");
        }
        assert_eq!(
            A2AError::TaskNotFound("t9".into()).error_info_metadata(),
            vec![("taskId".to_string(), "t9".to_string())]
        );
        // A missing push config: the not-found error, naming the task and the config apart.
        let e = A2AError::PushConfigNotFound {
            task_id: "t9".into(),
            config_id: "c1".into(),
        };
        assert_eq!(
            (e.code(), e.http_status(), e.grpc_code()),
            (-32001, 404, NOT_FOUND)
        );
        assert_eq!(e.reason(), Some("TASK_NOT_FOUND"));
        assert_eq!(
            e.error_info_metadata(),
            vec![
                ("taskId".to_string(), "t9".to_string()),
                ("configId".to_string(), "c1".to_string())
            ]
        );
        assert_eq!(
            e.to_string(),
            "push notification config 'c1' of task t9 not found"
        );
    }

    #[test]
    fn an_error_read_back_from_its_code_and_message_is_the_same_error() {
        let all = [
            A2AError::Parse("p".into()),
            A2AError::InvalidRequest("r".into()),
            A2AError::MethodNotFound("m".into()),
            A2AError::InvalidParams("i".into()),
            A2AError::TaskNotFound("t1".into()),
            A2AError::TaskNotCancelable("c".into()),
            A2AError::PushNotificationNotSupported,
            A2AError::UnsupportedOperation("u".into()),
            A2AError::ContentTypeNotSupported("ct".into()),
            A2AError::InvalidAgentResponse("ar".into()),
            A2AError::ExtendedAgentCardNotConfigured,
            A2AError::ExtensionSupportRequired("e".into()),
            A2AError::VersionNotSupported("v".into()),
            A2AError::Busy("b".into()),
            A2AError::Unavailable("down".into()),
            A2AError::Internal("x".into()),
        ];
        for e in all {
            assert_eq!(A2AError::from_code(e.code(), e.to_string()), e);
        }
        assert_eq!(
            A2AError::from_code(-32099, "odd".into()),
            A2AError::Internal("odd".into())
        );
    }
}
