//! v1.0 HTTP+JSON handlers (bodies are the v1.0 JSON of the request messages).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};

use super::{
    check, int_param, method_not_allowed, object_body, ok_json, query, read_body, task_segment,
    Action, Answer, Params, Reject,
};
use crate::protocol::v1::{ListTasksRequest, SendMessageRequest, TaskState};
use crate::protocol::A2AError;
use crate::server::negotiate::Version;
use crate::server::ops::{self, last_event_id};
use crate::server::sse::Flavor;
use crate::server::AppState;

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;
type Body = Result<Bytes, BytesRejection>;

/// Version check and the `SendMessageRequest` body of `message:send` / `message:stream`.
fn send_request(
    headers: &HeaderMap,
    q: Q,
    params: &Params,
    route: &str,
    body: Body,
) -> Result<SendMessageRequest, Reject> {
    let q = query(q)?;
    check(headers, &q, Version::V1, &Method::POST, route)?;
    let body = read_body(headers, body)?.ok_or_else(|| {
        A2AError::InvalidParams("the request body must be a SendMessageRequest".into())
    })?;
    let mut req: SendMessageRequest = serde_json::from_value(body)
        .map_err(|e| A2AError::InvalidParams(format!("Invalid request body: {e}")))?;
    if let Some(t) = tenant(params) {
        req.tenant.get_or_insert(t);
    }
    Ok(req)
}

fn tenant(params: &Params) -> Option<String> {
    params.as_ref().and_then(|p| p.get("tenant").cloned())
}

/// `POST /message:send`.
pub async fn send(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    axum::Extension(opts): axum::Extension<crate::engine::RequestOptions>,
    params: Params,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req = send_request(&headers, q, &params, "/message:send", body)?;
    let resp = ops::send_blocking(&state, caller.owner(), req, &opts, crate::push::V1).await?;
    ok_json(&resp)
}

/// `POST /message:stream`.
pub async fn stream(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    axum::Extension(opts): axum::Extension<crate::engine::RequestOptions>,
    params: Params,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req = send_request(&headers, q, &params, "/message:stream", body)?;
    Ok(ops::stream_send(
        &state,
        caller.owner(),
        req,
        &opts,
        Flavor::V1Rest,
        crate::push::V1,
    )
    .await?)
}

/// `GET /tasks/{id}` and `GET /tasks/{id}:subscribe`.
pub async fn task_get(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    params: Params,
    q: Q,
    headers: HeaderMap,
) -> Answer {
    let (id, action) = task_segment(&params);
    let q = query(q)?;
    match action {
        Action::None => {
            check(&headers, &q, Version::V1, &Method::GET, "/tasks/{id}")?;
            let history_length = int_param(&q, "historyLength")?;
            ok_json(
                &state
                    .engine
                    .get(&id, history_length, caller.owner())
                    .await?,
            )
        }
        Action::Subscribe => {
            subscribe(&state, caller.owner(), &headers, &q, &id, &Method::GET).await
        }
        Action::Cancel => Err(method_not_allowed(&Method::GET, "/tasks/{id}:cancel")),
    }
}

/// `POST /tasks/{id}:cancel` and `POST /tasks/{id}:subscribe`.
pub async fn task_post(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    axum::Extension(opts): axum::Extension<crate::engine::RequestOptions>,
    params: Params,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let (id, action) = task_segment(&params);
    let q = query(q)?;
    match action {
        Action::Cancel => {
            check(
                &headers,
                &q,
                Version::V1,
                &Method::POST,
                "/tasks/{id}:cancel",
            )?;
            // `{}`, `{"metadata":…}` (or the whole CancelTaskRequest): nothing in it
            // changes what cancel does, but it must be a JSON object.
            object_body(read_body(&headers, body)?)?;
            ok_json(&state.engine.cancel_from(&id, caller.owner(), &opts).await?)
        }
        Action::Subscribe => {
            object_body(read_body(&headers, body)?)?;
            subscribe(&state, caller.owner(), &headers, &q, &id, &Method::POST).await
        }
        Action::None => Err(method_not_allowed(&Method::POST, "/tasks/{id}")),
    }
}

