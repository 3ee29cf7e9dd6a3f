//! agent-host as a command-line tool: the `call` renderer prints every text exactly once
//! (answering approvals 200 times), every command ends normally on a closed stdout, shell
//! completions and the man page, the index at `GET /`, and the client's errors and hints.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use agent_host::cli::call::{run_call_to, CallArgs, ConnectArgs};
use agent_host::client::{collect, Client, Request};
use agent_host::protocol::v1::{SendMessageResponse, Task, TaskState};
use futures::StreamExt;

use crate::common::{limit, limit_to, until, Options, TestServer, WAIT};

/// The `result` artifact's text.
fn result_text(t: &Task) -> String {
    t.artifacts
        .iter()
        .find(|a| a.name.as_deref() == Some("result"))
        .map(|a| a.parts.iter().filter_map(|p| p.text.as_deref()).collect())
        .unwrap_or_default()
}

fn call_args(base: &str, message: &str, task: Option<&str>) -> CallArgs {
    CallArgs {
        url: base.to_string(),
        message: message.to_string(),
        context: None,
        task: task.map(str::to_string),
        cwd: None,
        budget: None,
        context_budget: None,
        on_budget: None,
        approvals: None,
        no_stream: false,
        apply: false,
        fetch: false,
        cancel_on_interrupt: false,
        connect: ConnectArgs {
            token: None,
            binding: None,
            a2a_version: None,
            json: false,
        },
    }
}

/// One approval answered with `call URL --task ID yes`: what it printed on stdout, and the
/// task's result text.
async fn answer_one(s: &TestServer, client: &Client, prompt: &str) -> (String, String) {
    let events = client.stream(Request::text(prompt)).await.expect("stream");
    let events = collect(events).await.expect("events");
    let last = events.last().expect("an event");
    assert_eq!(last.state(), Some(TaskState::InputRequired), "{last:?}");
    let id = last.task_id().expect("task id").to_string();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = run_call_to(call_args(&s.base, "yes", Some(&id)), &mut out, &mut err).await;
    let err = String::from_utf8_lossy(&err);
    assert_eq!(code, 0, "{err}");
    let task = client.get_task(&id).await.expect("get");
    assert_eq!(task.status.state, TaskState::Completed);
    // The approved tool's line (`✓ Bash: ls · approved`) comes on a line of its own (the
    // text before it ended with a line break): without both, the text alone.
    let out = String::from_utf8_lossy(&out).into_owned();
    let tool_line = regex::Regex::new(r"(?m)(^|\n)✓ [^\n]* · approved\n").expect("re");
    let text = tool_line.replace_all(&out, "").into_owned();
    (text, result_text(&task))
}

/// Answers `n` approvals (at most 8 at a time); each run whose printed text is not the
/// task's result, described.
async fn answer_many(s: &TestServer, prompt: &str, n: usize) -> Vec<String> {
    let client = Client::connect(&s.base).await.expect("connect");
    let runs = futures::stream::iter(0..n)
        .map(|_| answer_one(s, &client, prompt))
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    runs.into_iter()
        .filter(|(printed, result)| result.is_empty() || printed.trim_end_matches('\n') != result)
        .map(|(printed, result)| format!("printed {printed:?}\n result {result:?}"))
        .collect()
}

/// The answer's text reaches the stream in the first task frame (what the agent wrote before
/// the stream opened), in artifact updates, or both: each part is printed exactly once. The
/// demo agent writes its text after the approval (100 runs); a scripted agent writes text
/// before the approval and after it (100 runs), so the answer's stream starts with a task
/// frame that already carries text.
#[tokio::test]
async fn call_prints_the_whole_answer_exactly_once_after_200_approvals() {
    limit_to(Duration::from_secs(300), async {
        let demo = TestServer::start().await;
        let mut wrong = answer_many(&demo, "approval", 100).await;
        let scenario = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/scenarios/text-around-approval.jsonl"
        );
        let scripted = TestServer::with(Options {
            adapter: "jsonl",
            extra_args: vec!["--scenario".into(), scenario.into()],
            ..Options::default()
        })
        .await;
        wrong.extend(answer_many(&scripted, "anything", 100).await);
        assert!(
            wrong.is_empty(),
            "{} of 200 runs printed something else than the result:\n{}",
            wrong.len(),
            wrong.join("\n")
        );
    })
    .await;
}

