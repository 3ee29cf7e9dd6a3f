//! The MCP binding at `/mcp` with rmcp's own client over Streamable HTTP: the tools, a task
//! started over MCP being an ordinary A2A task, approvals answered with `reply`, cancel
//! stopping the program and its children, owners, and bad arguments; and `start_task` as an
//! MCP 2025-11-25 task, with the messages written by hand (rmcp speaks a later form of tasks).

use agent_host::settings::{Credential, Secret, Security};
use rmcp::model::{CallToolRequestParams, ErrorCode};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceError, ServiceExt};
use serde_json::{json, Value};

use crate::common::*;

type Mcp = RunningService<RoleClient, ()>;

/// An MCP client of the test server, with a bearer token when given.
async fn connect(s: &TestServer, token: Option<&str>) -> Result<Mcp, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", s.base));
    if let Some(t) = token {
        cfg = cfg.auth_header(t);
    }
    let transport = StreamableHttpClientTransport::with_client(reqwest013::Client::new(), cfg);
    ().serve(transport).await.map_err(|e| e.to_string())
}

/// Two callers' sessions, with the tokens the ownership tests configure.
async fn alice_and_bob(s: &TestServer) -> (Mcp, Mcp) {
    let alice = connect(s, Some("alice-token-0123456789"))
        .await
        .expect("alice");
    let bob = connect(s, Some("bob-token-0123456789")).await.expect("bob");
    (alice, bob)
}

/// A test server whose callers are `names`, each with the bearer token
/// `NAME-token-0123456789`.
async fn server_of(names: &[&str]) -> TestServer {
    let credentials = names
        .iter()
        .map(|name| Credential {
            name: (*name).into(),
            secret: Secret::Bearer(format!("{name}-token-0123456789")),
        })
        .collect();
    TestServer::with(Options {
        security: Security {
            credentials,
            ..Security::default()
        },
        ..Options::default()
    })
    .await
}

/// A raw `POST /mcp` of `msg` in protocol `version`, as a client that takes JSON or SSE.
async fn post_mcp(s: &TestServer, version: &str, msg: &Value) -> reqwest::Response {
    s.client
        .post(format!("{}/mcp", s.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .json(msg)
        .send()
        .await
        .expect("send")
}

async fn call(c: &Mcp, tool: &'static str, args: Value) -> Result<Value, ServiceError> {
    let args = args.as_object().cloned().unwrap_or_default();
    let r = c
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await?;
    assert_ne!(r.is_error, Some(true), "{tool} answered an error: {r:?}");
    let text = r
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone());
    assert!(
        text.is_some_and(|t| !t.is_empty()),
        "{tool}: no text summary"
    );
    Ok(r.structured_content.expect("structured content"))
}

async fn ok(c: &Mcp, tool: &'static str, args: Value) -> Value {
    call(c, tool, args).await.expect("tool call")
}

fn mcp_error(e: ServiceError) -> rmcp::ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        other => panic!("not an MCP error: {other}"),
    }
}

/// Polls `get_task` (following its events) until `done` holds for the task and the events
/// seen so far; returns both.
async fn follow(c: &Mcp, id: &str, done: impl Fn(&Value, &[Value]) -> bool) -> (Value, Vec<Value>) {
    let mut after = 0u64;
    let mut events = Vec::new();
    let task = eventually(
        &format!("task {id} gets where the test waits"),
        WAIT,
        async || {
            let r = ok(c, "get_task", json!({"taskId": id, "afterEvent": after})).await;
            events.extend(r["events"].as_array().cloned().unwrap_or_default());
            after = r["lastEvent"].as_u64().expect("lastEvent");
            ready(done(&r["task"], &events), r["task"].clone())
        },
    )
    .await;
    (task, events)
}

