//! v0.3 HTTP+JSON handlers: routes under `/v1/`, bodies in the ProtoJSON of the v0.3 proto
//! ([`crate::protocol::v03::rest`]).

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};

use super::{
    check, int_param, method_not_allowed, object_body, ok_json, query, read_body, task_segment,
    Action, Answer, Params, Reject,
};
use crate::protocol::v03::rest::{decode_send_request, send_response_to_rest03, task_to_rest03};
use crate::protocol::v1::SendMessageRequest;
use crate::protocol::A2AError;
use crate::server::negotiate::Version;
use crate::server::ops::{self, last_event_id};
use crate::server::sse::Flavor;
use crate::server::AppState;

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;
type Body = Result<Bytes, BytesRejection>;

fn send_request(
    headers: &HeaderMap,
    q: Q,
    route: &str,
    body: Body,
) -> Result<SendMessageRequest, Reject> {
    let q = query(q)?;
    check(headers, &q, Version::V03, &Method::POST, route)?;
    let body = read_body(headers, body)?.ok_or_else(|| {
        A2AError::InvalidParams("the request body must be a SendMessageRequest".into())
    })?;
    Ok(decode_send_request(body)?)
}

/// `POST /v1/message:send`.
pub async fn send(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    axum::Extension(opts): axum::Extension<crate::engine::RequestOptions>,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req = send_request(&headers, q, "/v1/message:send", body)?;
    let resp = ops::send_blocking(&state, caller.owner(), req, &opts, crate::push::V03).await?;
    ok_json(&send_response_to_rest03(&resp))
}

/// `POST /v1/message:stream`.
pub async fn stream(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    axum::Extension(opts): axum::Extension<crate::engine::RequestOptions>,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req = send_request(&headers, q, "/v1/message:stream", body)?;
    Ok(ops::stream_send(
        &state,
        caller.owner(),
        req,
        &opts,
        Flavor::V03Rest,
        crate::push::V03,
    )
    .await?)
}

/// `GET /v1/tasks/{id}` and `GET /v1/tasks/{id}:subscribe`.
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
            check(&headers, &q, Version::V03, &Method::GET, "/v1/tasks/{id}")?;
            // v0.3: historyLength 0 means "unset" (in v1.0 it would mean no history).
            let history_length = int_param(&q, "historyLength")?.filter(|n| *n != 0);
            let task = state
                .engine
                .get(&id, history_length, caller.owner())
                .await?;
            ok_json(&task_to_rest03(&task))
        }
        Action::Subscribe => {
            subscribe(&state, caller.owner(), &headers, &q, &id, &Method::GET).await
        }
        Action::Cancel => Err(method_not_allowed(&Method::GET, "/v1/tasks/{id}:cancel")),
    }
}

/// `POST /v1/tasks/{id}:cancel` and `POST /v1/tasks/{id}:subscribe`.
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
                Version::V03,
                &Method::POST,
                "/v1/tasks/{id}:cancel",
            )?;
            object_body(read_body(&headers, body)?)?;
            let task = state.engine.cancel_from(&id, caller.owner(), &opts).await?;
            ok_json(&task_to_rest03(&task))
        }
        Action::Subscribe => {
            object_body(read_body(&headers, body)?)?;
            subscribe(&state, caller.owner(), &headers, &q, &id, &Method::POST).await
        }
        Action::None => Err(method_not_allowed(&Method::POST, "/v1/tasks/{id}")),
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
    check(headers, q, Version::V03, method, "/v1/tasks/{id}:subscribe")?;
    Ok(ops::subscribe(state, owner, last_event_id(headers), id, Flavor::V03Rest).await?)
}

/// `GET /v1/card` (`agent/getAuthenticatedExtendedCard`): see [`crate::server::extended`].
pub async fn card(State(state): State<AppState>, q: Q, headers: HeaderMap) -> Answer {
    let q = query(q)?;
    check(&headers, &q, Version::V03, &Method::GET, "/v1/card")?;
    ok_json(&crate::server::extended::card_json(&state, &headers, true)?)
}
