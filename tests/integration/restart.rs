//! Nothing lost: the host killed with SIGKILL mid-task and started again on the same database.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::{json, Value};

use crate::common::*;

/// The agent-host binary serving the demo agent on a SQLite database.
struct Host {
    child: Child,
    base: String,
    client: reqwest::Client,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Host {
    async fn start(db: &Path, repo: &Path) -> Host {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["serve", "--adapter", "demo", "--port", &port.to_string()])
            .arg("--store")
            .arg(format!("sqlite:{}", db.display()))
            .env("AGENT_REPO_PATH", repo)
            .env("AGENT_CANCEL_GRACE_MS", "300")
            // The fake agent reports its grandchild's pid, which under the sandbox is a pid
            // of the task's own namespace; and there a dead host's processes die with it
            // (tests/integration/sandbox.rs). This test is about the process-group records.
            .env("AGENT_SANDBOX", "off")
            .env_remove("AGENT_HOST_CONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start agent-host");
        let host = Host {
            child,
            base: format!("http://127.0.0.1:{port}"),
            client: reqwest::Client::new(),
        };
        let health = format!("{}/health", host.base);
        eventually("agent-host answers /health", WAIT, async || {
            host.client.get(&health).send().await.map(drop)
        })
        .await;
        host
    }

    async fn rpc(&self, method: &str, params: Value) -> Value {
        self.client
            .post(format!("{}/", self.base))
            .header("content-type", "application/json")
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .expect("send")
            .json()
            .await
            .expect("json")
    }

    /// The task once it is in state `want`.
    async fn task_in(&self, id: &str, want: &str) -> Value {
        eventually(&format!("task {id} becomes {want}"), WAIT, async || {
            let t = self.rpc("GetTask", json!({"id": id})).await["result"].clone();
            ready(t["status"]["state"] == want, t)
        })
        .await
    }

    /// SIGTERM, as a service manager stops the host; waits for it to exit.
    fn term(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }

    fn kill9(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
    }
}

/// The context of task `id`.
async fn context_of(host: &Host, id: &str) -> String {
    let t = host.rpc("GetTask", json!({"id": id})).await["result"].clone();
    t["contextId"].as_str().expect("a context id").to_string()
}

#[tokio::test]
async fn a_host_killed_mid_task_loses_nothing_and_leaves_nothing_running() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent-host.db");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let mut a = Host::start(&db, &repo).await;

        // A running task, streamed partly; a task waiting for approval; a task whose
        // process tree must not survive the host.
        let mut p = send_params("slow");
        p["configuration"] = json!({"returnImmediately": true});
        let slow = a.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let asking = a.rpc("SendMessage", send_params("approval")).await["result"]["task"].clone();
        assert_eq!(asking["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let asking = asking["id"].as_str().unwrap().to_string();
        let mut p = send_params("grandchild");
        p["configuration"] = json!({"returnImmediately": true});
        let tree = a.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let grandchild = eventually("the grandchild's pid is reported", WAIT, async || {
            let t = a.rpc("GetTask", json!({"id": tree})).await["result"].clone();
            let text = t["status"]["message"]["parts"][0]["text"].as_str();
            grandchild_pid(text.unwrap_or("")).ok_or(t)
        })
        .await;
        a.task_in(&slow, "TASK_STATE_WORKING").await;
        // What the next start needs is in the store: both process groups (to stop what the
        // dead host left running) and the slow task's CLI session (to resume it).
        let ctx = context_of(&a, &slow).await;
        eventually(
            "the process groups and the session are recorded",
            WAIT,
            async || {
                let r = recorded(&db);
                let groups = [&slow, &tree].iter().all(|t| r.process_groups.contains(*t));
                ready(groups && r.sessions.contains(&ctx), r)
            },
        )
        .await;

        a.kill9();
        assert!(
            process_alive(grandchild),
            "SIGKILL of the host leaves its CLIs orphaned"
        );

        let b = Host::start(&db, &repo).await;
        // The new host stopped what the dead one left running.
        process_ends(
            "the dead host's grandchild is stopped by the restart",
            grandchild,
        )
        .await;

        // The running task resumed its CLI session and finished.
        let done = b.task_in(&slow, "TASK_STATE_COMPLETED").await;
        let answer: String = done["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["artifactId"] == "result")
            .flat_map(|a| a["parts"].as_array().unwrap().clone())
            .filter_map(|p| p["text"].as_str().map(str::to_string))
            .collect();
        assert!(answer.contains("Resuming session"), "{answer}");
        // The task with the process tree was resumed too (same session, continued).
        let t = b.rpc("GetTask", json!({"id": tree})).await["result"].clone();
        assert_ne!(t["status"]["state"], "TASK_STATE_SUBMITTED");
        b.rpc("CancelTask", json!({"id": tree})).await;

        // The task waiting for approval is still waiting, and answerable.
        let t = b.rpc("GetTask", json!({"id": asking})).await["result"].clone();
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let mut reply = send_params("yes");
        reply["message"]["taskId"] = json!(asking);
        let r = b.rpc("SendMessage", reply).await;
        assert_eq!(
            r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{r}"
        );

        // Replay after the restart: every event after the one a client saw, ids without gaps.
        let resp = b
            .client
            .post(format!("{}/", b.base))
            .header("content-type", "application/json")
            .header("A2A-Version", "1.0")
            .header("Last-Event-ID", "2")
            .json(&json!({"jsonrpc":"2.0","id":9,"method":"SubscribeToTask","params":{"id": slow}}))
            .send()
            .await
            .unwrap();
        let body = resp.text().await.unwrap();
        let ids: Vec<u64> = body
            .lines()
            .filter_map(|l| l.strip_prefix("id: "))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(ids.first(), Some(&3));
        assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
        assert!(body.contains("TASK_STATE_COMPLETED"));

        // Nothing is stuck: every task is terminal.
        let all = b.rpc("ListTasks", json!({})).await["result"].clone();
        assert_eq!(all["totalSize"], 3);
        for t in all["tasks"].as_array().unwrap() {
            let st = t["status"]["state"].as_str().unwrap();
            assert!(
                matches!(
                    st,
                    "TASK_STATE_COMPLETED" | "TASK_STATE_CANCELED" | "TASK_STATE_FAILED"
                ),
                "{st}"
            );
        }
    })
    .await;
}