#[tokio::test]
async fn tools_are_listed_with_their_schemas() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        let tools = c.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        for want in [
            "start_task",
            "get_task",
            "list_tasks",
            "reply",
            "cancel_task",
            "get_changes",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        let start = tools.iter().find(|t| t.name == "start_task").unwrap();
        let schema = serde_json::to_value(&start.input_schema).unwrap();
        assert_eq!(schema["required"], json!(["prompt"]), "{schema}");
        for field in [
            "agent",
            "contextId",
            "cwd",
            "baseRef",
            "budget",
            "approvals",
            "wait",
        ] {
            assert!(
                schema["properties"].get(field).is_some(),
                "{field} not in {schema}"
            );
        }
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_task_started_and_waited_for_is_an_ordinary_task() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        let t = ok(
            &c,
            "start_task",
            json!({"prompt": "say hello", "wait": true}),
        )
        .await;
        assert_eq!(t["state"], "completed", "{t}");
        assert!(t["answer"].as_str().is_some_and(|a| !a.is_empty()), "{t}");
        let id = t["id"].as_str().unwrap();
        // The same task over A2A.
        let a2a = s.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(
            a2a["result"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{a2a}"
        );
        assert_eq!(a2a["result"]["contextId"], t["contextId"]);
        // A follow-up in the same context.
        let t2 = ok(
            &c,
            "start_task",
            json!({"prompt": "again", "contextId": t["contextId"], "wait": true}),
        )
        .await;
        assert_eq!(t2["contextId"], t["contextId"]);
        let list = ok(&c, "list_tasks", json!({"contextId": t["contextId"]})).await;
        assert_eq!(list["tasks"].as_array().unwrap().len(), 2, "{list}");
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

/// A waited call with a progress token gets the task's updates as progress notifications,
/// each line once (before: "task is working" for each `working`, and the answer as text, as
/// result and as final status: three times).
#[tokio::test]
async fn a_waited_start_sends_each_progress_line_once() {
    limit(async {
        let s = TestServer::start().await;
        let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "start_task", "arguments": {"prompt": "say hello", "wait": true},
            "_meta": {"progressToken": "p-1"}}});
        let resp = post_mcp(&s, "2025-06-18", &msg).await;
        assert_eq!(resp.status(), 200);
        let body = resp.text().await.expect("body");
        let messages: Vec<Value> = body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect();
        let lines: Vec<&str> = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter_map(|m| m["params"]["message"].as_str())
            .collect();
        assert!(!lines.is_empty(), "{body}");
        let unique: std::collections::HashSet<&&str> = lines.iter().collect();
        assert_eq!(unique.len(), lines.len(), "a line repeated: {lines:#?}");
        assert!(
            messages
                .iter()
                .any(|m| m["id"] == 3 && m["result"].is_object()),
            "{body}"
        );
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_task_started_without_waiting_is_followed_with_get_task() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        let t = ok(&c, "start_task", json!({"prompt": "hello slow"})).await;
        // Answered at once, before the turn has started: the agent is named all the same.
        assert_eq!(t["agent"], "demo", "{t}");
        let id = t["id"].as_str().unwrap().to_string();
        let (task, events) = follow(&c, &id, |t, _| t["state"] == "completed").await;
        assert!(task["answer"].as_str().is_some_and(|a| !a.is_empty()));
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "events out of order: {seqs:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| e["text"].as_str().is_some_and(|t| t.contains("Bash"))),
            "no tool use among {events:?}"
        );
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn get_task_lists_at_most_max_events_and_none_for_0() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        // The schema lets 0 through; it means no events.
        let tools = c.list_all_tools().await.expect("tools/list");
        let get = tools.iter().find(|t| t.name == "get_task").unwrap();
        let schema = serde_json::to_value(&get.input_schema).unwrap();
        assert_eq!(schema["properties"]["maxEvents"]["minimum"], 0, "{schema}");
        let t = ok(&c, "start_task", json!({"prompt": "hello", "wait": true})).await;
        let id = t["id"].as_str().unwrap();
        for (max, want) in [(0, 0), (2, 2)] {
            let r = ok(
                &c,
                "get_task",
                json!({"taskId": id, "afterEvent": 0, "maxEvents": max}),
            )
            .await;
            assert_eq!(r["events"].as_array().map(Vec::len), Some(want), "{r}");
            assert_eq!(r["lastEvent"], want, "{r}");
        }
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_approval_is_answered_with_reply() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        let t = ok(
            &c,
            "start_task",
            json!({"prompt": "approval please", "wait": true}),
        )
        .await;
        assert_eq!(t["state"], "input-required", "{t}");
        assert_eq!(t["question"]["approvalId"], "appr-1", "{t}");
        let how = t["question"]["answer"].as_str().unwrap_or_default();
        assert!(
            how.contains("reply tool") && !how.contains("data part"),
            "{t}"
        );
        let id = t["id"].as_str().unwrap();
        let done = ok(&c, "reply", json!({"taskId": id, "decision": "allow"})).await;
        assert_eq!(done["state"], "completed", "{done}");
        assert_eq!(done["id"], id);
        // A reply to a task that no longer waits: the engine's error, as an MCP error.
        let e = call(&c, "reply", json!({"taskId": id, "text": "yes"}))
            .await
            .map(|v| panic!("answered {v}"))
            .unwrap_err();
        let e = mcp_error(e);
        assert!(e.message.contains("already"), "{e:?}");
        // In the tools' words: continue with start_task, not with an A2A message.
        assert!(
            e.message.contains("start_task") && !e.message.contains("without taskId"),
            "{e:?}"
        );
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn cancel_task_stops_the_program_and_its_children() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        let t = ok(&c, "start_task", json!({"prompt": "grandchild"})).await;
        let id = t["id"].as_str().unwrap().to_string();
        let pid_in = |events: &[Value]| {
            events
                .iter()
                .find_map(|e| grandchild_pid(e["text"].as_str()?))
        };
        let (_, events) = follow(&c, &id, |_, ev| pid_in(ev).is_some()).await;
        let pid = pid_in(&events).unwrap();
        assert!(process_alive(pid));
        let canceled = ok(&c, "cancel_task", json!({"taskId": id})).await;
        assert_eq!(canceled["state"], "canceled", "{canceled}");
        process_ends("the task's grandchild ends with cancel_task", pid).await;
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn callers_see_only_their_own_tasks_and_anonymous_callers_none() {
    limit(async {
        let s = server_of(&["alice", "bob"]).await;
        assert!(
            connect(&s, None).await.is_err(),
            "no credentials, yet connected"
        );
        assert!(connect(&s, Some("wrong-token-0123456789")).await.is_err());
        let (alice, bob) = alice_and_bob(&s).await;
        let t = ok(
            &alice,
            "start_task",
            json!({"prompt": "hello", "wait": true}),
        )
        .await;
        let id = t["id"].as_str().unwrap();
        let e = call(&bob, "get_task", json!({"taskId": id}))
            .await
            .unwrap_err();
        let e = mcp_error(e);
        assert!(e.message.contains(id), "{e:?}");
        let e = call(&bob, "cancel_task", json!({"taskId": id}))
            .await
            .unwrap_err();
        assert!(mcp_error(e).message.contains(id));
        let bobs = ok(&bob, "list_tasks", json!({})).await;
        assert_eq!(bobs["tasks"], json!([]), "{bobs}");
        let alices = ok(&alice, "list_tasks", json!({})).await;
        assert_eq!(alices["tasks"][0]["id"], id, "{alices}");
        // Alice's task over A2A, with Alice's token: the same owner.
        let a2a: Value = s
            .client
            .post(&s.base)
            .bearer_auth("alice-token-0123456789")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": id}}))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(a2a["result"]["id"], id, "{a2a}");
        alice.cancel().await.ok();
        bob.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn get_changes_of_another_callers_or_an_unknown_context_is_not_found() {
    limit(async {
        let s = server_of(&["alice", "bob"]).await;
        let (alice, bob) = alice_and_bob(&s).await;
        let t = ok(
            &alice,
            "start_task",
            json!({"prompt": "hello", "wait": true}),
        )
        .await;
        let context = t["contextId"].as_str().unwrap();
        // Alice's own context, whose turn changed nothing: no changes.
        let own = ok(&alice, "get_changes", json!({"contextId": context})).await;
        assert_eq!(own, json!({"changes": false}));
        // Bob asking for Alice's context, and for one that does not exist: not found, the
        // same error (only the id named differs).
        let not_found = async |context: &str| {
            let e = call(&bob, "get_changes", json!({"contextId": context}))
                .await
                .map(|v| panic!("answered {v}"))
                .unwrap_err();
            let e = mcp_error(e);
            (e.code, e.message.replace(context, "ID"), e.data)
        };
        let others = not_found(context).await;
        let unknown = not_found("no-such-context").await;
        assert_eq!(others.0, ErrorCode(-32001), "{others:?}");
        assert!(others.1.contains("not found"), "{others:?}");
        assert_eq!(others, unknown);
        alice.cancel().await.ok();
        bob.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_bad_argument_is_a_clear_error_and_starts_nothing() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        let cases = [
            (
                json!({"prompt": "x", "agent": "no-such-agent"}),
                "no-such-agent",
            ),
            (json!({"prompt": "   "}), "prompt"),
            (json!({"prompt": "x", "promt": "typo"}), "promt"),
            (
                json!({"prompt": "x", "cwd": "/definitely/not/allowed"}),
                "cwd",
            ),
        ];
        for (args, names) in cases {
            let e = call(&c, "start_task", args.clone()).await.unwrap_err();
            let e = mcp_error(e);
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{args}: {e:?}");
            assert!(e.message.contains(names), "{args}: {}", e.message);
        }
        let e = call(&c, "reply", json!({"taskId": "t"})).await.unwrap_err();
        assert_eq!(mcp_error(e).code, ErrorCode::INVALID_PARAMS);
        let list = s.rpc("ListTasks", json!({})).await;
        assert_eq!(
            list["result"]["tasks"],
            json!([]),
            "a task was started: {list}"
        );
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn mcp_can_be_turned_off() {
    limit(async {
        let s = TestServer::with(Options {
            mcp: false,
            ..Options::default()
        })
        .await;
        assert!(connect(&s, None).await.is_err());
        let r = s
            .client
            .post(format!("{}/mcp", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        s.shutdown().await;
    })
    .await;
}

/// The rate limit charges MCP as it charges A2A: a poll (`get_task`, `list_tasks`,
/// `tasks/get`) costs a tenth of a request, so a caller following its tasks is not refused
/// (before, every `POST /mcp` cost a whole request, and the SDK's `tasks/get` every 500 ms
/// used up the default limit with ten tasks followed); a call that starts work still costs
/// a whole one.
#[tokio::test]
async fn mcp_polls_cost_a_tenth_of_the_rate_limit_and_starts_a_whole_request() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: agent_host::settings::HostLimits {
                rate_per_minute: 12,
                ..agent_host::settings::HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        for i in 0..40 {
            let params = json!({"name": "list_tasks", "arguments": {}});
            let r = mcp_2025(&s, "tools/call", params).await;
            assert!(r.get("error").is_none(), "poll {i}: {r}");
        }
        let mut refused = None;
        for i in 0..12 {
            let msg = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "start_task", "arguments": {"prompt": "hello"}}});
            let r = post_mcp(&s, "2025-11-25", &msg).await;
            if r.status() == 429 {
                assert!(r.headers().contains_key("retry-after"));
                refused = Some(i);
                break;
            }
            assert_eq!(r.status(), 200, "start {i}");
        }
        let refused = refused.expect("12 starts at a limit of 12 after 40 polls: one refused");
        assert!(
            refused >= 6,
            "starts refused too early: the polls cost more than a tenth ({refused})"
        );
        s.shutdown().await;
    })
    .await;
}

/// `agent-host mcp --url URL` with its three streams piped and no credentials.
fn spawn_bridge(url: &str) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(["mcp", "--url", url])
        .env_remove("A2A_TOKEN")
        .env_remove("AGENT_HOST_MCP_API_KEY")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("agent-host mcp")
}

/// The stdio bridge run as a pipe (its input written and closed): what it prints, what it
/// says on stderr, and whether it exited 0.
async fn bridge_piped(url: &str, input: &str) -> (String, String, bool) {
    use tokio::io::AsyncWriteExt;
    let mut bridge = spawn_bridge(url);
    let mut stdin = bridge.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).await.expect("write");
    drop(stdin);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        bridge.wait_with_output(),
    )
    .await
    .expect("the bridge ends after its input")
    .expect("output");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// The bridge speaks to its client in its own terms: a host that refused the credentials
/// names the bridge's options (the client never sees `WWW-Authenticate`), and a host that
/// could not be reached fails the bridge (exit status and stderr) also when the client
/// had closed its input first (a pipe: before, it exited 0 and said nothing).
#[tokio::test]
async fn the_stdio_bridge_says_what_to_do_about_a_refusal_and_fails_on_a_lost_host_after_a_pipe() {
    limit(async {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "pipe", "version": "1"}}});
        let s = server_of(&["alice"]).await;
        let (out, _, _) = bridge_piped(&s.base, &format!("{init}\n")).await;
        let answer: Value = serde_json::from_str(out.trim()).expect("one JSON line");
        let msg = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("--token") && msg.contains("HTTP 401"),
            "{answer}"
        );
        s.shutdown().await;

        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let (out, err, success) = bridge_piped(&url, &format!("{init}\n")).await;
        let answer: Value = serde_json::from_str(out.trim()).expect("one JSON line");
        assert_eq!(answer["error"]["code"], -32603, "{out}");
        assert!(!success, "exit 0 with the host out of reach: {err}");
        assert!(err.contains("could not be reached"), "{err}");
    })
    .await;
}

