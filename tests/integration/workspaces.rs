//! A git workspace per context (issue 31): the jsonl agent `tests/fixtures/workspaces/
//! edit-agent.sh` edits its working directory; each context's change comes back as the
//! `changes` artifact, whose patch applies onto the base; the source repository is never
//! written; the sandbox keeps an agent out of the source and the other workspaces.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use super::common::{answers, limit, limit_to};

pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// One agent-host process whose agent works in a git repository `work/`.
struct Host {
    child: tokio::process::Child,
    base: String,
    root: tempfile::TempDir,
    extra: Vec<(String, String)>,
}

impl Host {
    async fn start(extra: &[(&str, &str)]) -> Host {
        Host::start_in(Path::new(env!("CARGO_TARGET_TMPDIR")), extra).await
    }

    /// [`Host::start`] with its folders in `parent`.
    async fn start_in(parent: &Path, extra: &[(&str, &str)]) -> Host {
        let root = tempfile::Builder::new()
            .prefix("workspaces-test")
            .tempdir_in(parent)
            .expect("tempdir");
        let r = root.path();
        for d in ["work/sub", "data", "home"] {
            std::fs::create_dir_all(r.join(d)).expect("mkdir");
        }
        let work = r.join("work");
        git(&work, &["init", "-q", "-b", "main"]);
        std::fs::write(work.join("shared.txt"), "line 1\nline 2\nline 3\n").unwrap();
        std::fs::write(work.join("sub/keep.txt"), "kept\n").unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "first"]);
        git(&work, &["tag", "v1"]);
        std::fs::write(work.join("shared.txt"), "line 1\nline 2\nline 3\nline 4\n").unwrap();
        git(&work, &["commit", "-q", "-am", "second"]);
        let extra: Vec<(String, String)> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (child, base) = Host::spawn(r, &extra).await;
        Host {
            child,
            base,
            root,
            extra,
        }
    }

    /// Kills the host (SIGKILL: no turn's end) and starts it again on the same folders.
    async fn restart(mut self) -> Host {
        self.kill().await;
        let (child, base) = Host::spawn(self.root.path(), &self.extra).await;
        Host {
            child,
            base,
            ..self
        }
    }

    /// agent-host on a free port, its data and the source repository in `r`.
    async fn spawn(r: &Path, extra: &[(String, String)]) -> (tokio::process::Child, String) {
        let work = r.join("work");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/workspaces/edit-agent.sh");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let db = format!("sqlite:{}", r.join("data/agent-host.db").display());
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["serve", "--port", &port.to_string()])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", r.join("home"))
            .env("AGENT_ADAPTER", "jsonl")
            .env("AGENT_BINARY", &script)
            .env("AGENT_REPO_PATH", &work)
            .env("AGENT_HOST_STORE", db)
            .env("AGENT_HOST_TOKEN", "ws-secret-token")
            .env("AGENT_HOST_RATE_LIMIT", "0")
            .env("AGENT_MAX_RUNNING_TASKS", "16")
            .env("AGENT_CANCEL_GRACE_MS", "300")
            .envs(extra.iter().map(|(k, v)| (k, v)))
            .kill_on_drop(true)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn agent-host");
        let base = format!("http://127.0.0.1:{port}");
        answers(&format!("{base}/.well-known/agent-card.json")).await;
        (child, base)
    }

    /// A clone of the source repository in the host's folder, named `name`: the caller's
    /// own checkout of the base.
    fn clone_of_source(&self, name: &str) -> PathBuf {
        let mine = self.root.path().join(name);
        let src = self.work();
        git(
            self.root.path(),
            &["clone", "-q", src.to_str().unwrap(), mine.to_str().unwrap()],
        );
        mine
    }

    fn work(&self) -> PathBuf {
        std::fs::canonicalize(self.root.path().join("work")).unwrap()
    }

    async fn rpc(&self, method: &str, params: Value) -> Value {
        self.rpc_in("1.0", method, params).await
    }

    async fn rpc_in(&self, version: &str, method: &str, params: Value) -> Value {
        self.post(version, method, params)
            .await
            .json()
            .await
            .expect("JSON-RPC response")
    }

    /// The raw response (a stream's events).
    async fn post(&self, version: &str, method: &str, params: Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/", self.base))
            .bearer_auth("ws-secret-token")
            .header("A2A-Version", version)
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .expect("request")
    }

    /// Sends `prompt` in `context` (with `metadata`) and returns the finished task.
    async fn run(&self, prompt: &str, context: &str, metadata: Value) -> Value {
        let v = self
            .rpc("SendMessage", message(prompt, context, metadata))
            .await;
        let task = v["result"]["task"].clone();
        assert!(task.is_object(), "{v}");
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        task
    }

    /// The checkout of `context`'s workspace (from the records in the data folder).
    /// The checkout of `context`'s workspace, once it has one.
    fn checkout_if_any(&self, context: &str) -> Option<PathBuf> {
        let dir = self.root.path().join("data/workspaces");
        std::fs::read_dir(&dir).ok()?.flatten().find_map(|e| {
            let rec: Value =
                serde_json::from_slice(&std::fs::read(e.path().join("workspace.json")).ok()?)
                    .ok()?;
            (rec["contextId"] == context).then(|| e.path().join("repo"))
        })
    }

    fn checkout_of(&self, context: &str) -> PathBuf {
        let dir = self.root.path().join("data/workspaces");
        for e in std::fs::read_dir(&dir)
            .expect("workspaces folder")
            .flatten()
        {
            let rec: Value = match std::fs::read(e.path().join("workspace.json")) {
                Ok(b) => serde_json::from_slice(&b).unwrap(),
                Err(_) => continue,
            };
            if rec["contextId"] == context {
                return e.path().join("repo");
            }
        }
        panic!("no workspace for {context}");
    }

    async fn stop(mut self) {
        self.kill().await;
    }

    /// Stops the host, keeping its folder.
    async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

fn message(text: &str, context: &str, metadata: Value) -> Value {
    json!({"message": {"messageId": super::common::uuid(), "role": "ROLE_USER",
        "contextId": context, "parts": [{"text": text}], "metadata": metadata}})
}

/// The `changes` artifact's data part and patch.
pub(super) fn changes_of(task: &Value) -> (Value, Vec<u8>) {
    let arts = task["artifacts"].as_array().expect("artifacts");
    let a = arts
        .iter()
        .find(|a| a["artifactId"] == "changes")
        .unwrap_or_else(|| panic!("no changes artifact in {task}"));
    let parts = a["parts"].as_array().unwrap();
    let data = parts[0]["data"].clone();
    let patch = parts
        .iter()
        .find(|p| p["filename"] == "changes.patch")
        .map(|p| {
            assert_eq!(p["mediaType"], "text/x-diff");
            base64::engine::general_purpose::STANDARD
                .decode(p["raw"].as_str().unwrap())
                .unwrap()
        })
        .unwrap_or_default();
    (data, patch)
}

