//! The web console at `/ui/` (`ui = true`, `AGENT_HOST_UI`): the hand-written HTML, CSS and
//! ES modules of the repository's `ui/` folder, embedded in the binary, plus one JSON route
//! for what A2A does not carry.
//!
//! The files are public (they hold no secrets; [`super::guard`] lets `/ui/…` through without
//! credentials) and are served with a strict Content-Security-Policy (no inline script or
//! style, no `eval`, same-origin connections only, no framing), `nosniff`, and an `ETag`
//! so a reload costs a 304. Everything the page shows comes from A2A calls it makes with the
//! token the user typed, plus `GET /ui/api/host`, which needs the same credentials:
//!
//! ```json
//! {"version": "0.1.0", "adapters": [{"id": "demo", "name": "…", "default": true,
//!   "path": "/", "cliVersion": "0.1.0", "running": 0, "queued": 0}],
//!  "workspaceRoots": ["/srv/repo"], "inputModes": ["text/plain", "…"],
//!  "sandbox": {"mode": "auto", "inForce": ["…"], "missing": []}}
//! ```
//!
//! `sandbox` is the shape of the extended card's `runtime.sandbox` (`{"mode", "inForce",
//! "missing"}`) where the host sandboxes its tasks, else null.
//!
//! The files are embedded with `include_str!`: ten small files need no embedding crate
//! (`rust-embed` and its proc macros would buy only a directory walk).

use std::sync::{Arc, OnceLock};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::AppState;

/// The console's Content-Security-Policy: only this origin's files, no inline code, no
/// `eval`, no plugins, no framing, no form posts, no `<base>` rewriting.
pub const CSP: &str =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// One embedded file: name under `/ui/`, content type, bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_str!("../../ui/index.html"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../../ui/console.css"),
    },
    Asset {
        name: "main.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/main.js"),
    },
    Asset {
        name: "a2a.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/a2a.js"),
    },
    Asset {
        name: "views.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/views.js"),
    },
    Asset {
        name: "task.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/task.js"),
    },
    Asset {
        name: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/dom.js"),
    },
    Asset {
        name: "markdown.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/markdown.js"),
    },
    Asset {
        name: "changes.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/changes.js"),
    },
    Asset {
        name: "time.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../../ui/time.js"),
    },
];

/// The ETag of each asset (a hash of its bytes), computed once.
fn etags() -> &'static [String] {
    static TAGS: OnceLock<Vec<String>> = OnceLock::new();
    TAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| {
                let d = Sha256::digest(a.body.as_bytes());
                format!("\"{}\"", hex::encode(&d[..12]))
            })
            .collect()
    })
}

/// The console's routes over every served adapter (the default first), behind the same
/// gate, CORS and guard layers as the API.
pub fn routes(agents: &[AppState]) -> Router {
    let Some(first) = agents.first() else {
        return Router::new();
    };
    let guard = first.guard.clone();
    Router::new()
        .route("/ui", get(index))
        .route("/ui/api/host", get(host))
        .route("/ui/{file}", get(file))
        .layer(axum::middleware::from_fn_with_state(
            guard.clone(),
            super::guard::guard,
        ))
        .layer(super::guard::cors_layer(guard.clone()))
        .layer(axum::middleware::from_fn_with_state(
            guard,
            super::guard::gate,
        ))
        .with_state(Arc::<[AppState]>::from(agents.to_vec()))
}

async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

/// The asset `name` with its headers, 304 when the client holds this version, or 404.
fn serve(name: &str, headers: &HeaderMap) -> Response {
    let Some(i) = ASSETS.iter().position(|a| a.name == name) else {
        return (
            StatusCode::NOT_FOUND,
            Json(
                json!({"error": "Not Found", "message": format!("the console has no file {name}")}),
            ),
        )
            .into_response();
    };
    let (asset, etag) = (&ASSETS[i], &etags()[i]);
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    // Revalidate every time: a new binary may serve new files under the same names.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}

/// `GET /ui/api/host`: the header's data (adapters, CLI versions, load) and the New task
/// page's (workspace roots, input modes). Needs credentials when they are configured.
async fn host(State(agents): State<Arc<[AppState]>>) -> Response {
    let adapters: Vec<Value> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let launch = a.engine.launch();
            let (running, queued) = a.engine.load();
            // The live tasks neither running nor queued wait for input (they hold no slot).
            let waiting = a.engine.live_count().saturating_sub(running + queued);
            json!({
                "id": launch.adapter.id,
                "name": launch.adapter.name,
                "default": i == 0,
                "path": if i == 0 { "/".to_string() } else { format!("/agents/{}/", launch.adapter.id) },
                "cliVersion": a.card.cli_version.get(),
                "running": running,
                "queued": queued,
                "waiting": waiting,
            })
        })
        .collect();
    let first = agents.first().map(|a| &a.engine);
    let roots: Vec<String> = first
        .map(|e| {
            e.workspace_roots()
                .iter()
                .map(|p| p.display().to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut resp = Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "adapters": adapters,
        "workspaceRoots": roots,
        "inputModes": agents.first().map(|a| a.card.input_modes.clone()).unwrap_or_default(),
        "sandbox": agents.first().map_or(Value::Null, |a| {
            super::extended::sandbox_json(a.engine.launch().sandbox.as_ref())
        }),
    }))
    .into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_found_and_tagged() {
        for a in ASSETS {
            let r = serve(a.name, &HeaderMap::new());
            assert_eq!(r.status(), StatusCode::OK, "{}", a.name);
            assert_eq!(r.headers()[header::CONTENT_TYPE], a.content_type);
            assert_eq!(r.headers()[header::CONTENT_SECURITY_POLICY], CSP);
            assert!(r.headers().contains_key(header::ETAG));
        }
        assert_eq!(
            serve("../Cargo.toml", &HeaderMap::new()).status(),
            StatusCode::NOT_FOUND
        );
    }

    #[test]
    fn a_matching_etag_gets_304() {
        let first = serve("main.js", &HeaderMap::new());
        let tag = first.headers()[header::ETAG].clone();
        let mut h = HeaderMap::new();
        h.insert(header::IF_NONE_MATCH, tag);
        assert_eq!(serve("main.js", &h).status(), StatusCode::NOT_MODIFIED);
    }

    #[test]
    fn no_inline_script_or_style_in_the_page() {
        let html = ASSETS[0].body;
        assert!(!html.contains("<script>") && !html.contains("style="));
        let handler = regex::Regex::new(r"(?i)\son[a-z]+\s*=").unwrap();
        assert!(!handler.is_match(html), "an inline event handler");
        for a in ASSETS {
            assert!(!a.body.contains("innerHTML"), "{} uses innerHTML", a.name);
            assert!(!a.body.contains("eval("), "{} uses eval", a.name);
        }
    }
}
