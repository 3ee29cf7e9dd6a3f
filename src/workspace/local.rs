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
/// repository `dir` is in (replacing it), sending `header` (`Authorization: ...`) with each
/// request; the fetched commit.
pub fn fetch_branch(
    dir: &Path,
    url: &str,
    branch: &str,
    header: Option<&str>,
) -> Result<String, WorkspaceError> {
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
    let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
    cmd.args(["fetch", "--no-tags", "--", url, &refspec]);
    let out = run(cmd, "git fetch")?;
    if !out.status.success() {
        return Err(WorkspaceError::Git {
            command: "git fetch".into(),
            message: stderr_of(&out),
        });
    }
    let mut rev = git_in(dir);
    rev.args(["rev-parse", "--verify", &format!("refs/heads/{branch}")]);
    let out = run(rev, "git rev-parse")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
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
}
