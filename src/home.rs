//! Each context's CLI home: a folder per context holding what the CLI keeps between turns
//! (the adapter's `[sandbox] write` paths: `~/.claude`, `~/.codex`, opencode's data, ...),
//! which the sandbox shows at the CLI's own paths for the context's turns only
//! ([`crate::runner::sandbox::state`]). No task reads or writes another context's sessions,
//! nor the host user's own.
//!
//! Where: `homes/` in the host's data folder (beside the SQLite database and its
//! `workspaces/`; for PostgreSQL the default data folder, where the push key is kept; for the
//! memory store, whose tasks end with the host, a temporary folder). Not beside the context's
//! workspace: not every context has one (`workspace = "shared"`, a folder outside git), and
//! `agent-host workspaces rm` gives a context a fresh workspace while its conversation, and so
//! its CLI's sessions, go on. The data folder outlives restarts, so sessions resume after
//! one, and it is hidden from every task already (the sandbox hides `homes/` as well).
//!
//! Each context's folder is made at its first turn: the CLI's configuration files
//! (`[sandbox] config`) are copied in from the host user's, its state folders and files made
//! empty; from then on they are the context's. The host's credentials (`[doctor]
//! credentials_files`) are never copied: the sandbox shows the host's files read-only at their
//! path. The folder goes with the context: retention and `tasks prune` remove it once every
//! task of the context is deleted.

use std::path::{Path, PathBuf};

use crate::runner::sandbox::{Bind, RunAs, StateLayout};

/// Why a context's home could not be made or removed.
#[derive(Debug, thiserror::Error)]
#[error("the CLI home {path}: {source}")]
pub struct HomeError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HomeError + '_ {
    move |source| HomeError {
        path: path.to_path_buf(),
        source,
    }
}

/// The CLI homes of one adapter's contexts, in one folder.
#[derive(Debug)]
pub struct Homes {
    root: PathBuf,
    /// A temporary root, removed when dropped.
    _temp: Option<tempfile::TempDir>,
}

