//! `agent-host mcp --url URL`: MCP over stdio for a client that starts its servers as local
//! processes, relayed to a running host's `/mcp` endpoint (local or remote) with the
//! credentials given here.
//!
//! A bridge and not a second server: every message the client writes on stdin goes to the
//! host's Streamable HTTP endpoint, and every message the host answers (results, errors,
//! progress notifications) comes back on stdout, so the tools, their owners, limits and
//! errors are the host's, and nothing here knows a tool. Both ends are rmcp's transports (its
//! stdio transport and its Streamable HTTP client, which does the protocol's handshake,
//! headers and SSE reading), joined message by message. The A2A client library
//! (`src/client/`) was the other way: it would mean implementing each tool a second time,
//! on A2A calls, and keeping the two in step.

use std::collections::HashMap;

use axum::http::{HeaderName, HeaderValue};
use clap::Args;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{IntoTransport, StreamableHttpClientTransport, Transport};
use rmcp::{RoleClient, RoleServer};

/// `agent-host mcp`.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The host's MCP endpoint, e.g. http://127.0.0.1:41242/mcp (a URL without a path gets
    /// /mcp).
    #[arg(long, env = "AGENT_HOST_URL")]
    pub url: String,
    /// Bearer token sent as `Authorization: Bearer ...`.
    #[arg(long, env = "A2A_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// API key sent in the --api-key-header header.
    #[arg(long, env = "AGENT_HOST_MCP_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The header the host reads API keys from.
    #[arg(long, default_value = "X-API-Key")]
    pub api_key_header: String,
}

/// Why the bridge stopped.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    #[error("{0}")]
    Usage(String),
    #[error("sending to the host: {0}")]
    Remote(String),
    #[error("writing to the client: {0}")]
    Local(String),
}

/// The endpoint URL: `url` itself, or `url` + `/mcp` when it names no path.
fn endpoint(url: &str) -> Result<String, BridgeError> {
    let parsed = url::Url::parse(url)
        .map_err(|e| BridgeError::Usage(format!("--url {url}: not a URL ({e})")))?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" {
        return Err(BridgeError::Usage(format!(
            "--url {url}: use an http:// or https:// URL"
        )));
    }
    if parsed.path() == "/" || parsed.path().is_empty() {
        return Ok(format!(
            "{}{}",
            url.trim_end_matches('/'),
            crate::server::mcp::PATH
        ));
    }
    Ok(url.to_string())
}

fn config(args: &McpArgs) -> Result<StreamableHttpClientTransportConfig, BridgeError> {
    let mut cfg = StreamableHttpClientTransportConfig::with_uri(endpoint(&args.url)?);
    if let Some(t) = args.token.as_deref().filter(|t| !t.is_empty()) {
        cfg = cfg.auth_header(t);
    }
    if let Some(k) = args.api_key.as_deref().filter(|k| !k.is_empty()) {
        let name = HeaderName::try_from(args.api_key_header.as_str()).map_err(|_| {
            BridgeError::Usage(format!(
                "--api-key-header {}: not a header name",
                args.api_key_header
            ))
        })?;
        let value = HeaderValue::try_from(k)
            .map_err(|_| BridgeError::Usage("--api-key: not a header value".into()))?;
        cfg = cfg.custom_headers(HashMap::from([(name, value)]));
    }
    Ok(cfg)
}

/// Relays between stdin/stdout and the host until either side ends.
pub async fn run(args: McpArgs) -> Result<(), BridgeError> {
    let cfg = config(&args)?;
    // reqwest 0.13 is built without a default crypto provider: ring, like the rest of the
    // binary. Installing fails only when one is installed already, which is as good.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest013::Client::builder()
        .build()
        .map_err(|e| BridgeError::Usage(format!("HTTP client: {e}")))?;
    let remote = StreamableHttpClientTransport::with_client(client, cfg);
    let local = rmcp::transport::stdio();
    relay(
        IntoTransport::<RoleServer, _, _>::into_transport(local),
        IntoTransport::<RoleClient, _, _>::into_transport(remote),
    )
    .await
}

/// Passes client messages to the host and the host's messages to the client. Sends to the
/// host are not awaited in the loop: a tool call that waits for its task must not hold up the
/// client's next message (another call, or a cancellation).
async fn relay<L, R>(mut local: L, mut remote: R) -> Result<(), BridgeError>
where
    L: Transport<RoleServer>,
    R: Transport<RoleClient>,
{
    loop {
        tokio::select! {
            m = local.receive() => {
                let Some(m) = m else { break };
                let sending = remote.send(m);
                tokio::spawn(async move {
                    if let Err(e) = sending.await {
                        tracing::error!(error = %e, "MCP bridge: the host did not take a message");
                    }
                });
            }
            m = remote.receive() => {
                let Some(m) = m else {
                    return Err(BridgeError::Remote("the connection to the host ended".into()));
                };
                local.send(m).await.map_err(|e| BridgeError::Local(e.to_string()))?;
            }
        }
    }
    let _ = remote.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_without_a_path_gets_the_mcp_path() {
        assert_eq!(
            endpoint("http://127.0.0.1:41242").unwrap(),
            "http://127.0.0.1:41242/mcp"
        );
        assert_eq!(
            endpoint("http://127.0.0.1:41242/").unwrap(),
            "http://127.0.0.1:41242/mcp"
        );
        assert_eq!(
            endpoint("https://h.example/x/mcp").unwrap(),
            "https://h.example/x/mcp"
        );
        assert!(endpoint("ftp://h").is_err());
        assert!(endpoint("not a url").is_err());
    }
}
