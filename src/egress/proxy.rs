//! The HTTP proxy of one task: `CONNECT host:port` (HTTPS, and any TLS or TCP the program
//! tunnels) and plain requests in absolute form (`GET http://host/path`), each to a host its
//! [`Rules`] allow, at an address they allow.
//!
//! Built on hyper, the HTTP stack the server already uses (no second HTTP implementation in
//! the binary, and hyper's CONNECT upgrade hands over the raw connection): a proxy that only
//! checks a target and then copies bytes needs nothing of a larger proxy crate.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Refusal, Rules, TaskLog};

type Body = BoxBody<Bytes, hyper::Error>;

/// How long a connection to an allowed address may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// How long the program may take to send a request's head on a connection to its proxy: a
/// connection that sends nothing does not hold the host's descriptors for the whole turn.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections one task may hold open through its proxy at once (each holds the host's
/// descriptors, two for a tunnel). More are closed as they arrive, and said in the task's
/// refusals: one task cannot use up the host's descriptors and keep every other task, and
/// the API, from opening any. Programs that fetch in parallel open a few dozen.
pub(super) const MAX_CONNECTIONS: usize = 256;

/// What one connection of the task's proxy knows.
pub(super) struct Ctx {
    pub rules: Arc<Rules>,
    pub log: Arc<TaskLog>,
    /// [`MAX_CONNECTIONS`] permits; each connection holds one until it and its tunnel end.
    pub slots: Arc<tokio::sync::Semaphore>,
}

impl Ctx {
    /// A slot for one more connection, or None (the refusal said) when the task holds
    /// [`MAX_CONNECTIONS`] already.
    pub(super) fn slot(&self) -> Option<Slot> {
        match self.slots.clone().try_acquire_owned() {
            Ok(p) => Some(Arc::new(p)),
            Err(_) => {
                self.log.refused(Refusal {
                    host: "*".into(),
                    port: 0,
                    reason: format!("more than {MAX_CONNECTIONS} connections at once"),
                });
                None
            }
        }
    }
}

/// A connection's slot, held by the connection and any tunnel it opened.
pub(super) type Slot = Arc<tokio::sync::OwnedSemaphorePermit>;

/// Why a target cannot be reached.
enum Fail {
    Refused(String),
    Unreachable(String),
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(Full::new(Bytes::from(body)).map_err(|e| match e {}).boxed());
    *r.status_mut() = status;
    r
}

/// Serves one connection from the relay.
/// One connection of the program to its proxy: HTTP requests in absolute form and
/// `CONNECT`s, each checked against the task's rules.
pub(super) async fn serve<IO>(io: IO, ctx: Arc<Ctx>, slot: Slot)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req| {
        let ctx = ctx.clone();
        let slot = slot.clone();
        async move { Ok::<_, Infallible>(handle(req, &ctx, slot).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    if let Err(e) = conn.await {
        tracing::debug!(error = %e, "egress proxy connection ended");
    }
}

/// One connection of the program to a forwarded loopback address (`to`, named on the
/// allow-list with its port): carried to that address as a `CONNECT` to it would be.
pub(super) async fn carry(mut conn: TcpStream, to: SocketAddr, ctx: Arc<Ctx>, _slot: Slot) {
    let host = to.ip().to_string();
    match open(&host, to.port(), &ctx).await {
        Ok(mut up) => {
            let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
        }
        Err(Fail::Refused(reason)) => ctx.log.refused(Refusal {
            host,
            port: to.port(),
            reason,
        }),
        Err(Fail::Unreachable(why)) => {
            tracing::debug!(to = %to, why = %why, "egress: a forwarded address is unreachable");
        }
    }
}

async fn handle(req: Request<Incoming>, ctx: &Ctx, slot: Slot) -> Response<Body> {
    let Some((host, port)) = target(&req) else {
        return text(
            StatusCode::BAD_REQUEST,
            "agent-host egress proxy: CONNECT host:port or an absolute http:// URL\n".into(),
        );
    };
    let stream = match open(&host, port, ctx).await {
        Ok(s) => s,
        Err(Fail::Refused(reason)) => {
            let msg = format!("agent-host refused {host}:{port}: {reason}\n");
            ctx.log.refused(Refusal { host, port, reason });
            return text(StatusCode::FORBIDDEN, msg);
        }
        Err(Fail::Unreachable(why)) => {
            return text(StatusCode::BAD_GATEWAY, format!("{host}:{port}: {why}\n"));
        }
    };
    if req.method() == Method::CONNECT {
        tokio::spawn(tunnel(req, stream, slot));
        return Response::new(Full::new(Bytes::new()).map_err(|e| match e {}).boxed());
    }
    forward(req, stream, &host, port).await
}

/// The host and port a request asks for: the authority of a CONNECT, the URL of a plain
/// request (http only: an https URL is asked for with CONNECT).
fn target(req: &Request<Incoming>) -> Option<(String, u16)> {
    let uri = req.uri();
    let auth = uri.authority()?;
    let port = if req.method() == Method::CONNECT {
        auth.port_u16()?
    } else {
        if uri.scheme_str() != Some("http") {
            return None;
        }
        auth.port_u16().unwrap_or(80)
    };
    let host = auth.host().trim_start_matches('[').trim_end_matches(']');
    Some((host.to_string(), port))
}

/// Connects to `host:port` if the rules allow it: a name must be on the list and is
/// resolved here (never by the program), each address checked; an address literal must be
/// listed itself.
async fn open(host: &str, port: u16, ctx: &Ctx) -> Result<TcpStream, Fail> {
    let rules = &ctx.rules;
    let addrs: Vec<(IpAddr, bool)> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![(ip, false)],
        Err(_) => {
            if !rules.allows_name(host, port) {
                return Err(Fail::Refused("not on the allow-list".into()));
            }
            resolve(host, port, rules)
                .await?
                .into_iter()
                .map(|ip| (ip, true))
                .collect()
        }
    };
    let mut refused = None;
    let mut last_err = None;
    for (ip, by_name) in addrs {
        if let Err(why) = rules.check_addr(ip, port, by_name) {
            refused.get_or_insert(why);
            continue;
        }
        let addr = SocketAddr::new(ip, port);
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last_err = Some(e.to_string()),
            Err(_) => last_err = Some("connection timed out".into()),
        }
    }
    match (last_err, refused) {
        (Some(e), _) => Err(Fail::Unreachable(e)),
        (None, Some(why)) => Err(Fail::Refused(if host.parse::<IpAddr>().is_ok() {
            why.to_string()
        } else {
            format!("resolves to a {why}")
        })),
        (None, None) => Err(Fail::Unreachable("no address".into())),
    }
}

