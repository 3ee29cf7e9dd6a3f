//! Turns driven by a scripted child under paused time: timeouts, cancel, exit handling,
//! lingering after done and answers, with no process and no real sleep.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::adapter::{PromptVia, Registry};
use crate::engine::child::{Child, SpawnError, Spawner};
use crate::engine::{input, Engine, EngineConfig, Launch, RequestOptions};
use crate::protocol::v1::{SendMessageRequest, TaskState};
use crate::runner::{ExitInfo, Output, RunnerError, SpawnSpec};
use crate::store::{MemoryStore, Snapshot};

/// What happened to a scripted child, in order.
type Log = Arc<Mutex<Vec<String>>>;

/// The test's end of a scripted child.
struct Script {
    out: Option<mpsc::UnboundedSender<Output>>,
    stdin: mpsc::UnboundedReceiver<Vec<u8>>,
    exit: Arc<Mutex<ExitInfo>>,
    /// Set: the turn is told of the exit before the output still waiting for it.
    exit_first: Arc<AtomicBool>,
    log: Log,
    /// The program's arguments.
    args: Vec<String>,
}

impl Script {
    fn emit(&self, v: Value) {
        if let Some(out) = &self.out {
            let _ = out.send(Output::Line(v.to_string()));
        }
    }

    /// The program exits with `code`: its output ends.
    fn exit(&mut self, code: i32) {
        *self.exit.lock().unwrap() = ExitInfo {
            code: Some(code),
            signal: None,
        };
        self.out = None;
    }

    /// The program exits with `code` while what it printed still waits in the pipe: the
    /// turn learns of the exit first, then reads that output to its end.
    fn exit_before_its_output_is_read(&mut self, code: i32) {
        self.exit_first.store(true, Ordering::SeqCst);
        self.exit(code);
    }

    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// The engine's end.
struct Scripted {
    out: mpsc::UnboundedReceiver<Output>,
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    exit: Arc<Mutex<ExitInfo>>,
    exit_first: Arc<AtomicBool>,
    log: Log,
    stopped: bool,
}

impl Scripted {
    fn note(&self, what: &str) {
        self.log.lock().unwrap().push(what.to_string());
    }
}

#[async_trait]
impl Child for Scripted {
    fn pid(&self) -> u32 {
        // No such process: recording it is harmless.
        999_999_999
    }

    async fn next(&mut self) -> Option<Output> {
        if self.stopped {
            return None;
        }
        self.out.recv().await
    }

    async fn next_or_exit(&mut self) -> Result<Option<Output>, ExitInfo> {
        if self.exit_first.swap(false, Ordering::SeqCst) {
            self.note("exit reported");
            return Err(*self.exit.lock().unwrap());
        }
        Ok(self.next().await)
    }

    async fn write_stdin(&mut self, bytes: &[u8]) -> Result<(), RunnerError> {
        let text = String::from_utf8_lossy(bytes).trim().to_string();
        self.note(&format!("stdin {text}"));
        match &self.stdin {
            Some(tx) => tx
                .send(bytes.to_vec())
                .map_err(|_| RunnerError::StdinClosed),
            None => Err(RunnerError::StdinClosed),
        }
    }

    fn close_stdin(&mut self) {
        self.note("close stdin");
        self.stdin = None;
    }

    async fn wait(&mut self, _grace: Duration) -> ExitInfo {
        self.note("wait");
        *self.exit.lock().unwrap()
    }