/// Runs the agent-host binary with stdout on a pipe whose reader reads at most one line
/// (`lines` = 1) or nothing (`lines` = 0) and closes it; the exit status and stderr.
fn run_into_closed_pipe(args: &[&str], lines: usize) -> (Option<i32>, String) {
    use std::io::BufRead;
    // Close-on-exec: a read end the command inherited would keep its stdout open, and a
    // command that prints more than the pipe holds (`completions bash`) would block forever.
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
    let read = (lines > 0).then_some(read); // else closed before the command starts
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(args)
        .env_remove("A2A_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn agent-host");
    if let Some(read) = read {
        let mut reader = std::io::BufReader::new(std::fs::File::from(read));
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        drop(reader); // like `head -1`
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait().expect("wait");
    (status.code(), stderr)
}

#[tokio::test]
async fn every_command_ends_normally_when_stdout_is_closed() {
    limit(async {
        let s = TestServer::start().await;
        let client = Client::connect(&s.base).await.expect("connect");
        let mut ids = Vec::new();
        for _ in 0..30 {
            match client.send(Request::text("hello")).await.expect("send") {
                SendMessageResponse::Task(t) => ids.push(t.id),
                other => panic!("{other:?}"),
            }
        }
        let id = ids[0].clone();
        let base = s.base.clone();
        let results = tokio::task::spawn_blocking(move || {
            let commands: Vec<Vec<&str>> = vec![
                vec!["tasks", "list", &base],
                vec!["tasks", "list", &base, "--json"],
                vec!["tasks", "get", &base, &id],
                vec!["tasks", "watch", &base, &id],
                vec![
                    "tasks",
                    "watch",
                    &base,
                    &id,
                    "--last-event-id",
                    "0",
                    "--json",
                ],
                vec!["call", &base, "flood=200"],
                vec!["call", &base, "hello", "--json"],
                vec!["adapters"],
                vec!["card"],
                vec!["completions", "bash"],
                vec!["man"],
                vec!["--help"],
                vec!["serve", "--help"],
            ];
            let mut out = Vec::new();
            for args in &commands {
                for lines in [0, 1] {
                    let (code, stderr) = run_into_closed_pipe(args, lines);
                    out.push((args.join(" "), lines, code, stderr));
                }
            }
            out
        })
        .await
        .expect("join");
        for (cmd, lines, code, stderr) in results {
            assert!(
                !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
                "`agent-host {cmd}` (reader read {lines} lines): {stderr}"
            );
            assert_eq!(
                code,
                Some(0),
                "`agent-host {cmd}` (reader read {lines} lines): {stderr}"
            );
        }
    })
    .await;
}

fn agent_host(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(args)
        .env_remove("A2A_TOKEN")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null())
        .output()
        .expect("run agent-host");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn completions_and_the_man_page_are_generated() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef agent-host"),
        ("fish", "complete -c agent-host"),
    ] {
        let (code, out, err) = agent_host(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains(marker), "{shell}: {out}");
        // Subcommands and their flags are completed.
        for word in ["serve", "tasks", "repo-path"] {
            assert!(out.contains(word), "{shell} lacks {word}");
        }
    }
    let (code, _, _) = agent_host(&["completions", "tcsh"]);
    assert_eq!(code, 2, "an unknown shell is a usage error");
    let (code, out, err) = agent_host(&["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(".ie") || out.contains(".TH agent-host 1"),
        "{out}"
    );
    assert!(out.contains(".TH agent-host 1") && out.contains("serve"));
    // Each command the main page names has its page, with its own options.
    let (code, out, err) = agent_host(&["man", "serve"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(".TH agent-host-serve 1"), "{out}");
    assert!(out.contains("sandbox\\-network"), "{out}");
    let (code, out, _) = agent_host(&["man", "tasks", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains(".TH agent-host-tasks-list 1"), "{out}");
    let (code, _, err) = agent_host(&["man", "nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("no command 'nope'"), "{err}");
}

/// Every command's page is titled by its full name in section 1, and its source (the `.TH`
/// line's fourth field, the page's footer) is agent-host and its version, not the command's
/// bare name.
#[test]
fn every_man_page_names_agent_host_and_its_version() {
    use clap::CommandFactory as _;
    fn paths(cmd: &clap::Command, above: &[String], out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            if sub.get_name() == "help" {
                continue;
            }
            let mut path = above.to_vec();
            path.push(sub.get_name().to_string());
            paths(sub, &path, out);
            out.push(path);
        }
    }
    let mut all = vec![Vec::new()];
    paths(&agent_host::cli::Cli::command(), &[], &mut all);
    assert!(all.len() > 10, "{all:?}");
    let source = format!("\"agent-host {}\"", env!("CARGO_PKG_VERSION"));
    for path in all {
        let mut args = vec!["man"];
        args.extend(path.iter().map(String::as_str));
        let (code, out, err) = agent_host(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        let th = out
            .lines()
            .find(|l| l.starts_with(".TH "))
            .unwrap_or_else(|| panic!("{args:?}: no .TH line: {out}"));
        let name = std::iter::once("agent-host")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("-");
        assert_eq!(th.trim_end(), format!(".TH {name} 1  {source}"), "{args:?}");
    }
}

#[test]
fn help_describes_the_arguments_and_adapters_lists_only_its_own_flags() {
    for sub in ["list", "get", "cancel", "watch"] {
        let (code, out, _) = agent_host(&["tasks", sub, "--help"]);
        assert_eq!(code, 0);
        assert!(out.contains("<URL>  The agent's base URL"), "{sub}: {out}");
        if sub != "list" {
            assert!(out.contains("<ID>   The task id"), "{sub}: {out}");
        }
    }
    // The built-in agents are this very build, which the tests run: tested, as the README's
    // table says.
    let (_, out, _) = agent_host(&["adapters"]);
    for id in ["demo", "conformance"] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("{id} ")))
            .unwrap_or_default();
        assert!(row.split_whitespace().nth(3) == Some("yes"), "{id}: {out}");
    }
    let (_, out, _) = agent_host(&["adapters", "--help"]);
    for flag in ["--adapters-dir", "--binary", "--repo-path", "--config"] {
        assert!(out.contains(flag), "adapters --help lacks {flag}: {out}");
    }
    for flag in ["--port", "--bind", "--timeout", "--store", "--public-url"] {
        assert!(!out.contains(flag), "adapters --help lists {flag}: {out}");
    }
    // prune reads this machine's store: no flags that reach an agent, and its --json is
    // its own.
    let (_, out, _) = agent_host(&["tasks", "prune", "--help"]);
    for flag in [
        "--token",
        "--binding",
        "--a2a-version",
        "one JSON event per line",
    ] {
        assert!(
            !out.contains(flag),
            "tasks prune --help lists {flag}: {out}"
        );
    }
    assert!(out.contains("--json"), "{out}");
    // It finds the workspaces it removes as serve keeps them: the same folder flag.
    assert!(
        out.contains("--workspace-dir <DIR>") && out.contains("AGENT_HOST_WORKSPACE_DIR"),
        "{out}"
    );
}

#[test]
fn a_bad_repo_path_is_reported_under_the_name_the_user_gave() {
    let (code, _, err) = agent_host(&["adapters", "--repo-path", "/nonexistent/dir"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--repo-path '/nonexistent/dir' is not a directory"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(["adapters"])
        .env("AGENT_REPO_PATH", "/nonexistent/dir")
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("AGENT_REPO_PATH '/nonexistent/dir'"), "{err}");
}

#[tokio::test]
async fn an_unreachable_server_is_named_as_such() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [
        vec!["call", url.as_str(), "hi"],
        vec!["tasks", "list", url.as_str()],
    ] {
        let (code, _, err) = agent_host(&args);
        assert_eq!(code, 1);
        assert!(
            err.contains(&format!(
                "connection refused: is agent-host running at {url}?"
            )),
            "{err}"
        );
    }
}

#[tokio::test]
async fn watch_shows_a_finished_task_and_no_stream_hints_how_to_answer() {
    limit(async {
        let s = TestServer::start().await;
        let base = s.base.clone();
        let client = Client::connect(&s.base).await.expect("connect");
        let done = match client.send(Request::text("hello")).await.expect("send") {
            SendMessageResponse::Task(t) => t,
            other => panic!("{other:?}"),
        };
        let failed = match client.send(Request::text("fail")).await.expect("send") {
            SendMessageResponse::Task(t) => t,
            other => panic!("{other:?}"),
        };
        let (d, f) = (done.id.clone(), failed.id.clone());
        let (done_run, failed_run, no_stream, listed) = tokio::task::spawn_blocking(move || {
            (
                agent_host(&["tasks", "watch", &base, &d]),
                agent_host(&["tasks", "watch", &base, &f]),
                agent_host(&["call", &base, "approval", "--no-stream"]),
                agent_host(&["tasks", "list", &base]),
            )
        })
        .await
        .expect("join");
        let (code, out, err) = done_run;
        assert_eq!(code, 0, "{err}");
        // Its steps, then its text, as `call` showed them.
        assert_eq!(
            out.trim_end(),
            format!("✓ Bash: ls\n{}", result_text(&done)),
            "{err}"
        );
        assert!(err.contains("✓ completed"), "{err}");
        let (code, _, err) = failed_run;
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("✗ failed") && !err.contains("UNSUPPORTED"),
            "{err}"
        );
        let (code, _, err) = no_stream;
        assert_eq!(code, 4, "{err}");
        assert!(
            err.contains(&format!("answer with: agent-host call {} --task", s.base)),
            "{err}"
        );
        // The list has a header, and each row the prompt and the directory.
        let (code, out, err) = listed;
        assert_eq!(code, 0, "{err}");
        let mut lines = out.lines();
        let header = lines.next().expect("header");
        assert!(
            header.starts_with("ID ") && header.ends_with("PROMPT"),
            "{out}"
        );
        let row = out.lines().find(|l| l.starts_with(&done.id)).expect("row");
        let dir = s.dir().display().to_string();
        assert!(row.ends_with("hello") && row.contains(&dir), "{out}");
    })
    .await;
}

