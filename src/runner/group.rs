//! Process groups: is one still alive, signal its members.

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Sends `signal` to every live member of group `pgid` but its leader.
#[cfg(target_os = "linux")]
pub(crate) fn signal_group_members(pgid: u32, signal: Signal) {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == pgid {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if parse_stat(&stat).is_some_and(|(_, g)| g == pgid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), signal);
        }
    }
}

/// The live processes of group `pgid` (its leader too).
#[cfg(target_os = "linux")]
pub(crate) fn members(pgid: u32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
                .is_some_and(|(state, g)| g == pgid && state != 'Z')
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn members(_pgid: u32) -> Vec<i32> {
    Vec::new()
}

/// Whether process `pid` is bubblewrap (its command name), or gone.
pub(crate) fn is_bubblewrap(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(comm) => comm.trim_end() == "bwrap",
        Err(_) => true,
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn signal_group_members(pgid: u32, signal: Signal) {
    let _ = killpg(Pid::from_raw(pgid as i32), signal);
}

/// true if any non-zombie process has process group id `pgid`.
///
/// The kernel answers first (`killpg(pgid, 0)`): no process in the group at all, which is
/// the common case once a CLI has exited and been reaped, costs one system call. Only when
/// the group still has a member is `/proc` scanned, to tell a zombie from a live process;
/// that scan reads every process's `stat` (milliseconds with a thousand processes), so doing
/// it at every turn's end made each task cost that much host CPU.
#[cfg(target_os = "linux")]
pub fn group_alive(pgid: u32) -> bool {
    if !killpg_probe(pgid) {
        return false;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // The process may vanish between listing and reading: then it is not alive.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, group)) = parse_stat(&stat) {
            if group == pgid && state != 'Z' && state != 'X' {
                return true;
            }
        }
    }
    false
}

/// true if any process has process group id `pgid` (zombies included: no portable way to tell).
#[cfg(not(target_os = "linux"))]
pub fn group_alive(pgid: u32) -> bool {
    killpg_probe(pgid)
}

fn killpg_probe(pgid: u32) -> bool {
    // EPERM means the group exists but belongs to someone else.
    !matches!(killpg(Pid::from_raw(pgid as i32), None), Err(Errno::ESRCH))
}

/// From `/proc/PID/stat` ("pid (comm) state ppid pgrp ..."): the state and the process group.
/// `comm` may contain spaces and parentheses, so fields are counted after its last `)`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) fn parse_stat(stat: &str) -> Option<(char, u32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}
