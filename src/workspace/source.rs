//! The source repository a task's folder lies in, found with one `git rev-parse`.
//!
//! A first turn needs four answers from the source: whether the folder is in a work tree and
//! its top folder, the git folder its worktrees share (whose objects the workspace borrows),
//! its object format, and the commit of the base. `git rev-parse` gives all four in one
//! process, where one process each cost about 3 ms apiece in a small repository, most of
//! making its workspace.

use std::path::{Path, PathBuf};

use super::git::Git;
use super::WorkspaceError;

/// A repository found around a task's folder.
#[derive(Debug, Clone)]
pub(crate) struct Source {
    /// Its top folder (canonical).
    pub(crate) top: PathBuf,
    /// The git folder its worktrees share (canonical).
    pub(crate) git_dir: PathBuf,
    /// The git folder of this work tree (its index, its `HEAD`): `git_dir`, or the folder
    /// of a linked worktree.
    pub(crate) own_git_dir: PathBuf,
    /// `sha1` or `sha256`.
    pub(crate) object_format: String,
    /// The commit the base asked for names, when it names one.
    commit: Option<String>,
}

/// True for a base name that is not a plain name of one commit: refused before git is
/// asked. A base is a branch, a tag, a full ref name (`refs/heads/x`), `HEAD` or an object
/// name (as a ref name, by `git check-ref-format`'s rules, one level allowed), followed by
/// any ancestry steps (`~`, `~N`, `^`, `^N`). Everything else `git rev-parse` understands is
/// refused: an exclusion (`^main`, which rev-parse answers with `^<commit>`, which nothing
/// can check out), a range (`a..b`, `a...b`), a reflog entry (`@{1}`, `@{-1}`), a search
/// (`:/text`), a path in a commit (`v1:file`), peeling (`^{…}`), and anything git could take
/// for an option (`-x`).
pub(crate) fn unusable(name: &str) -> bool {
    let (base, steps) = name.split_at(name.find(['~', '^']).unwrap_or(name.len()));
    !ref_name(base) || !ancestry_steps(steps)
}

/// Whether `name` is a ref name by `git check-ref-format --allow-onelevel`'s rules (which
/// also keep out `..`, `@{`, `:` and every other piece of revision syntax).
fn ref_name(name: &str) -> bool {
    let bad_char =
        |c: char| c.is_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\');
    !name.is_empty()
        && name != "@"
        && !name.starts_with('-')
        && !name.ends_with('.')
        && !name.contains("..")
        && !name.contains("@{")
        && !name.chars().any(bad_char)
        && name
            .split('/')
            .all(|part| !part.is_empty() && !part.starts_with('.') && !part.ends_with(".lock"))
}

/// Whether `steps` is a sequence of ancestry steps: `~` or `^`, each with an optional count.
fn ancestry_steps(steps: &str) -> bool {
    let mut chars = steps.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '~' && c != '^' {
            return false;
        }
        while chars.next_if(char::is_ascii_digit).is_some() {}
    }
    true
}

/// The git folder that holds `dir` (canonical), if one does: a folder named `.git`, or one
/// laid out as a git folder (a `HEAD` file beside `objects` and `refs` folders: a bare
/// repository, a worktree's or a submodule's git folder).
///
/// Why: git does not take such a folder for a work tree, so a task sent there would work in
/// it directly, shared, and could write the repository's hooks, configuration and refs,
/// which git (the host's, the caller's) runs or follows outside any sandbox.
pub fn git_folder_holding(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| {
            a.file_name().is_some_and(|n| n == ".git")
                || (a.join("HEAD").is_file()
                    && a.join("objects").is_dir()
                    && a.join("refs").is_dir())
        })
        .map(Path::to_path_buf)
}

