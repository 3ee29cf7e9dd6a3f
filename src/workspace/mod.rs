//! A git workspace per context: made once from a source repository at a base, reused by the
//! context's follow-ups; at a turn's end, its change from the base (files and a patch) and a
//! commit of it on the context's branch.
//!
//! The engine calls this module at a turn's start ([`Workspaces::for_turn`]) and end
//! ([`Workspaces::end_turn`]); the runner only mounts the folders
//! the sandbox policy names. Like the runner, this module runs programs: the `git` program
//! itself, so that every repository layout, attribute, ignore rule and object format git
//! understands is handled as git handles it, which hand-written plumbing (or a partial
//! reimplementation of git in a crate) would not do; each call is hardened against a
//! workspace whose `.git` the agent wrote ([`git`]).
//!
//! # The mechanism: a clone that borrows the source's objects
//!
//! A workspace is what `git clone --shared --no-checkout` of the source repository makes, then
//! a checkout of the base commit on a new branch `agent-host/<context>` ([`branch_name`]): a
//! repository with its own `.git` (its own index, refs, configuration and new objects) that
//! borrows the source's objects read-only through `objects/info/alternates`. It is made with
//! `git init` and that one line rather than by `git clone` ([`make`] says why). The agent can
//! write and commit in its workspace while the source repository, its refs and its other
//! worktrees are never written (the sandbox mounts the source read-only, and nothing the agent
//! does in its workspace reaches the source's `.git`). A `git worktree add` would be as fast to
//! make, but it writes into the source's `.git` (the worktree's `HEAD`, index and branch live
//! there, and its commits land in the source's object store and refs), so the agent would need
//! the source's `.git` writable, and with it every branch and every other worktree.
//!
//! Making a workspace costs about what `git worktree add` costs: both write every file of the
//! checkout. A turn's end stages the files once into a temporary copy of the index
//! ([`Workspaces::end_turn`]; `git add -A`, which also finds new files and writes their blobs)
//! and takes from it, side by side, the change against the base and the commit. Each step is
//! one `git` process, so in a small repository the processes' start is most of the cost.
//! `benches/workspace.rs` measures both against plain git; the figures are in
//! `docs/performance.md`.
//!
//! Caveat of alternates: the workspace does not own the objects it borrows. If the source
//! repository drops the base commit (its branch deleted or rewound) and then runs `git gc`
//! (or `git prune`) after the expiry, the workspace's history loses objects and git reports
//! them missing. The objects the agent writes and the host's commits are the workspace's own.
//! `git repack -a -d` in a workspace makes it independent (at the cost of a copy).

mod changes;
mod deadline;
mod git;
pub mod local;
mod make;
mod seed;
pub mod serve;
pub mod settings;
mod source;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

pub use changes::Changes;
pub use settings::{CommitMode, WorkspaceConfig, WorkspaceMode};
pub use source::git_folder_holding;

use git::Git;
use source::Source;

/// Why a workspace could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("baseRef '{base_ref}' is not a branch, tag or commit of the repository {repo}")]
    BadRef { base_ref: String, repo: PathBuf },
    #[error("{dir} is not in a git repository (workspace = \"isolated\" needs one)")]
    NotARepository { dir: PathBuf },
    #[error("the repository {repo} has no commits yet: a workspace starts from a commit")]
    NoCommits { repo: PathBuf },
    #[error("the HEAD of the repository {repo} is on the branch '{branch}', which has no commits yet (other branches have): name the branch, tag or commit to start from with metadata.baseRef")]
    UnbornHead { repo: PathBuf, branch: String },
    #[error("the workspace's git folder {path} is missing (removed during a turn?): no change is taken and no commit made there")]
    GitFolderMissing { path: PathBuf },
    #[error(
        "too many workspaces ({max}, {setting}): a new context is refused until one is removed"
    )]
    TooMany { max: usize, setting: String },
    #[error(
        "the workspace's {path} is a link, a special file, or not a folder where one is expected: the host does not run git through it"
    )]
    Tampered { path: PathBuf },
    #[error("'{0}' is not of the form \"Name <email>\"")]
    BadAuthor(String),
    #[error("the git program could not be run: {0}")]
    GitMissing(String),
    #[error("{command} failed: {message}")]
    Git { command: String, message: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the workspace record {path} cannot be read: {message}")]
    Record { path: PathBuf, message: String },
}