pub(super) fn paths(data: &Value) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = data["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                f["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The tree `patch` gives applied onto a fresh clone of `src` at `base`.
pub(super) fn applied_tree(src: &Path, base: &str, patch: &[u8], scratch: &Path) -> String {
    let clean = scratch.join(format!("clean-{}", super::common::uuid()));
    git(
        scratch,
        &[
            "clone",
            "-q",
            src.to_str().unwrap(),
            clean.to_str().unwrap(),
        ],
    );
    git(&clean, &["checkout", "-q", "--detach", base]);
    let file = clean.join("../p.patch");
    std::fs::write(&file, patch).unwrap();
    git(&clean, &["apply", "--index", file.to_str().unwrap()]);
    git(&clean, &["write-tree"])
}

/// The tree of a checkout's files (untracked in, ignored out), without touching its index.
fn tree_of(checkout: &Path) -> String {
    let idx = checkout.join("../tree-index");
    let _ = std::fs::remove_file(&idx);
    for args in [&["add", "-A"][..], &["write-tree"]] {
        let out = Command::new("git")
            .arg("-C")
            .arg(checkout)
            .args(args)
            .env("GIT_INDEX_FILE", &idx)
            .output()
            .unwrap();
        assert!(out.status.success());
        if args[0] == "write-tree" {
            return String::from_utf8_lossy(&out.stdout).trim().to_string();
        }
    }
    unreachable!()
}

fn source_state(src: &Path) -> (String, String, String) {
    (
        git(src, &["status", "--porcelain"]),
        git(src, &["rev-parse", "HEAD"]),
        git(src, &["for-each-ref"]),
    )
}

#[tokio::test]
async fn eight_contexts_at_once_each_get_exactly_their_own_change() {
    limit_to(Duration::from_secs(120), async {
        let h = Host::start(&[]).await;
        let src = h.work();
        let before = source_state(&src);
        let head = before.1.clone();
        let runs = (0..8).map(|i| {
            let h = &h;
            async move {
                let ctx = format!("ctx{i}-{}", super::common::uuid());
                let task = h.run(&format!("edit c{i}"), &ctx, json!({})).await;
                (i, ctx, task)
            }
        });
        let done = futures::future::join_all(runs).await;
        for (i, ctx, task) in done {
            let (data, patch) = changes_of(&task);
            assert_eq!(
                paths(&data),
                [
                    (format!("own-c{i}.txt"), "added".to_string()),
                    ("shared.txt".to_string(), "modified".to_string())
                ]
            );
            assert_eq!(data["base"]["commit"], head.as_str());
            assert_eq!(data["base"]["ref"], "HEAD");
            assert_eq!(data["branch"], format!("agent-host/{ctx}"));
            assert_eq!(data["truncated"], false);
            let text = String::from_utf8_lossy(&patch);
            assert!(text.contains(&format!("+line 2 from c{i}")), "{text}");
            for j in (0..8).filter(|j| *j != i) {
                assert!(
                    !text.contains(&format!("from c{j}")) && !text.contains(&format!("own-c{j}")),
                    "context {i}'s patch holds {j}'s change"
                );
            }
            let co = h.checkout_of(&ctx);
            let scratch = h.root.path().join("data");
            assert_eq!(applied_tree(&src, &head, &patch, &scratch), tree_of(&co));
            // Committed on the context's branch (workspace_commit = "turn").
            assert_eq!(data["head"], git(&co, &["rev-parse", "HEAD"]).as_str());
        }
        assert_eq!(
            source_state(&src),
            before,
            "the source checkout is unchanged"
        );
        h.stop().await;
    })
    .await;
}

#[tokio::test]
async fn follow_ups_see_the_earlier_turns_and_the_patch_is_cumulative() {
    limit(async {
        let h = Host::start(&[]).await;
        let src = h.work();
        let ctx = format!("follow-{}", super::common::uuid());
        let t1 = h.run("edit one", &ctx, json!({"baseRef": "v1"})).await;
        let (d1, _) = changes_of(&t1);
        assert_eq!(d1["base"]["ref"], "v1");
        assert_eq!(
            d1["base"]["commit"],
            git(&src, &["rev-parse", "v1^{commit}"]).as_str()
        );
        let t2 = h.run("show own-one.txt", &ctx, json!({})).await;
        let shown = t2["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            shown.contains("made by one"),
            "turn 2 sees turn 1's file: {t2}"
        );
        let (d2, p2) = changes_of(&t2);
        assert_eq!(
            paths(&d2),
            paths(&d1),
            "a turn that changed nothing still carries the cumulative change"
        );
        let t3 = h.run("edit two", &ctx, json!({})).await;
        let (d3, p3) = changes_of(&t3);
        assert_eq!(
            paths(&d3),
            [
                ("own-one.txt".to_string(), "added".to_string()),
                ("own-two.txt".to_string(), "added".to_string()),
                ("shared.txt".to_string(), "modified".to_string())
            ]
        );
        assert!(!p2.is_empty() && p3.len() > p2.len());
        let co = h.checkout_of(&ctx);
        // One commit per changing turn, with the task id as a trailer.
        let base = d1["base"]["commit"].as_str().unwrap();
        let log = git(
            &co,
            &[
                "log",
                "--format=%s|%(trailers:key=Agent-Host-Task,valueonly)",
                &format!("{base}..HEAD"),
            ],
        );
        let log: Vec<&str> = log.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(
            log.join("\n"),
            format!(
                "edit two|{}\nedit one|{}",
                t3["id"].as_str().unwrap(),
                t1["id"].as_str().unwrap()
            )
        );
        assert_eq!(
            applied_tree(&src, base, &p3, &h.root.path().join("data")),
            tree_of(&co)
        );
        // v0.3 carries the artifact too: a data part and a file part.
        let v03 = h.rpc_in("0.3", "tasks/get", json!({"id": t3["id"]})).await;
        let art = v03["result"]["artifacts"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["artifactId"] == "changes"))
            .cloned()
            .unwrap_or_else(|| panic!("no changes artifact in {v03}"));
        let kinds: Vec<&str> = art["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["kind"].as_str())
            .collect();
        // The whole change, and this turn's since the previous one (turn 2 changed nothing).
        assert_eq!(kinds, ["data", "file", "file"], "{art}");
        assert_eq!(art["parts"][1]["file"]["name"], "changes.patch");
        assert_eq!(art["parts"][1]["file"]["mimeType"], "text/x-diff");
        assert_eq!(art["parts"][2]["file"]["name"], "turn.patch");
        // The v1.0 stream: the artifact comes before the terminal status update.
        let body = h
            .post(
                "1.0",
                "SendStreamingMessage",
                message("edit five", &ctx, json!({})),
            )
            .await
            .text()
            .await
            .unwrap();
        let artifact_at = body
            .find("\"artifactId\":\"changes\"")
            .unwrap_or_else(|| panic!("{body}"));
        let completed_at = body
            .rfind("TASK_STATE_COMPLETED")
            .unwrap_or_else(|| panic!("{body}"));
        assert!(artifact_at < completed_at, "{body}");
        // A commit as the base.
        let first = git(&src, &["rev-parse", "v1^{commit}"]);
        let t4 = h
            .run(
                "edit four",
                &format!("c-{}", super::common::uuid()),
                json!({"baseRef": first}),
            )
            .await;
        assert_eq!(changes_of(&t4).0["base"]["commit"], first.as_str());
        h.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_bad_base_ref_is_refused_before_anything_starts() {
    limit(async {
        let h = Host::start(&[]).await;
        let ctx = format!("bad-{}", super::common::uuid());
        let v = h
            .rpc(
                "SendMessage",
                message("edit x", &ctx, json!({"baseRef": "no-such-branch"})),
            )
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no-such-branch"),
            "{v}"
        );
        let list = h.rpc("ListTasks", json!({"contextId": ctx})).await;
        assert_eq!(
            list["result"]["tasks"]
                .as_array()
                .map(Vec::len)
                .unwrap_or(0),
            0,
            "{list}"
        );
        h.stop().await;
    })
    .await;
}

/// A caller whose workspace roots hold the host's data folder cannot point a new context at
/// another context's workspace (it would be made a workspace from that one's files) nor at
/// the data folder: -32602 naming the host's folder; the source repository still works.
#[tokio::test]
async fn a_cwd_in_the_hosts_own_folder_is_refused() {
    limit(async {
        let parent = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let roots = parent.path().canonicalize().unwrap();
        let roots = roots.to_str().unwrap();
        let h = Host::start_in(parent.path(), &[("AGENT_HOST_WORKSPACE_ROOTS", roots)]).await;
        let ctx = format!("victim-{}", super::common::uuid());
        h.run("edit victim", &ctx, json!({})).await;
        let theirs = h.checkout_of(&ctx);
        let data = h.root.path().join("data").canonicalize().unwrap();
        for cwd in [&theirs, &data] {
            let other = format!("thief-{}", super::common::uuid());
            let v = h
                .rpc(
                    "SendMessage",
                    message("show shared.txt", &other, json!({"cwd": cwd})),
                )
                .await;
            assert_eq!(v["error"]["code"], -32602, "{cwd:?}: {v}");
            let text = v["error"]["message"].as_str().unwrap();
            assert!(text.contains("agent-host's own folder"), "{text}");
        }
        let work = json!({"cwd": h.work()});
        h.run(
            "edit fine",
            &format!("fine-{}", super::common::uuid()),
            work,
        )
        .await;
        h.stop().await;
    })
    .await;
}

/// A `metadata.cwd` inside a repository's git folder (its `.git`, or a bare repository) is
/// refused: git takes no such folder for a work tree, so the task would run there directly,
/// writing the repository's hooks and refs (a hook the next `git commit` on the host runs).
/// Without the check the edit agent's files land in the source's `.git`.
#[tokio::test]
async fn a_cwd_in_a_git_folder_is_refused() {
    limit(async {
        let h = Host::start(&[]).await;
        let dot_git = h.work().join(".git");
        let bare = h.root.path().join("work/bare.git");
        let init = std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&bare)
            .status()
            .unwrap();
        assert!(init.success());
        for cwd in [dot_git.clone(), dot_git.join("refs"), bare.clone()] {
            let ctx = format!("planter-{}", super::common::uuid());
            let v = h
                .rpc(
                    "SendMessage",
                    message("edit planted", &ctx, json!({"cwd": cwd})),
                )
                .await;
            assert_eq!(v["error"]["code"], -32602, "{cwd:?}: {v}");
            let text = v["error"]["message"].as_str().unwrap();
            assert!(text.contains("git folder"), "{text}");
            assert!(!cwd.join("own-planted.txt").exists(), "{cwd:?}");
        }
        h.stop().await;
    })
    .await;
}

/// A base asked for where no workspace is made (`workspace = "shared"`) is refused with
/// -32602 rather than ignored; without one the turn runs in the folder.
#[tokio::test]
async fn a_base_ref_without_a_workspace_is_refused() {
    limit(async {
        let h = Host::start(&[("AGENT_HOST_WORKSPACE", "shared")]).await;
        let ctx = format!("shared-{}", super::common::uuid());
        let v = h
            .rpc(
                "SendMessage",
                message("edit x", &ctx, json!({"baseRef": "v1"})),
            )
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let text = v["error"]["message"].as_str().unwrap();
        assert!(
            text.contains("metadata.baseRef needs a workspace"),
            "{text}"
        );
        h.run("edit y", &ctx, json!({})).await;
        h.stop().await;
    })
    .await;
}

/// A source with uncommitted changes: the workspace starts from the base commit without
/// them, and the task's metadata says the source was dirty.
#[tokio::test]
async fn a_dirty_source_is_said_in_the_tasks_metadata() {
    limit(async {
        let h = Host::start(&[]).await;
        let clean = h
            .run(
                "edit a",
                &format!("clean-{}", super::common::uuid()),
                json!({}),
            )
            .await;
        assert!(clean["metadata"].get("sourceDirty").is_none(), "{clean}");
        std::fs::write(h.work().join("shared.txt"), "uncommitted\n").unwrap();
        let task = h
            .run(
                "show shared.txt",
                &format!("dirty-{}", super::common::uuid()),
                json!({}),
            )
            .await;
        assert_eq!(task["metadata"]["sourceDirty"], true, "{task}");
        let said = task["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            said.contains("line 2") && !said.contains("uncommitted"),
            "{task}"
        );
        h.stop().await;
    })
    .await;
}

/// A turn the host's end cuts short (kill -9): after the restart the task has failed, and
/// like every turn's end it carries the `changes` artifact with what the agent wrote.
#[tokio::test]
async fn a_turn_cut_short_by_a_crash_still_carries_its_change() {
    limit_to(Duration::from_secs(90), async {
        let h = Host::start(&[]).await;
        let ctx = format!("crash-{}", super::common::uuid());
        let mut params = message("slow cut.txt", &ctx, json!({}));
        params["configuration"] = json!({"returnImmediately": true});
        let v = h.rpc("SendMessage", params).await;
        let id = v["result"]["task"]["id"]
            .as_str()
            .expect("a task")
            .to_string();
        let written = loop {
            if let Some(co) = h
                .checkout_if_any(&ctx)
                .filter(|c| c.join("cut.txt").is_file())
            {
                break co;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(written.is_dir());
        let h = h.restart().await;
        let task = h.rpc("GetTask", json!({"id": id})).await["result"].clone();
        assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
        let (data, patch) = changes_of(&task);
        assert_eq!(
            paths(&data),
            [("cut.txt".to_string(), "added".to_string())],
            "{data}"
        );
        assert!(String::from_utf8_lossy(&patch).contains("written before the host stopped"));
        h.stop().await;
    })
    .await;
}

/// The contexts that have a workspace folder (from the records in the data folder).
fn workspace_contexts(root: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root.join("data/workspaces")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("workspace.json")).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .filter_map(|r| r["contextId"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_refused_first_message_leaves_no_workspace_behind() {
    limit(async {
        let h = Host::start(&[("AGENT_HOST_MAX_WORKSPACES", "1")]).await;
        let long = "x".repeat(200_000);
        // Too long for the jsonl adapter's one argument: refused, once before the workspace
        // would be made (the prompt alone), once after (the prompt names a saved attachment,
        // whose path in the workspace is part of it).
        let with_file = |ctx: &str| {
            json!({"message": {"messageId": super::common::uuid(), "role": "ROLE_USER",
                "contextId": ctx, "parts": [{"text": long},
                {"raw": "AAEC/w==", "filename": "blob.bin", "mediaType": "application/octet-stream"}]}})
        };
        for i in 0..3 {
            let ctx = format!("long-{i}-{}", super::common::uuid());
            let params = if i == 0 {
                message(&long, &ctx, json!({}))
            } else {
                with_file(&ctx)
            };
            let v = h.rpc("SendMessage", params).await;
            assert_eq!(v["error"]["code"], -32602, "{v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("command-line argument"),
                "{v}"
            );
            assert_eq!(workspace_contexts(h.root.path()), Vec::<String>::new());
        }
        // The one workspace allowed is still free for a new context.
        let ctx = format!("fits-{}", super::common::uuid());
        h.run("edit one", &ctx, json!({})).await;
        assert_eq!(workspace_contexts(h.root.path()), std::slice::from_ref(&ctx));
        // A follow-up refused keeps its context's workspace.
        let v = h.rpc("SendMessage", message(&long, &ctx, json!({}))).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert_eq!(workspace_contexts(h.root.path()), [ctx]);
        h.stop().await;
    })
    .await;
}

/// The refusal of a new context at `max_workspaces` ("busy", -32050) names the setting as it
/// was given: its variable, or its key in the config file.
#[tokio::test]
async fn the_workspace_limit_is_named_as_it_was_given() {
    limit_to(Duration::from_secs(60), async {
        let conf = tempfile::Builder::new()
            .suffix(".toml")
            .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        std::fs::write(conf.path(), "[workspace]\nmax_workspaces = 1\n").unwrap();
        let conf = conf.path().to_str().unwrap().to_string();
        for (setting, named) in [
            (
                ("AGENT_HOST_MAX_WORKSPACES", "1"),
                "AGENT_HOST_MAX_WORKSPACES",
            ),
            (
                ("AGENT_HOST_CONFIG", conf.as_str()),
                "[workspace] max_workspaces",
            ),
        ] {
            let h = Host::start(&[setting]).await;
            h.run("edit one", &super::common::uuid(), json!({})).await;
            let v = h
                .rpc(
                    "SendMessage",
                    message("edit two", &super::common::uuid(), json!({})),
                )
                .await;
            assert_eq!(v["error"]["code"], -32050, "{v}");
            let said = v["error"]["message"].as_str().unwrap_or_default();
            assert!(said.contains(&format!("(1, {named})")), "{named}: {v}");
            h.stop().await;
        }
    })
    .await;
}

/// True when bubblewrap runs here; else says why (and fails under `CI=true`).
fn bwrap_available() -> bool {
    let caps = agent_host::runner::sandbox::Capabilities::get();
    if caps.bwrap.is_some() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and bubblewrap is missing: {}", caps.bwrap_missing);
    }
    eprintln!(
        "\n*** SKIPPED: the workspace containment test needs bubblewrap: {} ***\n",
        caps.bwrap_missing
    );
    false
}

/// What the probe agent reports, NAME=VALUE per line.
fn probes(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn an_agent_cannot_write_the_source_or_another_workspace_in_the_sandbox() {
    if !bwrap_available() {
        return;
    }
    limit(async {
        let h = Host::start(&[("AGENT_SANDBOX", "required")]).await;
        let src = h.work();
        let before = source_state(&src);
        let other = format!("other-{}", super::common::uuid());
        h.run("edit other", &other, json!({})).await;
        let other_co = h.checkout_of(&other);
        let t = h
            .run(
                &format!("probe {} {}", src.display(), other_co.display()),
                &format!("p-{}", super::common::uuid()),
                json!({}),
            )
            .await;
        let out = probes(&t);
        for p in [
            "srcfile=refused",
            "srcref=refused",
            "srchead=refused",
            "other=refused",
        ] {
            assert!(out.contains(p), "{p} in {out}");
        }
        assert_eq!(source_state(&src), before);
        assert!(!other_co.join("written-by-agent").exists());
        h.stop().await;

        // The same probe without the sandbox and without workspaces: it succeeds.
        let h = Host::start(&[("AGENT_SANDBOX", "off"), ("AGENT_HOST_WORKSPACE", "shared")]).await;
        let src = h.work();
        let victim = h.root.path().join("victim");
        std::fs::create_dir_all(&victim).unwrap();
        let t = h
            .run(
                &format!("probe {} {}", src.display(), victim.display()),
                "p-off",
                json!({}),
            )
            .await;
        let out = probes(&t);
        for p in ["srcfile=ok", "srcref=ok", "srchead=ok", "other=ok"] {
            assert!(out.contains(p), "{p} in {out}");
        }
        assert!(t["artifacts"]
            .as_array()
            .is_none_or(|a| a.iter().all(|a| a["artifactId"] != "changes")));
        h.stop().await;
    })
    .await;
}

/// Links an agent plants in its workspace lead the host nowhere. Under Landlock (bubblewrap
/// left unused: there a turn's folder is a mount point the agent cannot replace), turn 1's
/// agent replaces its context's folder `sub/` by a link to a host folder and the reflog by a
/// link into it. The reflog link stops the turn's commit and change (the host's commit would
/// append to the file it names), and turn 2 does not run in the link (its sandbox would let
/// it write the host folder) but at the workspace's top. Unit tests in
/// `src/workspace/tests.rs` show plain git and the former folder check following both.
#[tokio::test]
async fn links_an_agent_plants_in_its_workspace_lead_the_host_nowhere() {
    let abi = agent_host::runner::sandbox::Capabilities::get()
        .landlock_abi
        .unwrap_or(0);
    if abi < 1 {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and Landlock is missing"
        );
        eprintln!("\n*** SKIPPED: the test needs Landlock ***\n");
        return;
    }
    limit(async {
        let h = Host::start(&[
            ("AGENT_SANDBOX", "auto"),
            ("AGENT_HOST_SANDBOX_DISABLE", "bwrap"),
        ])
        .await;
        let outside = h.root.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let ctx = format!("links-{}", super::common::uuid());
        // The context works in the repository's folder sub/ (its workspace's sub/).
        let sub = h.work().join("sub");
        let in_sub = json!({"cwd": sub.to_str().unwrap()});
        let t = h
            .run(
                &format!("plant {}", outside.display()),
                &ctx,
                in_sub.clone(),
            )
            .await;
        let co = h.checkout_of(&ctx);
        assert!(
            co.join("sub").is_symlink(),
            "the agent planted its link: {t}"
        );
        // No change is taken through the linked reflog: the artifact says so, with the
        // path inside the workspace, and lists no files.
        let (data, patch) = changes_of(&t);
        let why = data["error"].as_str().unwrap_or_else(|| panic!("{t}"));
        assert!(why.contains(".git/logs/HEAD is a link"), "{why}");
        assert!(data.get("files").is_none() && patch.is_empty(), "{t}");
        assert!(
            !outside.join("reflog").exists(),
            "the host wrote the reflog's target"
        );
        let t = h.run("write pwned", &ctx, in_sub).await;
        let said = t.to_string();
        assert!(
            !outside.join("pwned").exists(),
            "written through the link: {said}"
        );
        assert!(co.join("pwned").is_file(), "{said}");
        h.stop().await;
    })
    .await;
}

/// Runs the real `git` client with no configuration of the machine's or the user's and no
/// prompt, `header` (if any) sent with every HTTP request; its output.
fn git_client(dir: &Path, header: Option<&str>, args: &[&str]) -> std::process::Output {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir);
    if let Some(h) = header {
        cmd.arg("-c").arg(format!("http.extraHeader={h}"));
    }
    cmd.args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .output()
        .expect("git runs")
}

const OWNER: &str = "Authorization: Bearer ws-secret-token";
const OTHER: &str = "X-API-Key: other-callers-key";

/// An object of the source repository that no ref of the workspace reaches (a branch made
/// after the workspace, whose objects the workspace borrows): refused by its id in every
/// protocol version (version 2, git's default, would serve it).
fn an_object_no_ref_reaches_is_not_served(h: &Host, mine: &Path, url: &str) {
    let work = h.work();
    git(&work, &["checkout", "-q", "-b", "private"]);
    std::fs::write(work.join("private.txt"), "not for the caller\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-q", "-m", "private"]);
    let private = git(&work, &["rev-parse", "HEAD"]);
    git(&work, &["checkout", "-q", "main"]);
    for version in ["2", "0"] {
        let protocol = format!("protocol.version={version}");
        let out = git_client(
            mine,
            Some(OWNER),
            &["-c", &protocol, "fetch", url, &private],
        );
        assert!(
            !out.status.success(),
            "protocol {version}: fetched {private}"
        );
        let have = git_client(mine, None, &["cat-file", "-e", &private]);
        assert!(!have.status.success(), "protocol {version}");
    }
}

#[tokio::test]
async fn git_fetch_brings_the_branch_to_its_owner_only_and_refuses_a_push() {
    limit(async {
        let h = Host::start(&[("AGENT_HOST_API_KEY", "other-callers-key")]).await;
        let ctx = format!("fetch-{}", super::common::uuid());
        let task = h.run("edit one", &ctx, json!({})).await;
        let (data, _) = changes_of(&task);
        let head = data["head"].as_str().expect("a committed turn").to_string();
        let branch = data["branch"].as_str().unwrap().to_string();
        let url = format!("{}/git/{ctx}", h.base);
        let mine = h.root.path().join("mine");
        std::fs::create_dir_all(&mine).unwrap();
        git(&mine, &["init", "-q", "-b", "main"]);

        // The owner's token: the branch and its commits arrive.
        let out = git_client(&mine, Some(OWNER), &["fetch", &url, &branch]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(git(&mine, &["rev-parse", "FETCH_HEAD"]), head);
        git(&mine, &["branch", "fetched", "FETCH_HEAD"]);
        let files = git(&mine, &["ls-tree", "-r", "--name-only", "FETCH_HEAD"]);
        assert!(files.lines().any(|f| f == "own-one.txt"), "{files}");
        assert_eq!(
            git(&mine, &["log", "-1", "--format=%s", "FETCH_HEAD"]),
            "edit one"
        );

        an_object_no_ref_reaches_is_not_served(&h, &mine, &url);

        // Another caller: not found, as its tasks are; no credential: 401.
        let out = git_client(&mine, Some(OTHER), &["fetch", &url, &branch]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not found"), "{err}");
        let out = git_client(&mine, None, &["fetch", &url, &branch]);
        assert!(!out.status.success());
        let http = reqwest::Client::new();
        let refs = format!("{url}/info/refs?service=git-upload-pack");
        let status = |r: reqwest::Response| r.status().as_u16();
        let status_of = |r: &reqwest::Response| r.status().as_u16();
        assert_eq!(status(http.get(&refs).send().await.unwrap()), 401);
        let other = http.get(&refs).header("X-API-Key", "other-callers-key");
        assert_eq!(status(other.send().await.unwrap()), 404);
        let mine_req = http.get(&refs).bearer_auth("ws-secret-token");
        assert_eq!(status(mine_req.send().await.unwrap()), 200);
        // A query git never sends: the small JSON body of the other refusals.
        let twice = format!("{refs}&service=git-receive-pack");
        let r = http.get(&twice).bearer_auth("ws-secret-token");
        let r = r.send().await.unwrap();
        assert_eq!(status_of(&r), 400);
        let body: Value = r.json().await.expect("a JSON body");
        assert_eq!(body["error"], "Bad Request", "{body}");
        assert!(
            body["message"].as_str().unwrap().contains("service"),
            "{body}"
        );
        let unknown = format!(
            "{}/git/no-such-context/info/refs?service=git-upload-pack",
            h.base
        );
        let r = http.get(&unknown).bearer_auth("ws-secret-token");
        assert_eq!(status(r.send().await.unwrap()), 404);

        // The workspaces' count and disk use are in the metrics.
        let m = http
            .get(format!("{}/metrics", h.base))
            .bearer_auth("ws-secret-token");
        let m = m.send().await.unwrap().text().await.unwrap();
        assert!(
            m.contains("agent_host_workspaces{adapter=\"jsonl\"} 1"),
            "{m}"
        );
        assert!(
            m.contains("agent_host_workspace_bytes{adapter=\"jsonl\"}"),
            "{m}"
        );

        // A push, with the owner's token: refused, the workspace's branch unchanged.
        git(&mine, &["checkout", "-q", "-b", "work", "fetched"]);
        std::fs::write(mine.join("pushed.txt"), "x\n").unwrap();
        git(&mine, &["add", "-A"]);
        git(&mine, &["commit", "-q", "-m", "pushed"]);
        let out = git_client(
            &mine,
            Some(OWNER),
            &["push", &url, &format!("HEAD:refs/heads/{branch}")],
        );
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("403"), "{err}");
        let co = h.checkout_of(&ctx);
        assert_eq!(git(&co, &["rev-parse", "HEAD"]), head);
        let receive = format!("{url}/info/refs?service=git-receive-pack");
        let r = http.get(&receive).bearer_auth("ws-secret-token");
        assert_eq!(status(r.send().await.unwrap()), 403);
        // The dumb protocol's file reads are not served.
        let r = http
            .get(format!("{url}/info/refs"))
            .bearer_auth("ws-secret-token");
        assert_eq!(status(r.send().await.unwrap()), 403);
        for file in ["HEAD", "objects/info/packs"] {
            let r = http
                .get(format!("{url}/{file}"))
                .bearer_auth("ws-secret-token");
            assert_eq!(status(r.send().await.unwrap()), 403, "{file}");
            // Another caller learns nothing of the context: 404.
            let r = http
                .get(format!("{url}/{file}"))
                .header("X-API-Key", "other-callers-key");
            assert_eq!(status(r.send().await.unwrap()), 404, "{file}");
        }
        h.stop().await;
    })
    .await;
}

/// `agent-host call URL PROMPT ARGS...` run in `dir` with the host's token; exit code,
/// stdout, stderr.
async fn call_in(h: &Host, dir: &Path, prompt: &str, args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["call", &h.base, prompt];
    argv.extend_from_slice(args);
    agent_host_in(dir, &argv).await
}

/// `agent-host ARGV` in `dir`, with the host's token, git kept from the user's settings.
async fn agent_host_in(dir: &Path, argv: &[&str]) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(argv)
        .current_dir(dir)
        .env("A2A_TOKEN", "ws-secret-token")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env_remove("GIT_DIR")
        .kill_on_drop(true)
        .output()
        .await
        .expect("agent-host runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// With `[workspace] commit = "off"` a change cut at the patch limit has no commit to fetch
/// either: `call` says that neither `--apply` nor `--fetch` gets it whole and what the
/// host's operator can change (exit 1), instead of sending each to the other.
#[tokio::test]
async fn a_cut_patch_with_no_commit_is_said_to_be_out_of_reach() {
    limit(async {
        let h = Host::start(&[
            ("AGENT_HOST_WORKSPACE_COMMIT", "off"),
            ("AGENT_HOST_WORKSPACE_PATCH_LIMIT", "2KiB"),
        ])
        .await;
        let mine = h.clone_of_source("mine");
        for action in ["--apply", "--fetch"] {
            let ctx = format!("cut-{}", super::common::uuid());
            let (code, out, err) = call_in(
                &h,
                &mine,
                "lines zbig.txt 2000",
                &["--context", &ctx, action],
            )
            .await;
            let said = format!("{out}{err}");
            assert_eq!(code, 1, "{action}: {said}");
            assert!(said.contains("zbig.txt"), "{action}: {said}");
            for loop_advice in [
                "--fetch gets the whole change",
                "use --fetch",
                "in the patch (--apply)",
            ] {
                assert!(!said.contains(loop_advice), "{action}: {said}");
            }
            assert!(
                said.contains("neither --apply nor --fetch gets it whole"),
                "{action}: {said}"
            );
            assert!(
                err.contains("[workspace] patch_limit")
                    && err.contains("[workspace] commit = \"turn\""),
                "{action}: {err}"
            );
            assert!(!mine.join("zbig.txt").exists(), "{action}");
        }
        h.stop().await;
    })
    .await;
}

/// With `[workspace] commit = "off"` the context's branch holds the base alone: `--fetch`
/// fetches nothing, makes no branch, says the change is in the patch and exits 1 (before, it
/// made a branch at the base commit, said "fetched", and exited 0).
#[tokio::test]
async fn fetch_of_a_change_with_no_commit_fetches_nothing_and_says_where_it_is() {
    limit(async {
        let h = Host::start(&[("AGENT_HOST_WORKSPACE_COMMIT", "off")]).await;
        let mine = h.clone_of_source("mine");
        let ctx = format!("nocommit-{}", super::common::uuid());
        let (code, out, err) = call_in(
            &h,
            &mine,
            "lines small.txt 3",
            &["--context", &ctx, "--fetch"],
        )
        .await;
        let said = format!("{out}{err}");
        assert_eq!(code, 1, "{said}");
        assert!(err.contains("nothing fetched"), "{said}");
        assert!(err.contains("in the patch (--apply)"), "{said}");
        assert!(!err.contains("agent-host: fetched"), "{said}");
        let branches = std::process::Command::new("git")
            .args(["branch", "--list", "agent-host/*"])
            .current_dir(&mine)
            .output()
            .expect("git branch");
        assert!(
            branches.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&branches.stdout)
        );
        h.stop().await;
    })
    .await;
}

#[tokio::test]
async fn call_prints_the_changed_files_and_applies_or_fetches_the_change() {
    limit(async {
        let h = Host::start(&[]).await;
        let mine = h.clone_of_source("mine");

        // --apply on a clean checkout of the base: the files as the agent left them.
        let ctx = format!("apply-{}", super::common::uuid());
        let (code, out, err) =
            call_in(&h, &mine, "edit one", &["--context", &ctx, "--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains(" own-one.txt | 1 +"), "{out}");
        assert!(out.contains(" shared.txt  | 3 +--"), "{out}");
        assert!(
            out.contains("2 files changed, 2 insertions(+), 2 deletions(-)"),
            "{out}"
        );
        assert!(err.contains("applied the change"), "{err}");
        assert_eq!(
            std::fs::read_to_string(mine.join("own-one.txt")).unwrap(),
            "made by one\n"
        );
        assert!(std::fs::read_to_string(mine.join("shared.txt"))
            .unwrap()
            .contains("line 2 from one"));

        // A checkout whose shared.txt differs: nothing applied, the file named, exit 1.
        let theirs = h.clone_of_source("theirs");
        std::fs::write(theirs.join("shared.txt"), "something else entirely\n").unwrap();
        let ctx2 = format!("conflict-{}", super::common::uuid());
        let (code, out, err) =
            call_in(&h, &theirs, "edit two", &["--context", &ctx2, "--apply"]).await;
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("Conflicts in: shared.txt"), "{err}");
        assert!(!theirs.join("own-two.txt").exists(), "nothing half-applied");
        assert_eq!(
            std::fs::read_to_string(theirs.join("shared.txt")).unwrap(),
            "something else entirely\n"
        );

        // --fetch: the context's branch arrives in the caller's repository.
        let ctx3 = format!("fetch-{}", super::common::uuid());
        let (code, out, err) =
            call_in(&h, &theirs, "edit three", &["--context", &ctx3, "--fetch"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        let branch = format!("agent-host/{ctx3}");
        assert!(err.contains(&format!("fetched {branch}")), "{err}");
        let co = h.checkout_of(&ctx3);
        assert_eq!(
            git(&theirs, &["rev-parse", &branch]),
            git(&co, &["rev-parse", "HEAD"])
        );
        assert_eq!(
            git(&theirs, &["log", "-1", "--format=%s", &branch]),
            "edit three"
        );
        h.stop().await;
    })
    .await;
}

#[tokio::test]
async fn call_fetch_gives_each_context_its_branch_and_never_overwrites_one() {
    limit(async {
        let h = Host::start(&[]).await;
        let mine = h.clone_of_source("mine");
        let tip = |ctx: &str| {
            git(
                &h.checkout_of(ctx),
                &["rev-parse", &format!("agent-host/{ctx}")],
            )
        };
        // Two client-chosen ids with the same first 8 characters: two branches.
        for (ctx, prompt) in [("session-1", "edit one"), ("session-2", "edit two")] {
            let (code, out, err) = call_in(&h, &mine, prompt, &["--context", ctx, "--fetch"]).await;
            assert_eq!(code, 0, "{out}\n{err}");
            assert!(err.contains(&format!("fetched agent-host/{ctx}")), "{err}");
        }
        for ctx in ["session-1", "session-2"] {
            assert_eq!(
                git(&mine, &["rev-parse", &format!("agent-host/{ctx}")]),
                tip(ctx)
            );
        }

        // A local commit on a context's branch: the next fetch does not overwrite it.
        git(&mine, &["checkout", "-q", "agent-host/session-1"]);
        std::fs::write(mine.join("mine.txt"), "mine\n").unwrap();
        git(&mine, &["add", "-A"]);
        git(&mine, &["commit", "-q", "-m", "my own"]);
        let own = git(&mine, &["rev-parse", "HEAD"]);
        git(&mine, &["checkout", "-q", "main"]);
        let (code, out, err) = call_in(
            &h,
            &mine,
            "edit three",
            &["--context", "session-1", "--fetch"],
        )
        .await;
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("was not overwritten"), "{err}");
        assert_eq!(git(&mine, &["rev-parse", "agent-host/session-1"]), own);
        assert_eq!(git(&mine, &["rev-parse", "FETCH_HEAD"]), tip("session-1"));

        // A branch checked out: not moved, and the exit code says so.
        git(&mine, &["checkout", "-q", "agent-host/session-2"]);
        let before = git(&mine, &["rev-parse", "HEAD"]);
        let (code, out, err) = call_in(
            &h,
            &mine,
            "edit four",
            &["--context", "session-2", "--fetch"],
        )
        .await;
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("is checked out in"), "{err}");
        assert_eq!(git(&mine, &["rev-parse", "HEAD"]), before);
        assert_eq!(git(&mine, &["status", "--porcelain"]), "");
        git(&mine, &["checkout", "-q", "main"]);

        // An agent that switches to a branch of its own: its work still comes on the
        // context's branch.
        let (code, out, err) = call_in(
            &h,
            &mine,
            "branch mybranch",
            &["--context", "session-3", "--fetch"],
        )
        .await;
        assert_eq!(code, 0, "{out}\n{err}");
        let files = git(
            &mine,
            &["ls-tree", "-r", "--name-only", "agent-host/session-3"],
        );
        assert!(files.lines().any(|f| f == "z.txt"), "{files}");
        h.stop().await;
    })
    .await;
}

#[tokio::test]
async fn a_repository_the_agent_nests_is_named_and_call_warns_of_it() {
    limit(async {
        let h = Host::start(&[]).await;
        let ctx = format!("nest-{}", super::common::uuid());
        let (code, out, err) = call_in(&h, &h.work(), "nest inner", &["--context", &ctx]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(
            err.contains("warning: inner/ is a git repository of its own"),
            "{err}"
        );
        let list = h
            .rpc(
                "ListTasks",
                json!({"contextId": ctx, "includeArtifacts": true}),
            )
            .await;
        let (data, _) = changes_of(&list["result"]["tasks"][0]);
        assert_eq!(data["files"][0]["path"], "inner", "{data}");
        assert_eq!(data["files"][0]["embeddedRepository"], true, "{data}");
        h.stop().await;
    })
    .await;
}

/// The `changes` artifact of the last task of `ctx`.
async fn last_changes(h: &Host, ctx: &str) -> Value {
    let list = h
        .rpc(
            "ListTasks",
            json!({"contextId": ctx, "includeArtifacts": true}),
        )
        .await;
    let task = &list["result"]["tasks"][0];
    task["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["artifactId"] == "changes"))
        .cloned()
        .unwrap_or_else(|| panic!("no changes artifact in {task}"))
}

#[tokio::test]
async fn a_removed_git_folder_is_told_to_the_caller() {
    limit(async {
        let h = Host::start(&[]).await;
        let ctx = format!("nogit-{}", super::common::uuid());
        h.run("write one.txt", &ctx, json!({})).await;
        let art = last_changes(&h, &ctx).await;
        assert!(
            art["description"].as_str().unwrap().ends_with("(1 file)"),
            "{art}"
        );
        let (code, out, err) =
            call_in(&h, &h.work(), "nogit", &["--context", &ctx, "--apply"]).await;
        assert_eq!(code, 1, "{out}\n{err}");
        assert!(err.contains("git folder (.git) is gone"), "{err}");
        let art = last_changes(&h, &ctx).await;
        let data = &art["parts"][0]["data"];
        assert!(data["error"].as_str().unwrap().contains("is gone"), "{art}");
        assert!(data.get("files").is_none(), "{art}");
        h.stop().await;
    })
    .await;
}

#[tokio::test]
async fn apply_on_each_turn_of_a_context_leaves_every_turns_files() {
    limit(async {
        let h = Host::start(&[]).await;
        let mine = h.clone_of_source("mine");
        let ctx = format!("twice-{}", super::common::uuid());
        let (code, out, err) =
            call_in(&h, &mine, "edit one", &["--context", &ctx, "--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(err.contains("applied the change"), "{err}");
        let (code, out, err) =
            call_in(&h, &mine, "write t2.txt", &["--context", &ctx, "--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(err.contains("applied this turn's change"), "{err}");
        assert_eq!(
            std::fs::read_to_string(mine.join("own-one.txt")).unwrap(),
            "made by one\n"
        );
        assert_eq!(
            std::fs::read_to_string(mine.join("t2.txt")).unwrap(),
            "written by the agent\n"
        );
        // The artifact has both patches: the whole change and this turn's.
        let art = last_changes(&h, &ctx).await;
        let names: Vec<&str> = art["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["filename"].as_str())
            .collect();
        assert_eq!(names, ["changes.patch", "turn.patch"], "{art}");
        assert_eq!(
            art["parts"][0]["data"]["turn"]["files"][0]["path"],
            "t2.txt"
        );
        // A turn that changes nothing: nothing new, and no error.
        let (code, out, err) =
            call_in(&h, &mine, "show t2.txt", &["--context", &ctx, "--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(err.contains("nothing new to apply"), "{err}");
        // A fresh checkout of the base still takes the whole change.
        let fresh = h.clone_of_source("fresh");
        let (code, out, err) =
            call_in(&h, &fresh, "show t2.txt", &["--context", &ctx, "--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(fresh.join("own-one.txt").is_file() && fresh.join("t2.txt").is_file());

        // A task that waits for input: its first part applied, then the rest after the answer.
        let asked = format!("asked-{}", super::common::uuid());
        let (code, out, err) = call_in(
            &h,
            &mine,
            "ask a3.txt b3.txt",
            &["--context", &asked, "--apply"],
        )
        .await;
        assert_eq!(code, 4, "{out}\n{err}");
        assert!(
            mine.join("a3.txt").is_file() && !mine.join("b3.txt").exists(),
            "{err}"
        );
        let list = h.rpc("ListTasks", json!({"contextId": asked})).await;
        let task = list["result"]["tasks"][0]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let (code, out, err) = call_in(&h, &mine, "yes", &["--task", &task, "--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(err.contains("applied this turn's change"), "{err}");
        assert!(mine.join("b3.txt").is_file(), "{err}");
        h.stop().await;
    })
    .await;
}

/// `agent-host tasks watch URL ID ARGS` in `dir`, as [`call_in`] runs `call`.
async fn watch_in(h: &Host, dir: &Path, id: &str, args: &[&str]) -> (i32, String, String) {
    let mut argv = vec!["tasks", "watch", &h.base, id];
    argv.extend_from_slice(args);
    agent_host_in(dir, &argv).await
}

/// The change of a task that ended before: `tasks watch --apply` applies it and `--fetch`
/// fetches its branch, into checkouts that had neither; a failed task's change is neither.
#[tokio::test]
async fn tasks_watch_applies_or_fetches_the_change_of_a_task_that_ended_before() {
    limit(async {
        let h = Host::start(&[]).await;
        let mine = h.clone_of_source("mine");
        let ctx = format!("later-{}", super::common::uuid());
        let (code, out, err) = call_in(&h, &mine, "edit one", &["--context", &ctx]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(
            !mine.join("own-one.txt").exists(),
            "call alone applies nothing"
        );
        let list = h.rpc("ListTasks", json!({"contextId": ctx})).await;
        let task = list["result"]["tasks"][0]["id"]
            .as_str()
            .unwrap()
            .to_string();

        let (code, out, err) = watch_in(&h, &mine, &task, &["--apply"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(out.contains(" own-one.txt | 1 +"), "{out}");
        assert!(err.contains("applied the change"), "{err}");
        assert_eq!(
            std::fs::read_to_string(mine.join("own-one.txt")).unwrap(),
            "made by one\n"
        );

        let theirs = h.clone_of_source("theirs");
        let (code, out, err) = watch_in(&h, &theirs, &task, &["--fetch"]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        let branch = format!("agent-host/{ctx}");
        assert!(err.contains(&format!("fetched {branch}")), "{err}");
        assert_eq!(
            git(&theirs, &["rev-parse", &branch]),
            git(&h.checkout_of(&ctx), &["rev-parse", "HEAD"])
        );
        assert!(!theirs.join("own-one.txt").exists(), "fetched, not applied");

        // Without either, the task is shown as it ended and nothing else happens.
        let (code, out, err) = watch_in(&h, &theirs, &task, &[]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!err.contains("applied") && !theirs.join("own-one.txt").exists());
        h.stop().await;
    })
    .await;
}

/// A git repository with one commit, in a fresh folder under the target's scratch space.
fn small_repo() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::Builder::new()
        .prefix("workspaces-hosts")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tempdir");
    let repo = root.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("shared.txt"), "line 1\nline 2\nline 3\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "first"]);
    let repo = std::fs::canonicalize(repo).unwrap();
    (root, repo)
}

#[tokio::test]
async fn a_context_made_on_one_host_is_fetched_and_continued_through_another() {
    use super::common::{Options, TestServer};
    limit(async {
        let Some(db) = super::postgres::Schema::new("ws_hosts").await else {
            return;
        };
        let (root, repo) = small_repo();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/workspaces/edit-agent.sh");
        let opts = |id: &str| Options {
            adapter: "jsonl",
            program: Some(script.clone()),
            postgres: Some(db.url.clone()),
            cluster: Some(agent_host::settings::cluster::ClusterSettings {
                host_id: Some(id.into()),
                ..Default::default()
            }),
            workspace_roots: vec![repo.clone()],
            ..Options::default()
        };
        let a = TestServer::with(opts("ws-host-a")).await;
        let b = TestServer::with(opts("ws-host-b")).await;
        let ctx = format!("hosts-{}", super::common::uuid());
        let cwd = json!({"cwd": repo.display().to_string()});
        let r = a.rpc("SendMessage", message("edit one", &ctx, cwd)).await;
        let t1 = &r["result"]["task"];
        assert_eq!(t1["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
        let (d1, _) = changes_of(t1);
        let branch = d1["branch"].as_str().unwrap().to_string();

        // Fetched through B: B passes the request to A, which holds the workspace.
        let mine = root.path().join("mine");
        std::fs::create_dir_all(&mine).unwrap();
        git(&mine, &["init", "-q", "-b", "main"]);
        let through_b = format!("{}/git/{ctx}", b.base);
        // The servers run in this test's runtime: git runs beside it.
        let fetch = |dir: PathBuf, url: String, branch: String| {
            tokio::task::spawn_blocking(move || git_client(&dir, None, &["fetch", &url, &branch]))
        };
        let out = fetch(mine.clone(), through_b.clone(), branch.clone())
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            git(&mine, &["rev-parse", "FETCH_HEAD"]),
            d1["head"].as_str().unwrap()
        );

        // Continued through B: the turn runs on A, in the same workspace.
        let r = b
            .rpc("SendMessage", message("edit two", &ctx, json!({})))
            .await;
        let t2 = &r["result"]["task"];
        assert_eq!(t2["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
        let (d2, _) = changes_of(t2);
        assert_eq!(d2["branch"], branch.as_str());
        assert_eq!(
            paths(&d2),
            [
                ("own-one.txt".to_string(), "added".to_string()),
                ("own-two.txt".to_string(), "added".to_string()),
                ("shared.txt".to_string(), "modified".to_string())
            ]
        );
        let out = fetch(mine.clone(), through_b.clone(), branch.clone())
            .await
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            git(&mine, &["log", "--format=%s", "FETCH_HEAD"]),
            "edit two\nedit one\nfirst"
        );
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// `agent-host workspaces [ARGS]` on the data folder of the host in `root`; exit code, stdout,
/// stderr.
async fn workspaces_cmd(root: &Path, args: &[&str]) -> (i32, String, String) {
    let db = format!("sqlite:{}", root.join("data/agent-host.db").display());
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .arg("workspaces")
        .args(args)
        .args(["--store", &db])
        .env("HOME", root.join("home"))
        .env_remove("AGENT_HOST_CONFIG")
        .env_remove("AGENT_HOST_WORKSPACE_DIR")
        .kill_on_drop(true)
        .output()
        .await
        .expect("agent-host workspaces runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `agent-host workspaces` lists each context's workspace (context, branch, base, disk use,
/// checkout; `--json` too) and `rm CONTEXT` removes one, refused while the host has the
/// database open (the host would make the context a new workspace at its next turn); an
/// unknown context is an error.
#[tokio::test]
async fn the_workspaces_command_lists_and_removes_a_contexts_workspace() {
    limit(async {
        let mut h = Host::start(&[]).await;
        let root = h.root.path().to_path_buf();
        let ctx = format!("listed-{}", super::common::uuid());
        h.run("edit one", &ctx, json!({})).await;
        let checkout = h.checkout_of(&ctx);
        let (code, out, err) = workspaces_cmd(&root, &[]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        let branch = format!("agent-host/{ctx}");
        assert!(
            out.contains(&ctx) && out.contains(&branch) && out.contains("HEAD@"),
            "{out}"
        );
        assert!(out.contains("1 workspace(s)"), "{out}");
        let (code, out, _) = workspaces_cmd(&root, &["list", "--json"]).await;
        assert_eq!(code, 0);
        let doc: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(doc["workspaces"][0]["contextId"], ctx.as_str(), "{doc}");
        assert!(
            doc["workspaces"][0]["bytes"].as_u64().unwrap_or(0) > 0,
            "{doc}"
        );

        // While the host runs: refused, and the workspace is still there.
        let (code, _, err) = workspaces_cmd(&root, &["rm", &ctx]).await;
        assert_eq!(code, 1, "{err}");
        assert!(checkout.is_dir(), "{err}");

        h.kill().await;
        let (code, out, err) = workspaces_cmd(&root, &["rm", &ctx]).await;
        assert_eq!(code, 0, "{out}\n{err}");
        assert!(!checkout.exists(), "the checkout is gone");
        let (code, out, _) = workspaces_cmd(&root, &[]).await;
        assert_eq!(code, 0);
        assert!(out.contains("0 workspace(s)"), "{out}");
        let (code, _, err) = workspaces_cmd(&root, &["rm", &ctx]).await;
        assert_eq!(code, 1);
        assert!(err.contains("has no workspace"), "{err}");
    })
    .await;
}

/// `tasks prune --workspace-dir DIR`, serve's own flag, removes the workspace of every context
/// whose last task it deletes from the folder a host was given, as it does from the default
/// one (left behind, they would count against `max_workspaces` for good).
#[tokio::test]
async fn prune_removes_the_workspaces_of_the_folder_serve_was_given() {
    limit(async {
        let elsewhere = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let dir = elsewhere.path().join("ws");
        let mut h = Host::start(&[("AGENT_HOST_WORKSPACE_DIR", dir.to_str().unwrap())]).await;
        let ctx = format!("pruned-{}", super::common::uuid());
        h.run("edit one", &ctx, json!({})).await;
        let workspaces = || {
            std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.path().join("workspace.json").is_file())
                        .count()
                })
                .unwrap_or(0)
        };
        assert_eq!(workspaces(), 1, "the workspace is in {}", dir.display());
        h.kill().await;
        let root = h.root.path();
        let db = format!("sqlite:{}", root.join("data/agent-host.db").display());
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["tasks", "prune", "--keep", "0", "--yes", "--store", &db])
            .arg("--repo-path")
            .arg(root.join("work"))
            .arg("--workspace-dir")
            .arg(&dir)
            .env("HOME", root.join("home"))
            .env_remove("AGENT_HOST_CONFIG")
            .env_remove("AGENT_HOST_WORKSPACE_DIR")
            .env_remove("AGENT_HOST_RETENTION_MAX_AGE")
            .env_remove("AGENT_HOST_RETENTION_MAX_TASKS")
            .kill_on_drop(true)
            .output()
            .await
            .expect("agent-host tasks prune runs");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}\n{stderr}");
        assert!(
            stdout.contains(&format!("the workspace of context {ctx}")),
            "{stdout}"
        );
        assert_eq!(workspaces(), 0, "{stdout}");
    })
    .await;
}

/// An adapter's `workspace` key chooses for its tasks when the host's settings do not: a
/// `shared` adapter edits the folder itself (no `changes` artifact); the host's
/// `AGENT_HOST_WORKSPACE=isolated` wins over it.
#[tokio::test]
async fn an_adapter_chooses_its_workspace_unless_the_host_does() {
    limit_to(Duration::from_secs(60), async {
        let adapters = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let jsonl = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("adapters/jsonl.toml"),
        )
        .unwrap()
        .replacen(
            "id = \"jsonl\"",
            "id = \"in-place\"\nworkspace = \"shared\"",
            1,
        );
        assert!(jsonl.contains("workspace = \"shared\""));
        std::fs::write(adapters.path().join("in-place.toml"), jsonl).unwrap();
        let dir = adapters.path().to_str().unwrap();
        let base = [
            ("AGENT_HOST_ADAPTERS_DIR", dir),
            ("AGENT_ADAPTER", "in-place"),
        ];

        let h = Host::start(&base).await;
        let task = h.run("edit s1", &super::common::uuid(), json!({})).await;
        let arts = task["artifacts"].as_array().cloned().unwrap_or_default();
        assert!(
            !arts.iter().any(|a| a["artifactId"] == "changes"),
            "a shared folder has no changes artifact: {task}"
        );
        let shared = std::fs::read_to_string(h.work().join("shared.txt")).unwrap();
        assert!(shared.contains("from s1"), "edited in place: {shared}");
        h.stop().await;

        let host_says = [base[0], base[1], ("AGENT_HOST_WORKSPACE", "isolated")];
        let h = Host::start(&host_says).await;
        let ctx = super::common::uuid();
        let task = h.run("edit s2", &ctx, json!({})).await;
        let (data, _) = changes_of(&task);
        assert_eq!(
            paths(&data),
            [
                ("own-s2.txt".to_string(), "added".to_string()),
                ("shared.txt".to_string(), "modified".to_string())
            ]
        );
        assert!(
            !h.work().join("own-s2.txt").exists(),
            "the source is unchanged"
        );
        h.stop().await;
    })
    .await;
}

/// Whether every folder from `/` to `dir` lets other users through (`o+x`).
fn passable_by_others(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    dir.ancestors()
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
}

/// The entries under `dir` not owned by `uid` (the first few).
fn not_owned_by(dir: &Path, uid: u32) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let m = e.metadata().expect("metadata");
            if m.uid() != uid && found.len() < 5 {
                found.push(e.path());
            }
            if m.is_dir() {
                stack.push(e.path());
            }
        }
    }
    found
}

/// With `sandbox_user` the workspace is the user's: its agent commits in it on every turn
/// (also after the host committed a turn for it), the host takes each turn's change and
/// commits as that user (nothing in the checkout becomes root's), and `git fetch` brings the
/// branch back.
#[tokio::test]
async fn a_sandbox_users_workspace_is_its_own() {
    if !nix::unistd::geteuid().is_root() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but not root: sandbox_user needs a root host"
        );
        eprintln!("\n*** SKIPPED: sandbox_user needs a host running as root ***\n");
        return;
    }
    if !super::sandbox::sandbox_available() {
        return;
    }
    limit_to(Duration::from_secs(120), async {
        // As an operator would: the folders on the way passable by the user (a clone under
        // /root is not: the system's temporary folder then).
        let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let parent = if passable_by_others(scratch) {
            scratch.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let dir = tempfile::Builder::new()
            .prefix("workspaces-user")
            .tempdir_in(&parent)
            .expect("tempdir");
        let workspaces = dir.path().join("workspaces");
        let h = Host::start_in(
            dir.path(),
            &[
                ("AGENT_SANDBOX_USER", "nobody"),
                ("AGENT_HOST_WORKSPACE_DIR", workspaces.to_str().unwrap()),
            ],
        )
        .await;
        {
            use std::os::unix::fs::PermissionsExt;
            for d in [dir.path(), h.root.path()] {
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let ctx = "c0ffee00-0000-4000-8000-00000000005a";
        let said = |t: &Value| {
            t["history"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(t["artifacts"].as_array().into_iter().flatten())
                .map(|m| m.to_string())
                .collect::<String>()
        };
        let one = h.run("commit one", ctx, json!({})).await;
        assert!(said(&one).contains("uid=65534 commit=ok"), "{}", said(&one));
        let two = h.run("edit two", ctx, json!({})).await;
        let (data, _) = changes_of(&two);
        assert!(
            data["committed"].is_string(),
            "the host committed turn 2: {data}"
        );
        let three = h.run("commit three", ctx, json!({})).await;
        assert!(
            said(&three).contains("uid=65534 commit=ok"),
            "{}",
            said(&three)
        );
        let (data, patch) = changes_of(&three);
        let files: Vec<String> = paths(&data).into_iter().map(|(p, _)| p).collect();
        for f in ["own-one.txt", "own-three.txt", "own-two.txt", "shared.txt"] {
            assert!(files.contains(&f.to_string()), "{f} in {files:?}");
        }
        assert!(!patch.is_empty());
        let checkout = std::fs::read_dir(&workspaces)
            .unwrap()
            .flatten()
            .map(|e| e.path().join("repo"))
            .find(|p| p.is_dir())
            .expect("the workspace's checkout");
        let foreign = not_owned_by(&checkout, 65534);
        assert!(foreign.is_empty(), "not the user's: {foreign:?}");

        let into = dir.path().join("fetched");
        git(dir.path(), &["init", "-q", into.to_str().unwrap()]);
        let branch = format!("agent-host/{}", &ctx[..8]);
        let out = git_client(
            &into,
            Some(OWNER),
            &["fetch", &format!("{}/git/{ctx}", h.base), &branch],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = git(&into, &["log", "--format=%s", "FETCH_HEAD"]);
        assert!(log.starts_with("three"), "{log}");
        h.stop().await;
    })
    .await;
}

/// A source made by `git clone --shared` (or `--reference`) of a repository under `/tmp`:
/// its objects are that repository's, named by its own `objects/info/alternates`. The
/// sandbox replaces `/tmp` with its own; it shows that folder again, read-only, so that the
/// agent's git in its workspace finds the base's objects (it failed with "unable to
/// normalize alternate object path" and "bad object HEAD").
#[tokio::test]
async fn an_agent_reads_the_history_of_a_source_that_borrows_its_objects_in_the_sandbox() {
    if !bwrap_available() {
        return;
    }
    limit(async {
        let h = Host::start(&[("AGENT_SANDBOX", "required")]).await;
        let lender = tempfile::Builder::new()
            .prefix("lender")
            .tempdir_in("/tmp")
            .expect("a folder under /tmp");
        let bare = lender.path().join("origin.git");
        let work = h.work();
        git(
            lender.path(),
            &[
                "clone",
                "-q",
                "--bare",
                work.to_str().unwrap(),
                bare.to_str().unwrap(),
            ],
        );
        // The source's own objects given up for the lender's: what `clone --shared` leaves.
        let objects = work.join(".git/objects");
        std::fs::write(
            objects.join("info/alternates"),
            format!("{}\n", bare.join("objects").display()),
        )
        .unwrap();
        for e in std::fs::read_dir(&objects).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.len() == 2 {
                std::fs::remove_dir_all(e.path()).unwrap();
            }
        }
        git(&work, &["repack", "-q", "-a", "-d", "-l"]);
        assert_eq!(git(&work, &["log", "-1", "--format=%s"]), "second");
        let ctx = format!("borrowing-{}", super::common::uuid());
        let t = h.run("gitlog", &ctx, json!({})).await;
        let out = probes(&t);
        assert!(out.contains("gitlog=ok second"), "{out}");
        h.stop().await;
    })
    .await;
}

/// A context's folder (`metadata.cwd` of its first message, below the repository's top)
/// that the source no longer has (a checkout of a commit without it): the follow-up works
/// in the same folder of its workspace, which still has it. Where the context has no
/// workspace, the refusal names the conversation's folder, not a `metadata.cwd` the
/// follow-up never sent.
#[tokio::test]
async fn a_follow_up_works_in_its_workspace_when_its_folder_left_the_source() {
    limit(async {
        let h = Host::start(&[]).await;
        let work = h.work();
        std::fs::create_dir_all(work.join("tool")).unwrap();
        std::fs::write(work.join("tool/t.txt"), "tool\n").unwrap();
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "-q", "-m", "tool"]);
        let ctx = format!("moved-{}", super::common::uuid());
        let in_tool = json!({"cwd": work.join("tool").to_str().unwrap()});
        h.run("write one.txt", &ctx, in_tool).await;
        let co = h.checkout_of(&ctx);
        assert!(co.join("tool/one.txt").is_file());
        git(&work, &["checkout", "-q", "v1"]);
        assert!(!work.join("tool").exists());
        let t = h.run("write two.txt", &ctx, json!({})).await;
        assert!(co.join("tool/two.txt").is_file(), "{t}");
        git(&work, &["checkout", "-q", "main"]);
        h.stop().await;

        // No workspace: the folder itself is the conversation's, and its absence is said.
        let h = Host::start(&[("AGENT_HOST_WORKSPACE", "shared")]).await;
        let work = h.work();
        let gone = work.join("scratch");
        std::fs::create_dir_all(&gone).unwrap();
        let ctx = format!("gone-{}", super::common::uuid());
        h.run(
            "write one.txt",
            &ctx,
            json!({"cwd": gone.to_str().unwrap()}),
        )
        .await;
        std::fs::remove_dir_all(&gone).unwrap();
        let v = h
            .rpc("SendMessage", message("write two.txt", &ctx, json!({})))
            .await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        let said = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            said.contains("working directory of this conversation")
                && said.contains("does not exist")
                && !said.starts_with("metadata.cwd"),
            "{said}"
        );
        h.stop().await;
    })
    .await;
}

/// `git fetch` of a context whose agent removed its workspace's `.git`: a 404 saying so,
/// with the small JSON body of the other refusals, not a 500.
#[tokio::test]
async fn a_fetch_of_a_workspace_without_its_repository_is_not_found() {
    limit(async {
        let h = Host::start(&[]).await;
        let ctx = format!("nofetch-{}", super::common::uuid());
        h.run("write one.txt", &ctx, json!({})).await;
        h.run("nogit", &ctx, json!({})).await;
        let refs = format!("{}/git/{ctx}/info/refs?service=git-upload-pack", h.base);
        let r = reqwest::Client::new()
            .get(&refs)
            .bearer_auth("ws-secret-token")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 404);
        let body: Value = r.json().await.expect("a JSON body");
        assert!(
            body["message"]
                .as_str()
                .unwrap_or_default()
                .contains("no git repository any more"),
            "{body}"
        );
        // git itself says it was not found.
        let mine = h.root.path().join("mine");
        std::fs::create_dir_all(&mine).unwrap();
        git(&mine, &["init", "-q"]);
        let url = format!("{}/git/{ctx}", h.base);
        let out = git_client(&mine, Some(OWNER), &["fetch", &url, "HEAD"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("not found"), "{err}");
        h.stop().await;
    })
    .await;
}
