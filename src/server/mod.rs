//! The HTTP server: axum router, JSON-RPC and HTTP+JSON (each v1.0 and v0.3), SSE, the agent
//! card, health.
//!
//! [`app`] builds the router (testable without a socket); [`serve`] runs it on a listener
//! until a shutdown signal, then ends every task before returning.

pub(crate) mod card;
pub mod config;
pub(crate) mod extended;
pub(crate) mod extensions;
pub(crate) mod git;
pub mod grpc;
pub(crate) mod guard;
mod index;
mod jsonrpc;
pub(crate) mod listen;
pub(crate) mod mcp;
pub(crate) mod metrics;
mod negotiate;
mod ops;
mod paths;
pub(crate) mod peer;
mod push_rpc;
pub(crate) mod rest;
pub(crate) mod route;
pub mod sse;
pub(crate) mod ui;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

use crate::engine::Engine;
pub use card::CardSettings;

/// Who is calling, put into each request by the guard: the credential's name, or None when
/// no authentication is configured.
#[derive(Debug, Clone, Default)]
pub struct Caller(pub Option<String>);

impl Caller {
    /// The owner of the tasks this caller creates and may see.
    pub fn owner(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub engine: Engine,
    pub card: CardSettings,
    pub local_addr: SocketAddr,
    pub started_at: SystemTime,
    /// Interval of SSE keep-alive comments.
    pub keepalive: Duration,
    /// Longest wait of a blocking send (None: until the task settles).
    pub blocking_wait: Option<Duration>,
    /// Push notifications, when on.
    pub push: Option<crate::push::PushService>,
    /// Authentication, allowed hosts and origins, rate limit.
    pub guard: Arc<guard::Guard>,
    /// The web console is served at `/ui/` ([`ui`]); `GET /` in a browser may point there.
    pub ui_enabled: bool,
}

/// Limits of the HTTP layer.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Largest request body accepted (larger → 413).
    pub body_limit: usize,
    /// With several adapters, route root requests by `metadata.agent` and task id.
    pub route_by_metadata: bool,
    /// Timeouts and caps of connections and streams.
    pub conn: listen::ConnLimits,
    /// Serve MCP at `/mcp` ([`mcp`]).
    pub mcp: bool,
}

/// The router with every route.
pub fn app(state: AppState, limits: &HttpLimits) -> Router {
    let guard = state.guard.clone();
    // Install the recorder before the first request counts anything.
    let _ = metrics::handle();
    let router = Router::new()
        .route("/", post(jsonrpc::handle).get(index::index))
        .route("/a2a", post(jsonrpc::handle))
        .route("/a2a/jsonrpc", post(jsonrpc::handle))
        .route("/.well-known/agent-card.json", get(card::get_card))
        .route("/.well-known/agent.json", get(card::get_card))
        .route("/health", get(health))
        .route("/metrics", get(metrics::get_metrics))
        .merge(rest::routes())
        .merge(git::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    guarded(router, guard, limits).with_state(state)
}

/// The gates every route is behind: the body limit, the guard (credentials, rate limit, the
/// caller), CORS, the Host and Origin checks, and a panic turned into a 500.
fn guarded<S: Clone + Send + Sync + 'static>(
    router: Router<S>,
    guard: Arc<guard::Guard>,
    limits: &HttpLimits,
) -> Router<S> {
    router
        .layer(DefaultBodyLimit::max(limits.body_limit))
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            guard::guard,
        ))
        .layer(guard::cors_layer(guard.clone()))
        .layer(axum::middleware::from_fn_with_state(guard, guard::gate))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ))
}

/// `{"status":"healthy"}`, or HTTP 503 `{"status":"degraded","store":"failing: ..."}` while
/// the task store refuses writes (a load balancer then sends new work elsewhere; the host
/// stays up, and says healthy again once a write succeeds).
async fn health(axum::extract::State(state): axum::extract::State<AppState>) -> Response {
    match state.engine.store_failure() {
        None => Json(json!({"status": "healthy"})).into_response(),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "degraded", "store": format!("failing: {why}")})),
        )
            .into_response(),
    }
}

/// Whether `path` lies under one of the HTTP+JSON bases (whose refusals carry a
/// `google.rpc.Status` body, as REST clients expect).
fn under_rest_base(path: &str) -> bool {
    [paths::V1_BASE, paths::V03_BASE]
        .iter()
        .any(|base| path == *base || path.strip_prefix(base).is_some_and(|r| r.starts_with('/')))
}

async fn not_found(method: Method, uri: Uri) -> Response {
    let path = uri.path();
    if under_rest_base(path) {
        return rest::route_not_found(&method, path);
    }
    (
        StatusCode::NOT_FOUND,
        Json(json!({"error": "Not Found", "message": format!("no route for {method} {}", uri.path())})),
    )
        .into_response()
}

async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    if under_rest_base(uri.path()) {
        return rest::method_not_allowed(&method, uri.path()).into_response();
    }
    (
        StatusCode::METHOD_NOT_ALLOWED,
        Json(json!({"error": "Method Not Allowed", "message": format!("{method} is not allowed on {}", uri.path())})),
    )
        .into_response()
}

