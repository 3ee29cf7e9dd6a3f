//! `agent-host completions SHELL` and `agent-host man`: generated from [`crate::cli::Cli`].

use crate::cli::Cli;

/// The shell completion script of `agent-host` for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agent-host", &mut out);
    out
}

/// The manual page (roff) of `agent-host`, or, given `path` (`["serve"]`, `["tasks",
/// "list"]`), of that command, titled as the main page names it (`agent-host-serve(1)`).
/// Every page's source (the `.TH` line's fourth field, shown in its footer) is `agent-host`
/// and its version: a command has no version of its own, so clap_mangen would put the
/// command's bare name there (`workspaces `).
pub fn man_page(path: &[String]) -> std::io::Result<Vec<u8>> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    // Gives each command its full name (`agent-host-tasks-list`), which titles its page.
    cmd.build();
    for name in path {
        let names = || {
            cmd.get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(|c| c.get_name().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some(sub) = cmd.find_subcommand(name).cloned() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "no command '{name}' under '{}' (its commands: {})",
                    cmd.get_display_name().unwrap_or(cmd.get_name()),
                    names()
                ),
            ));
        };
        cmd = sub;
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .source(format!("agent-host {}", env!("CARGO_PKG_VERSION")))
        .render(&mut out)?;
    Ok(out)
}
