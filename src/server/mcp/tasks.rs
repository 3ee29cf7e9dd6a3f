//! MCP tasks in the form MCP 2025-11-25 defines (a `tools/call` with a `task` parameter
//! answered by a `CreateTaskResult`, then `tasks/get`, `tasks/result`, `tasks/list` and
//! `tasks/cancel`), which the official TypeScript SDK client speaks. `start_task` runs as
//! such a task; the MCP task IS the A2A task: the same id, its status read from the engine's
//! task each time, nothing kept here (so a restarted host, or another host on the same
//! database, answers for it too).
//!
//! Served in front of rmcp, not through it: rmcp 3.11 implements the later form of tasks
//! (the `io.modelcontextprotocol/tasks` extension), whose `tasks/get` and `tasks/cancel`
//! answer other shapes (`ttlMs`, an empty acknowledgement) and are refused unless the client
//! declared that extension, and whose `tools/call` parameters drop the `task` field. So
//! this layer reads each JSON-RPC request to `/mcp` first, answers the 2025-11-25 task
//! requests itself with the same engine calls, owners and errors as the tools, and passes
//! everything else on to rmcp. To a 2025-11-25 client it also adds what announces tasks to
//! rmcp's answers: `capabilities.tasks` to `initialize`, `execution.taskSupport` to
//! `start_task` in `tools/list`.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, request::Parts, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use rmcp::model::ErrorCode;
use rmcp::ErrorData;
use serde_json::{json, Map, Value};

use super::{error, task_answer, EventView, McpHost, StartTask};
use crate::client::sse::SseParser;
use crate::engine::Engine;
use crate::protocol::v1::{ListTasksRequest, StreamResponse, Task, TaskState};
use crate::protocol::A2AError;
use crate::store::Snapshot;
use crate::task::TaskEvent;

/// The protocol version whose tasks this serves.
pub const TASKS_VERSION: &str = "2025-11-25";

/// How often a client should poll `tasks/get`, in milliseconds.
pub const POLL_INTERVAL_MS: u64 = 500;

/// The one tool that runs as a task.
const TASK_TOOL: &str = "start_task";

/// The `_meta` key that ties a `tasks/result` answer to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// How long `tasks/result` waits before reading a task again when the task is not live on
/// this host (its log then gives no wake-up).
const RECHECK: std::time::Duration = std::time::Duration::from_millis(500);

/// A request this layer answers itself.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskCall {
    /// `tools/call` of `start_task` with `task`: run it as a task (its arguments).
    Create(Map<String, Value>),
    Get(String),
    Result(String),
    List(Option<String>),
    Cancel(String),
}

/// A request whose answer from rmcp gets the task announcements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Announce {
    Initialize,
    ToolsList,
}

/// What to do with a JSON-RPC message to `/mcp`.
#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// Answer it here (its id, and the call or what was wrong with it).
    Answer(Value, Result<TaskCall, ErrorData>),
    /// rmcp answers; add the task announcements to the answer.
    Announce(Announce),
    /// rmcp answers.
    Pass,
}

/// The MCP status of an A2A task state. `auth-required` waits for the client as
/// `input-required` does; `rejected` did not run the request, so it failed.
pub fn status_of(state: TaskState) -> &'static str {
    match state {
        TaskState::Unspecified | TaskState::Submitted | TaskState::Working => "working",
        TaskState::InputRequired | TaskState::AuthRequired => "input_required",
        TaskState::Completed => "completed",
        TaskState::Failed | TaskState::Rejected => "failed",
        TaskState::Canceled => "cancelled",
    }
}

/// An A2A task as an MCP task (the `Task` of `tasks/get`, `tasks/list`, `tasks/cancel` and
/// `CreateTaskResult`). `ttl` is null: the task lives as long as the host keeps its tasks.
pub fn task_json(task: &Task) -> Value {
    let updated = task
        .status
        .timestamp
        .clone()
        .unwrap_or_else(crate::task::now_timestamp);
    let created = task
        .metadata
        .as_ref()
        .and_then(|m| m.get("createdAt"))
        .and_then(Value::as_str)
        .map_or_else(|| updated.clone(), str::to_string);
    let mut v = json!({
        "taskId": task.id,
        "status": status_of(task.status.state),
        "createdAt": created,
        "lastUpdatedAt": updated,
        "ttl": null,
        "pollInterval": POLL_INTERVAL_MS,
    });
    if let Some(m) = status_message(task) {
        v["statusMessage"] = Value::String(m);
    }
    v
}

