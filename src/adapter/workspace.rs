//! Where a context's turns run: a choice an adapter may make for its tasks and the host's
//! `[workspace] mode` overrides (the workspaces themselves are [`crate::workspace`]'s).

use serde::{Deserialize, Serialize};

/// Where a context's turns run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WorkspaceMode {
    /// Its own workspace when the task's folder is in a git repository, else the folder.
    #[default]
    Auto,
    /// Always its own workspace; a task whose folder is not in a git repository is refused.
    Isolated,
    /// The task's folder itself, shared by every context (no `changes` artifact).
    Shared,
}

impl WorkspaceMode {
    /// The effective mode: the host's choice, else the adapter's, else `auto`.
    pub fn resolve(host: Option<WorkspaceMode>, adapter: Option<WorkspaceMode>) -> WorkspaceMode {
        host.or(adapter).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::WorkspaceMode::{self, *};

    #[test]
    fn the_host_wins_then_the_adapter_then_auto() {
        assert_eq!(
            WorkspaceMode::resolve(Some(Isolated), Some(Shared)),
            Isolated
        );
        assert_eq!(WorkspaceMode::resolve(None, Some(Shared)), Shared);
        assert_eq!(WorkspaceMode::resolve(None, None), Auto);
    }
}
