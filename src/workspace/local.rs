//! git in the caller's own repository, for the client (`agent-host call --apply` and
//! `--fetch`): a context's patch applied whole or not at all, its branch fetched from the
//! host. The caller's git runs as the caller configured it (its own configuration, helpers
//! and certificates); only a credential is added, by environment so that other users of the
//! machine do not see it in the process list.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::WorkspaceError;

/// Why a patch was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// It does not apply: nothing was changed; the files it conflicts on.
    #[error("the patch does not apply to {dir}, nothing was changed; conflicts in: {}", files.join(", "))]
    Conflict {
        dir: PathBuf,
        files: Vec<String>,
        /// What git said.
        detail: String,
    },
    #[error(transparent)]
    Git(#[from] WorkspaceError),
}

/// Why a context's branch was not fetched into the caller's branch.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The local branch has commits the fetched one does not descend from.
    #[error("your branch {branch} has commits that the context's branch does not have (the fetched commit {fetched} does not descend from it), so it was not overwritten. The context's commit is in FETCH_HEAD: compare with `git log {branch}...FETCH_HEAD`, or rename or delete your branch and fetch again")]
    Diverged { branch: String, fetched: String },
    /// The local branch is checked out (here or in another worktree): moving it would leave
    /// that checkout's files behind its branch.
    #[error("the branch {branch} is checked out in {worktree}, so it was not moved. The context's commit {fetched} is in FETCH_HEAD: bring it in with `git merge --ff-only FETCH_HEAD` there, or switch that checkout to another branch and fetch again")]
    CheckedOut {
        branch: String,
        worktree: String,
        fetched: String,
    },
    #[error(transparent)]
    Git(#[from] WorkspaceError),
}

/// What a fetch did to the caller's branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The branch was made, or moved forward, to this commit.
    Updated(String),
    /// The branch already was at this commit.
    UpToDate(String),
}

fn git_in(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).stdin(Stdio::null());
    cmd
}

fn run(mut cmd: Command, what: &str) -> Result<std::process::Output, WorkspaceError> {
    cmd.output()
        .map_err(|e| WorkspaceError::GitMissing(format!("{what}: {e}")))
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_string()
}

/// The top folder of the repository `dir` is in, or `dir` itself outside one (`git apply`
/// works outside a repository too).
pub fn top_of(dir: &Path) -> PathBuf {
    let mut cmd = git_in(dir);
    cmd.args(["rev-parse", "--show-toplevel"]);
    match cmd.output() {
        Ok(o) if o.status.success() => {
            let top = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if top.is_empty() {
                dir.to_path_buf()
            } else {
                PathBuf::from(top)
            }
        }
        _ => dir.to_path_buf(),
    }
}

/// Applies `patch` (a file) to the files of `dir` (its repository's top): checked whole
/// first (`git apply --check`), then applied; on a conflict nothing is changed and the
/// conflicting files are named.
pub fn apply_patch(dir: &Path, patch: &Path) -> Result<(), ApplyError> {
    let mut check = git_in(dir);
    check.args([OsStr::new("apply"), "--check".as_ref(), patch.as_os_str()]);
    let out = run(check, "git apply --check")?;
    if !out.status.success() {
        let detail = stderr_of(&out);
        return Err(ApplyError::Conflict {
            dir: dir.to_path_buf(),
            files: conflicting_files(&detail),
            detail,
        });
    }
    let mut apply = git_in(dir);
    apply.args([OsStr::new("apply"), patch.as_os_str()]);
    let out = run(apply, "git apply")?;
    if !out.status.success() {
        return Err(WorkspaceError::Git {
            command: "git apply".into(),
            message: stderr_of(&out),
        }
        .into());
    }
    Ok(())
}

/// The files `git apply` names in its errors (`error: patch failed: FILE:LINE`,
/// `error: FILE: already exists in working directory`, `error: FILE: No such file ...`).
pub fn conflicting_files(stderr: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for line in stderr.lines() {
        let Some(rest) = line.trim().strip_prefix("error: ") else {
            continue;
        };
        let file = match rest.strip_prefix("patch failed: ") {
            Some(at) => at.rsplit_once(':').map_or(at, |(f, _)| f),
            None => match rest.split_once(": ") {
                Some((f, _)) => f,
                None => continue,
            },
        };
        if !file.is_empty() && !files.iter().any(|f| f == file) {
            files.push(file.to_string());
        }
    }
    files
}

