//! The flags of `agent-host serve` (and of the commands that share them).

use std::path::PathBuf;

use clap::Args;

use crate::adapter::PromptVia;

/// A flag value (or its environment variable) that is not one of the accepted words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlagValueError {
    #[error("'{0}' is not a boolean (use true or false)")]
    NotABool(String),
    #[error("'{0}' is not one of arg, stdin, protocol")]
    NotAPromptVia(String),
}

pub(super) fn parse_bool(s: &str) -> Result<bool, FlagValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" | "" => Ok(false),
        other => Err(FlagValueError::NotABool(other.to_string())),
    }
}

fn parse_prompt_via(s: &str) -> Result<PromptVia, FlagValueError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "arg" | "argument" => Ok(PromptVia::Arg),
        "stdin" => Ok(PromptVia::Stdin),
        "protocol" => Ok(PromptVia::Protocol),
        other => Err(FlagValueError::NotAPromptVia(other.to_string())),
    }
}

/// Flags of `agent-host serve`; every one can also come from the environment variable named
/// in its help, and from the config file.
#[derive(Debug, Clone, Args, Default)]
pub struct ServeArgs {
    /// TOML config file (see config/agent-host.toml)
    #[arg(long, env = "AGENT_HOST_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Adapter to serve (demo, jsonl, ...); unset: the first installed known CLI, else demo
    #[arg(long, env = "AGENT_ADAPTER", value_name = "ID")]
    pub adapter: Option<String>,
    /// Port to listen on [default: 41242]; ignored when --bind includes a port; 0 picks a
    /// free one (the log line "agent-host listening on http://ADDR" names it)
    #[arg(long, env = "PORT")]
    pub port: Option<u16>,
    /// Address to bind, ADDR or ADDR:PORT [default: 127.0.0.1]
    #[arg(long, env = "AGENT_HOST_BIND", value_name = "ADDR[:PORT]")]
    pub bind: Option<String>,
    /// Serve the A2A gRPC binding on this port too (same address as --bind; 0: any free port)
    /// [default: off]
    #[arg(long, env = "AGENT_HOST_GRPC_PORT", value_name = "PORT")]
    pub grpc_port: Option<u16>,
    /// Base URL advertised in the agent card [default: from the request's Host header]
    #[arg(long, env = "AGENT_HOST_PUBLIC_URL", value_name = "URL")]
    pub public_url: Option<String>,
    /// Hard time limit of a task in ms [default: 1800000 = 30 min]
    #[arg(long, env = "AGENT_TIMEOUT_MS", value_name = "MS")]
    pub timeout_ms: Option<u64>,
    /// A task whose agent prints nothing for this long fails, in ms; paused while the task waits for input [default: 600000 = 10 min]
    #[arg(long, env = "AGENT_IDLE_EXIT_MS", value_name = "MS")]
    pub idle_timeout_ms: Option<u64>,
    /// Time between SIGTERM and SIGKILL when stopping an agent, in ms [default: 5000]
    #[arg(long, env = "AGENT_CANCEL_GRACE_MS", value_name = "MS")]
    pub cancel_grace_ms: Option<u64>,
    /// Working directory of the agents [default: the current directory]
    #[arg(long, env = "AGENT_REPO_PATH", value_name = "DIR")]
    pub repo_path: Option<PathBuf>,
    /// Skip the agents' approval prompts (adapters' force_args) [default: false]
    #[arg(long, env = "AGENT_FORCE", value_name = "BOOL", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub force: Option<bool>,
    /// With several adapters: a message sent to the root endpoints may name its adapter in
    /// `metadata.agent` (and later calls on its task are routed to it) [default: false]
    #[arg(long, env = "AGENT_ROUTE_BY_METADATA", value_name = "BOOL", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub route_by_metadata: Option<bool>,
    /// Model passed to the agent (adapters' model_args)
    #[arg(long, env = "AGENT_MODEL")]
    pub model: Option<String>,
    /// Program to run: required by the jsonl adapter, replaces any adapter's binary (<ID>_PATH still wins)
    #[arg(long, env = "AGENT_BINARY", value_name = "PROGRAM")]
    pub binary: Option<String>,
    /// Extra arguments for the program, shell-style words, placed before the adapter's own
    #[arg(
        long = "args",
        env = "AGENT_ARGS",
        value_name = "WORDS",
        allow_hyphen_values = true
    )]
    pub agent_args: Option<String>,
    /// Regular expression of an output line that asks the user something (text adapters such as generic: the task goes input-required)
    #[arg(long, env = "AGENT_APPROVAL_PATTERN", value_name = "REGEX")]
    pub approval_pattern: Option<String>,
    /// Text written to the program when the user answers yes (default "y" and a newline)
    #[arg(long, env = "AGENT_APPROVAL_RESPONSE", value_name = "TEXT")]
    pub approval_response: Option<String>,
    /// How the prompt reaches the program: arg (last argument), stdin (then closed) or protocol [default: the adapter's `prompt`]
    #[arg(long, env = "AGENT_PROMPT_VIA", value_name = "arg|stdin|protocol", value_parser = parse_prompt_via)]
    pub prompt_via: Option<PromptVia>,
    /// Directory of adapter TOML files that add to or override the built-in ones (same id wins)
    #[arg(long, env = "AGENT_HOST_ADAPTERS_DIR", value_name = "DIR")]
    pub adapters_dir: Option<PathBuf>,
    /// Extra host environment variables passed to the agents, comma-separated
    #[arg(
        long,
        env = "AGENT_PASS_ENV",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub pass_env: Option<Vec<String>>,
    /// Media types a message part may name, comma-separated: type/subtype, type/* or */*; parts of other types get -32005, binary ones are saved as files for the agent [default: text/plain,application/json,*/*]
    #[arg(
        long,
        env = "AGENT_INPUT_MODES",
        value_name = "TYPES",
        value_delimiter = ','
    )]
    pub input_modes: Option<Vec<String>>,
    /// Longest agent output line kept, in bytes [default: 16 MiB]
    #[arg(long, env = "AGENT_MAX_LINE_BYTES", value_name = "BYTES")]
    pub max_line_bytes: Option<usize>,
    /// Largest request body, in bytes [default: 4 MiB]
    #[arg(long, env = "AGENT_HOST_BODY_LIMIT", value_name = "BYTES")]
    pub body_limit: Option<usize>,
    /// Serve the web console at /ui/ [default: on when bound to a loopback address, else off]
    #[arg(long, env = "AGENT_HOST_UI", value_name = "BOOL", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub ui: Option<bool>,
    /// Longest a blocking send waits for the task to finish or ask for input before it answers with the task as it is (still working; follow it with GetTask or a subscription); 0 waits as long as the task runs [default: 0]
    #[arg(long, env = "AGENT_HOST_BLOCKING_WAIT_MS", value_name = "MS")]
    pub blocking_wait_ms: Option<u64>,
    /// Add the v0.3 top-level fields to the agent card served without A2A-Version 1.x (a request with it gets the pure v1.0 card) [default: true]
    #[arg(long, env = "AGENT_HOST_CARD_LEGACY_V03", value_name = "BOOL", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub card_legacy_v03: Option<bool>,
    /// Extensions every request must name in its A2A-Extensions header, comma-separated (urn:agent-host:tool-trace:v1, urn:agent-host:approval:v1) [default: none]
    #[arg(
        long,
        env = "AGENT_HOST_REQUIRED_EXTENSIONS",
        value_name = "URI,...",
        value_delimiter = ','
    )]
    pub required_extensions: Option<Vec<String>>,
    /// Sign the agent card (JWS, RFC 8785 canonical JSON): HS256, ES256 or RS256 [default: unsigned]
    #[arg(long, env = "AGENT_HOST_CARD_SIGN_ALG", value_name = "ALG")]
    pub card_sign_alg: Option<String>,
    /// Card signing key: the secret for HS256, or the path of a PEM private key file (PKCS#8; SEC1/PKCS#1 too) for ES256/RS256
    #[arg(
        long,
        env = "AGENT_HOST_CARD_SIGN_KEY",
        value_name = "SECRET|PATH",
        hide_env_values = true
    )]
    pub card_sign_key: Option<String>,
    /// Key id (`kid`) of the card signature [default: first 16 hex digits of the SHA-256 of the secret or public key]
    #[arg(long, env = "AGENT_HOST_CARD_SIGN_KID", value_name = "KID")]
    pub card_sign_kid: Option<String>,
    /// Where tasks are kept: sqlite (the default database in the data directory), sqlite:PATH, memory (gone when the host stops), or postgres://USER@HOST:PORT/DB (a PostgreSQL database)
    #[arg(
        long,
        env = "AGENT_HOST_STORE",
        value_name = "sqlite[:PATH]|memory|postgres://..."
    )]
    pub store: Option<String>,
    /// Push notifications (webhooks) on [default: false]
    #[arg(long, env = "AGENT_PUSH", value_name = "BOOL", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub push: Option<bool>,
    /// Allow webhooks to loopback, private and link-local addresses (local testing only) [default: false]
    #[arg(long, env = "AGENT_PUSH_ALLOW_PRIVATE", value_name = "BOOL", value_parser = parse_bool, num_args = 0..=1, default_missing_value = "true")]
    pub push_allow_private: Option<bool>,
    /// Key sealing push secrets at rest, 64 hex digits [default: a key file next to the database]
    #[arg(
        long,
        env = "AGENT_PUSH_KEY",
        value_name = "HEX",
        hide_env_values = true
    )]
    pub push_key: Option<String>,
    /// A bearer token clients must send (Authorization: Bearer ...); its tasks belong to "token"
    #[arg(
        long,
        env = "AGENT_HOST_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// An API key clients must send in the API key header (X-API-Key, or [auth] api_key_header in the config file); its tasks belong to "api-key"
    #[arg(
        long,
        env = "AGENT_HOST_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// Serve on a non-loopback address without any credential (anyone who can connect runs commands here)
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// Host header values accepted besides localhost/127.0.0.1/[::1], comma-separated ("*" = any)
    #[arg(
        long,
        env = "AGENT_HOST_ALLOWED_HOSTS",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub allowed_hosts: Option<Vec<String>>,
    /// Browser origins allowed to call (CORS), comma-separated; none by default
    #[arg(
        long,
        env = "AGENT_HOST_ALLOWED_ORIGINS",
        value_name = "ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Option<Vec<String>>,
    /// Directories a message's metadata.cwd may name, comma- or colon-separated [default: the repo path]
    #[arg(long, env = "AGENT_ALLOWED_CWDS", value_name = "DIRS")]
    pub allowed_cwds: Option<String>,
    /// Turns running at once; more wait in a queue [default: 16]
    #[arg(long, env = "AGENT_MAX_RUNNING_TASKS", value_name = "N")]
    pub max_running_tasks: Option<usize>,
    /// Tasks waiting to start; more are refused with HTTP 429 / JSON-RPC -32050 [default: 256]
    #[arg(long, env = "AGENT_MAX_QUEUED_TASKS", value_name = "N")]
    pub max_queued_tasks: Option<usize>,
    /// Requests per minute per credential, 0 = no limit [default: 600]
    #[arg(long, env = "AGENT_HOST_RATE_LIMIT", value_name = "N")]
    pub rate_limit: Option<u32>,
    /// Sandbox per task: auto (what the machine offers: bubblewrap, Landlock, cgroups), required (refuse to start when a piece is missing), off (the agent runs as the host's user with its view) [default: auto]
    #[arg(long, env = "AGENT_SANDBOX", value_name = "auto|required|off")]
    pub sandbox: Option<String>,
    /// The task's network in the sandbox: open, or none (loopback only) [default: open]
    #[arg(long, env = "AGENT_SANDBOX_NETWORK", value_name = "open|none")]
    pub sandbox_network: Option<String>,
    /// Run each task as this user (the host must run as root) [default: the host's user]
    #[arg(long, env = "AGENT_SANDBOX_USER", value_name = "NAME")]
    pub sandbox_user: Option<String>,
    /// Pieces of the machine the sandbox leaves unused, comma-separated: cgroup, bwrap, landlock (the weaker tiers run instead: without cgroup and bwrap, the host as subreaper sweeps each task's processes) [default: none]
    #[arg(long, env = "AGENT_SANDBOX_DISABLE", value_name = "PIECES")]
    pub sandbox_disable: Option<String>,
    /// Memory of one task, e.g. 4G; 0 = no limit [default: half the machine's memory]
    #[arg(long, env = "AGENT_TASK_MEMORY", value_name = "SIZE")]
    pub task_memory: Option<String>,
    /// Processes and threads of one task; 0 = no limit [default: 4096]
    #[arg(long, env = "AGENT_TASK_PIDS", value_name = "N")]
    pub task_pids: Option<u64>,
    /// CPU weight of one task, 1..10000 (100 = like any other process) [default: 100]
    #[arg(long, env = "AGENT_TASK_CPU_WEIGHT", value_name = "N")]
    pub task_cpu_weight: Option<u64>,
    /// Largest file one task may write, e.g. 1G; 0 = no limit [default: no limit]
    #[arg(long, env = "AGENT_TASK_FILE_SIZE", value_name = "SIZE")]
    pub task_file_size: Option<String>,
    /// Failed authentications per minute per client address; beyond them failures get 429 with Retry-After (a valid credential still passes), 0 = no limit [default: 20]
    #[arg(long, env = "AGENT_HOST_AUTH_FAILURES_PER_MINUTE", value_name = "N")]
    pub auth_failures_per_minute: Option<u32>,
    /// Time a client has to send a request header; also how long an idle keep-alive connection stays open [default: 10000]
    #[arg(long, env = "AGENT_HOST_HEADER_TIMEOUT_MS", value_name = "MS")]
    pub header_timeout_ms: Option<u64>,
    /// Connections open at once; more are answered 503 and closed [default: 512]
    #[arg(long, env = "AGENT_HOST_MAX_CONNECTIONS", value_name = "N")]
    pub max_connections: Option<usize>,
    /// Connections open at once from one client address [default: 128]
    #[arg(long, env = "AGENT_HOST_MAX_CONNECTIONS_PER_ADDRESS", value_name = "N")]
    pub max_connections_per_address: Option<usize>,
    /// Event streams (SSE) open at once; more are answered 503 [default: 256]
    #[arg(long, env = "AGENT_HOST_MAX_STREAMS", value_name = "N")]
    pub max_streams: Option<usize>,
    /// Delete terminal tasks (and their attachments) whose status is older than this, e.g. 30d, 12h; off = keep [default: off]
    #[arg(long, env = "AGENT_HOST_RETENTION_MAX_AGE", value_name = "AGE")]
    pub retention_max_age: Option<String>,
    /// Keep at most this many terminal tasks, newest first; 0 = no limit [default: 0]
    #[arg(long, env = "AGENT_HOST_RETENTION_MAX_TASKS", value_name = "N")]
    pub retention_max_tasks: Option<usize>,
    /// With a PostgreSQL store shared by several hosts: this host's id, kept across restarts so a restarted host picks up its own tasks [default: MACHINE:PORT]
    #[arg(long, env = "AGENT_HOST_ID", value_name = "ID")]
    pub host_id: Option<String>,
    /// With several hosts: the URL other hosts reach this one at, to pass it commands for its tasks (its host is also accepted as Host) [default: http://BOUND-ADDRESS]
    #[arg(long, env = "AGENT_HOST_ADVERTISE_URL", value_name = "URL")]
    pub advertise_url: Option<String>,
    /// With several hosts: how often this host renews its lease and looks for hosts whose lease expired, in ms [default: 2000]
    #[arg(long, env = "AGENT_HOST_HEARTBEAT_MS", value_name = "MS")]
    pub heartbeat_ms: Option<u64>,
    /// With several hosts: how long a lease lasts without renewal; after it another host takes this one's tasks over, in ms [default: 10000]
    #[arg(long, env = "AGENT_HOST_LEASE_MS", value_name = "MS")]
    pub lease_ms: Option<u64>,
    /// Log format: human or json [default: human]; the level comes from RUST_LOG (default info)
    #[arg(long, env = "AGENT_HOST_LOG_FORMAT", value_name = "human|json")]
    pub log_format: Option<String>,
    /// A git workspace per context (`--workspace`, `--workspace-commit`, ...).
    #[command(flatten)]
    pub workspace: crate::workspace::WorkspaceConfig,
}
