//! Passing commands to the host that runs their task (docs/several-hosts.md): the HTTP
//! side of [`crate::engine::Forwarder`]. The engine decides which host; this module calls
//! that host's ordinary A2A v1.0 JSON-RPC endpoint at its advertised address with the
//! [`crate::client`], carrying the caller's own credentials unchanged (so the owner
//! authenticates the caller and applies the same per-credential task ownership) and
//! [`FORWARDED_BY`], which stops the owner from passing the command on again.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::http::HeaderMap;

use crate::client::{Binding, Client, ClientError, Endpoint, ProtocolVersion};
use crate::engine::{Engine, Forwarder, Relay};
use crate::protocol::v1::{SendMessageRequest, SendMessageResponse, Task};
use crate::protocol::A2AError;
use crate::store::HostRecord;

/// The header a host adds to a command it passes on: its own id. A host that receives it
/// carries the command out itself or refuses it, never passes it on again.
pub const FORWARDED_BY: &str = "a2a-host-forwarded-by";

/// Headers passed on besides the credentials: the trace context and the A2A extensions.
const PASSED_ON: [&str; 3] = ["traceparent", "a2a-extensions", "x-a2a-extensions"];

/// What of a request goes along when its command is passed on: the credential headers
/// (`Authorization` and the API key header) as they came, the trace context, the extensions,
/// and who passed it on already.
pub fn relay(headers: &HeaderMap, api_key_header: &str) -> Relay {
    let mut out = Vec::new();
    for name in ["authorization", api_key_header]
        .into_iter()
        .chain(PASSED_ON)
    {
        for v in headers.get_all(name) {
            if let Ok(v) = v.to_str() {
                out.push((name.to_ascii_lowercase(), v.to_string()));
            }
        }
    }
    out.dedup();
    Relay {
        headers: out,
        forwarded_by: headers
            .get(FORWARDED_BY)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty()),
    }
}

/// The forwarder of an engine that joined other hosts (None: it did not), for the same
/// agent on the owner. A passed-on cancel waits for the owner to stop the program (up to two
/// grace periods), an answer for the agent to take it: the wait allows both, with room.
pub fn for_engine(
    engine: &Engine,
    default: bool,
) -> Result<Option<Arc<dyn Forwarder>>, reqwest::Error> {
    let Some(me) = engine.host_id() else {
        return Ok(None);
    };
    let launch = engine.launch();
    let timeout = launch.cancel_grace * 2 + Duration::from_secs(30);
    let agent = (!default).then_some(launch.adapter.id.as_str());
    Ok(Some(Arc::new(HttpForwarder::new(me, agent, timeout)?)))
}

/// Longest wait for a host to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Calls other hosts for one agent of this host (the same agent on the owner: its default
/// one, or `/agents/<id>/`).
pub struct HttpForwarder {
    http: reqwest::Client,
    /// This host's id, sent as [`FORWARDED_BY`].
    me: String,
    /// The agent's JSON-RPC path on every host (`/` or `/agents/<id>/`).
    path: String,
    /// Longest wait for a passed-on command's answer (a cancel waits for the program to
    /// stop on the owner).
    timeout: Duration,
}

