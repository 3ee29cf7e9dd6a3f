//! Prompts too long for one command-line argument (over 128 KiB, issue 15 item 8), one test per
//! way an argv adapter takes them: on stdin (`opencode-json`), in a file (`aider`), or not at
//! all (`cursor`: -32602 naming the limit). The CLIs are fakes that replay a recorded run
//! (tests/fixtures/transcripts; cursor's, which never runs a turn, prints nothing) and keep
//! what they were given, so the test can compare it with
//! the prompt byte for byte.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

/// Over the 128 KiB an argument may hold, with what a prompt must survive: lines, quotes,
/// text that looks like options, and characters beyond ASCII.
fn long_prompt() -> String {
    let mut p = String::from("--help \"fix\" the bug, then say hi\n");
    while p.len() <= 160 * 1024 {
        p.push_str("ligne « ünïcode » -- $HOME `x` 'y'\n");
    }
    p
}

/// A fake CLI: a script (outside /tmp, which the sandbox replaces) that runs `body` and then
/// prints the recorded `transcript` (None: nothing, for a CLI that must never run a turn).
/// Asked for its version (agent-host asks in the background, maybe after the turn), it only
/// answers, so that it never overwrites what the turn kept.
fn fake_cli(dir: &Path, name: &str, body: &str, transcript: Option<&str>) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let replay = transcript.map_or(String::new(), |t| {
        let recorded = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/transcripts")
            .join(t);
        let text = std::fs::read_to_string(&recorded)
            .unwrap_or_else(|e| panic!("{}: {e}", recorded.display()));
        // In the script itself: the sandbox may hide the checkout (a clone under /tmp) from
        // the agent, but shows it its own program.
        format!("cat <<'AGENT_HOST_RECORDED_END'\n{text}\nAGENT_HOST_RECORDED_END\n")
    });
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 0.0.0; exit 0; }}\n\
             printf '%s\\n' \"$@\" > args.got\n{body}\n{replay}"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("long-prompts")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or("")
}

