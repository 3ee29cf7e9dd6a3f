//! The agents the tests run and their processes: the fake-agent link, pids and process
//! groups, what a host recorded of them in its SQLite store.

use std::path::PathBuf;

use super::wait::{eventually, ready, WAIT};

/// A program that runs the demo agent (`agent-host fake-agent ARGS...`), for the adapters that
/// run a program of their own: a link named `fake-agent` to the test build's binary, which
/// runs the demo agent when called by that name. A link (not a script that execs the binary)
/// so that the sandbox, which shows the program and what its links lead to, shows the binary
/// too wherever the clone lies (`/tmp` included).
pub fn fake_agent() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let path = dir.join("fake-agent");
        let tmp = dir.join(format!("fake-agent.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_agent-host"), &tmp)
            .expect("link fake-agent to the test binary");
        std::fs::rename(&tmp, &path).expect("rename the fake-agent link");
        path
    })
    .clone()
}

/// True if a process with this pid exists and is not a zombie.
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let after = s
                .rsplit_once(')')
                .map(|(_, r)| r.trim_start())
                .unwrap_or("");
            !after.starts_with('Z')
        }
        Err(_) => false,
    }
}

/// The process group of a live process.
pub fn pgrp_of(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = s.rsplit_once(')')?.1;
    after.split_whitespace().nth(2)?.parse().ok()
}

/// What a host recorded in its SQLite store `db` about running CLIs: the task ids that have
/// a process group recorded, and the contexts bound to a CLI session. Read without waiting
/// for the host's writer (an empty answer while the database is being created).
pub fn recorded(db: &std::path::Path) -> Recorded {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY;
    let Ok(c) = rusqlite::Connection::open_with_flags(db, flags) else {
        return Recorded::default();
    };
    let column = |sql: &str| -> Vec<String> {
        let Ok(mut stmt) = c.prepare(sql) else {
            return Vec::new();
        };
        stmt.query_map([], |r| r.get::<_, String>(0))
            .map(|rows| rows.flatten().collect())
            .unwrap_or_default()
    };
    Recorded {
        process_groups: column("SELECT task_id FROM processes"),
        sessions: column("SELECT context_id FROM contexts WHERE session_id != ''"),
    }
}

/// See [`recorded`].
#[derive(Debug, Default)]
pub struct Recorded {
    /// Tasks whose CLI's process group is recorded.
    pub process_groups: Vec<String>,
    /// Contexts whose CLI session is recorded.
    pub sessions: Vec<String>,
}

/// The pid a fake-agent `grandchild` run reports ("grandchild pid N") in `text` (a task's
/// text, or a whole task as JSON).
pub fn grandchild_pid(text: &str) -> Option<u32> {
    text.split("grandchild pid ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Returns once process `pid` has ended (gone, or a zombie); panics after [`WAIT`] with `what`.
pub async fn process_ends(what: &str, pid: u32) {
    eventually(what, WAIT, async || ready(!process_alive(pid), pid)).await;
}

/// Returns once no process of these process groups is left; panics after [`WAIT`] with
/// `what` and the groups still alive.
pub async fn groups_end(what: &str, groups: &[u32]) {
    eventually(what, WAIT, async || {
        let alive: Vec<u32> = groups
            .iter()
            .copied()
            .filter(|g| agent_host::runner::group_alive(*g))
            .collect();
        ready(alive.is_empty(), alive)
    })
    .await;
}
