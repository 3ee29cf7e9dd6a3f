//! The change of a workspace: the cumulative diff from its base commit to its files.
//!
//! Computed into a temporary index (a copy of the workspace's own, so that git's saved file
//! timestamps spare it reading unchanged files), with `git add -A` (untracked files in,
//! ignored files out) and `git diff --cached` against the base: the agent's own index, its
//! staged and unstaged changes, stay as they were.
//!
//! A folder the agent made a git repository of its own (`git init` or `git clone` in the
//! workspace) is staged as `git add` stages it: a gitlink, the nested repository's commit,
//! without its files. The change says so ([`FileChange::embedded_repository`]) rather than
//! taking the files in: such a folder is most often a repository the agent fetched to read
//! (a dependency's or a tool's source), whose files are not the change and would put a whole
//! other project into the patch, the commit and the caller's checkout; and a repository the
//! agent meant as part of the work has a history of its own, which as plain files of the
//! workspace it would lose. The agent (or the caller) decides: removing the folder's `.git`
//! makes its files part of the change at the next turn's end.

use std::path::Path;

use serde::Serialize;

use super::git::Git;
use super::WorkspaceError;

/// How a path changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileStatus {
    Added,
    Modified,
    Deleted,
    Renamed,
}

/// One changed path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    pub path: String,
    /// The path it had at the base (renames only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_path: Option<String>,
    pub status: FileStatus,
    pub additions: u64,
    pub deletions: u64,
    pub binary: bool,
    /// The path is a git repository of its own that the base did not have as one (the agent
    /// ran `git init` or `git clone` there): the change records only its commit (a gitlink,
    /// as `git add` does), not its files.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub embedded_repository: bool,
}

/// The change from the base to the workspace's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub files: Vec<FileChange>,
    /// `git apply`-able patch (binary files as git binary patches), whole files only, cut
    /// before the first file that would pass the size limit.
    pub patch: Vec<u8>,
    /// The patch was cut at the size limit (it lacks the files after the cut).
    pub truncated: bool,
}

/// The largest index the host copies to seed its own: an index takes about 100 bytes a
/// file, so this is ten million files.
const LARGEST_INDEX: u64 = 1 << 30;

/// The option that writes an index without its trailing checksum.
pub(crate) const SKIP_HASH: &str = "index.skipHash=true";

/// The temporary index of one computation, removed when dropped.
pub(crate) struct TempIndex(std::path::PathBuf);

impl TempIndex {
    /// Puts this index in the place of `target` (the workspace's own index).
    pub(crate) fn replace(&self, target: &Path) -> Result<(), WorkspaceError> {
        std::fs::rename(&self.0, target).map_err(|e| WorkspaceError::Io {
            path: target.to_path_buf(),
            source: e,
        })
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(lock_of(&self.0));
    }
}

/// The lock file git writes beside the index `index` (`index.lock` for `index`).
pub(crate) fn lock_of(index: &Path) -> std::path::PathBuf {
    let mut name = index.as_os_str().to_os_string();
    name.push(".lock");
    name.into()
}

/// The object format of a repository whose commit is named `commit`.
pub(crate) fn object_format_of(commit: &str) -> &'static str {
    if commit.len() == 64 {
        "sha256"
    } else {
        "sha1"
    }
}

/// Writes the workspace's files into a temporary index in `scratch` (a folder of the host's,
/// outside the checkout) and returns it, seeded from `seed` (the refreshed copy of the
/// workspace's index, [`super::seed`]) if given, else from the workspace's own index. The
/// git that stages (and then diffs, writes the tree and the commit from that index) has a
/// git folder of the host's ([`Git::host_owned`]): the agent's configuration is not read.
pub(crate) fn stage_all(
    checkout: &Path,
    scratch: &Path,
    object_format: &str,
    seed: Option<&Path>,
) -> Result<(Git, TempIndex), WorkspaceError> {
    let git = Git::host_owned(checkout, scratch, "stage-git", object_format)?;
    let tmp = scratch.join(format!("index.{}", uuid::Uuid::new_v4().simple()));
    let own = seed.map_or_else(|| checkout.join(".git").join("index"), Path::to_path_buf);
    let guard = TempIndex(tmp.clone());
    // No index to copy: git starts from an empty one and reads every file.
    copy_index(&own, &tmp).map_err(|e| WorkspaceError::Io {
        path: tmp.clone(),
        source: e,
    })?;
    // No checksum over the whole index at each write: with SHA-1 (collision-detecting) that
    // is most of what `add -A` and `write-tree` cost in a large checkout (10,000 files: 48
    // and 37 million instructions with it, 21 and 10 without). Git reads such an index since
    // 2.13.
    let git = git.with_index(&tmp).with_config(&[SKIP_HASH]);
    git.output_checked(["add", "-A", "--ignore-errors", "--", "."], |code, err| {
        code == 1 && only_repositories_without_commits(err, checkout)
    })?;
    Ok((git, guard))
}

