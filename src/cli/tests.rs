use std::sync::{Arc, Mutex};

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::EnvFilter;

use super::LOG_FILTER;

/// A log writer into memory.
#[derive(Clone, Default)]
struct Written(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Written {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Written {
    type Writer = Written;

    fn make_writer(&'a self) -> Written {
        self.clone()
    }
}

#[test]
fn the_default_log_filter_leaves_out_what_mcp_clients_cause() {
    let out = Written::default();
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new(LOG_FILTER))
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(out.clone())
                .with_ansi(false),
        );
    tracing::subscriber::with_default(subscriber, || {
        // A client that dropped a waited call, and a client's bad argument, as rmcp logs them.
        tracing::error!(target: "rmcp::service", "failed to send pending response during drain");
        tracing::warn!(target: "rmcp::service", "response error");
        tracing::debug!(target: "agent_host::server::mcp", "MCP call refused");
        tracing::info!(target: "agent_host::server", "listening");
        tracing::warn!(target: "rmcp::transport", "other rmcp warnings stay");
    });
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("listening") && text.contains("stay"),
        "{text}"
    );
    for gone in ["drain", "response error", "refused"] {
        assert!(!text.contains(gone), "{gone}: {text}");
    }
}
