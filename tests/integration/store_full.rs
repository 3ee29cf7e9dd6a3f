//! Item 2 of issue 15: a store that fails mid-task (its disk fills up) ends the task `failed`
//! with a message that says the store failed, the client gets that end, the host stays up and
//! says in `/health` that its store is failing; once space is freed, new work is stored again
//! and the next start repairs what the full disk kept unfinished.
//!
//! The disk is a real one: a 3 MiB tmpfs holding the SQLite database, mounted in a private
//! mount namespace (`unshare -m`, as root) that a holder process keeps alive; every host of the
//! test runs in that namespace (`nsenter -m`), and so does the agent, which fills the disk
//! itself in the middle of its turn. Where that cannot be set up (not root, no unshare or
//! nsenter, no tmpfs): a failure under `CI=true`, a loud skip elsewhere.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::common::*;

/// A tmpfs mounted at `dir` in a mount namespace of its own, kept while this lives.
struct SmallDisk {
    holder: tokio::process::Child,
    dir: PathBuf,
}

impl SmallDisk {
    /// Mounts it, or says why it cannot.
    async fn mount(dir: &Path) -> Result<SmallDisk, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let mut holder = tokio::process::Command::new("unshare")
            .args(["-m", "--", "sh", "-c"])
            .arg("mount -t tmpfs -o size=3m tmpfs \"$0\" && echo mounted && exec sleep 600")
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        let stdout = holder.stdout.take().ok_or("no stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        match tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await {
            Ok(Ok(Some(l))) if l == "mounted" => Ok(SmallDisk {
                holder,
                dir: dir.to_path_buf(),
            }),
            _ => {
                let _ = holder.kill().await;
                let out = holder.wait_with_output().await.map_err(|e| e.to_string())?;
                Err(format!(
                    "cannot mount a tmpfs in a private mount namespace (unshare -m, as root): {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        }
    }

    fn pid(&self) -> String {
        self.holder.id().map(|p| p.to_string()).unwrap_or_default()
    }

    /// A command run inside the namespace (where the tmpfs is).
    fn command(&self, program: &str) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("nsenter");
        cmd.args(["-t", &self.pid(), "-m", "--", program]);
        cmd
    }

    /// Removes a file on the tmpfs.
    async fn remove(&self, name: &str) {
        let status = self
            .command("rm")
            .arg("-f")
            .arg(self.dir.join(name))
            .status()
            .await
            .expect("nsenter rm");
        assert!(status.success(), "rm in the namespace: {status}");
    }
}

/// The agent: on the prompt `fill`, it fills the store's disk after its first line, then
/// prints 40 lines of 200 KB (which no longer fit) and would end properly; on any other
/// prompt it answers at once. It first waits 0.3 s, so that what the host writes as it starts
/// the task is on the disk before the disk fills (without the pause, 1 run in 8 failed).
fn agent_script(dir: &Path, fill: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("agent.sh");
    let script = format!(
        r#"#!/bin/sh
for a; do last=$a; done
sleep 0.3
printf '{{"type":"init","session_id":"s-1","model":"m","tools":[]}}\n'
if [ "$last" = fill ]; then
    head -c 100000000 /dev/zero > '{fill}' 2>/dev/null
    line=$(head -c 200000 /dev/zero | tr '\0' x)
    i=0
    while [ $i -lt 40 ]; do
        printf '{{"type":"text","text":"%s"}}\n' "$line"
        i=$((i+1))
    done
fi
printf '{{"type":"done","result":"finished","is_error":false}}\n'
"#,
        fill = fill.display()
    );
    std::fs::write(&path, script).expect("write the agent");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// A host in the disk's namespace, its database on the disk.
async fn host(disk: &SmallDisk, agent: &Path) -> HostProcess {
    let repo = tempfile::tempdir().expect("tempdir");
    let db = disk.dir.join("tasks.db");
    let mut cmd = disk.command(env!("CARGO_BIN_EXE_agent-host"));
    cmd.args([
        "serve",
        "--port",
        "0",
        "--adapter",
        "jsonl",
        "--sandbox",
        "off",
    ])
    .arg("--store")
    .arg(format!("sqlite:{}", db.display()))
    .env("AGENT_REPO_PATH", repo.path())
    .env("AGENT_BINARY", agent)
    .env("RUST_LOG", "info");
    HostProcess::start(cmd, repo).await
}

async fn health(h: &HostProcess) -> (u16, Value) {
    let r = reqwest::get(format!("{}/health", h.base))
        .await
        .expect("health request");
    let code = r.status().as_u16();
    (code, r.json().await.expect("health JSON"))
}

fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or("")
}

fn status_text(t: &Value) -> &str {
    t["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
}

#[tokio::test]
async fn a_full_disk_fails_the_task_keeps_the_host_up_and_the_next_start_repairs_it() {
    limit_to(Duration::from_secs(120), async {
        let scratch = tempfile::tempdir().expect("tempdir");
        let disk = match SmallDisk::mount(&scratch.path().join("disk")).await {
            Ok(d) => d,
            Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("CI=true: {why}; the full-disk test cannot run")
            }
            Err(why) => {
                eprintln!("SKIPPED a_full_disk_fails_the_task...: {why}");
                return;
            }
        };
        let fill = disk.dir.join("fill");
        let agent = agent_script(scratch.path(), &fill);
        let h = host(&disk, &agent).await;

        // The disk fills while the agent works: the task ends `failed`, saying why, and the
        // blocking call gets that end (before: it stayed `working`, the call never returned).
        let r = h.rpc("/", "SendMessage", send_params("fill"), &[]).await;
        let t = &r["result"]["task"];
        println!("task on a full disk: {} {:?}", state(t), status_text(t));
        assert_eq!(state(t), "TASK_STATE_FAILED", "{r}");
        assert!(status_text(t).contains("task store failed"), "{r}");
        let id = t["id"].as_str().unwrap().to_string();
        // Reads show the end too.
        let got = h.rpc("/", "GetTask", json!({"id": id}), &[]).await;
        assert_eq!(state(&got["result"]), "TASK_STATE_FAILED", "{got}");

        // The host is up and says its store is failing.
        let (code, body) = health(&h).await;
        println!("/health with the disk full: {code} {body}");
        assert_eq!(code, 503, "{body}");
        assert_eq!(body["status"], "degraded");
        let store = body["store"].as_str().unwrap();
        assert!(
            store.starts_with("failing: ") && store.contains("full"),
            "{body}"
        );

        // Space is freed: new work is stored again, and /health says so.
        disk.remove("fill").await;
        let r = h.rpc("/", "SendMessage", send_params("quick"), &[]).await;
        assert_eq!(state(&r["result"]["task"]), "TASK_STATE_COMPLETED", "{r}");
        let (code, body) = health(&h).await;
        assert_eq!((code, &body["status"]), (200, &json!("healthy")), "{body}");

        // The store never got the first task's end; the next start repairs it.
        h.kill().await;
        let h = host(&disk, &agent).await;
        let got = h.rpc("/", "GetTask", json!({"id": id}), &[]).await;
        println!(
            "after a restart: {} {:?}",
            state(&got["result"]),
            status_text(&got["result"])
        );
        assert_eq!(state(&got["result"]), "TASK_STATE_FAILED", "{got}");
        let (code, _) = health(&h).await;
        assert_eq!(code, 200);
    })
    .await;
}