impl WorkspaceError {
    /// True when the caller's input is at fault (a bad `baseRef`, no repository, no commit).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            WorkspaceError::BadRef { .. }
                | WorkspaceError::NotARepository { .. }
                | WorkspaceError::NoCommits { .. }
                | WorkspaceError::UnbornHead { .. }
        )
    }

    /// What a caller may be told of an error at a turn's end, without the host's paths:
    /// the workspace's git folder gone or tampered with, else a pointer to the host's log.
    pub fn for_client(&self, checkout: &Path) -> String {
        match self {
            WorkspaceError::GitFolderMissing { .. } => "the workspace's git folder (.git) is gone (removed during the turn): no change was taken and no commit made; the workspace's files are as the agent left them".into(),
            WorkspaceError::Tampered { path } => format!(
                "the workspace's {} is a link, a special file, or not a folder: the host runs no git through it, so no change was taken and no commit made",
                path.strip_prefix(checkout).unwrap_or(Path::new(".git")).display()
            ),
            _ => "the change could not be taken from the workspace (see the host's log)".into(),
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError + '_ {
    move |source| WorkspaceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One context's workspace, as recorded beside its checkout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    pub context_id: String,
    /// The source repository's top folder.
    pub source: PathBuf,
    /// The source's git folder (shared by its worktrees): the objects the workspace borrows.
    pub source_git: PathBuf,
    /// The base as asked (`metadata.baseRef`), or `HEAD`.
    pub base_ref: String,
    pub base_commit: String,
    pub branch: String,
    /// The source had uncommitted changes when the workspace was made (they are not in it).
    pub source_dirty: bool,
    /// The workspace's folder (its checkout is `repo/` in it).
    #[serde(skip)]
    pub dir: PathBuf,
}

impl Workspace {
    /// The checkout the agent works in.
    pub fn checkout(&self) -> PathBuf {
        self.dir.join("repo")
    }

    /// The folder in the workspace for `cwd`, a folder in the source repository (the same
    /// path below the top); the checkout's top for a folder outside it, or for one the
    /// workspace does not hold as a real folder. Created when missing (a folder with no
    /// tracked file).
    pub fn map_cwd(&self, cwd: &Path) -> PathBuf {
        let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let Ok(rel) = cwd.strip_prefix(&self.source) else {
            return self.checkout();
        };
        match folder_inside(&self.checkout(), rel) {
            Ok(mapped) => mapped,
            Err(e) => {
                tracing::warn!(folder = %rel.display(), error = %e,
                    "the turn's folder is not a real folder of the workspace; the turn runs at its top");
                self.checkout()
            }
        }
    }

    fn scratch(&self) -> PathBuf {
        self.dir.join("scratch")
    }

    /// The object folders git in the checkout reads: the source's (named by the checkout's
    /// `objects/info/alternates`), then those the source's own `objects/info/alternates`
    /// names (a source made by `git clone --shared` or `--reference` borrows its objects
    /// too) and, one level further, theirs: each an existing folder, the absolute lines and
    /// the relative ones (to the objects folder that names them) only, at most
    /// [`MAX_BORROWED`] in all. A sandbox shows them read-only.
    pub fn borrowed_objects(&self) -> Vec<PathBuf> {
        let mut found = vec![self.source_git.join("objects")];
        let mut level = found.clone();
        for _ in 0..2 {
            let mut next = Vec::new();
            for objects in &level {
                for alt in alternates_of(objects) {
                    if found.len() >= MAX_BORROWED {
                        return found;
                    }
                    if !found.contains(&alt) {
                        found.push(alt.clone());
                        next.push(alt);
                    }
                }
            }
            level = next;
        }
        found
    }
}

/// The most object folders a workspace's sandbox shows ([`Workspace::borrowed_objects`]).
pub const MAX_BORROWED: usize = 8;

/// The existing folders the `info/alternates` of the objects folder `objects` names
/// (canonical): a regular file of at most 64 KiB, never read through a link; its comment
/// lines and quoted lines (git's C-style quoting, rare) are passed over.
fn alternates_of(objects: &Path) -> Vec<PathBuf> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const LARGEST: u64 = 64 * 1024;
    let file = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(objects.join("info/alternates"));
    let Ok(file) = file else {
        return Vec::new();
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut text = String::new();
    if file.take(LARGEST).read_to_string(&mut text).is_err() {
        return Vec::new();
    }
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('"'))
        .filter_map(|l| std::fs::canonicalize(objects.join(l)).ok())
        .filter(|p| p.is_dir())
        .collect()
}

/// `top` joined with `rel`, each folder on the way a real folder (an agent may have replaced
/// one by a link to a folder of the host's, which the sandbox would then give it writable),
/// the missing ones created one at a time: nothing is entered or made through a link.
fn folder_inside(top: &Path, rel: &Path) -> std::io::Result<PathBuf> {
    let mut at = top.to_path_buf();
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return Err(std::io::ErrorKind::InvalidInput.into());
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(std::io::ErrorKind::NotADirectory.into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)?,
            Err(e) => return Err(e),
        }
    }
    Ok(at)
}

/// A workspace in the listing, with its disk use.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceInfo {
    #[serde(flatten)]
    pub workspace: Workspace,
    pub path: PathBuf,
    pub bytes: u64,
}

/// The record's file name in a workspace's folder.
const RECORD: &str = "workspace.json";

/// The workspaces of one host, in one folder.
#[derive(Debug)]
pub struct Workspaces {
    root: PathBuf,
    config: WorkspaceConfig,
    identity: (String, String),
    /// What the workspaces of every adapter of the host share: the limit counts them all.
    shared: Arc<HostWorkspaces>,
    /// The disk use of each workspace folder as last measured, None when it changed since
    /// ([`Workspaces::refresh_gauges`]).
    sizes: Mutex<std::collections::HashMap<PathBuf, Option<u64>>>,
    /// Whether every workspace folder was measured once.
    measured: std::sync::atomic::AtomicBool,
    /// The adapter whose workspaces these are (the metrics' label).
    adapter: String,
    /// How `max_workspaces` was given (`--max-workspaces`, its variable, its file key), for
    /// the refusal at the limit ([`Workspaces::limit_named`]).
    limit_named: String,
    /// The user (uid, gid) the agents run as when it is not the host's (`sandbox_user`):
    /// each workspace is given to it when made.
    owner: Option<(u32, u32)>,
    /// The overrides of each workspace's own filters ([`Workspaces::git`]), by checkout,
    /// with the configuration text they were read from.
    filters: Mutex<std::collections::HashMap<PathBuf, KnownFilters>>,
    /// The template of the workspaces' `git init`, once made ([`make`]).
    template: Mutex<Option<PathBuf>>,
    /// New workspaces' refreshed index copies ([`seed`]).
    seeds: seed::Seeds,
    /// The host's other folders (its data, the CLI homes): like the workspaces' own, not
    /// counted as a source's uncommitted changes when they lie inside it.
    also_kept: Vec<PathBuf>,
    /// A temporary root, removed when dropped.
    _temp: Option<tempfile::TempDir>,
}

