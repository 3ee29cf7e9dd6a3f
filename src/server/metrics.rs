//! `GET /metrics`: Prometheus text from the process-wide recorder. The names:
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `agent_host_tasks_created_total` | counter | adapter |
//! | `agent_host_tasks_finished_total` | counter | adapter, state |
//! | `agent_host_task_duration_seconds` | histogram (summary) | adapter, state |
//! | `agent_host_running_tasks` | gauge | |
//! | `agent_host_queued_tasks` | gauge | |
//! | `agent_host_sse_events_total` | counter | |
//! | `agent_host_sse_subscribers` | gauge | |
//! | `agent_host_spawn_failures_total` | counter | adapter |
//! | `agent_host_egress_refused_total` | counter | |
//! | `agent_host_push_deliveries_total` / `agent_host_push_failures_total` | counter | |
//! | `agent_host_tokens_total` | counter | adapter, kind (input, output) |
//! | `agent_host_cost_usd_total` | gauge (only grows) | adapter |
//! | `agent_host_workspaces`, `agent_host_workspace_bytes` | gauge (measured when `/metrics` is read, again only where a turn ended since) | adapter |

use std::sync::{Arc, Mutex, OnceLock, Weak};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::workspace::Workspaces;

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// The process's Prometheus recorder, installed on first use (None if another recorder
/// was installed first).
pub fn handle() -> Option<&'static PrometheusHandle> {
    HANDLE
        .get_or_init(|| PrometheusBuilder::new().install_recorder().ok())
        .as_ref()
}

/// `agent_host_sse_events_total`, looked up once: counting a frame then costs an atomic add,
/// not a lookup of the name in the registry (hashing it) on every frame.
pub fn sse_events() -> &'static metrics::Counter {
    static COUNTER: OnceLock<metrics::Counter> = OnceLock::new();
    COUNTER.get_or_init(|| {
        // The recorder first, so that the handle counts into it and not into nothing.
        let _ = handle();
        metrics::counter!("agent_host_sse_events_total")
    })
}

/// The workspaces whose gauges a read of `/metrics` brings up to date (the host's adapters').
static WORKSPACES: Mutex<Vec<Weak<Workspaces>>> = Mutex::new(Vec::new());

/// Has every read of `/metrics` measure `all` first ([`Workspaces::refresh_gauges`]): a
/// workspace's disk use is measured when someone asks for it, not at every turn's end.
pub fn watch_workspaces(all: &Arc<Workspaces>) {
    let mut watched = WORKSPACES.lock().unwrap_or_else(|p| p.into_inner());
    watched.retain(|w| w.strong_count() > 0);
    watched.push(Arc::downgrade(all));
}

/// Measures the watched workspaces that changed since they were last measured.
async fn refresh_workspaces() {
    let live: Vec<Arc<Workspaces>> = WORKSPACES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    if live.is_empty() {
        return;
    }
    let _ = tokio::task::spawn_blocking(move || {
        for all in live {
            all.refresh_gauges();
        }
    })
    .await;
}

/// `GET /metrics`.
pub async fn get_metrics() -> Response {
    refresh_workspaces().await;
    match handle() {
        Some(h) => {
            let mut r = (StatusCode::OK, h.render()).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            r
        }
        None => (StatusCode::NOT_FOUND, "metrics are not available").into_response(),
    }
}
