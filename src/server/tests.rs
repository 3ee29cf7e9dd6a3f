//! The whole HTTP service as `agent-host serve` builds it ([`crate::app::App::start`]), called
//! with `tower::ServiceExt::oneshot`: no socket and no agent process (every request here is
//! refused or answered before a turn would start).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::{to_bytes, Body};
use axum::http::{Request, StatusCode};
use axum::Router;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::app::App;
use crate::settings::{Credential, Secret, ServeArgs, Settings};

const ADDR: &str = "127.0.0.1:41242";
const TOKEN: &str = "tok-router-test";

/// The service of the demo adapter with an in-memory store, after `change`.
async fn service(change: impl FnOnce(&mut Settings)) -> (Router, tempfile::TempDir) {
    let (app, dir) = started(change).await;
    (app.router(), dir)
}

/// The started [`App`] of [`service`].
async fn started(change: impl FnOnce(&mut Settings)) -> (App, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().to_str().unwrap();
    let args = ServeArgs::from_flags([
        "--repo-path",
        repo,
        "--store",
        "memory",
        "--adapter",
        "demo",
    ])
    .unwrap();
    let mut s = Settings::resolve(&args).unwrap();
    change(&mut s);
    let app = App::start(&s, ADDR.parse().unwrap()).await.unwrap();
    (app, dir)
}

fn with_token(s: &mut Settings) {
    s.security.credentials = vec![Credential {
        name: "ci".into(),
        secret: Secret::Bearer(TOKEN.into()),
    }];
}

/// A request to the service, with `Host` naming it.
fn request(method: &str, path: &str, headers: &[(&str, &str)], body: Body) -> Request<Body> {
    let mut b = Request::builder()
        .method(method)
        .uri(path)
        .header("host", ADDR);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(body).unwrap()
}

/// A JSON-RPC request with `A2A-Version: 1.0`.
fn rpc(body: &str) -> Request<Body> {
    request(
        "POST",
        "/",
        &[("content-type", "application/json"), ("a2a-version", "1.0")],
        Body::from(body.to_string()),
    )
}

async fn call(router: &Router, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, Value) {
    let resp = router.clone().oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap();
    let v = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (parts.status, parts.headers, v)
}

/// A body that records whether anyone read it.
fn watched_body(read: Arc<AtomicBool>) -> Body {
    Body::from_stream(futures::stream::once(async move {
        read.store(true, Ordering::SeqCst);
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"not json"))
    }))
}