impl Workspaces {
    /// The workspaces under `config.dir`, else `default_dir`, else a temporary folder that is
    /// removed when this is dropped.
    pub fn open(
        config: &WorkspaceConfig,
        default_dir: Option<&Path>,
    ) -> Result<Workspaces, WorkspaceError> {
        let identity = config.identity()?;
        let (root, temp) = match config.dir.as_deref().or(default_dir) {
            Some(d) => {
                std::fs::create_dir_all(d).map_err(io(d))?;
                (d.to_path_buf(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("agent-host-workspaces-")
                    .tempdir()
                    .map_err(io(Path::new("/tmp")))?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let root = std::fs::canonicalize(&root).map_err(io(&root))?;
        Ok(Workspaces {
            root: root.clone(),
            config: config.clone(),
            identity,
            shared: Arc::new(HostWorkspaces {
                roots: Mutex::new(vec![root.clone()]),
                making: Mutex::new(0),
            }),
            sizes: Mutex::new(std::collections::HashMap::new()),
            measured: std::sync::atomic::AtomicBool::new(false),
            adapter: String::new(),
            limit_named: "max_workspaces".into(),
            owner: None,
            filters: Mutex::new(std::collections::HashMap::new()),
            template: Mutex::new(None),
            seeds: seed::Seeds::default(),
            also_kept: Vec::new(),
            _temp: temp,
        })
    }

    /// Gives each workspace made from now on (its checkout and the host's scratch folder) to
    /// the user `uid`, `gid` the agents run as; the host's git then runs in it as that user,
    /// so that nothing it writes there becomes the host's. The folder of the workspaces
    /// becomes passable by others (mode 0711: not listable), so that the user reaches its
    /// own; the folders above it must be passable too.
    pub fn owned_by(mut self, uid: u32, gid: u32) -> Workspaces {
        use std::os::unix::fs::PermissionsExt;
        self.owner = Some((uid, gid));
        if let Err(e) = std::fs::set_permissions(&self.root, std::fs::Permissions::from_mode(0o711))
        {
            tracing::warn!(dir = %self.root.display(), error = %e,
                "cannot let the sandbox user pass the workspaces' folder");
        }
        self
    }

    /// Counts these workspaces with the others of `host` (another adapter's of the same
    /// host) against `max_workspaces`, which bounds them together.
    pub fn counted_with(mut self, host: &Arc<HostWorkspaces>) -> Workspaces {
        host.roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.root.clone());
        self.shared = host.clone();
        self
    }

    /// What these workspaces share with other adapters' of the host ([`Self::counted_with`]).
    pub fn host(&self) -> Arc<HostWorkspaces> {
        self.shared.clone()
    }

    /// Names the host's other folders (`folders`: its data folder, the CLI homes), which,
    /// like the workspaces' own, do not make a source they lie in dirty.
    pub fn keeping(mut self, folders: &[PathBuf]) -> Workspaces {
        self.also_kept.extend(folders.iter().cloned());
        self
    }

    /// The host's folders a source may hold that are not its changes: the workspaces' own
    /// and those named by [`Workspaces::keeping`].
    fn host_folders(&self) -> Vec<PathBuf> {
        std::iter::once(self.root.clone())
            .chain(self.also_kept.iter().cloned())
            .collect()
    }

    /// The top of the git work tree the workspaces' folder lies in, if it lies in one: each
    /// checkout is then a repository nested in that one's files.
    pub fn inside_repository(&self) -> Option<PathBuf> {
        work_tree_around(&self.root)
    }

    /// Names `max_workspaces` as it was given (`--max-workspaces`, `AGENT_HOST_MAX_WORKSPACES`,
    /// `[workspace] max_workspaces`) in the refusal at the limit.
    pub fn limit_named(mut self, setting: &str) -> Workspaces {
        self.limit_named = setting.to_string();
        self
    }

    /// Names the adapter whose workspaces these are, in the metrics.
    pub fn for_adapter(mut self, adapter: &str) -> Workspaces {
        self.adapter = adapter.to_string();
        self
    }

    /// Notes that `ws` changed (a turn ended in it): its disk use is measured again at the
    /// next [`Workspaces::refresh_gauges`], not now. Walking a checkout costs as much as
    /// the turn's own diff (20 ms of CPU at 10,000 files), for a gauge nobody may read.
    pub fn changed(&self, ws: &Workspace) {
        let mut sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        sizes.insert(ws.dir.clone(), None);
    }

    /// Sets the gauges `agent_host_workspaces` and `agent_host_workspace_bytes` (how many
    /// workspaces there are and their disk use): every workspace is measured on the first
    /// call, afterwards those [`Workspaces::changed`] since. Returns both.
    pub fn refresh_gauges(&self) -> (usize, u64) {
        let mut sizes = self.sizes.lock().unwrap_or_else(|p| p.into_inner());
        if !self
            .measured
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            for d in self.folders() {
                sizes.insert(d, None);
            }
        }
        sizes.retain(|d, _| d.join(RECORD).is_file());
        for (d, n) in sizes.iter_mut().filter(|(_, n)| n.is_none()) {
            *n = Some(disk_use(d));
        }
        let (count, bytes) = (sizes.len(), sizes.values().flatten().sum::<u64>());
        drop(sizes);
        let label = self.adapter.clone();
        metrics::gauge!("agent_host_workspaces", "adapter" => label.clone()).set(count as f64);
        metrics::gauge!("agent_host_workspace_bytes", "adapter" => label).set(bytes as f64);
        (count, bytes)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn config(&self) -> &WorkspaceConfig {
        &self.config
    }

    /// Where this adapter's contexts work (as resolved at start; `auto` when unset).
    fn mode(&self) -> WorkspaceMode {
        self.config.mode.unwrap_or_default()
    }

    /// The workspace a turn of `context_id` runs in: the context's own (made now from the
    /// repository `dir` lies in, at `base_ref` or its `HEAD`, on the first turn), or `None`
    /// when the turn shares `dir` (`shared`, or `auto` outside a git repository).
    pub fn for_turn(
        &self,
        context_id: &str,
        dir: &Path,
        base_ref: Option<&str>,
    ) -> Result<Option<Workspace>, WorkspaceError> {
        if self.mode() == WorkspaceMode::Shared {
            return Ok(None);
        }
        if let Some(ws) = self.get(context_id)? {
            return Ok(Some(ws));
        }
        let Some(source) = Source::find(dir, base_ref)? else {
            return match self.mode() {
                WorkspaceMode::Isolated => Err(WorkspaceError::NotARepository {
                    dir: dir.to_path_buf(),
                }),
                _ => Ok(None),
            };
        };
        match self.create(context_id, &source, base_ref) {
            // `auto` in a repository with nothing committed yet (a fresh `git init`): there is
            // no base to start from, so the turn shares the folder, as outside a repository.
            // A `baseRef` the caller named is still refused.
            Err(WorkspaceError::NoCommits { .. })
                if self.mode() == WorkspaceMode::Auto && base_ref.is_none() =>
            {
                Ok(None)
            }
            Err(WorkspaceError::NoCommits { .. }) if base_ref.is_none() => {
                Err(source.why_no_commit())
            }
            made => made.map(Some),
        }
    }

    /// Checks, without making anything, that a first turn in `dir` at `base_ref` can have a
    /// workspace (the repository, its commits, the ref).
    pub fn check_base(&self, dir: &Path, base_ref: Option<&str>) -> Result<(), WorkspaceError> {
        if self.mode() == WorkspaceMode::Shared {
            return Ok(());
        }
        match Source::find(dir, base_ref)? {
            Some(source) => match source.base(base_ref) {
                Err(WorkspaceError::NoCommits { .. })
                    if self.mode() == WorkspaceMode::Auto && base_ref.is_none() =>
                {
                    Ok(())
                }
                Err(WorkspaceError::NoCommits { .. }) if base_ref.is_none() => {
                    Err(source.why_no_commit())
                }
                checked => checked.map(|_| ()),
            },
            None if self.mode() == WorkspaceMode::Isolated => Err(WorkspaceError::NotARepository {
                dir: dir.to_path_buf(),
            }),
            None => Ok(()),
        }
    }

    /// The context's workspace, if it has one.
    pub fn get(&self, context_id: &str) -> Result<Option<Workspace>, WorkspaceError> {
        let dir = self.root.join(folder_name(context_id));
        read_record(&dir)
    }

    /// Makes the context's workspace from the repository `source`.
    fn create(
        &self,
        context_id: &str,
        source: &Source,
        base_ref: Option<&str>,
    ) -> Result<Workspace, WorkspaceError> {
        let (base_ref, base_commit) = source.base(base_ref)?;
        let _slot = self.reserve()?;
        let tmp = self
            .root
            .join(format!(".making-{}", uuid::Uuid::new_v4().simple()));
        // Whether the source has uncommitted changes is asked while the checkout is made:
        // side by side they cost little more time than the checkout.
        let head = (base_ref == "HEAD").then_some(base_commit.as_str());
        let (asked, made) = std::thread::scope(|s| {
            let asked = s.spawn(|| source_dirty(source, head, &self.root, &self.host_folders()));
            let made = self.make_in(&tmp, source, &base_commit, &branch_name(context_id));
            let asked = asked.join().unwrap_or_else(|_| {
                Err(WorkspaceError::GitMissing(
                    "asking git about the source panicked".into(),
                ))
            });
            (asked, made)
        });
        let made = made.and(asked);
        let ws = match made {
            Ok(source_dirty) => Workspace {
                context_id: context_id.to_string(),
                source: source.top.clone(),
                source_git: source.git_dir.clone(),
                base_ref,
                base_commit,
                branch: branch_name(context_id),
                source_dirty,
                dir: self.root.join(folder_name(context_id)),
            },
            Err(e) => {
                let _ = std::fs::remove_dir_all(&tmp);
                return Err(e);
            }
        };
        let ws = self.finish(&tmp, ws)?;
        self.seeds
            .prepare(ws.checkout(), ws.scratch(), source.object_format.clone());
        Ok(ws)
    }

    /// Records the workspace made in `tmp` and moves it to its place.
    fn finish(&self, tmp: &Path, ws: Workspace) -> Result<Workspace, WorkspaceError> {
        let record = serde_json::to_vec_pretty(&ws).map_err(|e| WorkspaceError::Record {
            path: tmp.join(RECORD),
            message: e.to_string(),
        })?;
        let placed =
            std::fs::write(tmp.join(RECORD), record).and_then(|()| std::fs::rename(tmp, &ws.dir));
        if let Err(e) = placed {
            let _ = std::fs::remove_dir_all(tmp);
            // Another turn of the context made it meanwhile: that one is the context's.
            if let Some(existing) = read_record(&ws.dir)? {
                return Ok(existing);
            }
            return Err(io(&ws.dir)(e));
        }
        tracing::info!(context = %ws.context_id, base = %ws.base_commit, dir = %ws.dir.display(), "workspace made");
        // Its configuration is the template's, which defines no filter.
        if let Some(key) = config_key(&ws.checkout()) {
            self.remember_filters(ws.checkout(), key, Vec::new());
        }
        Ok(ws)
    }
}

/// Folders the host keeps in a task's working directory (attachments, long prompts): never
/// part of the change. The engine's [`crate::engine::input::HOST_DIR`].
pub const HOST_FILES: &str = ".agent-host/";

impl Workspaces {
    /// A place among the workspaces being made, or the limit's error.
    fn reserve(&self) -> Result<Slot<'_>, WorkspaceError> {
        let max = self.config.max_workspaces;
        let mut making = self.shared.making.lock().unwrap_or_else(|p| p.into_inner());
        if max > 0 && self.count_of_host() + *making >= max {
            return Err(WorkspaceError::TooMany {
                max,
                setting: self.limit_named.clone(),
            });
        }
        *making += 1;
        Ok(Slot(&self.shared.making))
    }

    /// How many workspaces the host has, of every adapter.
    fn count_of_host(&self) -> usize {
        let roots = self
            .shared
            .roots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        roots.iter().map(|r| folders_in(r).len()).sum()
    }

    fn folders(&self) -> Vec<PathBuf> {
        folders_in(&self.root)
    }
}

/// What the workspaces of every adapter one host serves share: the folders they are in and
/// those being made, which `max_workspaces` counts together.
#[derive(Debug)]
pub struct HostWorkspaces {
    roots: Mutex<Vec<PathBuf>>,
    /// Workspaces being made (counted against the limit).
    making: Mutex<usize>,
}

/// The workspace folders in `root` (those with a record).
fn folders_in(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .filter(|e| e.path().join(RECORD).is_file())
        .map(|e| e.path())
        .collect()
}

impl Workspaces {
    /// Every workspace, with its disk use.
    pub fn list(&self) -> Vec<WorkspaceInfo> {
        let mut list: Vec<WorkspaceInfo> = self
            .folders()
            .into_iter()
            .filter_map(|d| read_record(&d).ok().flatten())
            .map(|ws| WorkspaceInfo {
                path: ws.checkout(),
                bytes: disk_use(&ws.dir),
                workspace: ws,
            })
            .collect();
        list.sort_by(|a, b| a.workspace.context_id.cmp(&b.workspace.context_id));
        list
    }

    /// The disk use of every workspace, in bytes.
    pub fn disk_use(&self) -> u64 {
        disk_use(&self.root)
    }

    /// Removes the context's workspace; false when it had none.
    pub fn remove(&self, context_id: &str) -> Result<bool, WorkspaceError> {
        let dir = self.root.join(folder_name(context_id));
        if !dir.exists() {
            return Ok(false);
        }
        // Moved aside first, so that no half-removed workspace is ever taken for one.
        let aside = self
            .root
            .join(format!(".removing-{}", uuid::Uuid::new_v4().simple()));
        std::fs::rename(&dir, &aside).map_err(io(&dir))?;
        let mut known = self.filters.lock().unwrap_or_else(|p| p.into_inner());
        known.remove(&dir.join("repo"));
        drop(known);
        self.seeds.forget(&dir.join("repo"));
        std::fs::remove_dir_all(&aside).map_err(io(&aside))?;
        tracing::info!(context = %context_id, "workspace removed");
        Ok(true)
    }

    /// The largest patch a turn's `changes` carries, in bytes.
    fn patch_limit(&self) -> usize {
        usize::try_from(self.config.patch_limit.0).unwrap_or(usize::MAX)
    }

    /// The change from the workspace's base to its files.
    pub fn changes(&self, ws: &Workspace) -> Result<Changes, WorkspaceError> {
        let checkout = ws.checkout();
        // Checked before anything of its `.git` is read.
        Git::fresh_workspace(&checkout)?;
        make::keep_borrowing(&checkout, &ws.source_git)?;
        changes::compute(
            &checkout,
            &ws.scratch(),
            &ws.base_commit,
            self.patch_limit(),
            self.seeds.usable(&checkout).as_deref(),
        )
    }

    /// Commits the workspace's files on the context's branch ([`Workspace::branch`]) when
    /// they differ from its tip, whatever branch the agent's `HEAD` is on: message `subject`
    /// (the first line of the prompt) with the trailer `Agent-Host-Task`, the configured
    /// author, no hook, no signature. Returns the new commit.
    pub fn commit_turn(
        &self,
        ws: &Workspace,
        subject: &str,
        task_id: &str,
    ) -> Result<Option<String>, WorkspaceError> {
        let checkout = ws.checkout();
        let git = self.git(ws)?;
        let tip = tip_of(&git, ws)?;
        let seed = self.seeds.usable(&checkout);
        let format = changes::object_format_of(&ws.base_commit);
        let (staged, index) =
            changes::stage_all(&checkout, &ws.scratch(), format, seed.as_deref())?;
        let message = commit_message(subject, task_id);
        let tree = staged.text(["write-tree"])?;
        let committed = self.commit_staged(&git, &staged, ws, &tip, &tree, &message)?;
        if committed.is_some() && tip.checked_out {
            // The agent's index becomes the committed files (its `git status` is clean).
            index.replace(&checkout.join(".git").join("index"))?;
        }
        Ok(committed)
    }

    /// What a turn's end takes from its workspace, its files read once: staged into one
    /// temporary index, from which come the change from the base (as
    /// [`Workspaces::changes`]), on a follow-up the change since the previous turn's end
    /// ([`TurnEnd::turn`]), and, when `commit` gives the turn's subject and task id, the
    /// commit of its files (as [`Workspaces::commit_turn`]). Staging is what costs in a large
    /// checkout (git reads every file's metadata and every folder for new files), so doing
    /// it once instead of for each halves a turn's end there; the diffs and the commit are
    /// then taken side by side, each needing only the staged files. A commit git refuses
    /// (the agent left its branch in a state git does not take) is logged; the change is
    /// still taken.
    pub fn end_turn(
        &self,
        ws: &Workspace,
        commit: Option<(&str, &str)>,
    ) -> Result<TurnEnd, WorkspaceError> {
        let checkout = ws.checkout();
        let git = self.git(ws)?;
        let previous = changes::previous_end(&ws.scratch());
        // The branch is read while the files are staged: independent git processes.
        let (staged, tip) = std::thread::scope(|s| {
            let tip = s.spawn(|| tip_of(&git, ws));
            let seed = self.seeds.usable(&checkout);
            let format = changes::object_format_of(&ws.base_commit);
            let staged = changes::stage_all(&checkout, &ws.scratch(), format, seed.as_deref());
            (staged, tip.join())
        });
        let (staged, index) = staged?;
        let tip = tip.map_err(|_| panicked("git for-each-ref"))??;
        let message = commit.map(|(subject, task_id)| commit_message(subject, task_id));
        let limit = self.patch_limit();
        let (changes, written, turn) = std::thread::scope(|s| {
            let written =
                s.spawn(|| self.write_staged(&git, &staged, ws, &tip, message.as_deref()));
            let turn = previous
                .as_deref()
                .map(|p| s.spawn(|| changes::diff_staged(&staged, p, limit)));
            let changes = changes::diff_staged(&staged, &ws.base_commit, limit);
            let written = written.join().unwrap_or_else(|_| {
                let e = || panicked("git write-tree");
                (Err(e()), Err(e()))
            });
            let turn = turn.map(|t| t.join().map_err(|_| panicked("git diff")).and_then(|t| t));
            (changes, written, turn)
        });
        let changes = changes?;
        let (tree, committed) = written;
        let committed = committed.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the turn's change could not be committed");
            None
        });
        match tree {
            Ok(tree) => changes::record_end(&ws.scratch(), &tree),
            Err(e) => tracing::warn!(error = %e, "the turn's files could not be written as a tree"),
        }
        let turn = turn.and_then(|t| {
            t.map_err(|e| tracing::warn!(error = %e, "the change since the previous turn could not be taken"))
                .ok()
        });
        if committed.is_some() && tip.checked_out {
            // The agent's index becomes the committed files (its `git status` is clean):
            // only now, when the diff no longer reads the staged index, and only when its
            // `HEAD` is the branch committed on (on a branch of its own, its index is its).
            if let Err(e) = index.replace(&checkout.join(".git").join("index")) {
                tracing::warn!(error = %e, "the workspace's index could not be updated");
            }
        }
        let head = committed
            .clone()
            .or_else(|| tip.commit.as_ref().map(|(c, _)| c.clone()))
            .unwrap_or_else(|| ws.base_commit.clone());
        Ok(TurnEnd {
            head,
            committed,
            changes,
            turn,
        })
    }