/// The status message's text; while waiting for input, with how to answer it.
fn status_message(task: &Task) -> Option<String> {
    let text = task
        .status
        .message
        .as_ref()
        .map(|m| m.text())
        .filter(|t| !t.is_empty());
    if status_of(task.status.state) != "input_required" {
        return text;
    }
    let how = format!("Answer with the reply tool (taskId {}).", task.id);
    Some(match text {
        Some(t) => format!("{t}\n{how}"),
        None => how,
    })
}

/// Sorts a JSON-RPC message: the 2025-11-25 task requests are answered here, `initialize`
/// and `tools/list` of a 2025-11-25 client get the announcements, the rest is rmcp's.
pub fn route(msg: &Value, protocol_header: Option<&str>) -> Route {
    let (Some(id), Some(method)) = (msg.get("id"), msg.get("method").and_then(Value::as_str))
    else {
        return Route::Pass;
    };
    if let Some(why) = unfit_params(method, msg) {
        return Route::Answer(id.clone(), Err(super::bad(why)));
    }
    let params = msg.get("params").unwrap_or(&Value::Null);
    let call = match method {
        "tools/call" => match params.get("task") {
            None | Some(Value::Null) => return Route::Pass,
            Some(Value::Object(_)) => create(params),
            Some(_) => Err(super::bad(
                "task must be an object ({} or {\"ttl\": ms}), or left out to call the tool without a task",
            )),
        },
        "tasks/get" => task_id(params).map(TaskCall::Get),
        "tasks/result" => task_id(params).map(TaskCall::Result),
        "tasks/cancel" => task_id(params).map(TaskCall::Cancel),
        "tasks/list" => Ok(TaskCall::List(
            params
                .get("cursor")
                .and_then(Value::as_str)
                .map(str::to_string),
        )),
        "initialize"
            if params.get("protocolVersion").and_then(Value::as_str) == Some(TASKS_VERSION) =>
        {
            return Route::Announce(Announce::Initialize)
        }
        "tools/list" if protocol_header == Some(TASKS_VERSION) => {
            return Route::Announce(Announce::ToolsList)
        }
        _ => return Route::Pass,
    };
    Route::Answer(id.clone(), call)
}

/// Why the parameters of a request to a method rmcp knows do not fit that method, if they
/// do not. rmcp reads such a request as a method it does not know and answers -32601 with
/// the method's name; the client's mistake is its parameters (-32602), and it is told which.
/// Each method is read as rmcp reads it (its own request type), so what passes here passes
/// there.
fn unfit_params(method: &str, msg: &Value) -> Option<String> {
    use rmcp::model as m;
    fn fits<R: serde::de::DeserializeOwned>(msg: &Value) -> Result<(), serde_json::Error> {
        R::deserialize(msg).map(drop)
    }
    let fit = match method {
        "ping" => fits::<m::PingRequest>(msg),
        "initialize" => fits::<m::InitializeRequest>(msg),
        "completion/complete" => fits::<m::CompleteRequest>(msg),
        "prompts/get" => fits::<m::GetPromptRequest>(msg),
        "prompts/list" => fits::<m::ListPromptsRequest>(msg),
        "resources/list" => fits::<m::ListResourcesRequest>(msg),
        "resources/templates/list" => fits::<m::ListResourceTemplatesRequest>(msg),
        "resources/read" => fits::<m::ReadResourceRequest>(msg),
        "tools/call" => fits::<m::CallToolRequest>(msg),
        "tools/list" => fits::<m::ListToolsRequest>(msg),
        _ => Ok(()),
    };
    let e = fit.err()?;
    Some(match msg.get("params") {
        None | Some(Value::Null) => format!("{method} needs params ({e})"),
        Some(_) => format!("the params of {method} do not fit it: {e}"),
    })
}

fn create(params: &Value) -> Result<TaskCall, ErrorData> {
    let tool = params.get("name").and_then(Value::as_str).unwrap_or("");
    if tool != TASK_TOOL {
        return Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("tool '{tool}' does not run as a task (only {TASK_TOOL} does); call it without task"),
            None,
        ));
    }
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(super::bad("arguments must be an object")),
    };
    Ok(TaskCall::Create(arguments))
}

fn task_id(params: &Value) -> Result<String, ErrorData> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| super::bad("taskId is required"))
}

/// An engine error of a `tasks/*` method: a task that does not exist (or is not the
/// caller's) and one that has already ended are invalid parameters there, as MCP asks;
/// the rest as for the tools.
fn task_error(e: A2AError) -> ErrorData {
    match e {
        A2AError::TaskNotFound(_) | A2AError::TaskNotCancelable(_) => {
            ErrorData::invalid_params(e.to_string(), None)
        }
        other => error(other),
    }
}

/// Tasks per `tasks/list` page.
const LIST_PAGE: usize = 50;

