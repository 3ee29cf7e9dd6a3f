//! `agent-host tasks prune`: deletes terminal tasks from the configured store once, by age
//! and/or count (dry run unless `--yes`). See [`crate::retention`].
//!
//! It opens the SQLite database itself, so it refuses while a host has the database open
//! (the data folder's lock names that host): a running host applies its own `[retention]`
//! settings in the background. SQLite's WAL would allow a second writer, but the host keeps
//! recent events of running tasks in memory and owns the database alone (one host per data
//! folder); stop the host or set `[retention]` instead.

use std::path::PathBuf;

use crate::retention::RetentionSettings;
use crate::settings::{ServeArgs, Settings, StoreChoice, WorkspaceDirFlag};
use crate::store::SqliteStore;
use crate::units::Dur;

/// Flags of `agent-host tasks prune`.
#[derive(Debug, Clone, clap::Args)]
pub struct PruneArgs {
    /// Delete terminal tasks whose last status change is older than this: 30d, 12h, 90m, 2w
    #[arg(long, value_name = "DURATION")]
    pub older_than: Option<Dur>,
    /// Keep only this many terminal tasks, the newest
    #[arg(long, value_name = "N")]
    pub keep: Option<usize>,
    /// Delete; without it, only list what would be deleted
    #[arg(long)]
    pub yes: bool,
    /// Print what was (or would be) deleted as one JSON document
    #[arg(long)]
    pub json: bool,
    /// TOML config file (its [store] location, [agent] repo_path, [workspace] dir and [retention])
    #[arg(long, env = "AGENT_HOST_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The store: sqlite (the default database) or sqlite:PATH
    #[arg(long, env = "AGENT_HOST_STORE", value_name = "sqlite[:PATH]")]
    pub store: Option<String>,
    /// Working directory of the tasks, where their attachments are [default: the current directory]
    #[arg(long, env = "AGENT_HOST_REPO_PATH", value_name = "DIR")]
    pub repo_path: Option<PathBuf>,
    // serve's `--workspace-dir`: where the workspaces of the contexts it empties are.
    #[command(flatten)]
    pub workspace: WorkspaceDirFlag,
}

/// Why a prune could not run.
#[derive(Debug, thiserror::Error)]
pub enum PruneError {
    #[error(transparent)]
    Settings(#[from] crate::settings::SettingsError),
    #[error("{0}")]
    Flags(String),
    #[error("task store: {0}")]
    Store(#[from] crate::store::StoreError),
    #[error("nothing to prune by: give --older-than AGE and/or --keep N (or set [retention] in the config file, or AGENT_HOST_RETENTION_MAX_AGE / _MAX_TASKS)")]
    NoLimit,
    #[error("the memory store keeps nothing after the host stops: there is nothing to prune")]
    Memory,
    #[error("tasks prune works on a SQLite database; hosts on a PostgreSQL store apply [retention] themselves (set it in their config)")]
    Postgres,
    #[error("no task database at {0}: nothing to prune (check --store)")]
    NoDatabase(String),
}

impl PruneError {
    /// The exit code: 2 for usage errors, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            PruneError::NoLimit | PruneError::Settings(_) | PruneError::Flags(_) => 2,
            _ => 1,
        }
    }
}

/// Runs the prune; the text to print.
pub async fn run(args: &PruneArgs, json: bool) -> Result<String, PruneError> {
    let mut flags: Vec<std::ffi::OsString> = Vec::new();
    for (name, value) in [
        ("--config", args.config.clone().map(Into::into)),
        ("--store", args.store.clone().map(Into::into)),
        ("--repo-path", args.repo_path.clone().map(Into::into)),
    ] {
        if let Some(v) = value {
            flags.extend([std::ffi::OsString::from(name), v]);
        }
    }
    flags.extend(args.workspace.as_serve_flags());
    let serve =
        ServeArgs::from_env_and_flags(flags).map_err(|e| PruneError::Flags(e.to_string()))?;
    let settings = Settings::resolve(&serve)?;
    let mut policy = settings.retention;
    if args.older_than.is_some() || args.keep.is_some() {
        policy = RetentionSettings {
            max_age: args.older_than.and_then(Dur::non_zero),
            max_tasks: args.keep,
        };
    }
    if !policy.is_on() {
        return Err(PruneError::NoLimit);
    }
    let path = match &settings.store {
        StoreChoice::Sqlite(p) => p.clone(),
        StoreChoice::Memory => return Err(PruneError::Memory),
        StoreChoice::Postgres(_) => return Err(PruneError::Postgres),
    };
    // Opening would make an empty database where a mistyped path points.
    if !path.is_file() {
        return Err(PruneError::NoDatabase(path.display().to_string()));
    }
    let store = SqliteStore::open(&path)?;
    let dry_run = !args.yes;
    let folders = crate::retention::Folders {
        workspaces: default_workspaces(&settings, &path).map(std::sync::Arc::new),
        homes: default_homes(&settings).map(std::sync::Arc::new),
    };
    let pruned =
        crate::retention::prune_with(&store, &policy, &settings.repo_path, &folders, dry_run)
            .await?;
    if json {
        let tasks: Vec<_> = pruned
            .tasks
            .iter()
            .map(|t| {
                serde_json::json!({"id": t.id, "contextId": t.context_id, "statusTimestamp": t.status_ts})
            })
            .collect();
        let doc = serde_json::json!({
            "dryRun": dry_run,
            "database": path.display().to_string(),
            "tasks": tasks,
            "attachments": pruned.attachments.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "workspaces": pruned.workspaces,
            "homes": pruned.homes,
        });
        return Ok(format!("{doc}\n"));
    }
    let verb = if dry_run { "would delete" } else { "deleted" };
    let mut out = format!(
        "{verb} {} terminal task(s) and {} attachments folder(s) from {}\n",
        pruned.tasks.len(),
        pruned.attachments.len(),
        path.display()
    );
    for t in &pruned.tasks {
        out.push_str(&format!(
            "  {}  {}  context {}\n",
            t.status_ts, t.id, t.context_id
        ));
    }
    for a in &pruned.attachments {
        out.push_str(&format!("  {}\n", a.display()));
    }
    for c in &pruned.workspaces {
        out.push_str(&format!("  the workspace of context {c}\n"));
    }
    for c in &pruned.homes {
        out.push_str(&format!("  the CLI home of context {c}\n"));
    }
    if dry_run && !pruned.tasks.is_empty() {
        out.push_str("dry run: nothing deleted; add --yes to delete\n");
    }
    Ok(out)
}

