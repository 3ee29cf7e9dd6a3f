//! Running the `git` program for the host, in a workspace the agent can write.
//!
//! The agent owns its workspace's `.git`: it may write the repository's configuration, its
//! hooks and its `.gitattributes`, and git runs programs named there (`core.fsmonitor`, hooks,
//! `filter.*`, diff drivers). The host runs git in that folder outside the sandbox, so every
//! call here pins what would let the workspace run a program or point git elsewhere:
//!
//! - `GIT_DIR`, `GIT_COMMON_DIR`, `GIT_WORK_TREE` and `GIT_OBJECT_DIRECTORY` name the
//!   workspace's own folders (a `core.worktree`, `commondir` or gitfile written by the agent
//!   is not followed); the host's own `GIT_*` variables are not passed on;
//! - `core.fsmonitor`, `core.hooksPath` (no hook runs), signing, and every `filter.*` driver
//!   the repository's own configuration defines are overridden on the command line, which wins
//!   over the repository's configuration; diffs run with `--no-ext-diff --no-textconv`;
//! - the system's and the host user's configuration are not read (`GIT_CONFIG_NOSYSTEM`,
//!   `GIT_CONFIG_GLOBAL=/dev/null`), nor files of ignore rules and attributes other than the
//!   workspace's own ([`WORKSPACE_PINNED`]);
//! - everything in `.git` must be a regular file, a real folder or a socket, the folders git
//!   writes through real folders inside the workspace ([`Git::check_contained`]): git follows
//!   links there (a link to the source repository's `refs` would make the host's commit move
//!   the source's branches; a linked reflog gets the host's lines);
//! - each call is stopped after [`GIT_TIMEOUT`].

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::deadline::Deadline;
use super::WorkspaceError;

/// Configuration every host-side git call overrides.
const PINNED: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "core.quotePath=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "color.ui=false",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
];

/// Configuration the host's git calls in a workspace override besides [`PINNED`]: the files
/// of ignore rules and attributes beyond the workspace's own (`.gitignore`, `.git/info/`),
/// which git otherwise reads from the host user's home (`~/.config/git/ignore`) or from
/// wherever the agent's configuration points (a host file, a fifo that never ends).
const WORKSPACE_PINNED: &[&str] = &[
    "core.excludesFile=/dev/null",
    "core.attributesFile=/dev/null",
];

/// The variables of the host's environment git would follow instead of its arguments.
const CLEARED_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_EXTERNAL_DIFF",
    "GIT_EDITOR",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_TRACE",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
];

/// The `git` program, run in one folder.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    /// The folder git runs in (`-C`).
    dir: PathBuf,
    /// The workspace's checkout, when `dir` is one the agent can write: its git folders are
    /// pinned and its filters overridden.
    workspace: Option<PathBuf>,
    /// Configuration overrides (name, value): of this repository's own filter drivers, and
    /// any a caller adds; given to git as `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`.
    filters: Vec<(String, String)>,
    /// A git folder of the host's used in place of the workspace's `.git` ([`Git::host_owned`]).
    git_dir: Option<PathBuf>,
    /// The objects folder, when not the git folder's own ([`Git::host_owned`]).
    objects: Option<PathBuf>,
    /// An index other than the repository's own.
    index: Option<PathBuf>,
    env: Vec<(String, String)>,
    /// The user (uid, gid) git runs as: the workspace's owner, when the host (root) gave it
    /// to the user its agents run as (`sandbox_user`), so that what git writes there stays
    /// the agent's to write.
    user: Option<(u32, u32)>,
    /// The host user's own configuration is read (its ignore rules, its filters such as
    /// git-lfs's): for git on the source repository's files ([`Git::over_source`]), which
    /// are the host user's, never for a workspace's.
    host_config: bool,
}

impl Git {
    /// git in a folder the host trusts (the source repository).
    pub(crate) fn trusted(dir: &Path) -> Git {
        Git {
            dir: dir.to_path_buf(),
            workspace: None,
            filters: Vec::new(),
            git_dir: None,
            objects: None,
            index: None,
            env: Vec::new(),
            user: None,
            host_config: false,
        }
    }

    /// git in a workspace's checkout (the agent may have written its `.git`): checked to
    /// be contained, with the repository's own filter drivers overridden.
    pub(crate) fn workspace(checkout: &Path) -> Result<Git, WorkspaceError> {
        Git::fresh_workspace(checkout)?.with_own_filters()
    }

