//! What a task is given, beyond not getting out (issue: contain every agent): its program
//! runs wherever it lies (`/tmp` included, the host's own binary for the demo agent), and a
//! limit it ran into is said, whatever the task's end.
//!
//! Needs bubblewrap and a writable cgroup hierarchy: without them the tests say so and pass,
//! except under `CI=true`, where a missing piece is a failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::common::{answers, eventually, limit, WAIT};
use super::sandbox::{message, sandbox_available, text_of, Host};

/// A folder of its own directly under `/tmp` (where the sandbox puts an empty tmpfs), as
/// the README's `mktemp -d` recipe makes one.
fn under_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("agent-host-contain")
        .tempdir_in("/tmp")
        .expect("a folder under /tmp")
}

fn probe_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sandbox/probe-agent.sh")
}

#[tokio::test]
async fn a_program_under_tmp_runs_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        let dir = under_tmp();
        let script = dir.path().join("probe-agent.sh");
        std::fs::copy(probe_script(), &script).expect("copy the agent");
        let binary = script.display().to_string();
        let host = Host::start("auto", &[("AGENT_BINARY", binary.as_str())]).await;
        let task = host.run("hello").await;
        host.sigterm().await;
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        assert!(text_of(&task).contains("hello"), "{task}");
    })
    .await;
}

/// `agent-host` copied under `/tmp` serves the demo agent (its own binary) in the sandbox.
#[tokio::test]
async fn the_host_under_tmp_serves_the_demo_agent_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        let dir = under_tmp();
        let bin = dir.path().join("agent-host");
        std::fs::copy(env!("CARGO_BIN_EXE_agent-host"), &bin).expect("copy agent-host");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).expect("mkdir");
        // A copy just written may be held open for writing a moment longer by a child that
        // another test thread forked meanwhile (ETXTBSY): the exec is tried until it passes.
        let mut child = eventually("the copied agent-host starts", WAIT, async || {
            tokio::process::Command::new(&bin)
                .args(["serve", "--port", &port.to_string(), "--store", "memory"])
                .env_clear()
                .env("PATH", std::env::var("PATH").unwrap_or_default())
                .env("HOME", dir.path())
                .env("AGENT_ADAPTER", "demo")
                .env("AGENT_REPO_PATH", &work)
                .env("AGENT_SANDBOX", "auto")
                .env("AGENT_HOST_RATE_LIMIT", "0")
                .kill_on_drop(true)
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::ExecutableFileBusy => e,
                    _ => panic!("spawn agent-host: {e}"),
                })
        })
        .await;
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        answers(&format!("{base}/.well-known/agent-card.json")).await;
        let v: serde_json::Value = client
            .post(format!("{base}/"))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": message("hello", true)}))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("JSON-RPC response");
        let _ = child.kill().await;
        let task = &v["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    })
    .await;
}

/// A child killed at the memory limit while the agent goes on and finishes: the task ends as
/// the agent said (completed), and says that a process ran into the limit, in its status
/// message and its metadata. Without the sandbox the same child is not killed.
#[tokio::test]
async fn a_child_killed_at_the_memory_limit_is_said_whatever_the_end() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        for mode in ["auto", "off"] {
            let host = Host::start(mode, &[]).await;
            // 512 MiB in a child, against the test host's limit of 256 MiB.
            let task = host.run("alloc-child 512").await;
            host.sigterm().await;
            assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
            let text = text_of(&task);
            if mode == "auto" {
                assert!(text.contains("child=137"), "the child was killed: {text}");
                assert_eq!(task["metadata"]["limitReached"], "memory", "{task}");
                assert!(
                    text.contains("memory limit (256 MiB, task_memory)"),
                    "{text}"
                );
            } else {
                assert!(text.contains("child=0"), "{text}");
                assert!(task["metadata"].get("limitReached").is_none(), "{task}");
            }
        }
    })
    .await;
}