async fn subscribe(
    state: &AppState,
    owner: Option<&str>,
    headers: &HeaderMap,
    q: &HashMap<String, String>,
    id: &str,
    method: &Method,
) -> Answer {
    check(headers, q, Version::V1, method, "/tasks/{id}:subscribe")?;
    Ok(ops::subscribe(state, owner, last_event_id(headers), id, Flavor::V1Rest).await?)
}

/// `GET /tasks`: the `ListTasksRequest` fields as query parameters.
pub async fn list(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    q: Q,
    headers: HeaderMap,
) -> Answer {
    let q = query(q)?;
    check(&headers, &q, Version::V1, &Method::GET, "/tasks")?;
    let req = list_request(&q)?;
    ok_json(&state.engine.list(req, caller.owner()).await?)
}

fn non_empty<'a>(q: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    q.get(name).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// Reads the query parameters of `GET /tasks`; a value that does not parse is a 400.
fn list_request(q: &HashMap<String, String>) -> Result<ListTasksRequest, Reject> {
    let status = match non_empty(q, "status") {
        None => None,
        Some(s) => Some(
            s.parse::<i64>()
                .ok()
                .and_then(TaskState::from_number)
                .or_else(|| TaskState::parse_lenient(s))
                .ok_or_else(|| {
                    A2AError::InvalidParams(format!(
                        "status '{s}' is not a task state (e.g. TASK_STATE_WORKING)"
                    ))
                })?,
        ),
    };
    let include_artifacts = match non_empty(q, "includeArtifacts") {
        None => None,
        Some("true") => Some(true),
        Some("false") => Some(false),
        Some(other) => {
            return Err(A2AError::InvalidParams(format!(
                "includeArtifacts must be true or false, got '{other}'"
            ))
            .into())
        }
    };
    Ok(ListTasksRequest {
        tenant: None,
        context_id: non_empty(q, "contextId").map(str::to_string),
        status,
        page_size: int_param(q, "pageSize")?,
        page_token: non_empty(q, "pageToken").map(str::to_string),
        history_length: int_param(q, "historyLength")?,
        status_timestamp_after: non_empty(q, "statusTimestampAfter").map(str::to_string),
        include_artifacts,
    })
}

/// `GET /extendedAgentCard`: see [`crate::server::extended`].
pub async fn extended_card(State(state): State<AppState>, q: Q, headers: HeaderMap) -> Answer {
    let q = query(q)?;
    check(
        &headers,
        &q,
        Version::V1,
        &Method::GET,
        "/extendedAgentCard",
    )?;
    ok_json(&crate::server::extended::card_json(
        &state, &headers, false,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn list_query_parameters() {
        let r = list_request(&q(&[
            ("contextId", "c1"),
            ("status", "TASK_STATE_WORKING"),
            ("pageSize", "5"),
            ("pageToken", "tok"),
            ("historyLength", "0"),
            ("statusTimestampAfter", "2026-01-01T00:00:00Z"),
            ("includeArtifacts", "true"),
            ("A2A-Version", "1.0"),
        ]))
        .unwrap();
        assert_eq!(r.context_id.as_deref(), Some("c1"));
        assert_eq!(r.status, Some(TaskState::Working));
        assert_eq!(r.page_size, Some(5));
        assert_eq!(r.page_token.as_deref(), Some("tok"));
        assert_eq!(r.history_length, Some(0));
        assert_eq!(r.include_artifacts, Some(true));
        assert_eq!(
            list_request(&q(&[("status", "3")])).unwrap().status,
            Some(TaskState::Completed)
        );
        assert_eq!(list_request(&q(&[])).unwrap(), ListTasksRequest::default());
        for bad in [
            ("status", "TASK_STATE_NOPE"),
            ("status", "42"),
            ("pageSize", "ten"),
            ("historyLength", "1.5"),
            ("includeArtifacts", "yes"),
        ] {
            assert!(list_request(&q(&[bad])).is_err(), "{bad:?}");
        }
    }
}
