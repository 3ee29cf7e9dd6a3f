//! The server's settings: `[server]` (address, bindings, request and connection limits, rate
//! limits, the console), `[auth]` and `[security]` (what the guard checks) and `[card]` (what
//! the agent card says and how it is signed). Each field is one setting: its flag,
//! environment variable, config file key (the `id`), default and help are declared here once;
//! the `settings` module merges them with the config file.

use clap::builder::BoolishValueParser;
use clap::ArgAction;
use serde::{Deserialize, Serialize};

use crate::units::{ByteSize, Dur};

/// `[server]`: where and how requests are served.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Server")]
pub struct ServerConfig {
    /// Address to listen on: an IP, localhost, or ADDR:PORT (a port here wins over --port)
    #[arg(
        id = "server.bind",
        long = "bind",
        env = "AGENT_HOST_BIND",
        value_name = "ADDR[:PORT]",
        default_value = "127.0.0.1"
    )]
    pub bind: String,
    /// Port to listen on when the bind address has none; 0 picks a free one (the log line "agent-host listening on http://ADDR" names it)
    #[arg(
        id = "server.port",
        long = "port",
        env = "AGENT_HOST_PORT",
        value_name = "PORT",
        default_value_t = 41242
    )]
    pub port: u16,
    /// Also serve the A2A gRPC binding on this port of the bind address (0: any free port); unset: no gRPC
    #[arg(
        id = "server.grpc_port",
        long = "grpc-port",
        env = "AGENT_HOST_GRPC_PORT",
        value_name = "PORT"
    )]
    pub grpc_port: Option<u16>,
    /// Base URL advertised in the agent card (e.g. behind a reverse proxy); unset: from the request's Host header
    #[arg(
        id = "server.public_url",
        long = "public-url",
        env = "AGENT_HOST_PUBLIC_URL",
        value_name = "URL"
    )]
    pub public_url: Option<String>,
    /// Largest request body; a larger one gets HTTP 413
    #[arg(
        id = "server.body_limit",
        long = "body-limit",
        env = "AGENT_HOST_BODY_LIMIT",
        value_name = "SIZE",
        default_value = "4MiB"
    )]
    pub body_limit: ByteSize,
    /// Longest a blocking send waits for the task to finish or ask for input before it answers with the task as it is (still working); 0 waits as long as the task runs
    #[arg(
        id = "server.blocking_wait",
        long = "blocking-wait",
        env = "AGENT_HOST_BLOCKING_WAIT",
        value_name = "DURATION",
        default_value = "0s"
    )]
    pub blocking_wait: Dur,
    /// Time a client has to send a request header; also how long an idle keep-alive connection stays open
    #[arg(
        id = "server.header_timeout",
        long = "header-timeout",
        env = "AGENT_HOST_HEADER_TIMEOUT",
        value_name = "DURATION",
        default_value = "10s"
    )]
    pub header_timeout: Dur,
    /// Connections open at once; more are answered 503 and closed
    #[arg(
        id = "server.max_connections",
        long = "max-connections",
        env = "AGENT_HOST_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = 512
    )]
    pub max_connections: usize,
    /// Connections open at once from one client address (behind a reverse proxy: raise it to max_connections)
    #[arg(
        id = "server.max_connections_per_address",
        long = "max-connections-per-address",
        env = "AGENT_HOST_MAX_CONNECTIONS_PER_ADDRESS",
        value_name = "N",
        default_value_t = 128
    )]
    pub max_connections_per_address: usize,
    /// Event streams (SSE) open at once; more are answered 503
    #[arg(
        id = "server.max_streams",
        long = "max-streams",
        env = "AGENT_HOST_MAX_STREAMS",
        value_name = "N",
        default_value_t = 256
    )]
    pub max_streams: usize,
    /// Requests per minute per caller: its credential, or its client address without one (bursts of max(this, 10)); a read (get, list, subscribe, card) costs a tenth of a request; over it: HTTP 429 with Retry-After; 0 = no limit
    #[arg(
        id = "server.rate_limit",
        long = "rate-limit",
        env = "AGENT_HOST_RATE_LIMIT",
        value_name = "N",
        default_value_t = 1200
    )]
    pub rate_limit: u32,
    /// Failed authentications per minute per client address; beyond them failures get 429 with Retry-After (a valid credential still passes); 0 = no limit
    #[arg(
        id = "server.auth_failures_per_minute",
        long = "auth-failures-per-minute",
        env = "AGENT_HOST_AUTH_FAILURES_PER_MINUTE",
        value_name = "N",
        default_value_t = 20
    )]
    pub auth_failures_per_minute: u32,
    /// Serve MCP (Streamable HTTP) at /mcp on the host's port, behind the same credentials, owners and limits as A2A
    #[arg(id = "server.mcp", long = "mcp", env = "AGENT_HOST_MCP", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value = "true")]
    pub mcp: bool,
    /// Serve the web console at /ui/; unset: on when bound to a loopback address, else off
    #[arg(id = "server.ui", long = "ui", env = "AGENT_HOST_UI", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true")]
    pub ui: Option<bool>,
}