/// The MCP route takes POST only; GET (a server-started stream) and DELETE (a session's end)
/// get the host's 405 with `Allow: POST` and its small JSON body, as every route does.
#[tokio::test]
async fn mcp_answers_other_methods_with_the_hosts_405() {
    limit(async {
        let s = TestServer::start().await;
        for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
            let r = s
                .client
                .request(method.clone(), format!("{}/mcp", s.base))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 405, "{method}");
            assert_eq!(r.headers()["allow"], "POST");
            let body: Value = r.json().await.expect("a JSON body");
            assert_eq!(body["error"], "Method Not Allowed", "{body}");
        }
        s.shutdown().await;
    })
    .await;
}

/// A `tools/call` of `start_task` as a web page would send it, with these extra headers;
/// the HTTP status and whether a task was started.
async fn page_call(s: &TestServer, headers: &[(&str, &str)]) -> (u16, bool) {
    let mut req = s
        .client
        .post(format!("{}/mcp", s.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "start_task", "arguments": {"prompt": "hello"}}}));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    // The answer (an SSE stream) ends after the tool has run.
    let _ = resp.text().await;
    let list = s.rpc("ListTasks", json!({})).await;
    let started = list["result"]["tasks"]
        .as_array()
        .is_some_and(|t| !t.is_empty());
    (status, started)
}

