//! `agent-host workspaces`: the git workspaces of this machine's contexts, listed with their
//! branch, base and disk use, and removed one context at a time (`rm CONTEXT`).
//!
//! It reads the folder the host keeps them in: `[workspace] dir`, else `workspaces` beside
//! the SQLite database; the first adapter's workspaces are in it, each other adapter's in a
//! folder of its own inside it. Removing refuses while a host has the database open (the data
//! folder's lock names that host), as `tasks prune` does: the host would make the context a
//! new workspace from its base at its next turn, and the context's work would be gone without
//! anyone having asked for it there.

use std::path::{Path, PathBuf};

use crate::settings::{ServeArgs, Settings, StoreChoice, WorkspaceDirFlag};
use crate::workspace::{WorkspaceInfo, Workspaces};

/// Flags of `agent-host workspaces`.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkspacesArgs {
    #[command(subcommand)]
    pub command: Option<WorkspacesCommand>,
    /// TOML config file (its [store] location and [workspace] dir)
    #[arg(long, env = "AGENT_HOST_CONFIG", value_name = "PATH", global = true)]
    pub config: Option<PathBuf>,
    /// The store whose data folder holds the workspaces: sqlite (the default database) or sqlite:PATH
    #[arg(
        long,
        env = "AGENT_HOST_STORE",
        value_name = "sqlite[:PATH]",
        global = true
    )]
    pub store: Option<String>,
    // serve's `--workspace-dir`: the folder of the workspaces.
    #[command(flatten)]
    pub workspace: WorkspaceDirFlag,
    /// Print JSON
    #[arg(long, global = true)]
    pub json: bool,
}

/// What `agent-host workspaces` does.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum WorkspacesCommand {
    /// List every context's workspace: context, branch, base, disk use, checkout (the default)
    List,
    /// Remove a context's workspace (its checkout, branch and commits on this machine)
    Rm {
        /// The context id
        #[arg(value_name = "CONTEXT")]
        context: String,
    },
}

/// Why the command could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkspacesCmdError {
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error("{0}")]
    Flags(String),
    #[error("{0}")]
    Workspace(#[from] crate::workspace::WorkspaceError),
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
    #[error("no workspace folder: set [workspace] dir (--workspace-dir), or use the SQLite store, beside whose database the workspaces are kept")]
    NoFolder,
    #[error("context {0} has no workspace in {1}")]
    NotFound(String, String),
}

impl WorkspacesCmdError {
    /// The exit code: 2 for usage errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            WorkspacesCmdError::Settings(_) | WorkspacesCmdError::Flags(_) => 2,
            _ => 1,
        }
    }
}

/// Runs the command; the text to print.
pub fn run(args: &WorkspacesArgs) -> Result<String, WorkspacesCmdError> {
    let settings = settings(args)?;
    let dir = folder(&settings).ok_or(WorkspacesCmdError::NoFolder)?;
    match &args.command {
        None | Some(WorkspacesCommand::List) => list(&settings, &dir, args.json),
        Some(WorkspacesCommand::Rm { context }) => remove(&settings, &dir, context, args.json),
    }
}

fn settings(args: &WorkspacesArgs) -> Result<Settings, WorkspacesCmdError> {
    let mut flags: Vec<std::ffi::OsString> = Vec::new();
    for (name, value) in [
        ("--config", args.config.clone().map(Into::into)),
        ("--store", args.store.clone().map(Into::into)),
    ] {
        if let Some(v) = value {
            flags.extend([std::ffi::OsString::from(name), v]);
        }
    }
    flags.extend(args.workspace.as_serve_flags());
    let serve =
        ServeArgs::from_flags(flags).map_err(|e| WorkspacesCmdError::Flags(e.to_string()))?;
    Ok(Settings::resolve(&serve)?)
}

/// The workspaces' folder, as the host chooses it.
fn folder(settings: &Settings) -> Option<PathBuf> {
    match (&settings.workspace.dir, &settings.store) {
        (Some(d), _) => Some(d.clone()),
        (None, StoreChoice::Sqlite(db)) => db.parent().map(|p| p.join("workspaces")),
        (None, _) => None,
    }
}

/// The folder and each adapter's folder inside it (one without a workspace record).
fn roots(settings: &Settings, dir: &Path) -> Result<Vec<Workspaces>, WorkspacesCmdError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut config = settings.workspace.clone();
    config.dir = None;
    let mut all = vec![Workspaces::open(&config, Some(dir))?];
    let mut inner: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir() && !p.join("workspace.json").exists())
                .filter(|p| {
                    !p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                })
                .collect()
        })
        .unwrap_or_default();
    inner.sort();
    for d in inner {
        all.push(Workspaces::open(&config, Some(&d))?);
    }
    Ok(all)
}

fn list(settings: &Settings, dir: &Path, json: bool) -> Result<String, WorkspacesCmdError> {
    let all: Vec<WorkspaceInfo> = roots(settings, dir)?
        .iter()
        .flat_map(Workspaces::list)
        .collect();
    if json {
        let doc = serde_json::json!({"folder": dir.display().to_string(), "workspaces": all});
        return Ok(format!("{doc}\n"));
    }
    let total: u64 = all.iter().map(|w| w.bytes).sum();
    let mut out = String::new();
    for w in &all {
        let ws = &w.workspace;
        let base: String = ws.base_commit.chars().take(12).collect();
        out.push_str(&format!(
            "{}  {}  {}@{}  {}  {}\n",
            ws.context_id,
            ws.branch,
            ws.base_ref,
            base,
            super::doctor::human_size(w.bytes),
            w.path.display()
        ));
    }
    out.push_str(&format!(
        "{} workspace(s), {} in {}\n",
        all.len(),
        super::doctor::human_size(total),
        dir.display()
    ));
    Ok(out)
}

fn remove(
    settings: &Settings,
    dir: &Path,
    context: &str,
    json: bool,
) -> Result<String, WorkspacesCmdError> {
    if let StoreChoice::Sqlite(db) = &settings.store {
        crate::store::lock::check(db)?;
    }
    for root in roots(settings, dir)? {
        if root.remove(context)? {
            return Ok(if json {
                format!("{}\n", serde_json::json!({"removed": context}))
            } else {
                format!("removed the workspace of context {context}\n")
            });
        }
    }
    Err(WorkspacesCmdError::NotFound(
        context.to_string(),
        dir.display().to_string(),
    ))
}
