//! The sandbox per task (issue: contain every agent): a jsonl agent script
//! (`tests/fixtures/sandbox/probe-agent.sh`) tries to read the host's secrets, write outside
//! its working directory, leave processes behind, exhaust processes and memory, and reach the
//! network. With `AGENT_SANDBOX=auto` each attempt is refused; with `off` the same script
//! succeeds, which shows that the checks can fail.
//!
//! Needs bubblewrap and a writable cgroup hierarchy: without them the tests say so and pass,
//! except under `CI=true`, where a missing piece is a failure.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::common::{answers, eventually, limit, ready, until, WAIT};

/// One agent-host process serving the probe agent, with a SQLite store and a push key in a
/// data folder, a HOME and a working directory of its own (outside /tmp, which the sandbox
/// replaces anyway).
pub(super) struct Host {
    pub(super) child: tokio::process::Child,
    base: String,
    root: tempfile::TempDir,
    sandbox: String,
    extra: Vec<(String, String)>,
}

impl Host {
    /// Stops the host (SIGTERM) and starts it again on the same folders and settings.
    pub(super) async fn restart(mut self) -> Host {
        self.stop().await;
        let extra: Vec<(&str, &str)> = self
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Host::spawn(self.root, &self.sandbox, &extra).await
    }

    pub(super) async fn start(sandbox: &str, extra: &[(&str, &str)]) -> Host {
        Host::start_in(Path::new(env!("CARGO_TARGET_TMPDIR")), sandbox, extra).await
    }

    /// [`Host::start`] with its folders in `parent`.
    pub(super) async fn start_in(parent: &Path, sandbox: &str, extra: &[(&str, &str)]) -> Host {
        let root = tempfile::Builder::new()
            .prefix("sandbox-test")
            .tempdir_in(parent)
            .expect("tempdir");
        let r = root.path();
        for d in [
            "work",
            "data",
            "home",
            "work/.agent-host/attachments/other-task",
        ] {
            std::fs::create_dir_all(r.join(d)).expect("mkdir");
        }
        std::fs::write(
            r.join("work/.agent-host/attachments/other-task/secret.txt"),
            "another caller's file",
        )
        .expect("write");
        let script = r.join("work/probe-agent.sh");
        std::fs::copy(probe_script(), &script).expect("copy script");
        Host::spawn(root, sandbox, extra).await
    }

    /// agent-host serving the probe agent on the folders of `root`.
    async fn spawn(root: tempfile::TempDir, sandbox: &str, extra: &[(&str, &str)]) -> Host {
        let r = root.path();
        let script = r.join("work/probe-agent.sh");
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
            .env("AGENT_REPO_PATH", r.join("work"))
            .env("AGENT_HOST_STORE", db)
            .env("AGENT_PUSH", "true")
            .env("AGENT_HOST_TOKEN", "probe-secret-token")
            .env("AGENT_HOST_RATE_LIMIT", "0")
            .env("AGENT_SANDBOX", sandbox)
            .env("AGENT_TASK_PIDS", "64")
            .env("AGENT_TASK_MEMORY", "256M")
            .env("AGENT_CANCEL_GRACE_MS", "300")
            .envs(extra.iter().copied())
            .kill_on_drop(true)
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn agent-host");
        let base = format!("http://127.0.0.1:{port}");
        answers(&format!("{base}/.well-known/agent-card.json")).await;
        Host {
            child,
            base,
            root,
            sandbox: sandbox.to_string(),
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub(super) fn path(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }

    pub(super) async fn rpc(&self, method: &str, params: Value) -> Value {
        reqwest::Client::new()
            .post(format!("{}/", self.base))
            .bearer_auth("probe-secret-token")
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("JSON-RPC response")
    }

    /// Sends `prompt` and waits for the task to end; returns the task.
    pub(super) async fn run(&self, prompt: &str) -> Value {
        let v = self.rpc("SendMessage", message(prompt, true)).await;
        let task = v["result"]["task"].clone();
        assert!(task.is_object(), "{v}");
        task
    }

    /// Stops the host with SIGTERM and waits for it.
    pub(super) async fn sigterm(mut self) {
        self.stop().await;
    }

    async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        let _ = tokio::time::timeout(Duration::from_secs(20), self.child.wait()).await;
    }
}

fn probe_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sandbox/probe-agent.sh")
}