/// Sends `text` with a binary file (`secret.bin`) as a new conversation working in `cwd`,
/// as the bearer token's caller or (`key`) the API key's; waits for the end.
async fn send_in(host: &Host, cwd: &Path, text: &str, key: bool) -> serde_json::Value {
    let mut params = message(text, true);
    params["message"]["metadata"] = json!({"cwd": cwd.display().to_string()});
    params["message"]["parts"]
        .as_array_mut()
        .expect("parts")
        .push(
            json!({"raw": "YW5vdGhlciBjYWxsZXIncyBmaWxl", "filename": "secret.bin",
            "mediaType": "application/octet-stream"}),
        );
    let v = if key {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params});
        reqwest::Client::new()
            .post(host.url("/"))
            .header("X-API-Key", "probe-second-key")
            .header("A2A-Version", "1.0")
            .json(&body)
            .send()
            .await
            .expect("request")
            .json::<serde_json::Value>()
            .await
            .expect("JSON-RPC response")
    } else {
        host.rpc("SendMessage", params).await
    };
    let task = v["result"]["task"].clone();
    assert!(task.is_object(), "{v}");
    task
}

/// Where `task`'s attachment was saved, working in `cwd`.
fn saved(cwd: &Path, task: &serde_json::Value) -> PathBuf {
    cwd.join(".agent-host/attachments")
        .join(task["id"].as_str().expect("task id"))
        .join("secret.bin")
}

/// A task sees its own attachments only, whatever the working directories: one working in a
/// subfolder of another's (or in its parent) does not read the other's files, across
/// callers. Without the sandbox it does.
#[tokio::test]
async fn a_task_reads_no_other_tasks_attachments_above_or_below_its_folder() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        for mode in ["auto", "off"] {
            let host = Host::start(mode, &[("AGENT_HOST_API_KEY", "probe-second-key")]).await;
            let parent = host.path("work").canonicalize().expect("work");
            let sub = parent.join("sub");
            std::fs::create_dir_all(&sub).expect("mkdir");
            let below = send_in(&host, &sub, "hello", false).await;
            let above = send_in(&host, &parent, "hello", true).await;
            let (below_file, above_file) = (saved(&sub, &below), saved(&parent, &above));
            assert!(below_file.is_file() && above_file.is_file(), "saved");
            // New tasks read the others': from the parent folder into the subfolder's (as
            // the other caller), and from the subfolder up into the parent's.
            let down = format!("whoami {}", below_file.display());
            let down = send_in(&host, &parent, &down, true).await;
            let up = format!("whoami {}", above_file.display());
            let up = send_in(&host, &sub, &up, false).await;
            host.sigterm().await;
            let read = |t: &serde_json::Value| text_of(t).contains("read=ok");
            if mode == "auto" {
                assert!(
                    text_of(&down).contains("read=refused"),
                    "parent read the subfolder's: {down}"
                );
                assert!(
                    text_of(&up).contains("read=refused"),
                    "subfolder read the parent's: {up}"
                );
            } else {
                assert!(read(&down), "off: {down}");
                assert!(read(&up), "off: {up}");
            }
        }
    })
    .await;
}

/// An adapter for the probe agent whose CLI keeps state in `~/.probe/` and `~/.probe.json`,
/// with a configuration file and a login of the host user's there.
const STATEFUL_ADAPTER: &str = r#"
id = "stateful"
name = "Stateful probe"
description = "The probe agent, with CLI state in its HOME."
binary = ""
prompt = "arg"
stdin = "keep"
wire = "agent-host-jsonl"

[sandbox]
write = ["~/.probe/", "~/.probe.json"]
config = ["~/.probe/config.json"]

[doctor]
credentials_files = ["~/.probe/login.json"]
"#;

/// Sends `prompt` in context `ctx` and waits for the end; the agent's text.
async fn in_context(host: &Host, ctx: &str, prompt: &str) -> String {
    let mut params = message(prompt, true);
    params["message"]["contextId"] = json!(ctx);
    let v = host.rpc("SendMessage", params).await;
    let task = &v["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
    text_of(task)
}

/// Where the host keeps the file named `name` (a context's session), under `dir`.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(f) = find_file(&p, name) {
                return Some(f);
            }
        } else if e.file_name() == name {
            return Some(p);
        }
    }
    None
}

