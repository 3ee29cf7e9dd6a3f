//! One host per data folder: a second agent-host started on the same database refuses to
//! start, names the first, and leaves the first one's running agents alone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn serve(db: &Path, repo: &Path, port: u16) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"));
    cmd.args(["serve", "--adapter", "demo", "--port", &port.to_string()])
        .arg("--store")
        .arg(format!("sqlite:{}", db.display()))
        .env("AGENT_REPO_PATH", repo)
        .env("AGENT_CANCEL_GRACE_MS", "300")
        .env_remove("AGENT_HOST_CONFIG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn rpc(base: &str, method: &str, params: Value) -> Value {
    reqwest::Client::new()
        .post(format!("{base}/"))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json")
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777
}

#[tokio::test]
async fn a_second_host_on_the_same_folder_refuses_and_leaves_the_first_ones_agents_alone() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let db = data.join("agent-host.db");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let port = free_port();
        let mut first = serve(&db, &repo, port).spawn().expect("start agent-host");
        let base = format!("http://127.0.0.1:{port}");
        answers(&format!("{base}/health")).await;

        // A running task whose agent left a process of its own.
        let mut p = send_params("grandchild");
        p["configuration"] = json!({"returnImmediately": true});
        let id = rpc(&base, "SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let grandchild = eventually("the grandchild's pid is reported", WAIT, async || {
            let t = rpc(&base, "GetTask", json!({"id": id})).await["result"].clone();
            let text = t["status"]["message"]["parts"][0]["text"].as_str();
            grandchild_pid(text.unwrap_or("")).ok_or(t)
        })
        .await;

        // The second host, same folder, another port: it refuses, naming the first.
        let second = tokio::time::timeout(
            Duration::from_secs(20),
            serve(&db, &repo, free_port()).output(),
        )
        .await
        .expect("the second host neither started nor stopped")
        .expect("run agent-host");
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert!(
            !second.status.success(),
            "the second host started: {stderr}"
        );
        let first_pid = first.id().expect("pid");
        assert!(
            stderr.contains(&format!("pid {first_pid}, port {port}")),
            "the refusal names the first host: {stderr}"
        );
        // The same port too: still the lock's message, not just "address in use".
        let same_port =
            tokio::time::timeout(Duration::from_secs(20), serve(&db, &repo, port).output())
                .await
                .expect("the third host neither started nor stopped")
                .expect("run agent-host");
        let stderr = String::from_utf8_lossy(&same_port.stderr);
        assert!(stderr.contains(&format!("pid {first_pid}")), "{stderr}");

        // The first host's agent and task are untouched.
        assert!(
            process_alive(grandchild),
            "the second host killed the first one's agent"
        );
        let t = rpc(&base, "GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(t["status"]["state"], "TASK_STATE_WORKING", "{t}");

        // Everything the host wrote is its user's only.
        assert_eq!(mode(&data), 0o700);
        for f in [
            "agent-host.db",
            "agent-host.db-wal",
            "agent-host.db-shm",
            "agent-host.db.lock",
        ] {
            assert_eq!(mode(&data.join(f)), 0o600, "{f}");
        }

        rpc(&base, "CancelTask", json!({"id": id})).await;
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(first_pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = tokio::time::timeout(Duration::from_secs(20), first.wait()).await;
        let _ = first.kill().await;
    })
    .await;
}
