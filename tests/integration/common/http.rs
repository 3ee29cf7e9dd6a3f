//! HTTP helpers: JSON-RPC calls and streams of both servers, message parameters.

use serde_json::{json, Value};

use super::server::{HostProcess, TestServer};
use super::sse::{Frame, SseReader};
use super::wait::{eventually, ready, WAIT};

impl TestServer {
    /// A JSON-RPC call; returns the whole response object.
    pub async fn rpc_with(&self, method: &str, params: Value, version: Option<&str>) -> Value {
        let mut req = self
            .client
            .post(format!("{}/", self.base))
            .header("content-type", "application/json")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        if let Some(v) = version {
            req = req.header("A2A-Version", v);
        }
        let resp = req.send().await.expect("send");
        assert_eq!(
            resp.status(),
            200,
            "JSON-RPC responses travel with HTTP 200"
        );
        resp.json().await.expect("json body")
    }

    /// A v1.0 call (with `A2A-Version: 1.0`).
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        self.rpc_with(method, params, Some("1.0")).await
    }

    /// A v0.3 call (no version header).
    pub async fn rpc03(&self, method: &str, params: Value) -> Value {
        self.rpc_with(method, params, None).await
    }

    /// Opens a streaming call.
    pub async fn open_stream(
        &self,
        method: &str,
        params: Value,
        last_event_id: Option<u64>,
    ) -> SseReader {
        let mut req = self
            .client
            .post(format!("{}/", self.base))
            .header("content-type", "application/json")
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params}));
        if !method.contains('/') {
            req = req.header("A2A-Version", "1.0");
        }
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = req.send().await.expect("send");
        assert_eq!(resp.status(), 200);
        SseReader::from_response(resp)
    }

    /// Streams a call to its end; returns the frames.
    pub async fn stream(&self, method: &str, params: Value) -> Vec<Frame> {
        let mut r = self.open_stream(method, params, None).await;
        assert!(r.is_sse, "streaming methods answer text/event-stream");
        r.all().await
    }

    /// The task (GetTask's result).
    pub async fn get_task(&self, id: &str) -> Value {
        self.rpc("GetTask", json!({"id": id})).await["result"].clone()
    }

    /// The task once `pred` holds for it (GetTask's result), within [`WAIT`].
    pub async fn task_when(&self, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let what = format!("task {id} reaches the expected state");
        eventually(&what, WAIT, async || {
            let t = self.get_task(id).await;
            ready(pred(&t), t)
        })
        .await
    }
}

impl HostProcess {
    /// A v1.0 JSON-RPC call at `path` (from the root, e.g. `/` or `/agents/jsonl/`) with
    /// extra headers; the whole response object.
    pub async fn rpc(
        &self,
        path: &str,
        method: &str,
        params: Value,
        headers: &[(&str, &str)],
    ) -> Value {
        let mut req = reqwest::Client::new()
            .post(format!("{}{path}", self.base))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        req.send()
            .await
            .expect("request")
            .json()
            .await
            .expect("JSON-RPC response")
    }

    /// Opens a v1.0 streaming call at the root.
    pub async fn open_stream(&self, method: &str, params: Value) -> SseReader {
        let resp = reqwest::Client::new()
            .post(format!("{}/", self.base))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": "s1", "method": method, "params": params}))
            .send()
            .await
            .expect("request");
        assert_eq!(resp.status(), 200);
        SseReader::from_response(resp)
    }
}

/// A v1.0 SendMessageRequest with one text part.
pub fn send_params(text: &str) -> Value {
    json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// A v0.3 MessageSendParams with one text part.
pub fn send_params03(text: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": uuid(), "role": "user", "parts": [{"kind": "text", "text": text}]}})
}

pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Returns once `url` answers a GET (whatever the status): a host just started serves.
pub async fn answers(url: &str) {
    let client = reqwest::Client::new();
    eventually(&format!("{url} answers"), WAIT, async || {
        client.get(url).send().await.map(drop)
    })
    .await;
}
