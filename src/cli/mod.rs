//! The command line: `serve`, `adapters`, `card`; `call` and `tasks` are in
//! [`crate::client::call`].

pub mod doctor;
pub mod prune;
pub mod workspaces;

use clap::{Parser, Subcommand};

use crate::engine::launch::LaunchError;
use crate::server;
use crate::settings::{ServeArgs, Settings};

pub use crate::cli_extras::{completions, man_page, AdaptersArgs, ColorChoice};

/// agent-host serves local coding-agent CLIs (Claude Code, Codex, Gemini CLI, ... or any
/// program that prints JSON lines) over the A2A protocol, v1.0 and v0.3, JSON-RPC and SSE.
#[derive(Debug, Parser)]
#[command(
    name = "agent-host",
    version,
    about,
    long_about = None,
    after_help = "Quick start:\n  agent-host serve                      # demo agent on http://127.0.0.1:41242\n  AGENT_ADAPTER=jsonl AGENT_BINARY=./my-agent agent-host serve\n  curl -s http://127.0.0.1:41242/.well-known/agent-card.json\n\nLogs go to stderr; set RUST_LOG (e.g. RUST_LOG=agent_host=debug) for more."
)]
pub struct Cli {
    /// Colours in logs and output: auto (only on a terminal, and not when NO_COLOR is set),
    /// always or never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the A2A server (127.0.0.1:41242 by default).
    ///
    /// Every option also comes from its environment variable and from the config file
    /// (--config); precedence: defaults < config file < environment < flags.
    Serve(ServeArgs),
    /// List the known adapters and whether their program is installed.
    Adapters(AdaptersArgs),
    /// Check this setup as `serve` would run it: each adapter's program, version and
    /// credentials (--online: one tiny real turn), the working directory, the store, the
    /// sandbox pieces, the port. One pass/warn/fail line each; exit 0 when nothing failed,
    /// 1 otherwise; --json for a JSON document.
    Doctor(doctor::DoctorArgs),
    /// Print the agent card the server would serve (signed if card signing is configured);
    /// `agent-host card verify URL` checks a served card's signatures.
    Card(CardArgs),
    /// Send a message to an A2A agent and follow the task (exit: 0 completed, 1 failed,
    /// 2 usage, 3 canceled, 4 input required).
    Call(crate::client::call::CallArgs),
    /// List, show, cancel or follow the tasks of an A2A agent.
    Tasks(crate::client::call::TasksArgs),
    /// List the git workspaces of this machine's contexts (context, branch, base, disk use,
    /// checkout) or remove one (`rm CONTEXT`; refused while a host has the database open).
    /// Exit: 0 done, 1 failed, 2 usage.
    Workspaces(workspaces::WorkspacesArgs),
    /// MCP over stdio, for an MCP client that starts its servers as local processes: relays
    /// the client's messages to a running host's /mcp endpoint (local or remote) with the
    /// credentials given here (see docs/mcp.md).
    Mcp(crate::client::mcp_bridge::McpArgs),
    /// Print a shell completion script: `agent-host completions bash > /etc/bash_completion.d/agent-host`
    /// (zsh: into a directory of $fpath as `_agent-host`; fish: ~/.config/fish/completions/agent-host.fish).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff): `agent-host man > /usr/local/share/man/man1/agent-host.1`.
    Man,
    /// Run the built-in demo agent (what the `demo` adapter starts; see `agent-host fake-agent --help`).
    #[command(hide = true, disable_help_flag = true)]
    FakeAgent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `agent-host card [verify URL]`.
#[derive(Debug, clap::Args)]
pub struct CardArgs {
    #[command(subcommand)]
    pub command: Option<CardCommand>,
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum CardCommand {
    /// Fetch an agent card and verify its signatures (RFC 8785 canonical JSON, JWS HS256,
    /// ES256 or RS256); one line per signature. Exit: 0 all verified (at least one), 1 not,
    /// 2 usage.
    Verify(crate::client::card_verify::CardVerifyArgs),
}

use crate::app::{adapter_version, card_settings, host_env, App};
pub use crate::app::{choose_adapter, launch_for, registry, StartError};

/// Resolves when SIGINT or SIGTERM arrives.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate());
    let int = signal(SignalKind::interrupt());
    match (term, int) {
        (Ok(mut t), Ok(mut i)) => {
            tokio::select! {
                _ = t.recv() => tracing::info!("SIGTERM received"),
                _ = i.recv() => tracing::info!("SIGINT received"),
            }
        }
        _ => {
            tracing::warn!("cannot install signal handlers; stop with SIGKILL");
            std::future::pending::<()>().await
        }
    }
}

/// `agent-host serve`: binds (port 0 picks a free port; the log line "agent-host listening
/// on http://ADDR" names the bound address), starts the [`App`], serves until SIGINT or
/// SIGTERM.
pub async fn serve(settings: Settings) -> Result<(), StartError> {
    settings.check_open_bind()?;
    crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    if let crate::settings::StoreChoice::Sqlite(path) = &settings.store {
        // Before taking the port: a second host started with the same settings would
        // otherwise fail on the port in use, without saying which host has it.
        crate::store::lock::check(path).map_err(StartError::Store)?;
    }
    let listener = tokio::net::TcpListener::bind(settings.bind)
        .await
        .map_err(|e| StartError::Bind(settings.bind.to_string(), e))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| StartError::Bind(settings.bind.to_string(), e))?;
    let app = App::start(&settings, local_addr).await?;
    app.serve(listener, shutdown_signal()).await?;
    // The cgroup folders kept for later tasks, and the host's own ones when empty.
    crate::runner::sandbox::Capabilities::get()
        .cgroups
        .release();
    tracing::info!("stopped");
    Ok(())
}

