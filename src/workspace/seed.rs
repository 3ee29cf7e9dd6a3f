//! A refreshed copy of a new workspace's index, made in the background while its first turn
//! runs, for that turn's end to start from.
//!
//! A workspace's checkout and its index are written in the same second, so every entry of
//! that index is "racily clean": git cannot trust the recorded file times, and the first git
//! that looks at the files afterwards reads and hashes every one of them (10,000 files: about
//! 90 ms of a first turn's end of 110 ms; 100,000 files: most of a second). So a second after
//! the workspace is made, when the files' times are older than any index written from then
//! on, the host copies the workspace's index into its scratch folder and refreshes the copy
//! there (`git update-index --refresh`: each file read once, the agent's own index untouched,
//! so the agent's git never meets the host's lock). A turn's end starts its temporary index
//! from that copy, as long as the workspace's own index is still the one it was copied from
//! (same file, size and time): once the agent or a commit of the host's wrote its index, that
//! one is the newer and is taken as before.
//!
//! The copy is as safe as the index it came from: an entry git refreshed records the file as
//! it was then, and a file changed since differs in its times or size, so the turn's end reads
//! it again; one changed in the very second the copy was written is racily clean in the copy
//! (git marks it so when writing), and read again too.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::changes::{copy_index, lock_of, SKIP_HASH};
use super::git::Git;

/// What identifies an index file's version: the file, its size and its modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IndexId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: i64,
    mtime_ns: i64,
}

fn index_id(path: &Path) -> Option<IndexId> {
    let m = std::fs::symlink_metadata(path).ok()?;
    m.is_file().then(|| id_of(&m))
}

fn id_of(m: &std::fs::Metadata) -> IndexId {
    IndexId {
        dev: m.dev(),
        ino: m.ino(),
        size: m.len(),
        mtime: m.mtime(),
        mtime_ns: m.mtime_nsec(),
    }
}

/// A refreshed copy, and the version of the workspace's index it was copied from.
#[derive(Debug)]
struct Seed {
    index: PathBuf,
    from: IndexId,
}

/// The refreshed copies ready, by checkout.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seeds(Arc<Mutex<HashMap<PathBuf, Seed>>>);

impl Seeds {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Seed>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Makes the refreshed copy of `checkout`'s index in `scratch`, in the background, in
    /// the second after this one (`object_format`: the repository's, `sha1` or `sha256`).
    pub(crate) fn prepare(&self, checkout: PathBuf, scratch: PathBuf, object_format: String) {
        let seeds = self.clone();
        let started = std::thread::Builder::new()
            .name("workspace-seed".into())
            .spawn(move || {
                std::thread::sleep(until_next_second());
                match refresh(&checkout, &scratch, &object_format) {
                    Ok(seed) => {
                        seeds.map().insert(checkout, seed);
                    }
                    Err(e) => tracing::debug!(checkout = %checkout.display(), error = %e,
                        "the workspace's index was not refreshed ahead of its turn's end"),
                }
            });
        if let Err(e) = started {
            tracing::debug!(error = %e, "no thread to refresh a workspace's index");
        }
    }

    /// The refreshed copy to start a staging of `checkout` from, if one is ready and the
    /// workspace's index is still the version it was copied from; a copy that no longer is
    /// is dropped.
    pub(crate) fn usable(&self, checkout: &Path) -> Option<PathBuf> {
        let mut map = self.map();
        let seed = map.get(checkout)?;
        if index_id(&checkout.join(".git").join("index")) == Some(seed.from) {
            return Some(seed.index.clone());
        }
        if let Some(stale) = map.remove(checkout) {
            let _ = std::fs::remove_file(stale.index);
        }
        None
    }

    /// Forgets `checkout`'s copy (the workspace is removed).
    pub(crate) fn forget(&self, checkout: &Path) {
        self.map().remove(checkout);
    }
}

/// How long until a little after the start of the next second.
fn until_next_second() -> Duration {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Duration::from_secs(1) - Duration::from_nanos(u64::from(since.subsec_nanos()))
        + Duration::from_millis(50)
}

/// Copies the workspace's index (keeping its time, never through a link) and refreshes the
/// copy, with a git folder of the host's: the agent is running, and may be writing its
/// `.git` meanwhile.
fn refresh(
    checkout: &Path,
    scratch: &Path,
    object_format: &str,
) -> Result<Seed, super::WorkspaceError> {
    let own = checkout.join(".git").join("index");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| super::WorkspaceError::Io { path, source }
    };
    let tmp = scratch.join(format!("seed.{}", uuid::Uuid::new_v4().simple()));
    let copied = copy_index(&own, &tmp).map_err(io(&own))?;
    let from = copied.as_ref().map(id_of).ok_or_else(|| {
        io(&own)(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "no index file to copy",
        ))
    })?;
    // A file's clean filter would be a program of the agent's configuration: the host's git
    // folder defines none, and the workspace's is not read.
    let refreshed = Git::host_owned(checkout, scratch, "seed-git", object_format)?
        .with_index(&tmp)
        .with_config(&[SKIP_HASH])
        .output(["update-index", "-q", "--refresh"]);
    let index = scratch.join("seed-index");
    let placed = refreshed.and_then(|_| std::fs::rename(&tmp, &index).map_err(io(&index)));
    if placed.is_err() {
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_file(lock_of(&tmp));
    }
    placed.map(|()| Seed { index, from })
}
