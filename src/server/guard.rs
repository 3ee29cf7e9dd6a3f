//! The gates every request passes, outermost first: [`gate`] (Host allow-list against DNS
//! rebinding, Origin allow-list), [`cors_layer`] (tower-http's CORS: preflights and the
//! `Access-Control-*` headers of allowed origins), then [`guard`] (authentication: bearer
//! tokens, API keys, Basic, compared in constant time; a per-credential rate limit). The
//! guard puts the [`Caller`] into the request for the handlers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use serde_json::json;
use sha2::{Digest, Sha256};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

use super::Caller;
use crate::server::config::{Secret, Security};

/// Paths anyone may read: the public card, the health check and the console's files.
fn is_public(path: &str) -> bool {
    path == "/health"
        || super::paths::is_public_file(path)
        || path.ends_with("/.well-known/agent-card.json")
        || path.ends_with("/.well-known/agent.json")
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// What a request costs against its caller's rate limit. A read (a task, a list, a card, a
/// stream of a running task) costs [`READ_COST`] of a request that starts or changes work:
/// an orchestrator that polls each of its tasks once a second spends little, while a flood
/// of sends is still stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    Read,
    Write,
}

/// The share of the rate limit one read takes.
pub const READ_COST: f64 = 0.1;

/// Whose bucket a request is charged to: the credential's name, or for callers without
/// credentials their client address (one busy caller does not use up the others' share).
/// Kept in the request's extensions so that a handler that learns from the body that a
/// request charged as a read is a write ([`Guard::charge_write`]) charges the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateKey(String);

impl RateKey {
    /// The key of `caller` (a credential's name), else of its client address.
    pub fn of(caller: Option<&str>, peer: Option<IpAddr>) -> RateKey {
        match (caller, peer) {
            (Some(name), _) => RateKey(format!("credential {name}")),
            (None, Some(ip)) => RateKey(format!("address {ip}")),
            (None, None) => RateKey("anonymous".into()),
        }
    }
}

/// The guard's settings and the rate limiter's buckets.
pub struct Guard {
    security: Security,
    /// Host names accepted (lower case, without port); empty with `any_host`.
    hosts: Vec<String>,
    any_host: bool,
    /// The origin of `--public-url` (`https://host[:port]`), a same origin too.
    public_origin: Option<String>,
    rate_per_minute: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// Extensions every A2A request must name (`A2A-Extensions`).
    required_extensions: Vec<String>,
    /// Failed authentications per minute per client address (0: no limit).
    failures_per_minute: u32,
    /// Per client address: the failure bucket, and whether its throttling was logged.
    failures: Mutex<HashMap<IpAddr, (Bucket, bool)>>,
}

impl Guard {
    /// Throttles failed authentication: `per_minute` failures per client address (a bucket
    /// of that size refilled over a minute), then 429 for failures until it refills.
    pub fn with_auth_failures_per_minute(mut self, per_minute: u32) -> Guard {
        self.failures_per_minute = per_minute;
        self
    }