    async fn terminate(&mut self, _grace: Duration) -> ExitInfo {
        self.note("terminate");
        self.stopped = true;
        ExitInfo {
            code: None,
            signal: Some(15),
        }
    }
}

/// Hands each spawned child's script to the test.
struct ScriptedSpawner(mpsc::UnboundedSender<Script>);

#[async_trait]
impl Spawner for ScriptedSpawner {
    async fn spawn(&self, spec: SpawnSpec) -> Result<Box<dyn Child>, SpawnError> {
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (in_tx, in_rx) = mpsc::unbounded_channel();
        let exit = Arc::new(Mutex::new(ExitInfo {
            code: Some(0),
            signal: None,
        }));
        let log: Log = Arc::default();
        let exit_first = Arc::new(AtomicBool::new(false));
        let script = Script {
            out: Some(out_tx),
            stdin: in_rx,
            exit: exit.clone(),
            exit_first: exit_first.clone(),
            log: log.clone(),
            args: spec.args,
        };
        self.0
            .send(script)
            .map_err(|_| SpawnError::Internal("the test is gone".into()))?;
        Ok(Box::new(Scripted {
            out: out_rx,
            stdin: Some(in_tx),
            exit,
            exit_first,
            log,
            stopped: false,
        }))
    }
}

mod budget;
mod drain;
mod failing;

const IDLE: Duration = Duration::from_secs(30);
const HARD: Duration = Duration::from_secs(600);
const GRACE: Duration = Duration::from_secs(2);

/// An engine running the demo adapter's protocol with scripted children.
fn engine(timeout: Duration, idle: Duration) -> (Engine, mpsc::UnboundedReceiver<Script>) {
    engine_with(timeout, idle, EngineConfig::default())
}

fn engine_with(
    timeout: Duration,
    idle: Duration,
    config: EngineConfig,
) -> (Engine, mpsc::UnboundedReceiver<Script>) {
    let adapter = Registry::builtin()
        .unwrap()
        .get("demo")
        .expect("demo adapter")
        .clone();
    engine_of(adapter, timeout, idle, config)
}

fn engine_of(
    adapter: crate::adapter::AdapterSpec,
    timeout: Duration,
    idle: Duration,
    config: EngineConfig,
) -> (Engine, mpsc::UnboundedReceiver<Script>) {
    let launch = launch_of(adapter, timeout, idle);
    engine_on(Arc::new(MemoryStore::new()), launch, config)
}

fn launch_of(adapter: crate::adapter::AdapterSpec, timeout: Duration, idle: Duration) -> Launch {
    Launch {
        adapter,
        program: "/nonexistent/agent".into(),
        extra_args: vec![],
        prompt_via: PromptVia::Arg,
        cwd: std::env::temp_dir(),
        env: vec![],
        model: None,
        force: false,
        max_line_bytes: 1 << 20,
        timeout,
        idle_timeout: idle,
        cancel_grace: GRACE,
        sandbox: None,
    }
}

fn engine_on(
    store: Arc<dyn crate::store::TaskStore>,
    launch: Launch,
    config: EngineConfig,
) -> (Engine, mpsc::UnboundedReceiver<Script>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let e = Engine::with_spawner(store, launch, config, Arc::new(ScriptedSpawner(tx)));
    (e, rx)
}

fn request(text: &str, task: Option<&str>) -> SendMessageRequest {
    let mut message = input::text_message(text);
    message.task_id = task.map(str::to_string);
    SendMessageRequest {
        tenant: None,
        message,
        configuration: None,
        metadata: None,
    }
}

/// Starts a task; its script.
async fn start(e: &Engine, scripts: &mut mpsc::UnboundedReceiver<Script>) -> (String, Script) {
    let acc = e
        .send(request("hi", None), None, &RequestOptions::default())
        .await
        .unwrap();
    let script = scripts.recv().await.expect("spawned");
    script.emit(json!({"type": "init", "session_id": "s-1", "model": "m"}));
    (acc.task_id, script)
}

async fn settled(e: &Engine, task: &str, after: u64) -> Snapshot {
    e.wait_settled(task, after, None).await.unwrap()
}

fn status_text(s: &Snapshot) -> String {
    s.task
        .status
        .message
        .as_ref()
        .map(|m| m.text())
        .unwrap_or_default()
}

#[tokio::test(start_paused = true)]
async fn a_silent_agent_is_stopped_after_the_idle_timeout() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let t0 = Instant::now();
    let (task, script) = start(&e, &mut scripts).await;
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Failed);
    assert!(
        status_text(&snap).contains("printed nothing for 30 s"),
        "{}",
        status_text(&snap)
    );
    let waited = t0.elapsed();
    assert!(waited >= IDLE && waited < IDLE + GRACE * 3, "{waited:?}");
    assert!(script.log().contains(&"terminate".to_string()));
}

#[tokio::test(start_paused = true)]
async fn output_keeps_an_agent_alive_until_the_hard_timeout() {
    let hard = Duration::from_secs(100);
    let (e, mut scripts) = engine(hard, IDLE);
    let t0 = Instant::now();
    let (task, script) = start(&e, &mut scripts).await;
    let talk = tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDLE / 2).await;
            script.emit(json!({"type": "text", "text": "still working ", "delta": true}));
            if script.out.as_ref().is_none_or(|o| o.is_closed()) {
                return script;
            }
        }
    });
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Failed);
    assert!(
        status_text(&snap).contains("limit of 100 s"),
        "{}",
        status_text(&snap)
    );
    let waited = t0.elapsed();
    assert!(waited >= hard && waited < hard + GRACE * 3, "{waited:?}");
    let script = talk.await.unwrap();
    assert!(script.log().contains(&"terminate".to_string()));
}