    /// The same git with the overrides of the filter drivers the repository's configuration
    /// defines now (one git process reads them).
    pub(crate) fn with_own_filters(mut self) -> Result<Git, WorkspaceError> {
        self.filters = self.own_filters()?;
        Ok(self)
    }

    /// The same git with `filters` as its overrides (as [`Git::filter_overrides`] gave them
    /// for the configuration the repository has now).
    pub(crate) fn with_filters(mut self, filters: Vec<(String, String)>) -> Git {
        self.filters = filters;
        self
    }

    /// The configuration overrides of this git (of the repository's own filters, from
    /// [`Git::workspace`]).
    pub(crate) fn filter_overrides(&self) -> &[(String, String)] {
        &self.filters
    }

    /// git in a workspace's checkout, checked to be contained, with no filter overridden:
    /// for a checkout just made by the host, before the agent ran in it (its configuration
    /// is the host's template's, which defines no filter), or before the filters are set.
    pub(crate) fn fresh_workspace(checkout: &Path) -> Result<Git, WorkspaceError> {
        let git = Git {
            dir: checkout.to_path_buf(),
            workspace: Some(checkout.to_path_buf()),
            filters: Vec::new(),
            git_dir: None,
            objects: None,
            index: None,
            env: Vec::new(),
            user: owner_of(checkout),
            host_config: false,
        };
        git.check_contained()?;
        Ok(git)
    }

    /// git on a workspace's files with a git folder of the host's, `scratch/name`, made or
    /// brought up to date here: a configuration of its own (the workspace's object format,
    /// nothing else), the workspace's ignore rules and attributes copied from its
    /// `.git/info` (regular files only, never through a link), and the workspace's objects
    /// (blobs and commits written there, its borrowed objects found through them).
    ///
    /// Why: nothing else of the agent's `.git` is read, its configuration least of all, so
    /// no program it names can run (a clean filter, on every file `git add` reads). Reading
    /// the filters it defines and overriding them is not enough while the agent may still
    /// run (a task waiting for input, a program left behind): it can swap its configuration
    /// between the read and the next git (seen: a filter run as the host's root).
    pub(crate) fn host_owned(
        checkout: &Path,
        scratch: &Path,
        name: &str,
        object_format: &str,
    ) -> Result<Git, WorkspaceError> {
        let repo = checkout.join(".git");
        let mut git =
            Git::host_owned_in(checkout, &repo, &scratch.join(name), object_format, None)?;
        git.user = owner_of(checkout);
        Ok(git)
    }

    /// git on the source repository's work tree `top` with a git folder of the host's, `dir`,
    /// in the way of [`Git::host_owned`]: `repo` is the source's (common) git folder, whose
    /// objects, ignore rules and attributes it takes, and `head` the commit its `HEAD` names
    /// (none: a branch with no commit yet). The source's configuration is not read, so a
    /// filter written into it while git runs (by an agent working there in a `shared`
    /// workspace) cannot run; the host user's own configuration is, as in any git of theirs.
    pub(crate) fn over_source(
        top: &Path,
        repo: &Path,
        dir: &Path,
        object_format: &str,
        head: Option<&str>,
    ) -> Result<Git, WorkspaceError> {
        let mut git = Git::host_owned_in(top, repo, dir, object_format, head)?;
        git.host_config = true;
        Ok(git)
    }