    /// The tree of the files `staged` holds, and, when `message` is given, their commit on
    /// the context's branch ([`Workspaces::commit_staged`]).
    fn write_staged(
        &self,
        git: &Git,
        staged: &Git,
        ws: &Workspace,
        tip: &Tip,
        message: Option<&str>,
    ) -> WrittenTree {
        let tree = match staged.text(["write-tree"]) {
            Ok(t) => t,
            // No tree, no commit (the tree's error is logged).
            Err(e) => return (Err(e), Ok(None)),
        };
        let committed = match message {
            Some(m) => self.commit_staged(git, staged, ws, tip, &tree, m),
            None => Ok(None),
        };
        (Ok(tree), committed)
    }

    /// Commits the `tree` of the files `staged` holds on the context's branch, on top of its
    /// `tip`, when it differs from the tip's; the new commit. A branch the agent deleted (or
    /// pointed at something other than a commit) starts again from the base.
    fn commit_staged(
        &self,
        git: &Git,
        staged: &Git,
        ws: &Workspace,
        tip: &Tip,
        tree: &str,
        message: &str,
    ) -> Result<Option<String>, WorkspaceError> {
        let (parent, parent_tree) = match &tip.commit {
            Some((commit, tree)) => (commit.clone(), tree.clone()),
            None => {
                let base_tree = git.text(["rev-parse", &format!("{}^{{tree}}", ws.base_commit)])?;
                (ws.base_commit.clone(), base_tree)
            }
        };
        if tree == parent_tree {
            return Ok(None);
        }
        let (name, email) = &self.identity;
        let author = [
            ("GIT_AUTHOR_NAME", name.as_str()),
            ("GIT_AUTHOR_EMAIL", email.as_str()),
            ("GIT_COMMITTER_NAME", name.as_str()),
            ("GIT_COMMITTER_EMAIL", email.as_str()),
        ];
        let commit =
            staged
                .with_env(&author)
                .text(["commit-tree", tree, "-p", &parent, "-m", message])?;
        git.check_contained()?;
        // The branch by its full name, never `HEAD`: an agent that switched to a branch of
        // its own (`git checkout -b mine`) keeps it, and the turn's commit still lands where
        // the `changes` artifact and `git fetch` say it is. The old value makes the update
        // fail rather than overwrite a branch that moved since it was read.
        git.output([
            "update-ref",
            "-m",
            "agent-host: turn",
            &format!("refs/heads/{}", ws.branch),
            &commit,
            &tip.old,
        ])?;
        Ok(Some(commit))
    }