#[tokio::test]
async fn pages_of_other_hosts_and_origins_cannot_start_tasks() {
    limit(async {
        // DNS rebinding: a page of evil.example whose name now points at 127.0.0.1.
        let rebound = [("host", "evil.example:41242")];
        let cross_origin = [("origin", "https://evil.example")];
        let s = TestServer::start().await;
        assert_eq!(page_call(&s, &rebound).await, (403, false));
        assert_eq!(page_call(&s, &cross_origin).await, (403, false));
        s.shutdown().await;
        // With the checks opened up, the same requests start a task: the checks are what
        // stopped them.
        let open = Security {
            allowed_hosts: vec!["*".into()],
            allowed_origins: vec!["*".into()],
            ..Security::default()
        };
        for headers in [&rebound[..], &cross_origin[..]] {
            let s = TestServer::with(Options {
                security: open.clone(),
                ..Options::default()
            })
            .await;
            let (status, started) = page_call(&s, headers).await;
            assert_eq!(status, 200, "{headers:?}");
            assert!(started, "{headers:?}");
            s.shutdown().await;
        }
    })
    .await;
}

/// One JSON-RPC request to `/mcp` as an MCP 2025-11-25 client sends it (rmcp's client speaks
/// the later form of tasks, so these tests write the messages themselves); the whole
/// JSON-RPC answer, read from a JSON body or from the server-sent event that carries it.
async fn mcp_2025(s: &TestServer, method: &str, params: Value) -> Value {
    mcp_2025_at(&s.client, &s.base, method, params).await
}

/// [`mcp_2025`] to the host at `base`.
async fn mcp_2025_at(client: &reqwest::Client, base: &str, method: &str, params: Value) -> Value {
    // `initialize` names its version in its body, and the header must agree.
    let version = params["protocolVersion"].as_str().unwrap_or("2025-11-25");
    let resp = client
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 200, "{method}");
    let body = resp.text().await.expect("body");
    if let Ok(v) = serde_json::from_str::<Value>(&body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("id").is_some())
        .unwrap_or_else(|| panic!("{method}: no answer in {body}"))
}

