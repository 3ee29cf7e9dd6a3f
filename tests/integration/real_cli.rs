//! The real coding-agent CLIs (installed from npm into tests/clis by .ci/run) run through
//! agent-host against the scripted model server of `model_server.rs`, offline: a tool use
//! with a final answer, a follow-up that resumes the session, an approval answered yes and
//! one answered no, a cancel mid-turn, and an auth error; for Gemini CLI also follow-ups
//! within the minute of the first turn and a model API that answers 500
//! (`real_cli_gemini.rs`); Qwen Code's failures are in `real_cli_qwen.rs`, aider's first-run
//! questions in `real_cli_aider.rs`, opencode (with and without `XDG_DATA_HOME`) in
//! `real_cli_opencode.rs`.
//!
//! A CLI is found through `CLAUDE_CODE_PATH` / `CODEX_PATH` / `GEMINI_PATH` / `QWEN_PATH` /
//! `OPENCODE_PATH` / `AIDER_PATH`, else `tests/clis/node_modules/.bin/<name>` (npm) or
//! `tests/clis/.venv/bin/<name>` (PyPI), else PATH.
//!
//! The tests are `#[ignore]`d, so a plain `cargo test` reports them as *ignored* (a skip the
//! summary counts, not a pass). Run them with
//! `cargo test --test integration real_cli -- --include-ignored` after
//! `npm install --no-save --prefix tests/clis`; `.ci/run` does. Once asked for, a test whose CLI is missing
//! fails, saying how to install it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_host::adapter::Registry;
use serde_json::{json, Value};

use crate::common::*;
use crate::model_server::{
    ModelServer, Scenario, FINAL_TEXT, PLAIN_TEXT, READ_COMMAND, SERVER_ERROR_TEXT, WRITE_COMMAND,
};

/// Each CLI's whole series of scenarios runs under this limit.
const SUITE_LIMIT: Duration = Duration::from_secs(240);
/// One turn of a real CLI.
const TURN_LIMIT: Duration = Duration::from_secs(90);

/// The CLI's program; panics (the test fails) when it is not installed.
pub fn find_cli(name: &str, env_var: &str) -> PathBuf {
    let from_env = std::env::var_os(env_var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    // npm CLIs in tests/clis/node_modules, Python ones (aider) in the tests/clis/.venv.
    let clis = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clis");
    let in_repo = [clis.join("node_modules/.bin"), clis.join(".venv/bin")]
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| clis.join("node_modules/.bin").join(name));
    let found = match from_env {
        Some(p) => {
            assert!(p.is_file(), "{env_var}={} is not a file", p.display());
            Some(p)
        }
        None if in_repo.is_file() => Some(in_repo),
        None => which::which(name).ok(),
    };
    found.unwrap_or_else(|| {
        panic!(
            "the real-CLI test needs {name}, which is not installed: set {env_var}, or run \
             `npm install --no-save --prefix tests/clis` or, for aider, `python3 -m venv tests/clis/.venv && \
             tests/clis/.venv/bin/pip install -r tests/clis/requirements.txt` (.ci/run does)"
        )
    })
}

/// Where the CLIs' HOMEs are made: the build's scratch folder, or `/var/tmp` when that lies in
/// the temporary directory (a clone under `/tmp`), which Codex refuses for its helpers.
pub fn home_parent() -> PathBuf {
    let scratch = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    if scratch.starts_with(std::env::temp_dir()) {
        PathBuf::from("/var/tmp")
    } else {
        scratch
    }
}

/// One CLI behind agent-host, with its model server and HOME.
pub struct Rig {
    pub name: &'static str,
    pub server: TestServer,
    pub model: ModelServer,
    /// How long one turn may take.
    pub turn_limit: Duration,
    /// The CLI's HOME (its config and sessions), removed with the rig.
    pub _home: tempfile::TempDir,
}

impl Rig {
    /// `setup` gets the model server's base URL and the HOME, and returns the options.
    pub async fn start(
        name: &'static str,
        program: PathBuf,
        setup: impl FnOnce(&str, &Path) -> Options,
    ) -> Rig {
        Rig::start_limited(name, program, TURN_LIMIT, setup).await
    }