impl Homes {
    /// The homes in `dir` (created, private), else in a temporary folder removed when this
    /// is dropped.
    pub fn open(dir: Option<&Path>) -> Result<Homes, HomeError> {
        let (root, temp) = match dir {
            Some(d) => {
                crate::store::files::create_dir_all(d).map_err(io(d))?;
                (d.to_path_buf(), None)
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("agent-host-homes-")
                    .tempdir()
                    .map_err(io(Path::new("/tmp")))?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let root = std::fs::canonicalize(&root).map_err(io(&root))?;
        Ok(Homes { root, _temp: temp })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of `context_id`'s home (it may not exist yet).
    pub fn dir(&self, context_id: &str) -> PathBuf {
        self.root.join(folder_name(context_id))
    }

    /// Whether the context has a home here.
    pub fn exists(&self, context_id: &str) -> bool {
        self.dir(context_id).is_dir()
    }

    /// Makes what `layout` needs in the context's home (its first turn: configuration copied
    /// from the host's, the rest empty; later turns: only what is missing) and returns the
    /// sandbox's binds for the turn. With `user` (the task's sandbox user), what is made is
    /// given to it.
    pub fn prepare(
        &self,
        context_id: &str,
        layout: &StateLayout,
        user: Option<&RunAs>,
    ) -> Result<Vec<Bind>, HomeError> {
        let dir = self.dir(context_id);
        let mut made: Vec<PathBuf> = Vec::new();
        if !dir.exists() {
            crate::store::files::create_dir_all(&dir).map_err(io(&dir))?;
            made.push(dir.clone());
        }
        for c in &layout.config {
            if let Some(to) = layout.in_context(&dir, c) {
                unlink_below(&dir, &to)?;
                copy_missing(c, &to, &mut made)?;
            }
        }
        for e in &layout.entries {
            let at = dir.join(&e.place);
            make_missing(&at, e.folder, &mut made)?;
        }
        let mut present = Vec::new();
        for c in &layout.credentials {
            let Some(place) = layout.in_context(&dir, c) else {
                continue;
            };
            if c.exists() {
                // The mount point, in the context's folder (an empty file, or a folder).
                unlink_below(&dir, &place)?;
                mount_point(&place, c.is_dir(), &mut made)?;
                present.push(c.clone());
            } else if std::fs::metadata(&place).is_ok_and(|m| m.is_file() && m.len() == 0) {
                // The host's login is gone: so is the empty mount point it left.
                let _ = std::fs::remove_file(&place);
            }
        }
        if let Some(u) = user {
            for p in &made {
                u.give(p).map_err(io(p))?;
            }
        }
        Ok(layout.binds(&dir, &present))
    }

    /// Removes the context's home; false when it had none.
    pub fn remove(&self, context_id: &str) -> Result<bool, HomeError> {
        let dir = self.dir(context_id);
        if !dir.exists() {
            return Ok(false);
        }
        // Moved aside first, so that no half-removed home is ever used.
        let aside = self
            .root
            .join(format!(".removing-{}", uuid::Uuid::new_v4().simple()));
        std::fs::rename(&dir, &aside).map_err(io(&dir))?;
        std::fs::remove_dir_all(&aside).map_err(io(&aside))?;
        tracing::info!(context = %context_id, "CLI home removed");
        Ok(true)
    }

    /// How many contexts have a home here.
    pub fn count(&self) -> usize {
        std::fs::read_dir(&self.root)
            .map(|d| {
                d.filter_map(Result::ok)
                    .filter(|e| is_folder_name(&e.file_name().to_string_lossy()))
                    .count()
            })
            .unwrap_or(0)
    }
}

/// The folder name of a context's home: a digest of its id (ids are the client's, any text).
fn folder_name(context_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(context_id.as_bytes());
    hex::encode(&digest[..12])
}

/// Whether `name` is one [`folder_name`] gives (not another adapter's folder, nor one
/// being removed).
fn is_folder_name(name: &str) -> bool {
    name.len() == 24 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Creates `path` (a folder, or a file: `{}` for `.json`, else empty) and its missing
/// parents, noting each in `made`.
fn make_missing(path: &Path, folder: bool, made: &mut Vec<PathBuf>) -> Result<(), HomeError> {
    if std::fs::symlink_metadata(path).is_ok() {
        return Ok(());
    }
    let parent = if folder { Some(path) } else { path.parent() };
    if let Some(p) = parent {
        let mut missing: Vec<PathBuf> = p
            .ancestors()
            .take_while(|a| !a.exists())
            .map(Path::to_path_buf)
            .collect();
        std::fs::create_dir_all(p).map_err(io(p))?;
        missing.reverse();
        made.extend(missing);
    }
    if !folder {
        let body = if path.extension().is_some_and(|e| e == "json") {
            "{}"
        } else {
            ""
        };
        std::fs::write(path, body).map_err(io(path))?;
        made.push(path.to_path_buf());
    }
    Ok(())
}

/// Removes a link at `place` or at a folder between the context's folder `dir` and it.
/// The context's agent writes these folders: a link it left there would have the host copy
/// a setting through it, and bubblewrap make the login's mount point at its target (an
/// empty file anywhere, as root). The host then makes what it needs itself.
fn unlink_below(dir: &Path, place: &Path) -> Result<(), HomeError> {
    let Ok(rel) = place.strip_prefix(dir) else {
        return Ok(());
    };
    let mut at = dir.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                tracing::warn!(path = %at.display(), "a link in a context's CLI folder was removed");
                return std::fs::remove_file(&at).map_err(io(&at));
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}

/// An empty file (or folder) at `path` when nothing is there, its folders made.
fn mount_point(path: &Path, folder: bool, made: &mut Vec<PathBuf>) -> Result<(), HomeError> {
    if folder || std::fs::symlink_metadata(path).is_ok() {
        return make_missing(path, folder, made);
    }
    if let Some(parent) = path.parent() {
        make_missing(parent, true, made)?;
    }
    std::fs::write(path, "").map_err(io(path))?;
    made.push(path.to_path_buf());
    Ok(())
}

/// Copies the host's `from` (a file, or a folder with what lies in it; links are not
/// followed, nor copied) to `to` when `to` does not exist; nothing when `from` does not.
fn copy_missing(from: &Path, to: &Path, made: &mut Vec<PathBuf>) -> Result<(), HomeError> {
    let Ok(meta) = std::fs::symlink_metadata(from) else {
        return Ok(());
    };
    if std::fs::symlink_metadata(to).is_ok() {
        return Ok(());
    }
    if meta.is_file() {
        if let Some(parent) = to.parent() {
            make_missing(parent, true, made)?;
        }
        std::fs::copy(from, to).map_err(io(to))?;
        made.push(to.to_path_buf());
    } else if meta.is_dir() {
        make_missing(to, true, made)?;
        for e in std::fs::read_dir(from).map_err(io(from))?.flatten() {
            copy_missing(&e.path(), &to.join(e.file_name()), made)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(home: &Path) -> StateLayout {
        let h = |p: &str| format!("{}/{p}", home.display());
        StateLayout::new(
            &[h(".cli/"), h(".cli.json")],
            Some(home),
            &[h(".cli/credentials.json"), h(".cli/absent.json")],
            &[h(".cli/settings.json"), h(".cli/agents/")],
        )
    }

    /// Links the context's agent left where the host copies a setting or makes the login's
    /// mount point are removed, never followed (a plain write or bubblewrap's mount point
    /// would make a file at their target).
    #[test]
    fn links_in_a_context_home_are_removed_not_followed() {
        let host = tempfile::tempdir().unwrap();
        let home = host.path().join("home");
        std::fs::create_dir_all(home.join(".cli")).unwrap();
        std::fs::write(home.join(".cli/settings.json"), "s").unwrap();
        let homes = Homes::open(Some(&host.path().join("data/homes"))).unwrap();
        let l = layout(&home);
        homes.prepare("ctx-1", &l, None).unwrap();
        let cli = homes.dir("ctx-1").join("home/.cli");
        let victim = host.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        // The agent's links: the login's place (the host had no login yet), a setting's.
        std::os::unix::fs::symlink(victim.join("created"), cli.join("credentials.json")).unwrap();
        std::fs::remove_file(cli.join("settings.json")).unwrap();
        std::os::unix::fs::symlink(victim.join("copied"), cli.join("settings.json")).unwrap();
        std::fs::write(home.join(".cli/credentials.json"), "token").unwrap();

        let binds = homes.prepare("ctx-1", &l, None).unwrap();
        assert!(!victim.join("created").exists() && !victim.join("copied").exists());
        let meta = std::fs::symlink_metadata(cli.join("credentials.json")).unwrap();
        assert!(meta.is_file() && meta.len() == 0, "{meta:?}");
        assert_eq!(
            std::fs::read_to_string(cli.join("settings.json")).unwrap(),
            "s"
        );
        assert!(binds.iter().any(|b| b.read_only));
    }

    #[test]
    fn a_context_home_gets_the_config_not_the_sessions_and_binds_the_login_read_only() {
        let host = tempfile::tempdir().unwrap();
        let home = host.path().join("home");
        std::fs::create_dir_all(home.join(".cli/sessions")).unwrap();
        std::fs::create_dir_all(home.join(".cli/agents/sub")).unwrap();
        std::fs::write(home.join(".cli/sessions/s1"), "the host user's session").unwrap();
        std::fs::write(home.join(".cli/settings.json"), r#"{"a":1}"#).unwrap();
        std::fs::write(home.join(".cli/agents/sub/x.md"), "agent").unwrap();
        std::fs::write(home.join(".cli/credentials.json"), "token").unwrap();
        let homes = Homes::open(Some(&host.path().join("data/homes"))).unwrap();
        let l = layout(&home);

        let binds = homes.prepare("ctx-1", &l, None).unwrap();
        let dir = homes.dir("ctx-1");
        let cli = dir.join("home/.cli");
        assert_eq!(
            std::fs::read_to_string(cli.join("settings.json")).unwrap(),
            r#"{"a":1}"#
        );
        assert!(cli.join("agents/sub/x.md").is_file());
        assert!(!cli.join("sessions").exists(), "no session of the host's");
        assert_eq!(
            std::fs::read_to_string(dir.join("home/.cli.json")).unwrap(),
            "{}"
        );
        // The login is the host's, read-only, over an empty mount point.
        assert_eq!(std::fs::read(cli.join("credentials.json")).unwrap(), b"");
        assert!(!cli.join("absent.json").exists());
        assert_eq!(binds.len(), 3, "{binds:?}");
        assert_eq!(binds[0].from, cli);
        assert_eq!(binds[0].at, home.join(".cli"));
        assert!(binds[2].read_only && binds[2].from == home.join(".cli/credentials.json"));

        // The context's own changes stay; another context starts from the host's again.
        std::fs::write(cli.join("settings.json"), "mine").unwrap();
        std::fs::write(cli.join("session"), "ctx-1's").unwrap();
        homes.prepare("ctx-1", &l, None).unwrap();
        assert_eq!(
            std::fs::read_to_string(cli.join("settings.json")).unwrap(),
            "mine"
        );
        homes.prepare("ctx-2", &l, None).unwrap();
        let other = homes.dir("ctx-2").join("home/.cli");
        assert!(!other.join("session").exists());
        assert_eq!(homes.count(), 2);

        // A login removed from the host leaves no empty file behind.
        std::fs::remove_file(home.join(".cli/credentials.json")).unwrap();
        let binds = homes.prepare("ctx-1", &l, None).unwrap();
        assert!(binds.iter().all(|b| !b.read_only));
        assert!(!cli.join("credentials.json").exists());

        assert!(homes.remove("ctx-1").unwrap());
        assert!(!homes.exists("ctx-1") && homes.exists("ctx-2"));
        assert!(!homes.remove("ctx-1").unwrap());
    }
}
