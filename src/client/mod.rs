//! An A2A client for orchestrators: discovers the agent card, picks an interface, and sends,
//! streams, gets, lists, cancels and subscribes over JSON-RPC or HTTP+JSON, A2A v1.0 or v0.3.
//!
//! One model for every server: the v1.0 types of [`crate::protocol::v1`]; v0.3 is converted on
//! the wire. Streams are [`EventStream`]s that resubscribe with `Last-Event-ID` when the
//! connection drops. Errors are [`ClientError`]s carrying the A2A code and reason.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agent_host::client::ClientError> {
//! use agent_host::client::{Client, Request};
//! use futures::StreamExt;
//!
//! let client = Client::builder("http://127.0.0.1:41242").bearer("secret").connect().await?;
//! let mut events = client.stream(Request::text("Add a health check").build()).await?;
//! while let Some(ev) = events.next().await {
//!     println!("{:?}", ev?.state());
//! }
//! # Ok(()) }
//! ```
//!
//! - [`card`]: card discovery (ETag caching) and interface selection;
//! - [`transport`]: the wire of each binding and version;
//! - [`stream`]: [`EventStream`] and its resubscribe logic;
//! - [`sse`]: the SSE parser; [`request`]: building messages, reading approvals.
//!
//! The `agent-host call` and `tasks` commands are built on it in [`crate::cli`].

pub mod card;
pub mod error;
pub mod request;
pub mod sse;
pub mod stream;
mod transport;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::Value;

pub use card::{
    select_interface, Binding, CachedCard, CardRefresh, Endpoint, Preferences, ProtocolVersion,
};
pub use error::{ClientError, RemoteError};
pub use request::{Approval, ApprovalOption, Request};
pub use stream::{collect, Event, EventStream};

use crate::protocol::card::AgentCard;
use crate::protocol::v1::{
    ListTasksRequest, ListTasksResponse, SendMessageRequest, SendMessageResponse, Task,
};
use transport::{encode, StreamOp};

/// Credentials sent with every request (the card fetch too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// `<header>: <key>` (e.g. `X-API-Key`).
    ApiKey { header: String, key: String },
    /// `Authorization: Basic base64(user:password)`.
    Basic { user: String, password: String },
}

impl Auth {
    fn apply(&self, rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::Bearer(t) => rb.bearer_auth(t),
            Auth::ApiKey { header, key } => rb.header(header.as_str(), key.as_str()),
            Auth::Basic { user, password } => rb.basic_auth(user, Some(password)),
        }
    }
}

/// Timeouts and retry limits.
#[derive(Debug, Clone)]
pub struct Options {
    /// get, list, cancel, the card: the whole request.
    pub request_timeout: Duration,
    /// A blocking send (the agent may work for long).
    pub send_timeout: Duration,
    /// Opening a connection (also the time to the first byte of a stream).
    pub connect_timeout: Duration,
    /// A stream without any data (keep-alives count) this long is taken as dropped.
    pub idle_timeout: Duration,
    /// Resubscribe attempts in a row before a broken stream is given up.
    pub max_resubscribes: u32,
    /// Pause before the first resubscribe (then 2×, 3×, ...).
    pub resubscribe_delay: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            request_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(3600),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(120),
            max_resubscribes: 5,
            resubscribe_delay: Duration::from_millis(250),
        }
    }
}

/// Configures and connects a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    base: String,
    auth: Option<Auth>,
    prefs: Preferences,
    opts: Options,
    endpoint: Option<Endpoint>,
    headers: Vec<(String, String)>,
    http: Option<reqwest::Client>,
}

impl ClientBuilder {
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// `Authorization: Bearer <token>`.
    pub fn bearer(self, token: impl Into<String>) -> Self {
        self.auth(Auth::Bearer(token.into()))
    }

    /// Only these bindings (default: JSON-RPC and HTTP+JSON).
    pub fn bindings(mut self, b: Vec<Binding>) -> Self {
        self.prefs.bindings = b;
        self
    }

    /// Only these versions, preferred first (default: 1.0, then 0.3).
    pub fn versions(mut self, v: Vec<ProtocolVersion>) -> Self {
        self.prefs.versions = v;
        self
    }