/// Fetches `branch` from `url` (a context's `/git/<contextId>`) into the same branch of the
/// repository `dir` is in, sending `header` (`Authorization: ...`) with each request. The
/// branch is made, or moved forward; never overwritten: a local branch the fetched commit
/// does not descend from, or one checked out in a worktree, is left as it is and the fetched
/// commit stays in `FETCH_HEAD` ([`FetchError`]).
pub fn fetch_branch(
    dir: &Path,
    url: &str,
    branch: &str,
    header: Option<&str>,
) -> Result<Fetched, FetchError> {
    let mut cmd = git_in(dir);
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    if let Some(h) = header {
        // Added after the caller's own `GIT_CONFIG_*` entries, if any.
        let n: usize = std::env::var("GIT_CONFIG_COUNT")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        cmd.env("GIT_CONFIG_COUNT", (n + 1).to_string())
            .env(format!("GIT_CONFIG_KEY_{n}"), "http.extraHeader")
            .env(format!("GIT_CONFIG_VALUE_{n}"), h);
    }
    // Into `FETCH_HEAD` only: the local branch is moved below, when that is safe.
    let remote = format!("refs/heads/{branch}");
    cmd.args(["fetch", "--no-tags", "--", url, &remote]);
    let out = run(cmd, "git fetch")?;
    if !out.status.success() {
        return Err(failed("git fetch", &out).into());
    }
    let fetched = rev_parse(dir, "FETCH_HEAD^{commit}")?.ok_or_else(|| WorkspaceError::Git {
        command: "git rev-parse FETCH_HEAD".into(),
        message: "the fetch brought no commit".into(),
    })?;
    let local = format!("refs/heads/{branch}");
    let old = rev_parse(dir, &format!("{local}^{{commit}}"))?;
    if old.as_deref() == Some(fetched.as_str()) {
        return Ok(Fetched::UpToDate(fetched));
    }
    if let Some(old) = &old {
        if !is_ancestor(dir, old, &fetched)? {
            return Err(FetchError::Diverged {
                branch: branch.to_string(),
                fetched,
            });
        }
    }
    if let Some(worktree) = checked_out_in(dir, &local)? {
        return Err(FetchError::CheckedOut {
            branch: branch.to_string(),
            worktree,
            fetched,
        });
    }
    let mut update = git_in(dir);
    update.args([
        "update-ref",
        "-m",
        "agent-host call --fetch",
        &local,
        &fetched,
        old.as_deref().unwrap_or(""),
    ]);
    let out = run(update, "git update-ref")?;
    if !out.status.success() {
        return Err(failed("git update-ref", &out).into());
    }
    Ok(Fetched::Updated(fetched))
}

fn failed(command: &str, out: &std::process::Output) -> WorkspaceError {
    WorkspaceError::Git {
        command: command.into(),
        message: stderr_of(out),
    }
}

/// The object `rev` names in `dir`'s repository, None when it names none.
fn rev_parse(dir: &Path, rev: &str) -> Result<Option<String>, WorkspaceError> {
    let mut cmd = git_in(dir);
    cmd.args(["rev-parse", "--verify", "--quiet", "--end-of-options", rev]);
    let out = run(cmd, "git rev-parse")?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok((out.status.success() && !name.is_empty()).then_some(name))
}

/// Whether `old` is an ancestor of (or is) `new`.
fn is_ancestor(dir: &Path, old: &str, new: &str) -> Result<bool, WorkspaceError> {
    let mut cmd = git_in(dir);
    cmd.args(["merge-base", "--is-ancestor", old, new]);
    let out = run(cmd, "git merge-base")?;
    match out.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(failed("git merge-base --is-ancestor", &out)),
    }
}

/// The worktree of `dir`'s repository that has the branch `full` (`refs/heads/...`)
/// checked out, if one has.
fn checked_out_in(dir: &Path, full: &str) -> Result<Option<String>, WorkspaceError> {
    let mut cmd = git_in(dir);
    cmd.args(["worktree", "list", "--porcelain"]);
    let out = run(cmd, "git worktree list")?;
    if !out.status.success() {
        return Err(failed("git worktree list", &out));
    }
    Ok(worktree_of(&String::from_utf8_lossy(&out.stdout), full))
}

/// In `git worktree list --porcelain` output, the worktree whose branch is `full`.
fn worktree_of(listing: &str, full: &str) -> Option<String> {
    let mut at = None;
    for line in listing.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            at = Some(path.to_string());
        } else if line.strip_prefix("branch ") == Some(full) {
            return at.or_else(|| Some("a worktree".into()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_git_apply_names_are_found() {
        let err = "error: patch failed: shared.txt:1\nerror: shared.txt: patch does not apply\nerror: new.txt: already exists in working directory\nerror: gone.txt: No such file or directory";
        assert_eq!(
            conflicting_files(err),
            ["shared.txt", "new.txt", "gone.txt"]
        );
    }

    #[test]
    fn the_worktree_that_has_a_branch_checked_out_is_found() {
        let listing = "worktree /a\nHEAD 1111\nbranch refs/heads/main\n\nworktree /b c\nHEAD 2222\nbranch refs/heads/agent-host/x\n\nworktree /d\nHEAD 3333\ndetached\n";
        assert_eq!(
            worktree_of(listing, "refs/heads/agent-host/x").as_deref(),
            Some("/b c")
        );
        assert_eq!(worktree_of(listing, "refs/heads/agent-host"), None);
    }
}
