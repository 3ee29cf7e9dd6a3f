//! Routing between adapters served on one port (`--route-by-metadata`): a request to the root
//! endpoints goes to the adapter at `/agents/{id}/` when it names one in
//! `params.message.metadata.agent` (JSON-RPC) or `message.metadata.agent` (HTTP+JSON), or when
//! the task it is about belongs to that adapter, or (naming no adapter) the context it
//! continues does. Everything else stays at the root (the
//! default adapter). The request is rewritten, not proxied: the nested router then checks the
//! caller, the owner and the request itself as usual. A message that continues one adapter's
//! conversation (its task or context) but names another adapter, or is sent to another
//! adapter's endpoints (`/agents/{id}/`, or the root without `--route-by-metadata`), is
//! refused here, as its binding refuses invalid params (JSON-RPC -32602, HTTP 400): taken,
//! it would start a second conversation under the same context id, on another CLI.

use axum::body::{to_bytes, Body};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::engine::Engine;
use crate::protocol::{A2AError, Method as ProtoMethod};

/// The adapters a root request may be routed to.
#[derive(Clone)]
pub struct Routes {
    /// `(adapter id, engine)` of every adapter served, the default one first.
    pub agents: Vec<(String, Engine)>,
    /// `--route-by-metadata`: a root request goes to the adapter its message names or its
    /// conversation is with; else the root is the default adapter's.
    pub by_metadata: bool,
    /// Largest request body read to find the adapter.
    pub body_limit: usize,
    /// The guard: a body is read only for a caller it lets through (None: nothing to
    /// route to, the body is never read here).
    pub guard: Option<std::sync::Arc<crate::server::guard::Guard>>,
}

/// `(adapter id, engine)` of each adapter served, in order.
pub(super) fn engines(agents: &[super::AppState]) -> Vec<(String, Engine)> {
    agents
        .iter()
        .map(|a| (a.engine.launch().adapter.id.clone(), a.engine.clone()))
        .collect()
}

impl Routes {
    /// Every adapter but the default one: those a root request may be sent on to.
    fn others(&self) -> &[(String, Engine)] {
        self.agents.get(1..).unwrap_or_default()
    }

    /// The adapter a `metadata.agent` name sends a message to: the one of that id, else
    /// (a name this host does not serve) the default one.
    fn named(&self, name: &str) -> Option<&(String, Engine)> {
        self.agents
            .iter()
            .find(|(id, _)| id == name)
            .or_else(|| self.agents.first())
    }
}