/// Whether `git add`'s errors (`stderr`) all say that a folder is a repository with no
/// commit yet (a `git init` the agent made and never committed in), which `git add` cannot
/// take as a gitlink: the rest of the change is taken, those folders are left out (and
/// named in the host's log). Any other error fails the change as before.
fn only_repositories_without_commits(stderr: &str, checkout: &Path) -> bool {
    let mut left_out = Vec::new();
    for line in stderr.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line
            .strip_prefix("error: '")
            .and_then(|l| l.strip_suffix("' does not have a commit checked out"))
        {
            Some(folder) => left_out.push(folder.to_string()),
            None => return false,
        }
    }
    if !left_out.is_empty() {
        tracing::warn!(
            workspace = %checkout.display(),
            folders = ?left_out,
            "repositories with no commit yet are left out of the change (git add cannot take them)"
        );
    }
    !left_out.is_empty()
}

/// Copies the index `own` to `tmp` with `own`'s modification time. git takes an entry whose
/// file changed in the same second as the index was written ("racily clean") for changed
/// unless it reads the file, and it tells those entries by the index file's time: a copy
/// with a later time would hide an edit made in that second that kept the file's size (seen:
/// such an edit missing from the change).
///
/// Only a regular file of an index's size is copied, never through a link: an index the
/// agent replaced by a link (to a file of the host's, or another workspace's index), a fifo,
/// or a huge sparse file is not read. The metadata of the file copied; `None` (nothing
/// copied) for those and for no file.
pub(crate) fn copy_index(own: &Path, tmp: &Path) -> std::io::Result<Option<std::fs::Metadata>> {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(own);
    let mut file = match opened {
        Ok(f) => f,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.raw_os_error() == Some(libc::ELOOP) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e),
    };
    let m = file.metadata()?;
    if !m.is_file() || m.len() > LARGEST_INDEX {
        return Ok(None);
    }
    let mut out = std::fs::File::create(tmp)?;
    std::io::copy(&mut file, &mut out)?;
    out.set_modified(m.modified()?)?;
    Ok(Some(m))
}

/// The file in a workspace's scratch folder (the host's, not the agent's) that holds the
/// tree of the files as the last turn's end took them.
const TURN_END: &str = "turn-end";

/// The tree of the files at the previous turn's end, if one was recorded (a first turn has
/// none); only an object name is taken.
pub(crate) fn previous_end(scratch: &Path) -> Option<String> {
    let text = std::fs::read_to_string(scratch.join(TURN_END)).ok()?;
    let tree = text.trim();
    let hex = !tree.is_empty() && tree.len() <= 64 && tree.chars().all(|c| c.is_ascii_hexdigit());
    hex.then(|| tree.to_string())
}

/// Records `tree` as the files at this turn's end, for the next turn's change since then
/// (written aside and renamed, so a reader never sees half of it). A failure is logged: the
/// next turn then has its change since an older end, or none.
pub(crate) fn record_end(scratch: &Path, tree: &str) {
    let tmp = scratch.join(format!("{TURN_END}.{}", uuid::Uuid::new_v4().simple()));
    let written = std::fs::write(&tmp, format!("{tree}\n"))
        .and_then(|()| std::fs::rename(&tmp, scratch.join(TURN_END)));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!(error = %e, "the turn's end could not be recorded");
    }
}

/// The changes from `base` (a commit) to the workspace's files, the patch at most `limit`
/// bytes.
pub(crate) fn compute(
    checkout: &Path,
    scratch: &Path,
    base: &str,
    limit: usize,
    seed: Option<&Path>,
) -> Result<Changes, WorkspaceError> {
    let format = object_format_of(base);
    let (staged, _guard) = stage_all(checkout, scratch, format, seed)?;
    diff_staged(&staged, base, limit)
}