    /// [`Rig::start`] for a CLI whose turns may take up to `turn_limit` (also its idle
    /// timeout: a CLI that retries a failing model API is silent for a long time).
    pub async fn start_limited(
        name: &'static str,
        program: PathBuf,
        turn_limit: Duration,
        setup: impl FnOnce(&str, &Path) -> Options,
    ) -> Rig {
        let model = ModelServer::start(Scenario::Tool).await;
        // Not under /tmp: Codex refuses to create its helper binaries (the `codex-linux-sandbox`
        // alias its own bubblewrap sandbox execs) under a temporary directory, and then every
        // shell call fails where bubblewrap is installed. A real HOME is not under /tmp either.
        let home = tempfile::tempdir_in(home_parent()).unwrap();
        let mut o = setup(&model.base, home.path());
        o.program = Some(program);
        o.home = Some(home.path().to_path_buf());
        o.prompt_via = Registry::builtin().unwrap().get(o.adapter).unwrap().prompt;
        o.timeout = turn_limit;
        o.idle_timeout = Duration::from_secs(60).max(turn_limit);
        o.grace = Duration::from_secs(3);
        // The CLI runs in the sandbox, as agent-host runs it by default (required in CI);
        // REAL_CLI_SANDBOX=off runs every suite without it.
        let mode = if std::env::var("REAL_CLI_SANDBOX").is_ok_and(|v| v == "off") {
            agent_host::runner::sandbox::Mode::Off
        } else if std::env::var("CI").is_ok_and(|v| v == "true") {
            agent_host::runner::sandbox::Mode::Required
        } else {
            agent_host::runner::sandbox::Mode::Auto
        };
        // The default network mode (proxy): the scripted model server, on the host's
        // loopback, is allowed by its exact address and port, as a local model gateway is.
        let model_addr = model.base.trim_start_matches("http://").to_string();
        o.sandbox = agent_host::settings::sandbox::SandboxSettings {
            mode: Some(mode),
            allow_hosts: vec![model_addr],
            ..Default::default()
        };
        let server = TestServer::with(o).await;
        Rig {
            name,
            server,
            model,
            turn_limit,
            _home: home,
        }
    }

    /// Sends a message on the streaming method and reads the stream to its end (a final or
    /// an interrupted state); returns the frames and the task as GetTask shows it then.
    pub async fn turn(&self, ctx: &str, task: Option<&str>, text: &str) -> (Vec<Frame>, Value) {
        self.turn_in(ctx, task, text, None).await
    }

    /// [`Rig::turn`] with the agent working in `cwd` (`metadata.cwd`).
    pub async fn turn_in(
        &self,
        ctx: &str,
        task: Option<&str>,
        text: &str,
        cwd: Option<&Path>,
    ) -> (Vec<Frame>, Value) {
        let mut p = send_params(text);
        if let Some(dir) = cwd {
            p["message"]["metadata"] = json!({"cwd": dir});
        }
        p["message"]["contextId"] = json!(ctx);
        if let Some(t) = task {
            p["message"]["taskId"] = json!(t);
        }
        // A little beyond the host's own limit, so that a turn the host ends at its limit is
        // seen ended (as failed) rather than cut off here.
        let limit = self.turn_limit + Duration::from_secs(15);
        let frames = tokio::time::timeout(limit, self.server.stream("SendStreamingMessage", p))
            .await
            .unwrap_or_else(|_| panic!("{}: no end of the turn for {text:?}", self.name));
        let id = frames
            .iter()
            .find_map(|f| {
                let r = &f.data["result"];
                r["task"]["id"]
                    .as_str()
                    .or(r["statusUpdate"]["taskId"].as_str())
            })
            .unwrap_or_else(|| panic!("{}: no task in {frames:?}", self.name))
            .to_string();
        let t = self.server.rpc("GetTask", json!({"id": id})).await["result"].clone();
        (frames, t)
    }

    /// The processes whose working directory is the agent's (the CLI and its children), as
    /// (pid, process group).
    pub fn processes(&self) -> Vec<(u32, u32)> {
        let dir = self.server.dir().canonicalize().unwrap();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if std::fs::read_link(e.path().join("cwd")).is_ok_and(|c| c == dir)
                && process_alive(pid)
            {
                if let Some(g) = pgrp_of(pid) {
                    out.push((pid, g));
                }
            }
        }
        out
    }
}

pub fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or("")
}

