//! `agent-host completions SHELL` and `agent-host man`: generated from [`crate::cli::Cli`].

use crate::cli::Cli;

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
