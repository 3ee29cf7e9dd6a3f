//! `agent-host mcp --url URL`: MCP over stdio for a client that starts its servers as local
//! processes, relayed to a running host's `/mcp` endpoint (local or remote) with the
//! credentials given here.
//!
//! A bridge and not a second server: every message the client writes on stdin goes to the
//! host's Streamable HTTP endpoint as it was written, and every message the host answers
//! (results, errors, progress notifications) comes back on stdout as the host wrote it, so
//! the tools, their owners, limits and errors are the host's, and nothing here knows a tool.
//!
//! The messages are relayed as JSON, not through an MCP SDK's typed transports: those
//! decode each message into the types of the protocol version they know and encode it
//! again, which drops what they do not know, among it the MCP 2025-11-25 task parts
//! (`task` in a `tools/call`, the task results, `capabilities.tasks`); relayed unchanged,
//! `start_task` runs as an MCP task over stdio as it does over HTTP. What the transport adds
//! is done here: the headers (`Accept`, the credentials, `MCP-Protocol-Version` once
//! `initialize` has answered, a session id if the host gives one), reading an answer sent as
//! JSON or as server-sent events, and a client's `notifications/cancelled` closing the
//! request it names (which stops its waiting on the host).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use clap::Args;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use crate::client::sse::SseParser;

/// `agent-host mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The host's MCP endpoint, e.g. http://127.0.0.1:41242/mcp (a URL without a path gets
    /// /mcp).
    #[arg(long, env = "AGENT_HOST_URL")]
    pub url: String,
    /// Bearer token sent as `Authorization: Bearer ...`.
    #[arg(long, env = "A2A_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// API key sent in the --api-key-header header.
    #[arg(long, env = "AGENT_HOST_MCP_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The header the host reads API keys from.
    #[arg(long, default_value = "X-API-Key")]
    pub api_key_header: String,
}

/// Why the bridge stopped.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0}")]
    Usage(String),
    #[error("sending to the host: {0}")]
    Remote(String),
    #[error("writing to the client: {0}")]
    Local(String),
}

/// The endpoint URL: `url` itself, or `url` + `/mcp` when it names no path.
fn endpoint(url: &str) -> Result<String, BridgeError> {
    let parsed = url::Url::parse(url)
        .map_err(|e| BridgeError::Usage(format!("--url {url}: not a URL ({e})")))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(BridgeError::Usage(format!(
            "--url {url}: use an http:// or https:// URL"
        )));
    }
    if parsed.path() == "/" || parsed.path().is_empty() {
        return Ok(format!(
            "{}{}",
            url.trim_end_matches('/'),
            crate::server::mcp::PATH
        ));
    }
    Ok(url.to_string())
}

/// The headers every request to the host carries: the credentials.
fn credentials(args: &McpArgs) -> Result<HeaderMap, BridgeError> {
    let mut headers = HeaderMap::new();
    if let Some(t) = args.token.as_deref().filter(|t| !t.is_empty()) {
        let value = HeaderValue::try_from(format!("Bearer {t}"))
            .map_err(|_| BridgeError::Usage("--token: not a header value".into()))?;
        headers.insert(AUTHORIZATION, value);
    }
    if let Some(k) = args.api_key.as_deref().filter(|k| !k.is_empty()) {
        let name = HeaderName::try_from(args.api_key_header.as_str()).map_err(|_| {
            BridgeError::Usage(format!(
                "--api-key-header {}: not a header name",
                args.api_key_header
            ))
        })?;
        let value = HeaderValue::try_from(k)
            .map_err(|_| BridgeError::Usage("--api-key: not a header value".into()))?;
        headers.insert(name, value);
    }
    Ok(headers)
}

const PROTOCOL_HEADER: &str = "mcp-protocol-version";

/// How long a response waits after the notifications before it (see `pass_events`).
const NOTIFICATIONS_FIRST: std::time::Duration = std::time::Duration::from_millis(20);
const SESSION_HEADER: &str = "mcp-session-id";