/// `tasks/get` until the status is `want`.
async fn mcp_task_until(s: &TestServer, id: &str, want: &str) -> Value {
    eventually(&format!("MCP task {id} is {want}"), WAIT, async || {
        let t = mcp_2025(s, "tasks/get", json!({"taskId": id})).await;
        ready(t["result"]["status"] == want, t["result"].clone())
    })
    .await
}

async fn start_as_task(s: &TestServer, prompt: &str) -> String {
    let created = mcp_2025(
        s,
        "tools/call",
        json!({"name": "start_task", "arguments": {"prompt": prompt}, "task": {"ttl": 60000}}),
    )
    .await;
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert!(task.get("ttl").is_some(), "ttl must be there: {created}");
    task["taskId"].as_str().expect("taskId").to_string()
}

#[tokio::test]
async fn start_task_runs_as_an_mcp_task_that_is_the_a2a_task() {
    limit(async {
        let s = TestServer::start().await;
        // A 2025-11-25 client is told about tasks; an older one is not.
        let init = |v: &str| {
            json!({"protocolVersion": v, "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}})
        };
        let i = mcp_2025(&s, "initialize", init("2025-11-25")).await;
        assert_eq!(
            i["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({}),
            "{i}"
        );
        let old = mcp_2025(&s, "initialize", init("2025-06-18")).await;
        assert!(
            old["result"]["capabilities"].get("tasks").is_none(),
            "{old}"
        );
        let tools = mcp_2025(&s, "tools/list", json!({})).await;
        let start = tools["result"]["tools"]
            .as_array()
            .and_then(|t| t.iter().find(|t| t["name"] == "start_task"))
            .cloned()
            .expect("start_task");
        assert_eq!(start["execution"]["taskSupport"], "optional", "{start}");

        let id = start_as_task(&s, "say hello").await;
        let done = mcp_task_until(&s, &id, "completed").await;
        assert!(done["lastUpdatedAt"].is_string() && done["createdAt"].is_string());
        let r = mcp_2025(&s, "tasks/result", json!({"taskId": id})).await;
        let sc = &r["result"]["structuredContent"];
        assert_eq!(
            (sc["id"].as_str(), &sc["state"]),
            (Some(id.as_str()), &json!("completed"))
        );
        assert!(sc["answer"].as_str().is_some_and(|a| !a.is_empty()), "{r}");
        assert_eq!(
            r["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
            json!(id)
        );
        // The same task over A2A, and in the caller's list.
        let a2a = s.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(a2a["result"]["status"]["state"], "TASK_STATE_COMPLETED");
        let list = mcp_2025(&s, "tasks/list", json!({})).await;
        assert!(
            list["result"]["tasks"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t["taskId"] == json!(id))),
            "{list}"
        );
        // An ended task cannot be canceled; an unknown one is not found: invalid params.
        let again = mcp_2025(&s, "tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(again["error"]["code"], -32602, "{again}");
        let unknown = mcp_2025(&s, "tasks/get", json!({"taskId": "no-such-task"})).await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        // Only start_task runs as a task.
        let other = mcp_2025(
            &s,
            "tools/call",
            json!({"name": "list_tasks", "arguments": {}, "task": {}}),
        )
        .await;
        assert_eq!(other["error"]["code"], -32601, "{other}");
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn tasks_list_pages_hold_the_newest_tasks_of_every_agent() {
    limit(async {
        let host = HostProcess::spawn(&[("AGENT_ADAPTER", "demo,jsonl")], &[]).await;
        let client = reqwest::Client::new();
        let start = |agent: &'static str| {
            mcp_2025_at(
                &client,
                &host.base,
                "tools/call",
                json!({"name": "start_task", "arguments": {"prompt": "hello", "agent": agent, "wait": true}}),
            )
        };
        // Tasks on the second agent only: the first page has them.
        let on_jsonl = start("jsonl").await;
        let jsonl_id = on_jsonl["result"]["structuredContent"]["id"].clone();
        assert!(jsonl_id.is_string(), "{on_jsonl}");
        let list = mcp_2025_at(&client, &host.base, "tasks/list", json!({})).await;
        let ids = |list: &Value| -> Vec<Value> {
            let tasks = list["result"]["tasks"].as_array().cloned().unwrap_or_default();
            tasks.iter().map(|t| t["taskId"].clone()).collect()
        };
        assert_eq!(ids(&list), std::slice::from_ref(&jsonl_id), "{list}");
        assert!(list["result"].get("nextCursor").is_none(), "{list}");
        // One on each: newest first, whichever agent ran it.
        let on_demo = start("demo").await;
        let demo_id = on_demo["result"]["structuredContent"]["id"].clone();
        let list = mcp_2025_at(&client, &host.base, "tasks/list", json!({})).await;
        assert_eq!(ids(&list), [demo_id, jsonl_id], "{list}");
    })
    .await;
}

#[tokio::test]
async fn an_mcp_task_waits_for_input_answered_with_reply() {
    limit(async {
        let s = TestServer::start().await;
        let id = start_as_task(&s, "approval please").await;
        let waiting = mcp_task_until(&s, &id, "input_required").await;
        let message = waiting["statusMessage"].as_str().unwrap_or_default();
        assert!(message.contains("reply"), "{waiting}");
        // tasks/result waits past the question until the end.
        let result = mcp_2025(&s, "tasks/result", json!({"taskId": id}));
        let answer = async {
            time_passes(std::time::Duration::from_millis(100)).await;
            mcp_2025(
                &s,
                "tools/call",
                json!({"name": "reply", "arguments": {"taskId": id, "decision": "allow", "wait": false}}),
            )
            .await
        };
        let (r, replied) = tokio::join!(result, answer);
        assert!(replied.get("result").is_some(), "{replied}");
        assert_eq!(r["result"]["structuredContent"]["state"], "completed", "{r}");
        s.shutdown().await;
    })
    .await;
}

/// The JSON-RPC messages of a `tasks/result` answered as server-sent events, as they come.
struct McpEvents {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    parser: agent_host::client::sse::SseParser,
    queued: std::collections::VecDeque<Value>,
}

impl McpEvents {
    /// The next message, within `within`.
    async fn next(&mut self, within: std::time::Duration) -> Option<Value> {
        use futures::StreamExt;
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(m) = self.queued.pop_front() {
                return Some(m);
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .ok()??
                .ok()?;
            for e in self.parser.push(&chunk) {
                if let Ok(v) = serde_json::from_str::<Value>(&e.data) {
                    self.queued.push_back(v);
                }
            }
        }
    }
}

#[tokio::test]
async fn tasks_result_of_a_waiting_task_sends_progress_until_it_ends() {
    limit(async {
        let s = TestServer::start().await;
        let id = start_as_task(&s, "approval please").await;
        mcp_task_until(&s, &id, "input_required").await;
        // A client with a progress token: its request timeout is reset by each progress
        // notification, so a person may take longer than the timeout to answer.
        let resp = s
            .client
            .post(format!("{}/mcp", s.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result",
                "params": {"taskId": id, "_meta": {"progressToken": "wait-1"}}}))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 200);
        let kind = resp.headers()["content-type"].to_str().unwrap_or("").to_string();
        assert!(kind.starts_with("text/event-stream"), "answered as {kind}");
        let mut events = McpEvents {
            body: Box::pin(resp.bytes_stream()),
            parser: agent_host::client::sse::SseParser::new(),
            queued: Default::default(),
        };
        // Keep-alives while nobody answers (every 200 ms in the tests), each one more.
        let mut progress = Vec::new();
        while progress.len() < 3 {
            let m = events
                .next(std::time::Duration::from_secs(5))
                .await
                .expect("a progress notification while the task waits");
            assert_eq!(m["method"], "notifications/progress", "{m}");
            assert_eq!(m["params"]["progressToken"], "wait-1", "{m}");
            assert_eq!(
                m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                json!(id)
            );
            progress.push(m["params"]["progress"].as_f64().expect("progress"));
            let line = m["params"]["message"].as_str().unwrap_or_default();
            assert!(line.contains("reply"), "{m}");
        }
        assert!(progress.windows(2).all(|w| w[0] < w[1]), "{progress:?}");
        let replied = mcp_2025(
            &s,
            "tools/call",
            json!({"name": "reply", "arguments": {"taskId": id, "decision": "allow", "wait": false}}),
        )
        .await;
        assert!(replied.get("result").is_some(), "{replied}");
        let answer = loop {
            let m = events.next(WAIT).await.expect("the result");
            if m.get("id").is_some() {
                break m;
            }
        };
        assert_eq!(answer["id"], 9);
        assert_eq!(
            answer["result"]["structuredContent"]["state"], "completed",
            "{answer}"
        );
        s.shutdown().await;
    })
    .await;
}

/// The official TypeScript SDK (`tests/clients/mcp_js_long_wait.mjs`) runs `start_task` as
/// an MCP task, with a request timeout of 2 s, and answers the approval after 4 s: its
/// `tasks/result` lives on the progress notifications. Needs node and `tests/clients`'s
/// node_modules (`npm ci` there); skipped without them, a failure under `CI=true`.
#[tokio::test]
async fn the_typescript_sdk_waits_past_its_request_timeout_for_a_reply() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients");
    if !dir.join("node_modules/@modelcontextprotocol/sdk").is_dir() {
        let why = "no @modelcontextprotocol/sdk in tests/clients/node_modules (npm ci there)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("\n*** SKIPPED: {why} ***\n");
        return;
    }
    limit(async {
        let s = TestServer::start().await;
        let out = tokio::process::Command::new("node")
            .arg("mcp_js_long_wait.mjs")
            .arg(&s.base)
            .current_dir(&dir)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
            .await
            .expect("the SDK client ends")
            .expect("node runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{text}");
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_mcp_task_is_answered_for_by_the_next_host_on_the_same_database() {
    limit(async {
        let db = tempfile::tempdir().expect("tempdir");
        let path = db.path().join("tasks.db");
        let s = TestServer::with(Options {
            db: Some(path.clone()),
            ..Options::default()
        })
        .await;
        let id = start_as_task(&s, "say hello").await;
        mcp_task_until(&s, &id, "completed").await;
        s.shutdown().await;
        // Nothing of the task was kept beside the engine's: the next host knows it.
        let s = TestServer::with(Options {
            db: Some(path),
            ..Options::default()
        })
        .await;
        let t = mcp_2025(&s, "tasks/get", json!({"taskId": id})).await;
        assert_eq!(t["result"]["status"], "completed", "{t}");
        let r = mcp_2025(&s, "tasks/result", json!({"taskId": id})).await;
        assert_eq!(
            r["result"]["structuredContent"]["state"], "completed",
            "{r}"
        );
        s.shutdown().await;
    })
    .await;
}

/// `agent-host mcp` as a client that writes its messages and closes its input at once (a
/// pipe): each request is answered, the ones after `initialize` sent once it has answered,
/// and the bridge ends by itself.
#[tokio::test]
async fn the_stdio_bridge_answers_what_a_pipe_asked_before_it_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    limit(async {
        let s = TestServer::start().await;
        let mut bridge = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["mcp", "--url", &s.base])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("agent-host mcp");
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "pipe", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "start_task", "arguments": {"prompt": "say hello", "wait": true}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        ];
        let mut stdin = bridge.stdin.take().unwrap();
        for l in &lines {
            stdin.write_all(format!("{l}\n").as_bytes()).await.unwrap();
        }
        drop(stdin);
        let mut out = String::new();
        bridge
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .await
            .unwrap();
        assert!(bridge.wait().await.unwrap().success());
        let answers: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .filter(|v: &Value| v.get("id").is_some())
            .collect();
        let by_id = |id: i64| answers.iter().find(|a| a["id"] == id).cloned();
        assert!(
            by_id(1).is_some_and(|a| a["result"]["protocolVersion"].is_string()),
            "{out}"
        );
        let started = by_id(2).expect("the task's answer");
        assert_eq!(
            started["result"]["structuredContent"]["state"], "completed",
            "{out}"
        );
        assert!(
            by_id(3).is_some_and(|a| a["result"]["tools"].is_array()),
            "{out}"
        );
        s.shutdown().await;
    })
    .await;
}

/// `agent-host mcp` whose host cannot be reached, with a client that keeps its input open:
/// the request gets an error, and the bridge exits at once (non-zero, saying why on stderr)
/// rather than when the client writes again.
#[tokio::test]
async fn the_stdio_bridge_exits_when_the_host_cannot_be_reached() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    limit(async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut bridge = spawn_bridge(&format!("http://127.0.0.1:{port}"));
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "open", "version": "1"}}});
        let mut stdin = bridge.stdin.take().unwrap();
        stdin
            .write_all(format!("{init}\n").as_bytes())
            .await
            .unwrap();
        let (mut out, mut err) = (String::new(), String::new());
        let mut stdout = bridge.stdout.take().unwrap();
        let mut stderr = bridge.stderr.take().unwrap();
        let status = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            let _ = tokio::join!(
                stdout.read_to_string(&mut out),
                stderr.read_to_string(&mut err)
            );
            bridge.wait().await.unwrap()
        })
        .await
        .expect("the bridge exits while the client keeps its input open");
        drop(stdin);
        assert!(!status.success(), "{err}");
        let answer: Value = serde_json::from_str(out.trim()).expect("one JSON line");
        assert_eq!(answer["id"], 1, "{out}");
        assert_eq!(answer["error"]["code"], -32603, "{out}");
        assert!(err.contains("could not be reached"), "{err}");
    })
    .await;
}

