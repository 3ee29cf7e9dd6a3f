//! HTTP+JSON: every v1.0 (`/a2a/rest`) and v0.3 (`/a2a/rest03/v1`) route, SSE framing,
//! Last-Event-ID replay, error bodies and statuses, the card's interfaces.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

const V1: &str = "/a2a/rest";
const V03: &str = "/a2a/rest03/v1";

struct Reply {
    status: u16,
    content_type: String,
    body: Value,
}

/// One REST call; `body` is sent as `application/json`; `version` as `A2A-Version`.
async fn call(
    s: &TestServer,
    method: Method,
    path: &str,
    body: Option<Value>,
    version: Option<&str>,
) -> Reply {
    let mut req = s.client.request(method, format!("{}{path}", s.base));
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    if let Some(v) = version {
        req = req.header("A2A-Version", v);
    }
    let resp = req.send().await.expect("send");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = resp.text().await.expect("body");
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Reply {
        status,
        content_type,
        body,
    }
}

async fn v1(s: &TestServer, method: Method, path: &str, body: Option<Value>) -> Reply {
    call(s, method, &format!("{V1}{path}"), body, Some("1.0")).await
}

async fn v03(s: &TestServer, method: Method, path: &str, body: Option<Value>) -> Reply {
    call(s, method, &format!("{V03}{path}"), body, None).await
}

/// Asserts a google.rpc.Status error body with this HTTP status and ErrorInfo reason.
fn assert_error(r: &Reply, status: u16, reason: Option<&str>) {
    assert_eq!(r.status, status, "{}", r.body);
    assert!(
        r.content_type.starts_with("application/json"),
        "{}",
        r.content_type
    );
    assert_eq!(r.body["error"]["code"], status, "{}", r.body);
    assert!(r.body["error"]["status"].is_string(), "{}", r.body);
    assert!(r.body["error"]["message"].is_string(), "{}", r.body);
    if let Some(reason) = reason {
        let d = &r.body["error"]["details"][0];
        assert_eq!(d["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(d["reason"], reason, "{}", r.body);
        assert_eq!(d["domain"], "a2a-protocol.org");
    }
}

fn msg03(text: &str) -> Value {
    json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "content": [{"text": text}]}})
}

/// Opens a REST stream.
async fn open(
    s: &TestServer,
    method: Method,
    path: &str,
    body: Option<Value>,
    last_event_id: Option<u64>,
) -> SseReader {
    let mut req = s.client.request(method, format!("{}{path}", s.base));
    if let Some(b) = body {
        req = req
            .header("content-type", "application/a2a+json")
            .body(b.to_string());
    }
    if let Some(id) = last_event_id {
        req = req.header("Last-Event-ID", id.to_string());
    }
    let resp = req.send().await.expect("send");
    assert_eq!(resp.status(), 200);
    let r = SseReader::from_response(resp);
    assert!(r.is_sse, "streams answer text/event-stream");
    r
}