    /// A git folder of the host's at `dir` for the work tree `work_tree` of the repository
    /// whose git folder is `repo`; `HEAD` detached at `head`, or on an unborn branch.
    fn host_owned_in(
        work_tree: &Path,
        repo: &Path,
        dir: &Path,
        object_format: &str,
        head: Option<&str>,
    ) -> Result<Git, WorkspaceError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| WorkspaceError::Io { path, source }
        };
        for sub in ["refs", "info"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(io(dir))?;
        }
        let config = format!(
            "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = {object_format}\n"
        );
        write_if_changed(&dir.join("config"), config.as_bytes()).map_err(io(dir))?;
        let head = head.map_or_else(
            || "ref: refs/heads/host\n".to_string(),
            |c| format!("{c}\n"),
        );
        write_if_changed(&dir.join("HEAD"), head.as_bytes()).map_err(io(dir))?;
        for file in ["exclude", "attributes"] {
            let from = repo.join("info").join(file);
            let text = read_regular(&from, MAX_INFO_FILE).unwrap_or_default();
            write_if_changed(&dir.join("info").join(file), &text).map_err(io(dir))?;
        }
        Ok(Git {
            dir: work_tree.to_path_buf(),
            workspace: Some(work_tree.to_path_buf()),
            filters: Vec::new(),
            objects: Some(repo.join("objects")),
            git_dir: Some(dir.to_path_buf()),
            index: None,
            env: Vec::new(),
            user: None,
            host_config: false,
        })
    }

    /// The same git with another index file (a temporary one for the host's diffs).
    pub(crate) fn with_index(&self, index: &Path) -> Git {
        let mut g = self.clone();
        g.index = Some(index.to_path_buf());
        g
    }

    /// The same git with these `NAME=VALUE` overrides too (names of the host's, with no `=`).
    pub(crate) fn with_config(&self, pairs: &[&str]) -> Git {
        let mut g = self.clone();
        g.filters.extend(pairs.iter().map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        }));
        g
    }

    /// The same git with these variables set (author and committer).
    pub(crate) fn with_env(&self, env: &[(&str, &str)]) -> Git {
        let mut g = self.clone();
        g.env
            .extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        g
    }

    /// Fails when the workspace's `.git` or the folders git writes through are links or not
    /// folders, the checkout's git folder points elsewhere (`commondir`), or anything in
    /// `.git` is other than a file or a folder ([`only_files_and_folders`]).
    pub(crate) fn check_contained(&self) -> Result<(), WorkspaceError> {
        let Some(top) = &self.workspace else {
            return Ok(());
        };
        let dot_git = top.join(".git");
        for sub in ["", "objects", "refs", "refs/heads", "refs/heads/agent-host"] {
            let p = if sub.is_empty() {
                dot_git.clone()
            } else {
                dot_git.join(sub)
            };
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_dir() => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::NotFound && sub.contains("agent-host") => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && sub.is_empty() => {
                    return Err(WorkspaceError::GitFolderMissing { path: p })
                }
                _ => return Err(WorkspaceError::Tampered { path: p }),
            }
        }
        if dot_git.join("commondir").exists() {
            return Err(WorkspaceError::Tampered {
                path: dot_git.join("commondir"),
            });
        }
        only_files_and_folders(&dot_git)
    }

    /// `filter.NAME.clean` (and the rest) emptied for every filter the repository's own configuration
    /// (and what it includes) defines: the agent may have written it.
    fn own_filters(&self) -> Result<Vec<(String, String)>, WorkspaceError> {
        let out = self.output_allow(
            [
                "config",
                "--show-scope",
                "--name-only",
                "--get-regexp",
                r"^filter\.",
            ],
            &[1],
        )?;
        let mut names: Vec<String> = String::from_utf8_lossy(&out)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .filter(|(scope, _)| matches!(*scope, "local" | "worktree"))
            .filter_map(|(_, key)| {
                let rest = key.strip_prefix("filter.")?;
                Some(rest.rsplit_once('.')?.0.to_string())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names
            .iter()
            .flat_map(|n| {
                ["clean", "smudge", "process"]
                    .iter()
                    .map(move |k| (format!("filter.{n}.{k}"), String::new()))
                    .chain(std::iter::once((
                        format!("filter.{n}.required"),
                        "false".to_string(),
                    )))
            })
            .collect())
    }

    /// The command, not started.
    pub(crate) fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        for v in CLEARED_ENV {
            cmd.env_remove(v);
        }
        cmd.env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_PAGER", "cat")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("LC_ALL", "C");
        if let Some(top) = &self.workspace {
            let dot_git = self.git_dir.clone().unwrap_or_else(|| top.join(".git"));
            // Nor the host user's own configuration: a filter it defines (git-lfs's) would
            // run on files and settings the agent wrote.
            let objects = self
                .objects
                .clone()
                .unwrap_or_else(|| dot_git.join("objects"));
            if !self.host_config {
                cmd.env("GIT_CONFIG_GLOBAL", "/dev/null");
            }
            cmd.env("GIT_DIR", &dot_git)
                .env("GIT_COMMON_DIR", &dot_git)
                .env("GIT_WORK_TREE", top)
                .env("GIT_OBJECT_DIRECTORY", objects);
        }
        if let Some(index) = &self.index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some((uid, gid)) = self.user {
            // The standard library forks (rather than `posix_spawn`s) to change the user: a
            // cost at a turn's end of a sandbox user's workspace only.
            use std::os::unix::process::CommandExt;
            // The host's home and configuration are not that user's to read (git stops at
            // a configuration file it may not read): none, and a home in the workspace's
            // folder, which holds no configuration.
            let home = self
                .workspace
                .as_deref()
                .and_then(Path::parent)
                .unwrap_or(&self.dir);
            cmd.uid(uid)
                .gid(gid)
                .current_dir(&self.dir)
                .env("HOME", home)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env_remove("XDG_CONFIG_HOME");
        }
        cmd.arg("-C").arg(&self.dir);
        let own = (self.workspace.is_some() && !self.host_config).then_some(WORKSPACE_PINNED);
        for c in PINNED.iter().chain(own.into_iter().flatten()) {
            cmd.arg("-c").arg(c);
        }
        // Through the environment, where a name and its value come apart: `-c NAME=VALUE`
        // splits at the first `=`, so a filter the agent named `a=b` would set `filter.a`
        // and leave its own `filter.a=b.clean` in force (seen: run on the host as root).
        cmd.env("GIT_CONFIG_COUNT", self.filters.len().to_string());
        for (i, (k, v)) in self.filters.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), k)
                .env(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
        cmd.args(args);
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs git; its standard output when it exits 0.
    pub(crate) fn output<I, S>(&self, args: I) -> Result<Vec<u8>, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.output_allow(args, &[])
    }

    /// Runs git; its standard output when it exits 0 or with one of `ok_codes`.
    pub(crate) fn output_allow<I, S>(
        &self,
        args: I,
        ok_codes: &[i32],
    ) -> Result<Vec<u8>, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.output_checked(args, |code, _| ok_codes.contains(&code))
    }

    /// Runs git; its standard output when it exits 0 or when `ok(code, stderr)` takes its
    /// failure.
    pub(crate) fn output_checked<I, S>(
        &self,
        args: I,
        ok: impl Fn(i32, &str) -> bool,
    ) -> Result<Vec<u8>, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> = args
            .into_iter()
            .map(|a| a.as_ref().to_os_string())
            .collect();
        let child = self
            .command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| WorkspaceError::GitMissing(e.to_string()))?;
        let deadline = Deadline::watch(child.id(), GIT_TIMEOUT);
        let out = child.wait_with_output();
        if deadline.passed() {
            return Err(timed_out(&args));
        }
        let out = out.map_err(|e| WorkspaceError::Io {
            path: self.dir.clone(),
            source: e,
        })?;
        let code = out.status.code().unwrap_or(-1);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.success() || (code >= 0 && ok(code, &stderr)) {
            return Ok(out.stdout);
        }
        Err(WorkspaceError::Git {
            command: describe(&args),
            message: stderr.trim().to_string(),
        })
    }

    /// Runs git; its standard output as text without the final newline.
    pub(crate) fn text<I, S>(&self, args: I) -> Result<String, WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = self.output(args)?;
        Ok(String::from_utf8_lossy(&out).trim_end().to_string())
    }

    /// Runs git and reads at most `limit` bytes of its output (then stops it): the bytes
    /// and whether there was more.
    pub(crate) fn output_limited<I, S>(
        &self,
        args: I,
        limit: usize,
    ) -> Result<(Vec<u8>, bool), WorkspaceError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<std::ffi::OsString> = args
            .into_iter()
            .map(|a| a.as_ref().to_os_string())
            .collect();
        let mut child = self
            .command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| WorkspaceError::GitMissing(e.to_string()))?;
        let deadline = Deadline::watch(child.id(), GIT_TIMEOUT);
        let read = read_limited(child.stdout.take(), limit);
        let waited = match &read {
            Ok((_, false)) => Some(child.wait_with_output()),
            _ => {
                // The rest is not wanted (or cannot be read): stop git rather than read it.
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        };
        if deadline.passed() {
            return Err(timed_out(&args));
        }
        let io_error = |e| WorkspaceError::Io {
            path: self.dir.clone(),
            source: e,
        };
        let (mut buf, more) = read.map_err(io_error)?;
        let Some(waited) = waited else {
            buf.truncate(limit);
            return Ok((buf, more));
        };
        let out = waited.map_err(io_error)?;
        if !out.status.success() {
            return Err(WorkspaceError::Git {
                command: describe(&args),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok((buf, false))
    }
}

/// The largest ignore-rules or attributes file of a workspace's `.git/info` the host copies.
const MAX_INFO_FILE: u64 = 1 << 20;

/// The bytes of the regular file `path` (never through a link, never a fifo), when it is
/// at most `max` bytes long.
fn read_regular(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let m = file.metadata().ok()?;
    if !m.is_file() || m.len() > max {
        return None;
    }
    let mut text = Vec::new();
    file.take(max).read_to_end(&mut text).ok()?;
    Some(text)
}

/// Writes `text` to `path` (a file of the host's) unless it already holds it: aside and
/// renamed, so a git reading it meanwhile sees the old text or the new one.
fn write_if_changed(path: &Path, text: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    let tmp = path.with_extension(format!("new.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Fails when anything below `dir` is other than a regular file, a folder or a socket (git's
/// own file-system monitor leaves one there; nothing opens a socket as a file). git follows
/// links in its own folder wherever it reads or writes: it appends to a reflog through a
/// link (a `logs/HEAD` linked to a file of the host's gets a line at each host commit),
/// writes a new object into a linked `objects/ab`, reads a linked `packed-refs` or
/// `objects/info/alternates` (another repository's refs and objects, served by `git fetch`)
/// or a linked configuration; and a fifo or a device it opens blocks it or never ends.
/// Walks every folder once; the entries' types come with their names (no `stat` each).
fn only_files_and_folders(dir: &Path) -> Result<(), WorkspaceError> {
    use std::os::unix::fs::FileTypeExt;
    let tampered = |path: PathBuf| WorkspaceError::Tampered { path };
    let entries = std::fs::read_dir(dir).map_err(|_| tampered(dir.to_path_buf()))?;
    for entry in entries {
        let entry = entry.map_err(|_| tampered(dir.to_path_buf()))?;
        let kind = entry.file_type().map_err(|_| tampered(entry.path()))?;
        if kind.is_dir() {
            only_files_and_folders(&entry.path())?;
        } else if !kind.is_file() && !kind.is_socket() {
            return Err(tampered(entry.path()));
        }
    }
    Ok(())
}

/// At most `limit` bytes of `out` (git's standard output), and whether it had more.
fn read_limited(
    out: Option<std::process::ChildStdout>,
    limit: usize,
) -> std::io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    let Some(out) = out else {
        return Ok((buf, false));
    };
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    out.take(cap).read_to_end(&mut buf)?;
    let more = buf.len() > limit;
    Ok((buf, more))
}

/// How long a git call of the host's may run. The largest repositories' calls take seconds;
/// one that runs on is stuck (a fifo or a file that never ends, named by a configuration the
/// agent wrote, e.g. `include.path` or `core.excludesFile`), and the turn's end waits on it.
const GIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// The error of a git call stopped at [`GIT_TIMEOUT`].
fn timed_out(args: &[std::ffi::OsString]) -> WorkspaceError {
    WorkspaceError::Git {
        command: describe(args),
        message: format!(
            "stopped after {} s without an end (a file its configuration names may never end)",
            GIT_TIMEOUT.as_secs()
        ),
    }
}

/// The owner of the workspace's `.git` when the host runs as root and gave the workspace to
/// another user (the agent, which runs as that user, cannot give it away again).
fn owner_of(checkout: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid();
    if !me.is_root() {
        return None;
    }
    let m = std::fs::symlink_metadata(checkout.join(".git")).ok()?;
    (m.uid() != me.as_raw()).then(|| (m.uid(), m.gid()))
}

fn describe(args: &[std::ffi::OsString]) -> String {
    let words: Vec<String> = args
        .iter()
        .take(3)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    format!("git {}", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_git_reads_neither_the_system_nor_the_users_configuration() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join(".git/objects")).unwrap();
        std::fs::create_dir_all(t.path().join(".git/refs/heads")).unwrap();
        let git = Git::fresh_workspace(t.path()).unwrap();
        let cmd = git.command(["status"]);
        let env: Vec<_> = cmd.get_envs().collect();
        for (name, value) in [
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
        ] {
            assert!(
                env.contains(&(OsStr::new(name), Some(OsStr::new(value)))),
                "{name}"
            );
        }
    }
}