    /// git in `ws`'s checkout ([`Git::workspace`]). The overrides of the repository's own
    /// filters are read from its configuration (one git process) only when the
    /// configuration's text differs from when they were last read, which at most turns'
    /// ends it does not (a workspace is made with none).
    fn git(&self, ws: &Workspace) -> Result<Git, WorkspaceError> {
        let checkout = ws.checkout();
        // Checked before anything of its `.git` is read: only files and folders there.
        let git = Git::fresh_workspace(&checkout)?;
        make::keep_borrowing(&checkout, &ws.source_git)?;
        let key = config_key(&checkout);
        if let Some(key) = &key {
            let known = self.filters.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, filters)) = known.get(&checkout).filter(|(k, _)| k == key) {
                return Ok(git.with_filters(filters.clone()));
            }
        }
        let git = git.with_own_filters()?;
        if let Some(key) = key {
            self.remember_filters(checkout, key, git.filter_overrides().to_vec());
        }
        Ok(git)
    }

    /// Keeps the filter overrides of `checkout` read from the configuration text `key`.
    fn remember_filters(&self, checkout: PathBuf, key: Vec<u8>, filters: Vec<(String, String)>) {
        let mut known = self.filters.lock().unwrap_or_else(|p| p.into_inner());
        known.insert(checkout, (key, filters));
    }

    /// The workspace's `HEAD` commit.
    pub fn head(&self, ws: &Workspace) -> Result<String, WorkspaceError> {
        self.git(ws)?
            .text(["rev-parse", "--verify", "HEAD^{commit}"])
    }
}

