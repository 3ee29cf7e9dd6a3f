//! Which adapters a host serves and how their programs are launched: the adapter registry,
//! the choice of the default adapter, each adapter's [`Launch`] (program, cleaned
//! environment, sandbox) and card settings, and the version its program reports.

use std::time::Duration;

use crate::adapter::{AdapterSpec, Registry};
use crate::engine::launch::{child_env, resolve_program, Launch};
use crate::server::CardSettings;
use crate::settings::Settings;

use super::StartError;

/// The host's environment (variables that are not UTF-8 are left out).
pub(crate) fn host_env() -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// The built-in adapters plus those of the configured directory.
pub fn registry(settings: &Settings) -> Result<Registry, StartError> {
    let mut r = Registry::builtin()?;
    if let Some(dir) = &settings.adapters_dir {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| StartError::AdaptersDir(dir.display().to_string(), e))?;
        let mut files: Vec<_> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| StartError::AdaptersDir(f.display().to_string(), e))?;
            r.insert(AdapterSpec::from_toml(&f.display().to_string(), &text)?);
        }
    }
    Ok(r)
}

/// The adapter to serve: the configured one, else the first installed CLI whose adapter
/// says `detect = true`, else `demo`. Logs which and why.
pub fn choose_adapter(
    settings: &Settings,
    registry: &Registry,
    env: &[(String, String)],
) -> Result<AdapterSpec, StartError> {
    if let Some(id) = &settings.adapter {
        // With several adapters (`claude-code,codex`), the first is the default one.
        let id = id
            .split(',')
            .map(str::trim)
            .find(|s| !s.is_empty())
            .unwrap_or("");
        let a = registry.get(id)?.clone();
        tracing::info!(adapter = %a.id, "serving the adapter named by [agent] adapter");
        return Ok(a);
    }
    let mut looked = Vec::new();
    for a in registry.all().iter().filter(|a| a.detect) {
        if resolve_program(a, None, env, &settings.repo_path).is_ok() {
            tracing::info!(adapter = %a.id, "[agent] adapter is not set; serving the first installed known CLI");
            return Ok(a.clone());
        }
        looked.push(format!("{} ({})", a.id, a.binary));
    }
    let demo = registry.get("demo")?.clone();
    if looked.is_empty() {
        tracing::info!("[agent] adapter is not set; serving the demo agent");
    } else {
        tracing::info!(looked_for = %looked.join(", "), "[agent] adapter is not set and no known CLI is installed; serving the demo agent");
    }
    Ok(demo)
}

/// Everything the engine needs, from settings.
pub fn launch_for(settings: &Settings, mut adapter: AdapterSpec) -> Result<Launch, StartError> {
    // AGENT_APPROVAL_PATTERN / _RESPONSE configure text adapters' prompt detection.
    let opts = &mut adapter.wire_options;
    if let Some(p) = &settings.approval_pattern {
        opts.insert("approval_pattern".into(), toml::Value::String(p.clone()));
    }
    if let Some(r) = &settings.approval_response {
        opts.insert(
            "approval_response_yes".into(),
            toml::Value::String(r.clone()),
        );
    }
    crate::adapter::wire::validate(&adapter).map_err(|e| {
        crate::adapter::AdapterError::Invalid {
            source_name: format!("{} (with [agent] approval_pattern/_response)", adapter.id),
            message: e.to_string(),
        }
    })?;
    let env = host_env();
    let program = resolve_program(
        &adapter,
        settings.binary.as_deref(),
        &env,
        &settings.repo_path,
    )?;
    let mut child_env = child_env(&adapter, &env, &settings.pass_env);
    // Variables the embedding program sets win over inherited and adapter ones.
    for (k, v) in &settings.agent_env {
        child_env.retain(|(ek, _)| ek != k);
        child_env.push((k.clone(), v.clone()));
    }
    // The host's own secrets never reach an agent, whatever was passed through.
    drop_secrets(&mut child_env, &host_secrets(settings));
    let limits = settings.limits.resolve(&adapter.limits);
    let caps = crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    let sandbox = crate::engine::launch::sandbox_policy(&adapter, &settings.sandbox, &child_env)?;
    if let Some(u) = &sandbox.run_as {
        u.environment(&mut child_env);
    }
    let missing = caps.missing(&sandbox);
    if sandbox.mode == crate::runner::sandbox::Mode::Required && !missing.is_empty() {
        return Err(StartError::Sandbox(format!(
            "sandbox = \"required\" (adapter '{}') but this machine lacks: {}",
            adapter.id,
            missing.join("; ")
        )));
    }
    Ok(Launch {
        program,
        extra_args: settings.args.clone(),
        prompt_via: settings.prompt_via.unwrap_or(adapter.prompt),
        cwd: settings.repo_path.clone(),
        env: child_env,
        model: settings.model.clone(),
        force: settings.force,
        max_line_bytes: limits.max_line_bytes,
        timeout: limits.timeout,
        idle_timeout: limits.idle_timeout,
        cancel_grace: limits.cancel_grace,
        sandbox: Some(sandbox),
        adapter,
    })
}

