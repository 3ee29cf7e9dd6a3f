//! Folders bound into a task's sandbox that an agent can reach, held by descriptor.
//!
//! bubblewrap's `--bind SRC DEST` resolves `SRC` when it mounts, following links. Some
//! sources lie in folders an agent may write: the task's working directory (a folder an
//! agent of another context shares, or a context folder below it), the task's own
//! attachments folder inside it, a context's checkout. An agent that replaced one of them, or
//! a folder above it, by a link (to `/`, to the data folder) would have the host mount that
//! target writable into the next sandbox made from it.
//!
//! So the setup step, which runs as the host's user just before bubblewrap, opens each such
//! source itself, one path component at a time without following any link (a link anywhere
//! on the way fails the task's start), and hands bubblewrap the open folder instead of its
//! path (`--bind-fd FD DEST`, bubblewrap 0.8): what is mounted is the folder that was checked,
//! whatever the path names by then. The descriptors are the setup step's own, inherited by
//! bubblewrap's exec only; nothing else of the host holds them.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use nix::fcntl::{fcntl, openat, FcntlArg, FdFlag, OFlag};
use nix::sys::stat::{fstat, Mode, SFlag};

/// Opens `path` (absolute) as an `O_PATH` descriptor, refusing a link at any component.
/// The descriptor survives an exec (bubblewrap inherits it).
pub(super) fn open_without_links(path: &Path) -> io::Result<OwnedFd> {
    if !path.is_absolute() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not an absolute path", path.display()),
        ));
    }
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let raw = nix::fcntl::open("/", flags | OFlag::O_DIRECTORY, Mode::empty())?;
    // SAFETY: `open` just returned this descriptor, which nothing else owns.
    let mut at = unsafe { OwnedFd::from_raw_fd(raw) };
    for c in path.components() {
        let name = match c {
            Component::RootDir => continue,
            Component::Normal(n) => n,
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is not a plain path", path.display()),
                ))
            }
        };
        let raw = openat(Some(at.as_raw_fd()), name, flags, Mode::empty())?;
        // SAFETY: as above.
        let next = unsafe { OwnedFd::from_raw_fd(raw) };
        let kind = SFlag::from_bits_truncate(fstat(next.as_raw_fd())?.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFLNK {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is a link (in {}): not bound into the sandbox",
                    Path::new(name).display(),
                    path.display()
                ),
            ));
        }
        at = next;
    }
    fcntl(at.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::empty()))?;
    Ok(at)
}

/// `command` (bubblewrap's) with each `--bind SRC DEST` / `--ro-bind SRC DEST` whose `SRC`
/// is one of `pins` turned into `--bind-fd FD DEST` / `--ro-bind-fd FD DEST`, `FD` the
/// source opened by [`open_without_links`], once per bind (bubblewrap closes a descriptor it
/// has bound). Returns the command and the descriptors, to keep open until the exec.
pub(super) fn pin_binds(
    mut command: Vec<OsString>,
    pins: &[std::path::PathBuf],
) -> io::Result<(Vec<OsString>, Vec<OwnedFd>)> {
    let mut held = Vec::new();
    for pin in pins {
        let mut i = 0;
        while i + 2 < command.len() {
            let flag = match command[i].as_bytes() {
                b"--bind" => "--bind-fd",
                b"--ro-bind" => "--ro-bind-fd",
                b"--" => break,
                _ => {
                    i += 1;
                    continue;
                }
            };
            if Path::new(&command[i + 1]) != pin.as_path() {
                i += 3;
                continue;
            }
            let f = open_without_links(pin)?;
            let n = f.as_raw_fd();
            held.push(f);
            command[i] = flag.into();
            command[i + 1] = n.to_string().into();
            i += 3;
        }
    }
    Ok((command, held))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_on_the_way_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real/sub");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(dir.path().join("elsewhere/sub")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), dir.path().join("link")).unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        assert!(open_without_links(&base.join("real/sub")).is_ok());
        let err = open_without_links(&base.join("link/sub")).unwrap_err();
        assert!(err.to_string().contains("link is a link"), "{err}");
        // The last component a link: refused too (plain `open` would follow it).
        assert!(open_without_links(&base.join("link")).is_err());
        assert!(open_without_links(Path::new("relative")).is_err());
    }

    #[test]
    fn binds_of_a_pinned_source_take_its_descriptor() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let work = base.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let w = work.display().to_string();
        let command: Vec<OsString> = [
            "bwrap",
            "--ro-bind",
            "/",
            "/",
            "--bind",
            &w,
            &w,
            "--chdir",
            &w,
            "--ro-bind",
            &w,
            &w,
            "--",
            "prog",
            "--bind",
            &w,
            &w,
        ]
        .iter()
        .map(OsString::from)
        .collect();
        let (out, held) = pin_binds(command, std::slice::from_ref(&work)).unwrap();
        // One descriptor per bind: bubblewrap closes each it has bound.
        assert_eq!(held.len(), 2);
        let fd = |i: usize| held[i].as_raw_fd().to_string();
        let text: Vec<String> = out
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(text[4..7], ["--bind-fd".to_string(), fd(0), w.clone()]);
        assert_eq!(text[9..12], ["--ro-bind-fd".to_string(), fd(1), w.clone()]);
        // Not the source of another bind, not past the program's `--`.
        assert_eq!(text[1..4], ["--ro-bind", "/", "/"]);
        assert_eq!(text[14..], ["--bind".to_string(), w.clone(), w]);
        // Its descriptor survives the exec.
        let flags = fcntl(held[0].as_raw_fd(), FcntlArg::F_GETFD).unwrap();
        assert_eq!(flags & FdFlag::FD_CLOEXEC.bits(), 0);
    }
}