/// Each context has the CLI state of its own: a task reads and writes neither another
/// context's session (at the CLI's path nor where the host keeps it) nor the host user's; it
/// gets the host's configuration copied and its login read-only; its own session is there
/// again at the context's next turn and after a restart. With the state shared
/// (`sandbox_state = "shared"`) or the sandbox off, the same task reads and overwrites the
/// other context's session.
#[tokio::test]
async fn each_context_keeps_its_own_cli_state() {
    if !sandbox_available() {
        return;
    }
    super::common::limit_to(Duration::from_secs(120), async {
        for (mode, state) in [("auto", "context"), ("auto", "shared"), ("off", "context")] {
            let adapters = tempfile::tempdir().expect("adapters dir");
            std::fs::write(adapters.path().join("stateful.toml"), STATEFUL_ADAPTER)
                .expect("adapter");
            let dir = adapters.path().display().to_string();
            let env = [
                ("AGENT_ADAPTER", "stateful"),
                ("AGENT_HOST_ADAPTERS_DIR", dir.as_str()),
                ("AGENT_HOST_SANDBOX_STATE", state),
            ];
            let host = Host::start(mode, &env).await;
            let probe = host.path("home/.probe");
            std::fs::create_dir_all(probe.join("sessions")).expect("mkdir");
            std::fs::write(probe.join("config.json"), "host-config").expect("config");
            std::fs::write(probe.join("login.json"), "host-login").expect("login");
            std::fs::write(probe.join("sessions/host-user"), "mine").expect("session");
            let (a, b) = (super::common::uuid(), super::common::uuid());

            let first = in_context(&host, &a, &format!("state {a} - -")).await;
            assert!(first.contains("mine=none"), "{mode}/{state}: {first}");
            assert!(first.contains("config=host-config"), "{first}");
            assert!(first.contains("login=host-login"), "{first}");
            let stored = find_file(host.path("").as_path(), &a)
                .unwrap_or_else(|| panic!("{mode}/{state}: a's session on disk"));
            let other = format!("state {b} {a} {}", stored.display());
            let second = in_context(&host, &b, &other).await;
            let again = in_context(&host, &a, &format!("state {a} - -")).await;
            eprintln!("[{mode}/{state}] another context: {second:?}; the first again: {again:?}");
            let contained = mode == "auto" && state == "context";
            if contained {
                for refused in [
                    "other=refused",
                    "other_file=refused",
                    "other_file_write=refused",
                    "login_write=refused",
                    "host_session=refused",
                ] {
                    assert!(second.contains(refused), "{refused}: {second}");
                }
                assert!(second.contains("login=host-login"), "{second}");
                assert!(second.contains("state_file=ok"), "{second}");
                assert!(
                    stored.starts_with(host.path("data/homes")),
                    "{}",
                    stored.display()
                );
                assert_eq!(
                    std::fs::read_to_string(probe.join("login.json")).expect("login"),
                    "host-login"
                );
                assert!(!probe.join(format!("sessions/{a}")).exists());
                assert!(
                    again.contains(&format!("mine={a}-session")),
                    "a's next turn: {again}"
                );
                // After a restart the context's state is still its own.
                let host = host.restart().await;
                let after = in_context(&host, &a, &format!("state {a} - -")).await;
                host.sigterm().await;
                assert!(
                    after.contains(&format!("mine={a}-session")),
                    "after a restart: {after}"
                );
            } else {
                host.sigterm().await;
                assert!(
                    second.contains(&format!("other=ok {a}-session")),
                    "{mode}/{state}: {second}"
                );
                assert!(second.contains("host_session=ok"), "{second}");
                assert!(second.contains("login_write=ok"), "{second}");
                assert!(again.contains("mine=tampered"), "{mode}/{state}: {again}");
            }
        }
    })
    .await;
}