pub(super) fn message(text: &str, blocking: bool) -> Value {
    json!({"message": {"messageId": super::common::uuid(), "role": "ROLE_USER",
        "parts": [{"text": text}]}, "configuration": {"returnImmediately": !blocking}})
}

/// The text the agent printed (the task's result).
pub(super) fn text_of(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// True when this machine can run the sandbox (bubblewrap, a cgroup hierarchy); else says
/// why, and fails under CI.
pub(super) fn sandbox_available() -> bool {
    let caps = agent_host::runner::sandbox::Capabilities::get();
    let mut missing = Vec::new();
    if caps.bwrap.is_none() {
        missing.push(caps.bwrap_missing.clone());
    }
    if caps.cgroups.list.is_empty() {
        missing.push("no writable cgroup hierarchy".into());
    }
    if missing.is_empty() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "CI=true and the sandbox lacks: {}; .ci/run installs bubblewrap",
            missing.join("; ")
        );
    }
    eprintln!(
        "\n*** SKIPPED: the sandbox tests need {} ***\n",
        missing.join("; ")
    );
    false
}

/// Processes whose command line has `mark` in it (the probe's `sleep MARK` children).
pub(super) fn with_mark(mark: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(mark) && super::common::process_alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Waits (a few seconds at most) until no process with `mark` is left; returns those left.
pub(super) async fn left_with_mark(mark: &str) -> Vec<u32> {
    let left = until(SETTLE, async || {
        let left = with_mark(mark);
        ready(left.is_empty(), left)
    })
    .await;
    left.unwrap_or_else(|left| left)
}

/// How long a test gives processes to end before it names those left (a protection off
/// leaves them running).
const SETTLE: Duration = Duration::from_secs(5);

pub(super) fn kill_all(pids: &[u32]) {
    for p in pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*p as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// A `sleep` duration unique to one test run, so that its processes can be found.
pub(super) fn mark() -> String {
    format!("1000.{}", rand_digits())
}

fn rand_digits() -> u32 {
    std::process::id() * 7919 % 1_000_000
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() % 1000)
            .unwrap_or(0)
}

#[tokio::test]
async fn secrets_other_tasks_and_the_system_are_out_of_reach() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        for mode in ["auto", "off"] {
            let host = Host::start(mode, &[]).await;
            let etc = format!("/etc/agent-host-probe-{}", std::process::id());
            let prompt = format!(
                "probe {} {} {} {} {}",
                std::process::id(),
                host.path("data/agent-host.db").display(),
                host.path("data/push.key").display(),
                host.path("work/.agent-host/attachments/other-task/secret.txt")
                    .display(),
                etc
            );
            let task = host.run(&prompt).await;
            let text = text_of(&task);
            let ssh = host.path("home/.ssh/x").exists();
            let etc_written = Path::new(&etc).exists();
            let _ = std::fs::remove_file(&etc);
            host.sigterm().await;
            assert_eq!(
                task["status"]["state"], "TASK_STATE_COMPLETED",
                "{mode}: {task}"
            );
            if mode == "auto" {
                for probe in ["environ", "processes", "database", "pushkey", "attachments"] {
                    assert!(
                        text.contains(&format!("{probe}=refused")),
                        "{mode}: {probe}: {text}"
                    );
                }
                assert!(
                    !ssh && !etc_written,
                    "{mode}: wrote outside the working dir: {text}"
                );
            } else {
                // Without the sandbox the same script reaches all of it (the host runs as
                // root here; as another user, file modes alone would refuse some).
                for probe in ["processes", "database", "pushkey", "attachments"] {
                    assert!(
                        text.contains(&format!("{probe}=ok")),
                        "{mode}: {probe}: {text}"
                    );
                }
                if nix::unistd::geteuid().is_root() {
                    assert!(text.contains("environ=ok"), "{text}");
                    assert!(etc_written, "{text}");
                }
                assert!(ssh, "{text}");
            }
        }
    })
    .await;
}