/// One page of a listing merged from several agents' stores: each agent's first `size`
/// tasks after the cursor (newest first), and whether it has more. The page is the newest
/// `size` of them all; the next cursor (when any are left) is the page token after its last
/// task, which every store continues from.
fn merge_pages(pages: Vec<(Vec<Task>, bool)>, size: usize) -> (Vec<Task>, Option<String>) {
    let mut more = false;
    let mut tasks = Vec::new();
    for (page, has_more) in pages {
        more |= has_more;
        tasks.extend(page);
    }
    tasks.sort_by(crate::store::newest_first);
    if tasks.len() > size {
        more = true;
        tasks.truncate(size);
    }
    let next = tasks
        .last()
        .filter(|_| more)
        .map(crate::store::page_token_after);
    (tasks, next)
}

/// Adds the task announcements to rmcp's JSON-RPC answer to `initialize` or `tools/list`.
pub fn announce(what: Announce, msg: &mut Value) {
    let Some(result) = msg.get_mut("result").and_then(Value::as_object_mut) else {
        return;
    };
    match what {
        Announce::Initialize => {
            if result.get("protocolVersion").and_then(Value::as_str) != Some(TASKS_VERSION) {
                return;
            }
            if let Some(caps) = result
                .get_mut("capabilities")
                .and_then(Value::as_object_mut)
            {
                caps.insert(
                    "tasks".into(),
                    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
                );
            }
        }
        Announce::ToolsList => {
            let tools = result.get_mut("tools").and_then(Value::as_array_mut);
            for t in tools.into_iter().flatten() {
                if t.get("name").and_then(Value::as_str) == Some(TASK_TOOL) {
                    t["execution"] = json!({"taskSupport": "optional"});
                }
            }
        }
    }
}

/// The layer in front of rmcp's `/mcp` service (see the module's doc).
pub async fn front(State(host): State<McpHost>, req: Request, next: Next) -> Response {
    if req.method() != axum::http::Method::POST {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, host.body_limit).await else {
        return refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            &format!(
                "the request body is larger than {} bytes ([server] body_limit)",
                host.body_limit
            ),
        );
    };
    let parsed = serde_json::from_slice::<Value>(&bytes);
    if let Some(refusal) = malformed(&parts.headers, &parsed) {
        return refusal;
    }
    let msg = parsed.ok();
    if msg.as_ref().is_some_and(starts_or_changes_work) {
        // Charged as a read before its body was read, as a JSON-RPC call is: a call that
        // starts or changes work pays the rest of a request; polls stay cheap.
        let key = parts.extensions.get::<super::super::guard::RateKey>();
        if let Some(refused) = host.agents.first().and_then(|a| a.guard.charge_write(key)) {
            return refused;
        }
    }
    let header = protocol_header(&parts.headers);
    let routed = msg
        .as_ref()
        .map_or(Route::Pass, |m| route(m, header.as_deref()));
    match routed {
        Route::Answer(id, Ok(TaskCall::Result(task))) if accepts_sse(&parts.headers) => {
            let token = msg
                .as_ref()
                .and_then(|m| m.pointer("/params/_meta/progressToken"))
                .cloned();
            host.task_result(id, task, token, &parts).await
        }
        Route::Answer(id, call) => {
            let outcome = match call {
                Ok(call) => host.serve_task(call, &parts).await,
                Err(e) => Err(e),
            };
            json_rpc(id, outcome)
        }
        Route::Announce(what) => {
            let resp = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            announced(what, resp).await
        }
        Route::Pass => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// Whether an MCP message starts or changes work (`start_task`, `reply`, `cancel_task`,
/// `tasks/cancel`): the rest are reads, initialisation and notifications.
fn starts_or_changes_work(msg: &Value) -> bool {
    match msg.get("method").and_then(Value::as_str) {
        Some("tasks/cancel") => true,
        Some("tools/call") => matches!(
            msg.pointer("/params/name").and_then(Value::as_str),
            Some("start_task" | "reply" | "cancel_task")
        ),
        _ => false,
    }
}

/// A JSON body that is not one JSON-RPC message: 400 with the JSON-RPC error that says why
/// (rmcp would answer 415, "unsupported media type", with a line of text). A body of
/// another media type is left to rmcp's 415.
fn malformed(headers: &HeaderMap, parsed: &serde_json::Result<Value>) -> Option<Response> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    if !json {
        return None;
    }
    let why = match parsed {
        Err(e) => {
            return Some(refused(
                StatusCode::BAD_REQUEST,
                -32700,
                &format!("Parse error: the body is not JSON ({e})"),
            ));
        }
        Ok(Value::Array(_)) => {
            "a batch (a JSON array) is not taken: send one JSON-RPC message per request"
        }
        Ok(m) if m.get("jsonrpc").and_then(Value::as_str) != Some("2.0") => {
            "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\" is missing)"
        }
        Ok(m) => shape_error(m)?,
    };
    Some(refused(StatusCode::BAD_REQUEST, -32600, why))
}