/// Room for the file listing ahead of the patch in the one diff that gives both.
const LISTING_ROOM: usize = 1 << 20;

/// The changes from `base` (a commit, or a tree) to the files `staged` (a git whose index
/// holds them, from [`stage_all`]), the patch at most `limit` bytes.
///
/// One `git diff` gives the listing (`--raw --numstat -z`) and the patch together: git
/// compares the trees once and starts once, where two diffs did both twice. With `-z` the
/// listing's records end in NUL and an empty record separates them from the patch, a pair of
/// NULs no record holds. Only when the listing alone is larger than [`LISTING_ROOM`] (tens
/// of thousands of changed paths) are the two asked for one after the other.
pub(crate) fn diff_staged(
    staged: &Git,
    base: &str,
    limit: usize,
) -> Result<Changes, WorkspaceError> {
    let (out, more) = staged.output_limited(
        diff_args(
            base,
            &[&["--raw", "--numstat", "-z", "-p"][..], PATCH_ARGS].concat(),
        ),
        limit.saturating_add(LISTING_ROOM),
    )?;
    if out.is_empty() {
        return Ok(Changes::default());
    }
    match split_listing(&out) {
        Some((listing, patch)) if !more || patch.len() >= limit => {
            let files = parse_listing(listing);
            Ok(with_patch(files, patch.to_vec(), more, limit))
        }
        _ => diff_twice(staged, base, limit),
    }
}

/// The patch's options: git binary patches, full object names, the usual prefixes.
const PATCH_ARGS: &[&str] = &[
    "--binary",
    "--full-index",
    "--src-prefix=a/",
    "--dst-prefix=b/",
];

/// `git diff --cached` from `base` with `extra`: renames found, no driver of the workspace
/// run.
fn diff_args(base: &str, extra: &[&str]) -> Vec<String> {
    ["diff", "--cached", "-M", "--no-ext-diff", "--no-textconv"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .chain([base.to_string(), "--".into()])
        .collect()
}

/// The listing (its records with their NULs) and the patch after it, when the patch began
/// within `out`.
fn split_listing(out: &[u8]) -> Option<(&[u8], &[u8])> {
    const SEPARATOR: &[u8] = b"\0\0diff --git ";
    let at = out.windows(SEPARATOR.len()).position(|w| w == SEPARATOR)?;
    Some((&out[..=at], &out[at + 2..]))
}

/// The listing and the patch by two diffs (a listing too large to share one output).
fn diff_twice(staged: &Git, base: &str, limit: usize) -> Result<Changes, WorkspaceError> {
    let listing = staged.output(diff_args(base, &["--raw", "--numstat", "-z"]))?;
    let files = parse_listing(&listing);
    if files.is_empty() {
        return Ok(Changes::default());
    }
    let (raw, more) = staged.output_limited(diff_args(base, PATCH_ARGS), limit)?;
    Ok(with_patch(files, raw, more, limit))
}

/// `files` with the patch `raw`, cut at the last whole file within `limit` when git had more.
fn with_patch(files: Vec<FileChange>, mut raw: Vec<u8>, more: bool, limit: usize) -> Changes {
    let truncated = more || raw.len() > limit;
    if truncated {
        raw.truncate(limit);
        raw = cut_at_file(raw);
    }
    Changes {
        files,
        patch: raw,
        truncated,
    }
}

/// The patch up to the last whole file: a cut file would not apply.
fn cut_at_file(mut raw: Vec<u8>) -> Vec<u8> {
    const START: &[u8] = b"\ndiff --git ";
    let end = raw
        .windows(START.len())
        .rposition(|w| w == START)
        .map(|i| i + 1)
        .unwrap_or(0);
    raw.truncate(end);
    raw
}

/// The files of `--raw --numstat -z` (git writes every raw entry, then every count).
fn parse_listing(out: &[u8]) -> Vec<FileChange> {
    let mut fields = out
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut names = Vec::new();
    let mut counts = Vec::new();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            continue;
        }
        if let Some(raw) = field.strip_prefix(':') {
            // `:MODE MODE OID OID STATUS`, then the path (two for renames and copies).
            let words: Vec<&str> = raw.split_whitespace().collect();
            let code = words.last().copied().unwrap_or("M");
            let embedded = words.get(1) == Some(&GITLINK) && words.first() != Some(&GITLINK);
            let Some(first) = fields.next() else { break };
            let (status, path, old) = match code.chars().next() {
                Some('R') => {
                    let Some(to) = fields.next() else { break };
                    (FileStatus::Renamed, to, Some(first))
                }
                Some('C') => {
                    let Some(to) = fields.next() else { break };
                    (FileStatus::Added, to, None)
                }
                Some('A') => (FileStatus::Added, first, None),
                Some('D') => (FileStatus::Deleted, first, None),
                _ => (FileStatus::Modified, first, None),
            };
            names.push(Named {
                status,
                path,
                old_path: old,
                embedded,
            });
            continue;
        }
        let mut parts = field.splitn(3, '\t');
        let (Some(add), Some(del), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            break;
        };
        let path = if path.is_empty() {
            let _old = fields.next();
            fields.next().unwrap_or_default()
        } else {
            path.to_string()
        };
        counts.push((add.parse().ok().zip(del.parse().ok()), path));
    }
    merge(names, counts)
}

