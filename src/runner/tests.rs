//! Tests that start real child processes (`/bin/sh -c ...`). Every test runs under a timeout;
//! a failing test still cleans up, because dropping a `Process` SIGKILLs its group.

use super::*;
use std::future::Future;
use std::path::PathBuf;

const LIMIT: Duration = Duration::from_secs(20);

async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("test timed out")
}

fn sh(script: &str, io: IoMode, stdin: StdinMode) -> SpawnSpec {
    SpawnSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        io,
        stdin,
        max_line_bytes: 16 << 20,
        sandbox: None,
    }
}

fn pipes(script: &str) -> SpawnSpec {
    sh(script, IoMode::Pipes, StdinMode::Null)
}

fn line(s: &str) -> Output {
    Output::Line(s.to_string())
}

async fn collect(p: &mut Process) -> Vec<Output> {
    let mut all = Vec::new();
    while let Some(o) = p.next().await {
        all.push(o);
    }
    all
}

/// The next stdout line, skipping anything else.
async fn next_line(p: &mut Process) -> String {
    loop {
        match p.next().await {
            Some(Output::Line(l)) => return l,
            Some(_) => continue,
            None => panic!("EOF while waiting for a line"),
        }
    }
}

#[tokio::test]
async fn pipes_lines_are_cleaned_and_final_line_kept() {
    within(async {
        let mut p = Process::spawn(pipes(
            r#"printf 'a\r\n\033[1;31mred\033[0m\r\n\r\n{"k":1}\nlast'"#,
        ))
        .expect("spawn");
        let out = collect(&mut p).await;
        assert_eq!(
            out,
            vec![line("a"), line("red"), line(r#"{"k":1}"#), line("last")]
        );
        let exit = p.wait(Duration::from_secs(1)).await;
        assert_eq!(
            exit,
            ExitInfo {
                code: Some(0),
                signal: None
            }
        );
    })
    .await;
}

#[tokio::test]
async fn pipes_long_line_becomes_too_long() {
    within(async {
        let mut spec = pipes("head -c 100000 /dev/zero | tr '\\0' x; echo; echo next");
        spec.max_line_bytes = 1000;
        let mut p = Process::spawn(spec).expect("spawn");
        let out = collect(&mut p).await;
        assert_eq!(out, vec![Output::TooLong { bytes: 100_000 }, line("next")]);
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

#[tokio::test]
async fn pipes_stderr_lines() {
    within(async {
        let mut p = Process::spawn(pipes("echo out; echo 'err\r' >&2; exit 3")).expect("spawn");
        let mut out = collect(&mut p).await;
        out.sort_by_key(|o| format!("{o:?}"));
        assert_eq!(out, vec![line("out"), Output::Stderr("err".into())]);
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(3));
    })
    .await;
}

#[tokio::test]
async fn pipes_stdin_written_then_closed() {
    within(async {
        let stdin = StdinMode::Write {
            initial: b"hello\nworld".to_vec(),
            keep_open: false,
        };
        let mut p = Process::spawn(sh("cat", IoMode::Pipes, stdin)).expect("spawn");
        assert_eq!(collect(&mut p).await, vec![line("hello"), line("world")]);
        assert!(matches!(
            p.write_stdin(b"x").await,
            Err(RunnerError::StdinClosed)
        ));
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(0));
    })
    .await;
}

#[tokio::test]
async fn pipes_stdin_kept_open() {
    within(async {
        let stdin = StdinMode::Write {
            initial: b"one\n".to_vec(),
            keep_open: true,
        };
        let script = "read a; echo got $a; read b; echo got $b; cat; echo eof";
        let mut p = Process::spawn(sh(script, IoMode::Pipes, stdin)).expect("spawn");
        assert_eq!(next_line(&mut p).await, "got one");
        p.write_stdin(b"two\n").await.expect("write");
        assert_eq!(next_line(&mut p).await, "got two");
        p.close_stdin();
        p.close_stdin();
        assert_eq!(next_line(&mut p).await, "eof");
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(0));
    })
    .await;
}

#[tokio::test]
async fn pipes_null_stdin_is_eof() {
    within(async {
        let mut p = Process::spawn(pipes("cat; echo done")).expect("spawn");
        assert_eq!(collect(&mut p).await, vec![line("done")]);
        assert!(matches!(
            p.write_stdin(b"x").await,
            Err(RunnerError::StdinClosed)
        ));
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

#[tokio::test]
async fn environment_is_exactly_the_spec() {
    within(async {
        let mut spec = pipes("echo \"[$HOME][$FOO]\"; pwd");
        spec.env.push(("FOO".into(), "bar".into()));
        spec.cwd = "/".into();
        let mut p = Process::spawn(spec).expect("spawn");
        assert_eq!(collect(&mut p).await, vec![line("[][bar]"), line("/")]);
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

#[tokio::test]
async fn spawn_failure_names_the_program() {
    let mut spec = pipes("");
    spec.program = "/nonexistent/agent-cli".into();
    let err = Process::spawn(spec).expect_err("must fail");
    assert!(matches!(err, RunnerError::Spawn { .. }));
    assert!(err.to_string().contains("/nonexistent/agent-cli"), "{err}");
}

#[tokio::test]
async fn pid_is_group_leader() {
    within(async {
        let mut p = Process::spawn(pipes(
            "ps -o pgid= -p $$ 2>/dev/null || cut -d' ' -f5 /proc/$$/stat",
        ))
        .expect("spawn");
        let pgid = next_line(&mut p).await;
        assert_eq!(pgid.trim(), p.pid().to_string());
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

/// Whether `pid` still runs (not a zombie) as a member of group `pgid`.
fn process_alive_in_group(pid: u32, pgid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => matches!(parse_stat(&stat), Some((state, g)) if g == pgid && state != 'Z'),
        Err(_) => false,
    }
}

fn pty_open(script: &str) -> SpawnSpec {
    let stdin = StdinMode::Write {
        initial: Vec::new(),
        keep_open: true,
    };
    sh(script, IoMode::Pty, stdin)
}

#[tokio::test]
async fn pty_child_sees_a_raw_wide_terminal() {
    within(async {
        let script = "test -t 0 && test -t 1 && test -t 2 && echo tty; stty size; stty -a";
        let mut p = Process::spawn(pty_open(script)).expect("spawn");
        p.close_stdin();
        let out = collect(&mut p).await;
        assert_eq!(out.first(), Some(&line("tty")), "{out:?}");
        assert_eq!(out.get(1), Some(&line("50 500")), "{out:?}");
        let settings = format!("{out:?}");
        for flag in ["-echo ", "-icanon", "-opost"] {
            assert!(settings.contains(flag), "missing {flag} in {settings}");
        }
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(0));
    })
    .await;
}

#[tokio::test]
async fn pty_input_is_not_echoed_and_long_lines_arrive_intact() {
    within(async {
        let script = "read line; echo \"len ${#line}\"; read x; echo \"got $x\"";
        let mut p = Process::spawn(pty_open(script)).expect("spawn");
        let mut input = vec![b'a'; 4000];
        input.push(b'\n');
        p.write_stdin(&input).await.expect("write");
        p.write_stdin(b"second\n").await.expect("write");
        // Only the child's own output: an echo would show up as a line of 'a's.
        let out = collect(&mut p).await;
        assert_eq!(out, vec![line("len 4000"), line("got second")]);
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(0));
    })
    .await;
}

#[tokio::test]
async fn pty_prompt_without_newline_is_delivered_after_a_quiet_moment() {
    within(async {
        let script = "printf 'Apply the change? [y/N] '; read answer; echo \"got $answer\"";
        let mut p = Process::spawn(pty_open(script)).expect("spawn");
        assert_eq!(next_line(&mut p).await, "Apply the change? [y/N] ");
        p.write_stdin(b"y\n").await.expect("write");
        assert_eq!(next_line(&mut p).await, "got y");
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(0));
    })
    .await;
}

#[tokio::test]
async fn pty_merges_stderr_and_null_stdin() {
    within(async {
        let script = "echo out; echo err >&2; test -t 0 || echo notty; cat; echo done";
        let mut p = Process::spawn(sh(script, IoMode::Pty, StdinMode::Null)).expect("spawn");
        let out = collect(&mut p).await;
        assert_eq!(
            out,
            vec![line("out"), line("err"), line("notty"), line("done")]
        );
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

#[tokio::test]
async fn pty_initial_input() {
    within(async {
        let stdin = StdinMode::Write {
            initial: b"hi there\n".to_vec(),
            keep_open: false,
        };
        let mut p = Process::spawn(sh("read x; echo \"[$x]\"", IoMode::Pty, stdin)).expect("spawn");
        assert_eq!(collect(&mut p).await, vec![line("[hi there]")]);
        assert!(matches!(
            p.write_stdin(b"x").await,
            Err(RunnerError::StdinClosed)
        ));
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

async fn terminate_kills_background_children(io: IoMode) {
    let stdin = match io {
        IoMode::Pipes => StdinMode::Null,
        IoMode::Pty => StdinMode::Write {
            initial: Vec::new(),
            keep_open: true,
        },
    };
    let mut p = Process::spawn(sh("sleep 300 & echo $!; sleep 300", io, stdin)).expect("spawn");
    let grandchild: u32 = next_line(&mut p).await.trim().parse().expect("pid");
    assert!(process_alive_in_group(grandchild, p.pid()));
    let exit = p.terminate(Duration::from_secs(3)).await;
    assert_eq!(
        exit,
        ExitInfo {
            code: None,
            signal: Some(15)
        }
    );
    assert!(!group_alive(p.pid()));
    assert!(!process_alive_in_group(grandchild, p.pid()));
    // Everyone holding the output is gone, so the output ends.
    assert_eq!(collect(&mut p).await, vec![]);
    // Idempotent.
    assert_eq!(p.terminate(Duration::from_secs(3)).await, exit);
    assert_eq!(p.wait(Duration::from_secs(3)).await, exit);
}

#[tokio::test]
async fn terminate_pipes_kills_the_whole_group() {
    within(terminate_kills_background_children(IoMode::Pipes)).await;
}

#[tokio::test]
async fn terminate_pty_kills_the_whole_group() {
    within(terminate_kills_background_children(IoMode::Pty)).await;
}

#[tokio::test]
async fn terminate_escalates_to_sigkill_after_grace() {
    within(async {
        let mut p = Process::spawn(pipes("trap '' TERM; echo ready; sleep 300")).expect("spawn");
        assert_eq!(next_line(&mut p).await, "ready");
        let start = Instant::now();
        let exit = p.terminate(Duration::from_millis(300)).await;
        let took = start.elapsed();
        assert_eq!(
            exit,
            ExitInfo {
                code: None,
                signal: Some(9)
            }
        );
        assert!(took >= Duration::from_millis(300), "{took:?}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        assert!(!group_alive(p.pid()));
    })
    .await;
}

#[tokio::test]
async fn terminate_after_exit_is_harmless() {
    within(async {
        let mut p = Process::spawn(pipes("exit 7")).expect("spawn");
        assert_eq!(collect(&mut p).await, vec![]);
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(7));
        assert_eq!(p.terminate(Duration::from_secs(1)).await.code, Some(7));
    })
    .await;
}

#[tokio::test]
async fn wait_cleans_up_leftover_group_members() {
    within(async {
        let mut p = Process::spawn(pipes("sleep 300 & echo $!; exit 0")).expect("spawn");
        let grandchild: u32 = next_line(&mut p).await.trim().parse().expect("pid");
        assert!(process_alive_in_group(grandchild, p.pid()));
        let exit = p.wait(Duration::from_secs(2)).await;
        assert_eq!(
            exit,
            ExitInfo {
                code: Some(0),
                signal: None
            }
        );
        assert!(!group_alive(p.pid()));
        assert!(!process_alive_in_group(grandchild, p.pid()));
        // The background sleep held stdout open; now it is gone, the output ends.
        assert_eq!(collect(&mut p).await, vec![]);
    })
    .await;
}

#[tokio::test]
async fn drop_kills_the_group() {
    within(async {
        let mut p = Process::spawn(pipes("sleep 300 & echo $!; sleep 300")).expect("spawn");
        let grandchild: u32 = next_line(&mut p).await.trim().parse().expect("pid");
        assert!(process_alive_in_group(grandchild, p.pid()));
        let pgid = p.pid();
        assert!(group_alive(pgid));
        drop(p);
        while group_alive(pgid) || process_alive_in_group(grandchild, pgid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn next_is_cancel_safe() {
    within(async {
        let mut p = Process::spawn(pipes("sleep 0.3; echo late")).expect("spawn");
        let mut timeouts = 0;
        let got = loop {
            tokio::select! {
                o = p.next() => break o,
                _ = tokio::time::sleep(Duration::from_millis(20)) => timeouts += 1,
            }
        };
        assert!(timeouts > 0);
        assert_eq!(got, Some(line("late")));
        p.wait(Duration::from_secs(1)).await;
    })
    .await;
}

#[test]
fn parse_stat_handles_odd_names() {
    assert_eq!(parse_stat("12 (sh) S 1 12 12 0"), Some(('S', 12)));
    assert_eq!(parse_stat("13 (a (b) c) Z 12 12 12 0"), Some(('Z', 12)));
    assert_eq!(parse_stat("garbage"), None);
}

#[test]
fn group_alive_sees_ourselves_only() {
    let me = nix::unistd::getpgrp().as_raw() as u32;
    assert!(group_alive(me));
    // pid_max is at most 2^22 on Linux, so this group cannot exist.
    assert!(!group_alive(4_194_304 + 17));
}

/// The agent-host binary next to the test executable (target/debug/agent-host, whose
/// `fake-agent` subcommand is the demo agent), if built.
fn fake_agent() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("agent-host");
    bin.exists().then_some(bin)
}

fn fake_agent_spec(bin: &std::path::Path, prompt: &str) -> SpawnSpec {
    let stdin = StdinMode::Write {
        initial: Vec::new(),
        keep_open: true,
    };
    let mut spec = sh("", IoMode::Pipes, stdin);
    spec.program = bin.to_path_buf();
    spec.args = vec!["fake-agent".to_string(), prompt.to_string()];
    spec
}

/// Runner and fake-agent together, as the adapters use them. Skipped (with a note) when the
/// agent-host binary has not been built, e.g. by a bare `cargo test --lib`; fails then under
/// CI=true.
#[tokio::test]
async fn fake_agent_end_to_end() {
    let Some(bin) = fake_agent() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "fake_agent_end_to_end: target/debug/agent-host is not built"
        );
        eprintln!("SKIPPED fake_agent_end_to_end: build the agent-host binary first");
        return;
    };
    within(async {
        let mut p = Process::spawn(fake_agent_spec(&bin, "approval noise stderr")).expect("spawn");
        let mut seen = Vec::new();
        while let Some(o) = p.next().await {
            let asked = matches!(&o, Output::Line(l) if l.contains("approval_required"));
            seen.push(o);
            if asked {
                break;
            }
        }
        let allow = b"{\"type\":\"approval_response\",\"id\":\"appr-1\",\"decision\":\"allow\"}\n";
        p.write_stdin(allow).await.expect("write");
        let rest = collect(&mut p).await;
        assert!(seen
            .iter()
            .chain(&rest)
            .any(|o| matches!(o, Output::Stderr(_))));
        assert!(
            matches!(rest.last(), Some(Output::Line(l)) if l.contains("\"done\"")),
            "{rest:?}"
        );
        assert_eq!(p.wait(Duration::from_secs(1)).await.code, Some(0));

        let mut p = Process::spawn(fake_agent_spec(&bin, "grandchild")).expect("spawn");
        while !next_line(&mut p).await.contains("grandchild pid") {}
        let exit = p.terminate(Duration::from_secs(2)).await;
        assert_eq!(exit.signal, Some(15));
        assert!(!group_alive(p.pid()));

        let mut p = Process::spawn(fake_agent_spec(&bin, "ignore-sigterm")).expect("spawn");
        while !next_line(&mut p).await.contains("SIGTERM") {}
        let exit = p.terminate(Duration::from_millis(300)).await;
        assert_eq!(exit.signal, Some(9));

        let mut p = Process::spawn(fake_agent_spec(&bin, "crash")).expect("spawn");
        assert_eq!(p.wait(Duration::from_secs(1)).await.signal, Some(6));
    })
    .await;
}

/// Without an executable offering the setup mode (as in these tests), a contained child gets
/// its steps in a pre-exec hook: its file size limit and its cgroup before its program runs.
#[tokio::test]
async fn contained_child_has_its_limit_and_cgroup_from_its_start() {
    within(async {
        assert!(sandbox::setup::helper().is_none());
        let dir = tempfile::tempdir().expect("tempdir");
        let mut spec = pipes("grep 'Max file size' /proc/self/limits; cat /proc/self/cgroup");
        spec.cwd = dir.path().to_path_buf();
        spec.sandbox = Some(SandboxPolicy {
            mode: sandbox::Mode::Auto,
            limits: TaskLimits {
                file_size: Some(1 << 20),
                ..TaskLimits::default()
            },
            ..SandboxPolicy::default()
        });
        let mut p = Process::spawn(spec).expect("spawn");
        let out = collect(&mut p).await;
        assert_eq!(
            p.wait(Duration::from_secs(1)).await.code,
            Some(0),
            "{out:?}"
        );
        let lines: Vec<&str> = out
            .iter()
            .filter_map(|o| match o {
                Output::Line(l) => Some(l.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("Max file size") && l.contains("1048576")),
            "{out:?}"
        );
        // In every hierarchy that tracks it (v1 through `tasks`, v2 through `cgroup.procs`);
        // memory and CPU folders only come with a limit.
        use sandbox::cgroup::Kind;
        let tracking = sandbox::Capabilities::get()
            .cgroups
            .list
            .iter()
            .filter(|h| matches!(h.kind, Kind::Unified | Kind::Pids | Kind::Freezer))
            .count();
        let task = format!("agent-host-{}/task-", std::process::id());
        let joined = lines.iter().filter(|l| l.contains(&task)).count();
        assert_eq!(joined, tracking, "{out:?}");
    })
    .await;
}