/// The task's answer (its `result` artifact).
fn answer(t: &Value) -> String {
    t["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["artifactId"] == "result"))
        .and_then(|a| a["parts"][0]["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// What the fake kept (`name` in the agent's working directory).
fn got(s: &TestServer, name: &str) -> String {
    std::fs::read_to_string(s.dir().join(name)).unwrap_or_default()
}

/// opencode-json: `opencode run --format json` with no message argument, the prompt on stdin
/// (opencode reads a stdin that is not a terminal to its end as the message).
#[tokio::test]
async fn opencode_json_takes_a_long_prompt_on_stdin() {
    limit(async {
        let bin = scratch();
        let program = fake_cli(
            bin.path(),
            "opencode",
            "cat > prompt.got",
            Some("opencode/1.18.33/opencode-tool-use.jsonl"),
        );
        let s = TestServer::with(Options {
            adapter: "opencode-json",
            program: Some(program),
            ..Options::default()
        })
        .await;
        let prompt = long_prompt();
        let r = s.rpc("SendMessage", send_params(&prompt)).await;
        let t = &r["result"]["task"];
        assert_eq!(
            state(t),
            "TASK_STATE_COMPLETED",
            "{}",
            t["status"]["message"]
        );
        let received = got(&s, "prompt.got");
        println!(
            "opencode-json: {} of {} bytes on stdin, args {:?}",
            received.len(),
            prompt.len(),
            got(&s, "args.got")
        );
        assert!(received == prompt, "the prompt arrived whole on stdin");
        assert_eq!(got(&s, "args.got"), "run\n--format\njson\n");
        assert!(
            answer(t).contains("Done: the command printed hi"),
            "{}",
            answer(t)
        );
    })
    .await;
}

/// aider: `--message-file=<the task's folder>/.prompt.txt` instead of `--message=…`, on its
/// terminal as always, inside the sandbox (which shows the task its own folder only); the file
/// is the host's to remove once the turn is over.
#[tokio::test]
async fn aider_takes_a_long_prompt_in_a_file_removed_after_the_turn() {
    limit(async {
        let bin = scratch();
        let program = fake_cli(
            bin.path(),
            "aider",
            "for a in \"$@\"; do case \"$a\" in --message-file=*) f=\"${a#--message-file=}\";; esac; done\n\
             cat \"$f\" > prompt.got\nstat -c %a \"$f\" > mode.got\nls .agent-host/attachments > seen.got",
            Some("aider/0.86.2/aider-text.txt"),
        );
        let s = TestServer::with(Options {
            adapter: "aider",
            program: Some(program),
            sandbox: agent_host::settings::sandbox::SandboxSettings {
                mode: Some(agent_host::runner::sandbox::Mode::Auto),
                ..Default::default()
            },
            ..Options::default()
        })
        .await;
        // Another task's folder, which the sandbox hides.
        let other = s.dir().join(".agent-host/attachments/other-task");
        std::fs::create_dir_all(&other).unwrap();
        let prompt = long_prompt();
        let r = s.rpc("SendMessage", send_params(&prompt)).await;
        let t = &r["result"]["task"];
        assert_eq!(state(t), "TASK_STATE_COMPLETED", "{}", t["status"]["message"]);
        let id = t["id"].as_str().unwrap();
        let seen = got(&s, "seen.got");
        println!("aider: the task's folders it could see: {seen:?}");
        assert!(seen.contains(id), "{seen}");
        if seen.contains("other-task") {
            // No bubblewrap here: the file route worked, the sandbox was not tried.
            assert!(
                std::env::var("CI").map_or(true, |v| v != "true"),
                "under CI the turn runs in the sandbox, which hides other tasks: {seen}"
            );
            eprintln!("*** the sandbox is not available: the prompt's file was not tried in it ***");
        }
        let received = got(&s, "prompt.got");
        let args = got(&s, "args.got");
        println!(
            "aider: {} of {} bytes from the file (mode {}), args {args:?}",
            received.len(),
            prompt.len(),
            got(&s, "mode.got").trim()
        );
        assert!(received == prompt, "the prompt arrived whole in the file");
        assert_eq!(got(&s, "mode.got").trim(), "600");
        let file = s
            .dir()
            .canonicalize()
            .unwrap()
            .join(".agent-host/attachments")
            .join(id)
            .join(".prompt.txt");
        let last = args.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("--message-file=")
                && last.ends_with(&format!("/.agent-host/attachments/{id}/.prompt.txt")),
            "{args}"
        );
        assert!(!args.contains("--message="), "{args}");
        assert!(!file.exists(), "the prompt's file is removed after the turn");
        assert!(answer(t).contains("Fake side answer"), "{}", answer(t));
    })
    .await;
}

/// cursor: no way but the argument is known to work, so the message is refused before anything
/// is stored or started, with -32602 naming the limit.
#[tokio::test]
async fn cursor_refuses_a_long_prompt_naming_the_limit() {
    limit(async {
        let bin = scratch();
        let program = fake_cli(bin.path(), "cursor-agent", "cat > prompt.got", None);
        let s = TestServer::with(Options {
            adapter: "cursor",
            program: Some(program),
            ..Options::default()
        })
        .await;
        let r = s.rpc("SendMessage", send_params(&long_prompt())).await;
        let message = r["error"]["message"].as_str().unwrap_or_default();
        println!("cursor: {}", r["error"]);
        assert_eq!(r["error"]["code"], -32602, "{}", r["error"]);
        assert!(
            message.contains("128 KiB")
                && message.contains("131071")
                && message.contains("'cursor'"),
            "{message}"
        );
        let listed = s.rpc("ListTasks", serde_json::json!({})).await;
        let tasks = listed["result"]["tasks"].as_array().map_or(0, Vec::len);
        assert_eq!(tasks, 0, "nothing stored: {listed}");
        // (agent-host may have asked the program for its version, never for a turn.)
        let args = got(&s, "args.got");
        assert!(
            !args.contains("stream-json"),
            "the CLI never ran a turn: {args}"
        );
    })
    .await;
}