#[tokio::test]
async fn v1_send_get_list_cancel() {
    limit(async {
        let s = TestServer::start().await;
        let r = v1(
            &s,
            Method::POST,
            "/message:send",
            Some(send_params("hello")),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.content_type, "application/json");
        let task = &r.body["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        let id = task["id"].as_str().unwrap().to_string();

        let r = v1(
            &s,
            Method::GET,
            &format!("/tasks/{id}?historyLength=1"),
            None,
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["id"], id.as_str());
        assert!(r.body["history"].as_array().unwrap().len() <= 1);

        let r = v1(
            &s,
            Method::GET,
            "/tasks?status=TASK_STATE_COMPLETED&pageSize=10",
            None,
        )
        .await;
        assert_eq!(r.status, 200);
        assert!(r.body["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == id.as_str()));
        for k in ["nextPageToken", "pageSize", "totalSize"] {
            assert!(r.body.get(k).is_some(), "{k}");
        }
        let r = v1(
            &s,
            Method::GET,
            "/tasks?status=5&includeArtifacts=true",
            None,
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["tasks"], json!([]), "no canceled task yet");

        // Non-blocking send of a hanging prompt; cancel with an empty body, then with {}.
        let mut p = send_params("please hang");
        p["configuration"] = json!({"returnImmediately": true});
        let r = v1(&s, Method::POST, "/message:send", Some(p)).await;
        let hung = r.body["task"]["id"].as_str().unwrap().to_string();
        let r = v1(&s, Method::POST, &format!("/tasks/{hung}:cancel"), None).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["status"]["state"], "TASK_STATE_CANCELED");
        // Cancel of a terminal task: 409 (v1.0.0 table).
        let r = v1(
            &s,
            Method::POST,
            &format!("/tasks/{hung}:cancel"),
            Some(json!({"metadata": {"a": 1}})),
        )
        .await;
        assert_error(&r, 409, Some("TASK_NOT_CANCELABLE"));
        assert_eq!(r.body["error"]["status"], "FAILED_PRECONDITION");
        // The same routes under a tenant prefix.
        let r = call(
            &s,
            Method::GET,
            &format!("{V1}/acme/tasks/{hung}"),
            None,
            Some("1.0"),
        )
        .await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["status"]["state"], "TASK_STATE_CANCELED");
        let r = call(
            &s,
            Method::POST,
            &format!("{V1}/acme/message:send"),
            Some(send_params("hello")),
            None,
        )
        .await;
        assert_eq!(r.status, 200, "absent A2A-Version is accepted");
        assert_eq!(r.body["task"]["status"]["state"], "TASK_STATE_COMPLETED");
        let r = call(
            &s,
            Method::GET,
            &format!("{V1}/acme/tasks?pageSize=1"),
            None,
            None,
        )
        .await;
        assert_eq!(r.body["tasks"].as_array().unwrap().len(), 1);
    })
    .await;
}

#[tokio::test]
async fn v1_stream_and_subscribe_frames() {
    limit(async {
        let s = TestServer::start().await;
        let mut r = open(
            &s,
            Method::POST,
            &format!("{V1}/message:stream"),
            Some(send_params("hello")),
            None,
        )
        .await;
        let frames = r.all().await;
        assert!(frames.len() >= 5, "{frames:?}");
        assert!(
            frames[0].data["task"].is_object(),
            "bare StreamResponse, no envelope"
        );
        assert!(frames.iter().all(|f| f.data.get("jsonrpc").is_none()));
        let ids: Vec<u64> = frames.iter().map(|f| f.id.expect("SSE id")).collect();
        assert!(ids.windows(2).all(|w| w[1] > w[0]), "{ids:?}");
        let last = &frames.last().unwrap().data;
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert!(
            last["statusUpdate"].get("final").is_none(),
            "no final in v1.0"
        );
        let id = frames[0].data["task"]["id"].as_str().unwrap().to_string();

        // Replay after event 2, with GET and with POST.
        for method in [Method::GET, Method::POST] {
            let mut r = open(
                &s,
                method.clone(),
                &format!("{V1}/tasks/{id}:subscribe"),
                None,
                Some(2),
            )
            .await;
            let replay = r.all().await;
            let ids: Vec<u64> = replay.iter().map(|f| f.id.unwrap()).collect();
            assert_eq!(ids.first(), Some(&3), "{method}");
            assert_eq!(ids.last(), frames.last().unwrap().id.as_ref(), "{method}");
        }
        // Without Last-Event-ID an ended task cannot be followed.
        let r = v1(&s, Method::POST, &format!("/tasks/{id}:subscribe"), None).await;
        assert_error(&r, 400, Some("UNSUPPORTED_OPERATION"));

        // Subscribe to a running task: first the task, then its events to the end.
        let mut p = send_params("slow hello");
        p["configuration"] = json!({"returnImmediately": true});
        let r = v1(&s, Method::POST, "/message:send", Some(p)).await;
        let slow = r.body["task"]["id"].as_str().unwrap().to_string();
        let mut r = open(
            &s,
            Method::GET,
            &format!("{V1}/tasks/{slow}:subscribe"),
            None,
            None,
        )
        .await;
        let frames = r.all().await;
        assert_eq!(frames[0].data["task"]["id"], slow.as_str());
        assert_eq!(
            frames.last().unwrap().data["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
    })
    .await;
}

#[tokio::test]
async fn v1_errors() {
    limit(async {
        let s = TestServer::start().await;
        let r = v1(&s, Method::GET, "/tasks/nope", None).await;
        assert_error(&r, 404, Some("TASK_NOT_FOUND"));
        assert_eq!(r.body["error"]["status"], "NOT_FOUND");
        let r = v1(&s, Method::POST, "/tasks/nope:cancel", None).await;
        assert_error(&r, 404, Some("TASK_NOT_FOUND"));
        let r = v1(&s, Method::GET, "/tasks/nope:subscribe", None).await;
        assert_error(&r, 404, Some("TASK_NOT_FOUND"));

        // Wrong content type: 415; bad JSON: 400; a body that is not a request: 400.
        let resp = s
            .client
            .post(format!("{}{V1}/message:send", s.base))
            .header("content-type", "text/plain")
            .body("hello")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 415);
        assert_eq!(resp.headers()["content-type"], "application/json");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["error"]["details"][0]["reason"],
            "CONTENT_TYPE_NOT_SUPPORTED"
        );
        let resp = s
            .client
            .post(format!("{}{V1}/message:send", s.base))
            .header("content-type", "application/json")
            .body("{not json")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400);
        let r = v1(
            &s,
            Method::POST,
            "/message:send",
            Some(json!({"message": 5})),
        )
        .await;
        assert_error(&r, 400, None);
        let r = v1(&s, Method::POST, "/message:send", None).await;
        assert_error(&r, 400, None);

        // Bad list parameters: 400.
        for q in [
            "pageSize=0x",
            "pageSize=1000",
            "status=NOPE",
            "historyLength=-1",
            "includeArtifacts=maybe",
            "statusTimestampAfter=yesterday",
        ] {
            let r = v1(&s, Method::GET, &format!("/tasks?{q}"), None).await;
            assert_error(&r, 400, None);
        }

        // Versions: an explicit non-1.x is refused, on every route.
        for v in ["99.0", "0.3"] {
            let r = call(
                &s,
                Method::POST,
                &format!("{V1}/message:send"),
                Some(send_params("hello")),
                Some(v),
            )
            .await;
            assert_error(&r, 400, Some("VERSION_NOT_SUPPORTED"));
            let r = call(
                &s,
                Method::GET,
                &format!("{V1}/tasks?A2A-Version={v}"),
                None,
                None,
            )
            .await;
            assert_error(&r, 400, Some("VERSION_NOT_SUPPORTED"));
        }

        // Push configs and the extended card are not supported (yet).
        for (m, p) in [
            (Method::POST, "/tasks/t/pushNotificationConfigs"),
            (Method::GET, "/tasks/t/pushNotificationConfigs"),
            (Method::GET, "/tasks/t/pushNotificationConfigs/c"),
            (Method::DELETE, "/tasks/t/pushNotificationConfigs/c"),
        ] {
            let body = (m == Method::POST).then(|| json!({"url": "http://h/x"}));
            let r = v1(&s, m.clone(), p, body).await;
            assert_error(&r, 400, Some("PUSH_NOTIFICATION_NOT_SUPPORTED"));
        }
        let r = v1(&s, Method::GET, "/extendedAgentCard", None).await;
        assert_error(&r, 400, Some("UNSUPPORTED_OPERATION"));

        // Unknown routes and methods.
        let r = v1(&s, Method::GET, "/nothing/here/at/all", None).await;
        assert_error(&r, 404, None);
        // A wrong method: 405 with a google.rpc.Status body, whichever route it is.
        for (m, p) in [
            (Method::GET, "/tasks/x:cancel"),
            (Method::DELETE, "/message:send"),
            (Method::GET, "/message:send"),
            (Method::DELETE, "/tasks/x"),
            (Method::PUT, "/tasks"),
        ] {
            let r = v1(&s, m, p, None).await;
            assert_error(&r, 405, None);
        }
    })
    .await;
}

