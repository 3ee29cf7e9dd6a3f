//! The workspace settings: the `[workspace]` section (flags, variables and file keys in one
//! struct): which folders a message may name as its working directory, and the git
//! workspace per context.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::units::ByteSize;

pub use crate::adapter::WorkspaceMode;

/// Whether each turn's change is committed on the context's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum CommitMode {
    /// A turn that changed the workspace ends with a commit of it.
    #[default]
    Turn,
    /// The changes stay uncommitted.
    Off,
}

/// Default size limit of a turn's patch: 4 MiB.
pub const DEFAULT_PATCH_LIMIT: ByteSize = ByteSize(4 * 1024 * 1024);
/// Default most workspaces at once.
pub const DEFAULT_MAX_WORKSPACES: usize = 100;
/// Default author and committer of the turn commits.
pub const DEFAULT_AUTHOR: &str = "agent-host <agent-host@localhost>";

/// A workspace per context (see `docs/workspaces.md`).
#[derive(Debug, Clone, PartialEq, Eq, clap::Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[command(next_help_heading = "Workspace")]
pub struct WorkspaceConfig {
    /// Where a context's turns run: auto (its own git workspace when the task's folder is in a
    /// git repository, else the folder), isolated (always its own; refused outside a
    /// repository), shared (the folder itself, for every context); unset: the adapter's
    /// `workspace`, else auto
    #[arg(
        id = "workspace.mode",
        long = "workspace",
        env = "AGENT_HOST_WORKSPACE",
        value_name = "MODE",
        value_enum
    )]
    pub mode: Option<WorkspaceMode>,
    /// turn: a turn that changed the workspace is committed on the context's branch
    /// (agent-host/<context>, see docs/workspaces.md); off: left uncommitted
    #[arg(
        id = "workspace.commit",
        long = "workspace-commit",
        env = "AGENT_HOST_WORKSPACE_COMMIT",
        default_value = "turn",
        value_name = "WHEN",
        value_enum
    )]
    pub commit: CommitMode,
    /// Largest patch a `changes` artifact carries (greater than 0); a longer change is cut
    /// after its last whole file and marked truncated
    #[arg(
        id = "workspace.patch_limit",
        long = "workspace-patch-limit",
        env = "AGENT_HOST_WORKSPACE_PATCH_LIMIT",
        default_value = "4MiB",
        value_name = "SIZE"
    )]
    pub patch_limit: ByteSize,
    /// Folder of the workspaces [default: workspaces/ beside the SQLite database; a temporary
    /// folder, removed at exit, with the memory or PostgreSQL store]
    #[arg(
        id = "workspace.dir",
        long = "workspace-dir",
        env = "AGENT_HOST_WORKSPACE_DIR",
        value_name = "DIR"
    )]
    pub dir: Option<PathBuf>,
    /// Most workspaces at once, of every adapter the host serves together; a new context beyond it is refused,
    /// none is deleted to make room (0: no limit)
    #[arg(
        id = "workspace.max_workspaces",
        long = "max-workspaces",
        env = "AGENT_HOST_MAX_WORKSPACES",
        default_value = "100",
        value_name = "N"
    )]
    pub max_workspaces: usize,
    /// Author and committer of the turn commits, as "Name <email>"
    #[arg(
        id = "workspace.author",
        long = "workspace-author",
        env = "AGENT_HOST_WORKSPACE_AUTHOR",
        default_value = DEFAULT_AUTHOR,
        value_name = "NAME <EMAIL>"
    )]
    pub author: String,
    /// Directories a message's metadata.cwd may name (each must exist); unset: the repo path only (flag and variable: comma-separated)
    #[arg(
        id = "workspace.roots",
        long = "workspace-roots",
        env = "AGENT_HOST_WORKSPACE_ROOTS",
        value_name = "DIRS",
        value_delimiter = ','
    )]
    pub roots: Vec<PathBuf>,
}

impl Default for WorkspaceConfig {
    fn default() -> Self {
        WorkspaceConfig {
            mode: None,
            commit: CommitMode::Turn,
            patch_limit: DEFAULT_PATCH_LIMIT,
            dir: None,
            max_workspaces: DEFAULT_MAX_WORKSPACES,
            author: DEFAULT_AUTHOR.to_string(),
            roots: Vec::new(),
        }
    }
}

impl WorkspaceConfig {
    /// The author's name and email.
    pub fn identity(&self) -> Result<(String, String), super::WorkspaceError> {
        let bad = || super::WorkspaceError::BadAuthor(self.author.clone());
        let (name, rest) = self.author.split_once('<').ok_or_else(bad)?;
        let email = rest.strip_suffix('>').ok_or_else(bad)?.trim();
        let name = name.trim();
        if name.is_empty() || email.is_empty() || email.contains(['<', '>']) {
            return Err(bad());
        }
        Ok((name.to_string(), email.to_string()))
    }
}
