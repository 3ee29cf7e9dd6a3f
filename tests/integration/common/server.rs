//! The server under test: in this process ([`TestServer`], on 127.0.0.1:0 with the demo
//! agent) or as the `agent-host` binary ([`HostProcess`]).

use std::path::PathBuf;
use std::time::Duration;

use agent_host::adapter::PromptVia;
use agent_host::app::App;
use agent_host::settings::{PushConfig, PushKey, ServeArgs, Settings, StoreChoice, TurnLimits};
use serde_json::Value;

use super::agents::fake_agent;

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
    /// ... or in this PostgreSQL database (a URL), which other servers may share.
    pub postgres: Option<String>,
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
    /// The sandbox of each turn (default: off, so the tests see the agent's real pids).
    pub sandbox: agent_host::settings::sandbox::SandboxSettings,
    /// Serve the gRPC binding too, on its own free port.
    pub grpc: bool,
    /// Serve MCP at `/mcp` (the default).
    pub mcp: bool,
    /// With a shared PostgreSQL store: host id, heartbeat and lease (default: the defaults).
    pub cluster: Option<agent_host::settings::cluster::ClusterSettings>,
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
            postgres: None,
            cluster: None,
            push: None,
            security: agent_host::settings::Security::default(),
            // No request or failed-login throttling unless a test asks for it.
            host_limits: agent_host::settings::HostLimits {
                rate_per_minute: 0,
                auth_failures_per_minute: 0,
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
            sandbox: agent_host::settings::sandbox::SandboxSettings {
                mode: Some(agent_host::runner::sandbox::Mode::Off),
                ..Default::default()
            },
            grpc: false,
            mcp: true,
        }
    }
}

impl Options {
    /// The settings these options stand for, with the agent working in `dir`: what
    /// `agent-host serve` would resolve from the matching flags (the CLI's HOME and extra
    /// variables go through `Settings::agent_env`, the push key is a fixed one).
    pub fn settings(&self, dir: &std::path::Path) -> Settings {
        let o = self;
        let repo = dir.to_str().expect("a UTF-8 test directory");
        let args =
            ServeArgs::from_flags(["--repo-path", repo, "--store", "memory"]).expect("flags");
        let mut s = Settings::resolve(&args).expect("settings");
        s.adapter = Some(o.adapter.to_string());
        // The demo adapter runs `agent-host fake-agent`; jsonl runs the fake-agent binary.
        let program = o.program.clone().unwrap_or_else(|| {
            if o.adapter == "demo" || o.adapter == "conformance" {
                PathBuf::from(env!("CARGO_BIN_EXE_agent-host"))
            } else {
                fake_agent()
            }
        });
        s.binary = Some(program.display().to_string());
        s.limits = TurnLimits {
            timeout: Some(o.timeout),
            idle_timeout: Some(o.idle_timeout),
            cancel_grace: Some(o.grace),
            max_line_bytes: Some(o.max_line_bytes),
        };
        s.body_limit = o.body_limit;
        s.card_legacy_v03 = o.legacy_card;
        s.prompt_via = Some(o.prompt_via);
        let db =
            o.db.clone()
                .or_else(|| o.sqlite.then(|| dir.join("tasks.db")));
        s.store = db.map_or(StoreChoice::Memory, StoreChoice::Sqlite);
        if let Some(url) = &o.postgres {
            s.store = StoreChoice::Postgres(url.clone());
        }
        if let Some(c) = &o.cluster {
            s.cluster = c.clone();
        }
        s.push = o.push.clone().map(|delivery| PushConfig {
            delivery,
            key: PushKey::Hex("5a".repeat(32)),
        });
        s.security = o.security.clone();
        s.host_limits = o.host_limits.clone();
        s.workspace_roots = o.workspace_roots.clone();
        s.agent_env = o.env.clone();
        if let Some(h) = &o.home {
            s.agent_env.push(("HOME".into(), h.display().to_string()));
        }
        s.args = o.extra_args.clone();
        s.model = o.model.clone();
        s.force = o.force;
        s.sandbox = o.sandbox.clone();
        s.grpc_port = o.grpc.then_some(0);
        s.mcp = o.mcp;
        s.blocking_wait = o.blocking_wait;
        if !o.input_modes.is_empty() {
            s.input_modes = o.input_modes.clone();
        }
        s.sse_keepalive = Duration::from_millis(200);
        s
    }
}

pub struct TestServer {
    pub base: String,
    /// `http://127.0.0.1:PORT` of the gRPC binding, when `Options::grpc`.
    pub grpc: Option<String>,
    pub client: reqwest::Client,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<Result<(), agent_host::app::StartError>>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub async fn start() -> TestServer {
        TestServer::with(Options::default()).await
    }

