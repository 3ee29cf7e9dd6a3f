//! bubblewrap (`bwrap`): the namespaces and mounts of a task's sandbox.
//!
//! Why bubblewrap and not our own `unshare`/`mount` code: it is the small, audited setuid-free
//! tool that Flatpak and Claude Code's own sandbox use on Linux for exactly this (a PID
//! namespace whose init dies with the program, a read-only view of the system with chosen
//! folders writable, a private `/tmp`, an optional empty network namespace), packaged by
//! every distribution (`bubblewrap`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{RunAs, SandboxPolicy};

/// A working bubblewrap (found on PATH and passing a trial run) and its version, or why not.
pub fn probe() -> (Option<(PathBuf, String)>, String) {
    let Ok(path) = which::which("bwrap") else {
        return (None, "bwrap is not installed".into());
    };
    let version = Command::new(&path)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .trim_start_matches("bubblewrap ")
                .to_string()
        })
        .unwrap_or_default();
    // A trial run with the namespaces a task gets: user namespaces may be disabled, or the
    // host may itself run in a container that forbids them.
    let trial = Command::new(&path)
        .args([
            "--die-with-parent",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match trial {
        Ok(o) if o.status.success() => (Some((path, version)), String::new()),
        Ok(o) => (
            None,
            format!(
                "bwrap {version} cannot create namespaces here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => (None, format!("bwrap cannot run: {e}")),
    }
}

/// Whether the bubblewrap at `path` takes `--bind-fd` (0.8 and later).
pub fn binds_fds(path: &Path) -> bool {
    Command::new(path)
        .arg("--help")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("--bind-fd"))
}

/// The kernel's settings in the sandbox's `/proc`, shown read-only over the writable ones.
///
/// Why: a root host's task is uid 0 of the host (in user namespaces of its own), and the
/// kernel lets that uid write most of `/proc/sys` by the file modes alone, without a
/// capability: `kernel.core_pattern` names a program the kernel then runs as the host's
/// root, outside every namespace, at the next crash of any process. bubblewrap covers
/// `/proc/sys` itself only when it finds the folder writable, and the kernel answers that
/// question for the folder with no, whatever its files allow. The folders bubblewrap does
/// cover (`/proc/irq`, `/proc/bus`) are covered again harmlessly; `/proc/sysrq-trigger` and
/// `/proc/fs` may be absent (`--ro-bind-try`).
const PROC_READ_ONLY: &[&str] = &["/proc/sys", "/proc/sysrq-trigger", "/proc/fs"];

/// Hides `h`: an empty tmpfs over a folder, `/dev/null` over a file.
fn hide(push: &mut impl FnMut(&[&str]), h: &Path, is_dir: bool) {
    let h = h.display().to_string();
    if is_dir {
        push(&["--tmpfs", &h]);
    } else {
        push(&["--ro-bind", "/dev/null", &h]);
    }
}

/// Whether `p` lies in a folder every sandbox empties (`/tmp`, `/run`).
fn in_emptied_folder(p: &Path) -> bool {
    ["/tmp", "/run", "/var/run"]
        .iter()
        .any(|t| p.starts_with(t))
}

/// Whether `p` lies in a folder the sandbox of `policy` empties (`/tmp`, `/run`) or hides.
fn emptied(policy: &SandboxPolicy, p: &Path) -> bool {
    in_emptied_folder(p) || policy.hide.iter().any(|h| p.starts_with(h))
}

/// bubblewrap's arguments (before `--`) for `policy`, the task working in `cwd`.
/// `root`: the host is root and the task stays root: bubblewrap then makes a user namespace
/// (uid 0 mapped to itself) in which it makes the mounts. In that namespace the program
/// would hold every capability over those mounts and could undo them; the caller runs it in
/// a user namespace of its own below that one (see `setup::Steps::own_userns`), where the
/// mounts are locked and a CLI that starts its own bubblewrap for its commands (Codex does)
/// still can.
/// `user`: the task runs as that user (bubblewrap then starts as the user, unprivileged, in a
/// user namespace of its own): what the user cannot reach by the file modes needs no hiding,
/// and bubblewrap, as the user, could not mount over it.
pub fn args(policy: &SandboxPolicy, cwd: &Path, root: bool, user: Option<&RunAs>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    // The sandbox dies with the host; its init with the program (bubblewrap's default).
    push(&["--die-with-parent", "--unshare-pid", "--unshare-ipc"]);
    if root {
        push(&["--unshare-user", "--uid", "0", "--gid", "0"]);
    }
    push(&["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]);
    for p in PROC_READ_ONLY {
        push(&["--ro-bind-try", p, p]);
    }
    push(&["--tmpfs", "/tmp"]);
    super::net::mounts(policy, &mut push);
    let text = |p: &Path| p.display().to_string();
    for w in std::iter::once(cwd).chain(policy.write.iter().map(PathBuf::as_path)) {
        if w.exists() {
            let w = text(w);
            push(&["--bind", &w, &w]);
        }
    }
    for h in &policy.hide {
        let Ok(meta) = std::fs::metadata(h) else {
            continue;
        };
        if user.is_some_and(|u| !u.can_reach(h)) {
            continue;
        }
        hide(&mut push, h, meta.is_dir());
    }
    if let Some(ws) = &policy.workspace {
        // A source under a folder the sandbox empties: read-only, what is hidden in it hidden
        // again (the workspaces' folder just below).
        if let Some(src) = ws
            .source
            .as_deref()
            .filter(|s| s.is_dir() && emptied(policy, s))
        {
            push(&["--ro-bind", &text(src), &text(src)]);
            for h in policy
                .hide
                .iter()
                .filter(|h| h.starts_with(src) && h.exists())
            {
                hide(&mut push, h, h.is_dir());
            }
        }
        push(&["--tmpfs", &text(&ws.root)]);
        push(&["--bind", &text(&ws.checkout), &text(&ws.checkout)]);
        // The source's objects, then those it borrows in turn (none in or around a folder
        // the sandbox hides, which a line of the source's alternates could name).
        let hidden = |o: &Path| {
            std::iter::once(&ws.root)
                .chain(policy.hide.iter())
                .any(|h| o.starts_with(h) || h.starts_with(o))
        };
        for (i, objects) in ws.borrowed.iter().enumerate() {
            if objects.is_dir() && (i == 0 || !hidden(objects)) {
                push(&["--ro-bind", &text(objects), &text(objects)]);
            }
        }
        for h in policy.hide.iter().filter(|h| h.starts_with(&ws.checkout)) {
            if h.is_dir() {
                push(&["--tmpfs", &text(h)]);
            }
        }
    }
    // The context's own state at the CLI's paths (over the host user's, and over a hidden
    // folder they may lie in), then the host's credentials read-only over it.
    for b in &policy.binds {
        if b.from.exists() {
            let flag = if b.read_only { "--ro-bind" } else { "--bind" };
            push(&[flag, &text(&b.from), &text(&b.at)]);
        }
    }
    for r in &policy.reveal {
        if r.exists() {
            let r = text(r);
            push(&["--bind", &r, &r]);
        }
    }
    let cwd = text(cwd);
    push(&["--chdir", &cwd]);
    a
}

/// `/dev/null` over each host socket the task would otherwise see ([`super::sockets`]), the
/// arguments to put after every other bind (the program's folders included: a bind of a
/// folder over a path covers the mounts made on it before), so that one in a folder bound
/// again (the working directory, a folder written, the program's folder, even under `/tmp`)
/// is covered too. Left alone: those in folders the sandbox empties or hides and shows no
/// part of again, in the folder of all workspaces, the sockets the adapter names
/// (`[sandbox] sockets`), and, for a task run as another user, those that user cannot
/// reach by the file modes. `shown`: the paths bound for the program ([`super::program`]).
pub fn cover_host_sockets(
    policy: &SandboxPolicy,
    cwd: &Path,
    shown: &[PathBuf],
    user: Option<&RunAs>,
) -> Vec<String> {
    let mut again: Vec<&Path> = vec![cwd];
    again.extend(policy.write.iter().map(PathBuf::as_path));
    again.extend(policy.binds.iter().map(|b| b.at.as_path()));
    again.extend(shown.iter().map(PathBuf::as_path));
    if let Some(src) = policy.workspace.as_ref().and_then(|w| w.source.as_deref()) {
        again.push(src);
    }
    let hidden = |p: &Path| {
        policy.hide.iter().any(|h| p.starts_with(h))
            && !policy.reveal.iter().any(|r| p.starts_with(r))
    };
    let emptied = |p: &Path| in_emptied_folder(p) && !again.iter().any(|a| p.starts_with(a));
    let elsewhere = |p: &Path| {
        hidden(p)
            || emptied(p)
            || policy
                .workspace
                .as_ref()
                .is_some_and(|w| p.starts_with(&w.root))
            || policy.sockets.iter().any(|s| s == p)
            || user.is_some_and(|u| !u.can_reach(p))
    };
    super::sockets::to_cover(super::sockets::listed(), elsewhere)
        .into_iter()
        .flat_map(|s| {
            [
                "--ro-bind".to_string(),
                "/dev/null".to_string(),
                s.display().to_string(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::sandbox::Network;

    /// A host socket in a working directory under `/tmp` (a folder the sandbox empties, but
    /// binds the working directory back into) is covered; one in another folder under
    /// `/tmp` is not visible and left alone; one in the program's folder under `/tmp` is
    /// covered too. Before, every socket under `/tmp` was taken for hidden, and a task
    /// working in `mktemp -d` reached its host's socket there.
    #[test]
    fn host_sockets_in_folders_bound_back_under_tmp_are_covered() {
        let under_tmp = || tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        let (work, other, prog) = (under_tmp(), under_tmp(), under_tmp());
        let bind = |d: &tempfile::TempDir| {
            let p = d.path().join("host.sock");
            (std::os::unix::net::UnixListener::bind(&p).unwrap(), p)
        };
        let ((_w, in_work), (_o, in_other), (_p, in_prog)) =
            (bind(&work), bind(&other), bind(&prog));
        let policy = SandboxPolicy::default();
        let shown = [prog.path().to_path_buf()];
        let a = cover_host_sockets(&policy, work.path(), &shown, None);
        let covered = |p: &Path| a.iter().any(|x| x == &p.display().to_string());
        assert!(covered(&in_work), "{a:?}");
        assert!(covered(&in_prog), "{a:?}");
        assert!(!covered(&in_other), "{a:?}");
        // The sockets the adapter names stay.
        let named = SandboxPolicy {
            sockets: vec![in_work.clone()],
            ..SandboxPolicy::default()
        };
        let a = cover_host_sockets(&named, work.path(), &[], None);
        assert!(
            !a.iter().any(|x| x == &in_work.display().to_string()),
            "{a:?}"
        );
    }

    #[test]
    fn hidden_folders_come_after_writable_ones_and_reveals_last() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let data = dir.path().join("data");
        let own = work.join(".agent-host/attachments/t1");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("push.key"), "k").unwrap();
        let policy = SandboxPolicy {
            hide: vec![
                data.clone(),
                data.join("push.key"),
                work.join(".agent-host/attachments"),
                dir.path().join("absent"),
            ],
            reveal: vec![own.clone()],
            network: Network::None,
            ..SandboxPolicy::default()
        };
        let a = args(&policy, &work, true, None);
        let at = |s: &str| a.iter().position(|x| x == s).unwrap();
        assert!(a.contains(&"--unshare-net".to_string()));
        assert!(a.contains(&"--unshare-user".to_string()));
        let w = work.display().to_string();
        let d = data.display().to_string();
        let o = own.display().to_string();
        assert!(at(&w) < at(&d) && at(&d) < at(&o), "{a:?}");
        assert!(!a.iter().any(|x| x.ends_with("absent")));
        assert_eq!(a[a.len() - 2..], ["--chdir".to_string(), w]);
    }

    #[test]
    fn a_context_state_is_bound_over_the_host_users_and_the_login_read_only_over_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let data = dir.path().join("data");
        let mine = data.join("homes/abc/home/.cli");
        for d in [home.join(".cli"), mine.clone()] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(home.join(".cli/login.json"), "t").unwrap();
        let policy = SandboxPolicy {
            write: vec![home.join(".cli")],
            hide: vec![data.clone(), data.join("homes")],
            binds: vec![
                crate::runner::sandbox::Bind {
                    from: mine.clone(),
                    at: home.join(".cli"),
                    read_only: false,
                },
                crate::runner::sandbox::Bind {
                    from: home.join(".cli/login.json"),
                    at: home.join(".cli/login.json"),
                    read_only: true,
                },
            ],
            ..SandboxPolicy::default()
        };
        let a = args(&policy, &dir.path().join("work"), false, None);
        let text = |p: &std::path::Path| p.display().to_string();
        let at = |flag: &str, from: &std::path::Path, to: &std::path::Path| {
            a.windows(3)
                .position(|w| w[0] == flag && w[1] == text(from) && w[2] == text(to))
                .unwrap_or_else(|| panic!("{flag} {} {} in {a:?}", from.display(), to.display()))
        };
        let cli = home.join(".cli");
        let login = cli.join("login.json");
        // The host user's folder, the data folder hidden, then the context's folder over the
        // host user's, then the login read-only over it.
        let hidden = a
            .windows(2)
            .position(|w| w[0] == "--tmpfs" && w[1] == text(&data))
            .unwrap();
        assert!(at("--bind", &cli, &cli) < hidden);
        assert!(hidden < at("--bind", &mine, &cli));
        assert!(at("--bind", &mine, &cli) < at("--ro-bind", &login, &login));
    }

    #[test]
    fn a_task_sees_its_own_workspace_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data/workspaces");
        let mine = root.join("aaa/repo");
        let attachments = mine.join(".agent-host/attachments");
        let own = attachments.join("t1");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::create_dir_all(root.join("bbb/repo")).unwrap();
        // The source repository, under a folder the sandbox hides (as /tmp is).
        let objects = dir.path().join("data/src/.git/objects");
        std::fs::create_dir_all(&objects).unwrap();
        // What the source's own alternates name: a repository it was cloned from with
        // `--shared` (shown), one in the hidden data folder and the folder around the
        // workspaces (neither shown).
        let lent = dir.path().join("lent/objects");
        let in_data = dir.path().join("data/other/objects");
        for d in [&lent, &in_data] {
            std::fs::create_dir_all(d).unwrap();
        }
        let policy = SandboxPolicy {
            hide: vec![dir.path().join("data"), attachments.clone()],
            reveal: vec![own.clone()],
            workspace: Some(crate::runner::sandbox::WorkspaceMount {
                borrowed: vec![
                    objects.clone(),
                    lent.clone(),
                    in_data.clone(),
                    dir.path().to_path_buf(),
                ],
                source: Some(dir.path().join("data/src")),
                root: root.clone(),
                checkout: mine.clone(),
            }),
            ..SandboxPolicy::default()
        };
        let a = args(&policy, &mine, false, None);
        let text = |p: &std::path::Path| p.display().to_string();
        let op = |flag: &str, p: &std::path::Path| {
            a.windows(2)
                .rposition(|w| w[0] == flag && w[1] == text(p))
                .unwrap_or_else(|| panic!("{flag} {} in {a:?}", p.display()))
        };
        // The data folder hidden, then all workspaces, then this one shown again, then the
        // other tasks' attachments in it hidden again, then this task's own.
        assert!(op("--tmpfs", &dir.path().join("data")) < op("--tmpfs", &root));
        assert!(op("--tmpfs", &root) < op("--bind", &mine));
        assert!(op("--bind", &mine) < op("--tmpfs", &attachments));
        // The objects the checkout borrows, read-only, after the folder that hid them.
        assert!(op("--tmpfs", &dir.path().join("data")) < op("--ro-bind", &objects));
        assert!(!a
            .windows(2)
            .any(|w| w[0] == "--bind" && w[1] == text(&objects)));
        assert!(op("--tmpfs", &attachments) < op("--bind", &own));
        assert!(op("--tmpfs", &root) < op("--ro-bind", &lent));
        for hidden in [&in_data, &dir.path().to_path_buf()] {
            assert!(
                !a.windows(2)
                    .any(|w| w[0] == "--ro-bind" && w[1] == text(hidden)),
                "{} shown in {a:?}",
                hidden.display()
            );
        }
        assert!(!a.iter().any(|x| x.contains("bbb")));
        // The source, hidden with the data folder, shown read-only before the workspaces'
        // folder is emptied (nothing writable where the agent looks for it).
        let src = dir.path().join("data/src");
        assert!(op("--tmpfs", &dir.path().join("data")) < op("--ro-bind", &src));
        assert!(op("--ro-bind", &src) < op("--tmpfs", &root));
    }
}
