//! The smaller parts of the command line: `--color`, the flags of `agent-host adapters`, and
//! the `completions` and `man` commands (generated from [`crate::cli::Cli`]).

use crate::cli::Cli;
use crate::settings::ServeArgs;

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

/// `agent-host adapters`: only the settings that decide which adapters exist and where
/// their programs are found.
#[derive(Debug, Clone, clap::Args, Default)]
pub struct AdaptersArgs {
    /// TOML config file (see config/agent-host.toml)
    #[arg(long, env = "AGENT_HOST_CONFIG", value_name = "PATH")]
    pub config: Option<std::path::PathBuf>,
    /// Directory of adapter TOML files that add to or override the built-in ones (same id wins)
    #[arg(long, env = "AGENT_HOST_ADAPTERS_DIR", value_name = "DIR")]
    pub adapters_dir: Option<std::path::PathBuf>,
    /// Program to use instead of each adapter's binary (<ID>_PATH still wins)
    #[arg(long, env = "AGENT_HOST_BINARY", value_name = "PROGRAM")]
    pub binary: Option<String>,
    /// Working directory of the agents (a relative program path is taken from there) [default: the current directory]
    #[arg(long, env = "AGENT_HOST_REPO_PATH", value_name = "DIR")]
    pub repo_path: Option<std::path::PathBuf>,
}

impl AdaptersArgs {
    /// The same settings as `serve` with these flags.
    pub fn serve_args(&self) -> Result<ServeArgs, clap::Error> {
        let mut flags: Vec<std::ffi::OsString> = Vec::new();
        let mut add = |name: &str, value: Option<std::ffi::OsString>| {
            if let Some(v) = value {
                flags.push(name.into());
                flags.push(v);
            }
        };
        add("--config", self.config.clone().map(Into::into));
        add("--adapters-dir", self.adapters_dir.clone().map(Into::into));
        add("--binary", self.binary.clone().map(Into::into));
        add("--repo-path", self.repo_path.clone().map(Into::into));
        ServeArgs::from_flags(flags)
    }
}

/// The shell completion script of `agent-host` for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agent-host", &mut out);
    out
}

/// The manual page of `agent-host` (roff).
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    Ok(out)
}