#[tokio::test]
async fn authentication_comes_before_the_body_is_read() {
    let (router, _dir) = service(with_token).await;
    let read = Arc::new(AtomicBool::new(false));
    let req = request(
        "POST",
        "/",
        &[("content-type", "application/json")],
        watched_body(read.clone()),
    );
    let (status, headers, _) = call(&router, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers["www-authenticate"]
        .to_str()
        .unwrap()
        .starts_with("Bearer"));
    assert!(!read.load(Ordering::SeqCst), "the body was read before 401");
    // A body over the limit, an unknown route, a REST route: 401 all the same.
    let big = "x".repeat(crate::settings::DEFAULT_BODY_LIMIT + 1);
    for req in [
        request("POST", "/", &[], Body::from(big)),
        request("GET", "/no/such/route", &[], Body::empty()),
        request("GET", "/a2a/rest/tasks", &[], Body::empty()),
        request("GET", "/metrics", &[], Body::empty()),
    ] {
        let (status, _, _) = call(&router, req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    // With the token the same bad body reaches the JSON-RPC parser.
    let auth = format!("Bearer {TOKEN}");
    let req = request(
        "POST",
        "/",
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        watched_body(read.clone()),
    );
    let (status, _, v) = call(&router, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(v["error"]["code"], -32700, "{v}");
    assert!(read.load(Ordering::SeqCst));
}

/// With `--route-by-metadata` the body decides the adapter; it is still never read for a
/// caller without credentials (before, the router read every body up to the limit first).
#[tokio::test]
async fn route_by_metadata_reads_no_body_before_authentication() {
    let (router, _dir) = service(|s| {
        with_token(s);
        s.adapter = Some("demo,conformance".into());
        s.route_by_metadata = true;
    })
    .await;
    let auth = format!("Bearer {TOKEN}");
    for path in [
        "/",
        "/a2a",
        "/a2a/rest/message:send",
        "/a2a/rest/message:stream",
    ] {
        let read = Arc::new(AtomicBool::new(false));
        let req = request(
            "POST",
            path,
            &[("content-type", "application/json")],
            watched_body(read.clone()),
        );
        let (status, _, _) = call(&router, req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!read.load(Ordering::SeqCst), "{path}: body read before 401");
        // An authenticated caller's body is read (to route it).
        let req = request(
            "POST",
            path,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
            watched_body(read.clone()),
        );
        let _ = call(&router, req).await;
        assert!(
            read.load(Ordering::SeqCst),
            "{path}: routed without reading"
        );
    }
}

#[tokio::test]
async fn the_card_and_health_are_public() {
    let (router, _dir) = service(with_token).await;
    for path in [
        "/health",
        "/.well-known/agent-card.json",
        "/.well-known/agent.json",
    ] {
        let (status, _, v) = call(&router, request("GET", path, &[], Body::empty())).await;
        assert_eq!(status, StatusCode::OK, "{path}: {v}");
    }
    let (_, _, card) = call(
        &router,
        request("GET", "/.well-known/agent-card.json", &[], Body::empty()),
    )
    .await;
    assert!(card["name"].is_string(), "{card}");
}

#[tokio::test]
async fn host_and_origin_are_checked_before_authentication() {
    let (router, _dir) = service(with_token).await;
    let req = Request::builder()
        .method("POST")
        .uri("/")
        .header("host", "evil.example:41242")
        .body(Body::empty())
        .unwrap();
    let (status, _, v) = call(&router, req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(v["message"].as_str().unwrap().contains("Host"), "{v}");
    let (status, _, v) = call(
        &router,
        request(
            "POST",
            "/",
            &[("origin", "https://evil.example")],
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(v["message"].as_str().unwrap().contains("origin"), "{v}");
}

#[tokio::test]
async fn the_same_origin_includes_the_scheme() {
    let (router, _dir) = service(|s| {
        s.security.allowed_origins = vec!["https://app.example".into()];
    })
    .await;
    let origin = |o: &'static str| request("GET", "/health", &[("origin", o)], Body::empty());
    // The server's own origin (plain HTTP, the Host it was sent to) and the listed one.
    for o in ["http://127.0.0.1:41242", "https://app.example"] {
        let (status, headers, _) = call(&router, origin(o)).await;
        assert_eq!(status, StatusCode::OK, "{o}");
        assert_eq!(headers["access-control-allow-origin"], o);
        assert!(headers["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("www-authenticate"));
    }
    // The same host under another scheme is another origin.
    for o in ["https://127.0.0.1:41242", "http://app.example"] {
        let (status, _, _) = call(&router, origin(o)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{o}");
    }
    // The public URL's origin is the server's too.
    let (router, _dir) = service(|s| {
        s.public_url = Some("https://agents.example.com/".into());
    })
    .await;
    let req = Request::builder()
        .uri("/health")
        .header("host", "agents.example.com")
        .header("origin", "https://agents.example.com")
        .body(Body::empty())
        .unwrap();
    let (status, _, _) = call(&router, req).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn preflights_are_answered_before_authentication() {
    let (router, _dir) = service(|s| {
        with_token(s);
        s.security.allowed_origins = vec!["https://app.example".into()];
    })
    .await;
    let preflight = request(
        "OPTIONS",
        "/",
        &[
            ("origin", "https://app.example"),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "authorization, a2a-version",
            ),
        ],
        Body::empty(),
    );
    let (status, h, _) = call(&router, preflight).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(h["access-control-allow-origin"], "https://app.example");
    assert_eq!(h["access-control-allow-methods"], "GET,POST,DELETE,OPTIONS");
    assert_eq!(
        h["access-control-allow-headers"],
        "authorization, a2a-version"
    );
    assert_eq!(h["access-control-max-age"], "600");
    // Without an origin a preflight is refused; a 401 to an allowed origin carries CORS.
    let bare = request(
        "OPTIONS",
        "/",
        &[("access-control-request-method", "POST")],
        Body::empty(),
    );
    assert_eq!(call(&router, bare).await.0, StatusCode::FORBIDDEN);
    let (status, h, _) = call(
        &router,
        request(
            "POST",
            "/",
            &[("origin", "https://app.example")],
            Body::empty(),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(h["access-control-allow-origin"], "https://app.example");
}

#[tokio::test]
async fn jsonrpc_errors_in_order() {
    let (router, _dir) = service(|_| {}).await;
    let cases = [
        ("{not json", -32700),
        (r#"[]"#, -32600),
        (
            r#"{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}"#,
            -32600,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "NoSuchMethod"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": 7}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 7}}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}"#,
            -32001,
        ),
    ];
    for (body, code) in cases {
        let (status, _, v) = call(&router, rpc(body)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(v["error"]["code"], code, "{body}: {v}");
        assert_eq!(v["jsonrpc"], "2.0");
    }
    // A known method answers with its result and the request's id.
    let (_, _, v) = call(
        &router,
        rpc(r#"{"jsonrpc": "2.0", "id": "x-1", "method": "ListTasks", "params": {}}"#),
    )
    .await;
    assert_eq!(v["id"], "x-1");
    assert_eq!(v["result"]["tasks"], json!([]), "{v}");
    // The v0.3 method set, without a version header.
    let req = request(
        "POST",
        "/",
        &[("content-type", "application/json")],
        Body::from(
            r#"{"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "nope"}}"#,
        ),
    );
    let (_, _, v) = call(&router, req).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
}

#[tokio::test]
async fn the_content_type_is_checked_first() {
    let (router, _dir) = service(|_| {}).await;
    let req = request(
        "POST",
        "/",
        &[("content-type", "text/plain")],
        Body::from("{not json"),
    );
    let (status, _, v) = call(&router, req).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(v["error"]["code"], -32005, "{v}");
}

#[tokio::test]
async fn versions_are_negotiated() {
    let (router, _dir) = service(|_| {}).await;
    let body = r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}"#;
    for (version, code) in [
        ("1.0", -32001),
        ("1", -32001),
        ("0.3", -32009),
        ("2.0", -32009),
    ] {
        let req = request(
            "POST",
            "/",
            &[
                ("content-type", "application/json"),
                ("a2a-version", version),
            ],
            Body::from(body),
        );
        let (_, _, v) = call(&router, req).await;
        assert_eq!(v["error"]["code"], code, "A2A-Version {version}: {v}");
    }
    // The query parameter stands for the header.
    let req = request(
        "POST",
        "/?A2A-Version=9.9",
        &[("content-type", "application/json")],
        Body::from(body),
    );
    let (_, _, v) = call(&router, req).await;
    assert_eq!(v["error"]["code"], -32009, "{v}");
    // HTTP+JSON: a v1.0 route asked for as 0.3.
    let req = request(
        "GET",
        "/a2a/rest/tasks",
        &[("a2a-version", "0.3")],
        Body::empty(),
    );
    let (status, _, v) = call(&router, req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
    assert!(v.to_string().contains("A2A-Version 0.3"), "{v}");
    let req = request(
        "GET",
        "/a2a/rest/tasks",
        &[("a2a-version", "1.0")],
        Body::empty(),
    );
    assert_eq!(call(&router, req).await.0, StatusCode::OK);
}

#[tokio::test]
async fn required_extensions_are_checked() {
    let (router, _dir) = service(|s| {
        s.required_extensions = vec![super::extensions::TOOL_TRACE.to_string()];
    })
    .await;
    let body = r#"{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}"#;
    let (_, _, v) = call(&router, rpc(body)).await;
    assert_eq!(v["error"]["code"], -32008, "{v}");
    let req = request(
        "POST",
        "/",
        &[
            ("content-type", "application/json"),
            ("a2a-version", "1.0"),
            ("a2a-extensions", super::extensions::TOOL_TRACE),
        ],
        Body::from(body),
    );
    let (_, h, v) = call(&router, req).await;
    assert_eq!(v["error"]["code"], -32001, "{v}");
    assert_eq!(h["a2a-extensions"], super::extensions::TOOL_TRACE);
}

#[tokio::test]
async fn routes_that_do_not_exist() {
    let (router, _dir) = service(|_| {}).await;
    let (status, _, v) = call(
        &router,
        request("GET", "/a2a/rest/nope", &[], Body::empty()),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{v}");
    assert!(v.to_string().contains("/a2a/rest/nope"), "{v}");
    let (status, _, v) = call(&router, request("GET", "/elsewhere", &[], Body::empty())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(v["message"].as_str().unwrap().contains("/elsewhere"), "{v}");
    // GET / is the index (it points at the card); other methods but POST are not allowed.
    let (status, _, v) = call(&router, request("GET", "/", &[], Body::empty())).await;
    assert_eq!(status, StatusCode::OK);
    assert!(v.to_string().contains("agent-card.json"), "{v}");
    let (status, _, _) = call(&router, request("PUT", "/", &[], Body::empty())).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    // A trailing slash is trimmed, and the default adapter is also at /agents/{id}/.
    for path in ["/health/", "/agents/demo/.well-known/agent-card.json"] {
        let (status, _, _) = call(&router, request("GET", path, &[], Body::empty())).await;
        assert_eq!(status, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_get_413() {
    let (router, _dir) = service(|s| s.body_limit = 1024).await;
    let big = format!(
        r#"{{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {{"id": "{}"}}}}"#,
        "x".repeat(2048)
    );
    let (status, _, v) = call(&router, rpc(&big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
    assert_eq!(v["error"]["code"], -32600, "{v}");
    let req = request(
        "POST",
        "/a2a/rest/message:send",
        &[("content-type", "application/json")],
        Body::from(big),
    );
    assert_eq!(call(&router, req).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn the_signed_card_is_built_once_per_base_url() {
    use crate::protocol::jws::{Alg, CardSigner};
    let (app, _dir) = started(|s| {
        let signer = CardSigner::new(Alg::Hs256, "card-secret", None).unwrap();
        s.card_signer = Some(Arc::new(signer));
    })
    .await;
    let router = app.router();
    let cache = app.agents()[0].card.cache.clone();
    let get = |host: &'static str| {
        Request::builder()
            .uri("/.well-known/agent-card.json")
            .header("host", host)
            .body(Body::empty())
            .unwrap()
    };
    let (_, h1, card) = call(&router, get("127.0.0.1:41242")).await;
    assert!(card["signatures"][0]["signature"].is_string(), "{card}");
    let (_, h2, again) = call(&router, get("127.0.0.1:41242")).await;
    assert_eq!((h1["etag"].clone(), &card), (h2["etag"].clone(), &again));
    assert_eq!(cache.len(), 1, "the second GET is served from the cache");
    // Another Host is another base URL: its own card, with its own URLs and signature.
    let (_, h3, other) = call(&router, get("localhost:41242")).await;
    assert_ne!(h1["etag"], h3["etag"]);
    assert!(
        other.to_string().contains("http://localhost:41242/"),
        "{other}"
    );
    assert_eq!(cache.len(), 2);
}
