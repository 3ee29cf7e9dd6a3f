//! The program itself, inside the sandbox: what must be visible for it to run at all.
//!
//! bubblewrap shows the system read-only, but not everything: `/tmp` is a private, empty
//! tmpfs, and the host's data, the other workspaces and (with the network pieces) `/run`
//! are hidden. A program that lies there (an `agent-host` built in a clone under `/tmp`, a
//! CLI unpacked with `mktemp -d`) would fail with `execvp: No such file or directory`. So
//! what the program needs is shown again, read-only, at the same path:
//! - the program file (and the symlinks that lead to it, as symlinks);
//! - its package: the `node_modules` folder an npm-installed CLI lives in (the `.bin` link,
//!   the package and its hoisted dependencies), or the Python virtual environment
//!   (`pyvenv.cfg`) of a script installed with pip;
//! - for a `#!` script, its interpreter (`#!/usr/bin/env node`: `node` as found on the
//!   task's `PATH`), with its own package.
//!
//! Only paths the sandbox would hide are shown (the rest is visible already, and each mount
//! costs a little at every start), never one inside the working directory or a writable
//! state folder (they are bound writable already).

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::SandboxPolicy;

/// Folders the sandbox replaces with an empty one, whatever the policy.
const ALWAYS_HIDDEN: &[&str] = &["/tmp", "/run", "/var/run", "/dev/shm"];

/// How deep `#!` interpreters are followed (a script run by a script run by ...).
const MAX_INTERPRETERS: usize = 3;

/// One thing to show in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// A file or folder, bound read-only at its own path.
    ReadOnly(PathBuf),
    /// A symlink at `.0` pointing to `.1` (bubblewrap would follow it if bound).
    Link(PathBuf, PathBuf),
}

impl Shown {
    /// The path shown (a link's own path).
    pub fn path(&self) -> &Path {
        match self {
            Shown::ReadOnly(p) | Shown::Link(p, _) => p,
        }
    }
}

/// What `program` needs to run, found with `path_var` (the task's `PATH`) for `#!/usr/bin/env
/// NAME` scripts: every path involved, not yet filtered by what the sandbox hides.
pub fn needs(program: &Path, path_var: Option<&str>) -> Vec<Shown> {
    let mut out = Vec::new();
    let mut next = Some(program.to_path_buf());
    for _ in 0..MAX_INTERPRETERS {
        let Some(p) = next.take() else { break };
        let file = follow(&p, &mut out);
        for root in [package_root(&p), file.as_deref().and_then(package_root)]
            .into_iter()
            .flatten()
        {
            push(&mut out, Shown::ReadOnly(root));
        }
        let Some(file) = file else { break };
        push(&mut out, Shown::ReadOnly(file.clone()));
        next = interpreter(&file, path_var, &mut out);
    }
    out
}

/// The binds (bubblewrap arguments) that show `needs` where `policy` would hide them.
pub fn binds(needs: &[Shown], policy: &SandboxPolicy, cwd: &Path) -> Vec<String> {
    let mut a = Vec::new();
    let text = |p: &Path| p.display().to_string();
    // A folder shown covers what lies in it.
    let folders: Vec<&Path> = needs
        .iter()
        .filter_map(|s| match s {
            Shown::ReadOnly(p) if p.is_dir() => Some(p.as_path()),
            _ => None,
        })
        .collect();
    for s in needs {
        let path = match s {
            Shown::ReadOnly(p) | Shown::Link(p, _) => p,
        };
        if !hidden(path, policy, cwd) || folders.iter().any(|f| path != *f && path.starts_with(f)) {
            continue;
        }
        match s {
            Shown::ReadOnly(p) => a.extend(["--ro-bind".into(), text(p), text(p)]),
            Shown::Link(p, to) => a.extend(["--symlink".into(), text(to), text(p)]),
        }
    }
    a
}

/// True when the sandbox would not show `p` as it is on the host (and does not bind it
/// writable already).
fn hidden(p: &Path, policy: &SandboxPolicy, cwd: &Path) -> bool {
    // A context's own state shows its folder there, not the host's files.
    if policy.binds.iter().any(|b| p.starts_with(&b.at)) {
        return true;
    }
    if p.starts_with(cwd) || policy.write.iter().any(|w| p.starts_with(w)) {
        return false;
    }
    ALWAYS_HIDDEN.iter().any(|h| p.starts_with(h))
        || policy.hide.iter().any(|h| p.starts_with(h))
        || policy
            .workspace
            .as_ref()
            .is_some_and(|ws| p.starts_with(&ws.root))
}

fn push(out: &mut Vec<Shown>, s: Shown) {
    if !out.contains(&s) {
        out.push(s);
    }
}

/// Follows `p`'s symlinks (each one noted as a link), to the file they lead to.
fn follow(p: &Path, out: &mut Vec<Shown>) -> Option<PathBuf> {
    let mut p = absolute(p)?;
    for _ in 0..40 {
        match std::fs::read_link(&p) {
            Ok(to) => {
                push(out, Shown::Link(p.clone(), to.clone()));
                let dir = p.parent()?.to_path_buf();
                p = absolute(&dir.join(to))?;
            }
            Err(_) => return p.canonicalize().ok(),
        }
    }
    None
}