/// The host side of the bridge.
struct Host {
    http: reqwest::Client,
    url: String,
    credentials: HeaderMap,
    /// The protocol version `initialize` agreed on, sent with every later request.
    version: Mutex<Option<HeaderValue>>,
    /// The session the host gave, if it gives one.
    session: Mutex<Option<HeaderValue>>,
    /// Requests under way, by their JSON-RPC id: a cancellation closes them.
    running: Mutex<HashMap<String, tokio::task::AbortHandle>>,
    /// Held (for writing) while an `initialize` is under way: a message the client sent
    /// after it goes out once its answer is in (its protocol version, its session).
    initializing: Arc<tokio::sync::RwLock<()>>,
    /// Lines for stdout.
    out: mpsc::UnboundedSender<String>,
    /// Set when the host could not be reached: the bridge then ends.
    gone: mpsc::UnboundedSender<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An HTTP answer of the host that carries no JSON-RPC message.
struct Refused {
    status: reqwest::StatusCode,
    retry_after: Option<String>,
}

impl Refused {
    /// What the client is told, in the bridge's terms: the headers that say more
    /// (`WWW-Authenticate`, `Retry-After`) never reach it.
    fn why(&self, body: &str) -> String {
        let status = self.status;
        match status.as_u16() {
            401 => "the host refused the bridge's credentials (HTTP 401): give the host's token with --token (or A2A_TOKEN), or its API key with --api-key (or AGENT_HOST_MCP_API_KEY)".to_string(),
            429 => format!(
                "the host's rate limit for this caller is reached (HTTP 429); retry in {} s",
                self.retry_after.as_deref().unwrap_or("a few")
            ),
            _ => format!("the host answered HTTP {status}: {}", body.trim()),
        }
    }
}

/// Relays between stdin/stdout and the host until either side ends.
pub async fn run(args: McpArgs) -> Result<(), BridgeError> {
    let url = endpoint(&args.url)?;
    let credentials = credentials(&args)?;
    let http = reqwest::Client::builder()
        .build()
        .map_err(|e| BridgeError::Usage(format!("HTTP client: {e}")))?;
    let (out, out_rx) = mpsc::unbounded_channel();
    let (gone, mut gone_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_lines(out_rx));
    let host = Arc::new(Host {
        http,
        url,
        credentials,
        version: Mutex::new(None),
        session: Mutex::new(None),
        running: Mutex::new(HashMap::new()),
        initializing: Arc::new(tokio::sync::RwLock::new(())),
        out,
        gone,
    });
    // Every message being relayed (requests and notifications).
    let mut relaying = tokio::task::JoinSet::new();
    let mut lines = stdin_lines();
    let mut ended = loop {
        while relaying.try_join_next().is_some() {}
        tokio::select! {
            line = lines.recv() => match line {
                Some(Ok(line)) => relay(&host, &line, &mut relaying),
                None => break Ok(()),
                Some(Err(e)) => break Err(BridgeError::Local(format!("reading stdin: {e}"))),
            },
            Some(why) = gone_rx.recv() => break Err(BridgeError::Remote(why)),
        }
    };
    if ended.is_ok() {
        // The client closed its input: what it asked is still answered (a client that
        // writes its requests and closes, as a pipe does), then the bridge ends. One that
        // will not wait stops the bridge (SIGTERM, as MCP's stdio shutdown says).
        while relaying.join_next().await.is_some() {}
        // A host that could not be reached meanwhile ends the bridge as it does otherwise.
        if let Ok(why) = gone_rx.try_recv() {
            ended = Err(BridgeError::Remote(why));
        }
    }
    relaying.abort_all();
    lock(&host.running).clear();
    drop(host);
    // What was answered is written before the bridge ends.
    let _ = writer.await;
    ended
}

/// The client's lines, read on a thread of their own that the process does not wait for:
/// tokio's stdin reads on the runtime's blocking pool, whose shutdown waits for a read that
/// may never return (a client that keeps stdin open), so a bridge that must end (the host
/// cannot be reached) would stay until the client wrote again.
fn stdin_lines() -> mpsc::UnboundedReceiver<std::io::Result<String>> {
    use std::io::BufRead;
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let failed = line.is_err();
            if tx.send(line).is_err() || failed {
                return;
            }
        }
    });
    rx
}

/// Writes each line to stdout, flushed, until every sender is gone.
async fn write_lines(mut rx: mpsc::UnboundedReceiver<String>) {
    let mut stdout = tokio::io::stdout();
    while let Some(line) = rx.recv().await {
        let written = async {
            stdout.write_all(line.as_bytes()).await?;
            stdout.write_all(b"\n").await?;
            stdout.flush().await
        };
        if let Err(e) = written.await {
            tracing::error!(error = %e, "MCP bridge: writing to the client failed");
            return;
        }
    }
}

/// Sends one line from the client to the host, without waiting for the answer: a tool call
/// that waits for its task must not hold up the client's next message (another call, or a
/// cancellation).
fn relay(host: &Arc<Host>, line: &str, relaying: &mut tokio::task::JoinSet<()>) {
    if line.trim().is_empty() {
        return;
    }
    let Ok(msg) = serde_json::from_str::<Value>(line) else {
        let _ = host
            .out
            .send(error_line(&Value::Null, -32700, "Parse error: not JSON"));
        return;
    };
    if msg.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
        if let Some(id) = msg.pointer("/params/requestId") {
            if let Some(h) = lock(&host.running).remove(&id.to_string()) {
                h.abort();
            }
        }
    }
    let request_id = msg.get("method").and(msg.get("id")).cloned();
    let h = host.clone();
    let key = request_id.as_ref().map(Value::to_string);
    // An `initialize` holds the gate until answered; what follows it waits at the gate. The
    // guard is taken here, in the order the client wrote, not in the spawned task.
    let initialize = msg.get("method").and_then(Value::as_str) == Some("initialize");
    let held = initialize
        .then(|| host.initializing.clone().try_write_owned().ok())
        .flatten();
    let gate = (!initialize).then(|| host.initializing.clone());
    let task = relaying.spawn(async move {
        let _held = held;
        let _passed = match gate {
            Some(g) => Some(g.read_owned().await),
            None => None,
        };
        let id = request_id.clone();
        if let Err(why) = h.post(msg).await {
            if let Some(id) = &id {
                let _ = h.out.send(error_line(id, -32603, &why));
            }
            let _ = h.gone.send(why);
        }
        if let Some(id) = id {
            lock(&h.running).remove(&id.to_string());
        }
    });
    if let Some(key) = key {
        lock(&host.running).insert(key, task);
    }
}