impl Source {
    /// The repository whose work tree `dir` is in, and the commit of `base_ref` (or `HEAD`)
    /// in it; `None` outside a work tree, in a git folder, or in a folder the repository
    /// ignores (a build folder's scratch space is not its work).
    pub(crate) fn find(
        dir: &Path,
        base_ref: Option<&str>,
    ) -> Result<Option<Source>, WorkspaceError> {
        if !dir.is_dir() || !may_be_in_work_tree(dir) {
            return Ok(None);
        }
        let name = base_ref.filter(|r| !unusable(r)).unwrap_or("HEAD");
        let spec = format!("{name}^{{commit}}");
        let git = Git::trusted(dir);
        // Exit 1 when the base names no commit (the other answers are printed before it);
        // 128, with `false` or nothing, in a git folder or outside a repository.
        let out = git.output_allow(
            [
                "rev-parse",
                "--is-inside-work-tree",
                "--show-toplevel",
                "--path-format=absolute",
                "--git-common-dir",
                "--git-dir",
                "--show-object-format",
                "--verify",
                "--quiet",
                "--end-of-options",
                &spec,
            ],
            &[1, 128],
        )?;
        let out = String::from_utf8_lossy(&out);
        let mut lines = out.lines();
        let (Some("true"), Some(top), Some(git_dir), Some(own_git_dir), Some(format)) = (
            lines.next(),
            lines.next(),
            lines.next(),
            lines.next(),
            lines.next(),
        ) else {
            return Ok(None);
        };
        let top = canonical(top);
        // The top folder itself is never ignored, so git is not asked there.
        let at_top = std::fs::canonicalize(dir).is_ok_and(|d| d == top);
        if !at_top && ignored(&git)? {
            return Ok(None);
        }
        Ok(Some(Source {
            top,
            git_dir: canonical(git_dir),
            own_git_dir: canonical(own_git_dir),
            object_format: format.to_string(),
            // One object name, nothing else (`--verify` prints one line per revision).
            commit: lines
                .next()
                .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_hexdigit()))
                .map(str::to_string),
        }))
    }

    /// The base as named (`HEAD` when none was) and its commit, or why there is none: the
    /// name is not a commit of this repository, or the repository has no commit yet.
    pub(crate) fn base(&self, base_ref: Option<&str>) -> Result<(String, String), WorkspaceError> {
        let name = base_ref.unwrap_or("HEAD");
        let bad = || match base_ref {
            Some(r) => WorkspaceError::BadRef {
                base_ref: r.to_string(),
                repo: self.top.clone(),
            },
            None => WorkspaceError::NoCommits {
                repo: self.top.clone(),
            },
        };
        if unusable(name) {
            return Err(bad());
        }
        if let Some(commit) = &self.commit {
            return Ok((name.to_string(), commit.clone()));
        }
        // No base named and `HEAD` names no commit: nothing is committed on the branch (a
        // fresh `git init`), whatever other branches hold; no git process needed to say so.
        if base_ref.is_none() {
            return Err(bad());
        }
        let any = Git::trusted(&self.top).output(["rev-list", "-n", "1", "--all"])?;
        if any.is_empty() {
            return Err(WorkspaceError::NoCommits {
                repo: self.top.clone(),
            });
        }
        Err(bad())
    }
}

impl Source {
    /// The commit `HEAD` names, if it names one.
    pub(crate) fn head(&self) -> Result<Option<String>, WorkspaceError> {
        let out = Git::trusted(&self.top)
            .output_allow(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], &[1])?;
        let head = String::from_utf8_lossy(&out).trim().to_string();
        Ok((!head.is_empty() && head.chars().all(|c| c.is_ascii_hexdigit())).then_some(head))
    }

    /// Why `HEAD` names no commit: the repository has none at all, or `HEAD` is on a branch
    /// that has none while others have (two git processes, asked only then).
    pub(crate) fn why_no_commit(&self) -> WorkspaceError {
        let git = Git::trusted(&self.top);
        let any = git.output(["rev-list", "-n", "1", "--all"]);
        if !any.is_ok_and(|out| !out.is_empty()) {
            return WorkspaceError::NoCommits {
                repo: self.top.clone(),
            };
        }
        let branch = git
            .output_allow(["symbolic-ref", "--quiet", "--short", "HEAD"], &[1])
            .map(|out| String::from_utf8_lossy(&out).trim().to_string())
            .unwrap_or_default();
        WorkspaceError::UnbornHead {
            repo: self.top.clone(),
            branch: if branch.is_empty() {
                "HEAD".into()
            } else {
                branch
            },
        }
    }
}

fn canonical(path: &str) -> PathBuf {
    let path = PathBuf::from(path);
    std::fs::canonicalize(&path).unwrap_or(path)
}

/// Whether `dir` or a folder above it has a `.git` entry (a folder, or a file naming one):
/// git finds a work tree only then (the host's own `GIT_*` variables are not passed on), so
/// outside any repository no git process is started, where one ran at every task's start
/// (about 1.5 ms of CPU). A relative `dir` is left to git.
pub(super) fn may_be_in_work_tree(dir: &Path) -> bool {
    !dir.is_absolute()
        || dir
            .ancestors()
            .any(|d| d.join(".git").symlink_metadata().is_ok())
}

/// True when git ignores the folder it runs in.
fn ignored(git: &Git) -> Result<bool, WorkspaceError> {
    let out = git.output_allow(["check-ignore", "--verbose", "--non-matching", "."], &[1])?;
    // `::\t.` (no rule) when not ignored; `SOURCE:LINE:PATTERN\t.` when ignored.
    let text = String::from_utf8_lossy(&out);
    Ok(text.lines().any(|l| !l.starts_with("::")))
}
