//! `GET /`: where a person who opens the server's address in a browser is told where to go
//! (the agent card, the health check, the metrics; the web console when one is served). A
//! small HTML page for a browser (`Accept: text/html`), JSON for anything else.

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::json;

use super::AppState;

/// The links of the index: `(name, path, what it is)`. `console` is the path of a web
/// console, when the server serves one.
fn links(prefix: &str, console: Option<&str>) -> Vec<(&'static str, String, &'static str)> {
    let mut out = Vec::new();
    if let Some(c) = console {
        out.push(("console", c.to_string(), "the web console"));
    }
    out.extend([
        (
            "card",
            format!("/{prefix}.well-known/agent-card.json"),
            "the A2A agent card: what this agent does and how to talk to it",
        ),
        ("health", "/health".to_string(), "health check"),
        ("metrics", "/metrics".to_string(), "Prometheus metrics"),
    ]);
    out
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `GET /`.
pub async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let links = links(&state.card.path_prefix, state.ui_enabled.then_some("/ui/"));
    let name = state
        .card
        .name
        .clone()
        .unwrap_or_else(|| state.engine.launch().adapter.name.clone());
    let html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    if html {
        let items: String = links
            .iter()
            .map(|(_, path, what)| {
                format!(
                    "<li><a href=\"{p}\">{p}</a>: {w}</li>",
                    p = esc(path),
                    w = esc(what)
                )
            })
            .collect();
        let page = format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{n}</title></head><body>\
             <h1>{n}</h1><p>An A2A agent served by agent-host {v}. A2A clients send JSON-RPC \
             requests with POST to this address.</p><ul>{items}</ul></body></html>",
            n = esc(&name),
            v = env!("CARGO_PKG_VERSION"),
        );
        return Html(page).into_response();
    }
    let mut body = json!({
        "name": name,
        "server": format!("agent-host {}", env!("CARGO_PKG_VERSION")),
        "jsonrpc": "POST to this address (A2A v1.0 and v0.3)",
    });
    for (key, path, _) in &links {
        body[*key] = json!(path);
    }
    Json(body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_links_point_at_the_card_of_this_agent_and_at_a_console_when_there_is_one() {
        let root = links("", None);
        assert_eq!(root[0].1, "/.well-known/agent-card.json");
        let nested = links("agents/codex/", Some("/ui/"));
        assert_eq!(
            nested[0],
            ("console", "/ui/".to_string(), "the web console")
        );
        assert_eq!(nested[1].1, "/agents/codex/.well-known/agent-card.json");
        assert_eq!(esc("<a&\">"), "&lt;a&amp;&quot;&gt;");
    }
}
