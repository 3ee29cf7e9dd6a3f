//! The push-notification config routes of both REST versions.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use serde_json::{json, Value};

use super::{check, method_not_allowed, ok_json, query, read_body, Answer, Params, Reject};
use crate::protocol::v03;
use crate::protocol::v03::rest::decode_create_push_config;
use crate::protocol::v1::TaskPushNotificationConfig;
use crate::protocol::A2AError;
use crate::push::{V03, V1};
use crate::server::negotiate::Version;
use crate::server::push_rpc::service;
use crate::server::AppState;

type Q = Result<Query<HashMap<String, String>>, QueryRejection>;
type Body = Result<Bytes, BytesRejection>;

fn param(params: &Params, name: &str) -> Option<String> {
    params.as_ref().and_then(|p| p.get(name).cloned())
}

fn body_json(headers: &HeaderMap, body: Body) -> Result<Value, Reject> {
    read_body(headers, body)?.ok_or_else(|| {
        A2AError::InvalidParams("the request body must be a push notification config".into()).into()
    })
}

/// v1.0: `POST`/`GET /tasks/{id}/pushNotificationConfigs`,
/// `GET`/`DELETE /tasks/{id}/pushNotificationConfigs/{config_id}`.
pub async fn v1(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    method: Method,
    params: Params,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let q = query(q)?;
    let route = "/tasks/{id}/pushNotificationConfigs";
    check(&headers, &q, Version::V1, &method, route)?;
    let push = service(&state)?;
    let owner = caller.owner();
    let task_id = param(&params, "id").unwrap_or_default();
    match (method.clone(), param(&params, "config_id")) {
        (Method::POST, None) => {
            let mut cfg: TaskPushNotificationConfig =
                serde_json::from_value(body_json(&headers, body)?).map_err(|e| {
                    A2AError::InvalidParams(format!("Invalid push notification config: {e}"))
                })?;
            cfg.task_id = Some(task_id);
            ok_json(&push.create(owner, cfg, V1, false).await?)
        }
        (Method::GET, None) => {
            let configs = push.list(owner, &task_id).await?;
            ok_json(&json!({"configs": configs, "nextPageToken": ""}))
        }
        (Method::GET, Some(id)) => ok_json(&push.get(owner, &task_id, &id).await?),
        (Method::DELETE, Some(id)) => {
            push.delete(owner, &task_id, &id).await?;
            ok_json(&json!({}))
        }
        _ => Err(method_not_allowed(&method, route)),
    }
}

/// The v0.3 resource: `{"name": "tasks/{id}/pushNotificationConfigs/{cid}",
/// "pushNotificationConfig": {...}}`.
fn resource03(cfg: &TaskPushNotificationConfig) -> Value {
    let v03 = v03::push_config_to_v03(cfg);
    json!({
        "name": format!(
            "tasks/{}/pushNotificationConfigs/{}",
            cfg.task_id.as_deref().unwrap_or(""),
            cfg.id.as_deref().unwrap_or("")
        ),
        "pushNotificationConfig": v03.push_notification_config,
    })
}

/// v0.3: the same routes under `/v1/`, with the v0.3 proto's resource shape.
pub async fn v03(
    State(state): State<AppState>,
    axum::Extension(caller): axum::Extension<crate::server::Caller>,
    method: Method,
    params: Params,
    q: Q,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let q = query(q)?;
    let route = "/v1/tasks/{id}/pushNotificationConfigs";
    check(&headers, &q, Version::V03, &method, route)?;
    let push = service(&state)?;
    let owner = caller.owner();
    let task_id = param(&params, "id").unwrap_or_default();
    match (method.clone(), param(&params, "config_id")) {
        (Method::POST, None) => {
            // CreateTaskPushNotificationConfigRequest, JSON or proto field names.
            let pnc = decode_create_push_config(body_json(&headers, body)?)?;
            let cfg = TaskPushNotificationConfig::try_from(v03::TaskPushNotificationConfig03 {
                task_id,
                push_notification_config: pnc,
            })?;
            ok_json(&resource03(&push.create(owner, cfg, V03, false).await?))
        }
        (Method::GET, None) => {
            let configs: Vec<Value> = push
                .list(owner, &task_id)
                .await?
                .iter()
                .map(resource03)
                .collect();
            ok_json(&json!({"configs": configs, "nextPageToken": ""}))
        }
        (Method::GET, Some(id)) => ok_json(&resource03(&push.get(owner, &task_id, &id).await?)),
        (Method::DELETE, Some(id)) => {
            push.delete(owner, &task_id, &id).await?;
            ok_json(&json!({}))
        }
        _ => Err(method_not_allowed(&method, route)),
    }
}
