//! JSON-RPC 2.0 over HTTP, both method sets: v1.0 (`SendMessage`, ...) and v0.3
//! (`message/send`, ...). Checks in the order clients expect: content type (415 / -32005),
//! JSON (-32700), envelope (-32600), method (-32601), version (-32009), params (-32602).

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::negotiate::{
    acceptable_content_type, check_version, content_type, requested_version, Version,
};
use super::ops::{last_event_id, send_blocking, stream_send, subscribe};
use super::sse::Flavor;
use super::{push_rpc, AppState};
use crate::protocol::v03::{self, decode_params};
use crate::protocol::v1::{
    CancelTaskRequest, GetTaskRequest, ListTasksRequest, SendMessageRequest, SubscribeToTaskRequest,
};
use crate::protocol::{A2AError, Method};
use crate::push;

/// A JSON-RPC error response (HTTP 200, as JSON-RPC errors travel).
/// A JSON-RPC error response object.
fn error_body(id: &Value, err: &A2AError, version: Option<Version>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": err.to_jsonrpc_error(version == Some(Version::V1)),
    })
}

fn error_response(id: &Value, err: &A2AError, version: Option<Version>) -> Response {
    json_response(StatusCode::OK, error_body(id, err, version).to_string())
}

/// An error of a v0.3 streaming method (`message/stream`, `tasks/resubscribe`) once the
/// request was understood: a stream with that one error response, as v0.3 clients read a
/// streaming call's answer only as `text/event-stream`.
fn sse_error_response(id: &Value, err: &A2AError) -> Response {
    let body = error_body(id, err, Some(Version::V03));
    let mut r = (StatusCode::OK, format!("data: {body}\n\n")).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// A JSON-RPC success response. The result is serialized straight into the body (no
/// intermediate `Value`): a task may carry megabytes of output.
fn result_response<T: serde::Serialize + ?Sized>(id: &Value, result: &T) -> Response {
    #[derive(serde::Serialize)]
    struct Envelope<'a, T: ?Sized> {
        id: &'a Value,
        jsonrpc: &'static str,
        result: &'a T,
    }
    match serde_json::to_string(&Envelope {
        id,
        jsonrpc: "2.0",
        result,
    }) {
        Ok(body) => json_response(StatusCode::OK, body),
        Err(e) => {
            tracing::error!(error = %e, "could not encode a response");
            let err = A2AError::Internal(e.to_string());
            json_response(StatusCode::OK, error_body(id, &err, None).to_string())
        }
    }
}

fn decode<T: DeserializeOwned>(params: Value) -> Result<T, A2AError> {
    decode_params(params)
}

/// `POST /` (and `/a2a`, `/a2a/jsonrpc`).
pub async fn handle(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<super::Caller>,
    axum::Extension(opts): axum::Extension<crate::engine::RequestOptions>,
    Query(query): Query<std::collections::HashMap<String, String>>,
    rate_key: Option<axum::Extension<super::guard::RateKey>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if !acceptable_content_type(&headers) {
        let ct = content_type(&headers);
        let err = A2AError::ContentTypeNotSupported(format!(
            "Content-Type '{ct}' is not supported; send application/json"
        ));
        let body = json!({"jsonrpc": "2.0", "id": null, "error": err.to_jsonrpc_error(true)});
        return json_response(StatusCode::UNSUPPORTED_MEDIA_TYPE, body.to_string());
    }
    let body = match body {
        Ok(b) => b,
        Err(rej) => {
            let status = rej.status();
            let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
                "request body is larger than the server's limit".to_string()
            } else {
                format!("could not read the request body: {rej}")
            };
            let err = A2AError::InvalidRequest(msg);
            let body = json!({"jsonrpc": "2.0", "id": null, "error": err.to_jsonrpc_error(false)});
            return json_response(status, body.to_string());
        }
    };
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                &Value::Null,
                &A2AError::Parse(format!("Invalid JSON payload: {e}")),
                None,
            )
        }
    };
    let Value::Object(mut obj) = req else {
        let what = if req.is_array() {
            "batch requests are not supported; send one JSON-RPC request object"
        } else {
            "the request must be a JSON-RPC 2.0 request object"
        };
        return error_response(&Value::Null, &A2AError::InvalidRequest(what.into()), None);
    };
    let id = obj.remove("id").unwrap_or(Value::Null);
    if !matches!(id, Value::Null | Value::String(_) | Value::Number(_)) {
        return error_response(
            &Value::Null,
            &A2AError::InvalidRequest("id must be a string, a number or null".into()),
            None,
        );
    }
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return error_response(
            &id,
            &A2AError::InvalidRequest("jsonrpc must be \"2.0\"".into()),
            None,
        );
    }
    let Some(name) = obj.get("method").and_then(Value::as_str) else {
        return error_response(
            &id,
            &A2AError::InvalidRequest("method must be a string".into()),
            None,
        );
    };
    let method = match name.parse::<Method>() {
        Ok(m) => m,
        Err(unknown) => {
            return error_response(&id, &A2AError::MethodNotFound(unknown.to_string()), None)
        }
    };
    if !method.is_read() {
        // Charged as a read before its body was read: a method that starts or changes
        // work pays the rest of a request.
        if let Some(refused) = state.guard.charge_write(rate_key.as_ref().map(|k| &k.0)) {
            return refused;
        }
    }
    let version = method.version();
    let requested = requested_version(&headers, &query);
    if let Err(e) = check_version(requested.as_deref(), version, &format!("method {method}")) {
        return error_response(&id, &e, Some(Version::V1));
    }
    if let Some(uri) = super::extensions::current().missing_required {
        let e = A2AError::ExtensionSupportRequired(format!(
            "this agent requires the extension {uri}; name it in the A2A-Extensions header"
        ));
        return error_response(&id, &e, Some(version));
    }
    let params = match obj.remove("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p,
        Some(_) => {
            return error_response(
                &id,
                &A2AError::InvalidParams("params must be an object".into()),
                Some(version),
            )
        }
    };
    let result = dispatch(&state, caller.owner(), &opts, &headers, &id, method, params).await;
    let e = match result {
        Ok(r) => return r,
        Err(A2AError::Internal(detail)) => {
            tracing::error!(method = %method, error = %detail, "internal error");
            A2AError::Internal("Internal error".into())
        }
        Err(e) => e,
    };
    refusal(&id, method, &e)
}

