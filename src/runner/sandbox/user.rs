//! `sandbox_user`: a host running as root runs each task as another user.
//!
//! How: the task's first process, before its program ([`super::setup`]; after it joined its
//! cgroups, which only root may do), calls `setgroups` (the user's groups, looked up by the
//! host), `setgid`, then `setuid`: the real, effective and saved ids all become the user's, so
//! nothing in the task can get root back. Under bubblewrap that happens before bubblewrap
//! runs, so bubblewrap starts as the user, unprivileged, and builds its namespaces inside a
//! user namespace owned by that user: every file access is checked against the user's real
//! uid. Why not bubblewrap's `--uid`/`--gid`: those only choose the ids shown *inside* a user
//! namespace that root created; outside it the task would still be root's (files it creates
//! belong to root, and root-owned 0600 files stay readable).
//!
//! What the host does for the user: HOME, USER and LOGNAME in the task's environment are the
//! user's (the host's `XDG_*` folders, which are root's, are dropped); what the host creates
//! for a task (its attachments folder and files, missing state folders of the adapter) is
//! given to the user. The working directory is the operator's and keeps its owner: the user
//! must be able to write it (`agent-host doctor` and a warning at the first task say so when
//! its modes do not let the user in).

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The user a task runs as, looked up once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// The user's groups (its primary group included), for `setgroups`.
    pub groups: Vec<u32>,
    pub home: PathBuf,
}

impl RunAs {
    /// The user `name` of this machine (its passwd and group entries).
    pub fn lookup(name: &str) -> Option<RunAs> {
        let u = nix::unistd::User::from_name(name).ok().flatten()?;
        let groups = std::ffi::CString::new(name)
            .ok()
            .and_then(|c| nix::unistd::getgrouplist(&c, u.gid).ok())
            .unwrap_or_else(|| vec![u.gid]);
        Some(RunAs {
            name: u.name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
            groups: groups.into_iter().map(|g| g.as_raw()).collect(),
            home: u.dir,
        })
    }

    /// Whether the user's modes allow `want` (an `rwx` mask, e.g. 0o2 for write) on `meta`
    /// (owner, then group, then others, as the kernel checks; ACLs are not read).
    fn allowed(&self, meta: &std::fs::Metadata, want: u32) -> bool {
        let mode = meta.mode();
        let bits = if meta.uid() == self.uid {
            mode >> 6
        } else if self.groups.contains(&meta.gid()) || meta.gid() == self.gid {
            mode >> 3
        } else {
            mode
        };
        bits & want == want
    }

    /// Whether the user can reach `path` (search every folder leading to it).
    pub fn can_reach(&self, path: &Path) -> bool {
        path.ancestors()
            .skip(1)
            .all(|dir| std::fs::metadata(dir).is_ok_and(|m| !m.is_dir() || self.allowed(&m, 0o1)))
    }

    /// Whether the user can create files in folder `dir`.
    pub fn can_write_dir(&self, dir: &Path) -> bool {
        self.can_reach(dir) && std::fs::metadata(dir).is_ok_and(|m| self.allowed(&m, 0o3))
    }

    /// Gives `path` (created by the host for the user's task) to the user.
    pub fn give(&self, path: &Path) -> std::io::Result<()> {
        std::os::unix::fs::lchown(path, Some(self.uid), Some(self.gid))
    }

    /// The task's environment as the user's: HOME, USER, LOGNAME set; the host's `XDG_*`
    /// base folders (root's) dropped.
    pub fn environment(&self, env: &mut Vec<(String, String)>) {
        env.retain(|(k, _)| {
            !matches!(
                k.as_str(),
                "HOME"
                    | "USER"
                    | "LOGNAME"
                    | "XDG_CONFIG_HOME"
                    | "XDG_DATA_HOME"
                    | "XDG_CACHE_HOME"
                    | "XDG_RUNTIME_DIR"
            )
        });
        env.push(("HOME".into(), self.home.display().to_string()));
        env.push(("USER".into(), self.name.clone()));
        env.push(("LOGNAME".into(), self.name.clone()));
    }

    /// Warns once per folder when the user cannot write the working directory `cwd`.
    pub fn warn_unwritable(&self, cwd: &Path) {
        static WARNED: OnceLock<Mutex<HashSet<PathBuf>>> = OnceLock::new();
        if self.can_write_dir(cwd) {
            return;
        }
        let mut warned = WARNED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if warned.insert(cwd.to_path_buf()) {
            tracing::warn!(
                user = %self.name,
                cwd = %cwd.display(),
                "sandbox_user cannot write the working directory (its modes do not let the user in); give it to the user, e.g. chown -R {} {}",
                self.name,
                cwd.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn modes_decide_what_the_user_reaches_and_writes() {
        let Some(nobody) = RunAs::lookup("nobody") else {
            eprintln!("no user 'nobody' here; skipped");
            return;
        };
        assert_eq!(nobody.uid, 65534);
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        let shut = dir.path().join("shut");
        std::fs::create_dir(&open).unwrap();
        std::fs::create_dir(&shut).unwrap();
        let chmod = |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        chmod(dir.path(), 0o755).unwrap();
        chmod(&open, 0o777).unwrap();
        chmod(&shut, 0o700).unwrap();
        let own = nix::unistd::geteuid().as_raw();
        if own == nobody.uid {
            return;
        }
        assert!(nobody.can_write_dir(&open));
        assert!(!nobody.can_write_dir(&shut));
        assert!(!nobody.can_reach(&shut.join("x")));
        assert!(nobody.can_reach(&open.join("x")));
        let mut env = vec![
            ("HOME".to_string(), "/root".to_string()),
            ("XDG_RUNTIME_DIR".to_string(), "/run/user/0".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        nobody.environment(&mut env);
        assert!(env.contains(&("USER".into(), "nobody".into())));
        assert!(env.contains(&("HOME".into(), nobody.home.display().to_string())));
        assert!(!env.iter().any(|(k, _)| k == "XDG_RUNTIME_DIR"));
        assert!(env.contains(&("PATH".into(), "/bin".into())));
    }
}