    /// Also answers a Host header naming `url`'s host (where other hosts reach this one).
    pub fn also_reached_at(mut self, url: Option<&str>) -> Guard {
        let host = url
            .and_then(|u| reqwest::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase));
        if let Some(h) = host {
            if !self.hosts.contains(&h) {
                self.hosts.push(h);
            }
        }
        self
    }

    /// Requires every A2A request to name these extensions.
    pub fn with_required_extensions(mut self, uris: Vec<String>) -> Guard {
        self.required_extensions = uris;
        self
    }

    pub fn new(
        security: Security,
        local: SocketAddr,
        public_url: Option<&str>,
        rate_per_minute: u32,
    ) -> Guard {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if !local.ip().is_unspecified() && !local.ip().is_loopback() {
            hosts.push(local.ip().to_string());
            hosts.push(format!("[{}]", local.ip()));
        }
        let public = public_url.and_then(|u| reqwest::Url::parse(u).ok());
        if let Some(h) = public.as_ref().and_then(|u| u.host_str()) {
            hosts.push(h.to_ascii_lowercase());
        }
        let public_origin = public
            .map(|u| u.origin().ascii_serialization())
            .filter(|o| o != "null");
        let mut any_host = false;
        for h in &security.allowed_hosts {
            if h.trim() == "*" {
                any_host = true;
            } else {
                hosts.push(h.trim().to_ascii_lowercase());
            }
        }
        Guard {
            security,
            hosts,
            any_host,
            public_origin,
            rate_per_minute,
            buckets: Mutex::new(HashMap::new()),
            required_extensions: Vec::new(),
            failures_per_minute: 0,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// True when the Host header names this server (or is absent: HTTP/1.0 clients).
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        if self.any_host {
            return true;
        }
        let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
            return true;
        };
        let host = host.trim().to_ascii_lowercase();
        let name = match host.rfind(':') {
            // An IPv6 literal keeps its brackets; a port follows the last colon after them.
            Some(i) if !host.ends_with(']') && host[..i].matches(':').count() <= 1 => &host[..i],
            Some(i) if host.starts_with('[') && host[..i].ends_with(']') => &host[..i],
            _ => host.as_str(),
        };
        self.hosts.iter().any(|h| h == name)
    }

    /// Whether the request's origin (None: it names none) may call: the same origin as the
    /// server (scheme included: `http://` and the Host it was sent to, or the origin of
    /// `--public-url`), or listed (`*`: any).
    fn origin_allowed(&self, headers: &HeaderMap) -> Option<bool> {
        let origin = headers.get(header::ORIGIN)?;
        let Ok(origin) = origin.to_str() else {
            return Some(false);
        };
        Some(self.origin_ok(origin, headers))
    }

    fn origin_ok(&self, origin: &str, headers: &HeaderMap) -> bool {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        // agent-host itself serves plain HTTP; HTTPS reaches it through a proxy, whose
        // address is the public URL.
        let same = origin
            .strip_prefix("http://")
            .is_some_and(|rest| !host.is_empty() && rest.eq_ignore_ascii_case(host))
            || self
                .public_origin
                .as_deref()
                .is_some_and(|p| p.eq_ignore_ascii_case(origin));
        same || self
            .security
            .allowed_origins
            .iter()
            .any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
    }

    /// Who presented valid credentials; Ok(None) when none are configured.
    fn authenticate(&self, headers: &HeaderMap) -> Result<Option<String>, ()> {
        if self.security.credentials.is_empty() {
            return Ok(None);
        }
        let auth = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let bearer = strip_scheme(auth, "bearer");
        let basic = strip_scheme(auth, "basic").and_then(|b| {
            let raw = base64::engine::general_purpose::STANDARD
                .decode(b.trim())
                .ok()?;
            let text = String::from_utf8(raw).ok()?;
            let (u, p) = text.split_once(':')?;
            Some((u.to_string(), p.to_string()))
        });
        let api_key = headers
            .get(self.security.api_key_header.as_str())
            .and_then(|v| v.to_str().ok());
        // Every credential is compared, whatever matched before: the time taken does not
        // depend on which one (or how much of one) matched.
        let mut found: Option<&str> = None;
        for c in &self.security.credentials {
            let ok = match &c.secret {
                Secret::Bearer(t) => bearer.is_some_and(|b| ct_eq(b.trim(), t)),
                Secret::ApiKey(k) => api_key.is_some_and(|a| ct_eq(a.trim(), k)),
                Secret::Basic { username, password } => basic
                    .as_ref()
                    .is_some_and(|(u, p)| ct_eq(u, username) & ct_eq(p, password)),
            };
            if ok && found.is_none() {
                found = Some(&c.name);
            }
        }
        found.map(|n| Some(n.to_string())).ok_or(())
    }

    /// The caller these headers carry valid credentials of (`Caller(None)` when none are
    /// needed), None when they carry none: what a layer that must read the body before the
    /// guard runs (`--route-by-metadata`) asks first.
    pub fn caller_of(&self, headers: &HeaderMap) -> Option<Caller> {
        self.authenticate(headers).ok().map(Caller)
    }

    /// Takes `cost` tokens from the caller's bucket; Err(seconds to wait) when it has too few.
    fn rate(&self, key: &RateKey, cost: f64) -> Result<(), u64> {
        self.rate_at(key, cost, Instant::now())
    }

    /// [`Guard::rate`] at the time `now`.
    fn rate_at(&self, key: &RateKey, cost: f64, now: Instant) -> Result<(), u64> {
        if self.rate_per_minute == 0 {
            return Ok(());
        }
        let per_sec = f64::from(self.rate_per_minute) / 60.0;
        let burst = f64::from(self.rate_per_minute.max(10));
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        // Forget callers whose bucket is full again (bounds the map: callers without
        // credentials are keyed by address).
        if buckets.len() > 10_000 {
            buckets
                .retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec < burst);
        }
        let b = buckets.entry(key.0.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec).min(burst);
        b.at = now;
        if b.tokens >= cost {
            b.tokens -= cost;
            Ok(())
        } else {
            Err(((cost - b.tokens) / per_sec).ceil().max(1.0) as u64)
        }
    }

    /// Charges the rest of a write to a request the middleware charged as a read (a JSON-RPC
    /// call, whose method is in its body); Some(the 429 answer) when the caller's bucket has
    /// too little left.
    pub fn charge_write(&self, key: Option<&RateKey>) -> Option<Response> {
        let key = key?;
        self.rate(key, 1.0 - READ_COST).err().map(too_many_requests)
    }

    /// Counts a failed authentication from `ip`; Err(seconds to wait) when the address has
    /// failed too often, with whether this is the first refusal of the window (to log once).
    fn failed(&self, ip: IpAddr) -> Result<(), (u64, bool)> {
        if self.failures_per_minute == 0 {
            return Ok(());
        }
        let per_sec = f64::from(self.failures_per_minute) / 60.0;
        let burst = f64::from(self.failures_per_minute);
        let mut all = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        // Forget addresses whose bucket is full again (bounds the map).
        if all.len() > 10_000 {
            all.retain(|_, (b, _)| {
                b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec < burst
            });
        }
        let (b, logged) = all.entry(ip).or_insert((
            Bucket {
                tokens: burst,
                at: now,
            },
            false,
        ));
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * per_sec).min(burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            *logged = false;
            Ok(())
        } else {
            let first = !*logged;
            *logged = true;
            Err((((1.0 - b.tokens) / per_sec).ceil().max(1.0) as u64, first))
        }
    }

    /// The security settings (for the card).
    pub fn security(&self) -> &Security {
        &self.security
    }

    fn www_authenticate(&self) -> String {
        let mut schemes = Vec::new();
        let c = &self.security.credentials;
        if c.iter().any(|c| matches!(c.secret, Secret::Bearer(_))) || c.is_empty() {
            schemes.push("Bearer realm=\"agent-host\"".to_string());
        }
        if c.iter().any(|c| matches!(c.secret, Secret::Basic { .. })) {
            schemes.push("Basic realm=\"agent-host\"".to_string());
        }
        if c.iter().any(|c| matches!(c.secret, Secret::ApiKey(_))) {
            schemes.push(format!(
                "ApiKey realm=\"agent-host\", header=\"{}\"",
                self.security.api_key_header
            ));
        }
        schemes.join(", ")
    }
}

