//! The flags of `agent-host serve` (and of `doctor` and `card`, which share them): the
//! sections of the modules flattened into one set, plus `--config` and `--insecure-no-auth`.
//! Each setting is declared once, in its module's section struct; clap reads the flag, the
//! environment variable and the default from that declaration.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use serde::{Deserialize, Serialize};

use crate::engine::config::{AgentConfig, LimitsConfig};
use crate::push::DeliveryConfig;
use crate::retention::RetentionConfig;
use crate::runner::sandbox::config::SandboxConfig;
use crate::server::config::{AuthConfig, CardConfig, SecurityConfig, ServerConfig};
use crate::store::config::{ClusterConfig, StoreConfig};
use crate::workspace::WorkspaceConfig;

/// `[log]`: how the host logs (the application's own section).
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Logging")]
pub struct LogConfig {
    /// Log format on stderr: human (or text) or json; the level comes from RUST_LOG (default info)
    #[arg(id = "log.format", long = "log-format", env = "AGENT_HOST_LOG_FORMAT", value_name = "human|json", default_value = "human", value_parser = ["human", "text", "json"])]
    pub format: String,
}

/// Every section, as clap parsed it (flags, environment, defaults).
#[derive(Debug, Clone, Args)]
pub struct ServeFlags {
    /// TOML config file (config/agent-host.toml is an annotated example)
    #[arg(long, env = "AGENT_HOST_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Serve on a non-loopback address without any credential (anyone who can connect runs commands here); a flag only
    #[arg(long)]
    pub insecure_no_auth: bool,
    #[command(flatten)]
    pub server: ServerConfig,
    #[command(flatten)]
    pub auth: AuthConfig,
    #[command(flatten)]
    pub security: SecurityConfig,
    #[command(flatten)]
    pub card: CardConfig,
    #[command(flatten)]
    pub agent: AgentConfig,
    #[command(flatten)]
    pub limits: LimitsConfig,
    #[command(flatten)]
    pub approvals: crate::policy::config::ApprovalsConfig,
    #[command(flatten)]
    pub workspace: WorkspaceConfig,
    #[command(flatten)]
    pub sandbox: SandboxConfig,
    #[command(flatten)]
    pub push: DeliveryConfig,
    #[command(flatten)]
    pub retention: RetentionConfig,
    #[command(flatten)]
    pub store: StoreConfig,
    #[command(flatten)]
    pub cluster: ClusterConfig,
    #[command(flatten)]
    pub log: LogConfig,
}

/// The flags of `serve` with where each value came from: a setting given by a flag or an
/// environment variable wins over the config file, one at its default does not.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    pub flags: ServeFlags,
    /// Ids (`section.key`) of the settings given by a flag or an environment variable.
    explicit: BTreeSet<String>,
    /// Of those, the ids given by an environment variable.
    from_env: BTreeSet<String>,
}

impl std::ops::Deref for ServeArgs {
    type Target = ServeFlags;
    fn deref(&self) -> &ServeFlags {
        &self.flags
    }
}

impl ServeArgs {
    /// The settings these flags give, environment variables not read: what embedding
    /// programs and tests use (`ServeArgs::from_flags(["--store", "memory"])`).
    pub fn from_flags<I, T>(flags: I) -> Result<ServeArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        ServeArgs::parse_with(command().mut_args(|a| a.env(None::<&str>)), flags)
    }

    /// The settings these flags give over the environment's variables (`AGENT_HOST_*`, as
    /// `serve` reads them): for commands that act on a host's settings without running it
    /// (`tasks prune`).
    pub fn from_env_and_flags<I, T>(flags: I) -> Result<ServeArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        ServeArgs::parse_with(command(), flags)
    }

    /// `flags` parsed by `cmd` (the `serve` flags, with or without their variables).
    fn parse_with<I, T>(cmd: clap::Command, flags: I) -> Result<ServeArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let argv =
            std::iter::once(OsString::from("serve")).chain(flags.into_iter().map(Into::into));
        let matches = cmd.try_get_matches_from(argv)?;
        ServeArgs::from_arg_matches(&matches)
    }

    /// Every setting at its default (no flags, no environment).
    pub fn defaults() -> Result<ServeArgs, clap::Error> {
        ServeArgs::from_flags(std::iter::empty::<OsString>())
    }

    /// Whether the setting `id` was given by a flag or an environment variable.
    pub fn is_explicit(&self, id: &str) -> bool {
        self.explicit.contains(id)
    }

    /// How the setting `id` was given, when by a flag (`--timeout`) or an environment
    /// variable (`AGENT_HOST_TIMEOUT`): what an error about its value calls it.
    pub fn given_as(&self, id: &str) -> Option<String> {
        if !self.explicit.contains(id) {
            return None;
        }
        let cmd = command();
        let arg = cmd.get_arguments().find(|a| a.get_id().as_str() == id)?;
        if self.from_env.contains(id) {
            let env = arg.get_env()?.to_string_lossy().into_owned();
            Some(match applied_alias(&env) {
                Some(old) => format!("{old} (read as {env})"),
                None => env,
            })
        } else {
            arg.get_long().map(|l| format!("--{l}"))
        }
    }
}

