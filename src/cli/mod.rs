//! The command line, one module per command: [`serve`], [`adapters`], [`card`] (and `card
//! verify`), [`call`], [`tasks`] (and [`prune`]), [`workspaces`], [`doctor`], [`mcp`],
//! [`completions`] (and `man`). `src/main.rs` parses, sets up logging and calls them. The
//! commands that talk to a host ([`call`], [`tasks`], [`card`]'s `verify`) use the
//! [`crate::client`] library like any other program would.

pub mod adapters;
pub mod call;
pub mod card;
mod changes;
pub mod completions;
pub mod doctor;
pub mod mcp;
pub mod prune;
mod render;
pub mod serve;
pub mod tasks;
pub mod workspaces;

use clap::{Parser, Subcommand};

use crate::settings::ServeArgs;

/// The log filter when `RUST_LOG` is not set: `info`, without rmcp's per-request service
/// log. It warns of every error the MCP tools answer (a client's bad argument, a task not
/// found), and logs a client that closed a waited call as an error ("failed to send
/// pending response during drain"): the clients' doing, not the host's. The host logs what
/// is its own (internal errors at `error`, the refusals at `debug`).
pub const LOG_FILTER: &str = "info,rmcp::service=off";

pub use adapters::AdaptersArgs;
pub use card::{CardArgs, CardCommand};

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
    /// 2 usage, 3 canceled, 4 input required, 130 interrupted by Ctrl-C).
    Call(call::CallArgs),
    /// List, show, cancel or follow the tasks of an A2A agent.
    Tasks(tasks::TasksArgs),
    /// List the git workspaces of this machine's contexts (context, branch, base, disk use,
    /// checkout) or remove one (`rm CONTEXT`; refused while a host has the database open).
    /// Exit: 0 done, 1 failed, 2 usage.
    Workspaces(workspaces::WorkspacesArgs),
    /// MCP over stdio, for an MCP client that starts its servers as local processes: relays
    /// the client's messages to a running host's /mcp endpoint (local or remote) with the
    /// credentials given here (see docs/mcp.md).
    Mcp(mcp::McpArgs),
    /// Print a shell completion script: `agent-host completions bash > /etc/bash_completion.d/agent-host`
    /// (zsh: into a directory of $fpath as `_agent-host`; fish: ~/.config/fish/completions/agent-host.fish).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `agent-host man > /usr/local/share/man/man1/agent-host.1`
    /// (make the folder first where it is missing), and each command's: `agent-host man serve
    /// > /usr/local/share/man/man1/agent-host-serve.1`, `agent-host man tasks list`.
    Man {
        /// The command whose page to print (none: the main page)
        command: Vec<String>,
    },
    /// Run the built-in demo agent (what the `demo` adapter starts; see `agent-host fake-agent --help`).
    #[command(hide = true, disable_help_flag = true)]
    FakeAgent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

impl ColorChoice {
    /// Whether to write ANSI colours to a stream that is (or is not) a terminal; `auto`
    /// honours `NO_COLOR` (any non-empty value).
    pub fn enabled(self, terminal: bool) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            }
        }
    }
}

#[cfg(test)]
mod tests;