fn strip_scheme<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (s, rest) = value.split_once(' ')?;
    s.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// Constant-time equality of two strings of any length: compares their SHA-256 digests
/// byte by byte without stopping early.
pub fn ct_eq(a: &str, b: &str) -> bool {
    let (da, db) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    da.iter()
        .zip(db.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The message of every 401: the schemes taken are in `WWW-Authenticate`.
const UNAUTHORIZED_MESSAGE: &str = "this request needs a valid credential: see the WWW-Authenticate header for the schemes this host takes";

fn refuse(status: StatusCode, error: &str, message: &str) -> Response {
    (status, Json(json!({"error": error, "message": message}))).into_response()
}

/// The outer middleware: refuses (403) a Host that does not name this server, an Origin that
/// may not call, and a preflight that names no origin. Runs before [`cors_layer`].
pub async fn gate(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    if !g.host_allowed(headers) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "the Host header does not name this server; add it to security.allowed_hosts (AGENT_HOST_ALLOWED_HOSTS)",
        );
    }
    let origin = g.origin_allowed(headers);
    if origin == Some(false) {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "this origin may not call agent-host; add it to security.allowed_origins (AGENT_HOST_ALLOWED_ORIGINS)",
        );
    }
    let options = req.method() == Method::OPTIONS;
    if options && origin.is_none() && headers.contains_key("access-control-request-method") {
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "cross-origin requests are not allowed",
        );
    }
    let mut resp = next.run(req).await;
    // The CORS layer answers every OPTIONS request itself, with 200 and no body: 204 says so.
    if options && resp.status() == StatusCode::OK {
        *resp.status_mut() = StatusCode::NO_CONTENT;
    }
    resp
}

