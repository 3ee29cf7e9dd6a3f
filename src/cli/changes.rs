//! What `agent-host call` does with a task's `changes` artifact after the answer: prints the
//! changed files (as `git diff --stat` does), and with `--apply` applies the patch to the
//! current directory's repository (whole, or nothing and the conflicting files named), with
//! `--fetch` fetches the context's branch from the host's `/git/<contextId>` into it.

use std::io::Write;
use std::path::Path;

use base64::Engine as _;
use serde_json::Value;

use crate::protocol::v1::Task;
use crate::workspace::local::{self, ApplyError};

/// The artifact's id (the engine's [`crate::engine::changes::CHANGES_ARTIFACT`]).
const CHANGES: &str = "changes";

/// The name of the file part with the change since the previous turn's end (the engine's
/// [`crate::engine::changes::TURN_PATCH_NAME`]).
const TURN_PATCH: &str = "turn.patch";

/// A task's change: the artifact's data part, its patch (empty when none), and the patch of
/// the change since the previous turn's end when the artifact has it apart.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskChanges {
    pub data: Value,
    pub patch: Vec<u8>,
    pub turn_patch: Vec<u8>,
}

/// The task's `changes` artifact, if it has one.
pub fn changes_of(task: &Task) -> Option<TaskChanges> {
    let a = task
        .artifacts
        .iter()
        .find(|a| a.artifact_id == CHANGES || a.name.as_deref() == Some(CHANGES))?;
    let data = a.parts.iter().find_map(|p| p.data.clone())?;
    let file = |turn: bool| {
        a.parts
            .iter()
            .filter(|p| p.raw.is_some())
            .find(|p| match p.filename.as_deref() {
                Some(TURN_PATCH) => turn,
                Some(_) => !turn,
                None => false,
            })
            .and_then(|p| p.raw.as_deref())
            .and_then(|raw| base64::engine::general_purpose::STANDARD.decode(raw).ok())
            .unwrap_or_default()
    };
    Some(TaskChanges {
        data,
        patch: file(false),
        turn_patch: file(true),
    })
}

/// Widest `+`/`-` bar of a line.
const BAR: u64 = 40;

/// The changed files as `git diff --stat` prints them: a line per file (`path | N ++--`,
/// `Bin` for a binary file, `old => new` for a rename) and a total.
pub fn stat(data: &Value) -> String {
    let files = data["files"].as_array().cloned().unwrap_or_default();
    if files.is_empty() {
        return " no files changed\n".to_string();
    }
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            let path = f["path"].as_str().unwrap_or("?");
            match f["oldPath"].as_str() {
                Some(old) => format!("{old} => {path}"),
                None => path.to_string(),
            }
        })
        .collect();
    let width = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let count = |f: &Value, k: &str| f[k].as_u64().unwrap_or(0);
    let most = files
        .iter()
        .map(|f| count(f, "additions") + count(f, "deletions"))
        .max()
        .unwrap_or(0);
    let (mut adds, mut dels) = (0, 0);
    let mut out = String::new();
    for (f, name) in files.iter().zip(&names) {
        let (a, d) = (count(f, "additions"), count(f, "deletions"));
        adds += a;
        dels += d;
        let right = if f["binary"].as_bool() == Some(true) {
            "Bin".to_string()
        } else {
            let (pa, pd) = scaled(a, d, most);
            format!(
                "{} {}{}",
                a + d,
                "+".repeat(pa as usize),
                "-".repeat(pd as usize)
            )
        };
        out.push_str(&format!(" {name:<width$} | {right}\n"));
    }
    let plural = |n: u64, one: &str, many: &str| if n == 1 { one } else { many }.to_string();
    out.push_str(&format!(
        " {} {} changed, {adds} {}(+), {dels} {}(-)\n",
        files.len(),
        plural(files.len() as u64, "file", "files"),
        plural(adds, "insertion", "insertions"),
        plural(dels, "deletion", "deletions"),
    ));
    if data["truncated"].as_bool() == Some(true) {
        out.push_str(if has_commit(data) {
            " (the patch was cut at the host's size limit: --fetch gets the whole change)\n"
        } else {
            " (the patch was cut at the host's size limit, and the change has no commit: neither --apply nor --fetch gets it whole)\n"
        });
    }
    out
}

/// Whether the workspace has a commit of the change to fetch (the data part's `head`); not
/// with `[workspace] commit = "off"`, unless the agent committed itself.
fn has_commit(data: &Value) -> bool {
    !data["head"].is_null()
}

/// What the host's operator can do when a change has no commit and its patch was cut: the
/// settings by their names in docs/configuration.md.
const OUT_OF_REACH: &str = "neither --apply nor --fetch gets it whole; the host's operator can raise [workspace] patch_limit (--workspace-patch-limit) or set [workspace] commit = \"turn\" (--workspace-commit turn)";