/// What a turn's end took from its workspace ([`Workspaces::end_turn`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnEnd {
    /// The commit made of the turn's files (none: nothing changed since `HEAD`, no commit
    /// asked for, or git refused it).
    pub committed: Option<String>,
    /// The tip of the context's branch afterwards (the base when it has none).
    pub head: String,
    /// The change from the base to the files.
    pub changes: Changes,
    /// The change since the previous turn's end (the files then, as that turn's end took
    /// them, to the files now): on a follow-up only.
    pub turn: Option<Changes>,
}

/// What writing a turn's staged files gives: their tree, and the turn's commit (none when
/// not asked for or nothing changed since the branch's tip).
type WrittenTree = (
    Result<String, WorkspaceError>,
    Result<Option<String>, WorkspaceError>,
);

/// The context's branch as a turn's end finds it.
struct Tip {
    /// Its commit and that commit's tree; None when the branch is gone or names no commit.
    commit: Option<(String, String)>,
    /// What the ref holds now, for the update's check: its object, or empty when missing.
    old: String,
    /// The workspace's `HEAD` is this branch (the agent's index follows the commit).
    checked_out: bool,
}

/// The context's branch: its commit and tree (one `for-each-ref`), and whether `HEAD` names
/// it (one `symbolic-ref`).
fn tip_of(git: &Git, ws: &Workspace) -> Result<Tip, WorkspaceError> {
    let full = format!("refs/heads/{}", ws.branch);
    let out = git.text([
        "for-each-ref",
        "--format=%(refname)%00%(objectname)%00%(objecttype)%00%(tree)",
        &full,
    ])?;
    let mut tip = Tip {
        commit: None,
        old: String::new(),
        checked_out: false,
    };
    // The pattern also matches the refs below it (`refs/heads/<branch>/x`): the exact one.
    let fields = out
        .lines()
        .map(|l| l.split('\0').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&full.as_str()));
    if let Some([_, object, kind, tree]) = fields.as_deref() {
        tip.old = object.to_string();
        if *kind == "commit" && !tree.is_empty() {
            tip.commit = Some((object.to_string(), tree.to_string()));
        }
    }
    let head = git.output_allow(["symbolic-ref", "--quiet", "HEAD"], &[1])?;
    tip.checked_out = String::from_utf8_lossy(&head).trim_end() == full;
    Ok(tip)
}