fn panic_response(_err: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a request handler panicked");
    let mut resp = (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32603, "message": "Internal error"}})),
    )
        .into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// Serves until `shutdown` resolves; then stops accepting, ends every task (their CLIs are
/// stopped and they reach a terminal state, which also ends their streams) and waits for open
/// connections to close, at most `drain` longer.
pub async fn serve<F>(
    listener: tokio::net::TcpListener,
    state: AppState,
    limits: HttpLimits,
    shutdown: F,
    drain: Duration,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    serve_many(listener, vec![state], limits, shutdown, drain).await
}

/// Several adapters on one port: the first is served at the root, and each (the first
/// too) at `/agents/{adapter id}/` with its own card and endpoints.
pub fn app_many(agents: &[AppState], limits: &HttpLimits) -> Router {
    let Some(first) = agents.first() else {
        return Router::new().fallback(not_found);
    };
    let mut router = app(first.clone(), limits);
    for a in agents {
        let id = a.engine.launch().adapter.id.clone();
        let mut nested = a.clone();
        nested.card.path_prefix = format!("agents/{id}/");
        router = router.nest(&format!("/agents/{id}"), app(nested, limits));
    }
    if first.ui_enabled {
        router = router.merge(ui::routes(agents));
    }
    if limits.mcp {
        let mcp = mcp::router(agents, limits.body_limit);
        router = router.merge(guarded(mcp, first.guard.clone(), limits));
    }
    router
}

/// The whole HTTP service of one or several adapters: [`app_many`] behind the
/// `--route-by-metadata` rewrite ([`route`]) and trailing-slash trimming. What [`serve_many`]
/// runs; router tests call it with `tower::ServiceExt::oneshot`.
pub fn service(agents: &[AppState], limits: &HttpLimits) -> Router {
    let routes = Arc::new(route::Routes {
        agents: route::engines(agents),
        by_metadata: limits.route_by_metadata,
        body_limit: limits.body_limit,
        guard: agents.first().map(|a| a.guard.clone()),
    });
    let router = tower::Layer::layer(
        &axum::middleware::from_fn_with_state(routes, route::route),
        app_many(agents, limits),
    );
    let router = tower::Layer::layer(
        &axum::middleware::from_fn_with_state(limits.body_limit, refuse_announced_too_large),
        router,
    );
    // `/agents/codex/` (the URL in that agent's card) reaches the nested router's `/`.
    let router = tower::Layer::layer(
        &tower_http::normalize_path::NormalizePathLayer::trim_trailing_slash(),
        router,
    );
    let streams: listen::Streams =
        Arc::new(tokio::sync::Semaphore::new(limits.conn.max_streams.max(1)));
    let router = tower::Layer::layer(
        &axum::middleware::from_fn_with_state(streams, listen::limit_streams),
        router,
    );
    // The layers must see the request before routing, so they wrap the router from the
    // outside; a router whose only route is this service gives the result one concrete type.
    Router::new().fallback_service(router)
}

/// A request whose `Content-Length` announces more than the body limit gets its 413 at once,
/// in its binding's error format, instead of after its body has been waited for (a client
/// that announces 10 GB and sends nothing held the connection until the body timed out).
/// The body is replaced by one that fails its first read with the length-limit error, which
/// the handlers' body extraction already answers with 413; an unauthenticated request never
/// reads it (the guard answers 401 first).
async fn refuse_announced_too_large(
    axum::extract::State(limit): axum::extract::State<usize>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        let over = http_body_util::Limited::new(
            http_body_util::Full::new(bytes::Bytes::from_static(b"-")),
            0,
        );
        *req.body_mut() = axum::body::Body::new(over);
    }
    next.run(req).await
}

/// [`serve`] for several adapters (see [`service`]).
pub async fn serve_many<F>(
    listener: tokio::net::TcpListener,
    agents: Vec<AppState>,
    limits: HttpLimits,
    shutdown: F,
    drain: Duration,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let router = service(&agents, &limits);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    // When `shutdown` resolves the server stops accepting; requests in flight (open streams
    // among them) go on until they finish.
    let server = listen::run(listener, router, limits.conn.clone(), async move {
        shutdown.await;
        let _ = stop_tx.send(());
    });
    let mut server = tokio::spawn(server);
    let finished = tokio::select! {
        biased;
        _ = stop_rx => None,
        r = &mut server => Some(r),
    };
    let live: usize = agents.iter().map(|a| a.engine.live_count()).sum();
    tracing::info!(live_tasks = live, "shutting down: ending running tasks");
    futures::future::join_all(agents.iter().map(|a| a.engine.shutdown())).await;
    for a in &agents {
        if let Some(p) = &a.push {
            p.shutdown();
        }
    }
    let result = match finished {
        Some(r) => r,
        None => match tokio::time::timeout(drain, &mut server).await {
            Ok(r) => r,
            Err(_) => {
                tracing::warn!("connections still open after the drain period; exiting anyway");
                server.abort();
                Ok(Ok(()))
            }
        },
    };
    result.map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests;
