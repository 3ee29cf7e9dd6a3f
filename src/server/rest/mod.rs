//! The HTTP+JSON (REST) binding, both versions, each under its own interface URL:
//!
//! - v1.0 under [`V1_BASE`] (`/message:send`, `/tasks/{id}:cancel`, ...), every route also
//!   with a `/{tenant}` prefix (accepted and otherwise ignored: one agent, no tenants);
//! - v0.3 under [`V03_BASE`], with the v0.3 `/v1/` prefix and v0.3 ProtoJSON bodies.
//!
//! The operations are the ones JSON-RPC uses ([`super::ops`], the engine); only the encoding
//! differs. Errors are `google.rpc.Status` JSON with the HTTP status of
//! [`A2AError::http_status`]. Every JSON response is `Content-Type: application/json`.

mod push;
mod v03;
mod v1;

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Path, Query};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;

use super::negotiate::{
    acceptable_content_type, check_version, content_type, requested_version, Version,
};
use super::AppState;
use crate::protocol::A2AError;

use super::paths::{V03_BASE, V1_BASE};

/// Every REST route.
pub fn routes() -> Router<AppState> {
    let mut r = Router::new();
    for prefix in [V1_BASE.to_string(), format!("{V1_BASE}/{{tenant}}")] {
        r = r
            .route(&format!("{prefix}/message:send"), post(v1::send))
            .route(&format!("{prefix}/message:stream"), post(v1::stream))
            .route(&format!("{prefix}/tasks"), get(v1::list))
            // `{id}`, `{id}:cancel` or `{id}:subscribe`: see `split_action`.
            .route(
                &format!("{prefix}/tasks/{{id}}"),
                get(v1::task_get).post(v1::task_post),
            )
            .route(
                &format!("{prefix}/tasks/{{id}}/pushNotificationConfigs"),
                get(push::v1).post(push::v1),
            )
            .route(
                &format!("{prefix}/tasks/{{id}}/pushNotificationConfigs/{{config_id}}"),
                get(push::v1).delete(push::v1),
            )
            .route(
                &format!("{prefix}/extendedAgentCard"),
                get(v1::extended_card),
            );
    }
    let p = format!("{V03_BASE}/v1");
    r.route(&format!("{p}/message:send"), post(v03::send))
        .route(&format!("{p}/message:stream"), post(v03::stream))
        .route(
            &format!("{p}/tasks/{{id}}"),
            get(v03::task_get).post(v03::task_post),
        )
        .route(
            &format!("{p}/tasks/{{id}}/pushNotificationConfigs"),
            get(push::v03).post(push::v03),
        )
        .route(
            &format!("{p}/tasks/{{id}}/pushNotificationConfigs/{{config_id}}"),
            get(push::v03).delete(push::v03),
        )
        .route(&format!("{p}/card"), get(v03::card))
}

/// Path parameters of a route (none for some routes).
pub(super) type Params = Option<Path<HashMap<String, String>>>;

/// What follows the task id in a `/tasks/{id}…` path segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    None,
    Cancel,
    Subscribe,
}

/// Splits `{id}:cancel` / `{id}:subscribe` at the last `:`; any other segment is a plain id
/// (task ids may contain `:`).
fn split_action(segment: &str) -> (&str, Action) {
    if let Some((id, action)) = segment.rsplit_once(':') {
        match action {
            "cancel" => return (id, Action::Cancel),
            "subscribe" => return (id, Action::Subscribe),
            _ => {}
        }
    }
    (segment, Action::None)
}

/// The task id segment (`{id}` or `{id}:action`) of the matched route.
fn task_segment(params: &Params) -> (String, Action) {
    let seg = params
        .as_ref()
        .and_then(|Path(p)| p.get("id"))
        .map(String::as_str)
        .unwrap_or("");
    let (id, action) = split_action(seg);
    (id.to_string(), action)
}

/// A refused request: the error and the HTTP status it travels with.
#[derive(Debug)]
pub(super) struct Reject {
    status: StatusCode,
    err: A2AError,
}

