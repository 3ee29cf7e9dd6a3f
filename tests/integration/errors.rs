//! Protocol errors: the right code for each kind of bad input, never an HTML page.

use serde_json::{json, Value};

use crate::common::*;

async fn raw_post(s: &TestServer, ct: &str, body: &str) -> (u16, Value) {
    let resp = s
        .client
        .post(format!("{}/", s.base))
        .header("content-type", ct)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn jsonrpc_errors_have_the_right_codes() {
    limit(async {
        let s = TestServer::start().await;
        let (st, v) = raw_post(&s, "application/json", "{not json").await;
        assert_eq!((st, v["error"]["code"].as_i64()), (200, Some(-32700)));
        let (_, v) = raw_post(&s, "application/json", "[]").await;
        assert_eq!(v["error"]["code"], -32600);
        let (_, v) = raw_post(&s, "application/json", r#"{"id":1,"method":"GetTask"}"#).await;
        assert_eq!(v["error"]["code"], -32600, "missing jsonrpc version");
        let v = s.rpc("NoSuchMethod", json!({})).await;
        assert_eq!(v["error"]["code"], -32601);
        assert_eq!(v["id"], 1);
        // Params that do not decode are -32602 (not -32600), in both versions.
        let v = s
            .rpc("SendMessage", json!({"message": {"role": "ROLE_USER"}}))
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let v = s
            .rpc03("message/send", json!({"message": {"parts": "x"}}))
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let v = s.rpc03("tasks/get", json!({})).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let v = s
            .rpc(
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{}]}}),
            )
            .await;
        assert_eq!(v["error"]["code"], -32602);
        assert!(
            v["error"]["message"].as_str().unwrap().contains("parts[0]"),
            "{v}"
        );
        // Issue 37: a NUL byte in the prompt is refused before anything starts (it used to
        // fail the task at spawn), in both versions, and no task is made.
        let v = s
            .rpc(
                "SendMessage",
                json!({"message": {"messageId": "m-nul", "role": "ROLE_USER", "parts": [{"text": "a\0b"}]}}),
            )
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains("NUL byte"),
            "{v}"
        );
        let v = s
            .rpc03(
                "message/send",
                json!({"message": {"messageId": "m-nul3", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "\0"}]}}),
            )
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let listed = s.rpc("ListTasks", json!({})).await;
        assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
        let v = s.rpc("GetTask", json!({"id": "no-such-task"})).await;
        assert_eq!(v["error"]["code"], -32001);
        // v1.0 errors carry google.rpc.ErrorInfo; v0.3 ones do not.
        assert_eq!(v["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(
            v["error"]["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        let v = s.rpc03("tasks/get", json!({"id": "no-such-task"})).await;
        assert_eq!(v["error"]["code"], -32001);
        assert!(v["error"].get("data").is_none());
        let v = s.rpc("ListTasks", json!({"pageSize": 101})).await;
        assert_eq!(v["error"]["code"], -32602);
        let v = s.rpc("ListTasks", json!({"pageToken": "garbage!"})).await;
        assert_eq!(v["error"]["code"], -32602);
        let v = s
            .rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": "t", "url": "http://x"}),
            )
            .await;
        assert_eq!(v["error"]["code"], -32003);
        let v = s
            .rpc03("tasks/pushNotificationConfig/get", json!({"id": "t"}))
            .await;
        assert_eq!(v["error"]["code"], -32003);
        // A media type outside the input modes, in a part.
        let s = TestServer::with(Options {
            input_modes: vec!["text/plain".into(), "application/json".into()],
            ..Options::default()
        })
        .await;
        let v = s
            .rpc(
                "SendMessage",
                json!({"message": {"messageId": "m", "role": "ROLE_USER",
                "parts": [{"text": "x", "mediaType": "application/x-unsupported-tck-type"}]}}),
            )
            .await;
        assert_eq!(v["error"]["code"], -32005);
    })
    .await;
}