/// What the caller must know of the change before using it: each folder that is a git
/// repository of its own in the workspace, whose files the change does not hold.
pub fn warnings(data: &Value) -> Vec<String> {
    let files = data["files"].as_array().cloned().unwrap_or_default();
    files
        .iter()
        .filter(|f| f["embeddedRepository"].as_bool() == Some(true))
        .filter_map(|f| f["path"].as_str())
        .map(|path| {
            format!(
                "{path}/ is a git repository of its own in the workspace: the change records only its commit (a gitlink), not its files; neither --apply nor --fetch brings them"
            )
        })
        .collect()
}

/// The bar's `+` and `-` for `a` additions and `d` deletions, scaled so that the largest
/// change (`most`) fills [`BAR`]; a change shows at least one sign of each kind it has.
fn scaled(a: u64, d: u64, most: u64) -> (u64, u64) {
    if most <= BAR {
        return (a, d);
    }
    let s = |n: u64| if n == 0 { 0 } else { (n * BAR / most).max(1) };
    (s(a), s(d))
}

/// What to do with the change besides showing it.
#[derive(Debug, Clone, Default)]
pub struct ChangeActions {
    /// Apply the patch to the current directory's repository.
    pub apply: bool,
    /// Fetch the context's branch into the current directory's repository.
    pub fetch: bool,
    /// The agent's base URL (the workspace is at `BASE/git/<contextId>`).
    pub base_url: String,
    /// The caller's bearer token, for `--fetch`.
    pub token: Option<String>,
    /// Print the changed files (not with `--json`).
    pub show: bool,
}

/// Shows the task's change and carries out `--apply` / `--fetch` in `dir`; false when one
/// of them failed (said on `err`).
pub async fn after_answer<O: Write, E: Write>(
    task: &Task,
    act: &ChangeActions,
    dir: &Path,
    out: &mut O,
    err: &mut E,
) -> bool {
    let Some(ch) = changes_of(task) else {
        if act.apply || act.fetch {
            let _ = writeln!(
                err,
                "agent-host: the task has no changes artifact (its folder is not a git workspace): nothing to apply or fetch"
            );
            return false;
        }
        return true;
    };
    if let Some(why) = ch.data["error"].as_str() {
        let _ = writeln!(err, "agent-host: warning: {why}");
        if act.apply || act.fetch {
            let _ = writeln!(err, "agent-host: nothing applied or fetched");
            return false;
        }
        return true;
    }
    if act.show {
        let _ = write!(out, "{}", stat(&ch.data));
        let _ = out.flush();
    }
    for warning in warnings(&ch.data) {
        let _ = writeln!(err, "agent-host: warning: {warning}");
    }
    let mut ok = true;
    if act.apply {
        ok &= apply(&ch, dir, err).await;
    }
    if act.fetch {
        ok &= fetch(task, &ch, act, dir, err).await;
    }
    ok
}

/// `--apply`: the whole change when it applies (a checkout of the base, or one that has
/// none of it yet), else, on a follow-up, the change since the previous turn's end (the
/// earlier turns' change already applied, by an earlier `--apply`); whole or nothing, and
/// which one it applied said.
async fn apply<E: Write>(ch: &TaskChanges, dir: &Path, err: &mut E) -> bool {
    let turn = &ch.data["turn"];
    let whole_cut = ch.data["truncated"].as_bool() == Some(true);
    if ch.patch.is_empty() && !whole_cut {
        let _ = writeln!(err, "agent-host: no change to apply");
        return true;
    }
    let dir = dir.to_path_buf();
    let top = {
        let d = dir.clone();
        tokio::task::spawn_blocking(move || local::top_of(&d))
            .await
            .unwrap_or(dir)
    };
    let whole = if whole_cut {
        None
    } else {
        match apply_one(&ch.patch, &top).await {
            Ok(()) => {
                let _ = writeln!(err, "agent-host: applied the change to {}", top.display());
                return true;
            }
            Err(e) => Some(e),
        }
    };
    // The whole change does not apply (or was cut): on a follow-up, this turn's alone.
    let turn_files = turn["files"].as_array().map(Vec::len);
    if turn_files == Some(0) {
        let _ = writeln!(
            err,
            "agent-host: the whole change does not apply to {}, and this turn changed nothing since the previous one: nothing new to apply",
            top.display()
        );
        return true;
    }
    let turn_cut = turn["truncated"].as_bool() == Some(true);
    if turn_files.is_some() && !ch.turn_patch.is_empty() && !turn_cut {
        match apply_one(&ch.turn_patch, &top).await {
            Ok(()) => {
                let _ = writeln!(
                    err,
                    "agent-host: the whole change does not apply to {} (the earlier turns' is there already?); applied this turn's change since the previous one",
                    top.display()
                );
                return true;
            }
            Err(e) => {
                let what = "neither the whole change nor this turn's change applies to";
                return report(&e, what, err);
            }
        }
    }
    match whole {
        Some(e) => report(&e, "the change does not apply to", err),
        None if has_commit(&ch.data) => {
            let _ = writeln!(
                err,
                "agent-host: the patch was cut at the host's size limit; nothing applied (use --fetch)"
            );
            false
        }
        None => {
            let _ = writeln!(
                err,
                "agent-host: the patch was cut at the host's size limit and the change has no commit to fetch; nothing applied: {OUT_OF_REACH}"
            );
            false
        }
    }
}

