//! Process groups left behind by a host that died without cleaning up (SIGKILL, a crash):
//! each group is recorded with its leader's start time when it starts, and the next host
//! kills what is left of it. Only a host that holds the data folder's lock runs the sweep
//! (the store takes the lock when it opens), so what it finds recorded cannot belong to a
//! host still running; with several hosts on one PostgreSQL database, a host sweeps only the
//! groups of tasks it claimed (its own, or a dead host's on the same machine).

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// `/proc/PID/stat` fields after the command name: (state, pgrp, start time in ticks).
fn stat_fields(stat: &str) -> Option<(char, u32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // Field 3 of the file is the state; 5 the process group; 22 the start time.
    let state = fields.first()?.chars().next()?;
    let pgrp = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((state, pgrp, start))
}

/// When a process started (clock ticks since boot), to tell it from a later process that
/// got the same pid. None where /proc is not available.
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat).map(|f| f.2)
}

/// Whether a process with this pid exists (on this machine).
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match kill(Pid::from_raw(pid), None) {
        Ok(()) => true,
        // It exists, and belongs to another user.
        Err(e) => e == nix::errno::Errno::EPERM,
    }
}

/// SIGKILLs every live process of group `pgid` that started no earlier than the group's
/// leader did (`leader_start`): what a dead host's CLI left running. A process that got a
/// reused pid later cannot be in that group while the group still has members, and one
/// started before the leader is not ours. Returns how many processes were signalled.
pub fn kill_stale_group(pgid: u32, leader_start: u64) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, pgrp, start)) = stat_fields(&stat) {
            let ours = pgrp == pgid && start >= leader_start && state != 'Z' && state != 'X';
            if ours && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_recorded_group_is_killed_and_others_are_left_alone() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 300 & sleep 300"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let start = start_ticks(pgid).expect("start time");
        // A later start time than the leader's does not match what we recorded.
        assert_eq!(kill_stale_group(pgid, start + 1_000_000), 0);
        assert!(crate::runner::group_alive(pgid));
        assert!(kill_stale_group(pgid, start) >= 2);
        let _ = child.wait();
        for _ in 0..100 {
            if !crate::runner::group_alive(pgid) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!crate::runner::group_alive(pgid));
    }

    #[test]
    fn stat_lines_with_odd_command_names() {
        let line = "123 (a (weird) name) S 1 123 123 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(stat_fields(line), Some(('S', 123, 987654)));
    }
}
