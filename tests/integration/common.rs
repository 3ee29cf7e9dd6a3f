//! Test harness: a server on 127.0.0.1:0 running fake-agent, and small HTTP/SSE helpers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agent_host::adapter::{PromptVia, Registry};
use agent_host::engine::launch::{child_env, Launch};
use agent_host::engine::Engine;
use agent_host::push::{PushService, Sealer};
use agent_host::server::{self, AppState, CardSettings, HttpLimits};
use agent_host::store::{MemoryStore, PushStore, SqliteStore, TaskStore};
use futures::StreamExt;
use serde_json::{json, Value};

/// Every test body runs under this limit: a hang is a failure.
pub const TEST_LIMIT: Duration = Duration::from_secs(60);

pub struct Options {
    pub timeout: Duration,
    pub idle_timeout: Duration,
    pub grace: Duration,
    pub max_line_bytes: usize,
    pub body_limit: usize,
    pub program: Option<PathBuf>,
    pub legacy_card: bool,
    pub adapter: &'static str,
    pub prompt_via: PromptVia,
    /// Keep tasks in a SQLite database in the test's directory instead of memory.
    pub sqlite: bool,
    /// ... or in this database file (survives the server, for restart tests).
    pub db: Option<PathBuf>,
    /// Push notifications on, with these settings.
    pub push: Option<agent_host::push::PushSettings>,
    /// Credentials, allowed hosts and origins.
    pub security: agent_host::settings::Security,
    /// Limits of the engine (running/queued tasks, subscribers, output) and the rate limit.
    pub host_limits: agent_host::settings::HostLimits,
    /// Directories a message may choose as its working directory.
    pub workspace_roots: Vec<PathBuf>,
    /// Extra variables in the CLI's environment (set after the adapter's own, so they win).
    pub env: Vec<(String, String)>,
    /// The CLI's HOME (default: the host's).
    pub home: Option<PathBuf>,
    /// Arguments before the adapter's own (what `AGENT_ARGS` gives).
    pub extra_args: Vec<String>,
    pub model: Option<String>,
    /// `AGENT_FORCE`: the adapter's `force_args`.
    pub force: bool,
    /// `AGENT_HOST_BLOCKING_WAIT_MS`: the longest wait of a blocking send.
    pub blocking_wait: Option<Duration>,
    /// Media types a message part may name (empty: the defaults).
    pub input_modes: Vec<String>,
    /// Serve the gRPC binding too, on its own free port.
    pub grpc: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            grace: Duration::from_millis(500),
            max_line_bytes: 16 * 1024 * 1024,
            body_limit: 4 * 1024 * 1024,
            program: None,
            legacy_card: true,
            adapter: "demo",
            prompt_via: PromptVia::Arg,
            sqlite: false,
            db: None,
            push: None,
            security: agent_host::settings::Security::default(),
            host_limits: agent_host::settings::HostLimits {
                rate_per_minute: 0,
                ..agent_host::settings::HostLimits::default()
            },
            workspace_roots: Vec::new(),
            env: vec![],
            home: None,
            extra_args: vec![],
            model: None,
            force: false,
            blocking_wait: None,
            input_modes: Vec::new(),
            grpc: false,
        }
    }
}

pub struct TestServer {
    pub base: String,
    /// `http://127.0.0.1:PORT` of the gRPC binding, when `Options::grpc`.
    pub grpc: Option<String>,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
}