    pub async fn with(o: Options) -> TestServer {
        // Contained turns start through the binary's setup mode, as `agent-host serve` does.
        agent_host::runner::sandbox::setup::use_helper(env!("CARGO_BIN_EXE_agent-host").into());
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("README.md"), "test project\n").expect("write");
        let settings = o.settings(dir.path());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let app = App::start(&settings, addr).await.expect("start");
        let grpc_addr = app.grpc_addr();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(app.serve(listener, async move {
            let _ = rx.await;
        }));
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
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// An agent-host started from the binary: `serve --store memory --port 0` on 127.0.0.1 (the
/// child picks a free port and its log names it), in a temporary working directory, with the
/// given environment and arguments; killed when dropped.
pub struct HostProcess {
    _child: tokio::process::Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base: String,
    /// The root card, read once the host answered.
    pub card: Value,
    /// Its log (stderr) up to the line naming its address: what it said at start.
    pub start_log: Vec<String>,
    /// Its log after the start, as it comes.
    log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

/// The body of `GET path` from the host at `addr`, on a connection of its own that the host
/// has closed when this returns. So the host holds none of its connection places for it
/// when a test starts (the connection-cap tests count them): a pooled client connection, or
/// one the client merely stopped using, is let go at some later moment, and a place freed in
/// the middle of such a test let a request in that the test expected refused.
async fn get_until_closed(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    // Read until the host closes the connection (after its answer, as asked).
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .expect("the host closes the connection after answering")
        .expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(head.starts_with("HTTP/1.1 200"), "GET {path}: {head}");
    body.to_string()
}

impl HostProcess {
    /// A host serving the `demo` and `jsonl` adapters on one port, the root routed by
    /// message metadata and conversation when `routed` (`--route-by-metadata`).
    pub async fn two_adapters(routed: bool) -> HostProcess {
        let routed = if routed { "true" } else { "false" };
        HostProcess::spawn(
            &[
                ("AGENT_ADAPTER", "demo,jsonl"),
                ("AGENT_ROUTE_BY_METADATA", routed),
            ],
            &[],
        )
        .await
    }

    pub async fn spawn(env: &[(&str, &str)], args: &[&str]) -> HostProcess {
        let dir = tempfile::tempdir().expect("tempdir");
        // A memory store unless the arguments name one.
        let store: &[&str] = if args.contains(&"--store") {
            &[]
        } else {
            &["--store", "memory"]
        };
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"));
        cmd.args(["serve", "--port", "0"])
            .args(store)
            .args(args)
            .env("AGENT_REPO_PATH", dir.path())
            .env("AGENT_BINARY", fake_agent())
            .env("RUST_LOG", "info")
            .envs(env.iter().copied());
        HostProcess::start(cmd, dir).await
    }

    /// Starts `cmd`, a command that ends up running `agent-host serve ... --port 0` in its
    /// own process (directly, or through `nsenter`, which execs it), with `dir` as the
    /// scratch directory kept as long as the host.
    pub async fn start(mut cmd: tokio::process::Command, dir: tempfile::TempDir) -> HostProcess {
        use tokio::io::AsyncBufReadExt;
        let mut child = cmd
            .kill_on_drop(true)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn agent-host");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        // The log line "agent-host listening on http://ADDR ..." names the bound address.
        let mut seen = Vec::new();
        let found = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(line)) = lines.next_line().await {
                seen.push(line.clone());
                if let Some((_, rest)) = line.split_once("listening on http://") {
                    let addr: String = rest
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '"')
                        .collect();
                    return Some(addr);
                }
            }
            None
        })
        .await;
        let addr = match found {
            Ok(Some(addr)) => addr,
            _ => panic!(
                "agent-host did not log its address within 10 s; its log:\n{}",
                seen.join("\n")
            ),
        };
        // Keep reading the log so that the child never blocks on a full pipe.
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock().expect("log lock").push(line);
            }
        });
        let base = format!("http://{addr}");
        let card = get_until_closed(&addr, "/.well-known/agent-card.json").await;
        let card = serde_json::from_str(&card).unwrap_or_else(|e| panic!("card JSON: {e}: {card}"));
        HostProcess {
            _child: child,
            base,
            card,
            start_log: seen,
            log,
            _dir: dir,
        }
    }

    /// Its log lines since the start that contain every one of `words`.
    pub fn log_lines(&self, words: &[&str]) -> Vec<String> {
        self.log
            .lock()
            .expect("log lock")
            .iter()
            .filter(|l| words.iter().all(|w| l.contains(w)))
            .cloned()
            .collect()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self._child.id().expect("the host runs")
    }

    /// Stops the host (SIGSTOP), as a host that stalls: it neither works nor renews its
    /// lease until [`HostProcess::resume`].
    pub fn pause(&self) {
        signal(self.pid(), nix::sys::signal::Signal::SIGSTOP);
    }

    /// Lets a paused host go on (SIGCONT).
    pub fn resume(&self) {
        signal(self.pid(), nix::sys::signal::Signal::SIGCONT);
    }

    /// Kills the host (SIGKILL, as a crash) and waits until it is gone.
    pub async fn kill(mut self) {
        let _ = self._child.kill().await;
    }

    /// SIGKILLs the host (its agents are left orphaned, as after a crash) and reaps it.
    pub async fn kill9(&mut self) {
        let _ = self._child.kill().await;
    }
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("a pid"));
    nix::sys::signal::kill(pid, sig).expect("signal the host");
}
