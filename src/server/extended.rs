//! The extended agent card (`GetExtendedAgentCard`, `agent/getAuthenticatedExtendedCard`,
//! `GET /extendedAgentCard`, `GET /v1/card`): the public card plus what only an authenticated
//! caller should see about this host: the adapter, its program and CLI version, the limits.
//! It exists when authentication is configured (every route then needs credentials); without
//! it the host has no caller to tell apart, and the card says `extendedAgentCard: false`.

use axum::http::HeaderMap;
use serde_json::{json, Value};

use super::card::{base_url, build, extended_offered};
use super::AppState;
use crate::protocol::card::AgentExtension;
use crate::protocol::A2AError;

/// The extension entry that carries the runtime details.
pub const RUNTIME_EXTENSION: &str = "urn:agent-host:runtime:v1";

/// The sandbox of the adapter's tasks: the mode, the pieces in force, what is missing.
pub(super) fn sandbox_json(policy: Option<&crate::runner::SandboxPolicy>) -> Value {
    let Some(p) = policy else {
        return json!({"mode": "off", "inForce": ["off: process group only"], "missing": []});
    };
    let caps = crate::runner::sandbox::Capabilities::get();
    json!({
        "mode": p.mode.as_str(),
        "inForce": caps.pieces(p),
        "missing": caps.missing(p),
    })
}

/// The extended card as JSON (`legacy_v03`: with the v0.3 top-level fields), or the
/// version's "not configured" error.
pub fn card_json(state: &AppState, headers: &HeaderMap, v03: bool) -> Result<Value, A2AError> {
    if !extended_offered(state.guard.security()) {
        return Err(if v03 {
            A2AError::ExtendedAgentCardNotConfigured
        } else {
            A2AError::UnsupportedOperation(
                "this agent has no extended agent card (it is served when authentication is configured)"
                    .into(),
            )
        });
    }
    let base = base_url(state, headers);
    let launch = state.engine.launch();
    let mut card = build(
        &launch.adapter,
        &state.card,
        &base,
        state.push.is_some(),
        state.guard.security(),
    );
    let limits = state.engine.host_limits();
    let params = json!({
        "hostVersion": env!("CARGO_PKG_VERSION"),
        "adapter": launch.adapter.id,
        "wire": launch.adapter.wire,
        "program": launch.program.display().to_string(),
        "cliVersion": state.card.cli_version.get(),
        "testedVersions": launch.adapter.tested_versions,
        "model": launch.model,
        "force": launch.force,
        "limits": {
            "timeoutMs": launch.timeout.as_millis() as u64,
            "idleTimeoutMs": launch.idle_timeout.as_millis() as u64,
            "cancelGraceMs": launch.cancel_grace.as_millis() as u64,
            "maxRunning": limits.max_running,
            "maxQueued": limits.max_queued,
            "ratePerMinute": limits.rate_per_minute,
            "maxOutputBytes": limits.max_output_bytes,
            "maxSubscribers": limits.max_subscribers,
            "maxLineBytes": launch.max_line_bytes,
        },
        "sandbox": sandbox_json(launch.sandbox.as_ref()),
        // The named approval rule sets, the budget ceilings and defaults.
        "controls": state.engine.controls().describe(),
    });
    let serde_json::Value::Object(params) = params else {
        // `json!({...})` is always an object.
        return Err(A2AError::Internal(
            "runtime details are not an object".into(),
        ));
    };
    card.capabilities.extensions.push(AgentExtension {
        uri: RUNTIME_EXTENSION.into(),
        description: Some(
            "Runtime details of this host (extended card only): adapter, program, CLI version, limits, approval rule sets and budget ceilings."
                .into(),
        ),
        required: false,
        params: Some(params),
    });
    let mut v = card.to_json(v03);
    // Signed like the public card, so a client can check both the same way.
    if let Some(signer) = &state.card.signer {
        signer.attach(&mut v);
    }
    Ok(v)
}
