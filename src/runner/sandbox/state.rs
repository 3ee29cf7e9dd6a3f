//! A CLI's state folders per context: which of the adapter's `[sandbox] write` paths are the
//! context's own, where each lies in a context's folder, and which of the host's files
//! (credentials read-only) are shown over them. [`crate::home`] makes the folders; the
//! sandbox binds them ([`Bind`]).
//!
//! Why binds at the CLI's own paths rather than another `HOME` (or `CODEX_HOME`,
//! `CLAUDE_CONFIG_DIR`, `XDG_*`) for the program: every CLI keeps working unchanged. Its
//! state stays where it looks for it, whichever variable the operator set (or none), the rest
//! of the host's home (`~/.gitconfig`, tools under `~/.local/bin`, `~/.npmrc`) stays where the
//! commands it runs look, and the absolute paths a CLI writes into its sessions stay true
//! from one turn to the next. Binds need bubblewrap; without it the state is the host user's
//! (doctor and the log say so).

use std::path::{Path, PathBuf};

/// A path of the host shown at another path inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bind {
    /// On the host.
    pub from: PathBuf,
    /// Inside the sandbox.
    pub at: PathBuf,
    pub read_only: bool,
}

/// One state path of the CLI (an expanded `[sandbox] write` entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where the CLI keeps it (the host user's path, the bind's target).
    pub at: PathBuf,
    /// Its place in a context's folder: `home/<path under HOME>` or `root/<absolute path>`.
    pub place: PathBuf,
    /// A folder (the entry ended in `/`), else a file.
    pub folder: bool,
}

/// Which paths of the CLI are per context, and what of the host's reaches them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateLayout {
    /// Outermost first (a path inside another entry comes after it).
    pub entries: Vec<Entry>,
    /// The host's credential files (the adapter's `[doctor] credentials_files`) that lie in
    /// an entry: shown read-only at their path.
    pub credentials: Vec<PathBuf>,
    /// The host's configuration files and folders (the adapter's `[sandbox] config`) that
    /// lie in an entry: copied into a context's folder when it has none.
    pub config: Vec<PathBuf>,
}

impl StateLayout {
    /// The layout of `write` (expanded, absolute; a folder ends in `/`) for a CLI whose HOME
    /// is `home`, with the host's `credentials` and `config` (expanded, absolute) that lie
    /// in one of them.
    pub fn new(
        write: &[String],
        home: Option<&Path>,
        credentials: &[String],
        config: &[String],
    ) -> StateLayout {
        let mut entries: Vec<Entry> = write
            .iter()
            .filter(|w| w.starts_with('/'))
            .map(|w| {
                let at = PathBuf::from(w.trim_end_matches('/'));
                Entry {
                    place: place_of(&at, home),
                    folder: w.ends_with('/'),
                    at,
                }
            })
            .collect();
        entries.sort_by(|a, b| {
            let depth = |e: &Entry| e.at.components().count();
            depth(a).cmp(&depth(b)).then_with(|| a.at.cmp(&b.at))
        });
        entries.dedup_by(|a, b| a.at == b.at);
        let mut layout = StateLayout {
            entries,
            ..StateLayout::default()
        };
        let inside = |list: &[String]| -> Vec<PathBuf> {
            list.iter()
                .filter(|p| p.starts_with('/'))
                .map(|p| PathBuf::from(p.trim_end_matches('/')))
                .filter(|p| layout.entry_of(p).is_some())
                .collect()
        };
        let (credentials, config) = (inside(credentials), inside(config));
        layout.credentials = credentials;
        layout.config = config;
        layout
    }

    /// The innermost entry holding `path` (or being it).
    pub fn entry_of(&self, path: &Path) -> Option<&Entry> {
        self.entries.iter().rev().find(|e| path.starts_with(&e.at))
    }

    /// Where `path` (a path of the CLI, in an entry) lies in the context folder `dir`.
    pub fn in_context(&self, dir: &Path, path: &Path) -> Option<PathBuf> {
        let e = self.entry_of(path)?;
        let rest = path.strip_prefix(&e.at).ok()?;
        let base = dir.join(&e.place);
        Some(if rest.as_os_str().is_empty() {
            base
        } else {
            base.join(rest)
        })
    }

    /// The binds that show the context folder `dir` at the CLI's paths, then the host's
    /// credentials (`present`: those that exist) read-only over them.
    pub fn binds(&self, dir: &Path, present: &[PathBuf]) -> Vec<Bind> {
        let mut out: Vec<Bind> = self
            .entries
            .iter()
            .map(|e| Bind {
                from: dir.join(&e.place),
                at: e.at.clone(),
                read_only: false,
            })
            .collect();
        out.extend(present.iter().map(|c| Bind {
            from: c.clone(),
            at: c.clone(),
            read_only: true,
        }));
        out
    }
}

/// `home/<rel>` for a path under `home`, else `root/<path without its leading />`.
fn place_of(at: &Path, home: Option<&Path>) -> PathBuf {
    if let Some(rel) = home.and_then(|h| at.strip_prefix(h).ok()) {
        return Path::new("home").join(rel);
    }
    let rel = at.strip_prefix("/").unwrap_or(at);
    Path::new("root").join(rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(list: &[&str]) -> Vec<String> {
        list.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn state_paths_have_a_place_in_the_context_folder() {
        let home = Path::new("/home/me");
        let l = StateLayout::new(
            &s(&["/home/me/.claude/", "/home/me/.claude.json", "/srv/codex/"]),
            Some(home),
            &s(&["/home/me/.claude/.credentials.json", "/home/me/.other/x"]),
            &s(&["/home/me/.claude/settings.json", "/etc/elsewhere.toml"]),
        );
        let dir = Path::new("/data/homes/abc");
        assert_eq!(l.entries.len(), 3);
        assert_eq!(
            l.in_context(dir, Path::new("/home/me/.claude")).unwrap(),
            dir.join("home/.claude")
        );
        assert_eq!(
            l.in_context(dir, Path::new("/home/me/.claude/projects/p/s.jsonl"))
                .unwrap(),
            dir.join("home/.claude/projects/p/s.jsonl")
        );
        assert_eq!(
            l.in_context(dir, Path::new("/srv/codex/sessions")).unwrap(),
            dir.join("root/srv/codex/sessions")
        );
        assert!(l.in_context(dir, Path::new("/home/me/.bashrc")).is_none());
        // Only what lies in a state path is the adapter's business.
        assert_eq!(
            l.credentials,
            [PathBuf::from("/home/me/.claude/.credentials.json")]
        );
        assert_eq!(l.config, [PathBuf::from("/home/me/.claude/settings.json")]);
        let b = l.binds(dir, &l.credentials.clone());
        assert_eq!(b.len(), 4);
        assert!(b[..3]
            .iter()
            .all(|b| !b.read_only && b.from.starts_with(dir)));
        assert!(b[3].read_only && b[3].from == b[3].at);
    }

    #[test]
    fn an_entry_inside_another_comes_after_it() {
        let l = StateLayout::new(
            &s(&["/h/.config/x/data/", "/h/.config/x/"]),
            Some(Path::new("/h")),
            &[],
            &[],
        );
        assert_eq!(l.entries[0].at, Path::new("/h/.config/x"));
        assert_eq!(
            l.entry_of(Path::new("/h/.config/x/data/f")).unwrap().at,
            Path::new("/h/.config/x/data")
        );
    }
}
