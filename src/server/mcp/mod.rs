//! The MCP binding: agent-host as a Model Context Protocol server, over Streamable HTTP at
//! `/mcp` on the host's port (and over stdio through `agent-host mcp`, a bridge to that
//! endpoint: [`crate::cli::mcp`]).
//!
//! Like the gRPC binding it is a thin layer: each tool calls the engine operations the A2A
//! bindings call ([`Engine::send`], [`Engine::get_snapshot`], [`Engine::list`],
//! [`Engine::cancel_from`], ...) with the caller's owner, and keeps no task state of its own.
//! A task started here is an ordinary task (console, `tasks`, A2A `GetTask` by its owner,
//! push notifications). The route sits behind the same gates as every HTTP route: the Host
//! and Origin allow-lists, the credentials (bearer, API key, Basic), the rate limit and the
//! body limit; the guard puts the [`Caller`] into the request, and rmcp hands the request's
//! parts to the tool, which reads the caller from them. Errors are the engine's errors with
//! the JSON-RPC code and message of the A2A bindings (-32602 for a bad argument).
//!
//! The server runs stateless (rmcp's `legacy_session_mode` off, no session manager): a
//! session would be state of its own, and nothing here needs one. For a client that speaks
//! MCP tasks (MCP 2025-11-25), `start_task` runs as an MCP task that is the A2A task itself
//! ([`tasks`]: a layer in front of rmcp, since rmcp implements a later, different form of
//! tasks and keeps its tasks in its own memory); any client can also follow a task with
//! `get_task` (or wait, with progress notifications).

mod params;
mod tasks;
mod view;

use std::sync::Arc;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, ContentBlock, ErrorCode, Implementation, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::{AppState, Caller};
use crate::engine::{Engine, RequestOptions};
use crate::protocol::v1::{
    ListTasksRequest, Message, Part, Role, SendMessageRequest, Task, TaskState,
};
use crate::protocol::A2AError;
use crate::store::Snapshot;

pub use params::{
    CancelTask, Decision, GetChanges, GetTask, ListTasks, Parameters, Reply, StartTask,
};
pub use view::{ChangesView, EventView, TaskView};

/// The MCP endpoint's path on the host's port.
pub const PATH: &str = super::paths::MCP;