/// A task that is root in its sandbox (a root host, no `sandbox_user`) cannot undo the
/// mounts that hide the host from it: unmounting what covers the data folder, in the
/// sandbox's mount namespace or in a new one, remounting `/` writable, unmounting `/run`;
/// nor write the kernel's settings (`/proc/sys`, where `kernel.core_pattern` names a program
/// the kernel runs as the host's root), nor lift its own process limit by mounting its v1
/// `pids` cgroup in namespaces of its own.
/// The same script under bubblewrap as the host ran it before (`--unshare-user --uid 0`,
/// no user namespace of the task's own) does all of it, which shows the probes can succeed.
#[tokio::test]
async fn a_root_task_cannot_undo_its_sandbox() {
    if !sandbox_available() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("\n*** SKIPPED: a task is root in its sandbox only on a root host ***\n");
        return;
    }
    limit(async {
        let host = Host::start("auto", &[]).await;
        let data = host.path("data");
        let etc = format!("/etc/agent-host-unhide-{}", std::process::id());
        let run = format!("/run/agent-host-unhide-{}", std::process::id());
        std::fs::write(&run, "host").expect("a file in the host's /run");
        let prompt = format!("unhide {} {etc} {run}", data.display());
        let text = text_of(&host.run(&prompt).await);
        let etc_written = Path::new(&etc).exists();
        let _ = std::fs::remove_file(&etc);
        // The step that locks the mounts ran as the small program with no C library, written
        // into the data folder at the host's start.
        let enter = std::fs::read_dir(&data).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("agent-host-enter-")
        });
        assert!(enter, "no agent-host-enter in {}", data.display());

        // The protection off: bubblewrap with the mounts alone, the task root with every
        // capability in the namespace that owns them.
        let work = host.path("work");
        let bare = std::process::Command::new("bwrap")
            .args(["--die-with-parent", "--unshare-pid", "--unshare-user"])
            .args(["--uid", "0", "--gid", "0", "--ro-bind", "/", "/"])
            .args(["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"])
            .args(["--tmpfs", "/run", "--tmpfs"])
            .arg(&data)
            .arg("--bind")
            .args([&work, &work])
            // The script where the checkout lies (under /tmp too, which is emptied above).
            .arg("--ro-bind")
            .args([probe_script(), probe_script()])
            .arg("--")
            .arg(probe_script())
            .arg(&prompt)
            .output()
            .expect("run bubblewrap");
        let bare = String::from_utf8_lossy(&bare.stdout).to_string();
        let bare_etc = Path::new(&etc).exists();
        let _ = std::fs::remove_file(&etc);
        let _ = std::fs::remove_file(&run);
        host.sigterm().await;

        let probes = [
            "unmount",
            "unmount_new_namespace",
            "remount",
            "run",
            "sysctl",
        ];
        for probe in probes.iter().chain(limited_pids().then_some(&"pids_limit")) {
            assert!(
                text.contains(&format!("{probe}=refused")),
                "{probe}: {text}"
            );
        }
        assert!(!etc_written, "{text}");
        for probe in ["unmount", "remount", "run", "sysctl"] {
            assert!(bare.contains(&format!("{probe}=ok")), "{probe}: {bare}");
        }
        assert!(bare_etc, "{bare}");
    })
    .await;
}

/// Whether this machine gives tasks a v1 `pids` cgroup of their own, which a task could
/// mount in namespaces of its own (its process limit then read-only to it).
fn limited_pids() -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| {
        m.lines()
            .any(|l| l.contains(" - cgroup ") && l.contains("pids"))
    })
}

/// Without bubblewrap (Landlock's tier), a task on a root host runs in the host's own
/// namespaces: it keeps no capability (it could otherwise reboot the machine, load a
/// module, reconfigure the host's network). Without the sandbox the same script has them.
#[tokio::test]
async fn a_root_task_without_bubblewrap_has_no_capability() {
    if !sandbox_available() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("\n*** SKIPPED: a task has capabilities only on a root host ***\n");
        return;
    }
    limit(async {
        for (mode, disable) in [("auto", "bwrap"), ("off", "")] {
            let host = Host::start(mode, &[("AGENT_HOST_SANDBOX_DISABLE", disable)]).await;
            let text = text_of(&host.run("caps").await);
            host.sigterm().await;
            if mode == "auto" {
                assert!(text.contains("capeff=0000000000000000"), "{text}");
                assert!(text.contains("netns=refused"), "{text}");
            } else {
                assert!(!text.contains("capeff=0000000000000000"), "{text}");
                assert!(text.contains("netns=ok"), "{text}");
            }
        }
    })
    .await;
}