/// The default adapter's workspaces beside the database (or in `--workspace-dir`), when
/// that folder exists.
fn default_workspaces(
    settings: &Settings,
    db: &std::path::Path,
) -> Option<crate::workspace::Workspaces> {
    let config = &settings.workspace;
    if config.mode == Some(crate::workspace::WorkspaceMode::Shared) {
        return None;
    }
    let dir = config
        .dir
        .clone()
        .or_else(|| db.parent().map(|p| p.join("workspaces")))?;
    if !dir.is_dir() {
        return None;
    }
    crate::workspace::Workspaces::open(config, Some(&dir)).ok()
}

/// The default adapter's CLI homes in the database's data folder, when that folder exists.
fn default_homes(settings: &Settings) -> Option<crate::home::Homes> {
    let dir = crate::app::homes_dir(&settings.store)?;
    if !dir.is_dir() {
        return None;
    }
    crate::home::Homes::open(Some(&dir)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{Task, TaskState, TaskStatus};
    use crate::store::TaskStore as _;

    fn task(id: &str, state: TaskState, ts: &str) -> Task {
        Task {
            id: id.into(),
            context_id: format!("ctx-{id}"),
            status: TaskStatus {
                state,
                message: None,
                timestamp: Some(ts.into()),
            },
            ..Task::default()
        }
    }

    #[tokio::test]
    async fn dry_run_lists_and_yes_deletes_only_old_terminal_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        {
            let store = SqliteStore::open(&db).unwrap();
            store
                .create(task(
                    "old",
                    TaskState::Completed,
                    "2020-01-01T00:00:00.000Z",
                ))
                .await
                .unwrap();
            store
                .create(task(
                    "stuck",
                    TaskState::Working,
                    "2020-01-01T00:00:00.000Z",
                ))
                .await
                .unwrap();
            store
                .create(task(
                    "fresh",
                    TaskState::Failed,
                    &crate::task::now_timestamp(),
                ))
                .await
                .unwrap();
        }
        let mut args = PruneArgs {
            older_than: Some("30d".parse().unwrap()),
            keep: None,
            yes: false,
            json: false,
            config: None,
            store: Some(format!("sqlite:{}", db.display())),
            repo_path: Some(dir.path().to_path_buf()),
            workspace: WorkspaceDirFlag::default(),
        };
        let out = run(&args, false).await.unwrap();
        assert!(out.contains("would delete 1 terminal task(s)"), "{out}");
        assert!(out.contains(" old ") && !out.contains("stuck"), "{out}");
        let out = run(&args, true).await.unwrap();
        let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["dryRun"], true);
        assert_eq!(doc["tasks"][0]["id"], "old");

        args.yes = true;
        let out = run(&args, false).await.unwrap();
        assert!(out.starts_with("deleted 1 terminal task(s)"), "{out}");
        let store = SqliteStore::open(&db).unwrap();
        assert!(store.get("old").await.unwrap().is_none());
        assert!(store.get("stuck").await.unwrap().is_some());
        assert!(store.get("fresh").await.unwrap().is_some());
        drop(store);
        args.older_than = None;
        let e = run(&args, false).await.unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        // A path with no database is an error, and none is made there.
        let missing = dir.path().join("typo.db");
        args.older_than = Some("30d".parse().unwrap());
        args.store = Some(format!("sqlite:{}", missing.display()));
        let e = run(&args, false).await.unwrap_err();
        assert!(matches!(e, PruneError::NoDatabase(_)), "{e}");
        assert!(!missing.exists());
    }
}
