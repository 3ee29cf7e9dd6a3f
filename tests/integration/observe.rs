//! Metrics and trace context.

use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn metrics_count_tasks_events_and_tokens() {
    limit(async {
        let s = TestServer::start().await;
        s.rpc("SendMessage", send_params("hello")).await;
        s.stream("SendStreamingMessage", send_params("hello")).await;
        s.rpc("SendMessage", send_params("fail")).await;
        let resp = s
            .client
            .get(format!("{}/metrics", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.unwrap();
        let value = |prefix: &str| -> f64 {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        };
        assert!(
            value(r#"agent_host_tasks_finished_total{adapter="demo",state="completed"}"#) >= 2.0
        );
        assert!(value(r#"agent_host_tasks_finished_total{adapter="demo",state="failed"}"#) >= 1.0);
        assert!(value(r#"agent_host_tasks_created_total{adapter="demo"}"#) >= 3.0);
        assert!(value("agent_host_sse_events_total") >= 5.0);
        assert!(value(r#"agent_host_tokens_total{adapter="demo",kind="input"}"#) >= 24.0);
        assert!(text.contains("agent_host_task_duration_seconds"));
        assert!(text.contains("agent_host_running_tasks"));
    })
    .await;
}

#[tokio::test]
async fn traceparent_reaches_the_cli_and_the_task() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("trace.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho \"{\\\"type\\\":\\\"done\\\",\\\"result\\\":\\\"trace=${TRACEPARENT:-none}\\\"}\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let s = TestServer::with(Options {
            adapter: "jsonl",
            program: Some(script),
            ..Options::default()
        })
        .await;
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let v: serde_json::Value = s
            .client
            .post(format!("{}/", s.base))
            .header("traceparent", tp)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":send_params("x")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["message"]["parts"][0]["text"], format!("trace={tp}"));
        assert_eq!(t["metadata"]["traceparent"], tp);
        // A malformed one is ignored.
        let v: serde_json::Value = s
            .client
            .post(format!("{}/", s.base))
            .header("traceparent", "not-a-trace")
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":send_params("x")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["result"]["task"]["status"]["message"]["parts"][0]["text"], "trace=none");
    })
    .await;
}

#[tokio::test]
async fn several_adapters_are_served_on_one_port() {
    limit(async {
        let host = HostProcess::two_adapters(true).await;
        let client = reqwest::Client::new();
        let base = host.base.clone();
        let root = &host.card;
        let skills: Vec<&str> = root["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert!(
            skills.contains(&"demo-session") && skills.contains(&"agent-jsonl"),
            "{skills:?}"
        );
        let card: serde_json::Value = client
            .get(format!("{base}/agents/jsonl/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            format!("{base}/agents/jsonl/")
        );
        let send = |path: &'static str| {
            host.rpc(path, "SendMessage", send_params("echo via adapter"), &[])
        };
        let via_jsonl = send("/agents/jsonl/").await;
        assert_eq!(
            via_jsonl["result"]["task"]["metadata"]["adapter"], "jsonl",
            "{via_jsonl}"
        );
        let via_root = send("/").await;
        assert_eq!(via_root["result"]["task"]["metadata"]["adapter"], "demo");
        let via_demo = send("/agents/demo/").await;
        assert_eq!(via_demo["result"]["task"]["metadata"]["adapter"], "demo");
        // With route-by-metadata, the root sends a message naming an adapter to it, and finds
        // that adapter's tasks by id over both bindings.
        let mut params = send_params("echo picked by metadata");
        params["message"]["metadata"] = json!({"agent": "jsonl"});
        let picked = host.rpc("/", "SendMessage", params, &[]).await;
        assert_eq!(
            picked["result"]["task"]["metadata"]["adapter"], "jsonl",
            "{picked}"
        );
        let id = picked["result"]["task"]["id"].as_str().unwrap().to_string();
        let got = host.rpc("/", "GetTask", json!({"id": id}), &[]).await;
        assert_eq!(got["result"]["metadata"]["adapter"], "jsonl", "{got}");
        let rest = client
            .get(format!("{base}/a2a/rest/tasks/{id}"))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 200);
        let rest: serde_json::Value = rest.json().await.unwrap();
        assert_eq!(rest["id"], id.as_str());
        // An adapter this host does not serve: the default one takes the message.
        let mut params = send_params("echo unknown agent");
        params["message"]["metadata"] = json!({"agent": "nope"});
        let unknown = host.rpc("/", "SendMessage", params, &[]).await;
        assert_eq!(
            unknown["result"]["task"]["metadata"]["adapter"], "demo",
            "{unknown}"
        );
    })
    .await;
}

/// With route-by-metadata, a message that continues a conversation (its `contextId`, or a
/// `taskId`) but names another adapter in `metadata.agent` than the conversation's is refused
/// with invalid params naming both adapters, over JSON-RPC and HTTP+JSON (before, it went to
/// the named adapter, which started a second conversation under the same context id). The
/// same follow-up naming no adapter, or the conversation's, goes to the conversation's.
#[tokio::test]
async fn a_follow_up_naming_another_adapter_than_its_conversations_is_refused() {
    limit(async {
        let host = HostProcess::two_adapters(true).await;
        let follow_up = |context: &Value, agent: Option<&str>| {
            let mut params = send_params("echo again");
            params["message"]["contextId"] = context.clone();
            if let Some(a) = agent {
                params["message"]["metadata"] = json!({"agent": a});
            }
            params
        };
        let mut params = send_params("echo first");
        params["message"]["metadata"] = json!({"agent": "jsonl"});
        let first = host.rpc("/", "SendMessage", params, &[]).await;
        assert_eq!(
            first["result"]["task"]["metadata"]["adapter"], "jsonl",
            "{first}"
        );
        let context = first["result"]["task"]["contextId"].clone();
        let says_both = |v: &Value, message: &Value, what: &str| {
            let text = message.as_str().unwrap_or_default();
            assert!(
                text.contains(what) && text.contains("'jsonl'") && text.contains("'demo'"),
                "{v}"
            );
        };
        for method in ["SendMessage", "SendStreamingMessage"] {
            let r = host
                .rpc("/", method, follow_up(&context, Some("demo")), &[])
                .await;
            assert_eq!(r["error"]["code"], -32602, "{method}: {r}");
            says_both(&r, &r["error"]["message"], context.as_str().unwrap());
        }
        let rest = reqwest::Client::new()
            .post(format!("{}/a2a/rest/message:send", host.base))
            .header("A2A-Version", "1.0")
            .json(&follow_up(&context, Some("demo")))
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 400);
        let rest: Value = rest.json().await.unwrap();
        assert_eq!(rest["error"]["status"], "INVALID_ARGUMENT", "{rest}");
        says_both(&rest, &rest["error"]["message"], context.as_str().unwrap());
        // The 0.3 bindings alike: `message/stream` answers its error as a stream, as its
        // handler does; HTTP+JSON 0.3 with 400.
        let mut v03 = send_params03("echo again");
        v03["message"]["contextId"] = context.clone();
        v03["message"]["metadata"] = json!({"agent": "demo"});
        let client = reqwest::Client::new();
        let stream = client
            .post(format!("{}/", host.base))
            .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": v03}))
            .send()
            .await
            .unwrap();
        let is_sse = stream.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream");
        let text = stream.text().await.unwrap();
        assert!(
            is_sse && text.contains("-32602") && text.contains("'jsonl'"),
            "{text}"
        );
        let mut rest03 = follow_up(&context, Some("demo"));
        let parts = rest03["message"]
            .as_object_mut()
            .and_then(|m| m.remove("parts"));
        rest03["message"]["content"] = parts.unwrap_or_default();
        let rest03 = client
            .post(format!("{}/a2a/rest03/v1/message:send", host.base))
            .json(&rest03)
            .send()
            .await
            .unwrap();
        let status = rest03.status();
        let rest03 = rest03.text().await.unwrap();
        assert!(
            status == 400 && rest03.contains("'jsonl'"),
            "{status} {rest03}"
        );
        // A conversation of the default adapter, continued naming the other one: refused
        // too, by its context and by its task.
        let on_demo = host
            .rpc("/", "SendMessage", send_params("echo on demo"), &[])
            .await;
        let demo_context = on_demo["result"]["task"]["contextId"].clone();
        let demo_task = on_demo["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let r = host
            .rpc(
                "/",
                "SendMessage",
                follow_up(&demo_context, Some("jsonl")),
                &[],
            )
            .await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
        says_both(&r, &r["error"]["message"], demo_context.as_str().unwrap());
        let mut by_task = send_params("echo again");
        by_task["message"]["taskId"] = json!(demo_task);
        by_task["message"]["metadata"] = json!({"agent": "jsonl"});
        let r = host.rpc("/", "SendMessage", by_task, &[]).await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
        says_both(&r, &r["error"]["message"], &demo_task);
        // Naming no adapter, or the conversation's own, continues it where it runs.
        for agent in [None, Some("jsonl")] {
            let r = host
                .rpc("/", "SendMessage", follow_up(&context, agent), &[])
                .await;
            let task = &r["result"]["task"];
            assert_eq!(task["metadata"]["adapter"], "jsonl", "{agent:?}: {r}");
            assert_eq!(task["contextId"], context, "{r}");
        }
    })
    .await;
}

/// Without `--route-by-metadata` the root is the default adapter's and `/agents/{id}/` each
/// adapter's: a follow-up sent to one adapter's endpoints that continues another's
/// conversation is refused (-32602 over JSON-RPC, 400 over HTTP+JSON), naming both and where
/// to send it (before, the adapter addressed started a second conversation under the same
/// context id). Sent to its own adapter's endpoints, it continues there.
#[tokio::test]
async fn a_follow_up_sent_to_another_adapters_endpoints_is_refused() {
    limit(async {
        for routed in [false, true] {
            let host = HostProcess::two_adapters(routed).await;
            sent_to_another_adapters_endpoints(&host, routed).await;
        }
    })
    .await;
}

/// [`a_follow_up_sent_to_another_adapters_endpoints_is_refused`] on `host` (`routed`: the
/// root routes by the conversation, so only `/agents/demo/` is another adapter's there).
async fn sent_to_another_adapters_endpoints(host: &HostProcess, routed: bool) {
    let first = host
        .rpc(
            "/agents/jsonl/",
            "SendMessage",
            send_params("echo first"),
            &[],
        )
        .await;
    assert_eq!(
        first["result"]["task"]["metadata"]["adapter"], "jsonl",
        "{first}"
    );
    let context = first["result"]["task"]["contextId"].clone();
    let follow_up = || {
        let mut params = send_params("echo again");
        params["message"]["contextId"] = context.clone();
        params
    };
    let paths: &[&str] = if routed {
        &["/agents/demo/"]
    } else {
        &["/", "/agents/demo/"]
    };
    for path in paths {
        let r = host.rpc(path, "SendMessage", follow_up(), &[]).await;
        assert_eq!(r["error"]["code"], -32602, "{path}: {r}");
        let text = r["error"]["message"].as_str().unwrap_or_default();
        assert!(
            text.contains(context.as_str().unwrap())
                && text.contains("'jsonl'")
                && text.contains("'demo'")
                && text.contains("/agents/jsonl/"),
            "{path}: {r}"
        );
    }
    let rest = reqwest::Client::new()
        .post(format!("{}/agents/demo/a2a/rest/message:send", host.base))
        .header("A2A-Version", "1.0")
        .json(&follow_up())
        .send()
        .await
        .unwrap();
    assert_eq!(rest.status(), 400);
    let r = host
        .rpc("/agents/jsonl/", "SendMessage", follow_up(), &[])
        .await;
    assert_eq!(r["result"]["task"]["metadata"]["adapter"], "jsonl", "{r}");
    assert_eq!(r["result"]["task"]["contextId"], context, "{r}");
    // A new conversation on the default adapter at the root is untouched.
    let r = host
        .rpc("/", "SendMessage", send_params("echo on demo"), &[])
        .await;
    assert_eq!(r["result"]["task"]["metadata"]["adapter"], "demo", "{r}");
}

#[tokio::test]
async fn the_tool_trace_extension_adds_typed_parts_when_asked_for() {
    limit(async {
        let s = TestServer::start().await;
        let card: serde_json::Value = s.client.get(format!("{}/.well-known/agent-card.json", s.base)).send().await.unwrap().json().await.unwrap();
        let uris: Vec<&str> = card["capabilities"]["extensions"].as_array().unwrap().iter().map(|e| e["uri"].as_str().unwrap()).collect();
        assert!(uris.contains(&"urn:agent-host:tool-trace:v1") && uris.contains(&"urn:agent-host:approval:v1"), "{uris:?}");
        let stream = |ext: Option<&'static str>| {
            let s = &s;
            async move {
                let mut req = s
                    .client
                    .post(format!("{}/", s.base))
                    .header("A2A-Version", "1.0")
                    .json(&json!({"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":send_params("hello")}));
                if let Some(e) = ext {
                    req = req.header("A2A-Extensions", e);
                }
                let resp = req.send().await.unwrap();
                let echoed = resp.headers().get("a2a-extensions").map(|v| v.to_str().unwrap().to_string());
                (echoed, resp.text().await.unwrap())
            }
        };
        let (echoed, body) = stream(Some("urn:agent-host:tool-trace:v1, urn:example:unknown")).await;
        assert_eq!(echoed.as_deref(), Some("urn:agent-host:tool-trace:v1"));
        assert!(body.contains("\"function_call\"") && body.contains("\"function_response\""), "{body}");
        let (echoed, body) = stream(None).await;
        assert_eq!(echoed, None);
        assert!(!body.contains("function_call"), "{body}");
    })
    .await;
}

#[tokio::test]
async fn a_required_extension_must_be_named() {
    limit(async {
        let host = HostProcess::spawn(
            &[
                ("AGENT_ADAPTER", "demo"),
                (
                    "AGENT_HOST_REQUIRED_EXTENSIONS",
                    "urn:agent-host:approval:v1",
                ),
            ],
            &[],
        )
        .await;
        let client = reqwest::Client::new();
        let base = host.base.clone();
        let card = &host.card;
        let approval = card["capabilities"]["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["uri"] == "urn:agent-host:approval:v1")
            .cloned()
            .unwrap();
        assert_eq!(approval["required"], true);
        let refused = host
            .rpc("/", "SendMessage", send_params("hello"), &[])
            .await;
        assert_eq!(refused["error"]["code"], -32008, "{refused}");
        let rest = client
            .get(format!("{base}/a2a/rest/tasks"))
            .header("A2A-Version", "1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(rest.status(), 400);
        let rest: serde_json::Value = rest.json().await.unwrap();
        assert_eq!(
            rest["error"]["details"][0]["reason"], "EXTENSION_SUPPORT_REQUIRED",
            "{rest}"
        );
        let ok = host
            .rpc(
                "/",
                "SendMessage",
                send_params("hello"),
                &[("A2A-Extensions", "urn:agent-host:approval:v1")],
            )
            .await;
        assert_eq!(
            ok["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{ok}"
        );
    })
    .await;
}