pub fn fake_agent() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fake-agent"))
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::with(Options::default()).await
    }

    pub async fn with(o: Options) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("README.md"), "test project\n").expect("write");
        let adapter = Registry::builtin()
            .expect("registry")
            .get(o.adapter)
            .expect("adapter")
            .clone();
        let host_env: Vec<(String, String)> = std::env::vars().collect();
        let mut env = child_env(&adapter, &host_env, &[]);
        let home = o
            .home
            .as_ref()
            .map(|h| ("HOME".to_string(), h.display().to_string()));
        for (k, v) in o.env.iter().cloned().chain(home) {
            env.retain(|(ek, _)| *ek != k);
            env.push((k, v));
        }
        let launch = Launch {
            env,
            adapter,
            // The demo adapter runs `agent-host fake-agent`; jsonl runs the fake-agent binary.
            program: o.program.unwrap_or_else(|| {
                if o.adapter == "demo" || o.adapter == "conformance" {
                    PathBuf::from(env!("CARGO_BIN_EXE_agent-host"))
                } else {
                    fake_agent()
                }
            }),
            extra_args: o.extra_args.clone(),
            prompt_via: o.prompt_via,
            cwd: dir.path().to_path_buf(),
            model: o.model.clone(),
            force: o.force,
            max_line_bytes: o.max_line_bytes,
            timeout: o.timeout,
            idle_timeout: o.idle_timeout,
            cancel_grace: o.grace,
        };
        let db =
            o.db.clone()
                .or_else(|| o.sqlite.then(|| dir.path().join("tasks.db")));
        let (store, push_store): (Arc<dyn TaskStore>, Arc<dyn PushStore>) = match db {
            Some(path) => {
                let s = Arc::new(SqliteStore::open(&path).expect("sqlite store"));
                (s.clone(), s)
            }
            None => {
                let s = Arc::new(MemoryStore::new());
                (s.clone(), s)
            }
        };
        let input_modes = if o.input_modes.is_empty() {
            agent_host::engine::input::default_input_modes()
        } else {
            o.input_modes.clone()
        };
        let engine = Engine::with_config(
            store.clone(),
            launch,
            agent_host::engine::EngineConfig {
                limits: o.host_limits.clone(),
                workspace_roots: o.workspace_roots.clone(),
                secrets: o.security.secret_values(),
                input_modes: input_modes.clone(),
            },
        );
        let push = match o.push {
            Some(settings) => {
                let sealer = Sealer::from_hex(&"5a".repeat(32)).expect("key");
                let svc = PushService::start(settings, push_store, store.clone(), sealer)
                    .await
                    .expect("push service");
                let hook = svc.clone();
                engine.set_update_hook(Arc::new(move |t: &str| hook.on_update(t)));
                Some(svc)
            }
            None => None,
        };
        engine.recover().await.expect("recover");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let grpc_listener = match o.grpc {
            true => Some(
                tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind gRPC"),
            ),
            false => None,
        };
        let grpc_addr = grpc_listener
            .as_ref()
            .map(|l| l.local_addr().expect("gRPC addr"));
        let state = AppState {
            engine,
            card: CardSettings {
                path_prefix: String::new(),
                others: Vec::new(),
                cli_version: Default::default(),
                required_extensions: Vec::new(),
                input_modes,
                name: None,
                description: None,
                legacy_v03_fields: o.legacy_card,
                public_url: None,
                signer: None,
                grpc_port: grpc_addr.map(|a| a.port()),
            },
            local_addr: addr,
            started_at: SystemTime::now(),
            keepalive: Duration::from_millis(200),
            blocking_wait: o.blocking_wait,
            push,
            guard: Arc::new(agent_host::server::guard::Guard::new(
                o.security.clone(),
                addr,
                None,
                o.host_limits.rate_per_minute,
            )),
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let limits = HttpLimits {
            body_limit: o.body_limit,
            route_by_metadata: false,
        };
        let stop = async move {
            let _ = rx.await;
        };
        let handle = match grpc_listener {
            Some(l) => {
                let (stop, grpc) =
                    server::grpc::spawn(l, vec![state.clone()], state.guard.clone(), stop);
                tokio::spawn(async move {
                    let drain = Duration::from_secs(10);
                    let r = server::serve(listener, state, limits, stop, drain).await;
                    server::grpc::finish(grpc, drain).await;
                    r
                })
            }
            None => tokio::spawn(server::serve(
                listener,
                state,
                limits,
                stop,
                Duration::from_secs(10),
            )),
        };
        TestServer {
            base: format!("http://{addr}"),
            grpc: grpc_addr.map(|a| format!("http://{a}")),
            client: reqwest::Client::new(),
            stop: Some(tx),
            handle: Some(handle),
            _dir: dir,
        }
    }

    /// The agent's working directory (a fresh temporary directory).
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// Stops the server like SIGTERM would, and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let r = tokio::time::timeout(Duration::from_secs(20), h).await;
            assert!(r.is_ok(), "server did not stop in time");
        }
    }

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

    /// Polls GetTask until `pred` holds.
    pub async fn wait_task(&self, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..400 {
            let r = self.rpc("GetTask", json!({"id": id})).await;
            if pred(&r["result"]) {
                return r["result"].clone();
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("task {id} never reached the expected state");
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// One SSE frame.
#[derive(Debug, Clone)]
pub struct Frame {
    pub id: Option<u64>,
    pub data: Value,
}

pub struct SseReader {
    pub is_sse: bool,
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buf: String,
    pub pings: usize,
}

impl SseReader {
    /// Reads the SSE frames of a response.
    pub fn from_response(resp: reqwest::Response) -> SseReader {
        let ct = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        SseReader {
            is_sse: ct.starts_with("text/event-stream"),
            body: Box::pin(resp.bytes_stream()),
            buf: String::new(),
            pings: 0,
        }
    }

    /// The next data frame (keep-alive comments are counted and skipped); None at the end.
    pub async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let raw: String = self.buf.drain(..pos + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    } else if line.starts_with(':') {
                        self.pings += 1;
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data).expect("frame data is JSON");
                return Some(Frame { id, data });
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buf.push_str(&String::from_utf8_lossy(&chunk)),
                Some(Err(_)) | None => return None,
            }
        }
    }

    pub async fn all(&mut self) -> Vec<Frame> {
        let mut out = Vec::new();
        while let Some(f) = self.next().await {
            out.push(f);
        }
        out
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

/// The v1.0 state of each status update / task among frames.
pub fn states(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| {
            let r = &f.data["result"];
            r["statusUpdate"]["status"]["state"]
                .as_str()
                .or(r["task"]["status"]["state"].as_str())
                .or(r["status"]["state"].as_str())
                .map(str::to_string)
        })
        .collect()
}

/// True if a process with this pid exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let after = s
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start())
                .unwrap_or("");
            !after.starts_with('Z')
        }
        Err(_) => false,
    }
}