    pub fn options(mut self, o: Options) -> Self {
        self.opts = o;
        self
    }

    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.opts.request_timeout = d;
        self
    }

    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.opts.idle_timeout = d;
        self
    }

    pub fn max_resubscribes(mut self, n: u32) -> Self {
        self.opts.max_resubscribes = n;
        self
    }

    /// Talk to this interface; the card is not read.
    pub fn endpoint(mut self, e: Endpoint) -> Self {
        self.endpoint = Some(e);
        self
    }

    /// A header sent with every request, besides the credentials (e.g. a caller's own
    /// credentials passed on as they came).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Use this HTTP client (and its connection pool) instead of building one; its own
    /// connect timeout applies instead of [`Options::connect_timeout`].
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    /// Reads the card (unless an endpoint was given) and picks the interface.
    pub async fn connect(self) -> Result<Client, ClientError> {
        let http = match self.http {
            Some(h) => h,
            None => reqwest::Client::builder()
                .connect_timeout(self.opts.connect_timeout)
                .user_agent(concat!("agent-host/", env!("CARGO_PKG_VERSION")))
                .build()
                .map_err(|e| ClientError::Usage(format!("cannot build the HTTP client: {e}")))?,
        };
        let mut inner = Inner {
            http,
            base: self.base,
            auth: self.auth,
            headers: self.headers,
            opts: self.opts,
            card: Mutex::new(None),
            endpoint: self.endpoint.clone().unwrap_or(Endpoint {
                url: String::new(),
                binding: Binding::JsonRpc,
                version: ProtocolVersion::V1,
                tenant: None,
            }),
            ids: AtomicU64::new(1),
        };
        if self.endpoint.is_none() {
            let cached = fetch_card(&inner, None)
                .await?
                .ok_or_else(|| ClientError::Card {
                    url: inner.base.clone(),
                    detail: "304 without a cached card".into(),
                })?;
            inner.endpoint = select_interface(&cached.card, &self.prefs)?;
            inner.card = Mutex::new(Some(cached));
        }
        Ok(Client {
            inner: Arc::new(inner),
        })
    }
}

struct Inner {
    http: reqwest::Client,
    base: String,
    auth: Option<Auth>,
    /// Sent with every request.
    headers: Vec<(String, String)>,
    opts: Options,
    card: Mutex<Option<CachedCard>>,
    endpoint: Endpoint,
    ids: AtomicU64,
}

/// An A2A client bound to one interface of one agent. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.inner.base)
            .field("endpoint", &self.inner.endpoint)
            .finish()
    }
}

/// GET the card; with an ETag, `If-None-Match` (None back on 304).
async fn fetch_card(inner: &Inner, etag: Option<&str>) -> Result<Option<CachedCard>, ClientError> {
    let urls = card::card_urls(&inner.base);
    let t = inner.opts.request_timeout;
    let mut last = None;
    for url in urls {
        let mut rb = inner.http.get(&url).timeout(t);
        if let Some(a) = &inner.auth {
            rb = a.apply(rb);
        }
        for (k, v) in &inner.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(e) = etag {
            rb = rb.header("If-None-Match", e);
        }
        let resp = rb.send().await.map_err(|e| {
            if e.is_connect() {
                error::transport_error(&inner.base, e)
            } else {
                ClientError::Card {
                    url: url.clone(),
                    detail: e.to_string(),
                }
            }
        })?;
        match resp.status() {
            StatusCode::NOT_MODIFIED => return Ok(None),
            StatusCode::NOT_FOUND => {
                last = Some(ClientError::Card {
                    url,
                    detail: "404 Not Found".into(),
                });
                continue;
            }
            s if !s.is_success() => {
                return Err(ClientError::Card {
                    url,
                    detail: format!("HTTP {s}"),
                })
            }
            _ => {}
        }
        let etag = resp
            .headers()
            .get("etag")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let raw: Value = resp.json().await.map_err(|e| ClientError::Card {
            url: url.clone(),
            detail: format!("not JSON: {e}"),
        })?;
        let card = card::parse_card(raw.clone()).map_err(|e| ClientError::Card {
            url: url.clone(),
            detail: e.to_string(),
        })?;
        return Ok(Some(CachedCard {
            card,
            raw,
            etag,
            url,
        }));
    }
    Err(last.unwrap_or_else(|| ClientError::Usage("no card URL".into())))
}