/// A JSON-RPC error response as a line.
fn error_line(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

impl Host {
    /// Posts one message and writes what the host answers. Err: the host could not be
    /// reached (the bridge ends).
    async fn post(&self, msg: Value) -> Result<(), String> {
        let initialize = msg.get("method").and_then(Value::as_str) == Some("initialize");
        let id = msg.get("method").and(msg.get("id")).cloned();
        let mut req = self
            .http
            .post(&self.url)
            .headers(self.credentials.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(msg.to_string());
        if let Some(v) = lock(&self.version).clone() {
            req = req.header(PROTOCOL_HEADER, v);
        }
        if let Some(s) = lock(&self.session).clone() {
            req = req.header(SESSION_HEADER, s);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| format!("the host at {} could not be reached: {e}", self.url))?;
        if let Some(s) = resp.headers().get(SESSION_HEADER) {
            *lock(&self.session) = Some(s.clone());
        }
        let status = resp.status();
        let sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if status.is_success() && sse {
            self.pass_events(resp, initialize).await;
        } else {
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = resp.bytes().await.unwrap_or_default();
            let refused = Refused {
                status,
                retry_after,
            };
            self.pass_body(&refused, &body, id.as_ref(), initialize);
        }
        Ok(())
    }

    /// Passes on each message of an answer sent as server-sent events.
    async fn pass_events(&self, mut resp: reqwest::Response, initialize: bool) {
        let mut parser = SseParser::new();
        let mut notified = false;
        while let Ok(Some(chunk)) = resp.chunk().await {
            for e in parser.push(&chunk) {
                let Ok(v) = serde_json::from_str::<Value>(&e.data) else {
                    continue;
                };
                let is_answer = v.get("method").is_none();
                if is_answer && notified {
                    // The TypeScript SDK handles a notification a moment after reading it
                    // but a response at once, so progress notifications that reach it in
                    // the same read as the response they precede are dropped: they go out
                    // first, on their own.
                    tokio::time::sleep(NOTIFICATIONS_FIRST).await;
                }
                notified = !is_answer;
                self.pass(v, initialize);
            }
        }
    }

    /// Passes on an answer sent as one JSON body; an HTTP error without a JSON-RPC message
    /// becomes one for the request it answers.
    fn pass_body(&self, refused: &Refused, body: &[u8], id: Option<&Value>, initialize: bool) {
        let status = refused.status;
        match serde_json::from_slice::<Value>(body) {
            Ok(mut v) if v.get("jsonrpc").is_some() => {
                // An error the host could not tie to the request (id null) is for this one.
                if let (Some(id), true) = (id, v.get("id").is_none_or(Value::is_null)) {
                    v["id"] = id.clone();
                }
                self.pass(v, initialize)
            }
            _ if status.is_success() => {}
            _ => {
                let Some(id) = id else { return };
                let why = refused.why(&String::from_utf8_lossy(body));
                let _ = self.out.send(error_line(id, -32603, &why));
            }
        }
    }

    /// Writes one message for the client; the answer to `initialize` also sets the protocol
    /// version of the later requests.
    fn pass(&self, msg: Value, initialize: bool) {
        if initialize {
            if let Some(v) = msg
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .and_then(|v| HeaderValue::try_from(v).ok())
            {
                *lock(&self.version) = Some(v);
            }
        }
        let _ = self.out.send(msg.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_path_gets_the_mcp_path() {
        assert_eq!(
            endpoint("http://127.0.0.1:41242").unwrap(),
            "http://127.0.0.1:41242/mcp"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:41242/").unwrap(),
            "http://127.0.0.1:41242/mcp"
        );
        assert_eq!(
            endpoint("https://h.example/x/mcp").unwrap(),
            "https://h.example/x/mcp"
        );
        assert!(endpoint("ftp://h").is_err());
        assert!(endpoint("not a url").is_err());
    }

    #[test]
    fn credentials_become_headers() {
        let args = McpArgs {
            url: "http://h".into(),
            token: Some("t0k".into()),
            api_key: Some("k3y".into()),
            api_key_header: "X-Key".into(),
        };
        let h = credentials(&args).unwrap();
        assert_eq!(h[AUTHORIZATION], "Bearer t0k");
        assert_eq!(h["x-key"], "k3y");
        let bad = McpArgs {
            api_key_header: "not a header".into(),
            ..args
        };
        assert!(credentials(&bad).is_err());
    }

    #[test]
    fn an_error_answers_the_request_it_is_for() {
        let v: Value = serde_json::from_str(&error_line(&json!(7), -32603, "no host")).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], -32603);
        assert_eq!(v["error"]["message"], "no host");
    }
}