impl HttpForwarder {
    /// `agent`: None for the host's default agent, else the adapter id of a further one.
    pub fn new(
        me: &str,
        agent: Option<&str>,
        timeout: Duration,
    ) -> Result<HttpForwarder, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("agent-host/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(HttpForwarder {
            http,
            me: me.to_string(),
            path: match agent {
                None => "/".to_string(),
                Some(id) => format!("/agents/{id}/"),
            },
            timeout,
        })
    }

    async fn client(&self, to: &HostRecord, relay: &Relay) -> Result<Client, A2AError> {
        let base = to.address.trim_end_matches('/').to_string();
        let mut b = Client::builder(base.clone())
            .http_client(self.http.clone())
            .endpoint(Endpoint {
                url: format!("{base}{}", self.path),
                binding: Binding::JsonRpc,
                version: ProtocolVersion::V1,
                tenant: None,
            })
            .request_timeout(self.timeout)
            .header(FORWARDED_BY, self.me.clone());
        for (k, v) in &relay.headers {
            b = b.header(k.clone(), v.clone());
        }
        b.connect().await.map_err(|e| self.failed(to, e))
    }

    /// The error the caller gets: the owner's own error, or why it could not answer.
    fn failed(&self, to: &HostRecord, e: ClientError) -> A2AError {
        let who = format!("agent-host {} at {}", to.id, to.address);
        match e {
            ClientError::Remote(r) => A2AError::from_code(r.code, r.message),
            ClientError::Unreachable { .. }
            | ClientError::Transport { .. }
            | ClientError::Timeout { .. } => A2AError::Unavailable(format!(
                "{who} runs this task but could not be reached ({e}); retry later"
            )),
            ClientError::Http { status, .. } if status >= 500 => A2AError::Unavailable(format!(
                "{who} runs this task but answered HTTP {status}; retry later"
            )),
            ClientError::Http { status, .. } if status == 401 || status == 403 => {
                A2AError::Internal(format!(
                    "{who} refused a request this host passed on (HTTP {status}): every host must accept the same credentials"
                ))
            }
            other => A2AError::Internal(format!("{who}: {other}")),
        }
    }
}

#[async_trait]
impl Forwarder for HttpForwarder {
    async fn send(
        &self,
        to: &HostRecord,
        req: SendMessageRequest,
        relay: &Relay,
    ) -> Result<SendMessageResponse, A2AError> {
        let c = self.client(to, relay).await?;
        c.send(req).await.map_err(|e| self.failed(to, e))
    }

    async fn cancel(
        &self,
        to: &HostRecord,
        task_id: &str,
        relay: &Relay,
    ) -> Result<Task, A2AError> {
        let c = self.client(to, relay).await?;
        c.cancel(task_id).await.map_err(|e| self.failed(to, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_relay_keeps_credentials_trace_and_extensions_and_nothing_else() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer tok"));
        h.insert("x-api-key", HeaderValue::from_static("key-1"));
        h.insert("traceparent", HeaderValue::from_static("00-abc-def-01"));
        h.insert("a2a-extensions", HeaderValue::from_static("urn:x"));
        h.insert("cookie", HeaderValue::from_static("session=1"));
        h.insert("host", HeaderValue::from_static("b.example"));
        let r = relay(&h, "X-API-Key");
        let names: Vec<&str> = r.headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "authorization",
                "x-api-key",
                "traceparent",
                "a2a-extensions"
            ]
        );
        assert_eq!(r.headers[0].1, "Bearer tok");
        assert_eq!(r.forwarded_by, None);
        // Debug output never shows the values.
        let shown = format!("{r:?}");
        assert!(
            !shown.contains("tok") && !shown.contains("key-1"),
            "{shown}"
        );
        h.insert(FORWARDED_BY, HeaderValue::from_static(" host-b:1 "));
        assert_eq!(
            relay(&h, "x-api-key").forwarded_by.as_deref(),
            Some("host-b:1")
        );
    }

    #[tokio::test]
    async fn an_owner_that_cannot_be_reached_is_unavailable_not_an_internal_error() {
        // A port nothing listens on: bind one, then free it.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let f = HttpForwarder::new("b", None, Duration::from_secs(5)).unwrap();
        let to = HostRecord {
            id: "a".into(),
            address: format!("http://{addr}"),
            machine: "m".into(),
            pid: 1,
        };
        let err = f.cancel(&to, "t1", &Relay::default()).await.unwrap_err();
        assert!(matches!(err, A2AError::Unavailable(_)), "{err:?}");
        assert_eq!((err.code(), err.http_status()), (-32051, 503));
        assert!(err.to_string().contains(&to.address), "{err}");
    }
}