/// A folder bubblewrap binds from a place agents write (here the folder of a context, in a
/// working directory another context's agent shares) and an agent replaced by a link since
/// it was checked: the next start in it refuses to bind it, rather than mounting the link's
/// target writable. The task is started again without a new check when its budget is raised.
#[tokio::test]
async fn a_folder_replaced_by_a_link_is_not_bound() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        let host = Host::start("auto", &[]).await;
        let sub = host.path("work/sub");
        let victim = host.path("victim");
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::create_dir_all(&victim).expect("mkdir");
        let sub_cwd = std::fs::canonicalize(&sub).expect("canonical");
        let mut first = message("tools 3", true);
        first["message"]["contextId"] = json!("ctx-b");
        first["message"]["metadata"] = json!({"cwd": sub_cwd, "budget": {"toolCalls": 1}});
        let v = host.rpc("SendMessage", first).await;
        let task = &v["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
        let id = task["id"].as_str().expect("task id").to_string();

        // Another context's agent, in the working directory above: a relative link, which
        // leads to the same folder on the host and in bubblewrap's new root.
        let swap = "swap sub ../victim".to_string();
        assert!(text_of(&host.run(&swap).await).contains("swapped"));

        let mut answer = message("continue", true);
        answer["message"]["taskId"] = json!(id);
        answer["message"]["contextId"] = json!("ctx-b");
        let v = host.rpc("SendMessage", answer).await;
        let done = eventually("the task ends", WAIT, async || {
            let t = host.rpc("GetTask", json!({"id": id})).await["result"].clone();
            let state = t["status"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            ready(
                state == "TASK_STATE_FAILED" || state == "TASK_STATE_COMPLETED",
                t,
            )
        })
        .await;
        let wrote = victim.join("written-by-agent").exists();
        host.sigterm().await;
        assert!(!wrote, "the agent wrote into the link's target: {done}");
        assert_eq!(done["status"]["state"], "TASK_STATE_FAILED", "{v} {done}");
        assert!(text_of(&done).contains("is a link"), "{done}");
    })
    .await;
}

/// What a task's escaping children (`setsid`, `timeout`, `setpgid`, a double-forking daemon)
/// left alive after the program exited, after cancel, and after SIGTERM to the host, with
/// `AGENT_SANDBOX=mode` and `extra` variables; `zombies`: the host's children left unreaped
/// after the exit and the cancel (its own programs are reaped by it, adopted orphans must be).
pub(super) struct Escapes {
    pub exit: Vec<u32>,
    pub cancel: Vec<u32>,
    pub sigterm: Vec<u32>,
    pub zombies: Vec<u32>,
}

pub(super) async fn escapes(mode: &str, extra: &[(&str, &str)]) -> Escapes {
    // 1. Normal exit of the program.
    let host = Host::start(mode, extra).await;
    let host_pid = host.child.id().expect("host pid");
    let m = mark();
    eprintln!("{mode}: exit");
    let task = host.run(&format!("spawn {m}")).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let exit = left_with_mark(&format!("{m} ")).await;
    // 2. Cancel while it runs.
    eprintln!("{mode}: cancel");
    let m2 = format!("{m}1");
    let v = host
        .rpc("SendMessage", message(&format!("spawn {m2} wait"), false))
        .await;
    let id = v["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {v}"))
        .to_string();
    said(&host, &id, "spawned").await;
    let c = host.rpc("CancelTask", json!({"id": id})).await;
    assert!(c["result"].is_object(), "{c}");
    let cancel = left_with_mark(&m2).await;
    let zombies = zombies_of(host_pid).await;
    // 3. The host stopped with SIGTERM while the task runs.
    eprintln!("{mode}: sigterm");
    let m3 = format!("{m}2");
    let v = host
        .rpc("SendMessage", message(&format!("spawn {m3} wait"), false))
        .await;
    let id = v["result"]["task"]["id"].as_str().expect("task id");
    said(&host, id, "spawned").await;
    host.sigterm().await;
    let sigterm = left_with_mark(&m3).await;
    kill_all(&[exit.clone(), cancel.clone(), sigterm.clone()].concat());
    Escapes {
        exit,
        cancel,
        sigterm,
        zombies,
    }
}

/// Waits until task `id` has said `word` (the probe says "spawned" once every escaper has
/// left or stayed in the process group: counting processes would also count the short-lived
/// ones on the way, and a stop then would come before the escapes).
async fn said(host: &Host, id: &str, word: &str) {
    eventually(&format!("task {id} says {word:?}"), WAIT, async || {
        let v = host.rpc("GetTask", json!({"id": id})).await;
        let text = v["result"].to_string();
        ready(text.contains(word), text)
    })
    .await;
}