#[tokio::test]
async fn v03_routes_speak_proto_json() {
    limit(async {
        let s = TestServer::start().await;
        let r = v03(&s, Method::POST, "/message:send", Some(msg03("hello"))).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.content_type, "application/json");
        let task = &r.body["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(task["history"][0]["role"], "ROLE_USER");
        assert_eq!(task["history"][0]["content"][0]["text"], "hello");
        assert!(task.get("kind").is_none());
        let id = task["id"].as_str().unwrap().to_string();

        let r = v03(&s, Method::GET, &format!("/tasks/{id}?historyLength=1"), None).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body["id"], id.as_str());
        assert_eq!(r.body["history"].as_array().unwrap().len(), 1);

        // The Python SDK's body: proto field names, `request`; configuration without
        // `blocking` means not blocking.
        let body = json!({"request": {"message_id": uuid(), "role": "ROLE_USER", "content": [{"text": "please hang"}]}, "configuration": {}});
        let r = v03(&s, Method::POST, "/message:send", Some(body)).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let state = r.body["task"]["status"]["state"].as_str().unwrap();
        assert!(["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state), "{state}");
        let hung = r.body["task"]["id"].as_str().unwrap().to_string();
        // The Python SDK's cancel body: `{"name": "tasks/{id}"}`.
        let r = v03(&s, Method::POST, &format!("/tasks/{hung}:cancel"), Some(json!({"name": format!("tasks/{hung}")}))).await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["status"]["state"], "TASK_STATE_CANCELLED");
        let r = v03(&s, Method::POST, &format!("/tasks/{hung}:cancel"), Some(json!({}))).await;
        assert_error(&r, 409, Some("TASK_NOT_CANCELABLE"));

        // Stream: bare v0.3 StreamResponse events, the last status update final.
        // The Python SDK's stream body: proto field names.
        let sdk = json!({"request": {"message_id": uuid(), "role": "ROLE_USER", "content": [{"text": "hello"}]},
            "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 0, "blocking": true}, "metadata": {}});
        let mut st = open(&s, Method::POST, &format!("{V03}/message:stream"), Some(sdk), None).await;
        let frames = st.all().await;
        assert!(frames[0].data["task"].is_object());
        assert!(frames.iter().all(|f| f.id.is_some() && f.data.get("result").is_none()));
        let finals: Vec<&Value> = frames
            .iter()
            .filter(|f| f.data["statusUpdate"]["final"] == true)
            .map(|f| &f.data)
            .collect();
        assert_eq!(finals.len(), 1);
        assert_eq!(frames.last().unwrap().data["statusUpdate"]["final"], true);
        assert_eq!(
            frames.last().unwrap().data["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        assert!(frames.iter().any(|f| f.data["artifactUpdate"]["artifact"]["parts"].is_array()));
        let sid = frames[0].data["task"]["id"].as_str().unwrap().to_string();
        for (method, body) in [(Method::GET, None), (Method::POST, Some(json!({"name": format!("tasks/{sid}")})))] {
            let mut r = open(&s, method, &format!("{V03}/tasks/{sid}:subscribe"), body, Some(1)).await;
            let replay = r.all().await;
            assert_eq!(replay.first().and_then(|f| f.id), Some(2));
            assert_eq!(replay.len(), frames.len() - 1);
        }

        // Errors and the routes that are not supported.
        let r = v03(&s, Method::GET, "/tasks/nope", None).await;
        assert_error(&r, 404, Some("TASK_NOT_FOUND"));
        let r = call(&s, Method::POST, &format!("{V03}/message:send"), Some(msg03("hello")), Some("1.0")).await;
        assert_error(&r, 400, Some("VERSION_NOT_SUPPORTED"));
        let r = call(&s, Method::GET, &format!("{V03}/tasks/{id}"), None, Some("0.3")).await;
        assert_eq!(r.status, 200);
        let r = v03(&s, Method::POST, "/message:send", Some(json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [{}]}}))).await;
        assert_error(&r, 400, None);
        for (m, p) in [
            (Method::POST, "/tasks/t/pushNotificationConfigs"),
            (Method::GET, "/tasks/t/pushNotificationConfigs"),
            (Method::GET, "/tasks/t/pushNotificationConfigs/c"),
            (Method::DELETE, "/tasks/t/pushNotificationConfigs/c"),
        ] {
            let r = v03(&s, m, p, None).await;
            assert_error(&r, 400, Some("PUSH_NOTIFICATION_NOT_SUPPORTED"));
        }
        let r = v03(&s, Method::GET, "/card", None).await;
        assert_error(&r, 400, Some("EXTENDED_AGENT_CARD_NOT_CONFIGURED"));
        // v0.3 has no list, and 1.0 paths are not under the 0.3 base.
        let r = v03(&s, Method::GET, "/tasks", None).await;
        assert_eq!(r.status, 404);
        let r = call(&s, Method::POST, "/a2a/rest03/message:send", Some(msg03("hello")), None).await;
        assert_eq!(r.status, 404);
    })
    .await;
}

#[tokio::test]
async fn input_required_over_rest_then_answer() {
    limit(async {
        let s = TestServer::start().await;
        let r = v1(
            &s,
            Method::POST,
            "/message:send",
            Some(send_params("approval")),
        )
        .await;
        assert_eq!(
            r.body["task"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        let id = r.body["task"]["id"].as_str().unwrap().to_string();
        // A streamed answer starts with the whole task.
        let mut answer = send_params("yes");
        answer["message"]["taskId"] = json!(id);
        let mut st = open(
            &s,
            Method::POST,
            &format!("{V1}/message:stream"),
            Some(answer),
            None,
        )
        .await;
        let first = st.next().await.expect("a first frame");
        assert_eq!(first.data["task"]["id"], id.as_str());
        let rest = tokio::time::timeout(Duration::from_secs(30), st.all())
            .await
            .unwrap();
        let last = rest.last().map(|f| f.data.clone()).unwrap_or(first.data);
        assert!(
            last["statusUpdate"]["status"]["state"].is_string(),
            "{last}"
        );
    })
    .await;
}

#[tokio::test]
async fn card_lists_the_rest_interfaces() {
    limit(async {
        let s = TestServer::start().await;
        let card: Value = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let pairs: Vec<(String, String, String)> = card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["protocolBinding"].as_str().unwrap().to_string(),
                    i["protocolVersion"].as_str().unwrap().to_string(),
                    i["url"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let b = &s.base;
        assert_eq!(
            pairs,
            vec![
                ("JSONRPC".into(), "1.0".into(), format!("{b}/")),
                ("JSONRPC".into(), "0.3".into(), format!("{b}/")),
                ("HTTP+JSON".into(), "1.0".into(), format!("{b}/a2a/rest")),
                ("HTTP+JSON".into(), "0.3".into(), format!("{b}/a2a/rest03")),
            ]
        );
        assert_eq!(
            card["additionalInterfaces"],
            json!([
                {"url": format!("{b}/"), "transport": "JSONRPC"},
                {"url": format!("{b}/a2a/rest03"), "transport": "HTTP+JSON"},
            ])
        );
    })
    .await;
}