/// The old variables this process's settings were read from, with the new name each set
/// ([`super::legacy::apply_env_aliases`]).
static APPLIED: std::sync::OnceLock<Vec<(&'static str, String)>> = std::sync::OnceLock::new();

/// Remembers the old variables read at start (once per process).
pub(super) fn remember_env_aliases(applied: Vec<(&'static str, String)>) {
    let _ = APPLIED.set(applied);
}

/// The old variable the new variable `new` was set from at start, if one was: an error
/// about its value names the variable the user wrote.
fn applied_alias(new: &str) -> Option<&'static str> {
    APPLIED
        .get()?
        .iter()
        .find(|(_, n)| n == new)
        .map(|(old, _)| *old)
}

/// `--workspace-dir` (`AGENT_HOST_WORKSPACE_DIR`) as `serve` declares it, for the commands
/// that find a host's workspaces without serving: `tasks prune` removes those of the
/// contexts it empties, `workspaces` lists and removes them. The flag is serve's own (its
/// declaration in [`crate::workspace::WorkspaceConfig`]: name, variable, help), given here
/// without a help heading and global, so that it may also follow a subcommand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkspaceDirFlag {
    pub workspace_dir: Option<PathBuf>,
}

/// The id of `[workspace] dir` among the `serve` flags.
const WORKSPACE_DIR: &str = "workspace.dir";

impl WorkspaceDirFlag {
    /// The flag as `serve` takes it (`--workspace-dir DIR`), when given.
    pub fn as_serve_flags(&self) -> Vec<OsString> {
        match &self.workspace_dir {
            Some(d) => vec!["--workspace-dir".into(), d.clone().into()],
            None => Vec::new(),
        }
    }
}

impl FromArgMatches for WorkspaceDirFlag {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flag = WorkspaceDirFlag::default();
        flag.update_from_arg_matches(m)?;
        Ok(flag)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        if let Ok(Some(d)) = m.try_get_one::<PathBuf>(WORKSPACE_DIR) {
            self.workspace_dir = Some(d.clone());
        }
        Ok(())
    }
}

impl Args for WorkspaceDirFlag {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let serve = command();
        let declared = serve
            .get_arguments()
            .find(|a| a.get_id().as_str() == WORKSPACE_DIR)
            .cloned();
        match declared {
            Some(a) => cmd.arg(a.help_heading(None::<&str>).global(true)),
            None => cmd,
        }
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        WorkspaceDirFlag::augment_args(cmd)
    }
}

/// The `serve` flags as a command of their own (for the reference page and the tests).
pub fn command() -> clap::Command {
    ServeArgs::augment_args(clap::Command::new("serve"))
}

/// The ids of the settings whose value came from one of `sources`.
fn ids_from(m: &ArgMatches, sources: &[ValueSource]) -> BTreeSet<String> {
    m.ids()
        .map(|id| id.as_str())
        .filter(|id| m.value_source(id).is_some_and(|s| sources.contains(&s)))
        .map(str::to_string)
        .collect()
}

fn explicit_ids(m: &ArgMatches) -> BTreeSet<String> {
    ids_from(m, &[ValueSource::CommandLine, ValueSource::EnvVariable])
}

impl FromArgMatches for ServeArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(ServeArgs {
            flags: ServeFlags::from_arg_matches(m)?,
            explicit: explicit_ids(m),
            from_env: ids_from(m, &[ValueSource::EnvVariable]),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.flags.update_from_arg_matches(m)?;
        self.explicit.extend(explicit_ids(m));
        self.from_env
            .extend(ids_from(m, &[ValueSource::EnvVariable]));
        Ok(())
    }
}

impl Args for ServeArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        values_may_be_negative(ServeFlags::augment_args(cmd))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        values_may_be_negative(ServeFlags::augment_args_for_update(cmd))
    }
}

/// A value that looks like a negative number (`--max-running-tasks -1`) is the flag's value,
/// refused by its type with the flag named, not an unknown argument naming no setting.
fn values_may_be_negative(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        if a.get_action().takes_values() {
            a.allow_negative_numbers(true)
        } else {
            a
        }
    })
}
