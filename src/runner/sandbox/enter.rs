//! `agent-host-enter`: the step a root task's sandbox runs just before the task's program
//! (a user namespace of its own, see [`super::setup::Steps::own_userns`]), as a program of
//! its own with no C library (`helpers/enter.rs`, built by `build.rs` and embedded here).
//!
//! Why: the setup mode does the same step, but it is a Rust program on glibc, whose start
//! costs 0.7–0.9 ms of CPU on a virtual machine (`cpuid`, emulated, some hundred times)
//! where the kernel's exec costs 0.04 ms; this step runs at every sandboxed start of a root
//! host, and the program that makes it needs six system calls.
//!
//! The host writes the embedded program once, at its start, into its data folder (a file
//! named after its content, so hosts of different versions keep theirs), tries it
//! (`--probe`: a folder on a `noexec` mount fails there, not in a task), and bubblewrap
//! shows it read-only in each root task's sandbox. Where it was not built or cannot run, the
//! setup mode does the step, as before.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where the program is shown inside bubblewrap's sandbox (its `/run` is the sandbox's own).
pub const IN_SANDBOX: &str = "/run/agent-host/enter";

#[cfg(agent_host_enter)]
const PROGRAM: Option<&[u8]> = Some(include_bytes!(concat!(
    env!("OUT_DIR"),
    "/agent-host-enter"
)));
#[cfg(not(agent_host_enter))]
const PROGRAM: Option<&[u8]> = None;

static READY: OnceLock<Option<PathBuf>> = OnceLock::new();

/// The program, written and tried, when there is one to use (after [`prepare`]) and it is
/// still there (a data folder cleaned while the host runs: the setup mode again).
pub fn program() -> Option<&'static Path> {
    READY
        .get()
        .and_then(|p| p.as_deref())
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file()))
}

/// Writes the program into `dir` (a folder that exists) and tries it; later calls do nothing.
/// Only a root host with bubblewrap needs it (the step is for tasks that are root in its
/// sandbox). What fails is logged, and the setup mode does the step instead.
pub fn prepare(dir: &Path) {
    READY.get_or_init(|| {
        let bytes = PROGRAM?;
        if !nix::unistd::geteuid().is_root() || super::Capabilities::get().bwrap.is_none() {
            return None;
        }
        match write_and_try(dir, bytes) {
            Ok(path) => Some(path),
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "agent-host-enter not used: the setup mode enters a root task's user namespace");
                None
            }
        }
    });
}

/// The file of `bytes` in `dir` (written unless the same is there), tried.
fn write_and_try(dir: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(format!("agent-host-enter-{:016x}", fnv1a(bytes)));
    let same = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file())
        && std::fs::read(&path).is_ok_and(|b| b == bytes);
    if !same {
        // Its user's only, as everything in the data folder (the task that runs it is
        // root, mapped to the host's root).
        let mut tmp = tempfile::Builder::new()
            .prefix(".agent-host-enter")
            .tempfile_in(dir)?;
        tmp.write_all(bytes)?;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o700))?;
        tmp.as_file().sync_all()?;
        tmp.persist(&path).map_err(|e| e.error)?;
    }
    let probe = probe(&path)?;
    if !probe.success() {
        return Err(std::io::Error::other(format!(
            "{} --probe: {probe}",
            path.display()
        )));
    }
    Ok(path)
}

/// Runs `path --probe`. A file just written may be "busy" for a moment: a process forked
/// meanwhile by another thread of this one holds its descriptor until its own exec; tried
/// again then, for up to a second.
fn probe(path: &Path) -> std::io::Result<std::process::ExitStatus> {
    let mut tries = 0;
    loop {
        let run = std::process::Command::new(path)
            .arg("--probe")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
        match run {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// FNV-1a, 64 bits: a name for the file's content (not a security measure: the folder is
/// the host's own).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The program written out into a fresh folder.
    fn written() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let bytes = PROGRAM.expect("agent-host-enter is built on this machine (build.rs)");
        let path = write_and_try(dir.path(), bytes).expect("written and tried");
        (dir, path)
    }

    fn run(program: &Path, args: &[&str]) -> (i32, String, String) {
        let o = std::process::Command::new(program)
            .args(args)
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    #[test]
    fn it_enters_a_user_namespace_of_its_own_and_runs_the_program() {
        let (_dir, enter) = written();
        let script = "cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups; \
                      readlink /proc/self/ns/user; echo \"$@\"";
        // Looked up in PATH, with its arguments.
        let (code, out, err) = run(&enter, &["sh", "-c", script, "sh", "a b", "c"]);
        if nix::unistd::geteuid().is_root() {
            assert_eq!(code, 0, "{err}");
            let words: Vec<&str> = out.split_whitespace().collect();
            assert_eq!(words[..7], ["0", "0", "1", "0", "0", "1", "deny"], "{out}");
            let own = std::fs::read_link("/proc/self/ns/user").unwrap();
            assert_ne!(words[7], own.to_string_lossy(), "a namespace of its own");
            assert!(out.ends_with("a b c\n"), "{out}");
        } else {
            // Only a task that is root in its sandbox gets one: refused before the program.
            assert_eq!(code, 125, "{out}{err}");
            assert!(err.contains("only a task that is root"), "{err}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn a_program_it_cannot_run_is_named_with_the_shells_exit_codes() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("\n*** SKIPPED: agent-host-enter runs programs only as root ***\n");
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs the tests as root"
            );
            return;
        }
        let (dir, enter) = written();
        let (code, _, err) = run(&enter, &["/no/such/program"]);
        assert_eq!(code, 127, "{err}");
        assert!(
            err.contains("cannot run /no/such/program: No such file or directory"),
            "{err}"
        );
        let (code, _, err) = run(&enter, &["no-such-program-anywhere"]);
        assert_eq!(code, 127, "{err}");
        let plain = dir.path().join("plain.txt");
        std::fs::write(&plain, "not a program").unwrap();
        let (code, _, err) = run(&enter, &[plain.to_str().unwrap()]);
        assert_eq!(code, 126, "{err}");
        assert!(err.contains("Permission denied"), "{err}");
        // By hand: what it is for, exit 2; the probe: exit 0, nothing said.
        let (code, _, err) = run(&enter, &[]);
        assert_eq!(code, 2);
        assert!(err.contains("not meant to be run by hand"), "{err}");
        assert_eq!(run(&enter, &["--probe"]), (0, String::new(), String::new()));
    }

    #[test]
    fn the_file_is_named_after_its_content_and_written_once() {
        let (dir, path) = written();
        let first = std::fs::metadata(&path).unwrap().modified().unwrap();
        let again = write_and_try(dir.path(), PROGRAM.unwrap()).unwrap();
        assert_eq!(again, path);
        assert_eq!(std::fs::metadata(&path).unwrap().modified().unwrap(), first);
        // Altered: written again.
        std::fs::write(&path, b"#!/bin/sh\nexit 1\n").unwrap();
        let again = write_and_try(dir.path(), PROGRAM.unwrap()).unwrap();
        assert_eq!(std::fs::read(&again).unwrap(), PROGRAM.unwrap());
    }
}
