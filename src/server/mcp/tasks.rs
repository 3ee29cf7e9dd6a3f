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

use super::{error, task_answer, McpHost, StartTask};
use crate::client::sse::SseParser;
use crate::engine::Engine;
use crate::protocol::v1::{ListTasksRequest, Task, TaskState};
use crate::protocol::A2AError;
use crate::store::Snapshot;

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
    let how = format!("answer with the reply tool (taskId {})", task.id);
    Some(match text {
        Some(t) => format!("{t} ({how})"),
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
    let params = msg.get("params").unwrap_or(&Value::Null);
    let call = match method {
        "tools/call" if params.get("task").is_some_and(Value::is_object) => create(params),
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
    let header = protocol_header(&parts.headers);
    let routed = msg.map_or(Route::Pass, |m| route(&m, header.as_deref()));
    match routed {
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
        Ok(_) => return None,
    };
    Some(refused(StatusCode::BAD_REQUEST, -32600, why))
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
                task_result(&snap.map_err(task_error)?)
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

/// `tasks/result`: what `start_task` answers when waited, tied to its task.
fn task_result(snap: &Snapshot) -> Result<Value, ErrorData> {
    let r = task_answer(snap)?;
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