/// What makes a JSON-RPC 2.0 object no MCP message, if anything: a request (or
/// notification) needs a string `method`, an `id` that is a string or an integer (null is
/// no id in MCP) and `params`, when given, an object (MCP's parameters are named); anything
/// else must be a response (an `id` and `result` or `error`).
fn shape_error(m: &Value) -> Option<&'static str> {
    match m.get("method") {
        Some(Value::String(_)) => {
            let id_ok = match m.get("id") {
                None | Some(Value::String(_)) => true,
                Some(Value::Number(n)) => n.is_i64() || n.is_u64(),
                Some(_) => false,
            };
            if !id_ok {
                return Some("the id must be a string or an integer (null is not an id in MCP)");
            }
            match m.get("params") {
                None | Some(Value::Null | Value::Object(_)) => None,
                Some(_) => Some("params must be an object (MCP's parameters are named)"),
            }
        }
        Some(_) => Some("the method must be a string"),
        None => {
            let answer =
                m.get("id").is_some() && (m.get("result").is_some() != m.get("error").is_some());
            (!answer).then_some(
                "neither a request (a method) nor a response (an id with result or error)",
            )
        }
    }
}

/// An HTTP refusal with a JSON-RPC error body (`id` null: the request could not be read).
fn refused(status: StatusCode, code: i64, message: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Whether the client takes an answer as server-sent events.
fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

fn protocol_header(headers: &HeaderMap) -> Option<String> {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// A JSON-RPC answer as an `application/json` response.
fn json_rpc(id: Value, outcome: Result<Value, ErrorData>) -> Response {
    let body = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e}),
    };
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// rmcp's answer with the announcements added. The answer is one JSON-RPC response, as
/// JSON or as a server-sent event; it is read until that response and given back as JSON.
/// An answer that is not one (an HTTP error) is passed on as it is.
async fn announced(what: Announce, resp: Response) -> Response {
    if !resp.status().is_success() {
        return resp;
    }
    let sse = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let (parts, body) = resp.into_parts();
    let found = if sse {
        first_sse_response(body).await
    } else {
        axum::body::to_bytes(body, usize::MAX)
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    };
    let Some(mut msg) = found else {
        tracing::warn!("MCP: no JSON-RPC answer to add the task announcements to");
        return Response::from_parts(parts, Body::empty());
    };
    announce(what, &mut msg);
    let mut out = json_rpc_message(msg);
    for (k, v) in parts.headers.iter() {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}

fn json_rpc_message(msg: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        msg.to_string(),
    )
        .into_response()
}

/// The first event of a server-sent event stream whose data is a JSON-RPC response.
async fn first_sse_response(body: Body) -> Option<Value> {
    let mut stream = body.into_data_stream();
    let mut parser = SseParser::new();
    while let Some(chunk) = stream.next().await {
        let chunk: Bytes = chunk.ok()?;
        if let Some(v) = parser
            .push(&chunk)
            .iter()
            .find_map(|e| response_of(&e.data))
        {
            return Some(v);
        }
    }
    None
}

/// The JSON-RPC response an event's data carries, if it is one.
fn response_of(data: &str) -> Option<Value> {
    let v: Value = serde_json::from_str(data).ok()?;
    (v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some())).then_some(v)
}

