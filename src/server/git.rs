//! `git fetch` of a context's workspace over git's smart HTTP protocol, at
//! `/git/<contextId>` (docs/workspaces.md): `GET /git/<ctx>/info/refs?service=git-upload-pack`
//! and `POST /git/<ctx>/git-upload-pack`, answered by git itself ([`crate::workspace::serve`]).
//!
//! Behind the guard like every other route (no credential: 401) and the ownership rule of
//! the context's tasks: a caller that may not see the context, like a context without a
//! workspace, gets 404, and so does a workspace whose `.git` the agent removed (one it
//! replaced by a link or a special file: 409). Pushing is refused (403), and so is the dumb
//! protocol. With several
//! hosts on one store, a context whose workspace lives on another live host is fetched
//! through this one: the request is passed to the owner with the caller's credentials, as
//! commands are ([`super::peer`]).

use std::sync::OnceLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::{StreamExt, TryStreamExt};
use serde_json::json;

use super::{AppState, Caller};
use crate::engine::RequestOptions;
use crate::store::HostRecord;
use crate::workspace::serve::{GitEndpoint, GitRequest};

/// The routes, below the agent's base.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/git/{context}/info/refs", get(info_refs))
        .route("/git/{context}/git-upload-pack", post(upload_pack))
        .route("/git/{context}/git-receive-pack", post(receive_pack))
        // The "dumb" protocol's file reads (`HEAD`, `objects/...`): refused as such.
        .route("/git/{context}/{*file}", get(dumb_read))
}

#[derive(serde::Deserialize)]
struct InfoRefsQuery {
    service: Option<String>,
}

/// Which request of git's a call is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Asked {
    Fetch(GitEndpoint),
    Push,
    Dumb,
}

async fn info_refs(
    State(state): State<AppState>,
    Path(context): Path<String>,
    q: Result<Query<InfoRefsQuery>, axum::extract::rejection::QueryRejection>,
    axum::Extension(caller): axum::Extension<Caller>,
    axum::Extension(opts): axum::Extension<RequestOptions>,
    req: Request,
) -> Response {
    // A query git would not send (`service` twice, ...): the small JSON body of every other
    // refusal, not the extractor's plain text.
    let Query(q) = match q {
        Ok(q) => q,
        Err(e) => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "Bad Request",
                &format!(
                    "the query string is not one git sends (one service=git-upload-pack): {}",
                    e.body_text()
                ),
            )
        }
    };
    let asked = match q.service.as_deref() {
        Some("git-upload-pack") => Asked::Fetch(GitEndpoint::InfoRefs),
        Some("git-receive-pack") => Asked::Push,
        _ => Asked::Dumb,
    };
    handle(&state, &context, &caller, &opts, asked, req).await
}

async fn dumb_read(
    State(state): State<AppState>,
    Path((context, _file)): Path<(String, String)>,
    axum::Extension(caller): axum::Extension<Caller>,
    axum::Extension(opts): axum::Extension<RequestOptions>,
    req: Request,
) -> Response {
    handle(&state, &context, &caller, &opts, Asked::Dumb, req).await
}

async fn upload_pack(
    State(state): State<AppState>,
    Path(context): Path<String>,
    axum::Extension(caller): axum::Extension<Caller>,
    axum::Extension(opts): axum::Extension<RequestOptions>,
    req: Request,
) -> Response {
    let asked = Asked::Fetch(GitEndpoint::UploadPack);
    handle(&state, &context, &caller, &opts, asked, req).await
}

async fn receive_pack(
    State(state): State<AppState>,
    Path(context): Path<String>,
    axum::Extension(caller): axum::Extension<Caller>,
    axum::Extension(opts): axum::Extension<RequestOptions>,
    req: Request,
) -> Response {
    handle(&state, &context, &caller, &opts, Asked::Push, req).await
}

fn refuse(status: StatusCode, error: &str, message: &str) -> Response {
    (status, Json(json!({"error": error, "message": message}))).into_response()
}

fn not_found(context: &str) -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        "Not Found",
        &format!("no workspace of context {context}"),
    )
}

fn internal(message: &str) -> Response {
    refuse(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Internal Server Error",
        message,
    )
}