/// The answer refusing a call of `method` with `err`: a v0.3 streaming method's as a stream
/// of that one error response, any other's as a JSON-RPC error response. The handler answers
/// its errors with it, and so does the routing layer ([`super::route`]).
pub(super) fn refusal(id: &Value, method: Method, err: &A2AError) -> Response {
    if method.is_streaming() && method.version() == Version::V03 {
        return sse_error_response(id, err);
    }
    error_response(id, err, Some(method.version()))
}

fn id_json(id: &Value) -> String {
    id.to_string()
}

async fn dispatch(
    state: &AppState,
    owner: Option<&str>,
    opts: &crate::engine::RequestOptions,
    headers: &HeaderMap,
    id: &Value,
    method: Method,
    params: Value,
) -> Result<Response, A2AError> {
    let engine = &state.engine;
    match method {
        Method::SendMessage => {
            let req: SendMessageRequest = decode(params)?;
            let resp = send_blocking(state, owner, req, opts, push::V1).await?;
            Ok(result_response(id, &resp))
        }
        Method::MessageSend => {
            let p: v03::MessageSendParams03 = decode(params)?;
            let req = SendMessageRequest::try_from(p)?;
            let resp = send_blocking(state, owner, req, opts, push::V03).await?;
            Ok(result_response(id, &v03::send_response_to_v03(&resp)))
        }
        Method::SendStreamingMessage => {
            let req: SendMessageRequest = decode(params)?;
            stream_send(
                state,
                owner,
                req,
                opts,
                Flavor::V1JsonRpc { id: id_json(id) },
                push::V1,
            )
            .await
        }
        Method::MessageStream => {
            let p: v03::MessageSendParams03 = decode(params)?;
            let req = SendMessageRequest::try_from(p)?;
            stream_send(
                state,
                owner,
                req,
                opts,
                Flavor::V03JsonRpc { id: id_json(id) },
                push::V03,
            )
            .await
        }
        Method::GetTask => {
            let req: GetTaskRequest = decode(params)?;
            let t = engine.get(&req.id, req.history_length, owner).await?;
            Ok(result_response(id, &t))
        }
        Method::TasksGet => {
            let p: v03::TaskQueryParams03 = decode(params)?;
            let req = GetTaskRequest::try_from(p)?;
            let t = engine.get(&req.id, req.history_length, owner).await?;
            Ok(result_response(id, &v03::task_to_v03(&t)))
        }
        Method::ListTasks => {
            let req: ListTasksRequest = decode(params)?;
            let r = engine.list(req, owner).await?;
            Ok(result_response(id, &r))
        }
        Method::CancelTask => {
            let req: CancelTaskRequest = decode(params)?;
            let t = engine.cancel_from(&req.id, owner, opts).await?;
            Ok(result_response(id, &t))
        }
        Method::TasksCancel => {
            let p: v03::TaskIdParams03 = decode(params)?;
            let req = CancelTaskRequest::from(p);
            let t = engine.cancel_from(&req.id, owner, opts).await?;
            Ok(result_response(id, &v03::task_to_v03(&t)))
        }
        Method::SubscribeToTask => {
            let req: SubscribeToTaskRequest = decode(params)?;
            subscribe(
                state,
                owner,
                last_event_id(headers),
                &req.id,
                Flavor::V1JsonRpc { id: id_json(id) },
            )
            .await
        }
        Method::TasksResubscribe => {
            let p: v03::TaskIdParams03 = decode(params)?;
            let req = SubscribeToTaskRequest::from(p);
            subscribe(
                state,
                owner,
                last_event_id(headers),
                &req.id,
                Flavor::V03JsonRpc { id: id_json(id) },
            )
            .await
        }
        Method::GetExtendedAgentCard => {
            super::extended::card_json(state, headers, false).map(|v| result_response(id, &v))
        }
        Method::GetAuthenticatedExtendedCard => {
            super::extended::card_json(state, headers, true).map(|v| result_response(id, &v))
        }
        Method::CreateTaskPushNotificationConfig
        | Method::GetTaskPushNotificationConfig
        | Method::ListTaskPushNotificationConfigs
        | Method::DeleteTaskPushNotificationConfig
        | Method::PushConfigSet
        | Method::PushConfigGet
        | Method::PushConfigList
        | Method::PushConfigDelete => push_rpc::dispatch(state, owner, method, params)
            .await
            .map(|v| result_response(id, &v)),
    }
}