/// `[auth]`: the credentials clients must present; each one's name owns the tasks it creates.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Authentication")]
pub struct AuthConfig {
    /// A bearer token clients must send (Authorization: Bearer ...); its tasks belong to "token"
    #[arg(
        id = "auth.token",
        long = "token",
        env = "AGENT_HOST_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// An API key clients must send in the API key header; its tasks belong to "api-key"
    #[arg(
        id = "auth.api_key",
        long = "api-key",
        env = "AGENT_HOST_API_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,
    /// Header carrying API keys
    #[arg(
        id = "auth.api_key_header",
        long = "api-key-header",
        env = "AGENT_HOST_API_KEY_HEADER",
        value_name = "NAME",
        default_value = "X-API-Key"
    )]
    pub api_key_header: String,
    /// Bearer tokens with owners (config file only): [{ name = "ci", token = "..." }]
    #[arg(skip)]
    #[serde(default)]
    pub tokens: Vec<NamedToken>,
    /// API keys with owners (config file only): [{ name = "bot", key = "..." }]
    #[arg(skip)]
    #[serde(default)]
    pub api_keys: Vec<NamedKey>,
    /// HTTP Basic logins (config file only): [{ name = "alice", username = "alice", password = "..." }]
    #[arg(skip)]
    #[serde(default)]
    pub basic: Vec<BasicLogin>,
}

