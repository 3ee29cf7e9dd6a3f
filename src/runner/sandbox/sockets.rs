//! The host's Unix sockets that lie outside the folders the sandbox empties.
//!
//! `/run`, `/var/run` and `/tmp` are empty in a sandbox, but a socket can be bound anywhere
//! (`/var/lib/...`, `/var/snap/lxd/...`, a project folder), and the root file system is
//! shown read-only, which does not stop a `connect` to a socket on it. So at each sandbox's
//! making, every pathname socket bound in the host's network namespace (the kernel lists
//! them in `/proc/net/unix`) that the task would otherwise see gets `/dev/null` bound over
//! it: a `connect` there is refused. Sockets bound after the task started, or by processes
//! of other network namespaces (containers) outside the emptied folders, are not listed
//! there then; their file modes are what protects them (docs/network.md says so).

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// The absolute paths of the pathname sockets `/proc/net/unix` lists (abstract and unnamed
/// ones left out), each once.
pub fn listed() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/net/unix")
        .map(|t| parse(&t))
        .unwrap_or_default()
}

/// The socket paths of `/proc/net/unix`'s text: after seven fields (`Num RefCount Protocol
/// Flags Type St Inode`) comes the path, which may hold spaces.
fn parse(text: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut rest = line.trim_start();
            for _ in 0..7 {
                let end = rest.find(char::is_whitespace)?;
                rest = rest[end..].trim_start();
            }
            rest.starts_with('/').then(|| PathBuf::from(rest))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Of `listed`, those to cover in a sandbox: still a socket on the host (not a link, not
/// gone), and not under one of the folders `shown_elsewhere` says the sandbox empties or
/// hides anyway.
pub fn to_cover(listed: Vec<PathBuf>, shown_elsewhere: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    listed
        .into_iter()
        .filter(|p| !shown_elsewhere(p))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_come_from_the_eighth_field_and_abstract_ones_are_left_out() {
        let text = "Num       RefCount Protocol Flags    Type St Inode Path\n\
            0000000000000000: 00000002 00000000 00010000 0001 01 22796 /run/systemd/notify\n\
            0000000000000000: 00000002 00000000 00010000 0001 01  1234 /var/lib/a b.sock\n\
            0000000000000000: 00000002 00000000 00000000 0002 01 33333 @/tmp/.X11-unix/X0\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 44444\n\
            0000000000000000: 00000003 00000000 00000000 0001 03 55555 /run/systemd/notify\n";
        assert_eq!(
            parse(text),
            [
                PathBuf::from("/run/systemd/notify"),
                PathBuf::from("/var/lib/a b.sock")
            ]
        );
    }

    #[test]
    fn only_sockets_not_shown_elsewhere_are_covered() {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let gone = dir.path().join("gone.sock");
        let all = vec![sock.clone(), file, gone];
        assert_eq!(
            to_cover(all.clone(), |_| false),
            std::slice::from_ref(&sock)
        );
        assert!(to_cover(all, |p| p.starts_with(dir.path())).is_empty());
        assert!(listed().contains(&sock), "the kernel lists the socket");
    }
}
