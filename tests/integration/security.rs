//! Security probes: every one refused. Those at the boundary with the agents (working
//! directories, leaks in error text, the host's token) are in `agents.rs`.

use std::time::Instant;

use agent_host::settings::{Credential, HostLimits, Secret, Security};
use serde_json::{json, Value};

use crate::common::*;

mod agents;

fn creds() -> Security {
    Security {
        credentials: vec![
            Credential {
                name: "alice".into(),
                secret: Secret::Bearer("alice-token-0123456789".into()),
            },
            Credential {
                name: "bob".into(),
                secret: Secret::ApiKey("bob-key-0123456789".into()),
            },
            Credential {
                name: "carol".into(),
                secret: Secret::Basic {
                    username: "carol".into(),
                    password: "carol-pw".into(),
                },
            },
        ],
        api_key_header: "X-API-Key".into(),
        ..Security::default()
    }
}

const ALICE: (&str, &str) = ("authorization", "Bearer alice-token-0123456789");
const BOB: (&str, &str) = ("x-api-key", "bob-key-0123456789");

/// A request with the given headers; returns status, headers and JSON body (or Null).
async fn call(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = s.client.request(method, format!("{}{path}", s.base));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.header("content-type", "application/json").json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        h,
        serde_json::from_str(&text).unwrap_or(Value::Null),
    )
}

async fn rpc_as(s: &TestServer, who: (&str, &str), method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    call(
        s,
        reqwest::Method::POST,
        "/",
        &[who, ("a2a-version", "1.0")],
        Some(body),
    )
    .await
    .2
}