/// A workspace configuration's text and the filter overrides read from it.
type KnownFilters = (Vec<u8>, Vec<(String, String)>);

/// The error of a thread that asked git and panicked.
fn panicked(command: &str) -> WorkspaceError {
    WorkspaceError::Git {
        command: command.into(),
        message: "the thread running it panicked".into(),
    }
}

/// The text of the workspace's own configuration files (`config`, `config.worktree`), which
/// git reads in every call there; `None` when it cannot be read or includes other files
/// (whose changes its text would not show).
fn config_key(checkout: &Path) -> Option<Vec<u8>> {
    /// A configuration larger than this is not kept as a key (git reads it every time).
    const LARGEST: u64 = 1 << 20;
    let read = |name: &str| -> std::io::Result<Vec<u8>> {
        let path = checkout.join(".git").join(name);
        if std::fs::symlink_metadata(&path)?.len() > LARGEST {
            return Err(std::io::ErrorKind::FileTooLarge.into());
        }
        std::fs::read(path)
    };
    let mut key = read("config").ok()?;
    match read("config.worktree") {
        Ok(more) => {
            key.push(0);
            key.extend(more);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(_) => return None,
    }
    let includes = key
        .windows(b"include".len())
        .any(|w| w.eq_ignore_ascii_case(b"include"));
    (!includes).then_some(key)
}

/// A workspace being made, counted until dropped.
struct Slot<'a>(&'a Mutex<usize>);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut n = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *n = n.saturating_sub(1);
    }
}

/// The context's branch: `agent-host/` and, for a context id that is a UUID (as the host
/// makes them), its first 8 characters; for any other id (a client's choice, where
/// `session-1` and `session-2` share their first 8) the whole id. An id that is longer than
/// [`LONGEST_BRANCH_ID`] or holds characters other than letters, digits, `_` and `-` (a
/// branch name takes `.` and `:` only in some places) is shortened and those characters
/// become `-`, and a digest of the whole id is added: distinct ids, distinct branches.
pub fn branch_name(context_id: &str) -> String {
    if context_id.len() == 36 && uuid::Uuid::try_parse(context_id).is_ok() {
        return format!("agent-host/{}", &context_id[..8]);
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if context_id.len() <= LONGEST_BRANCH_ID && context_id.chars().all(plain) {
        return format!("agent-host/{context_id}");
    }
    let kept: String = context_id
        .chars()
        .take(LONGEST_BRANCH_ID - 13)
        .map(|c| if plain(c) { c } else { '-' })
        .collect();
    use sha2::Digest;
    let digest = sha2::Sha256::digest(context_id.as_bytes());
    format!("agent-host/{kept}-{}", hex::encode(&digest[..6]))
}

/// The longest context id a branch name holds whole ([`branch_name`]).
const LONGEST_BRANCH_ID: usize = 64;

/// The folder of a context's workspace: a digest of its id (ids may hold `.` and `:`).
fn folder_name(context_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(context_id.as_bytes());
    hex::encode(&digest[..12])
}

fn commit_message(subject: &str, task_id: &str) -> String {
    let first = subject.lines().map(str::trim).find(|l| !l.is_empty());
    let first = first.unwrap_or("agent-host turn");
    format!("{first}\n\nAgent-Host-Task: {task_id}\n")
}

fn read_record(dir: &Path) -> Result<Option<Workspace>, WorkspaceError> {
    let path = dir.join(RECORD);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path)(e)),
    };
    let mut ws: Workspace = serde_json::from_slice(&bytes).map_err(|e| WorkspaceError::Record {
        path: path.clone(),
        message: e.to_string(),
    })?;
    ws.dir = dir.to_path_buf();
    Ok(Some(ws))
}