/// CORS for the origins [`gate`] lets through: preflights get the methods, the headers they
/// ask for and a max age of 10 minutes; answers carry `Access-Control-Allow-Origin` (the
/// origin itself) and expose `etag`, `retry-after` and `www-authenticate`. No credentials
/// mode (no cookies are involved).
pub fn cors_layer(g: Arc<Guard>) -> CorsLayer {
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, parts| {
            origin
                .to_str()
                .is_ok_and(|o| g.origin_ok(o, &parts.headers))
        }))
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers(AllowHeaders::mirror_request())
        .expose_headers([header::ETAG, header::RETRY_AFTER, header::WWW_AUTHENTICATE])
        .max_age(Duration::from_secs(600))
}

/// The inner middleware: authentication, the rate limit, the caller and the request's
/// trace and extensions.
pub async fn guard(State(g): State<Arc<Guard>>, mut req: Request, next: Next) -> Response {
    let public = is_public(req.uri().path());
    let ip = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let weight = weight_of(req.method(), req.uri().path());
    let caller = match g.admit(req.headers(), public, ip, weight) {
        Ok((name, key)) => {
            req.extensions_mut().insert(key);
            name
        }
        Err(Refusal::RateLimited(wait)) => return too_many_requests(wait),
        Err(Refusal::Unauthenticated) => {
            // Throttled per client address; a valid credential is never throttled here,
            // so callers who authenticate are unaffected by someone guessing beside them.
            if let Some(ip) = ip {
                if let Err((wait, first)) = g.failed(ip) {
                    if first {
                        tracing::warn!(client = %ip, retry_after_s = wait, "too many failed authentications from this address: answering 429 until its budget refills ([server] auth_failures_per_minute)");
                    }
                    let mut r = refuse(
                        StatusCode::TOO_MANY_REQUESTS,
                        "Too Many Requests",
                        "too many failed authentications from this address; retry after the time in Retry-After",
                    );
                    if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
                        r.headers_mut().insert(header::RETRY_AFTER, v);
                    }
                    return r;
                }
            }
            // One body for every refused credential (missing, wrong, of a wrong scheme):
            // nothing in it tells a guess that was near from one that was not.
            let mut r = refuse(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                UNAUTHORIZED_MESSAGE,
            );
            if let Ok(v) = HeaderValue::from_str(&g.www_authenticate()) {
                r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
            }
            return r;
        }
    };
    req.extensions_mut().insert(Caller(caller));
    let traceparent = traceparent(req.headers());
    let ext = g.extensions(req.headers());
    let relay = g.relay(req.headers());
    req.extensions_mut().insert(crate::engine::RequestOptions {
        traceparent,
        tool_trace: ext.tool_trace(),
        relay,
    });
    let run = super::extensions::EXTENSIONS.scope(ext.clone(), next.run(req));
    let mut resp = run.await;
    super::extensions::echo(resp.headers_mut(), &ext);
    resp
}