impl McpHost {
    /// `tasks/result` for a client that takes server-sent events. A task that has ended is
    /// answered at once, as JSON. One that has not is answered as an event stream held open
    /// until it ends: its updates, and every keep-alive interval a line saying what it waits
    /// for, as progress notifications when the request has a progress token (a client resets
    /// its request timeout on them: the TypeScript SDK with `resetTimeoutOnProgress`), else
    /// keep-alive comments; then the result. A task waiting for a person's answer may wait
    /// far longer than a client's request timeout.
    async fn task_result(
        &self,
        rpc_id: Value,
        task_id: String,
        token: Option<Value>,
        parts: &Parts,
    ) -> Response {
        let first = async {
            let who = super::who_of(&self.agent(None)?.guard, parts)?;
            let engine = self.engine_of(&task_id).await?.clone();
            let snap = engine.get_snapshot(&task_id, who.owner()).await;
            Ok::<_, ErrorData>((who, engine, snap.map_err(task_error)?))
        };
        let (who, engine, snap) = match first.await {
            Ok(f) => f,
            Err(e) => return json_rpc(rpc_id, Err(e)),
        };
        if snap.task.status.state.is_terminal() {
            return json_rpc(rpc_id, task_result(&snap, &engine));
        }
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
        let every = self.keepalive;
        tokio::spawn(async move {
            let mut notes = Notes {
                tx,
                token,
                task_id: task_id.clone(),
                progress: 0,
            };
            let outcome = follow_to_end(&engine, &task_id, who.owner(), snap, every, &mut notes);
            let result = match outcome.await {
                Ok(snap) => task_result(&snap, &engine),
                Err(Stop::Gone) => {
                    tracing::debug!(task = %task_id, "MCP client gone; tasks/result stops waiting");
                    return;
                }
                Err(Stop::Engine(e)) => Err(task_error(e)),
            };
            let answer = match result {
                Ok(result) => json!({"jsonrpc": "2.0", "id": rpc_id, "result": result}),
                Err(e) => json!({"jsonrpc": "2.0", "id": rpc_id, "error": e}),
            };
            let _ = notes.tx.send(sse_frame(&answer)).await;
        });
        let body = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv()
                .await
                .map(|b| (Ok::<_, std::convert::Infallible>(b), rx))
        });
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            Body::from_stream(body),
        )
            .into_response()
    }

    /// Answers a task request for the caller the guard admitted.
    async fn serve_task(&self, call: TaskCall, parts: &Parts) -> Result<Value, ErrorData> {
        let who = super::who_of(&self.agent(None)?.guard, parts)?;
        match call {
            TaskCall::Create(arguments) => self.create_task(arguments, &who).await,
            TaskCall::Get(id) => {
                let engine = self.engine_of(&id).await?;
                let snap = engine.get_snapshot(&id, who.owner()).await;
                Ok(task_json(&snap.map_err(task_error)?.task))
            }
            TaskCall::Result(id) => {
                let engine = self.engine_of(&id).await?;
                let snap = until_ended(engine, &id, who.owner()).await;
                task_result(&snap.map_err(task_error)?, engine)
            }
            TaskCall::List(cursor) => self.list_mcp_tasks(cursor.as_deref(), &who).await,
            TaskCall::Cancel(id) => {
                let engine = self.engine_of(&id).await?;
                let task = engine.cancel_from(&id, who.owner(), &who.opts).await;
                Ok(task_json(&task.map_err(task_error)?))
            }
        }
    }

    /// `start_task` as a task: the same arguments and checks as the tool, answered at once
    /// with the task.
    async fn create_task(
        &self,
        arguments: Map<String, Value>,
        who: &super::Who,
    ) -> Result<Value, ErrorData> {
        let p: StartTask = serde_json::from_value(Value::Object(arguments))
            .map_err(|e| super::bad(format!("invalid arguments: {e}")))?;
        super::required(&p.prompt, "prompt")?;
        let state = self.start_agent(&p, who).await?;
        let acc = super::send(&state.engine, super::start_message(&p), who).await?;
        let snap = state
            .engine
            .get_snapshot(&acc.task_id, who.owner())
            .await
            .map_err(error)?;
        Ok(json!({ "task": task_json(&snap.task) }))
    }

    /// The caller's tasks of every agent, newest first (a page holds the newest of them all).
    async fn list_mcp_tasks(
        &self,
        cursor: Option<&str>,
        who: &super::Who,
    ) -> Result<Value, ErrorData> {
        let token = cursor.filter(|c| !c.is_empty()).map(str::to_string);
        let mut pages = Vec::with_capacity(self.agents.len());
        for agent in self.agents.iter() {
            let req = ListTasksRequest {
                page_token: token.clone(),
                page_size: i32::try_from(LIST_PAGE).ok(),
                history_length: Some(0),
                ..ListTasksRequest::default()
            };
            let list = agent
                .engine
                .list(req, who.owner())
                .await
                .map_err(|e| match e {
                    A2AError::InvalidParams(_) if token.is_some() => {
                        super::bad("cursor is not one this host gave")
                    }
                    other => error(other),
                })?;
            pages.push((list.tasks, !list.next_page_token.is_empty()));
        }
        let (tasks, next) = merge_pages(pages, LIST_PAGE);
        let tasks: Vec<Value> = tasks.iter().map(task_json).collect();
        let mut v = json!({ "tasks": tasks });
        if let Some(n) = next {
            v["nextCursor"] = Value::String(n);
        }
        Ok(v)
    }
}