/// Issue 37: a CLI that reports its progress only on stderr is working, not idle; one that
/// prints only retries there is idle.
#[tokio::test(start_paused = true)]
async fn progress_on_stderr_is_not_idleness_but_retries_are() {
    for (line, survives) in [
        ("running test 3 of 40", true),
        (
            "stream error: connection reset; retrying 2/5 in 400ms",
            false,
        ),
    ] {
        let (e, mut scripts) = engine(HARD, IDLE);
        let (task, script) = start(&e, &mut scripts).await;
        let out = script.out.clone().unwrap();
        for _ in 0..6 {
            tokio::time::sleep(IDLE / 2).await;
            let _ = out.send(Output::Stderr(line.to_string()));
        }
        let now = e.get(&task, None, None).await.unwrap();
        if survives {
            assert_eq!(now.status.state, TaskState::Working, "{line}");
            assert!(!script.log().contains(&"terminate".to_string()), "{line}");
        } else {
            let snap = settled(&e, &task, 0).await;
            assert_eq!(snap.task.status.state, TaskState::Failed, "{line}");
            assert!(
                status_text(&snap).contains("printed nothing"),
                "{}",
                status_text(&snap)
            );
        }
    }
}

#[tokio::test(start_paused = true)]
async fn waiting_for_an_answer_is_not_idleness() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "approval_required", "id": "a-1", "kind": "command", "tool": "Bash", "target": "ls", "detail": "run ls?"}));
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::InputRequired);
    tokio::time::sleep(IDLE * 4).await;
    let now = e.get(&task, None, None).await.unwrap();
    assert_eq!(now.status.state, TaskState::InputRequired);
    assert!(!script.log().contains(&"terminate".to_string()));
}

#[tokio::test(start_paused = true)]
async fn cancel_stops_the_agent_and_ends_the_task_canceled() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, script) = start(&e, &mut scripts).await;
    // The turn has read the init line once the task works.
    while e.get(&task, None, None).await.unwrap().status.state != TaskState::Working {
        tokio::task::yield_now().await;
    }
    let t = e.cancel(&task, None).await.unwrap();
    assert_eq!(t.status.state, TaskState::Canceled);
    assert!(script.log().contains(&"terminate".to_string()));
    assert_eq!(e.live_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_exit_code_decides_how_the_task_ends() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, mut script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "text", "text": "trying", "delta": true}));
    script.exit(3);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Failed);
    assert!(status_text(&snap).contains('3'), "{}", status_text(&snap));
    assert_eq!(script.log(), ["wait"]);

    let (task, mut script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "text", "text": "All good.", "delta": true}));
    script.emit(json!({"type": "done", "result": "All good.", "is_error": false}));
    script.exit(0);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    assert!(!script.log().contains(&"terminate".to_string()));
}

#[tokio::test(start_paused = true)]
async fn an_agent_that_lingers_after_done_is_stopped_after_the_grace() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let t0 = Instant::now();
    let (task, script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "done", "result": "Done.", "is_error": false}));
    // The output never ends by itself.
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);
    while e.live_count() > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let waited = t0.elapsed();
    assert!(waited >= GRACE && waited < GRACE * 3, "{waited:?}");
    // Stdin closed at done, stopped after the grace (terminate is idempotent: the stop path
    // calls it again).
    let log = script.log();
    assert_eq!(log[..2], ["close stdin", "terminate"]);
    assert!(log[2..].iter().all(|l| l == "terminate"), "{log:?}");
}

#[tokio::test(start_paused = true)]
async fn answers_reach_the_agent_and_an_immediate_new_question_is_seen() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, mut script) = start(&e, &mut scripts).await;
    let ask = |s: &Script, id: &str| {
        s.emit(json!({"type": "approval_required", "id": id, "kind": "question", "detail": format!("{id}?")}));
    };
    ask(&script, "q-1");
    assert_eq!(
        settled(&e, &task, 0).await.task.status.state,
        TaskState::InputRequired
    );
    for round in 2..=20 {
        let opts = RequestOptions::default();
        let answer = e.send(request("yes", Some(&task)), None, &opts);
        // The agent asks again the moment it reads the answer, before the answer's
        // acknowledgement reaches the caller.
        let (acc, got) = tokio::join!(answer, async {
            let got = script.stdin.recv().await.expect("answer written");
            ask(&script, &format!("q-{round}"));
            got
        });
        let acc = acc.unwrap();
        let got: Value = serde_json::from_slice(&got).unwrap();
        assert_eq!(got["type"], "approval_response");
        assert_eq!(got["id"], format!("q-{}", round - 1));
        let snap = settled(&e, &task, acc.from_seq).await;
        assert_eq!(
            snap.task.status.state,
            TaskState::InputRequired,
            "round {round}"
        );
        assert!(status_text(&snap).contains(&format!("q-{round}?")));
    }
    let acc = e
        .send(request("no", Some(&task)), None, &RequestOptions::default())
        .await
        .unwrap();
    let got: Value = serde_json::from_slice(&script.stdin.recv().await.unwrap()).unwrap();
    assert_eq!(got["decision"], "deny");
    script.emit(json!({"type": "done", "result": "ok", "is_error": false}));
    script.exit(0);
    assert_eq!(
        settled(&e, &task, acc.from_seq).await.task.status.state,
        TaskState::Completed
    );
}

