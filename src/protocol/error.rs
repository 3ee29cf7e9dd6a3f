//! Protocol errors: the one place that maps an error to its JSON-RPC code, its `ErrorInfo`
//! reason and its HTTP status.

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
}

/// JSON-RPC code for the host being at capacity (server-defined range, outside A2A's codes).
pub const BUSY_CODE: i64 = -32050;

impl A2AError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match self {
            A2AError::Parse(_) => -32700,
            A2AError::InvalidRequest(_) => -32600,
            A2AError::MethodNotFound(_) => -32601,
            A2AError::InvalidParams(_) => -32602,
            A2AError::Internal(_) => -32603,
            A2AError::TaskNotFound(_) => -32001,
            A2AError::TaskNotCancelable(_) => -32002,
            A2AError::PushNotificationNotSupported => -32003,
            A2AError::UnsupportedOperation(_) => -32004,
            A2AError::ContentTypeNotSupported(_) => -32005,
            A2AError::InvalidAgentResponse(_) => -32006,
            A2AError::ExtendedAgentCardNotConfigured => -32007,
            A2AError::ExtensionSupportRequired(_) => -32008,
            A2AError::VersionNotSupported(_) => -32009,
            A2AError::Busy(_) => BUSY_CODE,
        }
    }

    /// The `google.rpc.ErrorInfo` reason for A2A-defined errors; None for plain JSON-RPC ones.
    pub fn reason(&self) -> Option<&'static str> {
        Some(match self {
            A2AError::TaskNotFound(_) => "TASK_NOT_FOUND",
            A2AError::TaskNotCancelable(_) => "TASK_NOT_CANCELABLE",
            A2AError::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            A2AError::UnsupportedOperation(_) => "UNSUPPORTED_OPERATION",
            A2AError::ContentTypeNotSupported(_) => "CONTENT_TYPE_NOT_SUPPORTED",
            A2AError::InvalidAgentResponse(_) => "INVALID_AGENT_RESPONSE",
            A2AError::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            A2AError::ExtensionSupportRequired(_) => "EXTENSION_SUPPORT_REQUIRED",
            A2AError::VersionNotSupported(_) => "VERSION_NOT_SUPPORTED",
            A2AError::Busy(_) => "RESOURCE_EXHAUSTED",
            _ => return None,
        })
    }

    /// HTTP status for the HTTP+JSON binding (the v1.0.0 table, which the conformance kit
    /// expects; see README).
    pub fn http_status(&self) -> u16 {
        match self {
            A2AError::Parse(_) | A2AError::InvalidRequest(_) | A2AError::InvalidParams(_) => 400,
            A2AError::MethodNotFound(_) => 404,
            A2AError::Internal(_) => 500,
            A2AError::TaskNotFound(_) => 404,
            A2AError::TaskNotCancelable(_) => 409,
            A2AError::ContentTypeNotSupported(_) => 415,
            A2AError::InvalidAgentResponse(_) => 502,
            A2AError::Busy(_) => 429,
            _ => 400,
        }
    }

    /// The JSON-RPC `error` object. With `error_info`, A2A errors carry a
    /// `google.rpc.ErrorInfo` in `data` (v1.0); v0.3 responses leave `data` out.
    pub fn to_jsonrpc_error(&self, error_info: bool) -> Value {
        let mut obj = Map::new();
        obj.insert("code".into(), json!(self.code()));
        obj.insert("message".into(), json!(self.to_string()));
        if error_info {
            if let Some(reason) = self.reason() {
                let mut md = Map::new();
                if let A2AError::TaskNotFound(id) = self {
                    md.insert("taskId".into(), json!(id));
                }
                obj.insert(
                    "data".into(),
                    json!([{
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": reason,
                        "domain": "a2a-protocol.org",
                        "metadata": md,
                    }]),
                );
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
}