/// Applies `patch` to `top` with `git apply` (checked whole first).
async fn apply_one(patch: &[u8], top: &Path) -> Result<(), ApplyError> {
    let file = tempfile::Builder::new()
        .prefix("agent-host-")
        .suffix(".patch")
        .tempfile()
        .and_then(|f| std::fs::write(f.path(), patch).map(|()| f))
        .map_err(|e| {
            ApplyError::Git(crate::workspace::WorkspaceError::Io {
                path: std::env::temp_dir(),
                source: e,
            })
        })?;
    let top = top.to_path_buf();
    tokio::task::spawn_blocking(move || local::apply_patch(&top, file.path()))
        .await
        .unwrap_or_else(|e| {
            Err(ApplyError::Git(
                crate::workspace::WorkspaceError::GitMissing(format!(
                    "git apply did not finish: {e}"
                )),
            ))
        })
}

/// Says why a patch was not applied (`what`, then the folder); false.
fn report<E: Write>(e: &ApplyError, what: &str, err: &mut E) -> bool {
    match e {
        ApplyError::Conflict { dir, files, detail } => {
            let _ = writeln!(
                err,
                "agent-host: {what} {}; nothing was applied. Conflicts in: {}\n{detail}",
                dir.display(),
                files.join(", ")
            );
        }
        e => {
            let _ = writeln!(err, "agent-host: {e}");
        }
    }
    false
}

async fn fetch<E: Write>(
    task: &Task,
    ch: &TaskChanges,
    act: &ChangeActions,
    dir: &Path,
    err: &mut E,
) -> bool {
    let Some(branch) = ch.data["branch"].as_str() else {
        let _ = writeln!(err, "agent-host: the change names no branch to fetch");
        return false;
    };
    if !has_commit(&ch.data) {
        // The branch would be the base alone: nothing of the change to fetch.
        let changed = ch.data["files"].as_array().is_some_and(|f| !f.is_empty());
        if !changed {
            let _ = writeln!(err, "agent-host: no change to fetch");
            return true;
        }
        let why = if ch.data["truncated"].as_bool() == Some(true) {
            format!("and its patch was cut at the host's size limit: {OUT_OF_REACH}")
        } else {
            "its change is in the patch (--apply)".to_string()
        };
        let _ = writeln!(
            err,
            "agent-host: nothing fetched: the workspace has no commit of its own ([workspace] commit = \"off\"?) {why}"
        );
        return false;
    }
    let url = format!(
        "{}/git/{}",
        act.base_url.trim_end_matches('/'),
        task.context_id
    );
    let header = act
        .token
        .as_ref()
        .map(|t| format!("Authorization: Bearer {t}"));
    let (d, u, b) = (dir.to_path_buf(), url.clone(), branch.to_string());
    let fetched =
        tokio::task::spawn_blocking(move || local::fetch_branch(&d, &u, &b, header.as_deref()))
            .await;
    let Ok(fetched) = fetched else {
        let _ = writeln!(err, "agent-host: git fetch did not finish");
        return false;
    };
    match fetched {
        Ok(done) => {
            let (commit, how) = match &done {
                local::Fetched::Updated(c) => (c, "fetched"),
                local::Fetched::UpToDate(c) => (c, "already up to date:"),
            };
            let short: String = commit.chars().take(12).collect();
            let _ = writeln!(
                err,
                "agent-host: {how} {branch} ({short}) in this repository"
            );
            true
        }
        Err(e) => {
            let _ = writeln!(err, "agent-host: could not fetch {branch} from {url}: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_stat_reads_like_git_diff_stat() {
        let data = json!({"files": [
            {"path": "src/lib.rs", "status": "modified", "additions": 3, "deletions": 1, "binary": false},
            {"path": "logo.png", "status": "added", "additions": 0, "deletions": 0, "binary": true},
            {"path": "b.txt", "oldPath": "a.txt", "status": "renamed", "additions": 0, "deletions": 0, "binary": false}
        ], "truncated": false});
        assert_eq!(
            stat(&data),
            " src/lib.rs     | 4 +++-\n logo.png       | Bin\n a.txt => b.txt | 0 \n 3 files changed, 3 insertions(+), 1 deletion(-)\n"
        );
        assert_eq!(stat(&json!({"files": []})), " no files changed\n");
        assert_eq!(scaled(400, 0, 400), (40, 0));
        let nested = json!({"files": [
            {"path": "nested", "status": "added", "additions": 0, "deletions": 0, "binary": false, "embeddedRepository": true},
            {"path": "a.txt", "status": "added", "additions": 1, "deletions": 0, "binary": false}
        ]});
        let w = warnings(&nested);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("nested/ is a git repository of its own"),
            "{w:?}"
        );
        assert!(warnings(&data).is_empty());
        assert_eq!(scaled(1, 399, 400), (1, 39));
    }
}
