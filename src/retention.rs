//! Retention: which terminal tasks are deleted, and deleting them with their attachments.
//!
//! The settings ([`RetentionSettings`]: `[retention] max_age`, `max_tasks`) name an age past
//! which a terminal task goes (its last status change is older) and a count of terminal
//! tasks kept (the newest). A task that is not terminal (submitted, working, waiting for
//! input) is never deleted, whatever its age. A deleted task's attachments folder
//! (`<working dir>/.agent-host/attachments/<task id>`) goes with it; a context left without
//! tasks loses its workspace and its CLI home.
//!
//! [`spawn`] runs it in the background of a host (the composition root starts one per
//! store, and stops it at shutdown); [`prune_with`] runs it once (`agent-host tasks prune`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use serde::{Deserialize, Serialize};

use crate::home::Homes;
use crate::store::{ListQuery, StoreError, TaskStore, TerminalTask};
use crate::units::Dur;
use crate::workspace::Workspaces;

/// `[retention]`: which terminal tasks are deleted. Each field is one setting: its flag,
/// environment variable, config file key (the `id`), default and help are declared here
/// once; the `settings` module merges them with the config file.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Retention")]
pub struct RetentionConfig {
    /// Delete terminal tasks (and their attachments) whose status is older than this, e.g. 30d, 12h; 0 or off = keep
    #[arg(
        id = "retention.max_age",
        long = "retention-max-age",
        env = "AGENT_HOST_RETENTION_MAX_AGE",
        value_name = "DURATION",
        default_value = "off"
    )]
    pub max_age: Dur,
    /// Keep at most this many terminal tasks, newest first; 0 = no limit
    #[arg(
        id = "retention.max_tasks",
        long = "retention-max-tasks",
        env = "AGENT_HOST_RETENTION_MAX_TASKS",
        value_name = "N",
        default_value_t = 0
    )]
    pub max_tasks: usize,
}

/// What the host keeps; `None`: no limit of that kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionSettings {
    pub max_age: Option<Duration>,
    pub max_tasks: Option<usize>,
}

impl RetentionSettings {
    /// The policy `[retention]` gives (zero: no limit of that kind).
    pub fn from_config(c: &RetentionConfig) -> RetentionSettings {
        RetentionSettings {
            max_age: c.max_age.non_zero(),
            max_tasks: (c.max_tasks > 0).then_some(c.max_tasks),
        }
    }

    /// Whether any limit is set (else retention never runs).
    pub fn is_on(&self) -> bool {
        self.max_age.is_some() || self.max_tasks.is_some()
    }
}

/// How often the background retention runs (the first run is right after the start).
pub const INTERVAL: Duration = Duration::from_secs(600);

/// The terminal tasks that `policy` deletes at `now`, from `tasks` (newest status first, as
/// [`TaskStore::terminal_tasks`] gives them): those beyond the first `max_tasks`, and those
/// whose status is older than `max_age`. A timestamp that does not parse counts for the
/// number kept but is never "too old".
pub fn select(
    tasks: &[TerminalTask],
    policy: &RetentionSettings,
    now: DateTime<Utc>,
) -> Vec<TerminalTask> {
    let cutoff = policy
        .max_age
        .and_then(|a| chrono::Duration::from_std(a).ok())
        .and_then(|a| now.checked_sub_signed(a));
    tasks
        .iter()
        .enumerate()
        .filter(|(i, t)| {
            let over_count = policy.max_tasks.is_some_and(|n| *i >= n);
            let too_old = cutoff.is_some_and(|c| {
                DateTime::parse_from_rfc3339(&t.status_ts)
                    .map(|ts| ts.with_timezone(&Utc) < c)
                    .unwrap_or(false)
            });
            over_count || too_old
        })
        .map(|(_, t)| t.clone())
        .collect()
}

/// What a prune did (or, in a dry run, would do).
#[derive(Debug, Clone, Default)]
pub struct Pruned {
    /// The tasks deleted (dry run: that would be).
    pub tasks: Vec<TerminalTask>,
    /// Attachments folders removed (dry run: that would be).
    pub attachments: Vec<PathBuf>,
    /// The contexts whose workspace was removed (dry run: would be): every task of theirs
    /// was deleted.
    pub workspaces: Vec<String>,
    /// The contexts whose CLI home was removed (dry run: would be), likewise.
    pub homes: Vec<String>,
}

/// What a context keeps besides its tasks, removed with its last task.
#[derive(Debug, Clone, Default)]
pub struct Folders {
    pub workspaces: Option<Arc<Workspaces>>,
    pub homes: Option<Arc<Homes>>,
}

/// Applies `policy` to `store` once, removing also the workspace of each context left
/// without tasks (with `workspaces`). `work_dir` is the working directory of tasks whose
/// context recorded none. With `dry_run`, nothing is deleted.
pub async fn prune_with(
    store: &dyn TaskStore,
    policy: &RetentionSettings,
    work_dir: &Path,
    folders: &Folders,
    dry_run: bool,
) -> Result<Pruned, StoreError> {
    let mut pruned = prune_tasks(store, policy, work_dir, dry_run).await?;
    let ws = folders.workspaces.as_deref();
    let homes = folders.homes.as_deref();
    if ws.is_none() && homes.is_none() {
        return Ok(pruned);
    }
    let has_folder = |ctx: &str| {
        ws.is_some_and(|all| matches!(all.get(ctx), Ok(Some(_))))
            || homes.is_some_and(|all| all.exists(ctx))
    };
    for ctx in emptied_contexts(store, &pruned.tasks, has_folder).await? {
        if let Some(all) = ws.filter(|all| matches!(all.get(&ctx), Ok(Some(_)))) {
            let removed = dry_run || remove_logged(&ctx, "workspace", || all.remove(&ctx));
            if removed {
                pruned.workspaces.push(ctx.clone());
            }
        }
        if let Some(all) = homes.filter(|all| all.exists(&ctx)) {
            let removed = dry_run || remove_logged(&ctx, "CLI home", || all.remove(&ctx));
            if removed {
                pruned.homes.push(ctx.clone());
            }
        }
    }
    Ok(pruned)
}