/// Variables of the host's own secrets under names without the `AGENT_HOST_` prefix (the
/// older names that still work).
const SECRET_VARS: &[&str] = &["AGENT_PUSH_KEY"];

/// The host's own secrets: its credentials and the key that seals push secrets at rest.
fn host_secrets(settings: &Settings) -> Vec<String> {
    let mut secrets = settings.security.secret_values();
    if let Some(crate::settings::PushConfig {
        key: crate::settings::PushKey::Hex(hex),
        ..
    }) = &settings.push
    {
        secrets.push(hex.clone());
    }
    secrets
}

/// Removes `AGENT_HOST_*` variables, the host's other secret variables ([`SECRET_VARS`]) and
/// every variable whose value contains one of `secrets` (`X=prefix<token>suffix` too, not
/// only `X=<token>`).
fn drop_secrets(env: &mut Vec<(String, String)>, secrets: &[String]) {
    env.retain(|(k, v)| {
        !k.starts_with("AGENT_HOST_")
            && !SECRET_VARS.contains(&k.as_str())
            && !secrets
                .iter()
                .any(|s| !s.is_empty() && v.contains(s.as_str()))
    });
}

/// The card settings of the default adapter (the others get their path prefix when nested).
pub fn card_settings(s: &Settings) -> CardSettings {
    CardSettings {
        path_prefix: String::new(),
        others: Vec::new(),
        name: s.card_name.clone(),
        description: s.card_description.clone(),
        legacy_v03_fields: s.card_legacy_v03,
        public_url: s.public_url.clone(),
        signer: s.card_signer.clone(),
        cli_version: Default::default(),
        required_extensions: s.required_extensions.clone(),
        input_modes: s.input_modes.clone(),
        cache: Default::default(),
        provider: s.card_provider.clone(),
        grpc_port: None,
    }
}

/// The adapters to serve: each of a comma-separated `AGENT_ADAPTER` (the first is the
/// default), else the one [`choose_adapter`] picks.
pub(crate) fn adapters_to_serve(
    settings: &Settings,
    registry: &Registry,
) -> Result<Vec<AdapterSpec>, StartError> {
    let mut out: Vec<AdapterSpec> = Vec::new();
    match settings.adapter.as_deref().filter(|a| a.contains(',')) {
        Some(list) => {
            for id in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !out.iter().any(|a| a.id == id) {
                    out.push(registry.get(id)?.clone());
                }
            }
        }
        None => out.push(choose_adapter(settings, registry, &host_env())?),
    }
    Ok(out)
}

/// The version of an adapter's program: this build's for the built-in agents, else what
/// the program prints for `version_args` ([`probe_version`]).
pub(crate) async fn adapter_version(a: &AdapterSpec, launch: &Launch) -> Option<String> {
    if a.binary == crate::engine::launch::SELF_BINARY {
        return Some(env!("CARGO_PKG_VERSION").to_string());
    }
    probe_version(launch).await.version
}