#[tokio::test]
async fn get_root_points_a_browser_at_the_card() {
    limit(async {
        let s = TestServer::start().await;
        let page = s
            .client
            .get(format!("{}/", s.base))
            .header("Accept", "text/html,application/xhtml+xml")
            .send()
            .await
            .expect("GET /");
        assert_eq!(page.status(), 200);
        let ctype = page.headers()["content-type"]
            .to_str()
            .unwrap_or("")
            .to_string();
        assert!(ctype.starts_with("text/html"), "{ctype}");
        let body = page.text().await.expect("body");
        assert!(
            body.contains("href=\"/.well-known/agent-card.json\""),
            "{body}"
        );
        let json: serde_json::Value = s
            .client
            .get(format!("{}/", s.base))
            .send()
            .await
            .expect("GET /")
            .json()
            .await
            .expect("JSON");
        assert_eq!(json["card"], "/.well-known/agent-card.json");
        assert_eq!(json["metrics"], "/metrics");
    })
    .await;
}

#[test]
fn logs_have_colours_only_when_asked_or_on_a_terminal() {
    // `serve --port 0` logs its start; it is stopped once it says where it listens.
    let dir = tempfile::tempdir().expect("tempdir");
    let run = |color: Option<&str>, no_color: bool| {
        use std::io::BufRead as _;
        let mut c = Command::new(env!("CARGO_BIN_EXE_agent-host"));
        c.args(["serve", "--store", "memory", "--port", "0"])
            .env("AGENT_REPO_PATH", dir.path())
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(w) = color {
            c.args(["--color", w]);
        }
        if no_color {
            c.env("NO_COLOR", "1");
        }
        let mut child = c.spawn().expect("run");
        let stderr = child.stderr.take().expect("stderr");
        let mut log = String::new();
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            log.push_str(&line);
            log.push('\n');
            if line.contains("listening on") {
                break;
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        log
    };
    let esc = '\u{1b}';
    let plain = run(None, false);
    assert!(plain.contains("INFO") && !plain.contains(esc), "{plain:?}");
    assert!(!run(Some("never"), false).contains(esc));
    assert!(!run(Some("auto"), true).contains(esc));
    let always = run(Some("always"), false);
    assert!(always.contains(esc), "{always:?}");
}

/// Starts `agent-host serve` on a SQLite file until its card answers, stops it, and returns
/// what it logged.
async fn serve_once(db: &std::path::Path, dir: &std::path::Path) -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(["serve", "--port", &port.to_string()])
        .arg("--store")
        .arg(format!("sqlite:{}", db.display()))
        .env("AGENT_REPO_PATH", dir)
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agent-host");
    let card = format!("http://127.0.0.1:{port}/.well-known/agent-card.json");
    // Not `answers`: when the host does not come up, its log says why.
    let up = until(WAIT, async || reqwest::get(&card).await.map(drop)).await;
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let out = child.wait_with_output().await.expect("wait");
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(up.is_ok(), "agent-host did not serve its card: {log}");
    log
}