/// Keys of `[auth]` that only the config file sets (lists of credentials with owners), with
/// their help: they have no flag, so clap cannot carry it.
pub const AUTH_FILE_ONLY: &[(&str, &str)] = &[
    (
        "tokens",
        "Bearer tokens with owners: [{ name = \"ci\", token = \"...\" }]",
    ),
    (
        "api_keys",
        "API keys with owners, sent in api_key_header: [{ name = \"bot\", key = \"...\" }]",
    ),
    (
        "basic",
        "HTTP Basic logins: [{ name = \"alice\", username = \"alice\", password = \"...\" }]",
    ),
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedToken {
    pub name: String,
    pub token: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedKey {
    pub name: String,
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BasicLogin {
    pub name: String,
    pub username: String,
    pub password: String,
}

/// `[security]`: where requests may come from.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Security")]
pub struct SecurityConfig {
    /// Host header values accepted besides localhost/127.0.0.1/[::1] (against DNS rebinding; "*" = any)
    #[arg(
        id = "security.allowed_hosts",
        long = "allowed-hosts",
        env = "AGENT_HOST_ALLOWED_HOSTS",
        value_name = "NAMES",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (CORS; "*" = any); none by default
    #[arg(
        id = "security.allowed_origins",
        long = "allowed-origins",
        env = "AGENT_HOST_ALLOWED_ORIGINS",
        value_name = "ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,
}

/// `[card]`: what the agent card says, and its signature.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Agent card")]
pub struct CardConfig {
    /// Name shown in the agent card; unset: the adapter's name
    #[arg(
        id = "card.name",
        long = "card-name",
        env = "AGENT_HOST_CARD_NAME",
        value_name = "TEXT"
    )]
    pub name: Option<String>,
    /// Description in the agent card; unset: the adapter's description
    #[arg(
        id = "card.description",
        long = "card-description",
        env = "AGENT_HOST_CARD_DESCRIPTION",
        value_name = "TEXT"
    )]
    pub description: Option<String>,
    /// Organization providing the agent (with provider_url; both or neither); unset: agent-host
    #[arg(
        id = "card.provider_organization",
        long = "card-provider-organization",
        env = "AGENT_HOST_CARD_PROVIDER_ORGANIZATION",
        value_name = "TEXT"
    )]
    pub provider_organization: Option<String>,
    /// URL of the organization providing the agent (with provider_organization)
    #[arg(
        id = "card.provider_url",
        long = "card-provider-url",
        env = "AGENT_HOST_CARD_PROVIDER_URL",
        value_name = "URL"
    )]
    pub provider_url: Option<String>,
    /// Add the v0.3 top-level fields to the card served without A2A-Version 1.x (a request with it gets the pure v1.0 card)
    #[arg(id = "card.legacy_v03_fields", long = "card-legacy-v03", env = "AGENT_HOST_CARD_LEGACY_V03", value_name = "BOOL", action = ArgAction::Set, value_parser = BoolishValueParser::new(), num_args = 0..=1, default_missing_value = "true", default_value_t = true)]
    pub legacy_v03_fields: bool,
    /// Extensions every request must name in its A2A-Extensions header (urn:agent-host:tool-trace:v1, urn:agent-host:approval:v1)
    #[arg(
        id = "card.required_extensions",
        long = "required-extensions",
        env = "AGENT_HOST_REQUIRED_EXTENSIONS",
        value_name = "URI,...",
        value_delimiter = ','
    )]
    pub required_extensions: Vec<String>,
    /// Sign the agent card (JWS over RFC 8785 canonical JSON): HS256, ES256 or RS256; unset: unsigned
    #[arg(
        id = "card.sign_alg",
        long = "card-sign-alg",
        env = "AGENT_HOST_CARD_SIGN_ALG",
        value_name = "ALG"
    )]
    pub sign_alg: Option<String>,
    /// Card signing key: the secret for HS256, or the path of a PEM private key file (PKCS#8; SEC1/PKCS#1 too) for ES256/RS256
    #[arg(
        id = "card.sign_key",
        long = "card-sign-key",
        env = "AGENT_HOST_CARD_SIGN_KEY",
        value_name = "SECRET|PATH",
        hide_env_values = true
    )]
    pub sign_key: Option<String>,
    /// Key id (kid) of the card signature; unset: the first 16 hex digits of the SHA-256 of the secret or public key
    #[arg(
        id = "card.sign_kid",
        long = "card-sign-kid",
        env = "AGENT_HOST_CARD_SIGN_KID",
        value_name = "KID"
    )]
    pub sign_kid: Option<String>,
}

/// A credential's secret.
#[derive(Clone, PartialEq)]
pub enum Secret {
    Bearer(String),
    ApiKey(String),
    Basic { username: String, password: String },
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Secret::Bearer(_) => f.write_str("Bearer(***)"),
            Secret::ApiKey(_) => f.write_str("ApiKey(***)"),
            Secret::Basic { username, .. } => write!(f, "Basic({username}:***)"),
        }
    }
}

/// A credential; its name is the owner of the tasks it creates.
#[derive(Debug, Clone, PartialEq)]
pub struct Credential {
    pub name: String,
    pub secret: Secret,
}

/// Who may call, from where (what the guard checks).
#[derive(Debug, Clone, Default)]
pub struct Security {
    pub credentials: Vec<Credential>,
    /// Header carrying API keys.
    pub api_key_header: String,
    /// Host header values accepted besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed (CORS).
    pub allowed_origins: Vec<String>,
    /// Serve without credentials on a non-loopback address (explicitly asked for).
    pub insecure_no_auth: bool,
}

impl Security {
    /// Every secret value (to keep them out of agents' environments and messages).
    pub fn secret_values(&self) -> Vec<String> {
        self.credentials
            .iter()
            .flat_map(|c| match &c.secret {
                Secret::Bearer(t) | Secret::ApiKey(t) => vec![t.clone()],
                Secret::Basic { password, .. } => vec![password.clone()],
            })
            .collect()
    }
}

/// Interval of the keep-alive comment on idle event streams. A constant: no one needed to
/// tune it (it was `[server] sse_keepalive_ms`).
pub const SSE_KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(15);