/// The process group of a live process.
pub fn pgrp_of(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    after.split_whitespace().nth(2)?.parse().ok()
}

/// Runs a test body under [`TEST_LIMIT`].
pub async fn limit<F: std::future::Future<Output = ()>>(f: F) {
    limit_to(TEST_LIMIT, f).await
}

/// Runs a test body under a longer limit (tests of real CLIs).
pub async fn limit_to<F: std::future::Future<Output = ()>>(max: Duration, f: F) {
    tokio::time::timeout(max, f)
        .await
        .expect("test took longer than its limit (a hang)");
}

/// An agent-host started from the binary: `serve --store memory` on a free port of
/// 127.0.0.1, in a temporary working directory, with the given environment and arguments;
/// killed when dropped.
pub struct HostProcess {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base: String,
    /// The root card, read once the host answered.
    pub card: Value,
    _dir: tempfile::TempDir,
}

impl HostProcess {
    pub async fn spawn(env: &[(&str, &str)], args: &[&str]) -> HostProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["serve", "--store", "memory", "--port", &port.to_string()])
            .args(args)
            .env("AGENT_REPO_PATH", dir.path())
            .env("AGENT_BINARY", fake_agent())
            .envs(env.iter().copied())
            .kill_on_drop(true)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn agent-host");
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(r) = client
                .get(format!("{base}/.well-known/agent-card.json"))
                .send()
                .await
            {
                let card = r.json().await.expect("card JSON");
                return HostProcess {
                    _child: child,
                    base,
                    card,
                    _dir: dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("agent-host did not serve its card within 10 s");
    }

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
}