/// The `/mcp` route over one host's agents (the first is the default): rmcp's Streamable
/// HTTP service behind the layer that serves MCP tasks ([`tasks`]).
pub fn router(agents: &[AppState], body_limit: usize) -> axum::Router {
    let host = McpHost::new(agents.to_vec(), body_limit);
    let keepalive = Some(host.keepalive);
    // The host's gate has checked Host and Origin against its own allow-lists before the
    // request gets here; rmcp's loopback-only default would refuse a host's public name.
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_sse_keep_alive(keepalive)
        .with_max_request_body_bytes(body_limit);
    let tools = host.clone();
    let service: StreamableHttpService<McpHost, NeverSessionManager> = StreamableHttpService::new(
        move || Ok(tools.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    // POST only: the server starts no stream of its own (GET) and keeps no session to end
    // (DELETE); those get the host's 405 with its small JSON body, as any route's.
    let methods = axum::routing::post_service(service).fallback(super::method_not_allowed);
    axum::Router::new()
        .route(PATH, methods)
        .layer(axum::middleware::from_fn_with_state(host, tasks::front))
}

/// The MCP server: the tools over the host's agents.
#[derive(Clone)]
pub struct McpHost {
    agents: Arc<[AppState]>,
    tool_router: ToolRouter<McpHost>,
    /// The largest request body the task layer reads.
    body_limit: usize,
    /// Interval of the keep-alives on a response held open (the host's SSE keep-alive).
    keepalive: std::time::Duration,
}

/// Who calls, as the guard admitted the HTTP request.
struct Who {
    owner: Option<String>,
    opts: RequestOptions,
}

impl Who {
    fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }
}

/// The caller of a tool call: the [`Caller`] the guard put into the HTTP request. A call
/// without one did not pass the guard and is refused.
fn who(guard: &super::guard::Guard, ctx: &RequestContext<RoleServer>) -> Result<Who, ErrorData> {
    let parts = ctx
        .extensions
        .get::<axum::http::request::Parts>()
        .ok_or_else(|| ErrorData::invalid_request("MCP is served over HTTP only", None))?;
    who_of(guard, parts)
}

/// The caller of an HTTP request to `/mcp`, as the guard admitted it.
fn who_of(
    guard: &super::guard::Guard,
    parts: &axum::http::request::Parts,
) -> Result<Who, ErrorData> {
    let caller = parts.extensions.get::<Caller>().ok_or_else(|| {
        tracing::error!("an MCP call reached a tool without passing the guard");
        ErrorData::internal_error("Internal error", None)
    })?;
    Ok(Who {
        owner: caller.0.clone(),
        opts: RequestOptions {
            traceparent: super::guard::traceparent(&parts.headers),
            tool_trace: false,
            relay: guard.relay(&parts.headers),
        },
    })
}

/// An engine error as an MCP error: the code and message the A2A JSON-RPC binding answers
/// with (internal details stay in the log).
pub fn error(e: A2AError) -> ErrorData {
    match e {
        A2AError::Internal(detail) => {
            tracing::error!(error = %detail, "internal error (MCP)");
            ErrorData::internal_error("Internal error", None)
        }
        other => {
            tracing::debug!(code = other.code(), error = %other, "MCP call refused");
            let data = other.reason().map(|r| json!({ "reason": r }));
            let code = i32::try_from(other.code()).unwrap_or(ErrorCode::INTERNAL_ERROR.0);
            ErrorData::new(ErrorCode(code), other.to_string(), data)
        }
    }
}

fn bad(msg: impl Into<String>) -> ErrorData {
    ErrorData::invalid_params(msg.into(), None)
}

/// A tool's answer: `value` as structured content and `text` for a person.
fn answer<T: Serialize>(value: &T, text: String) -> Result<CallToolResult, ErrorData> {
    let value = serde_json::to_value(value)
        .map_err(|e| error(A2AError::Internal(format!("MCP answer: {e}"))))?;
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(value);
    Ok(r)
}

/// The view of a task `engine` holds; its `agent` is the engine's adapter when the task does
/// not name it yet (a task answered as submitted, before its turn has started).
fn view_of(task: &Task, engine: &Engine) -> TaskView {
    let mut v = TaskView::of(task);
    if v.agent.is_none() {
        v.agent = Some(engine.launch().adapter.id.clone());
    }
    v
}

/// The answer of a tool that ran a task (`start_task`, `reply`, and `tasks/result`): the
/// task, marked `isError` when it failed.
fn task_answer(snap: &Snapshot, engine: &Engine) -> Result<CallToolResult, ErrorData> {
    let v = view_of(&snap.task, engine);
    let text = v.summary();
    let mut r = answer(&v, text)?;
    if v.is_error() {
        r.is_error = Some(true);
    }
    Ok(r)
}

impl McpHost {
    pub fn new(agents: Vec<AppState>, body_limit: usize) -> McpHost {
        let keepalive = agents
            .first()
            .map_or(super::config::SSE_KEEPALIVE, |a| a.keepalive);
        McpHost {
            agents: agents.into(),
            tool_router: Self::tool_router(),
            body_limit,
            keepalive,
        }
    }

    fn who(&self, ctx: &RequestContext<RoleServer>) -> Result<Who, ErrorData> {
        who(&self.agent(None)?.guard, ctx)
    }

    /// The agent an `agent` argument names, or the default one.
    fn agent(&self, id: Option<&str>) -> Result<&AppState, ErrorData> {
        let id = id.map(str::trim).filter(|s| !s.is_empty());
        let found = match id {
            None => self.agents.first(),
            Some(id) => self
                .agents
                .iter()
                .find(|a| a.engine.launch().adapter.id == id),
        };
        found.ok_or_else(|| {
            let ids: Vec<&str> = self
                .agents
                .iter()
                .map(|a| a.engine.launch().adapter.id.as_str())
                .collect();
            bad(format!(
                "agent '{}' is not served by this host; use one of: {}",
                id.unwrap_or_default(),
                ids.join(", ")
            ))
        })
    }

    /// The agent a `start_task` runs on: for a follow-up (`contextId`), the agent whose
    /// conversation it is, so that a conversation stays with one CLI; else the one `agent`
    /// names, or the default. Naming another agent than the context's is refused.
    async fn start_agent(&self, p: &StartTask, who: &Who) -> Result<&AppState, ErrorData> {
        let named = p.agent.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let chosen = self.agent(named)?;
        let Some(context) = p
            .context_id
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
        else {
            return Ok(chosen);
        };
        if chosen.engine.has_context(context, who.owner()).await {
            return Ok(chosen);
        }
        for a in self.agents.iter() {
            if a.engine.has_context(context, who.owner()).await {
                let holder = &a.engine.launch().adapter.id;
                return match named {
                    None => Ok(a),
                    Some(n) => Err(bad(format!(
                        "context {context} is a conversation with agent '{holder}', not '{n}': leave agent out (or name '{holder}') to continue it, or leave contextId out to start a new one on '{n}'"
                    ))),
                };
            }
        }
        Ok(chosen)
    }

    /// The engine that holds the caller's context; the default one when none does, which
    /// then answers that it is not found.
    async fn context_engine(&self, context_id: &str, who: &Who) -> Result<&Engine, ErrorData> {
        for a in self.agents.iter() {
            if a.engine.has_context(context_id, who.owner()).await {
                return Ok(&a.engine);
            }
        }
        Ok(&self.agent(None)?.engine)
    }

    /// The engine that holds a task (each adapter has its own store); the default one when
    /// none does, which then answers that the task is not found.
    async fn engine_of(&self, task_id: &str) -> Result<&Engine, ErrorData> {
        for a in self.agents.iter() {
            if a.engine.has_task(task_id).await {
                return Ok(&a.engine);
            }
        }
        Ok(&self.agent(None)?.engine)
    }

    /// Sends `message` as the caller, and answers the task: once it settles with `wait`
    /// (progress notifications meanwhile), else as it is now. `start_task` and `reply` share it.
    async fn send_and_answer(
        engine: &Engine,
        message: crate::protocol::v1::Message,
        who: &Who,
        wait: bool,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let acc = send(engine, message, who).await?;
        let snap = if wait {
            Self::settle(engine, &acc.task_id, acc.from_seq, who, ctx).await
        } else {
            engine.get_snapshot(&acc.task_id, who.owner()).await
        }
        .map_err(error)?;
        task_answer(&snap, engine)
    }

    /// Waits until the task settles (ends, or waits for input) after `from_seq`, sending its
    /// updates as progress notifications when the call has a progress token. A canceled call
    /// stops waiting (the task goes on) and answers the task as it is.
    async fn settle(
        engine: &Engine,
        task_id: &str,
        from_seq: u64,
        who: &Who,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Snapshot, A2AError> {
        let Some(token) = ctx.meta.get_progress_token() else {
            tokio::select! {
                r = engine.wait_settled(task_id, from_seq, who.owner()) => return r,
                () = ctx.ct.cancelled() => return engine.get_snapshot(task_id, who.owner()).await,
            }
        };
        let mut events = engine.subscribe(task_id, from_seq, who.owner()).await?;
        let mut progress = 0u32;
        // Each line once: a task says `working` several times, and its answer comes as text,
        // as its result and in its final status.
        let mut sent = std::collections::HashSet::new();
        loop {
            let e = tokio::select! {
                e = events.next() => e,
                () = ctx.ct.cancelled() => None,
            };
            let Some(e) = e else { break };
            let Some(line) = EventView::of(&e).progress_line() else {
                continue;
            };
            if !sent.insert(line.clone()) {
                continue;
            }
            progress += 1;
            let note = ProgressNotificationParam::new(token.clone(), f64::from(progress))
                .with_message(line);
            if ctx.peer.notify_progress(note).await.is_err() {
                tracing::debug!(task = %task_id, "MCP client gone; no more progress notifications");
            }
        }
        engine.get_snapshot(task_id, who.owner()).await
    }
}

/// Sends `message` as the caller.
async fn send(
    engine: &Engine,
    message: Message,
    who: &Who,
) -> Result<crate::engine::Accepted, ErrorData> {
    let req = SendMessageRequest {
        tenant: None,
        message,
        configuration: None,
        metadata: None,
    };
    engine
        .send(req, who.owner(), &who.opts)
        .await
        .map_err(error)
}

/// The message that starts a task from `start_task`'s arguments.
fn start_message(p: &StartTask) -> Message {
    let mut message = crate::engine::input::text_message(&p.prompt);
    message.context_id = p.context_id.clone().filter(|c| !c.trim().is_empty());
    message.metadata = start_metadata(p);
    message
}

/// Message metadata from `start_task`'s optional arguments.
fn start_metadata(p: &StartTask) -> Option<Map<String, Value>> {
    let mut md = Map::new();
    let text = |s: &Option<String>| {
        s.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Value::String(s.to_string()))
    };
    let fields = [
        ("cwd", text(&p.cwd)),
        ("baseRef", text(&p.base_ref)),
        ("budget", p.budget.clone()),
        ("approvals", p.approvals.clone()),
    ];
    for (key, value) in fields {
        if let Some(v) = value {
            md.insert(key.to_string(), v);
        }
    }
    (!md.is_empty()).then_some(md)
}

/// The message of a `reply`: text, or an approval's decision as a data part.
fn reply_message(p: &Reply) -> Result<Message, ErrorData> {
    let text = p.text.as_deref().filter(|t| !t.trim().is_empty());
    let part = match (text, p.decision) {
        (Some(t), None) => Part::text(t),
        (None, Some(d)) => {
            let mut data =
                json!({ "decision": if d == Decision::Allow { "allow" } else { "deny" } });
            if let Some(m) = p.message.as_deref().filter(|m| !m.trim().is_empty()) {
                data["message"] = Value::String(m.to_string());
            }
            Part::data(data)
        }
        (Some(_), Some(_)) => return Err(bad("give either text or decision, not both")),
        (None, None) => {
            return Err(bad(
                "give the answer as text, or decision (allow or deny) for an approval",
            ))
        }
    };
    Ok(Message {
        message_id: uuid::Uuid::new_v4().to_string(),
        task_id: Some(p.task_id.clone()),
        role: Role::User,
        parts: vec![part],
        ..Message::default()
    })
}

/// The error of a `reply` to a task that has ended, in the tools' words (the engine's
/// speaks of A2A messages).
fn ended_reply(task: &Task) -> String {
    format!(
        "task {} is already {}: it takes no reply; to continue its conversation, call start_task with contextId {}",
        task.id,
        view::state_name(task.status.state),
        task.context_id
    )
}

/// How many events `get_task` lists: `maxEvents` (0: none), 100 when not given, at most
/// [`MAX_EVENTS`].
fn event_limit(max_events: Option<usize>) -> usize {
    max_events.unwrap_or(DEFAULT_EVENTS).min(MAX_EVENTS)
}

/// The events `get_task` lists when `maxEvents` is not given.
const DEFAULT_EVENTS: usize = 100;

/// The most events one `get_task` lists.
const MAX_EVENTS: usize = 1000;

fn required(value: &str, name: &str) -> Result<(), ErrorData> {
    if value.trim().is_empty() {
        return Err(bad(format!("{name} is required")));
    }
    Ok(())
}

#[tool_router]
impl McpHost {
    /// Starts a task.
    #[tool(
        name = "start_task",
        description = "Start a coding task on one of the host's agent CLIs. Answers the task (id, contextId, state; with wait: the answer, a question waiting for reply, the changes summary). Continue a conversation with contextId."
    )]
    async fn start_task(
        &self,
        Parameters(p): Parameters<StartTask>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.who(&ctx)?;
        required(&p.prompt, "prompt")?;
        let state = self.start_agent(&p, &who).await?;
        Self::send_and_answer(&state.engine, start_message(&p), &who, p.wait, &ctx).await
    }

    /// Reads a task and, optionally, its events.
    #[tool(
        name = "get_task",
        description = "Get a task (state, answer, question, changes) and, with afterEvent, its events after that sequence number, to follow a task without streaming."
    )]
    async fn get_task(
        &self,
        Parameters(p): Parameters<GetTask>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.who(&ctx)?;
        required(&p.task_id, "taskId")?;
        let engine = self.engine_of(&p.task_id).await?;
        let snap = engine
            .get_snapshot(&p.task_id, who.owner())
            .await
            .map_err(error)?;
        let task = view_of(&snap.task, engine);
        let mut text = task.summary();
        let Some(after) = p.after_event else {
            return answer(&json!({ "task": task }), text);
        };
        let limit = event_limit(p.max_events);
        let events: Vec<EventView> = if limit == 0 {
            Vec::new()
        } else {
            engine
                .events_since(&p.task_id, after, limit, who.owner())
                .await
                .map_err(error)?
                .iter()
                .map(|e| EventView::of(e))
                .collect()
        };
        let last = events.last().map_or(after, |e| e.seq);
        for line in events.iter().filter_map(EventView::progress_line) {
            text.push_str("\n- ");
            text.push_str(&line);
        }
        answer(
            &json!({ "task": task, "events": events, "lastEvent": last }),
            text,
        )
    }

    /// Lists the caller's tasks.
    #[tool(
        name = "list_tasks",
        description = "List your tasks, newest first, optionally of one context or in one state."
    )]
    async fn list_tasks(
        &self,
        Parameters(p): Parameters<ListTasks>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.who(&ctx)?;
        let state = self.agent(p.agent.as_deref())?;
        let status = match p.state.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(
                TaskState::parse_lenient(s)
                    .filter(|s| *s != TaskState::Unspecified)
                    .ok_or_else(|| bad(format!("state '{s}' is not a task state (working, input-required, completed, failed, canceled, rejected, submitted)")))?,
            ),
        };
        let req = ListTasksRequest {
            context_id: p.context_id.clone(),
            status,
            page_size: p.page_size,
            page_token: p.page_token.clone(),
            history_length: Some(0),
            status_timestamp_after: p.status_timestamp_after.clone(),
            include_artifacts: Some(true),
            ..ListTasksRequest::default()
        };
        let list = state.engine.list(req, who.owner()).await.map_err(error)?;
        let tasks: Vec<TaskView> = list
            .tasks
            .iter()
            .map(|t| view_of(t, &state.engine))
            .collect();
        let mut text = format!("{} task(s) of {}.", tasks.len(), list.total_size);
        for t in &tasks {
            text.push_str(&format!("\n- {} ({}) {}", t.id, t.context_id, t.state));
        }
        answer(
            &json!({ "tasks": tasks, "nextPageToken": list.next_page_token, "totalSize": list.total_size }),
            text,
        )
    }

    /// Answers a task that waits for input.
    #[tool(
        name = "reply",
        description = "Answer a task that is input-required: text for a question, or decision allow/deny (with an optional message) for an approval. Waits until the task ends or asks again unless wait is false."
    )]
    async fn reply(
        &self,
        Parameters(p): Parameters<Reply>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.who(&ctx)?;
        required(&p.task_id, "taskId")?;
        let message = reply_message(&p)?;
        let engine = self.engine_of(&p.task_id).await?;
        let snap = engine
            .get_snapshot(&p.task_id, who.owner())
            .await
            .map_err(error)?;
        if snap.task.status.state.is_terminal() {
            return Err(error(A2AError::UnsupportedOperation(ended_reply(
                &snap.task,
            ))));
        }
        Self::send_and_answer(engine, message, &who, p.wait, &ctx).await
    }

    /// Cancels a task.
    #[tool(
        name = "cancel_task",
        description = "Cancel a task: its program and everything it started are stopped. Answers the task, canceled."
    )]
    async fn cancel_task(
        &self,
        Parameters(p): Parameters<CancelTask>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.who(&ctx)?;
        required(&p.task_id, "taskId")?;
        let engine = self.engine_of(&p.task_id).await?;
        let task = engine
            .cancel_from(&p.task_id, who.owner(), &who.opts)
            .await
            .map_err(error)?;
        let v = view_of(&task, engine);
        let text = v.summary();
        answer(&v, text)
    }

    /// The latest changes of a context (or of one task).
    #[tool(
        name = "get_changes",
        description = "Get the changes a context's workspace has (its latest `changes` artifact): the changed files and the patch. Give contextId, or taskId for one task's changes."
    )]
    async fn get_changes(
        &self,
        Parameters(p): Parameters<GetChanges>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let who = self.who(&ctx)?;
        let found = match (p.task_id.as_deref(), p.context_id.as_deref()) {
            (Some(t), _) if !t.trim().is_empty() => {
                let engine = self.engine_of(t).await?;
                let snap = engine.get_snapshot(t, who.owner()).await.map_err(error)?;
                ChangesView::of(&snap.task)
            }
            (_, Some(c)) if !c.trim().is_empty() => {
                let engine = match p.agent.as_deref().map(str::trim).filter(|a| !a.is_empty()) {
                    Some(a) => &self.agent(Some(a))?.engine,
                    None => self.context_engine(c, &who).await?,
                };
                latest_changes(engine, c, who.owner()).await?
            }
            _ => return Err(bad("give contextId (or taskId)")),
        };
        match found {
            Some(c) => {
                let text = c.summary();
                answer(&c, text)
            }
            None => answer(&json!({ "changes": false }), "no changes".to_string()),
        }
    }
}