/// The text of a status object's message.
pub fn status_text(status: &Value) -> String {
    status["message"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn artifact_text(t: &Value, id: &str) -> String {
    t["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| a["artifactId"] == id)
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["text"].as_str().map(str::to_string))
        .collect()
}

/// The texts of the working status messages among stream frames.
pub fn working_messages(frames: &[Frame]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|f| {
            let st = &f.data["result"]["statusUpdate"]["status"];
            (st["state"] == "TASK_STATE_WORKING").then(|| status_text(st))
        })
        .filter(|t| !t.is_empty())
        .collect()
}

/// The approval data part of an input-required task.
pub fn approval_data(t: &Value) -> Value {
    t["status"]["message"]["parts"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|p| p.get("data").cloned())
        .unwrap_or_else(|| panic!("no approval data part in {t}"))
}

/// Minutes since the epoch (UTC, as the CLIs' ISO timestamps).
pub fn epoch_minute() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        / 60
}

/// Returns once the model server got `at_least` requests offering tools (the CLI is
/// mid-turn).
async fn model_asked(model: &ModelServer, at_least: usize) {
    eventually("the CLI asks the model", TURN_LIMIT, async || {
        let n = model.model_requests().len();
        ready(n >= at_least, n)
    })
    .await;
}

/// What a CLI does with a denied approval.
#[derive(Clone, Copy)]
pub enum Deny {
    /// The model is told (the next model request carries this text) and answers.
    ToModel(&'static str),
    /// The turn ends at once with this result text; the model is not asked again.
    EndsTurn(&'static str),
}

/// Scenario 1: a tool use, then the final answer. Returns the session id and a marker of the prompt.
pub async fn tool_use(rig: &Rig, ctx: &str) -> (String, String) {
    let (name, m) = (rig.name, &rig.model);
    m.set_scenario(Scenario::Tool);
    m.clear();
    let marker = format!("first-turn-{}", &ctx[..8]);
    let (frames, t) = rig
        .turn(ctx, None, &format!("Run {READ_COMMAND} please ({marker})"))
        .await;
    let tools = working_messages(&frames);
    eprintln!(
        "[{name}] tool use: {} | result: {:?} | working messages: {tools:?}",
        state(&t),
        artifact_text(&t, "result")
    );
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{name}: {t}");
    assert!(
        artifact_text(&t, "result").contains(FINAL_TEXT),
        "{name}: {t}"
    );
    assert!(
        tools.iter().any(|m| m.starts_with("Using tool:")),
        "{name}: tool use is visible: {tools:?}"
    );
    let session = t["metadata"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{name}: no session id in {}", t["metadata"]))
        .to_string();
    let sent: Vec<String> = m
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    eprintln!("[{name}] requests to the model server: {sent:?}");
    let reqs = m.model_requests();
    assert!(reqs.len() >= 2, "{name}: a request with the tool result");
    assert!(
        reqs.last().unwrap().text().contains("hi"),
        "{name}: the tool's output reached the model"
    );
    (session, marker)
}

/// Scenario 2: a follow-up in the same context resumes the CLI's session (same session id; the
/// model sees the earlier conversation).
pub async fn follow_up(rig: &Rig, ctx: &str, session: &str, marker: &str) {
    let (name, m) = (rig.name, &rig.model);
    m.set_scenario(Scenario::Text);
    m.clear();
    let (_, t) = rig.turn(ctx, None, "And what did it print?").await;
    eprintln!(
        "[{name}] follow-up: {} | result: {:?} | session {} (first {session})",
        state(&t),
        artifact_text(&t, "result"),
        t["metadata"]["sessionId"]
    );
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{name}: {t}");
    let result = artifact_text(&t, "result");
    assert!(result.contains(PLAIN_TEXT), "{name}: {t}");
    assert!(
        !result.contains(FINAL_TEXT),
        "{name}: the earlier answer is not part of this one: {result:?}"
    );
    assert_eq!(t["metadata"]["sessionId"], session, "{name}");
    let req = m.model_requests().last().cloned().expect("a model request");
    assert!(
        req.text().contains(marker) && req.text().contains(FINAL_TEXT),
        "{name}: the follow-up carries the earlier conversation"
    );
}

/// Scenarios 3 and 4: a command that needs approval, answered `answer` ("yes" or "no").
pub async fn approval(rig: &Rig, answer: &str, deny: Deny) {
    let (name, m) = (rig.name, &rig.model);
    let created = rig.server.dir().join("fake_created.txt");
    m.set_scenario(Scenario::Write);
    m.clear();
    let _ = std::fs::remove_file(&created);
    let ctx = uuid();
    let (_, t) = rig.turn(&ctx, None, "Create the file please").await;
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "{name}: {t}");
    let data = approval_data(&t);
    eprintln!("[{name}] approval asked: {data}");
    assert!(data["approvalId"].is_string(), "{name}: {data}");
    assert!(data["kind"].is_string(), "{name}: {data}");
    assert!(
        data.to_string().contains(WRITE_COMMAND),
        "{name}: the approval names the command: {data}"
    );
    let asked = m.model_requests().len();
    let id = t["id"].as_str().unwrap();
    let (_, t) = rig.turn(&ctx, Some(id), answer).await;
    let later = m.model_requests()[asked..].to_vec();
    let result = artifact_text(&t, "result");
    eprintln!(
        "[{name}] approval answered {answer}: {} | result: {result:?} | file created: {} | model requests after the answer: {} | the model got: {}",
        state(&t),
        created.exists(),
        later.len(),
        later.last().map(|r| r.last_message()).unwrap_or_default().chars().take(400).collect::<String>()
    );
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{name}: {t}");
    assert_eq!(created.exists(), answer == "yes", "{name}: {answer}");
    match (answer, deny) {
        ("yes", _) | (_, Deny::ToModel(_)) => {
            assert!(result.contains(FINAL_TEXT), "{name}: {t}");
            let last = later.last().expect("the model is asked again");
            let seen = match deny {
                Deny::ToModel(text) if answer != "yes" => text,
                _ => "fake_created",
            };
            assert!(
                last.text().contains(seen),
                "{name}: the model got the tool's outcome ({seen:?})"
            );
        }
        (_, Deny::EndsTurn(text)) => {
            assert!(result.contains(text), "{name}: {t}");
            assert!(later.is_empty(), "{name}: the turn ended without the model");
        }
    }
}

/// A task that creates a file in a git repository: it works in a workspace of its own (the
/// source stays as it was), and its `changes` artifact names the file, with a patch that
/// `git apply` takes onto a clean checkout of the base.
pub async fn change(rig: &Rig) {
    use crate::workspaces::{applied_tree, changes_of, git, paths};
    let (name, m) = (rig.name, &rig.model);
    let repo = rig.server.dir().join(format!("repo-{}", &uuid()[..8]));
    std::fs::create_dir(&repo).unwrap();
    std::fs::write(repo.join("README.md"), "a repository\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "README.md"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let base = git(&repo, &["rev-parse", "HEAD"]);
    m.set_scenario(Scenario::Write);
    m.clear();
    let ctx = uuid();
    let (_, mut t) = rig
        .turn_in(&ctx, None, "Create the file please", Some(&repo))
        .await;
    // The CLIs that ask before a command are told yes.
    for _ in 0..3 {
        if state(&t) != "TASK_STATE_INPUT_REQUIRED" {
            break;
        }
        let id = t["id"].as_str().unwrap().to_string();
        t = rig.turn(&ctx, Some(&id), "yes").await.1;
    }
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{name}: {t}");
    let (data, patch) = changes_of(&t);
    let files = paths(&data);
    eprintln!(
        "[{name}] change: {files:?}, patch {} bytes, base {}, head {}",
        patch.len(),
        data["base"]["commit"],
        data["head"]
    );
    assert!(
        files.contains(&("fake_created.txt".to_string(), "added".to_string())),
        "{name}: the changes name the file: {data}"
    );
    assert_eq!(data["base"]["commit"], base.as_str(), "{name}: {data}");
    assert!(
        !repo.join("fake_created.txt").exists(),
        "{name}: the source repository is unchanged"
    );
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let tree = applied_tree(&repo, &base, &patch, scratch.path());
    let base_tree = git(&repo, &["rev-parse", "HEAD^{tree}"]);
    assert_ne!(tree, base_tree, "{name}: the patch changes the tree");
}

/// Scenario 5: cancel mid-turn: the task is canceled and nothing of the CLI is left.
pub async fn cancel(rig: &Rig) {
    let (name, m, s) = (rig.name, &rig.model, &rig.server);
    m.set_scenario(Scenario::Slow);
    m.clear();
    let mut p = send_params("Run it slowly");
    p["configuration"] = json!({"returnImmediately": true});
    let id = s.rpc("SendMessage", p).await["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    model_asked(m, 1).await;
    let procs = rig.processes();
    assert!(!procs.is_empty(), "{name}: the CLI runs in the agent's dir");
    let groups: Vec<u32> = procs.iter().map(|(_, g)| *g).collect();
    let c = s.rpc("CancelTask", json!({"id": id})).await;
    eprintln!(
        "[{name}] cancel: {} | processes before (pid, group): {procs:?}",
        state(&c["result"])
    );
    assert_eq!(state(&c["result"]), "TASK_STATE_CANCELED", "{name}: {c}");
    groups_end(&format!("{name}: every process of the CLI ends"), &groups).await;
    assert!(rig.processes().is_empty(), "{name}: {:?}", rig.processes());
}

/// Scenario 6: an auth error fails the task with a message that says so.
pub async fn auth_error(rig: &Rig) {
    let name = rig.name;
    rig.model.set_scenario(Scenario::Auth);
    let (_, t) = rig.turn(&uuid(), None, "Say hi").await;
    let text = status_text(&t["status"]);
    eprintln!("[{name}] auth error: {} | {text:?}", state(&t));
    assert_eq!(state(&t), "TASK_STATE_FAILED", "{name}: {t}");
    let lower = text.to_lowercase();
    assert!(
        ["auth", "401", "api key", "api_key"]
            .iter()
            .any(|w| lower.contains(w)),
        "{name}: {text}"
    );
}

/// A model API that answers every request with a 500: the task ends `failed` (within the
/// turn limit, so in a bounded time) with the API's error text in its message and
/// `errorKind: model`.
pub async fn server_error(rig: &Rig) {
    let name = rig.name;
    rig.model.set_scenario(Scenario::ServerError);
    rig.model.clear();
    let (_, t) = rig.turn(&uuid(), None, "Say hi").await;
    let text = status_text(&t["status"]);
    eprintln!(
        "[{name}] model 500: {} after {} model requests | {text:?} | errorKind {}",
        state(&t),
        rig.model.requests().len(),
        t["metadata"]["errorKind"]
    );
    assert_eq!(state(&t), "TASK_STATE_FAILED", "{name}: {t}");
    assert!(
        text.contains(SERVER_ERROR_TEXT),
        "{name}: the failure message carries the API's error: {text:?}"
    );
    assert_eq!(t["metadata"]["errorKind"], "model", "{name}: {t}");
}

/// Claude Code against the scripted model server at `base`.
pub fn claude_options(base: &str, _home: &Path) -> Options {
    Options {
        adapter: "claude-code",
        env: vec![
            ("ANTHROPIC_BASE_URL".into(), base.to_string()),
            ("ANTHROPIC_API_KEY".into(), "sk-test".into()),
        ],
        ..Options::default()
    }
}

/// Codex against the scripted model server at `base` (a provider of its own, no retries),
/// with its `CODEX_HOME` in the rig's HOME.
pub fn codex_options(base: &str, home: &Path) -> Options {
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    Options {
        adapter: "codex",
        env: vec![
            ("FAKE_KEY".into(), "sk-test".into()),
            ("CODEX_HOME".into(), codex_home.display().to_string()),
        ],
        extra_args: vec![
            "-c".into(),
            "model_provider=\"fake\"".into(),
            "-c".into(),
            format!(
                "model_providers.fake={{name=\"Fake\", base_url=\"{base}/v1\", env_key=\"FAKE_KEY\", wire_api=\"responses\", request_max_retries=0, stream_max_retries=0}}"
            ),
        ],
        model: Some("fake-model".into()),
        ..Options::default()
    }
}

/// Every scenario, in order.
pub async fn run_scenarios(rig: &Rig, deny: Deny) {
    let ctx = uuid();
    let (session, marker) = tool_use(rig, &ctx).await;
    follow_up(rig, &ctx, &session, &marker).await;
    approval(rig, "yes", deny).await;
    approval(rig, "no", deny).await;
    change(rig).await;
    cancel(rig).await;
    auth_error(rig).await;
}

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn claude_code() {
    let program = find_cli("claude", "CLAUDE_CODE_PATH");
    limit_to(SUITE_LIMIT, async {
        let started = Instant::now();
        let rig = Rig::start("claude-code", program, claude_options).await;
        // A denial goes back to the model as the tool's error result.
        run_scenarios(&rig, Deny::ToModel("The user denied this request.")).await;
        eprintln!("[claude-code] all scenarios in {:?}", started.elapsed());
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn codex() {
    let program = find_cli("codex", "CODEX_PATH");
    limit_to(SUITE_LIMIT, async {
        let started = Instant::now();
        let rig = Rig::start("codex", program, codex_options).await;
        // Codex offers only accept / cancel for an escalation (availableDecisions), and the
        // adapter answers "no" with `cancel`, which ends the turn (status interrupted).
        run_scenarios(&rig, Deny::EndsTurn("the request was declined")).await;
        eprintln!("[codex] all scenarios in {:?}", started.elapsed());
    })
    .await;
}
