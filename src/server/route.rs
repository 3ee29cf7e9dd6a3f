//! Routing between adapters served on one port (`--route-by-metadata`): a request to the root
//! endpoints goes to the adapter at `/agents/{id}/` when it names one in
//! `params.message.metadata.agent` (JSON-RPC) or `message.metadata.agent` (HTTP+JSON), or when
//! the task it is about belongs to that adapter, or (naming no adapter) the context it
//! continues does. Everything else stays at the root (the
//! default adapter). The request is rewritten, not proxied: the nested router then checks the
//! caller, the owner and the request itself as usual.

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::engine::Engine;

/// The adapters a root request may be routed to.
#[derive(Clone)]
pub struct Routes {
    /// `(adapter id, engine)` of every adapter but the default one.
    pub others: Vec<(String, Engine)>,
    /// Largest request body read to find the adapter.
    pub body_limit: usize,
    /// The guard: a body is read only for a caller it lets through (None: nothing to
    /// route to, the body is never read here).
    pub guard: Option<std::sync::Arc<crate::server::guard::Guard>>,
}

/// The middleware: rewrites the URI of a root request that belongs to another adapter.
pub async fn route(
    State(routes): State<std::sync::Arc<Routes>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    // Authentication comes before any body is read (or any task looked up): a caller the
    // guard would refuse is passed on unrouted, and the guard answers it (401) without
    // reading the body.
    let allowed = routes
        .guard
        .as_ref()
        .is_some_and(|g| g.admits(req.headers()));
    if routes.others.is_empty() || path.starts_with("/agents/") || !allowed {
        return next.run(req).await;
    }
    let rest_task = rest_task_id(&path);
    let trimmed = match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    };
    let needs_body = req.method() == Method::POST
        && (super::paths::JSONRPC_PATHS.contains(&trimmed)
            || path.ends_with("message:send")
            || path.ends_with("message:stream"));
    let (parts, body) = req.into_parts();
    let (body, target) = if needs_body {
        // Only an authenticated caller gets here; its body is bounded by the body limit.
        let bytes = match to_bytes(body, routes.body_limit).await {
            Ok(b) => b,
            Err(_) => {
                return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response()
            }
        };
        let target = match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => target_of_body(&routes, &v).await,
            // Not JSON: the root answers with the right parse error.
            Err(_) => None,
        };
        (Body::from(bytes), target)
    } else {
        let target = match rest_task {
            Some(id) => owner_of(&routes, &id).await,
            None => None,
        };
        (body, target)
    };
    let mut req = Request::from_parts(parts, body);
    if let Some(id) = target {
        let pq = req
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        // The nested router's root is `/agents/{id}` (trailing slashes are trimmed before
        // this runs).
        let pq = pq
            .strip_prefix('/')
            .filter(|r| r.is_empty() || r.starts_with('?'))
            .map_or(pq.clone(), str::to_string);
        if let Ok(uri) = format!("/agents/{id}{pq}").parse::<Uri>() {
            tracing::debug!(adapter = %id, "routed {path} to /agents/{id}");
            *req.uri_mut() = uri;
        }
    }
    next.run(req).await
}

/// The adapter a JSON-RPC or HTTP+JSON body belongs to: the task it names (`taskId`,
/// `message.taskId`, `id`), else `message.metadata.agent`.
async fn target_of_body(routes: &Routes, v: &Value) -> Option<String> {
    // JSON-RPC puts the request in `params` (its top-level `id` is the request's); HTTP+JSON
    // sends it as the body.
    let p = if v.get("jsonrpc").is_some() {
        v.get("params")?
    } else {
        v
    };
    let message = p.get("message");
    let task = p
        .get("taskId")
        .or_else(|| message.and_then(|m| m.get("taskId")))
        .or_else(|| p.get("id"))
        .and_then(Value::as_str);
    if let Some(task) = task {
        if let Some(id) = owner_of(routes, task).await {
            return Some(id);
        }
    }
    let agent = message?
        .get("metadata")
        .and_then(|m| m.get("agent"))
        .and_then(Value::as_str);
    let Some(agent) = agent else {
        // A follow-up in a context goes where the context is: another adapter's context
        // continued at the root would split the conversation between two CLIs.
        let context = message?.get("contextId")?.as_str()?;
        return context_holder(routes, context).await;
    };
    routes
        .others
        .iter()
        .find(|(id, _)| id == agent)
        .map(|(id, _)| id.clone())
}

/// The other adapter that holds the task, if any.
async fn owner_of(routes: &Routes, task_id: &str) -> Option<String> {
    for (id, engine) in &routes.others {
        if engine.has_task(task_id).await {
            return Some(id.clone());
        }
    }
    None
}

/// The other adapter that holds the context, if any.
async fn context_holder(routes: &Routes, context_id: &str) -> Option<String> {
    for (id, engine) in &routes.others {
        if engine.has_context(context_id, None).await {
            return Some(id.clone());
        }
    }
    None
}

/// The task id in an HTTP+JSON path (`…/tasks/{id}`, `…/tasks/{id}:cancel`,
/// `…/tasks/{id}/pushNotificationConfigs…`).
fn rest_task_id(path: &str) -> Option<String> {
    let (_, after) = path.split_once("/tasks/")?;
    let seg = after.split('/').next()?;
    let id = seg.split(':').next()?;
    (!id.is_empty()).then(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_in_rest_paths() {
        assert_eq!(rest_task_id("/a2a/rest/tasks/abc").as_deref(), Some("abc"));
        assert_eq!(
            rest_task_id("/a2a/rest/tasks/abc:cancel").as_deref(),
            Some("abc")
        );
        assert_eq!(
            rest_task_id("/a2a/rest03/v1/tasks/abc/pushNotificationConfigs/x").as_deref(),
            Some("abc")
        );
        assert_eq!(rest_task_id("/a2a/rest/tasks"), None);
        assert_eq!(rest_task_id("/a2a/rest/message:send"), None);
    }
}