/// The changes of the context's newest task that has any (within its latest 100 tasks). A
/// context with none of the caller's tasks (unknown, or another caller's) is not found, the
/// same error either way.
async fn latest_changes(
    engine: &Engine,
    context_id: &str,
    owner: Option<&str>,
) -> Result<Option<ChangesView>, ErrorData> {
    let req = ListTasksRequest {
        context_id: Some(context_id.to_string()),
        page_size: Some(100),
        history_length: Some(0),
        include_artifacts: Some(true),
        ..ListTasksRequest::default()
    };
    let list = engine.list(req, owner).await.map_err(error)?;
    if list.tasks.is_empty() {
        return Err(context_not_found(context_id));
    }
    Ok(list.tasks.iter().find_map(ChangesView::of))
}

/// The error of a context that does not exist or is not the caller's: the task-not-found
/// error (its code and reason), naming the context.
fn context_not_found(context_id: &str) -> ErrorData {
    let mut e = error(A2AError::TaskNotFound(context_id.to_string()));
    e.message = format!("Context not found: {context_id}").into();
    e
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpHost {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agent-host", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "agent-host runs coding-agent CLIs (Claude Code, Codex, Gemini CLI, ...) as tasks. \
                 start_task starts one (wait: true to get its answer); a task that asks for \
                 approval is input-required: answer with reply. get_task follows a task, \
                 cancel_task stops it, get_changes shows what it changed.",
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(text: Option<&str>, decision: Option<Decision>) -> Reply {
        Reply {
            task_id: "t1".into(),
            text: text.map(str::to_string),
            decision,
            message: Some("not now".into()),
            wait: true,
        }
    }

    #[test]
    fn a_reply_is_text_or_a_decision_never_both_nor_none() {
        let m = reply_message(&reply(Some("yes"), None)).unwrap();
        assert_eq!(m.parts[0].text.as_deref(), Some("yes"));
        assert_eq!(m.task_id.as_deref(), Some("t1"));
        let m = reply_message(&reply(None, Some(Decision::Deny))).unwrap();
        assert_eq!(
            m.parts[0].data,
            Some(json!({"decision": "deny", "message": "not now"}))
        );
        assert!(reply_message(&reply(Some("yes"), Some(Decision::Allow))).is_err());
        assert!(reply_message(&reply(Some("  "), None)).is_err());
    }

    #[test]
    fn start_arguments_become_message_metadata() {
        let p: StartTask = serde_json::from_value(json!({
            "prompt": "fix it", "cwd": "/srv/repo", "baseRef": "main",
            "budget": {"usd": 1}, "approvals": {"allow": ["Read"]}
        }))
        .unwrap();
        let md = start_metadata(&p).unwrap();
        assert_eq!(md["cwd"], "/srv/repo");
        assert_eq!(md["baseRef"], "main");
        assert_eq!(md["budget"], json!({"usd": 1}));
        assert_eq!(md["approvals"], json!({"allow": ["Read"]}));
        let bare: StartTask = serde_json::from_value(json!({"prompt": "x"})).unwrap();
        assert!(start_metadata(&bare).is_none());
    }

    #[test]
    fn a_reply_to_an_ended_task_says_to_continue_with_start_task() {
        let task = Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: crate::protocol::v1::TaskStatus {
                state: TaskState::Completed,
                ..Default::default()
            },
            ..Task::default()
        };
        let m = ended_reply(&task);
        assert!(
            m.contains("start_task with contextId c1") && m.contains("already completed"),
            "{m}"
        );
        assert!(!m.contains("message without taskId"), "{m}");
    }

    #[test]
    fn max_events_is_at_most_that_many_events() {
        assert_eq!(event_limit(Some(0)), 0);
        assert_eq!(event_limit(Some(1)), 1);
        assert_eq!(event_limit(None), 100);
        assert_eq!(event_limit(Some(5000)), 1000);
    }

    #[test]
    fn unknown_arguments_are_refused() {
        let r: Result<StartTask, _> =
            serde_json::from_value(json!({"prompt": "x", "promt": "typo"}));
        assert!(r.is_err());
    }

    #[test]
    fn engine_errors_keep_their_code_and_message() {
        let e = error(A2AError::InvalidParams("prompt is required".into()));
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
        assert_eq!(e.message, "prompt is required");
        let e = error(A2AError::TaskNotFound("t9".into()));
        assert_eq!(
            i64::from(e.code.0),
            A2AError::TaskNotFound(String::new()).code()
        );
        let e = error(A2AError::Internal("/secret/path broke".into()));
        assert!(!e.message.contains("secret"));
    }
}
