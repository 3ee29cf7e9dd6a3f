//! The A2A gRPC binding (`lf.a2a.v1.A2AService`, generated from `proto/a2a.proto`), served on
//! its own port next to the HTTP server, on the same engines.
//!
//! Every method calls the same operations as the JSON-RPC and HTTP+JSON bindings
//! ([`super::ops`], [`super::push_rpc`], [`super::extended`]), so a task started over one
//! binding can be read, streamed, answered and canceled over any other. A request passes the
//! same [`Guard`] (metadata `authorization` Bearer/Basic or the API-key header, rate limit),
//! names its extensions in `a2a-extensions` metadata and its version in `a2a-version`.
//! Errors are gRPC statuses ([`A2AError::grpc_code`]) with a `google.rpc.ErrorInfo` detail for
//! the A2A errors. Streamed events carry their sequence number in `metadata.eventId` (the SSE
//! event id); `last-event-id` request metadata resumes after one. With several adapters the
//! first is the default and `tenant` names another by its id (the card of `agents/{id}/` says
//! so in its gRPC interface).
//!
//! The HTTP guard's Host and Origin checks are not applied: they keep web pages (DNS
//! rebinding, cross-origin fetches) away from the HTTP endpoints, and a browser cannot make a
//! gRPC call (no gRPC-Web is served). Requests are limited to tonic's default 4 MiB.

mod convert;
mod service;
#[cfg(test)]
mod tests;
pub mod wkt;

use std::future::Future;
use std::sync::Arc;

use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::extensions::{self, RequestExtensions};
use super::guard::{Guard, Refusal, Weight};
use super::negotiate::{check_version, Version};
use super::AppState;
use crate::protocol::error::ERROR_DOMAIN;
use crate::protocol::A2AError;

pub use service::{A2aGrpc, EVENT_ID_KEY};

/// The code generated from `proto/a2a.proto` (package `lf.a2a.v1`): messages with ProtoJSON
/// serde, the server and a client.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.rs"));
    include!(concat!(env!("OUT_DIR"), "/lf.a2a.v1.serde.rs"));
}

/// Serves the gRPC binding for `agents` (the first is the default) on `listener` until
/// `shutdown` resolves; then stops accepting and waits for open calls to end (streams end as
/// the engines end their tasks, which the HTTP server's shutdown does).
pub async fn serve<F>(
    listener: tokio::net::TcpListener,
    agents: Vec<AppState>,
    guard: Arc<Guard>,
    shutdown: F,
) -> Result<(), tonic::transport::Error>
where
    F: Future<Output = ()> + Send + 'static,
{
    let keepalive = agents.first().map(|a| a.keepalive);
    let service = pb::a2a_service_server::A2aServiceServer::new(A2aGrpc {
        calls: Arc::new(Calls { agents, guard }),
    });
    tonic::transport::Server::builder()
        .http2_keepalive_interval(keepalive)
        .add_service(service)
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(listener),
            shutdown,
        )
        .await
}

/// What every call needs: the agents and the guard.
pub(crate) struct Calls {
    agents: Vec<AppState>,
    guard: Arc<Guard>,
}

/// One admitted call: its agent, caller, extensions and stream resume point.
pub(crate) struct Call {
    state: AppState,
    caller: Option<String>,
    ext: RequestExtensions,
    traceparent: Option<String>,
    last_event_id: Option<String>,
    /// Credentials and context a command passed to another host carries.
    relay: crate::engine::Relay,
}