/// Zombie children of `parent` still there after a few seconds.
async fn zombies_of(parent: u32) -> Vec<u32> {
    let find = || {
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let Some((head, rest)) = stat.rsplit_once(')') else {
                continue;
            };
            let f: Vec<&str> = rest.split_ascii_whitespace().collect();
            if f.first() == Some(&"Z") && f.get(1) == Some(&parent.to_string().as_str()) {
                out.extend(
                    head.split_whitespace()
                        .next()
                        .and_then(|p| p.parse::<u32>().ok()),
                );
            }
        }
        out
    };
    let zombies = until(SETTLE, async || {
        let found = find();
        ready(found.is_empty(), found)
    })
    .await;
    zombies.unwrap_or_else(|left| left)
}

#[tokio::test]
async fn nothing_a_task_started_outlives_cancel_exit_or_host_shutdown() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        for mode in ["auto", "off"] {
            let e = escapes(mode, &[]).await;
            if mode == "auto" {
                assert!(e.exit.is_empty(), "after exit: {:?}", e.exit);
                assert!(e.cancel.is_empty(), "after cancel: {:?}", e.cancel);
                assert!(e.sigterm.is_empty(), "after SIGTERM: {:?}", e.sigterm);
            } else {
                // setsid, setpgid and the daemon leave the process group: they escape.
                assert!(e.exit.len() >= 3, "off, after exit: {:?}", e.exit);
                assert!(e.cancel.len() >= 3, "off, after cancel: {:?}", e.cancel);
                assert!(e.sigterm.len() >= 3, "off, after SIGTERM: {:?}", e.sigterm);
            }
        }
    })
    .await;
}

#[tokio::test]
async fn a_task_over_its_process_or_memory_limit_fails_naming_it() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        for mode in ["auto", "off"] {
            let host = Host::start(mode, &[]).await;
            // 200 processes against a limit of 64; 512 MiB against 256 MiB.
            let fork = host.run("fork 200").await;
            let alloc = host.run("alloc 512").await;
            let after = host.run("hello").await;
            host.sigterm().await;
            assert_eq!(
                after["status"]["state"], "TASK_STATE_COMPLETED",
                "host keeps serving: {after}"
            );
            if mode == "auto" {
                assert_eq!(fork["status"]["state"], "TASK_STATE_FAILED", "{fork}");
                assert!(
                    text_of(&fork).contains("process limit (64 processes, task_pids)"),
                    "{fork}"
                );
                assert_eq!(alloc["status"]["state"], "TASK_STATE_FAILED", "{alloc}");
                assert!(
                    text_of(&alloc).contains("memory limit (256 MiB, task_memory)"),
                    "{alloc}"
                );
            } else {
                assert_eq!(fork["status"]["state"], "TASK_STATE_COMPLETED", "{fork}");
                assert_eq!(alloc["status"]["state"], "TASK_STATE_COMPLETED", "{alloc}");
            }
        }
    })
    .await;
}

#[tokio::test]
async fn without_network_a_task_cannot_reach_a_port_outside() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        for (mode, network, expect) in [
            ("auto", "none", "connect=refused"),
            ("auto", "open", "connect=ok"),
            ("off", "none", "connect=ok"),
        ] {
            let host = Host::start(mode, &[("AGENT_SANDBOX_NETWORK", network)]).await;
            let task = host.run(&format!("connect {port}")).await;
            host.sigterm().await;
            assert!(text_of(&task).contains(expect), "{mode}/{network}: {task}");
        }
    })
    .await;
}

/// Setting a sandbox up takes CPU that the running tasks' events need: under bubblewrap a
/// task's program starts (and stays) 5 nice steps below the host; without the sandbox it runs
/// at the host's priority.
#[tokio::test]
async fn a_program_under_bubblewrap_runs_below_the_host_priority() {
    if !sandbox_available() {
        return;
    }
    limit(async {
        let mut seen = Vec::new();
        for mode in ["off", "auto"] {
            let host = Host::start(mode, &[]).await;
            let task = host.run("nice").await;
            host.sigterm().await;
            let nice: i32 = text_of(&task)
                .trim()
                .strip_prefix("nice=")
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{mode}: {task}"));
            seen.push(nice);
        }
        assert_eq!(seen[1], (seen[0] + 5).min(19), "off, auto: {seen:?}");
    })
    .await;
}