/// `agent-host adapters`: one line per adapter: whether its program is installed, its
/// version, and whether the tests cover that version.
pub async fn list_adapters(settings: &Settings) -> Result<String, StartError> {
    let registry = registry(settings)?;
    let env = host_env();
    let mut rows = vec![[
        "ADAPTER".to_string(),
        "WIRE".to_string(),
        "VERSION".to_string(),
        "TESTED".to_string(),
        "PROGRAM".to_string(),
    ]];
    for a in registry.all() {
        let row = match launch_for(settings, a.clone()) {
            Ok(launch) => {
                let p = launch.program.clone();
                let version = adapter_version(a, &launch).await;
                let tested = match &version {
                    Some(v) if a.tested_versions.iter().any(|t| t == v) => "yes",
                    Some(_) if a.tested_versions.is_empty() => "-",
                    Some(_) => "no",
                    None => "?",
                };
                [
                    a.id.clone(),
                    a.wire.clone(),
                    version.unwrap_or_else(|| "unknown".into()),
                    tested.to_string(),
                    p.display().to_string(),
                ]
            }
            Err(e) => {
                // "not installed" only when the program was looked for and not found; a
                // configured path that cannot be run says why.
                let hint = match &e {
                    StartError::Launch(LaunchError::NotFound { .. }) if !a.install.is_empty() => {
                        format!("not installed ({})", a.install)
                    }
                    _ => e.to_string(),
                };
                [a.id.clone(), a.wire.clone(), "-".into(), "-".into(), hint]
            }
        };
        rows.push(row);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        for (i, w) in widths.iter().enumerate() {
            out.push_str(&format!("{:<w$}  ", r[i], w = w));
        }
        out.push_str(&r[4]);
        out.push('\n');
    }
    crate::runner::sandbox::Capabilities::configure(&settings.sandbox.disable);
    let policy = crate::engine::launch::sandbox_policy(
        registry.get("jsonl")?,
        &settings.sandbox,
        &crate::engine::launch::child_env(registry.get("jsonl")?, &env, &settings.pass_env),
    )?;
    out.push_str(&sandbox_report(&policy));
    Ok(out)
}

/// The sandbox lines of `agent-host adapters`: the mode, the pieces in force, what is missing.
pub fn sandbox_report(policy: &crate::runner::SandboxPolicy) -> String {
    let caps = crate::runner::sandbox::Capabilities::get();
    let mut out = format!("\nsandbox: {}\n", policy.mode.as_str());
    for p in caps.pieces(policy) {
        out.push_str(&format!("  in force: {p}\n"));
    }
    for m in caps.missing(policy) {
        out.push_str(&format!("  missing:  {m}\n"));
    }
    out
}

/// `agent-host card`: the card as served at the configured address.
pub fn print_card(settings: &Settings) -> Result<String, StartError> {
    let registry = registry(settings)?;
    let adapter = choose_adapter(settings, &registry, &host_env())?;
    let base = settings
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{}/", settings.bind));
    let cs = card_settings(settings);
    let card = server::card::build(
        &adapter,
        &cs,
        &base,
        settings.push.is_some(),
        &settings.security,
    );
    Ok(serde_json::to_string_pretty(&server::card::served_json(&card, &cs)).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::ServeArgs;

    fn settings() -> Settings {
        Settings::resolve(&ServeArgs::defaults().unwrap()).unwrap()
    }

    #[tokio::test]
    async fn adapters_say_why_a_configured_program_cannot_run() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        for (path, reason) in [
            (file.clone(), "no execute permission"),
            (dir.path().to_path_buf(), "is a directory"),
            (dir.path().join("missing"), "does not exist"),
        ] {
            let mut s = settings();
            s.binary = Some(path.display().to_string());
            let out = list_adapters(&s).await.unwrap();
            let row = out
                .lines()
                .find(|l| l.starts_with("claude-code "))
                .unwrap_or_default();
            assert!(row.contains(reason), "{row}");
            assert!(!row.contains("not installed"), "{row}");
        }
    }
}