impl Calls {
    /// Checks a request as the HTTP guard and negotiation do (credentials, rate, version,
    /// required extensions) and picks its agent by `tenant`.
    fn admit<T>(
        &self,
        req: Request<T>,
        method: &str,
        tenant: impl Fn(&T) -> &String,
    ) -> Result<(Call, T), Status> {
        let peer = req.remote_addr().map(|a| a.ip());
        let weight = match method.parse::<crate::protocol::Method>() {
            Ok(m) if m.is_read() => Weight::Read,
            _ => Weight::Write,
        };
        let (metadata, _, msg) = req.into_parts();
        let headers = metadata.into_headers();
        let (caller, _) = self.guard.admit(&headers, false, peer, weight).map_err(|r| match r {
            Refusal::Unauthenticated => Status::unauthenticated(
                "this call needs a valid credential: send `authorization` (Bearer or Basic) or the API key metadata",
            ),
            Refusal::RateLimited(wait) => Status::resource_exhausted(format!(
                "rate limit reached for this caller (its credential, or its address without one); retry in {wait} s"
            )),
        })?;
        let requested = headers
            .get("a2a-version")
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty());
        check_version(requested, Version::V1, &format!("gRPC method {method}"))
            .map_err(|e| status(&e))?;
        let ext = self.guard.extensions(&headers);
        if let Some(uri) = &ext.missing_required {
            return Err(status(&A2AError::ExtensionSupportRequired(format!(
                "this agent requires the extension {uri}; name it in the a2a-extensions metadata"
            ))));
        }
        let state = self.agent(tenant(&msg)).map_err(|e| status(&e))?;
        let last_event_id = super::ops::last_event_id(&headers).map(str::to_string);
        Ok((
            Call {
                state,
                caller,
                ext,
                traceparent: super::guard::traceparent(&headers),
                last_event_id,
                relay: self.guard.relay(&headers),
            },
            msg,
        ))
    }

    /// Refuses a message for the call's agent that continues another agent's conversation
    /// (its context or task), as the HTTP bindings do ([`super::route::check_conversation`]):
    /// taken, it would start a second conversation under the same context id.
    async fn check_conversation(
        &self,
        call: &Call,
        r: &crate::protocol::v1::SendMessageRequest,
    ) -> Result<(), A2AError> {
        if self.agents.len() < 2 {
            return Ok(());
        }
        let agents = super::route::engines(&self.agents);
        let chosen = call.state.engine.launch().adapter.id.clone();
        let p = serde_json::to_value(r).map_err(|e| A2AError::Internal(e.to_string()))?;
        let how = super::route::How::Tenant;
        super::route::check_conversation(&agents, &p, &chosen, how, call.owner()).await
    }

    /// The agent a `tenant` names: the default when empty, else the adapter of that id.
    fn agent(&self, tenant: &str) -> Result<AppState, A2AError> {
        let tenant = tenant.trim();
        let found = if tenant.is_empty() {
            self.agents.first()
        } else {
            self.agents
                .iter()
                .find(|a| a.engine.launch().adapter.id == tenant)
        };
        found.cloned().ok_or_else(|| {
            A2AError::InvalidParams(format!(
                "tenant '{tenant}' is not an agent of this host; leave it empty for the default agent or use an adapter id from the card"
            ))
        })
    }
}

impl Call {
    fn owner(&self) -> Option<&str> {
        self.caller.as_deref()
    }

    /// The request's trace context and tool-trace extension, for the engine.
    fn options(&self) -> crate::engine::RequestOptions {
        crate::engine::RequestOptions {
            traceparent: self.traceparent.clone(),
            tool_trace: self.ext.tool_trace(),
            relay: self.relay.clone(),
        }
    }

    /// Runs an operation with the request's trace context and extensions (as the HTTP guard
    /// sets them) and answers its result, or its error as a status; the response names the
    /// extensions in use.
    async fn run<T, F>(&self, op: F) -> Result<Response<T>, Status>
    where
        F: Future<Output = Result<T, A2AError>>,
    {
        let out = extensions::EXTENSIONS.scope(self.ext.clone(), op).await;
        let mut resp = Response::new(out.map_err(|e| status(&e))?);
        if !self.ext.active.is_empty() {
            if let Ok(v) = MetadataValue::try_from(self.ext.active.join(", ")) {
                resp.metadata_mut().insert("a2a-extensions", v);
            }
        }
        Ok(resp)
    }
}

/// An error as a gRPC status: the code of [`A2AError::grpc_code`], the message clients see
/// over every binding, and for A2A errors a `google.rpc.ErrorInfo` (reason, domain
/// `a2a-protocol.org`, metadata such as the task id).
pub fn status(e: &A2AError) -> Status {
    let code = tonic::Code::from_i32(e.grpc_code());
    let message = match e {
        A2AError::Internal(detail) => {
            tracing::error!(error = %detail, "internal error (gRPC)");
            "Internal error".to_string()
        }
        other => other.to_string(),
    };
    match e.reason() {
        Some(reason) => {
            let metadata: std::collections::HashMap<String, String> =
                e.error_info_metadata().into_iter().collect();
            Status::with_error_details(
                code,
                message,
                ErrorDetails::with_error_info(reason, ERROR_DOMAIN, metadata),
            )
        }
        None => Status::new(code, message),
    }
}

/// Starts [`serve`] in the background for a host whose HTTP server stops on `signal`: the
/// returned future resolves on that signal (give it to the HTTP server) and stops the gRPC
/// server too; then hand the handle to [`finish`].
pub fn spawn<S>(
    listener: tokio::net::TcpListener,
    agents: Vec<AppState>,
    guard: Arc<Guard>,
    signal: S,
) -> (
    impl Future<Output = ()> + Send + 'static,
    tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
)
where
    S: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::watch::channel(false);
    let stopped = async move {
        let mut rx = rx;
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let handle = tokio::spawn(serve(listener, agents, guard, stopped));
    let shutdown = async move {
        signal.await;
        let _ = tx.send(true);
    };
    (shutdown, handle)
}

/// Waits (at most `drain`) for the gRPC server of [`spawn`] to end after the shutdown, once
/// the engines have ended their tasks and so its streams.
pub async fn finish(
    handle: tokio::task::JoinHandle<Result<(), tonic::transport::Error>>,
    drain: std::time::Duration,
) {
    match tokio::time::timeout(drain, handle).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => tracing::error!(error = %e, "gRPC server failed"),
        Ok(Err(e)) => tracing::error!(error = %e, "gRPC server task failed"),
        Err(_) => tracing::warn!("gRPC calls still open after the drain period; exiting anyway"),
    }
}
