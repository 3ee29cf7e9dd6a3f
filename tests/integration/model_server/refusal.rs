//! The `Auth` and `ServerError` answers of the scripted model server, in each API's own error
//! shape.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;

use super::{json_response, Scenario, SERVER_ERROR_TEXT};

/// The `Auth` and `ServerError` answers, in the shape of the API the path belongs to.
pub(super) fn refusal(scenario: Scenario, path: &str) -> Option<Response> {
    let gemini = path.contains(":streamGenerateContent") || path.contains(":generateContent");
    let anthropic = path.ends_with("/messages");
    let openai = path.ends_with("/responses") || path.ends_with("/chat/completions");
    let (status, body) = match scenario {
        Scenario::Auth if gemini => (
            StatusCode::BAD_REQUEST,
            json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                             "status": "INVALID_ARGUMENT", "details": [
                                 {"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                  "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}),
        ),
        Scenario::Auth if anthropic => (
            StatusCode::UNAUTHORIZED,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
        ),
        Scenario::Auth if openai => (
            StatusCode::UNAUTHORIZED,
            json!({"error": {"message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error",
                             "param": null, "code": "invalid_api_key"}}),
        ),
        Scenario::ServerError if gemini => (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"code": 500, "message": SERVER_ERROR_TEXT, "status": "INTERNAL"}}),
        ),
        Scenario::ServerError if anthropic => (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"type": "error", "error": {"type": "api_error", "message": SERVER_ERROR_TEXT}}),
        ),
        Scenario::ServerError if openai => (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"message": SERVER_ERROR_TEXT, "type": "server_error", "param": null, "code": null}}),
        ),
        _ => return None,
    };
    Some(json_response(status, body))
}