/// `p` absolute and without `.`/`..` (its folders' symlinks resolved), the file name as is.
fn absolute(p: &Path) -> Option<PathBuf> {
    let name = p.file_name()?;
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty())?;
    Some(dir.canonicalize().ok()?.join(name))
}

/// The package `p` belongs to: the outermost `node_modules` folder above it (npm's `.bin`
/// links, the packages, their hoisted dependencies), else a Python virtual environment.
fn package_root(p: &Path) -> Option<PathBuf> {
    let node = p
        .ancestors()
        .filter(|a| a.components().next_back() == Some(Component::Normal("node_modules".as_ref())))
        .last();
    if let Some(n) = node {
        return Some(n.to_path_buf());
    }
    p.ancestors()
        .skip(1)
        .take(4)
        .find(|a| a.join("pyvenv.cfg").is_file())
        .map(Path::to_path_buf)
}

/// The interpreter of a `#!` script (`env NAME` looked up on `path_var`; `env` itself noted
/// in `out`).
fn interpreter(file: &Path, path_var: Option<&str>, out: &mut Vec<Shown>) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = String::from_utf8_lossy(line);
    let mut words = line.split_whitespace();
    let interp = PathBuf::from(words.next()?);
    if interp.file_name().is_some_and(|n| n == "env") {
        if let Some(env) = follow(&interp, out) {
            push(out, Shown::ReadOnly(env));
        }
        let name = words.find(|w| !w.starts_with('-') && !w.contains('='))?;
        return match path_var {
            Some(path) => which::which_in(name, Some(path), "/").ok(),
            None => which::which(name).ok(),
        };
    }
    Some(interp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{symlink, PermissionsExt};

    fn exe(p: &Path, body: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn an_npm_cli_shows_its_node_modules_and_its_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let nm = root.join("clis/node_modules");
        let cli = nm.join("@acme/cli/bin/cli.js");
        exe(&cli, "#!/usr/bin/env fakenode\n");
        std::fs::create_dir_all(nm.join(".bin")).unwrap();
        symlink("../@acme/cli/bin/cli.js", nm.join(".bin/acme")).unwrap();
        let node = root.join("node/bin/fakenode");
        exe(&node, "\x7fELF");
        let path = format!("{}:/usr/bin:/bin", node.parent().unwrap().display());
        let n = needs(&nm.join(".bin/acme"), Some(&path));
        assert!(n.contains(&Shown::ReadOnly(nm.clone())), "{n:?}");
        assert!(n.contains(&Shown::ReadOnly(cli.clone())), "{n:?}");
        assert!(n.contains(&Shown::ReadOnly(node.clone())), "{n:?}");
        // Under /tmp (as tempdirs are here) the folder is bound and covers what is in it.
        let policy = SandboxPolicy::default();
        let a = binds(&n, &policy, Path::new("/srv/repo"));
        let nm_text = nm.display().to_string();
        if nm.starts_with("/tmp") {
            assert!(
                a.windows(2).any(|w| w[0] == "--ro-bind" && w[1] == nm_text),
                "{a:?}"
            );
            assert!(!a.iter().any(|x| x.ends_with("cli.js")), "{a:?}");
            assert!(a.iter().any(|x| x.ends_with("fakenode")), "{a:?}");
        }
        // Nothing is bound inside the working directory (it is writable already).
        assert!(binds(&n, &policy, &root).is_empty());
    }

    #[test]
    fn a_program_the_sandbox_shows_anyway_needs_no_bind() {
        let n = needs(Path::new("/bin/sh"), None);
        assert!(!n.is_empty());
        let policy = SandboxPolicy::default();
        assert!(
            binds(&n, &policy, Path::new("/srv/repo")).is_empty(),
            "{n:?}"
        );
    }

    #[test]
    fn a_link_is_shown_as_a_link_and_a_venv_as_a_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let venv = root.join(".venv");
        exe(&venv.join("bin/tool"), "#!/bin/sh\n");
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        symlink(venv.join("bin/tool"), root.join("tool")).unwrap();
        let n = needs(&root.join("tool"), None);
        assert_eq!(n[0], Shown::Link(root.join("tool"), venv.join("bin/tool")));
        assert!(n.contains(&Shown::ReadOnly(venv.clone())), "{n:?}");
        assert!(n.contains(&Shown::ReadOnly(PathBuf::from("/bin/sh"))) || n.iter().any(|s| matches!(s, Shown::ReadOnly(p) if p.ends_with("sh") || p.ends_with("dash") || p.ends_with("bash"))), "{n:?}");
        let hidden_root = SandboxPolicy {
            hide: vec![root.clone()],
            ..SandboxPolicy::default()
        };
        let a = binds(&n, &hidden_root, Path::new("/srv/repo"));
        let link = root.join("tool").display().to_string();
        assert!(
            a.windows(3).any(|w| w[0] == "--symlink" && w[2] == link),
            "{a:?}"
        );
    }
}