/// The status note after an answer says what happened: a question was answered (nothing
/// was approved), an approval approved or denied.
#[tokio::test(start_paused = true)]
async fn the_status_after_an_answer_says_answered_for_a_question_approved_for_an_approval() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, mut script) = start(&e, &mut scripts).await;
    let cases = [
        (
            "question",
            "src/main.rs",
            "Answered; the agent continues with the answer",
        ),
        ("command", "yes", "Approved; the agent continues"),
        ("command", "no", "Denied; the agent continues"),
    ];
    for (i, (kind, answer, note)) in cases.into_iter().enumerate() {
        let from = e.get_snapshot(&task, None).await.unwrap().last_seq;
        let id = format!("q-{i}");
        script.emit(json!({"type": "approval_required", "id": id, "kind": kind, "detail": "?"}));
        let asked = settled(&e, &task, from).await.task.status.state;
        assert_eq!(asked, TaskState::InputRequired, "{kind}");
        e.send(
            request(answer, Some(&task)),
            None,
            &RequestOptions::default(),
        )
        .await
        .unwrap();
        script.stdin.recv().await.expect("answer written");
        let snap = e.get_snapshot(&task, None).await.unwrap();
        assert_eq!(
            snap.task.status.state,
            TaskState::Working,
            "{kind} {answer}"
        );
        assert_eq!(status_text(&snap), note, "{kind} {answer}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_answer_to_a_task_that_is_not_asking_is_refused() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, _script) = start(&e, &mut scripts).await;
    while e.get(&task, None, None).await.unwrap().status.state != TaskState::Working {
        tokio::task::yield_now().await;
    }
    // The demo protocol takes no messages while the agent works.
    let err = e
        .send(
            request("more", Some(&task)),
            None,
            &RequestOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("takes no messages"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_running_and_queued_tasks() {
    let mut config = EngineConfig::default();
    config.limits.max_running = 1;
    let (e, mut scripts) = engine_with(HARD, IDLE, config);
    let (running, script) = start(&e, &mut scripts).await;
    let queued = e
        .send(request("later", None), None, &RequestOptions::default())
        .await
        .unwrap()
        .task_id;
    assert_eq!(e.live_count(), 2);
    e.shutdown().await;
    assert_eq!(e.live_count(), 0);
    for id in [&running, &queued] {
        let t = e.get(id, None, None).await.unwrap();
        assert_eq!(t.status.state, TaskState::Failed, "{id}");
    }
    assert!(script.log().contains(&"terminate".to_string()));
    assert!(scripts.try_recv().is_err(), "the queued task never started");
    let refused = e
        .send(request("more", None), None, &RequestOptions::default())
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("shutting down"), "{refused}");
}

/// Issue 17: a CLI that keeps retrying a failing model request (the recorded stderr of
/// Gemini CLI 0.61.0 answering HTTP 500) ends its turn `failed` with the CLI's own error at
/// the adapter's retry limit, long before the idle timeout, and is stopped.
#[tokio::test(start_paused = true)]
async fn a_cli_retrying_a_failing_model_ends_the_turn_at_the_retry_limit() {
    let reg = Registry::builtin().unwrap();
    let mut adapter = reg.get("demo").expect("demo").clone();
    adapter.limits.retry_pattern = reg.get("gemini-json").unwrap().limits.retry_pattern.clone();
    adapter.limits.retry_limit = Some(2);
    let (e, mut scripts) = engine_of(adapter, HARD, IDLE, EngineConfig::default());
    let (task, script) = start(&e, &mut scripts).await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts/gemini/0.61.0/gemini-server-500.stderr.txt");
    let stderr = std::fs::read_to_string(path).unwrap();
    let out = script.out.clone().unwrap();
    for line in stderr.lines() {
        let _ = out.send(Output::Stderr(line.to_string()));
    }
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Failed);
    let text = status_text(&snap);
    println!("{text}");
    assert!(
        text.contains("kept failing") && text.contains("status 500"),
        "{text}"
    );
    while e.live_count() > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(script.log().contains(&"terminate".to_string()));
}

#[tokio::test(start_paused = true)]
async fn a_stream_knows_whether_others_follow_its_task() {
    let (e, mut scripts) = engine(HARD, IDLE);
    let (task, mut script) = start(&e, &mut scripts).await;
    let first = e.subscribe(&task, 0, None).await.unwrap();
    assert!(!first.shared(), "the task's only stream");
    let second = e.subscribe(&task, 0, None).await.unwrap();
    assert!(first.shared() && second.shared(), "two streams follow it");
    drop(second);
    assert!(!first.shared(), "alone again");
    script.emit(json!({"type": "done", "result": "ok", "is_error": false}));
    script.exit(0);
    settled(&e, &task, 0).await;
    assert!(!first.shared(), "an ended task has no live followers");
}