/// Waits until the task has ended: past any question (answered with `reply`), unlike a
/// waited tool call, which answers the question.
async fn until_ended(
    engine: &Engine,
    task_id: &str,
    owner: Option<&str>,
) -> Result<Snapshot, A2AError> {
    let mut snap = engine.get_snapshot(task_id, owner).await?;
    loop {
        if snap.task.status.state.is_terminal() {
            return Ok(snap);
        }
        let after = snap.last_seq;
        snap = engine.wait_settled(task_id, after, owner).await?;
        if snap.last_seq == after {
            // Nothing new and no wake-up to wait for (the task runs elsewhere or waits
            // for input here): read it again in a while.
            tokio::time::sleep(RECHECK).await;
            snap = engine.get_snapshot(task_id, owner).await?;
        }
    }
}

/// Why following a task for `tasks/result` stopped before its end.
enum Stop {
    /// The client closed the response.
    Gone,
    Engine(A2AError),
}

impl From<A2AError> for Stop {
    fn from(e: A2AError) -> Stop {
        Stop::Engine(e)
    }
}

/// What a `tasks/result` stream sends before the result.
struct Notes {
    tx: tokio::sync::mpsc::Sender<Bytes>,
    /// The request's progress token: without one, only keep-alive comments are sent.
    token: Option<Value>,
    task_id: String,
    progress: u64,
}

impl Notes {
    /// A progress notification with `message`, when the request has a progress token.
    async fn progress(&mut self, message: String) -> Result<(), Stop> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        self.progress += 1;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": token,
            "progress": self.progress,
            "message": message,
            "_meta": { RELATED_TASK: { "taskId": self.task_id } },
        }});
        self.send(sse_frame(&note)).await
    }

    /// The keep-alive: a progress notification saying what the task waits for, or a comment.
    async fn keep_alive(&mut self, state: TaskState) -> Result<(), Stop> {
        if self.token.is_some() {
            let line = waiting_line(&self.task_id, state);
            return self.progress(line).await;
        }
        self.send(Bytes::from_static(b": keep-alive\n\n")).await
    }

    async fn send(&self, frame: Bytes) -> Result<(), Stop> {
        self.tx.send(frame).await.map_err(|_| Stop::Gone)
    }
}

/// The line of a keep-alive progress notification: the task's state, and for a task waiting
/// for input, how it is answered.
fn waiting_line(task_id: &str, state: TaskState) -> String {
    let name = super::view::state_name(state);
    match status_of(state) {
        "input_required" => format!(
            "task {task_id} is {name}: waiting for an answer with the reply tool (taskId {task_id})"
        ),
        _ => format!("task {task_id} is {name}"),
    }
}

fn sse_frame(msg: &Value) -> Bytes {
    Bytes::from(format!("data: {msg}\n\n"))
}

/// Follows the task from `snap` until it has ended (past any question, as [`until_ended`]),
/// sending its updates and keep-alives through `notes`.
async fn follow_to_end(
    engine: &Engine,
    task_id: &str,
    owner: Option<&str>,
    mut snap: Snapshot,
    every: std::time::Duration,
    notes: &mut Notes,
) -> Result<Snapshot, Stop> {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        if snap.task.status.state.is_terminal() {
            return Ok(snap);
        }
        let after = snap.last_seq;
        let mut state = snap.task.status.state;
        let mut events = engine.subscribe(task_id, after, owner).await?;
        loop {
            tokio::select! {
                e = events.next() => {
                    let Some(e) = e else { break };
                    if let TaskEvent::Stream(StreamResponse::StatusUpdate(u)) = &e.event {
                        state = u.status.state;
                    }
                    if let Some(line) = EventView::of(&e).progress_line() {
                        notes.progress(line).await?;
                    }
                }
                _ = tick.tick() => notes.keep_alive(state).await?,
            }
        }
        drop(events);
        snap = engine.get_snapshot(task_id, owner).await?;
        if snap.last_seq == after && !snap.task.status.state.is_terminal() {
            // Nothing new and no wake-up to wait for (the task runs elsewhere or waits for
            // input here): read it again in a while, keeping the client's response alive.
            let pause = tokio::time::sleep(RECHECK);
            tokio::pin!(pause);
            loop {
                tokio::select! {
                    () = &mut pause => break,
                    _ = tick.tick() => notes.keep_alive(snap.task.status.state).await?,
                }
            }
        }
    }
}