async fn handle(
    state: &AppState,
    context: &str,
    caller: &Caller,
    opts: &RequestOptions,
    asked: Asked,
    req: Request,
) -> Response {
    let engine = &state.engine;
    match engine.context_visible(context, caller.owner()).await {
        Ok(true) => {}
        Ok(false) => return not_found(context),
        Err(e) => return internal(&e.to_string()),
    }
    let endpoint = match asked {
        Asked::Fetch(e) => e,
        Asked::Push => {
            return refuse(
                StatusCode::FORBIDDEN,
                "Forbidden",
                "a context's workspace is served read-only: git push is refused",
            )
        }
        Asked::Dumb => {
            return refuse(
                StatusCode::FORBIDDEN,
                "Forbidden",
                "only git's smart HTTP protocol is served (git-upload-pack)",
            )
        }
    };
    match engine.context_host(context, opts).await {
        Ok(Some(host)) => {
            let me = engine.host_id().unwrap_or_default().to_string();
            let path = format!("{}git/{context}", state.card.path_prefix);
            return pass_on(&host, &me, &path, endpoint, opts, req).await;
        }
        Ok(None) => {}
        Err(e) => return internal(&e.to_string()),
    }
    let ws = match engine.context_workspace(context, caller.owner()).await {
        Ok(Some(ws)) => ws,
        Ok(None) => return not_found(context),
        Err(e) => return internal(&e.to_string()),
    };
    let (parts, body) = req.into_parts();
    let git_req = GitRequest {
        endpoint,
        content_type: text(&parts.headers, header::CONTENT_TYPE.as_str()),
        content_encoding: text(&parts.headers, header::CONTENT_ENCODING.as_str()),
        content_length: text(&parts.headers, header::CONTENT_LENGTH.as_str())
            .and_then(|v| v.parse().ok()),
        body: body
            .into_data_stream()
            .map_err(std::io::Error::other)
            .boxed(),
    };
    match crate::workspace::serve::serve(&ws, git_req).await {
        Ok(r) => {
            let mut resp = Response::new(Body::from_stream(r.body));
            *resp.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::OK);
            for (k, v) in r.headers {
                if let (Ok(k), Ok(v)) = (
                    header::HeaderName::from_bytes(k.as_bytes()),
                    HeaderValue::from_str(&v),
                ) {
                    resp.headers_mut().append(k, v);
                }
            }
            resp
        }
        Err(e) => no_repository(context, &e).unwrap_or_else(|| {
            tracing::error!(context = %context, error = %e, "serving a workspace to git failed");
            internal("the workspace could not be served (see the host log)")
        }),
    }
}

/// The answer to a fetch of a workspace whose repository the agent removed (404) or
/// replaced by something the host runs no git through (a link, a special file, a folder
/// without git's folders: 409); None for the host's own failures.
fn no_repository(context: &str, e: &crate::workspace::WorkspaceError) -> Option<Response> {
    use crate::workspace::WorkspaceError;
    match e {
        WorkspaceError::GitFolderMissing { .. } => Some(refuse(
            StatusCode::NOT_FOUND,
            "Not Found",
            &format!(
                "the workspace of context {context} has no git repository any more (its .git was removed, by the agent?): there is no branch to fetch; its files are as the agent left them"
            ),
        )),
        WorkspaceError::Tampered { .. } => Some(refuse(
            StatusCode::CONFLICT,
            "Conflict",
            &format!(
                "the workspace of context {context} has a .git that is not a repository the host serves (a link, a special file, or git's folders missing or replaced, by the agent?): there is no branch to fetch"
            ),
        )),
        _ => None,
    }
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Longest wait for another host to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

fn peer_client() -> Option<&'static reqwest::Client> {
    static CLIENT: OnceLock<Option<reqwest::Client>> = OnceLock::new();
    CLIENT
        .get_or_init(|| {
            reqwest::Client::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .user_agent(concat!("agent-host/", env!("CARGO_PKG_VERSION")))
                .build()
                .ok()
        })
        .as_ref()
}

/// Passes the request to the host that owns the context, as the caller, and answers with
/// what that host answers.
async fn pass_on(
    to: &HostRecord,
    me: &str,
    path: &str,
    endpoint: GitEndpoint,
    opts: &RequestOptions,
    req: Request,
) -> Response {
    let Some(http) = peer_client() else {
        return internal("no HTTP client to reach the other hosts");
    };
    let base = to.address.trim_end_matches('/');
    let (parts, body) = req.into_parts();
    let mut out = match endpoint {
        GitEndpoint::InfoRefs => {
            http.get(format!("{base}/{path}/info/refs?service=git-upload-pack"))
        }
        GitEndpoint::UploadPack => http
            .post(format!("{base}/{path}/git-upload-pack"))
            .body(reqwest::Body::wrap_stream(body.into_data_stream())),
    };
    for (k, v) in &opts.relay.headers {
        out = out.header(k, v);
    }
    for name in ["content-type", "content-encoding", "git-protocol", "accept"] {
        if let Some(v) = parts.headers.get(name) {
            out = out.header(name, v.clone());
        }
    }
    out = out.header(super::peer::FORWARDED_BY, me);
    tracing::info!(host = %to.id, address = %to.address, path = %path, "passing a git fetch to the host that owns the context");
    let answer = match out.send().await {
        Ok(a) => a,
        Err(e) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable",
                &format!(
                    "agent-host {} at {} holds this context's workspace but could not be reached ({e}); retry later",
                    to.id, to.address
                ),
            )
        }
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::OK);
    let kept: Vec<(&str, HeaderValue)> = ["content-type", "cache-control", "expires", "pragma"]
        .into_iter()
        .filter_map(|name| {
            let v = answer.headers().get(name)?;
            Some((name, HeaderValue::from_bytes(v.as_bytes()).ok()?))
        })
        .collect();
    let mut resp = Response::new(Body::from_stream(answer.bytes_stream()));
    *resp.status_mut() = status;
    for (name, v) in kept {
        resp.headers_mut().insert(name, v);
    }
    resp
}
