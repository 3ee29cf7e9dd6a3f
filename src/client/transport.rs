//! The wire: one request or stream per operation, for each binding × version. Requests are
//! built from the v1 model and answers decoded back into it (v0.3 through
//! [`crate::protocol::v03::reverse`]).

use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::card::{Binding, ProtocolVersion};
use super::error::{ClientError, RemoteError};
use super::sse::SseEvent;
use super::Client;
use crate::protocol::v03::{reverse, TaskIdParams03, TaskQueryParams03};
use crate::protocol::v1::{SendMessageRequest, SendMessageResponse, StreamResponse, Task};
use crate::protocol::Method as RpcMethod;

/// What a stream is opened for.
#[derive(Debug, Clone)]
pub(super) enum StreamOp {
    Send(Box<SendMessageRequest>),
    Subscribe(String),
}

fn invalid(url: &str, detail: impl std::fmt::Display) -> ClientError {
    ClientError::InvalidResponse {
        url: url.to_string(),
        detail: detail.to_string(),
    }
}

fn decode<T: DeserializeOwned>(url: &str, v: Value) -> Result<T, ClientError> {
    serde_json::from_value(v).map_err(|e| invalid(url, e))
}

/// Percent-encodes a path segment or query value.
pub(super) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl Client {
    /// A request with auth and version headers.
    pub(super) fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let mut rb = self.inner.http.request(method, url);
        if let Some(a) = &self.inner.auth {
            rb = a.apply(rb);
        }
        for (k, v) in &self.inner.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        rb.header("A2A-Version", self.endpoint().version.as_str())
    }

    fn transport_err(&self, url: &str, e: reqwest::Error, timeout: Duration) -> ClientError {
        if e.is_timeout() {
            ClientError::Timeout {
                url: url.to_string(),
                seconds: timeout.as_secs_f64(),
            }
        } else {
            super::error::transport_error(url, e)
        }
    }

    /// Reads a JSON body; non-2xx statuses become errors.
    async fn read_json(
        &self,
        url: &str,
        resp: Response,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let status = resp.status();
        let text = resp
            .text()
            .await
            .map_err(|e| self.transport_err(url, e, timeout))?;
        let body: Option<Value> = serde_json::from_str(&text).ok();
        if !status.is_success() {
            if let Some(r) = body
                .as_ref()
                .and_then(|b| RemoteError::from_rest(status.as_u16(), b))
            {
                return Err(ClientError::Remote(r));
            }
            return Err(ClientError::Http {
                status: status.as_u16(),
                url: url.to_string(),
                body: text.chars().take(500).collect(),
            });
        }
        body.ok_or_else(|| {
            invalid(
                url,
                format!("not JSON: {}", text.chars().take(200).collect::<String>()),
            )
        })
    }

    /// One JSON-RPC call; the `result`.
    pub(super) async fn rpc(
        &self,
        method: RpcMethod,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let url = self.endpoint().url.clone();
        let id = self.next_id();
        let resp = self
            .request(Method::POST, &url)
            .timeout(timeout)
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": method.as_str(), "params": params}))
            .send()
            .await
            .map_err(|e| self.transport_err(&url, e, timeout))?;
        let v = self.read_json(&url, resp, timeout).await?;
        rpc_result(&url, v)
    }

    /// The URL of a REST route: interface URL, tenant (v1), `/v1` (v0.3), path.
    fn rest_url(&self, path: &str) -> String {
        let e = self.endpoint();
        let mut url = e.url.trim_end_matches('/').to_string();
        match e.version {
            ProtocolVersion::V1 => {
                if let Some(t) = &e.tenant {
                    url.push('/');
                    url.push_str(&encode(t));
                }
            }
            ProtocolVersion::V03 => url.push_str("/v1"),
        }
        url.push_str(path);
        url
    }

    /// One HTTP+JSON call; the response body.
    pub(super) async fn rest(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, ClientError> {
        let url = self.rest_url(path);
        let mut rb = self.request(method, &url).timeout(timeout);
        if let Some(b) = body {
            rb = rb.json(&b);
        }
        let resp = rb
            .send()
            .await
            .map_err(|e| self.transport_err(&url, e, timeout))?;
        self.read_json(&url, resp, timeout).await
    }

    pub(super) async fn wire_send(
        &self,
        mut req: SendMessageRequest,
        timeout: Duration,
    ) -> Result<SendMessageResponse, ClientError> {
        let e = self.endpoint().clone();
        match (e.binding, e.version) {
            (Binding::JsonRpc, ProtocolVersion::V1) => {
                req.tenant = req.tenant.or(e.tenant.clone());
                let v = self
                    .rpc(RpcMethod::SendMessage, to_value(&req), timeout)
                    .await?;
                decode(&e.url, v)
            }
            (Binding::JsonRpc, ProtocolVersion::V03) => {
                let p = to_value(&reverse::send_request_to_v03(&req));
                let v = self.rpc(RpcMethod::MessageSend, p, timeout).await?;
                reverse::send_result_from_v03(v).map_err(|err| invalid(&e.url, err))
            }
            (Binding::HttpJson, ProtocolVersion::V1) => {
                let v = self
                    .rest(Method::POST, "/message:send", Some(to_value(&req)), timeout)
                    .await?;
                decode(&e.url, v)
            }
            (Binding::HttpJson, ProtocolVersion::V03) => {
                let b = to_value(&reverse::send_request_to_rest03(&req));
                let v = self
                    .rest(Method::POST, "/message:send", Some(b), timeout)
                    .await?;
                reverse::send_result_from_rest03(v).map_err(|err| invalid(&e.url, err))
            }
        }
    }

    pub(super) async fn wire_get(
        &self,
        id: &str,
        history_length: Option<i32>,
    ) -> Result<Task, ClientError> {
        let e = self.endpoint().clone();
        let t = self.inner.opts.request_timeout;
        match (e.binding, e.version) {
            (Binding::JsonRpc, ProtocolVersion::V1) => {
                let mut p = json!({"id": id});
                if let Some(n) = history_length {
                    p["historyLength"] = json!(n);
                }
                if let Some(tn) = &e.tenant {
                    p["tenant"] = json!(tn);
                }
                decode(&e.url, self.rpc(RpcMethod::GetTask, p, t).await?)
            }
            (Binding::JsonRpc, ProtocolVersion::V03) => {
                let p = TaskQueryParams03 {
                    id: id.to_string(),
                    history_length: history_length.map(|n| n.max(1)),
                    metadata: None,
                };
                let v = self.rpc(RpcMethod::TasksGet, to_value(&p), t).await?;
                reverse::task_from_v03(v).map_err(|err| invalid(&e.url, err))
            }
            (Binding::HttpJson, version) => {
                let mut path = format!("/tasks/{}", encode(id));
                if let Some(n) = history_length {
                    path.push_str(&format!("?historyLength={n}"));
                }
                let v = self.rest(Method::GET, &path, None, t).await?;
                match version {
                    ProtocolVersion::V1 => decode(&e.url, v),
                    ProtocolVersion::V03 => {
                        reverse::task_from_rest03(v).map_err(|err| invalid(&e.url, err))
                    }
                }
            }
        }
    }

    pub(super) async fn wire_cancel(&self, id: &str) -> Result<Task, ClientError> {
        let e = self.endpoint().clone();
        let t = self.inner.opts.request_timeout;
        match (e.binding, e.version) {
            (Binding::JsonRpc, ProtocolVersion::V1) => {
                let mut p = json!({"id": id});
                if let Some(tn) = &e.tenant {
                    p["tenant"] = json!(tn);
                }
                decode(&e.url, self.rpc(RpcMethod::CancelTask, p, t).await?)
            }
            (Binding::JsonRpc, ProtocolVersion::V03) => {
                let p = TaskIdParams03 {
                    id: id.to_string(),
                    metadata: None,
                };
                let v = self.rpc(RpcMethod::TasksCancel, to_value(&p), t).await?;
                reverse::task_from_v03(v).map_err(|err| invalid(&e.url, err))
            }
            (Binding::HttpJson, version) => {
                let path = format!("/tasks/{}:cancel", encode(id));
                let v = self.rest(Method::POST, &path, Some(json!({})), t).await?;
                match version {
                    ProtocolVersion::V1 => decode(&e.url, v),
                    ProtocolVersion::V03 => {
                        reverse::task_from_rest03(v).map_err(|err| invalid(&e.url, err))
                    }
                }
            }
        }
    }

    /// Opens an SSE stream; errors answered instead of a stream become [`ClientError`]s.
    pub(super) async fn open_stream(
        &self,
        op: &StreamOp,
        last_event_id: Option<&str>,
    ) -> Result<Response, ClientError> {
        let e = self.endpoint().clone();
        let t = self.inner.opts.connect_timeout;
        let mut attempts: Vec<(Method, String, Value)> = Vec::new();
        match (e.binding, e.version, op) {
            (Binding::JsonRpc, v, op) => {
                let (method, params) = match (v, op) {
                    (ProtocolVersion::V1, StreamOp::Send(r)) => {
                        let mut r = (**r).clone();
                        r.tenant = r.tenant.or(e.tenant.clone());
                        (RpcMethod::SendStreamingMessage, to_value(&r))
                    }
                    (ProtocolVersion::V1, StreamOp::Subscribe(id)) => {
                        let mut p = json!({"id": id});
                        if let Some(tn) = &e.tenant {
                            p["tenant"] = json!(tn);
                        }
                        (RpcMethod::SubscribeToTask, p)
                    }
                    (ProtocolVersion::V03, StreamOp::Send(r)) => (
                        RpcMethod::MessageStream,
                        to_value(&reverse::send_request_to_v03(r)),
                    ),
                    (ProtocolVersion::V03, StreamOp::Subscribe(id)) => {
                        (RpcMethod::TasksResubscribe, json!({"id": id}))
                    }
                };
                let body = json!({"jsonrpc": "2.0", "id": self.next_id(), "method": method.as_str(), "params": params});
                attempts.push((Method::POST, e.url.clone(), body));
            }
            (Binding::HttpJson, v, StreamOp::Send(r)) => {
                let body = match v {
                    ProtocolVersion::V1 => to_value(r),
                    ProtocolVersion::V03 => to_value(&reverse::send_request_to_rest03(r)),
                };
                attempts.push((Method::POST, self.rest_url("/message:stream"), body));
            }
            (Binding::HttpJson, _, StreamOp::Subscribe(id)) => {
                let url = self.rest_url(&format!("/tasks/{}:subscribe", encode(id)));
                // The spec text says POST, the v1.0 proto GET: try POST, then GET on 405.
                attempts.push((Method::POST, url.clone(), json!({})));
                attempts.push((Method::GET, url, Value::Null));
            }
        }
        let mut last_err = None;
        for (method, url, body) in attempts {
            let mut rb = self
                .request(method.clone(), &url)
                .header("Accept", "text/event-stream");
            if let Some(id) = last_event_id {
                rb = rb.header("Last-Event-ID", id);
            }
            if method == Method::POST {
                rb = rb.json(&body);
            }
            let connect = tokio::time::timeout(t, rb.send());
            let resp = match connect.await {
                Err(_) => {
                    return Err(ClientError::Timeout {
                        url,
                        seconds: t.as_secs_f64(),
                    })
                }
                Ok(r) => r.map_err(|err| self.transport_err(&url, err, t))?,
            };
            if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
                last_err = Some(ClientError::Http {
                    status: 405,
                    url,
                    body: String::new(),
                });
                continue;
            }
            let is_sse = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("text/event-stream"));
            if resp.status().is_success() && is_sse {
                return Ok(resp);
            }
            // An error (JSON-RPC error object or REST status body) instead of a stream.
            let v = self.read_json(&url, resp, t).await?;
            return Err(match v.get("error") {
                Some(err) if e.binding == Binding::JsonRpc => {
                    ClientError::Remote(RemoteError::from_jsonrpc(err))
                }
                _ => invalid(&url, format!("expected an event stream, got {v}")),
            });
        }
        Err(last_err.unwrap_or_else(|| invalid(&e.url, "no request was made")))
    }

    /// Decodes one SSE event into a v1 stream response.
    pub(super) fn decode_event(&self, ev: &SseEvent) -> Result<StreamResponse, ClientError> {
        let e = self.endpoint();
        let v: Value = serde_json::from_str(&ev.data)
            .map_err(|err| invalid(&e.url, format!("event data is not JSON: {err}")))?;
        let payload = match e.binding {
            Binding::JsonRpc => rpc_result(&e.url, v)?,
            Binding::HttpJson => {
                if v.get("error").is_some() || ev.event == "error" {
                    return Err(RemoteError::from_rest(0, &v)
                        .map(ClientError::Remote)
                        .unwrap_or_else(|| invalid(&e.url, format!("error event: {v}"))));
                }
                v
            }
        };
        match (e.binding, e.version) {
            (_, ProtocolVersion::V1) => decode(&e.url, payload),
            (Binding::JsonRpc, ProtocolVersion::V03) => {
                reverse::stream_event_from_v03(payload).map_err(|err| invalid(&e.url, err))
            }
            (Binding::HttpJson, ProtocolVersion::V03) => {
                reverse::stream_event_from_rest03(payload).map_err(|err| invalid(&e.url, err))
            }
        }
    }
}

/// The `result` of a JSON-RPC response, or its error.
fn rpc_result(url: &str, mut v: Value) -> Result<Value, ClientError> {
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(ClientError::Remote(RemoteError::from_jsonrpc(err)));
    }
    match v.get_mut("result") {
        Some(r) => Ok(r.take()),
        None => Err(invalid(url, "a JSON-RPC response without result or error")),
    }
}

/// Serializes one of our wire types (cannot fail: string keys, no failing serializers).
fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}
