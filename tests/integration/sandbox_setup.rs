//! `agent-host __exec-setup STEPS -- PROGRAM ARGS`, how the runner starts a contained program
//! without forking the host: the program runs in the process the host started (same pid),
//! with the steps in force from its first instruction; a step that fails or a program that
//! cannot run ends it with 125 or 127 and a reason on stderr.

use std::process::{Command, Stdio};
use std::time::Duration;

use agent_host::runner::sandbox::{Capabilities, TaskLimits};

use super::common::limit;

/// Runs the setup mode with `args`; (its pid, exit code, stdout, stderr).
fn setup(args: &[&str]) -> (u32, Option<i32>, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .arg("__exec-setup")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the setup mode");
    let pid = child.id();
    let out = child.wait_with_output().expect("wait");
    (
        pid,
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `check` off the runtime's threads (it waits for processes that run in
/// milliseconds), within 20 s.
async fn off_runtime(check: impl FnOnce() + Send + 'static) {
    limit(async {
        tokio::time::timeout(Duration::from_secs(20), tokio::task::spawn_blocking(check))
            .await
            .expect("within 20 s")
            .expect("the test's thread");
    })
    .await;
}

const SHOW: &str = "echo pid=$$; cat /proc/self/cgroup; grep 'Max file size' /proc/self/limits";

#[tokio::test]
async fn the_program_runs_in_place_with_its_cgroup_and_limits() {
    off_runtime(|| {
        let caps = Capabilities::get();
        let cgroup = if caps.cgroups.list.is_empty() {
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "CI=true and no writable cgroup hierarchy"
            );
            eprintln!("*** no writable cgroup hierarchy: the join is not tried ***");
            None
        } else {
            Some(caps.cgroups.create(&TaskLimits::default()).expect("cgroup"))
        };
        let mut args: Vec<String> = Vec::new();
        for j in cgroup.iter().flat_map(|c| c.join_paths()) {
            args.push("--join".into());
            args.push(j.into_string().expect("utf-8 path"));
        }
        args.extend(["--fsize", "1048576", "--", "/bin/sh", "-c", SHOW].map(String::from));
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let (pid, code, out, err) = setup(&argv);
        // The program has exited: its cgroups are empty.
        if let Some(cg) = &cgroup {
            cg.remove();
        }
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            out.contains(&format!("pid={pid}\n")),
            "the program is the started process: {out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("Max file size") && l.contains("1048576")),
            "{out}"
        );
        if let Some(cg) = &cgroup {
            let base = format!("agent-host-{}/task-", std::process::id());
            assert_eq!(
                out.lines().filter(|l| l.contains(&base)).count(),
                cg.join_paths().len(),
                "in the task's cgroup of every hierarchy: {out}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_failed_step_or_a_missing_program_ends_it_with_a_reason() {
    off_runtime(|| {
        let (_, code, out, err) = setup(&[
            "--join",
            "/nonexistent/cgroup.procs",
            "--",
            "/bin/echo",
            "ran",
        ]);
        assert_eq!(code, Some(125), "{err}");
        assert!(out.is_empty(), "the program did not run: {out}");
        assert!(err.contains("cannot contain the task"), "{err}");

        let (_, code, _, err) = setup(&["--", "/nonexistent/program"]);
        assert_eq!(code, Some(127), "{err}");
        assert!(err.contains("/nonexistent/program"), "{err}");

        let (_, code, _, err) = setup(&["--unknown", "--", "/bin/true"]);
        assert_eq!(code, Some(125), "{err}");
    })
    .await;
}