impl Client {
    /// A builder for the agent at `base_url` (its card is at
    /// `{base_url}/.well-known/agent-card.json`).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            auth: None,
            prefs: Preferences::default(),
            opts: Options::default(),
            endpoint: None,
            headers: Vec::new(),
            http: None,
        }
    }

    /// The agent's base URL, as given to [`Client::builder`].
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }

    /// Connects with the defaults.
    pub async fn connect(base_url: impl Into<String>) -> Result<Client, ClientError> {
        Client::builder(base_url).connect().await
    }

    /// The interface in use.
    pub fn endpoint(&self) -> &Endpoint {
        &self.inner.endpoint
    }

    /// The card as last read (None when the client was given an endpoint).
    pub fn card(&self) -> Option<AgentCard> {
        self.cached_card().map(|c| c.card)
    }

    /// The card with its raw JSON and ETag.
    pub fn cached_card(&self) -> Option<CachedCard> {
        self.inner.card.lock().ok().and_then(|c| c.clone())
    }

    /// Revalidates the card with `If-None-Match` (the interface in use does not change).
    pub async fn refresh_card(&self) -> Result<CardRefresh, ClientError> {
        let etag = self.cached_card().and_then(|c| c.etag);
        match fetch_card(&self.inner, etag.as_deref()).await? {
            None => Ok(CardRefresh::NotModified),
            Some(c) => {
                if let Ok(mut g) = self.inner.card.lock() {
                    *g = Some(c);
                }
                Ok(CardRefresh::Updated)
            }
        }
    }

    fn next_id(&self) -> u64 {
        self.inner.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends a message. Blocking by default (the answer comes when the task ended or waits
    /// for input); with `returnImmediately` at once.
    pub async fn send(
        &self,
        req: impl Into<SendMessageRequest>,
    ) -> Result<SendMessageResponse, ClientError> {
        let req = req.into();
        let t = if req
            .configuration
            .as_ref()
            .is_some_and(|c| c.return_immediately)
        {
            self.inner.opts.request_timeout
        } else {
            self.inner.opts.send_timeout
        };
        self.wire_send(req, t).await
    }

    /// Sends a message and streams the task's events.
    pub async fn stream(
        &self,
        req: impl Into<SendMessageRequest>,
    ) -> Result<EventStream, ClientError> {
        let req = req.into();
        let task_id = req.message.task_id.clone();
        let op = StreamOp::Send(Box::new(req));
        let resp = self.open_stream(&op, None).await?;
        Ok(EventStream::new(self.clone(), resp, task_id, None))
    }

    /// Answers a task that waits for input (an approval: `yes` / `no`; a question: the
    /// answer), streaming what follows.
    pub async fn answer(&self, task_id: &str, text: &str) -> Result<EventStream, ClientError> {
        self.stream(Request::text(text).task(task_id)).await
    }

    /// Follows a running task: the task as it is now, then its events.
    pub async fn subscribe(&self, task_id: &str) -> Result<EventStream, ClientError> {
        self.subscribe_from(task_id, None).await
    }

    /// Follows a task from after the event with this id (`Last-Event-ID`), replaying what
    /// was missed.
    pub async fn subscribe_from(
        &self,
        task_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<EventStream, ClientError> {
        let op = StreamOp::Subscribe(task_id.to_string());
        let resp = self.open_stream(&op, last_event_id).await?;
        Ok(EventStream::new(
            self.clone(),
            resp,
            Some(task_id.to_string()),
            last_event_id.map(str::to_string),
        ))
    }

    /// The task now.
    pub async fn get_task(&self, task_id: &str) -> Result<Task, ClientError> {
        self.wire_get(task_id, None).await
    }

    /// The task with at most `history_length` history messages.
    pub async fn get_task_with_history(
        &self,
        task_id: &str,
        history_length: i32,
    ) -> Result<Task, ClientError> {
        self.wire_get(task_id, Some(history_length)).await
    }

    /// Cancels a task; the task as canceled.
    pub async fn cancel(&self, task_id: &str) -> Result<Task, ClientError> {
        self.wire_cancel(task_id).await
    }

    /// Lists tasks (A2A v1.0 only).
    pub async fn list_tasks(
        &self,
        req: ListTasksRequest,
    ) -> Result<ListTasksResponse, ClientError> {
        let e = self.endpoint().clone();
        let t = self.inner.opts.request_timeout;
        let v = match (e.binding, e.version) {
            (_, ProtocolVersion::V03) => {
                return Err(ClientError::Unsupported {
                    operation: "ListTasks",
                    version: "0.3",
                })
            }
            (Binding::JsonRpc, _) => {
                let mut req = req;
                req.tenant = req.tenant.or(e.tenant.clone());
                let p = serde_json::to_value(&req).unwrap_or_default();
                self.rpc(crate::protocol::Method::ListTasks, p, t).await?
            }
            (Binding::HttpJson, _) => {
                let mut q: Vec<String> = Vec::new();
                let mut add = |k: &str, v: String| q.push(format!("{k}={}", encode(&v)));
                if let Some(c) = &req.context_id {
                    add("contextId", c.clone());
                }
                if let Some(s) = req.status {
                    add("status", s.as_proto_name().to_string());
                }
                if let Some(n) = req.page_size {
                    add("pageSize", n.to_string());
                }
                if let Some(p) = &req.page_token {
                    add("pageToken", p.clone());
                }
                if let Some(n) = req.history_length {
                    add("historyLength", n.to_string());
                }
                if let Some(ts) = &req.status_timestamp_after {
                    add("statusTimestampAfter", ts.clone());
                }
                if let Some(b) = req.include_artifacts {
                    add("includeArtifacts", b.to_string());
                }
                let path = if q.is_empty() {
                    "/tasks".to_string()
                } else {
                    format!("/tasks?{}", q.join("&"))
                };
                self.rest(Method::GET, &path, None, t).await?
            }
        };
        serde_json::from_value(v).map_err(|err| ClientError::InvalidResponse {
            url: e.url,
            detail: err.to_string(),
        })
    }
}