/// The middleware: rewrites the URI of a root request that belongs to another adapter, and
/// refuses a message that names another adapter than the conversation it continues.
pub async fn route(
    State(routes): State<std::sync::Arc<Routes>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    // Authentication comes before any body is read (or any task looked up): a caller the
    // guard would refuse is passed on unrouted, and the guard answers it (401) without
    // reading the body.
    let caller = routes
        .guard
        .as_ref()
        .and_then(|g| g.caller_of(req.headers()));
    let Some(caller) = caller else {
        return next.run(req).await;
    };
    if routes.others().is_empty() {
        return next.run(req).await;
    }
    if let Some((agent, rest)) = addressed(&path) {
        return check_addressed(&routes, &agent, &rest, req, caller.owner(), next).await;
    }
    if !routes.by_metadata {
        let default = routes.agents[0].0.clone();
        return check_addressed(&routes, &default, &path, req, caller.owner(), next).await;
    }
    let rest_task = rest_task_id(&path);
    let sends = if req.method() == Method::POST {
        sends_at(&path)
    } else {
        None
    };
    let (parts, body) = req.into_parts();
    let (body, target) = if let Some(rpc) = sends {
        // Only an authenticated caller gets here; its body is bounded by the body limit.
        let bytes = match to_bytes(body, routes.body_limit).await {
            Ok(b) => b,
            Err(_) => {
                return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response()
            }
        };
        let target = match serde_json::from_slice::<Value>(&bytes) {
            Ok(v) => match target_of_body(&routes, &v, rpc, caller.owner()).await {
                Ok(target) => target,
                Err(refusal) => return refusal,
            },
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

/// The adapter a JSON-RPC (`rpc`) or HTTP+JSON body belongs to: the task it names
/// (`taskId`, `message.taskId`, `id`), else `message.metadata.agent`, else the context it
/// continues; Err(the answer refusing it) when it sends a message that names another
/// adapter than the conversation it continues ([`check_named`]).
async fn target_of_body(
    routes: &Routes,
    v: &Value,
    rpc: bool,
    owner: Option<&str>,
) -> Result<Option<String>, Response> {
    let Some(p) = request_of(v) else {
        return Ok(None);
    };
    let message = p.get("message");
    let named = message
        .and_then(|m| m.get("metadata"))
        .and_then(|m| m.get("agent"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|a| !a.is_empty());
    if let (Some(name), Some(sender)) = (named, Sender::of(rpc, v)) {
        if let Err(e) = check_named(routes, p, name, owner).await {
            return Err(sender.refuse(e));
        }
    }
    if let Some(task) = task_of(p) {
        if let Some(id) = owner_of(routes, task).await {
            return Ok(Some(id));
        }
    }
    let Some(name) = named else {
        // A follow-up in a context goes where the context is: another adapter's context
        // continued at the root would split the conversation between two CLIs.
        return Ok(match context_of(p) {
            Some(c) => context_holder(routes, c).await,
            None => None,
        });
    };
    Ok(routes
        .others()
        .iter()
        .find(|(id, _)| id == name)
        .map(|(id, _)| id.clone()))
}

/// The adapter a path addresses (`/agents/{id}/…`) and the path within its endpoints.
fn addressed(path: &str) -> Option<(String, String)> {
    let after = path.strip_prefix("/agents/")?;
    let (id, rest) = after.split_once('/').unwrap_or((after, ""));
    Some((id.to_string(), format!("/{rest}")))
}

/// Whether a POST to `path` (within one adapter's endpoints) may send a message: the
/// JSON-RPC paths (`rpc`) and the HTTP+JSON send paths.
fn sends_at(path: &str) -> Option<bool> {
    let trimmed = match path.trim_end_matches('/') {
        "" => "/",
        p => p,
    };
    let rpc = super::paths::JSONRPC_PATHS.contains(&trimmed);
    (rpc || path.ends_with("message:send") || path.ends_with("message:stream")).then_some(rpc)
}

/// Passes on a request sent to the endpoints of adapter `agent` (`path` within them),
/// refusing a message that continues another adapter's conversation.
async fn check_addressed(
    routes: &Routes,
    agent: &str,
    path: &str,
    req: Request,
    owner: Option<&str>,
    next: Next,
) -> Response {
    let served = routes.agents.iter().any(|(id, _)| id == agent);
    let rpc = match sends_at(path) {
        Some(rpc) if served && req.method() == Method::POST => rpc,
        _ => return next.run(req).await,
    };
    let (parts, body) = req.into_parts();
    let Ok(bytes) = to_bytes(body, routes.body_limit).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
        if let (Some(p), Some(sender)) = (request_of(&v), Sender::of(rpc, &v)) {
            if let Err(e) =
                check_conversation(&routes.agents, p, agent, How::Addressed, owner).await
            {
                return sender.refuse(e);
            }
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// How a message chose its adapter, for the refusal's advice.
#[derive(Clone, Copy)]
pub(super) enum How {
    /// By `metadata.agent`.
    Named,
    /// By the endpoints it was sent to.
    Addressed,
    /// By gRPC's `tenant`.
    Tenant,
}

/// The request in a body: JSON-RPC puts it in `params` (its top-level `id` is the
/// request's); HTTP+JSON sends it as the body.
fn request_of(v: &Value) -> Option<&Value> {
    if v.get("jsonrpc").is_some() {
        v.get("params")
    } else {
        Some(v)
    }
}

/// The context a request's message continues.
fn context_of(p: &Value) -> Option<&str> {
    p.get("message")
        .and_then(|m| m.get("contextId"))
        .and_then(Value::as_str)
}

/// The task a request names: `taskId`, `message.taskId` or `id`.
fn task_of(p: &Value) -> Option<&str> {
    p.get("taskId")
        .or_else(|| p.get("message").and_then(|m| m.get("taskId")))
        .or_else(|| p.get("id"))
        .and_then(Value::as_str)
}

/// Refuses a message that continues a conversation of one adapter (the task it names, else
/// its context) but names another in `metadata.agent` (`name`): sent there, it would start
/// a second conversation under the same context id, on another CLI. MCP's `start_task`
/// refuses the same.
async fn check_named(
    routes: &Routes,
    p: &Value,
    name: &str,
    owner: Option<&str>,
) -> Result<(), A2AError> {
    let Some((chosen, _)) = routes.named(name) else {
        return Ok(());
    };
    check_conversation(&routes.agents, p, chosen, How::Named, owner).await
}

/// Refuses a message for adapter `chosen` that continues a conversation (the task it
/// names, else its context) of another adapter. Only the caller's own tasks and contexts
/// count: another caller's conversation is none of its business (and is not found where it
/// goes).
pub(super) async fn check_conversation(
    agents: &[(String, Engine)],
    p: &Value,
    chosen: &str,
    how: How,
    owner: Option<&str>,
) -> Result<(), A2AError> {
    let advice = |holder: &str| match how {
        How::Named => format!("leave metadata.agent out (or name '{holder}') to continue it"),
        How::Addressed => format!("send it to /agents/{holder}/ to continue it"),
        How::Tenant => format!("send it with tenant '{holder}' to continue it"),
    };
    if let Some(task) = task_of(p) {
        if let Some(holder) = task_holder(agents, task, owner).await {
            if holder == chosen {
                return Ok(());
            }
            return Err(A2AError::InvalidParams(format!(
                "task {task} is part of a conversation with agent '{holder}', not '{chosen}': {}",
                advice(holder)
            )));
        }
    }
    let Some(context) = context_of(p) else {
        return Ok(());
    };
    if let Some((_, engine)) = agents.iter().find(|(id, _)| id == chosen) {
        if engine.has_context(context, owner).await {
            return Ok(());
        }
    }
    for (holder, e) in agents.iter().filter(|(id, _)| id != chosen) {
        if e.has_context(context, owner).await {
            return Err(A2AError::InvalidParams(format!(
                "context {context} is a conversation with agent '{holder}', not '{chosen}': {}, or leave contextId out to start a new one on '{chosen}'",
                advice(holder)
            )));
        }
    }
    Ok(())
}

/// The adapter (the default one too) that holds the caller's task, if any.
async fn task_holder<'a>(
    agents: &'a [(String, Engine)],
    task: &str,
    owner: Option<&str>,
) -> Option<&'a str> {
    for (id, engine) in agents {
        if engine.get_snapshot(task, owner).await.is_ok() {
            return Some(id);
        }
    }
    None
}

/// A request that sends a message, answered in its binding's error format when refused.
enum Sender {
    /// A JSON-RPC send method, with the request's id.
    JsonRpc { id: Value, method: ProtoMethod },
    /// `message:send` or `message:stream` of an HTTP+JSON binding.
    Rest,
}

impl Sender {
    /// The sender of a body posted to a JSON-RPC path (`rpc`) or to an HTTP+JSON send path;
    /// None for a JSON-RPC call of a method that sends no message.
    fn of(rpc: bool, v: &Value) -> Option<Sender> {
        if !rpc {
            return Some(Sender::Rest);
        }
        let method = v.get("method")?.as_str()?.parse::<ProtoMethod>().ok()?;
        let sends = matches!(
            method,
            ProtoMethod::SendMessage
                | ProtoMethod::SendStreamingMessage
                | ProtoMethod::MessageSend
                | ProtoMethod::MessageStream
        );
        let id = v
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
            .cloned()
            .unwrap_or(Value::Null);
        sends.then_some(Sender::JsonRpc { id, method })
    }

    /// The answer refusing the request with `err`: what its handler answers for it.
    fn refuse(self, err: A2AError) -> Response {
        match self {
            Sender::JsonRpc { id, method } => super::jsonrpc::refusal(&id, method, &err),
            Sender::Rest => super::rest::Reject::from(err).into_response(),
        }
    }
}

/// The other adapter that holds the task, if any.
async fn owner_of(routes: &Routes, task_id: &str) -> Option<String> {
    for (id, engine) in routes.others() {
        if engine.has_task(task_id).await {
            return Some(id.clone());
        }
    }
    None
}

/// The other adapter that holds the context, if any.
async fn context_holder(routes: &Routes, context_id: &str) -> Option<String> {
    for (id, engine) in routes.others() {
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
    fn the_adapter_a_path_addresses_and_whether_it_sends() {
        let a = |p: &str| {
            addressed(p).map(|(id, rest)| {
                let sends = sends_at(&rest);
                (id, rest, sends)
            })
        };
        assert_eq!(
            a("/agents/codex"),
            Some(("codex".into(), "/".into(), Some(true)))
        );
        assert_eq!(
            a("/agents/codex/a2a/rest/message:stream"),
            Some((
                "codex".into(),
                "/a2a/rest/message:stream".into(),
                Some(false)
            ))
        );
        assert_eq!(
            a("/agents/codex/a2a/rest/tasks/t1"),
            Some(("codex".into(), "/a2a/rest/tasks/t1".into(), None))
        );
        assert_eq!(a("/a2a"), None);
    }

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