/// Gives `dir` and everything under it (links themselves, not followed) to `uid`, `gid`.
fn give_all(dir: &Path, uid: u32, gid: u32) -> Result<(), WorkspaceError> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        std::os::unix::fs::lchown(&d, Some(uid), Some(gid)).map_err(io(&d))?;
        for e in std::fs::read_dir(&d).map_err(io(&d))? {
            let e = e.map_err(io(&d))?;
            let path = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                _ => std::os::unix::fs::lchown(&path, Some(uid), Some(gid)).map_err(io(&path))?,
            }
        }
    }
    Ok(())
}

/// The disk use of `dir` and everything under it, as `du` counts it: the blocks allocated
/// to each file, folder and link (`st_blocks`, in units of 512 bytes), not their apparent
/// sizes (a sparse file takes far less than its length, a folder takes a block or more).
/// Links are not followed; a file linked twice under `dir` counts twice.
fn disk_use(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let blocks = |m: &std::fs::Metadata| m.blocks().saturating_mul(512);
    let mut total = std::fs::symlink_metadata(dir).map_or(0, |m| blocks(&m));
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            // The entry's own metadata (a link's, not its target's).
            let Ok(m) = e.metadata() else {
                continue;
            };
            total = total.saturating_add(blocks(&m));
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    total
}

/// Whether the source repository has uncommitted changes, the host's own folders in it not
/// counted (`host`: the workspaces' folder and any other the host keeps there, untracked
/// when inside the repository; and the `.agent-host/` folders a task's attachments and long
/// prompts go to). `head` is the commit its `HEAD` names, when the caller knows it.
///
/// Its configuration is not the host's: an agent that worked in the folder before it was a
/// repository, or works there in a `shared` workspace, may have written it, and a filter it
/// defines would run on the host, on the files status reads. So `git status` runs with a
/// git folder of the host's made for the question under `scratch` ([`Git::over_source`]:
/// the source's objects, ignore rules and `HEAD`, a copy of its index, no configuration of
/// the source's), where reading the source's filters and overriding them left a window in
/// which the agent could swap them. Without descending into submodules, and without the
/// optional lock (the copied index is not written back).
fn source_dirty(
    source: &Source,
    head: Option<&str>,
    scratch: &Path,
    host: &[PathBuf],
) -> Result<bool, WorkspaceError> {
    let head = match head {
        Some(h) => Some(h.to_string()),
        None => source.head()?,
    };
    let tmp = tempfile::Builder::new()
        .prefix(".status-")
        .tempdir_in(scratch)
        .map_err(|e| WorkspaceError::Io {
            path: scratch.to_path_buf(),
            source: e,
        })?;
    let dir = tmp.path();
    let git = Git::over_source(
        &source.top,
        &source.git_dir,
        dir,
        &source.object_format,
        head.as_deref(),
    )?;
    let index = dir.join("index");
    changes::copy_index(&source.own_git_dir.join("index"), &index).map_err(|e| {
        WorkspaceError::Io {
            path: index.clone(),
            source: e,
        }
    })?;
    let git = git
        .with_index(&index)
        .with_env(&[("GIT_OPTIONAL_LOCKS", "0")]);
    let mut args: Vec<std::ffi::OsString> = [
        "status",
        "--porcelain",
        "-z",
        "--ignore-submodules=all",
        "--",
    ]
    .iter()
    .map(Into::into)
    .collect();
    args.extend(host_pathspecs(&source.top, host));
    let status = git.output(args)?;
    Ok(!status.is_empty())
}

/// The pathspecs that leave the host's own folders out of a `git status` run at `top`:
/// each of `host` that lies below `top` (by its path relative to `top`, taken literally),
/// and every `.agent-host/` folder ([`HOST_FILES`]).
fn host_pathspecs(top: &Path, host: &[PathBuf]) -> Vec<std::ffi::OsString> {
    let mut specs: Vec<std::ffi::OsString> = host
        .iter()
        .map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.clone()))
        .filter_map(|h| {
            let rel = h.strip_prefix(top).ok()?;
            (!rel.as_os_str().is_empty()).then(|| {
                let mut spec = std::ffi::OsString::from(":(exclude,literal)");
                spec.push(rel.as_os_str());
                spec
            })
        })
        .collect();
    specs.push(format!(":(exclude,glob)**/{HOST_FILES}**").into());
    specs
}

/// The top folder of the git work tree `dir` lies in, if it lies in one.
fn work_tree_around(dir: &Path) -> Option<PathBuf> {
    if !source::may_be_in_work_tree(dir) {
        return None;
    }
    let out = Git::trusted(dir)
        .output_allow(["rev-parse", "--show-toplevel"], &[128])
        .ok()?;
    let top = String::from_utf8_lossy(&out).trim_end().to_string();
    (!top.is_empty()).then(|| PathBuf::from(top))
}