/// A body that is not one JSON-RPC message gets 400 and the JSON-RPC error that says why; one
/// over the size limit 413 with the limit named.
#[tokio::test]
async fn a_malformed_or_oversized_mcp_body_is_refused_with_a_json_rpc_error() {
    limit(async {
        let s = TestServer::start().await;
        let post = |body: String| {
            s.client
                .post(format!("{}/mcp", s.base))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-06-18")
                .body(body)
                .send()
        };
        let cases = [
            (r#"{"jsonrpc":"2.0","#.to_string(), 400, -32700, "not JSON"),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#.to_string(),
                400,
                -32600,
                "batch",
            ),
            (
                r#"{"id":1,"method":"tools/list"}"#.to_string(),
                400,
                -32600,
                "JSON-RPC 2.0",
            ),
            (
                format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"p":"{}"}}}}"#,
                    "a".repeat(Options::default().body_limit)
                ),
                413,
                -32600,
                "larger than",
            ),
        ];
        for (body, status, code, says) in cases {
            let resp = post(body).await.unwrap();
            assert_eq!(resp.status().as_u16(), status);
            let v: Value = resp.json().await.expect("a JSON body");
            assert_eq!(v["error"]["code"], code, "{v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains(says),
                "{v}"
            );
        }
        // A good one still passes.
        let resp = post(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.into())
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn json_that_is_no_mcp_message_is_400_and_params_that_do_not_fit_are_32602() {
    limit(async {
        let s = TestServer::start().await;
        let post = |body: Value| {
            s.client
                .post(format!("{}/mcp", s.base))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2025-11-25")
                .json(&body)
                .send()
        };
        // Not a message MCP takes: HTTP 400 with -32600 and why, as for the other bodies.
        let refused = [
            (
                json!({"jsonrpc": "2.0", "id": null, "method": "tools/list"}),
                "id",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": [1, 2]}),
                "params must be an object",
            ),
            (json!({"jsonrpc": "2.0", "id": 1, "method": 5}), "method"),
            (json!({"jsonrpc": "2.0", "id": 1}), "neither"),
        ];
        for (body, says) in refused {
            let resp = post(body.clone()).await.expect("post");
            assert_eq!(resp.status().as_u16(), 400, "{body}");
            let v: Value = resp.json().await.expect("a JSON body");
            assert_eq!(v["error"]["code"], -32600, "{body}: {v}");
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{body}: {v}");
        }
        // A known method whose params do not fit it: -32602 saying what is wrong, nothing
        // started.
        let before = s.rpc("ListTasks", json!({})).await["result"]["totalSize"].clone();
        let bad_params = [
            (
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
                "tools/call needs params",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "start_task", "arguments": "prompt"}}),
                "the params of tools/call",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 3, "method": "initialize"}),
                "initialize needs params",
            ),
            (
                json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
                    "name": "start_task", "arguments": {"prompt": "hi"}, "task": "notanobject"}}),
                "task must be an object",
            ),
        ];
        for (body, says) in bad_params {
            let resp = post(body.clone()).await.expect("post");
            assert_eq!(resp.status().as_u16(), 200, "{body}");
            let text = resp.text().await.expect("body");
            let v: Value = serde_json::from_str(&text)
                .ok()
                .or_else(|| {
                    text.lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .find_map(|d| serde_json::from_str(d.trim()).ok())
                })
                .unwrap_or_else(|| panic!("{body}: no answer in {text}"));
            assert_eq!(v["id"], body["id"], "{v}");
            assert_eq!(v["error"]["code"], -32602, "{body}: {v}");
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains(says), "{body}: {v}");
        }
        let after = s.rpc("ListTasks", json!({})).await["result"]["totalSize"].clone();
        assert_eq!(before, after, "a refused call started a task");
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_follow_up_goes_to_the_agent_whose_conversation_it_is() {
    limit(async {
        let host = HostProcess::two_adapters(true).await;
        let client = reqwest::Client::new();
        let start = |args: Value| {
            mcp_2025_at(
                &client,
                &host.base,
                "tools/call",
                json!({"name": "start_task", "arguments": args}),
            )
        };
        let first = start(json!({"prompt": "hello", "agent": "jsonl", "wait": true})).await;
        let first = &first["result"]["structuredContent"];
        assert_eq!(first["agent"], "jsonl", "{first}");
        let context = first["contextId"].clone();
        // A follow-up naming no agent runs on the context's, not on the default one.
        let next = start(json!({"prompt": "again", "contextId": context, "wait": true})).await;
        let next = &next["result"]["structuredContent"];
        assert_eq!(
            (&next["agent"], &next["contextId"]),
            (&json!("jsonl"), &context),
            "{next}"
        );
        // Its changes are found by the context alone.
        let changes = mcp_2025_at(
            &client,
            &host.base,
            "tools/call",
            json!({"name": "get_changes", "arguments": {"contextId": context}}),
        )
        .await;
        assert_eq!(
            changes["result"]["structuredContent"]["changes"], false,
            "{changes}"
        );
        // Naming another agent than the context's is refused, saying whose it is.
        let other = start(json!({"prompt": "x", "contextId": context, "agent": "demo"})).await;
        assert_eq!(other["error"]["code"], -32602, "{other}");
        let says = other["error"]["message"].as_str().unwrap_or_default();
        assert!(says.contains("jsonl"), "{other}");
        // A2A at the root routes a follow-up by its context likewise.
        let mut params = send_params("echo over A2A");
        params["message"]["contextId"] = context.clone();
        let a2a = host.rpc("/", "SendMessage", params, &[]).await;
        assert_eq!(
            a2a["result"]["task"]["metadata"]["adapter"], "jsonl",
            "{a2a}"
        );
        assert_eq!(a2a["result"]["task"]["contextId"], context, "{a2a}");
    })
    .await;
}

#[tokio::test]
async fn a_failed_task_is_an_error_saying_why() {
    limit(async {
        let s = TestServer::start().await;
        let c = connect(&s, None).await.expect("connect");
        for prompt in ["fail", "exit=3"] {
            let args = json!({"prompt": prompt, "wait": true});
            let r = c
                .call_tool(
                    CallToolRequestParams::new("start_task")
                        .with_arguments(args.as_object().cloned().unwrap_or_default()),
                )
                .await
                .expect("start_task");
            assert_eq!(r.is_error, Some(true), "{prompt}: {r:?}");
            let t = r.structured_content.clone().expect("structured content");
            assert_eq!(t["state"], "failed", "{t}");
            assert!(t["errorKind"].is_string(), "{prompt}: {t}");
            let text = r
                .content
                .first()
                .and_then(|c| c.as_text())
                .map(|t| t.text.clone())
                .unwrap_or_default();
            assert!(text.contains("error kind"), "{prompt}: {text}");
            if prompt == "exit=3" {
                assert_eq!(t["exitCode"], 3, "{t}");
                assert!(text.contains("exit code 3"), "{text}");
            }
        }
        c.cancel().await.ok();
        s.shutdown().await;
    })
    .await;
}
