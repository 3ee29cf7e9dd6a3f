//! The connection layer under the router: hyper's HTTP/1 server with a header-read timeout
//! (which also closes idle keep-alive connections), a cap on open connections (in total and
//! per client address, answered with a fast 503 beyond it while existing connections keep
//! working), a cap on open event streams, and graceful shutdown (hyper-util's
//! `GracefulShutdown`). Each request carries the client's address as axum's
//! [`ConnectInfo`] (the guard throttles failed logins by it).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use futures::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;

/// Default of [`ConnLimits::header_timeout`].
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of [`ConnLimits::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default of [`ConnLimits::max_connections_per_address`].
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 128;
/// Default of [`ConnLimits::max_streams`].
pub const DEFAULT_MAX_STREAMS: usize = 256;

/// Limits of the connection layer.
#[derive(Debug, Clone, PartialEq)]
pub struct ConnLimits {
    /// Time a client has to send a request's whole header, counted from when the server
    /// starts waiting for it; hyper starts the same timer while a keep-alive connection waits
    /// for its next request, so it is also the keep-alive idle timeout.
    pub header_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
    /// Connections open at once from one client address.
    pub max_connections_per_address: usize,
    /// Event streams (SSE) open at once; more are answered 503.
    pub max_streams: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            max_streams: DEFAULT_MAX_STREAMS,
        }
    }
}

/// Open connections, in total and per client address.
#[derive(Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
}

/// Admits connections within the caps; each admitted one holds a [`Slot`].
#[derive(Clone)]
struct Tracker {
    counts: Arc<Mutex<Counts>>,
    max_total: usize,
    max_per_address: usize,
}

/// An admitted connection; dropping it frees its place.
struct Slot {
    counts: Arc<Mutex<Counts>>,
    ip: IpAddr,
}

impl Tracker {
    fn admit(&self, ip: IpAddr) -> Result<Slot, &'static str> {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.total >= self.max_total {
            return Err("the server has too many open connections");
        }
        let mine = c.per_address.get(&ip).copied().unwrap_or(0);
        if mine >= self.max_per_address {
            return Err("this address has too many open connections");
        }
        c.total += 1;
        c.per_address.insert(ip, mine + 1);
        Ok(Slot {
            counts: self.counts.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                c.per_address.remove(&self.ip);
            }
        }
    }
}

/// Answers a connection over the cap without reading its request: a complete 503 written
/// at once (at most 1 s), then the socket is closed. Written by hand because no HTTP
/// machinery (and no task per request) should be spent on a connection that is refused.
async fn refuse(mut stream: tokio::net::TcpStream, why: &'static str) {
    let body = format!(r#"{{"error":"Service Unavailable","message":"{why}; retry later"}}"#);
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what the client sent (a little, briefly): closing a socket with unread data
        // resets it, and the client would see the reset instead of the 503.
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match tokio::io::AsyncReadExt::read(&mut stream, &mut sink).await? {
                0 => break,
                n => left = left.saturating_sub(n),
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Serves `router` on `listener` until `shutdown` resolves; then stops accepting, asks every
/// connection to close after its request in flight and waits until all have.
pub async fn run<F>(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnLimits,
    shutdown: F,
) -> std::io::Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let tracker = Tracker {
        counts: Arc::default(),
        max_total: limits.max_connections.max(1),
        max_per_address: limits.max_connections_per_address.max(1),
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    let mut warned = false;
    let refusing = Arc::new(Semaphore::new(64));
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            _ = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait instead of spinning.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let slot = match tracker.admit(peer.ip()) {
            Ok(s) => s,
            Err(why) => {
                if !warned {
                    tracing::warn!(client = %peer.ip(), "connection refused with 503: {why} (server.max_connections, server.max_connections_per_address)");
                    warned = true;
                }
                // At most 64 refusals are written at once; beyond, the socket is just closed.
                if let Ok(permit) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(stream, why).await;
                        drop(permit);
                    });
                }
                continue;
            }
        };
        warned = false;
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let svc = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            let mut req = req.map(Body::new);
            req.extensions_mut().insert(ConnectInfo(peer));
            tower::ServiceExt::oneshot(router.clone(), req)
        });
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), svc));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(client = %peer, "connection ended: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// The event streams open at once.
pub type Streams = Arc<Semaphore>;

/// The middleware capping open event streams: a request that asks for one (`Accept:
/// text/event-stream`) when none is free is answered 503 before it runs; an event-stream
/// answer holds a permit until its body is dropped, and one that finds none free is
/// replaced by a 503 (a task the request started keeps running: follow it with GetTask).
pub async fn limit_streams(State(streams): State<Streams>, req: Request, next: Next) -> Response {
    let wants_stream = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    if wants_stream && streams.available_permits() == 0 {
        return too_many_streams();
    }
    let resp = next.run(req).await;
    let is_stream = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !is_stream {
        return resp;
    }
    match streams.try_acquire_owned() {
        Ok(permit) => resp.map(|body| {
            Body::from_stream(body.into_data_stream().map(move |chunk| {
                let _held = &permit;
                chunk
            }))
        }),
        Err(_) => too_many_streams(),
    }
}

fn too_many_streams() -> Response {
    tracing::warn!("event stream refused with 503: server.max_streams reached");
    let mut r = (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": "Service Unavailable", "message": "too many open event streams (server.max_streams); retry later"})),
    )
        .into_response();
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_in_total_and_per_address() {
        let t = Tracker {
            counts: Arc::default(),
            max_total: 3,
            max_per_address: 2,
        };
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let a1 = t.admit(a).unwrap();
        let _a2 = t.admit(a).unwrap();
        assert!(t.admit(a).is_err(), "per-address cap");
        let _b1 = t.admit(b).unwrap();
        assert!(t.admit(b).is_err(), "total cap");
        drop(a1);
        assert!(t.admit(b).is_ok(), "a closed connection frees its place");
    }

    #[tokio::test]
    async fn event_streams_beyond_the_cap_get_503() {
        use tower::ServiceExt;
        let sse = || async {
            (
                [(header::CONTENT_TYPE, "text/event-stream")],
                Body::from_stream(futures::stream::pending::<
                    Result<bytes::Bytes, std::io::Error>,
                >()),
            )
        };
        let streams: Streams = Arc::new(Semaphore::new(1));
        let app = Router::new()
            .route("/s", axum::routing::get(sse))
            .route("/plain", axum::routing::get(|| async { "ok" }))
            .layer(axum::middleware::from_fn_with_state(
                streams.clone(),
                limit_streams,
            ));
        let req = |path: &str| axum::http::Request::get(path).body(Body::empty()).unwrap();
        let first = app.clone().oneshot(req("/s")).await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let second = app.clone().oneshot(req("/s")).await.unwrap();
        assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(second.headers().contains_key(header::RETRY_AFTER));
        let plain = app.clone().oneshot(req("/plain")).await.unwrap();
        assert_eq!(
            plain.status(),
            StatusCode::OK,
            "plain requests are not capped"
        );
        drop(first);
        let third = app.clone().oneshot(req("/s")).await.unwrap();
        assert_eq!(
            third.status(),
            StatusCode::OK,
            "a closed stream frees its place"
        );
    }
}