#[tokio::test]
async fn every_route_needs_credentials_except_the_card_and_health() {
    limit(async {
        let s = TestServer::with(Options {
            security: creds(),
            ..Options::default()
        })
        .await;
        use reqwest::Method as M;
        let probes: Vec<(M, &str, Option<Value>)> = vec![
            (
                M::POST,
                "/",
                Some(json!({"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}})),
            ),
            (
                M::POST,
                "/a2a/jsonrpc",
                Some(json!({"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}})),
            ),
            (M::POST, "/a2a/rest/message:send", Some(send_params("hi"))),
            (M::GET, "/a2a/rest/tasks", None),
            (M::GET, "/a2a/rest/tasks/x", None),
            (M::POST, "/a2a/rest/tasks/x:cancel", Some(json!({}))),
            (M::GET, "/a2a/rest/tasks/x:subscribe", None),
            (M::GET, "/a2a/rest/tasks/x/pushNotificationConfigs", None),
            (
                M::DELETE,
                "/a2a/rest/tasks/x/pushNotificationConfigs/c",
                None,
            ),
            (M::POST, "/a2a/rest03/v1/message:send", Some(json!({}))),
            (M::GET, "/a2a/rest03/v1/card", None),
            (M::GET, "/nope", None),
        ];
        let basic_wrong = format!(
            "Basic {}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "carol:nope")
        );
        let wrong: Vec<Vec<(&str, &str)>> = vec![
            vec![],
            vec![("authorization", "Bearer alice-token-012345678X")],
            vec![("authorization", "Bearer bob-key-0123456789")], // right secret, wrong scheme
            vec![("x-api-key", "alice-token-0123456789")],
            vec![("authorization", basic_wrong.as_str())],
            vec![("authorization", "Token alice-token-0123456789")],
        ];
        let mut refused: Option<Value> = None;
        for (m, path, body) in &probes {
            for h in &wrong {
                let (st, headers, v) = call(&s, m.clone(), path, h, body.clone()).await;
                assert_eq!(st, 401, "{m} {path} with {h:?}");
                // One body for all: nothing tells a near guess from a far one.
                assert_eq!(v["error"], "Unauthorized");
                assert!(v["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("WWW-Authenticate")));
                let first = refused.get_or_insert_with(|| v.clone());
                assert_eq!(&v, first);
                let www = headers["www-authenticate"].to_str().unwrap();
                assert!(www.contains("Bearer") && www.contains("Basic"), "{www}");
            }
        }
        // The card and health are public, and the card says what to send.
        let (st, _, card) = call(&s, M::GET, "/.well-known/agent-card.json", &[], None).await;
        assert_eq!(st, 200);
        assert_eq!(
            card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert_eq!(
            card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"],
            "X-API-Key"
        );
        assert_eq!(
            card["securitySchemes"]["bearer"]["type"], "http",
            "v0.3 shape alongside"
        );
        assert!(card["securityRequirements"].as_array().unwrap().len() == 3);
        assert!(card["security"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r.get("bearer").is_some()));
        assert_eq!(call(&s, M::GET, "/health", &[], None).await.0, 200);
        // Each scheme works.
        let basic = format!(
            "Basic {}",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, "carol:carol-pw")
        );
        for who in [ALICE, BOB, ("authorization", basic.as_str())] {
            let v = rpc_as(&s, who, "ListTasks", json!({})).await;
            assert_eq!(v["result"]["totalSize"], 0, "{who:?}: {v}");
        }
    })
    .await;
}

#[tokio::test]
async fn wrong_tokens_of_equal_length_take_the_same_time() {
    limit(async {
        let s = TestServer::with(Options {
            security: creds(),
            ..Options::default()
        })
        .await;
        // Same length as the real token: one shares all but the last byte, one nothing.
        let near = "Bearer alice-token-012345678X";
        let far = "Bearer XXXXXXXXXXXXXXXXXXXXXX";
        let mut t = [Vec::new(), Vec::new()];
        for round in 0..160 {
            for (i, h) in [near, far].iter().enumerate() {
                let start = Instant::now();
                let (st, _, _) = call(
                    &s,
                    reqwest::Method::GET,
                    "/a2a/rest/tasks",
                    &[("authorization", h)],
                    None,
                )
                .await;
                assert_eq!(st, 401);
                if round >= 10 {
                    t[i].push(start.elapsed());
                }
            }
        }
        for v in &mut t {
            v.sort();
        }
        let (a, b) = (t[0][t[0].len() / 2], t[1][t[1].len() / 2]);
        let ratio = a.as_secs_f64() / b.as_secs_f64();
        // Coarse: a byte-by-byte compare would not show at this scale either; the point is
        // that nothing grossly depends on how much of the token matched.
        assert!((0.5..2.0).contains(&ratio), "medians {a:?} vs {b:?}");
    })
    .await;
}

#[tokio::test]
async fn tasks_are_visible_only_to_their_owner() {
    limit(async {
        let rx_url = "http://127.0.0.1:9/hook";
        let s = TestServer::with(Options {
            security: creds(),
            push: Some(agent_host::push::PushSettings {
                allow_private: true,
                ..Default::default()
            }),
            ..Options::default()
        })
        .await;
        let mut p = send_params("hang");
        p["configuration"] = json!({"returnImmediately": true});
        let t = rpc_as(&s, ALICE, "SendMessage", p).await["result"]["task"].clone();
        let id = t["id"].as_str().unwrap().to_string();
        let ctx = t["contextId"].as_str().unwrap().to_string();
        for (method, params) in [
            ("GetTask", json!({"id": id})),
            ("CancelTask", json!({"id": id})),
            ("SubscribeToTask", json!({"id": id})),
            ("ListTaskPushNotificationConfigs", json!({"taskId": id})),
            (
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "url": rx_url}),
            ),
        ] {
            let v = rpc_as(&s, BOB, method, params).await;
            assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
        }
        let mut answer = send_params("yes");
        answer["message"]["taskId"] = json!(id);
        assert_eq!(
            rpc_as(&s, BOB, "SendMessage", answer).await["error"]["code"],
            -32001
        );
        let mut follow = send_params("hello");
        follow["message"]["contextId"] = json!(ctx);
        assert_eq!(
            rpc_as(&s, BOB, "SendMessage", follow).await["error"]["code"],
            -32602
        );
        let list = rpc_as(&s, BOB, "ListTasks", json!({})).await;
        assert_eq!(list["result"]["totalSize"], 0);
        let (st, _, _) = call(
            &s,
            reqwest::Method::GET,
            &format!("/a2a/rest/tasks/{id}"),
            &[BOB],
            None,
        )
        .await;
        assert_eq!(st, 404);
        // The owner sees and cancels it.
        assert_eq!(
            rpc_as(&s, ALICE, "ListTasks", json!({})).await["result"]["totalSize"],
            1
        );
        let c = rpc_as(&s, ALICE, "CancelTask", json!({"id": id})).await;
        assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
    })
    .await;
}

/// A message naming only the context of another caller's task that waits for input gets
/// the answer a context of another caller gets, naming no task of theirs.
#[tokio::test]
async fn a_waiting_task_of_another_caller_is_not_named_to_its_context() {
    limit(async {
        let s = TestServer::with(Options {
            security: creds(),
            ..Options::default()
        })
        .await;
        let t = rpc_as(&s, ALICE, "SendMessage", send_params("question")).await["result"]["task"]
            .clone();
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{t}");
        let id = t["id"].as_str().unwrap().to_string();
        let ctx = t["contextId"].as_str().unwrap().to_string();
        let mut reply = send_params("src/main.rs");
        reply["message"]["contextId"] = json!(ctx);
        let v = rpc_as(&s, BOB, "SendMessage", reply.clone()).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("belongs to a conversation of another caller")),
            "{v}"
        );
        assert!(!v.to_string().contains(&id), "the task's id is named: {v}");
        // Its owner still answers it by its context alone.
        let v = rpc_as(&s, ALICE, "SendMessage", reply).await;
        assert_eq!(v["result"]["task"]["id"], json!(id), "{v}");
    })
    .await;
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused() {
    limit(async {
        let s = TestServer::start().await;
        let (st, _, v) = call(
            &s,
            reqwest::Method::GET,
            "/.well-known/agent-card.json",
            &[("host", "evil.example")],
            None,
        )
        .await;
        assert_eq!(st, 403, "{v}");
        let (st, _, _) = call(
            &s,
            reqwest::Method::POST,
            "/",
            &[("host", "evil.example:41242")],
            Some(json!({})),
        )
        .await;
        assert_eq!(st, 403);
        let preflight = [
            ("origin", "https://evil.example"),
            ("access-control-request-method", "POST"),
        ];
        let (st, _, _) = call(&s, reqwest::Method::OPTIONS, "/", &preflight, None).await;
        assert_eq!(st, 403);
        let (st, _, _) = call(
            &s,
            reqwest::Method::POST,
            "/",
            &[("origin", "https://evil.example")],
            Some(json!({})),
        )
        .await;
        assert_eq!(
            st, 403,
            "cross-origin calls are refused, not just preflights"
        );
        let sec = Security {
            allowed_origins: vec!["https://app.example".into()],
            ..Security::default()
        };
        let s = TestServer::with(Options {
            security: sec,
            ..Options::default()
        })
        .await;
        let ok = [
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "content-type, a2a-version",
            ),
        ];
        let (st, h, _) = call(&s, reqwest::Method::OPTIONS, "/", &ok, None).await;
        assert_eq!(st, 204);
        assert_eq!(h["access-control-allow-origin"], "https://app.example");
        let (st, h, _) = call(
            &s,
            reqwest::Method::GET,
            "/health",
            &[("origin", "https://app.example")],
            None,
        )
        .await;
        assert_eq!(st, 200);
        assert_eq!(h["access-control-allow-origin"], "https://app.example");
    })
    .await;
}

#[tokio::test]
async fn limits_refuse_with_429_and_the_documented_code() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: HostLimits {
                max_running: 1,
                max_queued: 1,
                max_subscribers: 1,
                rate_per_minute: 0,
                ..HostLimits::default()
            },
            body_limit: 4 * 1024 * 1024,
            ..Options::default()
        })
        .await;
        let start = |text: &str| {
            let mut p = send_params(text);
            p["configuration"] = json!({"returnImmediately": true});
            p
        };
        let a = s.rpc("SendMessage", start("hang")).await["result"]["task"]["id"].as_str().unwrap().to_string();
        let b = s.rpc("SendMessage", start("hang")).await["result"]["task"]["id"].as_str().unwrap().to_string();
        s.task_when(&a, |t| t["status"]["state"] == "TASK_STATE_WORKING").await;
        let tb = s.rpc("GetTask", json!({"id": b})).await["result"].clone();
        assert_eq!(tb["status"]["state"], "TASK_STATE_SUBMITTED", "waits for a slot");
        let v = s.rpc("SendMessage", start("hang")).await;
        assert_eq!(v["error"]["code"], -32050, "{v}");
        let (st, h, _) = call(&s, reqwest::Method::POST, "/a2a/rest/message:send", &[], Some(start("hang"))).await;
        assert_eq!(st, 429);
        assert!(h.contains_key("retry-after"));
        // One stream per task.
        let mut first = s.open_stream("SubscribeToTask", json!({"id": a}), None).await;
        first.next().await.unwrap();
        let v = s.rpc("SubscribeToTask", json!({"id": a})).await;
        assert_eq!(v["error"]["code"], -32050, "{v}");
        drop(first);
        // Canceling the running one lets the waiting one start.
        s.rpc("CancelTask", json!({"id": a})).await;
        s.task_when(&b, |t| t["status"]["state"] == "TASK_STATE_WORKING").await;
        s.rpc("CancelTask", json!({"id": b})).await;
        // A 5 MiB body.
        let big = json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":send_params(&"x".repeat(5 << 20))});
        let (st, _, _) = call(&s, reqwest::Method::POST, "/", &[], Some(big)).await;
        assert_eq!(st, 413);

        // The rate limit.
        let s = TestServer::with(Options {
            host_limits: HostLimits {
                rate_per_minute: 12,
                ..HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        // Reads cost a tenth of a request: 30 list calls fit in a bucket of 12.
        for i in 0..30 {
            let (st, _, _) = call(&s, reqwest::Method::GET, "/a2a/rest/tasks", &[], None).await;
            assert_eq!(st, 200, "read {i}");
        }
        // A JSON-RPC call that changes work (a cancel) pays a whole request, its method
        // read from its body: a burst of them is refused.
        let mut refused = None;
        for i in 0..30 {
            let cancel = json!({"jsonrpc":"2.0","id":i,"method":"CancelTask","params":{"id":uuid()}});
            let (st, h, _) = call(&s, reqwest::Method::POST, "/", &[], Some(cancel)).await;
            if st == 429 {
                refused = Some((i, h));
                break;
            }
        }
        let (i, h) = refused.expect("the rate limit refuses a burst");
        assert!(i <= 12, "refused only after {i} writes");
        assert!(h["retry-after"].to_str().unwrap().parse::<u64>().unwrap() >= 1);
        assert_eq!(call(&s, reqwest::Method::GET, "/health", &[], None).await.0, 200);
    })
    .await;
}

#[tokio::test]
async fn authenticated_callers_get_the_extended_card() {
    limit(async {
        let s = TestServer::with(Options {
            security: creds(),
            ..Options::default()
        })
        .await;
        let (status, _, public) = call(
            &s,
            reqwest::Method::GET,
            "/.well-known/agent-card.json",
            &[],
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(public["capabilities"]["extendedAgentCard"], true);
        let ext = |card: &Value| {
            card["capabilities"]["extensions"]
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .find(|e| e["uri"] == "urn:agent-host:runtime:v1")
                        .cloned()
                })
                .unwrap_or(Value::Null)
        };
        assert!(
            ext(&public).is_null(),
            "the public card shows no runtime details"
        );
        // JSON-RPC v1.0 and v0.3, HTTP+JSON v1.0 and v0.3.
        let v1 = rpc_as(&s, ALICE, "GetExtendedAgentCard", json!({})).await;
        let params = &ext(&v1["result"])["params"];
        assert_eq!(params["adapter"], "demo", "{v1}");
        assert_eq!(params["limits"]["maxRunning"], 16);
        assert!(
            params["limits"]["timeoutMs"]
                .as_u64()
                .is_some_and(|t| t > 0),
            "{params}"
        );
        let v03 = call(
            &s,
            reqwest::Method::POST,
            "/",
            &[BOB],
            Some(json!({"jsonrpc":"2.0","id":1,"method":"agent/getAuthenticatedExtendedCard"})),
        )
        .await
        .2;
        assert_eq!(ext(&v03["result"])["params"]["adapter"], "demo", "{v03}");
        assert!(v03["result"]["url"].is_string(), "v0.3 fields: {v03}");
        let (status, _, rest) = call(
            &s,
            reqwest::Method::GET,
            "/a2a/rest/extendedAgentCard",
            &[ALICE, ("a2a-version", "1.0")],
            None,
        )
        .await;
        assert_eq!(status, 200, "{rest}");
        assert_eq!(ext(&rest)["params"]["adapter"], "demo");
        let (status, _, rest03) = call(
            &s,
            reqwest::Method::GET,
            "/a2a/rest03/v1/card",
            &[ALICE],
            None,
        )
        .await;
        assert_eq!(status, 200, "{rest03}");
        assert_eq!(ext(&rest03)["params"]["adapter"], "demo");
        // Without credentials: 401.
        let (status, _, _) = call(
            &s,
            reqwest::Method::GET,
            "/a2a/rest/extendedAgentCard",
            &[("a2a-version", "1.0")],
            None,
        )
        .await;
        assert_eq!(status, 401);
    })
    .await;
}

/// Issue 37: an authenticated request that announces a body larger than the limit is refused
/// at once with 413 (it used to hold its connection until the body timed out); without
/// credentials it gets its 401 first, body unread. Both bindings.
#[tokio::test]
async fn a_body_announced_over_the_limit_is_refused_at_once() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    limit(async {
        let s = TestServer::with(Options {
            security: creds(),
            ..Options::default()
        })
        .await;
        let addr = s.base.trim_start_matches("http://").to_string();
        for (path, auth, want) in [
            ("/", Some(ALICE), "HTTP/1.1 413"),
            ("/a2a/rest/message:send", Some(ALICE), "HTTP/1.1 413"),
            ("/", None, "HTTP/1.1 401"),
        ] {
            let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let auth = auth.map_or(String::new(), |(k, v)| format!("{k}: {v}\r\n"));
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\nA2A-Version: 1.0\r\n{auth}Content-Type: application/json\r\nContent-Length: 10737418240\r\n\r\n{{\"jsonrpc\""
            );
            conn.write_all(head.as_bytes()).await.unwrap();
            let mut got = vec![0u8; 512];
            // Well within the host's own timeouts: the answer comes without the body.
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), conn.read(&mut got))
                .await
                .unwrap_or_else(|_| panic!("POST {path}: no answer while the body is unsent"))
                .unwrap();
            let text = String::from_utf8_lossy(&got[..n]);
            assert!(text.starts_with(want), "POST {path}: {text}");
        }
    })
    .await;
}