async fn resolve(host: &str, port: u16, rules: &Rules) -> Result<Vec<IpAddr>, Fail> {
    if let Some(ip) = rules.resolved(host) {
        return Ok(vec![ip]);
    }
    match tokio::net::lookup_host((host, port)).await {
        Ok(addrs) => {
            let v: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            if v.is_empty() {
                Err(Fail::Unreachable("the name has no address".into()))
            } else {
                Ok(v)
            }
        }
        Err(e) => Err(Fail::Unreachable(format!("cannot resolve the name: {e}"))),
    }
}

/// After the 200 to a CONNECT: the client's bytes to the target and back.
async fn tunnel(req: Request<Incoming>, mut stream: TcpStream, _slot: Slot) {
    match hyper::upgrade::on(req).await {
        Ok(up) => {
            let mut up = TokioIo::new(up);
            let _ = tokio::io::copy_bidirectional(&mut up, &mut stream).await;
        }
        Err(e) => tracing::debug!(error = %e, "egress proxy: CONNECT upgrade failed"),
    }
}

/// Headers of the hop between the program and the proxy, not passed on.
const HOP: &[&str] = &[
    "proxy-connection",
    "proxy-authorization",
    "proxy-authenticate",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];

/// A plain HTTP request: sent to the target in origin form, its answer passed back. Its
/// `Host` is the target that was checked (`host`, `port`), whatever the program sent: on a
/// server with several names (a shared front, a reverse proxy) a request reaches only the
/// name on the allow-list.
async fn forward(
    mut req: Request<Incoming>,
    stream: TcpStream,
    host: &str,
    port: u16,
) -> Response<Body> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let Ok(uri) = path.parse() else {
        return text(StatusCode::BAD_REQUEST, "bad request path\n".into());
    };
    *req.uri_mut() = uri;
    for h in HOP {
        req.headers_mut().remove(*h);
    }
    let authority = match (host.parse::<IpAddr>(), port) {
        (Ok(IpAddr::V6(ip)), 80) => format!("[{ip}]"),
        (Ok(IpAddr::V6(ip)), p) => format!("[{ip}]:{p}"),
        (_, 80) => host.to_string(),
        (_, p) => format!("{host}:{p}"),
    };
    match hyper::header::HeaderValue::from_str(&authority) {
        Ok(v) => {
            req.headers_mut().insert(hyper::header::HOST, v);
        }
        Err(_) => return text(StatusCode::BAD_REQUEST, "bad host\n".into()),
    }
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(stream)).await
    {
        Ok(p) => p,
        Err(e) => return text(StatusCode::BAD_GATEWAY, format!("{e}\n")),
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    match sender.send_request(req).await {
        Ok(resp) => resp.map(BodyExt::boxed),
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("{e}\n")),
    }
}