/// The mode git gives a path that is a repository of its own (a gitlink).
const GITLINK: &str = "160000";

/// A path of the raw listing.
struct Named {
    status: FileStatus,
    path: String,
    old_path: Option<String>,
    /// A gitlink where the base had none ([`FileChange::embedded_repository`]).
    embedded: bool,
}

fn merge(names: Vec<Named>, counts: Vec<(Option<(u64, u64)>, String)>) -> Vec<FileChange> {
    let by_path: std::collections::HashMap<String, Option<(u64, u64)>> =
        counts.into_iter().map(|(c, p)| (p, c)).collect();
    names
        .into_iter()
        .map(|n| {
            let counts = by_path.get(&n.path).copied().flatten();
            FileChange {
                binary: counts.is_none() && by_path.contains_key(&n.path),
                additions: counts.map_or(0, |c| c.0),
                deletions: counts.map_or(0, |c| c.1),
                path: n.path,
                old_path: n.old_path,
                status: n.status,
                embedded_repository: n.embedded,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_patch_keeps_whole_files_only() {
        let raw = b"diff --git a/x b/x\n+1\ndiff --git a/y b/y\n+2".to_vec();
        assert_eq!(cut_at_file(raw), b"diff --git a/x b/x\n+1\n".to_vec());
        assert!(cut_at_file(b"diff --git a/x b/x\n+1".to_vec()).is_empty());
    }

    #[test]
    fn the_listing_ends_at_the_empty_record_before_the_patch() {
        let out =
            b":100644 100644 a b R100\0old\0new\x000\t0\t\0old\0new\0\0diff --git a/old b/new\n";
        let (listing, patch) = split_listing(out).expect("a patch");
        assert_eq!(parse_listing(listing)[0].path, "new");
        assert_eq!(patch, b"diff --git a/old b/new\n");
        assert!(split_listing(b":100644 100644 a b M\0f\x001\t0\tf\0").is_none());
    }

    #[test]
    fn a_new_gitlink_is_an_embedded_repository_and_a_submodules_is_not() {
        let z = "0".repeat(40);
        let out = format!(
            ":000000 160000 {z} {z} A\0nested\0:160000 160000 {z} {z} M\0sub\0-\t-\tnested\0-\t-\tsub\0"
        );
        let files = parse_listing(out.as_bytes());
        let got: Vec<_> = files
            .iter()
            .map(|f| (f.path.as_str(), f.embedded_repository))
            .collect();
        assert_eq!(got, [("nested", true), ("sub", false)]);
        let json = serde_json::to_value(&files).unwrap();
        assert_eq!(json[0]["embeddedRepository"], true);
        assert!(json[1].get("embeddedRepository").is_none());
    }

    #[test]
    fn the_combined_listing_is_read_like_the_two_listings() {
        let out = b":100644 100644 aaa bbb M\0f1\0:100644 100644 ccc ccc R100\0old\0new\0:000000 100644 000 ddd A\0img\x001\t0\tf1\x000\t0\t\0old\0new\0-\t-\timg\0";
        let files = parse_listing(out);
        let got: Vec<_> = files
            .iter()
            .map(|f| (f.path.as_str(), f.status, f.additions, f.binary))
            .collect();
        assert_eq!(
            got,
            [
                ("f1", FileStatus::Modified, 1, false),
                ("new", FileStatus::Renamed, 0, false),
                ("img", FileStatus::Added, 0, true)
            ]
        );
    }
}