impl From<A2AError> for Reject {
    fn from(err: A2AError) -> Self {
        let status =
            StatusCode::from_u16(err.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Reject { status, err }
    }
}

impl Reject {
    fn with_status(status: StatusCode, err: A2AError) -> Self {
        Reject { status, err }
    }
}

impl IntoResponse for Reject {
    fn into_response(self) -> Response {
        let err = match self.err {
            A2AError::Internal(detail) => {
                tracing::error!(error = %detail, "internal error (HTTP+JSON)");
                A2AError::Internal("Internal error".into())
            }
            other => other,
        };
        let mut body = err.to_rest_error();
        body["error"]["code"] = Value::from(self.status.as_u16());
        let mut r = json_response(self.status, body.to_string());
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            // At capacity: tasks take seconds to minutes; a short wait is a fair hint.
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        r
    }
}

pub(super) type Answer = Result<Response, Reject>;

fn json_response(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A 200 answer with a JSON body.
pub(super) fn ok_json(v: &impl serde::Serialize) -> Answer {
    let body = serde_json::to_string(v).map_err(|e| A2AError::Internal(e.to_string()))?;
    Ok(json_response(StatusCode::OK, body))
}

/// The query parameters, or 400.
pub(super) fn query(
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<HashMap<String, String>, Reject> {
    q.map(|Query(q)| q).map_err(|e| {
        A2AError::InvalidParams(format!("invalid query string: {}", e.body_text())).into()
    })
}

/// Checks `A2A-Version` (header or query parameter) against the route's version.
pub(super) fn check(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    version: Version,
    method: &Method,
    route: &str,
) -> Result<(), Reject> {
    let requested = requested_version(headers, query);
    check_version(requested.as_deref(), version, &format!("{method} {route}"))
        .map_err(Reject::from)?;
    if let Some(uri) = crate::server::extensions::current().missing_required {
        return Err(A2AError::ExtensionSupportRequired(format!(
            "this agent requires the extension {uri}; name it in the A2A-Extensions header"
        ))
        .into());
    }
    Ok(())
}

/// Reads a request body: None when empty; otherwise it must be JSON, sent as
/// `application/json` or `application/a2a+json` (or without `Content-Type`).
pub(super) fn read_body(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<Value>, Reject> {
    let body = match body {
        Ok(b) => b,
        Err(rej) => {
            let status = rej.status();
            let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "request body is larger than the server's limit".to_string()
            } else {
                format!("could not read the request body: {rej}")
            };
            return Err(Reject::with_status(status, A2AError::InvalidRequest(msg)));
        }
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    if !acceptable_content_type(headers) {
        return Err(A2AError::ContentTypeNotSupported(format!(
            "Content-Type '{}' is not supported; send application/json or application/a2a+json",
            content_type(headers)
        ))
        .into());
    }
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| A2AError::Parse(format!("Invalid JSON payload: {e}")).into())
}

/// A body that must be a JSON object (or absent, then `{}`).
pub(super) fn object_body(body: Option<Value>) -> Result<Value, Reject> {
    match body {
        None => Ok(Value::Object(Default::default())),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) => {
            Err(A2AError::InvalidParams("the request body must be a JSON object".into()).into())
        }
    }
}

/// An optional integer query parameter.
pub(super) fn int_param(q: &HashMap<String, String>, name: &str) -> Result<Option<i32>, Reject> {
    match q.get(name).map(|s| s.trim()).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s.parse::<i32>().map(Some).map_err(|_| {
            A2AError::InvalidParams(format!("{name} must be an integer, got '{s}'")).into()
        }),
    }
}

/// 405 for a method the route does not take (e.g. `GET …:cancel`).
pub(super) fn method_not_allowed(method: &Method, what: &str) -> Reject {
    Reject::with_status(
        StatusCode::METHOD_NOT_ALLOWED,
        A2AError::MethodNotFound(format!("{method} is not allowed on {what}")),
    )
}

/// 404 for a path under a REST base that matches no route (a `google.rpc.Status` body, as
/// REST clients expect).
pub fn route_not_found(method: &Method, path: &str) -> Response {
    Reject::with_status(
        StatusCode::NOT_FOUND,
        A2AError::MethodNotFound(format!("no route for {method} {path}")),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_split_at_the_last_colon() {
        assert_eq!(split_action("t1:cancel"), ("t1", Action::Cancel));
        assert_eq!(split_action("t1:subscribe"), ("t1", Action::Subscribe));
        assert_eq!(split_action("a:b:cancel"), ("a:b", Action::Cancel));
        assert_eq!(split_action("urn:x"), ("urn:x", Action::None));
        assert_eq!(split_action("t1"), ("t1", Action::None));
    }

    #[test]
    fn rejects_carry_their_status_in_the_body() {
        let r = Reject::from(A2AError::TaskNotCancelable("x".into())).into_response();
        assert_eq!(r.status(), 409);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let r = method_not_allowed(&Method::GET, "x").into_response();
        assert_eq!(r.status(), 405);
    }
}