#[tokio::test]
async fn a_first_start_logs_one_schema_migration_line() {
    limit(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("tasks.db");
        let first = serve_once(&db, dir.path()).await;
        let count = |log: &str| log.matches("database schema migrated").count();
        assert_eq!(count(&first), 1, "{first}");
        let second = serve_once(&db, dir.path()).await;
        assert_eq!(count(&second), 0, "{second}");
    })
    .await;
}

/// `cargo install --path .` installs every binary target: `agent-host` (the demo agent is its
/// `fake-agent` subcommand) and `agent-host-exec`, and no other file in `src/bin/` that cargo
/// would add.
#[test]
fn the_package_installs_agent_host_and_its_small_setup_helper() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml"))
            .expect("TOML");
    let bins: Vec<&str> = manifest["bin"]
        .as_array()
        .expect("[[bin]]")
        .iter()
        .filter_map(|b| b["name"].as_str())
        .collect();
    // agent-host, and the small program that starts each task's program (optional: without
    // it agent-host does the same itself, see contain::the_host_under_tmp_...).
    assert_eq!(bins, ["agent-host", "agent-host-exec"]);
    let extra: Vec<_> = std::fs::read_dir(root.join("src/bin"))
        .expect("src/bin")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "exec.rs")
        .collect();
    assert!(extra.is_empty(), "src/bin/ adds binaries: {extra:?}");
    let release = &manifest["profile"]["release"];
    assert_eq!(release["strip"].as_str(), Some("symbols"));
}

/// `tasks prune` takes its limits from the environment as serve does (defaults < file <
/// environment < flags): without any it has nothing to prune by (exit 2); with
/// `AGENT_HOST_RETENTION_MAX_TASKS` it goes on to the store.
#[test]
fn tasks_prune_reads_the_retention_variables() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("none.db").display());
    let prune = |env: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["tasks", "prune", "--store", &store])
            .env_remove("AGENT_HOST_CONFIG")
            .env_remove("AGENT_HOST_RETENTION_MAX_AGE")
            .env_remove("AGENT_HOST_RETENTION_MAX_TASKS")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("run agent-host");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = prune(&[]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nothing to prune by"), "{err}");
    let (code, err) = prune(&[("AGENT_HOST_RETENTION_MAX_TASKS", "1")]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no task database"), "{err}");
}