/// What the version check of a program gave.
#[derive(Debug, Clone, Default)]
pub(crate) struct VersionProbe {
    /// The first `N.N[.N...]` it printed.
    pub version: Option<String>,
    /// What it printed (stdout and stderr, lines joined by spaces, at most 2000 characters).
    pub output: String,
    /// Why it did not run to a clean end: it could not be started, or it exited with an
    /// error (a sandbox that cannot run it: `bwrap: execvp ...`).
    pub failure: Option<String>,
}

/// Longest output of a version check kept for the log and `doctor`.
const PROBE_OUTPUT_MAX: usize = 2000;

/// Runs the adapter's program with its `version_args` exactly as a task's program runs
/// (clean environment, own process group, the task's sandbox), but in an empty folder of
/// its own, never the working directory: a program that takes any argument for a prompt
/// then has nothing to change. Waits at most 10 s; then everything it started is stopped.
/// The log says that it ran and what it printed.
pub(crate) async fn probe_version(launch: &Launch) -> VersionProbe {
    use crate::runner::{IoMode, Output, Process, SpawnSpec, StdinMode};
    let args = launch.adapter.version_args.clone();
    let empty = match tempfile::Builder::new()
        .prefix("agent-host-version")
        .tempdir()
    {
        Ok(d) => d,
        Err(e) => {
            let failure = format!("cannot make an empty folder for it: {e}");
            tracing::warn!(adapter = %launch.adapter.id, %failure, "version check not run");
            return VersionProbe {
                failure: Some(failure),
                ..VersionProbe::default()
            };
        }
    };
    let spec = SpawnSpec {
        program: launch.program.clone(),
        args: args.clone(),
        cwd: empty.path().to_path_buf(),
        env: launch.env.clone(),
        io: IoMode::Pipes,
        stdin: StdinMode::Null,
        max_line_bytes: 64 * 1024,
        sandbox: launch.sandbox.clone(),
    };
    let spawned = tokio::task::spawn_blocking(move || Process::spawn(spec)).await;
    let mut proc = match spawned {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return probe_failed(launch, &args, e.to_string()),
        Err(e) => return probe_failed(launch, &args, e.to_string()),
    };
    let mut text = String::new();
    let read = async {
        while let Some(out) = proc.next().await {
            if let Output::Line(l) | Output::Stderr(l) = out {
                if text.len() < PROBE_OUTPUT_MAX {
                    text.push_str(&l);
                    text.push(' ');
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), read).await;
    let exit = proc.terminate(Duration::from_millis(500)).await;
    let output: String = text.trim().chars().take(PROBE_OUTPUT_MAX).collect();
    let version = first_version(&output);
    let failure = match (exit.code, exit.signal) {
        (Some(0), _) => None,
        (Some(c), _) => Some(format!("it exited with code {c}")),
        (None, Some(s)) => Some(format!("it was killed by signal {s}")),
        (None, None) => None,
    }
    .filter(|_| version.is_none());
    tracing::info!(
        adapter = %launch.adapter.id,
        program = %launch.program.display(),
        args = ?args,
        cwd = %empty.path().display(),
        code = ?exit.code,
        version = ?version,
        output = %output,
        "version check ran (in an empty folder of its own, sandboxed as a task)"
    );
    VersionProbe {
        version,
        output,
        failure,
    }
}

fn probe_failed(launch: &Launch, args: &[String], why: String) -> VersionProbe {
    tracing::warn!(adapter = %launch.adapter.id, program = %launch.program.display(),
        args = ?args, error = %why, "version check could not start the program");
    VersionProbe {
        failure: Some(format!("it could not be started: {why}")),
        ..VersionProbe::default()
    }
}

/// The first `N.N[.N...]` in `text`.
fn first_version(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|w| w.trim_matches('.'))
        .find(|w| w.contains('.') && w.split('.').all(|p| !p.is_empty()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests;