/// HTTP 429 with `Retry-After`: the caller's rate limit is reached.
fn too_many_requests(wait: u64) -> Response {
    let mut r = refuse(
        StatusCode::TOO_MANY_REQUESTS,
        "Too Many Requests",
        "rate limit reached for this caller (its credential, or its address without one); retry after the time in Retry-After",
    );
    if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// What an HTTP request costs before its body is read: reads by method (`GET`, `HEAD`,
/// `OPTIONS`, and v0.3's `POST /v1/tasks/{id}:subscribe`), and a JSON-RPC call (A2A's, or
/// MCP's `POST /mcp`) as a read, its handler charging the rest when its method starts or
/// changes work ([`Guard::charge_write`]); every other `POST` or `DELETE` as a write.
pub fn weight_of(method: &Method, path: &str) -> Weight {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
        || is_jsonrpc_path(path)
        || path.trim_end_matches('/') == super::paths::MCP
        || path.ends_with(":subscribe")
    {
        Weight::Read
    } else {
        Weight::Write
    }
}

/// The JSON-RPC endpoints: `/`, `/a2a`, `/a2a/jsonrpc`, at the root or under an agent's
/// prefix (`/agents/{id}`).
fn is_jsonrpc_path(path: &str) -> bool {
    let p = path.trim_end_matches('/');
    let rest = match p.strip_prefix("/agents/") {
        Some(r) => r.split_once('/').map_or("", |(_, tail)| tail),
        None => p.trim_start_matches('/'),
    };
    let rest = format!("/{}", rest.trim_end_matches('/'));
    super::paths::JSONRPC_PATHS.contains(&rest.as_str())
}

/// Why the guard refused a caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No valid credentials (HTTP 401, gRPC UNAUTHENTICATED).
    Unauthenticated,
    /// The credential's rate limit is reached; retry after this many seconds (HTTP 429,
    /// gRPC RESOURCE_EXHAUSTED).
    RateLimited(u64),
}

impl Guard {
    /// Authentication and rate limit, for every binding: the caller's name (None when no
    /// authentication is configured, or for an anonymous caller of a `public` route).
    /// A request is charged by its `weight`, to its credential or, without one, to its
    /// client address `peer`.
    pub fn admit(
        &self,
        headers: &HeaderMap,
        public: bool,
        peer: Option<IpAddr>,
        weight: Weight,
    ) -> Result<(Option<String>, RateKey), Refusal> {
        let caller = match self.authenticate(headers) {
            Ok(name) => name,
            Err(()) if public => return Ok((None, RateKey::of(None, peer))),
            Err(()) => return Err(Refusal::Unauthenticated),
        };
        let key = RateKey::of(caller.as_deref(), peer);
        if !public {
            let cost = match weight {
                Weight::Read => READ_COST,
                Weight::Write => 1.0,
            };
            self.rate(&key, cost).map_err(Refusal::RateLimited)?;
        }
        Ok((caller, key))
    }

    /// What of the request goes along when a command is passed to the host that runs its
    /// task ([`super::peer`]).
    pub fn relay(&self, headers: &HeaderMap) -> crate::engine::Relay {
        super::peer::relay(headers, &self.security.api_key_header)
    }

    /// The request's A2A extensions, checked against the required ones.
    pub fn extensions(&self, headers: &HeaderMap) -> super::extensions::RequestExtensions {
        super::extensions::from_headers(headers, &self.required_extensions)
    }
}

/// The request's W3C `traceparent`, when valid.
pub fn traceparent(headers: &HeaderMap) -> Option<String> {
    headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .filter(|t| valid_traceparent(t))
        .map(str::to_string)
}

/// `version-traceid-parentid-flags`: 2, 32, 16 and 2 lowercase hex digits; an all-zero
/// trace or parent id is invalid.
fn valid_traceparent(t: &str) -> bool {
    let parts: Vec<&str> = t.trim().split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    };
    parts.len() >= 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2)
}

#[cfg(test)]
mod tests;