/// Runs a removal; true when something was removed (a failure is logged).
fn remove_logged<E: std::fmt::Display>(
    ctx: &str,
    what: &str,
    remove: impl FnOnce() -> Result<bool, E>,
) -> bool {
    match remove() {
        Ok(removed) => removed,
        Err(e) => {
            tracing::warn!(context = %ctx, error = %e, "could not remove a pruned context's {what}");
            false
        }
    }
}

/// The contexts of `deleted` that keep something (`keeps`) and are left without a task.
async fn emptied_contexts(
    store: &dyn TaskStore,
    deleted: &[TerminalTask],
    keeps: impl Fn(&str) -> bool,
) -> Result<Vec<String>, StoreError> {
    let ids: std::collections::HashSet<&str> = deleted.iter().map(|t| t.id.as_str()).collect();
    let mut contexts: Vec<&str> = deleted.iter().map(|t| t.context_id.as_str()).collect();
    contexts.sort_unstable();
    contexts.dedup();
    contexts.retain(|c| keeps(c));
    let mut out = Vec::new();
    for ctx in contexts {
        let left = store
            .list(
                &ListQuery {
                    context_id: Some(ctx.to_string()),
                    page_size: 100,
                    ..ListQuery::default()
                },
                false,
            )
            .await?;
        if !left.tasks.iter().any(|t| !ids.contains(t.id.as_str())) {
            out.push(ctx.to_string());
        }
    }
    Ok(out)
}

async fn prune_tasks(
    store: &dyn TaskStore,
    policy: &RetentionSettings,
    work_dir: &Path,
    dry_run: bool,
) -> Result<Pruned, StoreError> {
    if !policy.is_on() {
        return Ok(Pruned::default());
    }
    let chosen = select(&store.terminal_tasks().await?, policy, Utc::now());
    if chosen.is_empty() {
        return Ok(Pruned::default());
    }
    let contexts = store.contexts().await?;
    let folder_of = |t: &TerminalTask| {
        let dir = contexts
            .iter()
            .find(|c| c.context_id == t.context_id)
            .and_then(|c| c.cwd.as_deref())
            .map(PathBuf::from)
            .unwrap_or_else(|| work_dir.to_path_buf());
        crate::engine::input::attachments_dir(&dir, &t.id)
    };
    let folders: Vec<(String, PathBuf)> = chosen
        .iter()
        .map(|t| (t.id.clone(), folder_of(t)))
        .collect();
    if dry_run {
        return Ok(Pruned {
            attachments: folders
                .into_iter()
                .map(|(_, f)| f)
                .filter(|f| is_real_dir(f))
                .collect(),
            tasks: chosen,
            ..Pruned::default()
        });
    }
    let ids: Vec<String> = chosen.iter().map(|t| t.id.clone()).collect();
    let deleted = store.delete_terminal(&ids).await?;
    let mut removed = Vec::new();
    for (id, folder) in folders {
        if !deleted.contains(&id) || !is_real_dir(&folder) {
            continue;
        }
        match tokio::fs::remove_dir_all(&folder).await {
            Ok(()) => removed.push(folder),
            Err(e) => {
                tracing::warn!(task = %id, path = %folder.display(), error = %e, "could not remove a pruned task's attachments")
            }
        }
    }
    Ok(Pruned {
        tasks: chosen
            .into_iter()
            .filter(|t| deleted.contains(&t.id))
            .collect(),
        attachments: removed,
        ..Pruned::default()
    })
}

/// Whether `path` is a directory reached without symbolic links from its `.agent-host`
/// folder on (so a removal never follows a link out of the working directory).
fn is_real_dir(path: &Path) -> bool {
    let mut p = Some(path);
    // The task folder, `attachments`, `.agent-host`.
    for _ in 0..3 {
        let Some(cur) = p else { return false };
        match std::fs::symlink_metadata(cur) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
        p = cur.parent();
    }
    true
}

/// Starts the background retention of `store`: once now, then every [`INTERVAL`]. `None`
/// when `policy` sets no limit. Abort the handle to stop it.
pub fn spawn(
    store: Arc<dyn TaskStore>,
    policy: RetentionSettings,
    work_dir: PathBuf,
    folders: Folders,
) -> Option<tokio::task::JoinHandle<()>> {
    if !policy.is_on() {
        return None;
    }
    tracing::info!(
        max_age_secs = policy.max_age.map(|a| a.as_secs()),
        max_tasks = policy.max_tasks,
        "retention on: terminal tasks beyond these limits are deleted"
    );
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match prune_with(store.as_ref(), &policy, &work_dir, &folders, false).await {
                Ok(p) if !p.tasks.is_empty() => tracing::info!(
                    tasks = p.tasks.len(),
                    attachments = p.attachments.len(),
                    workspaces = p.workspaces.len(),
                    homes = p.homes.len(),
                    "retention deleted terminal tasks"
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "retention failed; trying again later"),
            }
        }
    }))
}

#[cfg(test)]
mod tests;