#[tokio::test]
async fn version_header_is_checked() {
    limit(async {
        let s = TestServer::start().await;
        let v = s
            .rpc_with("GetTask", json!({"id": "x"}), Some("99.0"))
            .await;
        assert_eq!(v["error"]["code"], -32009);
        assert_eq!(v["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
        let v = s
            .rpc_with("tasks/get", json!({"id": "x"}), Some("1.0"))
            .await;
        assert_eq!(v["error"]["code"], -32009);
        let v = s.rpc_with("GetTask", json!({"id": "x"}), Some("0.3")).await;
        assert_eq!(v["error"]["code"], -32009);
        // Absent: accepted for both method sets (their names are disjoint).
        let v = s.rpc_with("GetTask", json!({"id": "x"}), None).await;
        assert_eq!(v["error"]["code"], -32001);
        let v = s
            .rpc_with("tasks/get", json!({"id": "x"}), Some("0.3"))
            .await;
        assert_eq!(v["error"]["code"], -32001);
        // Also as a query parameter.
        let resp = s
            .client
            .post(format!("{}/?A2A-Version=99.0", s.base))
            .header("content-type", "application/json")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#)
            .send()
            .await
            .unwrap();
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"]["code"], -32009);
    })
    .await;
}

#[tokio::test]
async fn http_level_errors_are_json() {
    limit(async {
        let s = TestServer::with(Options {
            body_limit: 1000,
            ..Options::default()
        })
        .await;
        let (st, v) = raw_post(&s, "text/plain", "hello").await;
        assert_eq!(st, 415);
        assert_eq!(v["error"]["code"], -32005);
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{{"id":"{}"}}}}"#,
            "x".repeat(5000)
        );
        let (st, v) = raw_post(&s, "application/json", &big).await;
        assert_eq!(st, 413);
        assert!(v["error"]["message"].as_str().unwrap().contains("limit"));
        let resp = s
            .client
            .get(format!("{}/nope", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404);
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .contains("json"));
        // GET / is the index (cli_tool.rs); another method on the JSON-RPC root is not allowed.
        let resp = s.client.put(format!("{}/", s.base)).send().await.unwrap();
        assert_eq!(resp.status(), 405);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["error"], "Method Not Allowed");
        // application/a2a+json with parameters is accepted.
        let (st, v) = raw_post(
            &s,
            "application/a2a+json; charset=utf-8",
            r#"{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}"#,
        )
        .await;
        assert_eq!((st, v["error"]["code"].as_i64()), (200, Some(-32001)));
    })
    .await;
}

#[tokio::test]
async fn card_and_health() {
    limit(async {
        let s = TestServer::start().await;
        let resp = s
            .client
            .get(format!("{}/health", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.json::<Value>().await.unwrap(),
            json!({"status": "healthy"})
        );
        let resp = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let etag = resp.headers()["etag"].to_str().unwrap().to_string();
        assert!(resp.headers().contains_key("last-modified"));
        assert_eq!(resp.headers()["cache-control"], "public, max-age=60");
        let card: Value = resp.json().await.unwrap();
        assert_eq!(card["capabilities"]["streaming"], true);
        let ifaces = card["supportedInterfaces"].as_array().unwrap();
        assert_eq!(ifaces[0]["protocolVersion"], "1.0");
        assert_eq!(ifaces[0]["protocolBinding"], "JSONRPC");
        assert_eq!(ifaces[0]["url"], format!("{}/", s.base));
        assert!(ifaces.iter().any(|i| i["protocolVersion"] == "0.3"));
        assert_eq!(card["skills"][0]["id"], "demo-session");
        assert_eq!(
            card["url"],
            format!("{}/", s.base),
            "legacy v0.3 fields on by default"
        );
        let resp = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .header("if-none-match", &etag)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 304);
        assert_eq!(resp.headers()["vary"], "A2A-Version");
        // A 1.0 client (header or query parameter) gets the pure v1.0 card, under another ETag.
        for (header, path) in [
            (Some("1.0"), "/.well-known/agent-card.json"),
            (None, "/.well-known/agent-card.json?A2A-Version=1.0"),
        ] {
            let mut req = s.client.get(format!("{}{path}", s.base));
            if let Some(v) = header {
                req = req.header("A2A-Version", v);
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 200);
            assert_eq!(resp.headers()["vary"], "A2A-Version");
            assert_ne!(resp.headers()["etag"].to_str().unwrap(), etag);
            let v1: Value = resp.json().await.unwrap();
            for k in [
                "url",
                "preferredTransport",
                "protocolVersion",
                "additionalInterfaces",
            ] {
                assert!(
                    v1.get(k).is_none(),
                    "{k} in the card served to a 1.0 client"
                );
            }
            assert_eq!(v1["supportedInterfaces"], card["supportedInterfaces"]);
        }
        // An explicit 0.3 request reads the legacy fields.
        let v03: Value = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .header("A2A-Version", "0.3")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v03["url"], format!("{}/", s.base));
        let legacy: Value = s
            .client
            .get(format!("{}/.well-known/agent.json", s.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(legacy["name"], card["name"]);

        let s = TestServer::with(Options {
            legacy_card: false,
            ..Options::default()
        })
        .await;
        let card: Value = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        for k in [
            "url",
            "preferredTransport",
            "protocolVersion",
            "additionalInterfaces",
        ] {
            assert!(card.get(k).is_none(), "{k} must be switchable off");
        }
    })
    .await;
}