/// `tasks/result`: what `start_task` answers when waited, tied to its task.
fn task_result(snap: &Snapshot, engine: &Engine) -> Result<Value, ErrorData> {
    let r = task_answer(snap, engine)?;
    let mut v = serde_json::to_value(r)
        .map_err(|e| error(A2AError::Internal(format!("MCP task result: {e}"))))?;
    if let Some(o) = v.as_object_mut() {
        // 2025-11-25 results have no `resultType`.
        o.remove("resultType");
        o.insert(
            "_meta".into(),
            json!({ RELATED_TASK: { "taskId": snap.task.id } }),
        );
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{Message, Part, Role, TaskStatus};

    fn task(state: TaskState, text: Option<&str>) -> Task {
        Task {
            id: "t1".into(),
            context_id: "c1".into(),
            status: TaskStatus {
                state,
                message: text.map(|t| Message {
                    message_id: "m".into(),
                    role: Role::Agent,
                    parts: vec![Part::text(t)],
                    ..Message::default()
                }),
                timestamp: Some("2026-11-28T18:00:05Z".into()),
            },
            metadata: Some(
                json!({"createdAt": "2026-11-28T18:00:00Z"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
            ..Task::default()
        }
    }

    #[test]
    fn every_a2a_state_has_the_mcp_status_a_client_acts_on() {
        use TaskState::*;
        let cases = [
            (Unspecified, "working"),
            (Submitted, "working"),
            (Working, "working"),
            (InputRequired, "input_required"),
            (AuthRequired, "input_required"),
            (Completed, "completed"),
            (Failed, "failed"),
            (Rejected, "failed"),
            (Canceled, "cancelled"),
        ];
        for (a2a, mcp) in cases {
            assert_eq!(status_of(a2a), mcp, "{a2a:?}");
        }
    }

    #[test]
    fn a_task_has_the_2025_11_25_shape() {
        let v = task_json(&task(TaskState::Working, None));
        assert_eq!(v["taskId"], "t1");
        assert_eq!(v["status"], "working");
        assert_eq!(v["createdAt"], "2026-11-28T18:00:00Z");
        assert_eq!(v["lastUpdatedAt"], "2026-11-28T18:00:05Z");
        // `ttl` must be there (null: as long as the host keeps it).
        assert!(v.as_object().unwrap().contains_key("ttl") && v["ttl"].is_null());
        assert_eq!(v["pollInterval"], POLL_INTERVAL_MS);
        assert!(v.get("statusMessage").is_none());
    }

    #[test]
    fn a_waiting_task_says_how_to_answer() {
        let v = task_json(&task(TaskState::InputRequired, Some("May I run ls?")));
        assert_eq!(v["status"], "input_required");
        let m = v["statusMessage"].as_str().unwrap();
        assert!(m.starts_with("May I run ls?") && m.contains("reply") && m.contains("t1"));
        // One plain sentence after the question: no parentheses nested in parentheses.
        assert_eq!(m, "May I run ls?\nAnswer with the reply tool (taskId t1).");
        let v = task_json(&task(TaskState::Failed, Some("boom")));
        assert_eq!(v["statusMessage"], "boom");
    }

    #[test]
    fn task_requests_are_answered_here_and_the_rest_passes() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "start_task", "arguments": {"prompt": "x"}, "task": {"ttl": 60000}}});
        let Route::Answer(id, Ok(TaskCall::Create(arguments))) = route(&call, None) else {
            panic!("not a task call")
        };
        assert_eq!(id, json!(3));
        assert_eq!(arguments["prompt"], "x");
        let plain = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "start_task", "arguments": {"prompt": "x"}}});
        assert_eq!(route(&plain, None), Route::Pass);
        let get =
            json!({"jsonrpc": "2.0", "id": "a", "method": "tasks/get", "params": {"taskId": "t1"}});
        assert_eq!(
            route(&get, None),
            Route::Answer(json!("a"), Ok(TaskCall::Get("t1".into())))
        );
        let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/list"});
        assert_eq!(
            route(&list, None),
            Route::Answer(json!(5), Ok(TaskCall::List(None)))
        );
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(route(&note, None), Route::Pass);
    }

    #[test]
    fn a_bad_task_request_is_refused_with_a_reason() {
        let other = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "get_task", "arguments": {"taskId": "t"}, "task": {}}});
        let Route::Answer(_, Err(e)) = route(&other, None) else {
            panic!("accepted")
        };
        assert_eq!(e.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(e.message.contains("get_task"));
        let no_id = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/cancel", "params": {}});
        let Route::Answer(_, Err(e)) = route(&no_id, None) else {
            panic!("accepted")
        };
        assert_eq!(e.code, ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn only_a_2025_11_25_client_gets_the_announcements() {
        let init = |v: &str| {
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
        };
        assert_eq!(
            route(&init(TASKS_VERSION), None),
            Route::Announce(Announce::Initialize)
        );
        assert_eq!(route(&init("2026-07-28"), None), Route::Pass);
        let tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        assert_eq!(
            route(&tools, Some(TASKS_VERSION)),
            Route::Announce(Announce::ToolsList)
        );
        assert_eq!(route(&tools, Some("2025-06-18")), Route::Pass);

        let mut answer = json!({"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": TASKS_VERSION, "capabilities": {"tools": {}}}});
        announce(Announce::Initialize, &mut answer);
        assert_eq!(
            answer["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        let mut tools = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [
            {"name": "start_task"}, {"name": "get_task"}]}});
        announce(Announce::ToolsList, &mut tools);
        assert_eq!(
            tools["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        assert!(tools["result"]["tools"][1].get("execution").is_none());
    }

    fn listed(id: &str, ts: &str) -> Task {
        let mut t = task(TaskState::Completed, None);
        t.id = id.into();
        t.status.timestamp = Some(ts.into());
        t
    }

    #[test]
    fn a_list_page_holds_the_newest_tasks_of_every_agent() {
        let ids = |t: &[Task]| t.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
        // The first agent has none: the page is the second's, not empty.
        let second = vec![listed("b2", "2026-01-02T00:00:00.000Z")];
        let (page, next) = merge_pages(vec![(vec![], false), (second, false)], 2);
        assert_eq!(ids(&page), ["b2"]);
        assert_eq!(next, None);
        // Both have tasks: the newest two of all, and a cursor after the last of them.
        let first = vec![
            listed("a3", "2026-01-03T00:00:00.000Z"),
            listed("a1", "2026-01-01T00:00:00.000Z"),
        ];
        let second = vec![listed("b2", "2026-01-02T00:00:00.000Z")];
        let (page, next) = merge_pages(vec![(first, false), (second, false)], 2);
        assert_eq!(ids(&page), ["a3", "b2"]);
        assert_eq!(next, Some(crate::store::page_token_after(&page[1])));
        // An agent with more than it listed: a cursor even when the page is not over full.
        let first = vec![listed("a3", "2026-01-03T00:00:00.000Z")];
        let (page, next) = merge_pages(vec![(first, true), (vec![], false)], 1);
        assert_eq!(ids(&page), ["a3"]);
        assert!(next.is_some());
    }

    #[test]
    fn a_waiting_tasks_keep_alive_says_how_to_answer() {
        let line = waiting_line("t1", TaskState::InputRequired);
        assert!(line.contains("input-required") && line.contains("reply") && line.contains("t1"));
        assert_eq!(waiting_line("t1", TaskState::Working), "task t1 is working");
    }

    #[test]
    fn json_rpc_that_is_no_mcp_message_says_why() {
        let refused = [
            json!({"jsonrpc": "2.0", "id": null, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]}),
            json!({"jsonrpc": "2.0", "id": 1, "method": 5}),
            json!({"jsonrpc": "2.0", "id": 1}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}),
        ];
        for m in refused {
            assert!(shape_error(&m).is_some(), "{m}");
        }
        let taken = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 3, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": 1, "message": "m"}}),
        ];
        for m in taken {
            assert_eq!(shape_error(&m), None, "{m}");
        }
    }

    #[test]
    fn params_that_do_not_fit_a_known_method_are_invalid_params() {
        let bad = |m: Value| {
            let Route::Answer(id, Err(e)) = route(&m, None) else {
                panic!("passed: {m}")
            };
            assert_eq!(id, m["id"]);
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{m}");
            e.message.to_string()
        };
        let m = bad(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}));
        assert!(m.starts_with("tools/call needs params"), "{m}");
        let m = bad(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "start_task", "arguments": "prompt"}}));
        assert!(m.contains("tools/call"), "{m}");
        let m = bad(json!({"jsonrpc": "2.0", "id": 3, "method": "initialize"}));
        assert!(m.starts_with("initialize needs params"), "{m}");
        let m = bad(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "start_task", "arguments": {"prompt": "x"}, "task": "notanobject"}}));
        assert!(m.contains("task must be an object"), "{m}");
        // What fits passes on to rmcp.
        let good = [
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "start_task", "arguments": {"prompt": "x"}, "_meta": {"progressToken": 1}}}),
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                "params": {"name": "start_task", "arguments": {"prompt": "x"}, "task": null}}),
            json!({"jsonrpc": "2.0", "id": 9, "method": "no/such/method"}),
        ];
        for m in good {
            assert_eq!(route(&m, None), Route::Pass, "{m}");
        }
    }

    #[tokio::test]
    async fn the_answer_is_read_from_a_server_sent_event() {
        let stream = ": ping\n\nid: 0\nretry: 3000\ndata: \n\n\
            data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
            data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
        let v = first_sse_response(Body::from(stream)).await.unwrap();
        assert_eq!(v["id"], 1);
        assert!(first_sse_response(Body::from("data: {}\n\n"))
            .await
            .is_none());
    }
}