/// Issue 15 item 6: a planned stop (SIGTERM) keeps what a crash keeps: the working task is
/// resumed by the next start, the task waiting for an answer stays answerable.
#[tokio::test]
async fn a_host_stopped_with_sigterm_keeps_its_tasks_for_the_next_start() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent-host.db");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let mut a = Host::start(&db, &repo).await;
        let mut p = send_params("slow");
        p["configuration"] = json!({"returnImmediately": true});
        let slow = a.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let asking = a.rpc("SendMessage", send_params("approval")).await["result"]["task"].clone();
        assert_eq!(asking["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let asking = asking["id"].as_str().unwrap().to_string();
        a.task_in(&slow, "TASK_STATE_WORKING").await;
        // The slow task's CLI session is recorded (what the next start resumes).
        let ctx = context_of(&a, &slow).await;
        eventually("the slow task's session is recorded", WAIT, async || {
            let r = recorded(&db);
            ready(r.sessions.contains(&ctx), r)
        })
        .await;

        a.term();

        let b = Host::start(&db, &repo).await;
        let t = b.rpc("GetTask", json!({"id": asking})).await["result"].clone();
        assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{t}");
        let mut reply = send_params("yes");
        reply["message"]["taskId"] = json!(asking);
        let r = b.rpc("SendMessage", reply).await;
        println!(
            "answer after SIGTERM and restart: {}",
            r["result"]["task"]["status"]["state"]
        );
        assert_eq!(
            r["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{r}"
        );
        let done = b.task_in(&slow, "TASK_STATE_COMPLETED").await;
        let text = done.to_string();
        println!("resumed after SIGTERM: {}", done["status"]["state"]);
        assert!(text.contains("Resuming session"), "{text}");
    })
    .await;
}

/// `agent-host call URL --task ID yes` after a restart: the answer's stream opens on the task
/// still waiting (its turn resumes the session after the answer is stored), and the command
/// reports how the task ended, not the question it answered.
#[tokio::test]
async fn call_answers_a_task_left_waiting_by_a_killed_host() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent-host.db");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        let mut a = Host::start(&db, &repo).await;
        let asking =
            a.rpc("SendMessage", send_params("approval edit")).await["result"]["task"].clone();
        assert_eq!(asking["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let asking = asking["id"].as_str().unwrap().to_string();
        a.kill9();

        let b = Host::start(&db, &repo).await;
        let base = b.base.clone();
        let task = asking.clone();
        let out = tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_agent-host"))
                .args(["call", &base, "--task", &task, "yes"])
                .env_remove("A2A_TOKEN")
                .stdin(Stdio::null())
                .output()
                .expect("run agent-host call")
        })
        .await
        .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{said}");
        assert!(said.contains("✓ completed"), "{said}");
        assert!(!said.contains("input required"), "{said}");
        b.task_in(&asking, "TASK_STATE_COMPLETED").await;
    })
    .await;
}

/// A turn that resumes a task after a restart adds to the task's answer only when the task
/// has one: the first piece of an answer the task lacks starts the `assistant-response`
/// artifact (no `append`), as it does without a restart.
#[tokio::test]
async fn an_answer_after_a_restart_starts_the_answer_it_lacks() {
    limit(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("agent-host.db");
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).expect("repo");
        let mut a = Host::start(&db, &repo).await;
        let asking = a.rpc("SendMessage", send_params("question")).await["result"]["task"].clone();
        assert_eq!(asking["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{asking}");
        let has_answer = |t: &Value| {
            t["artifacts"]
                .as_array()
                .is_some_and(|all| all.iter().any(|x| x["artifactId"] == "assistant-response"))
        };
        assert!(!has_answer(&asking), "{asking}");
        let id = asking["id"].as_str().expect("task id").to_string();
        a.kill9();
        let b = Host::start(&db, &repo).await;
        let mut reply = send_params("src/main.rs");
        reply["message"]["taskId"] = json!(id);
        let body = b
            .client
            .post(format!("{}/", b.base))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": reply}))
            .send()
            .await
            .expect("send")
            .text()
            .await
            .expect("the stream");
        let first = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .map(|f| f["result"]["artifactUpdate"].clone())
            .find(|u| u["artifact"]["artifactId"] == "assistant-response")
            .unwrap_or_else(|| panic!("an assistant-response update: {body}"));
        assert_ne!(first["append"], json!(true), "{first}");
        let text = first["artifact"]["parts"][0]["text"].as_str().unwrap_or("");
        assert!(!text.starts_with('\n'), "{first}");
    })
    .await;
}
