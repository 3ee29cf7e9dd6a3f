//! The client library and the `call` / `tasks` commands against our server: both versions ×
//! both bindings, approvals, cancel, resubscribe after a killed connection, exit codes.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agent_host::client::{
    collect, Binding, CardRefresh, Client, ClientError, Event, Options, ProtocolVersion, Request,
};
use agent_host::protocol::v1::{ListTasksRequest, SendMessageResponse, StreamResponse, TaskState};
use futures::StreamExt;

use crate::common::{eventually, limit, time_passes, TestServer, WAIT};

const COMBOS: [(Binding, ProtocolVersion); 4] = [
    (Binding::JsonRpc, ProtocolVersion::V1),
    (Binding::HttpJson, ProtocolVersion::V1),
    (Binding::JsonRpc, ProtocolVersion::V03),
    (Binding::HttpJson, ProtocolVersion::V03),
];

async fn client_for(base: &str, b: Binding, v: ProtocolVersion) -> Client {
    Client::builder(base)
        .bindings(vec![b])
        .versions(vec![v])
        .options(Options {
            resubscribe_delay: Duration::from_millis(50),
            ..Options::default()
        })
        .connect()
        .await
        .expect("connect")
}

fn last_state(events: &[Event]) -> Option<TaskState> {
    events.iter().rev().find_map(Event::state)
}

fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match &e.response {
            StreamResponse::ArtifactUpdate(a) if a.artifact.name.as_deref() == Some("result") => {
                Some(
                    a.artifact
                        .parts
                        .iter()
                        .filter_map(|p| p.text.clone())
                        .collect::<String>(),
                )
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_operation_over_both_versions_and_bindings() {
    limit(async {
        let s = TestServer::start().await;
        for (b, v) in COMBOS {
            let c = client_for(&s.base, b, v).await;
            assert_eq!((c.endpoint().binding, c.endpoint().version), (b, v));
            let what = format!("{b:?} {v:?}");

            // Blocking send.
            let task = match c.send(Request::text("hello")).await.expect("send") {
                SendMessageResponse::Task(t) => t,
                other => panic!("{what}: {other:?}"),
            };
            assert_eq!(task.status.state, TaskState::Completed, "{what}");
            assert!(task
                .artifacts
                .iter()
                .any(|a| a.name.as_deref() == Some("result")));

            // Get.
            let got = c.get_task(&task.id).await.expect("get");
            assert_eq!(
                (got.id.as_str(), got.status.state),
                (task.id.as_str(), TaskState::Completed)
            );
            let err = c.get_task("no-such-task").await.unwrap_err();
            assert_eq!(err.reason(), Some("TASK_NOT_FOUND"), "{what}: {err}");

            // Stream.
            let events = collect(c.stream(Request::text("hello")).await.expect("stream"))
                .await
                .expect("events");
            assert!(
                matches!(events[0].response, StreamResponse::Task(_)),
                "{what}"
            );
            assert_eq!(last_state(&events), Some(TaskState::Completed), "{what}");
            assert!(text_of(&events).contains("Everything looks fine"), "{what}");

            // List: v1.0 only.
            match v {
                ProtocolVersion::V1 => {
                    let l = c
                        .list_tasks(ListTasksRequest {
                            context_id: Some(task.context_id.clone()),
                            ..ListTasksRequest::default()
                        })
                        .await
                        .expect("list");
                    assert_eq!(l.tasks.len(), 1, "{what}");
                    assert_eq!(l.tasks[0].id, task.id);
                }
                ProtocolVersion::V03 => {
                    let e = c.list_tasks(ListTasksRequest::default()).await.unwrap_err();
                    assert!(matches!(e, ClientError::Unsupported { .. }), "{e}");
                }
            }

            // Cancel a task that hangs (non-blocking send first).
            let hung = match c
                .send(Request::text("hang").return_immediately())
                .await
                .expect("send")
            {
                SendMessageResponse::Task(t) => t,
                other => panic!("{other:?}"),
            };
            let canceled = c.cancel(&hung.id).await.expect("cancel");
            assert_eq!(canceled.status.state, TaskState::Canceled, "{what}");
            let again = c.cancel(&hung.id).await.unwrap_err();
            assert_eq!(
                again.reason(),
                Some("TASK_NOT_CANCELABLE"),
                "{what}: {again}"
            );

            // Subscribe to a running task.
            let slow = match c
                .send(Request::text("slow").return_immediately())
                .await
                .expect("send")
            {
                SendMessageResponse::Task(t) => t,
                other => panic!("{other:?}"),
            };
            let events = collect(c.subscribe(&slow.id).await.expect("subscribe"))
                .await
                .expect("events");
            assert!(
                matches!(events[0].response, StreamResponse::Task(_)),
                "{what}"
            );
            assert_eq!(last_state(&events), Some(TaskState::Completed), "{what}");

            // An approval, answered.
            let events = collect(c.stream(Request::text("approval")).await.expect("stream"))
                .await
                .expect("events");
            let last = events.last().expect("an event");
            assert_eq!(last.state(), Some(TaskState::InputRequired), "{what}");
            let StreamResponse::StatusUpdate(su) = &last.response else {
                panic!("{what}: {last:?}")
            };
            let ask = agent_host::client::Approval::from_status(&su.status).expect("approval");
            assert_eq!(
                (ask.kind.as_str(), ask.tool.as_deref()),
                ("command", Some("Bash")),
                "{what}"
            );
            assert!(ask.is_decision());
            // A subscription to the waiting task: the task, then the end (no resubscribing
            // to a stream the server ended on purpose).
            let waiting = collect(c.subscribe(&su.task_id).await.expect("subscribe"))
                .await
                .unwrap_or_else(|e| panic!("{what}: subscribing to a waiting task: {e}"));
            assert_eq!(waiting.len(), 1, "{what}: {waiting:?}");
            assert_eq!(
                last_state(&waiting),
                Some(TaskState::InputRequired),
                "{what}"
            );
            let answered = collect(c.answer(&su.task_id, "yes").await.expect("answer"))
                .await
                .expect("events");
            assert_eq!(last_state(&answered), Some(TaskState::Completed), "{what}");
            assert!(
                text_of(&answered).contains("Everything looks fine"),
                "{what}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn the_card_is_revalidated_with_its_etag_and_legacy_cards_work() {
    limit(async {
        let s = TestServer::start().await;
        let c = Client::connect(&s.base).await.expect("connect");
        assert_eq!(
            c.endpoint().version,
            ProtocolVersion::V1,
            "v1.0 is preferred"
        );
        assert_eq!(
            c.endpoint().binding,
            Binding::JsonRpc,
            "the card's first interface"
        );
        assert!(c.cached_card().and_then(|k| k.etag).is_some());
        assert_eq!(
            c.refresh_card().await.expect("refresh"),
            CardRefresh::NotModified
        );
        // A v0.3-only client reads the same card.
        let c = Client::builder(&s.base)
            .versions(vec![ProtocolVersion::V03])
            .connect()
            .await
            .expect("connect");
        assert_eq!(c.endpoint().version, ProtocolVersion::V03);
        let err = Client::connect(format!("{}/nothing-here", s.base))
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Card { .. }), "{err}");
    })
    .await;
}

/// A TCP proxy whose connections can all be cut at once.
struct Proxy {
    base: String,
    conns: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    async fn start(target: &str) -> Proxy {
        let target = target.trim_start_matches("http://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let conns: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let c2 = conns.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let target = target.clone();
                let h = tokio::spawn(async move {
                    if let Ok(mut out) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                });
                c2.lock().expect("lock").push(h.abort_handle());
            }
        });
        Proxy {
            base,
            conns,
            accept,
        }
    }

    /// Cuts every open connection (the sockets close).
    fn cut(&self) {
        for h in self.conns.lock().expect("lock").drain(..) {
            h.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

#[tokio::test]
async fn a_killed_connection_is_resumed_with_last_event_id_and_no_event_is_lost_or_repeated() {
    limit(async {
        let s = TestServer::start().await;
        for (b, v) in COMBOS {
            let proxy = Proxy::start(&s.base).await;
            let c = client_for(&proxy.base, b, v).await;
            let what = format!("{b:?} {v:?}");
            let mut events = c.stream(Request::text("slow")).await.expect("stream");
            let mut seen = Vec::new();
            for _ in 0..3 {
                seen.push(events.next().await.expect("event").expect("ok"));
            }
            proxy.cut();
            while let Some(ev) = events.next().await {
                seen.push(ev.unwrap_or_else(|e| panic!("{what}: {e}")));
            }
            let ids: Vec<u64> = seen
                .iter()
                .map(|e| {
                    e.id.as_deref()
                        .and_then(|i| i.parse().ok())
                        .expect("numeric id")
                })
                .collect();
            let expected: Vec<u64> = (1..=ids.len() as u64).collect();
            assert_eq!(ids, expected, "{what}: every event exactly once");
            assert_eq!(last_state(&seen), Some(TaskState::Completed), "{what}");
            assert!(seen.len() > 5, "{what}: the stream went on after the cut");
        }
    })
    .await;
}

#[tokio::test]
async fn a_stream_that_cannot_be_resumed_fails_after_its_retries() {
    limit(async {
        let s = TestServer::start().await;
        let proxy = Proxy::start(&s.base).await;
        let c = Client::builder(&proxy.base)
            .options(Options {
                max_resubscribes: 2,
                resubscribe_delay: Duration::from_millis(20),
                connect_timeout: Duration::from_secs(2),
                ..Options::default()
            })
            .connect()
            .await
            .expect("connect");
        let mut events = c.stream(Request::text("slow")).await.expect("stream");
        events.next().await.expect("event").expect("ok");
        drop(proxy); // cut, and accept no more
        let mut last = None;
        while let Some(ev) = events.next().await {
            last = Some(ev);
        }
        match last {
            Some(Err(ClientError::StreamLost { attempts, .. })) => assert_eq!(attempts, 2),
            other => panic!("expected StreamLost, got {other:?}"),
        }
    })
    .await;
}

// ------------------------------------------------------------------------------------
// The `call` and `tasks` commands, run as the built binary.
// ------------------------------------------------------------------------------------

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn agent_host(args: &[&str]) -> Run {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(args)
        .env_remove("A2A_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agent-host");
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("agent-host did not finish in 30 s")
        .expect("wait");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The task id `call` names on stderr.
fn task_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("task "))
        .and_then(|l| l.split_whitespace().next())
        .expect("task id on stderr")
        .to_string()
}

/// The seconds of `call`'s closing `✓ completed in N.Ns`.
fn took(stderr: &str) -> f64 {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("✓ completed in "))
        .and_then(|l| l.split('s').next())
        .and_then(|n| n.parse().ok())
        .expect("a completed line")
}

/// `call URL hang` (plus `extra`) interrupted with SIGINT once it names its task: the task
/// id, the exit code and stderr.
async fn interrupt_call(base: &str, extra: &[&str]) -> (String, i32, String) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(["call", base, "hang"])
        .args(extra)
        .env_remove("A2A_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agent-host");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).await.expect("read stderr");
    let id = task_id(&first);
    let pid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let mut rest = String::new();
    err.read_to_string(&mut rest).await.expect("read stderr");
    let status = child.wait().await.expect("wait");
    (id, status.code().unwrap_or(-1), rest)
}

#[tokio::test]
async fn ctrl_c_detaches_and_says_how_to_follow_or_cancel_or_cancels_when_asked() {
    limit(async {
        let s = TestServer::start().await;
        let c = Client::connect(&s.base).await.expect("connect");
        let (id, code, err) = interrupt_call(&s.base, &[]).await;
        assert_eq!(code, 130, "{err}");
        assert!(err.contains(&format!("detached from task {id}")), "{err}");
        assert!(err.contains("goes on running"), "{err}");
        let watch = format!("agent-host tasks watch {} {id}", s.base);
        let cancel = format!("agent-host tasks cancel {} {id}", s.base);
        assert!(err.contains(&watch) && err.contains(&cancel), "{err}");
        let t = c.get_task(&id).await.expect("get");
        assert_eq!(t.status.state, TaskState::Working, "it goes on");
        c.cancel(&id).await.expect("cancel");

        let (id, code, err) = interrupt_call(&s.base, &["--cancel-on-interrupt"]).await;
        assert_eq!(code, 130, "{err}");
        assert!(err.contains(&format!("canceled task {id}")), "{err}");
        let t = c.get_task(&id).await.expect("get");
        assert_eq!(t.status.state, TaskState::Canceled);
    })
    .await;
}

/// Ids and timings out, for snapshots.
fn redact(s: &str) -> String {
    let uuid = regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("re");
    let secs = regex::Regex::new(r"\d+\.\ds").expect("re");
    let s = uuid.replace_all(s, "[id]");
    secs.replace_all(&s, "[t]s").into_owned()
}

#[tokio::test]
async fn call_shows_the_answer_to_a_person_and_exits_0() {
    limit(async {
        let s = TestServer::start().await;
        // --cwd names a directory inside the server's workspace (its working directory).
        let cwd = s.dir().to_string_lossy().into_owned();
        let r = agent_host(&["call", &s.base, "hello", "--cwd", &cwd]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        insta::assert_snapshot!(
            "call_human",
            format!("--- stdout\n{}--- stderr\n{}", r.stdout, redact(&r.stderr))
        );
        for (b, v) in [("rest", "1.0"), ("jsonrpc", "0.3"), ("rest", "0.3")] {
            let r =
                agent_host(&["call", &s.base, "hello", "--binding", b, "--a2a-version", v]).await;
            assert_eq!(r.code, 0, "{b} {v}: {}", r.stderr);
            assert!(
                r.stdout.contains("Everything looks fine"),
                "{b} {v}: {}",
                r.stdout
            );
        }
        let r = agent_host(&["call", &s.base, "hello", "--no-stream"]).await;
        assert_eq!(r.code, 0);
        assert!(r.stdout.contains("Everything looks fine"), "{}", r.stdout);
    })
    .await;
}

/// `--cwd .` (any relative folder) is taken from the caller's current directory: the host
/// gets it absolute, as it requires, and the task runs there.
#[tokio::test]
async fn a_relative_cwd_is_sent_absolute() {
    limit(async {
        let s = TestServer::start().await;
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["call", &s.base, "hello", "--cwd", "."])
            .current_dir(s.dir())
            .env_remove("A2A_TOKEN")
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .expect("run agent-host call");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let c = Client::connect(&s.base).await.expect("connect");
        let t = c.get_task(&task_id(&stderr)).await.expect("get");
        let sent = t
            .history
            .iter()
            .find_map(|m| {
                m.metadata
                    .as_ref()?
                    .get("cwd")?
                    .as_str()
                    .map(str::to_string)
            })
            .expect("metadata.cwd sent");
        let sent = std::path::Path::new(&sent);
        assert!(sent.is_absolute(), "{}", sent.display());
        assert_eq!(
            std::fs::canonicalize(sent).expect("the folder sent"),
            std::fs::canonicalize(s.dir()).expect("the server's folder")
        );
    })
    .await;
}

#[tokio::test]
async fn call_json_prints_one_v1_event_per_line() {
    limit(async {
        let s = TestServer::start().await;
        let r = agent_host(&["call", &s.base, "hello", "--json", "--a2a-version", "0.3"]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        let lines: Vec<serde_json::Value> = r
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect();
        assert!(lines[0].get("task").is_some(), "{:?}", lines[0]);
        let last = lines.last().expect("a line");
        assert_eq!(
            last["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let shapes: Vec<String> = lines
            .iter()
            .map(|l| {
                l.as_object()
                    .and_then(|o| o.keys().next().cloned())
                    .unwrap_or_default()
            })
            .collect();
        insta::assert_snapshot!("call_json_shapes", shapes.join("\n"));
        // The context goes on.
        let ctx = lines[0]["task"]["contextId"]
            .as_str()
            .expect("context")
            .to_string();
        let r = agent_host(&["call", &s.base, "again", "--json", "--context", &ctx]).await;
        assert_eq!(r.code, 0);
        assert!(r.stdout.contains(&ctx));
    })
    .await;
}

#[tokio::test]
async fn call_exit_codes_failed_input_required_canceled_usage() {
    limit(async {
        let s = TestServer::start().await;
        let r = agent_host(&["call", &s.base, "fail"]).await;
        assert_eq!(r.code, 1, "fail: {}", r.stderr);
        assert!(r.stderr.contains("✗ failed"), "{}", r.stderr);

        let r = agent_host(&["call", &s.base, "approval"]).await;
        assert_eq!(r.code, 4, "approval without a terminal: {}", r.stderr);
        assert!(r.stderr.contains("? input required"), "{}", r.stderr);
        assert!(r.stderr.contains("Bash ls  [allow / deny]"), "{}", r.stderr);
        // Answer it with --task.
        let task = r
            .stderr
            .lines()
            .find_map(|l| l.strip_prefix("task "))
            .and_then(|l| l.split_whitespace().next())
            .expect("task id on stderr")
            .to_string();
        // Nothing says the tool ran before it was allowed.
        assert!(!r.stdout.contains("Bash"), "{}", r.stdout);
        // The answer comes later; the duration still counts from the task's start.
        time_passes(Duration::from_millis(400)).await;
        let r = agent_host(&["call", &s.base, "yes", "--task", &task]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("Everything looks fine"));
        assert!(r.stdout.contains("✓ Bash: ls · approved"), "{}", r.stdout);
        assert!(took(&r.stderr) >= 0.4, "from the start: {}", r.stderr);

        // Refused: the tool line says so.
        let r = agent_host(&["call", &s.base, "approval"]).await;
        let task = task_id(&r.stderr);
        let r = agent_host(&["call", &s.base, "no", "--task", &task]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("⊘ Bash: ls · refused"), "{}", r.stdout);

        // Canceled meanwhile by `tasks cancel`.
        let base = s.base.clone();
        let call = tokio::spawn(async move { agent_host(&["call", &base, "hang"]).await });
        let c = Client::connect(&s.base).await.expect("connect");
        let hung = eventually("the hanging task is listed", WAIT, async || {
            let working = ListTasksRequest {
                status: Some(TaskState::Working),
                ..ListTasksRequest::default()
            };
            let l = c.list_tasks(working).await.expect("list");
            l.tasks.first().map(|t| t.id.clone()).ok_or(l.tasks.len())
        })
        .await;
        let r = agent_host(&["tasks", "cancel", &s.base, &hung]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("canceled"));
        let r = call.await.expect("join");
        assert_eq!(r.code, 3, "canceled: {}", r.stderr);

        // Usage errors.
        assert_eq!(agent_host(&["call", &s.base]).await.code, 2);
        assert_eq!(agent_host(&["call", "ftp://x", "hi"]).await.code, 2);
        assert_eq!(
            agent_host(&["call", &s.base, "hi", "--binding", "grpc"])
                .await
                .code,
            2
        );
    })
    .await;
}

#[tokio::test]
async fn tasks_list_get_and_watch() {
    limit(async {
        let s = TestServer::start().await;
        let c = Client::connect(&s.base).await.expect("connect");
        let t = match c.send(Request::text("hello")).await.expect("send") {
            SendMessageResponse::Task(t) => t,
            other => panic!("{other:?}"),
        };
        let r = agent_host(&["tasks", "list", &s.base]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            r.stdout.contains(&t.id) && r.stdout.contains("completed"),
            "{}",
            r.stdout
        );
        let r = agent_host(&["tasks", "get", &s.base, &t.id, "--json"]).await;
        let got: serde_json::Value = serde_json::from_str(&r.stdout).expect("json");
        assert_eq!(got["status"]["state"], "TASK_STATE_COMPLETED");
        let r = agent_host(&["tasks", "get", &s.base, "nope"]).await;
        assert_eq!(r.code, 1);
        assert!(r.stderr.contains("TASK_NOT_FOUND"), "{}", r.stderr);
        // Watch a running task to its end.
        let slow = match c
            .send(Request::text("slow").return_immediately())
            .await
            .expect("send")
        {
            SendMessageResponse::Task(t) => t,
            other => panic!("{other:?}"),
        };
        let r = agent_host(&["tasks", "watch", &s.base, &slow.id]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("Everything looks fine"), "{}", r.stdout);
        // A finished task replays from an event id.
        let r = agent_host(&[
            "tasks",
            "watch",
            &s.base,
            &t.id,
            "--last-event-id",
            "0",
            "--json",
        ])
        .await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.lines().count() > 3);
    })
    .await;
}

/// `tasks watch` on a task that already waits for input (the probe's case: `call` exited 4,
/// its hint pointing at `tasks watch`) shows the question and, without a terminal, exits 4
/// with how to answer, as `call` does: the first frame is the question, whether the server
/// ends the stream after it or not.
#[tokio::test]
async fn watch_of_a_task_already_waiting_shows_the_question_and_exits_4() {
    limit(async {
        let s = TestServer::start().await;
        let r = agent_host(&["call", &s.base, "approval already-waiting"]).await;
        assert_eq!(r.code, 4, "{}", r.stderr);
        let id = task_id(&r.stderr);
        let r = agent_host(&["tasks", "watch", &s.base, &id]).await;
        assert_eq!(r.code, 4, "{}", r.stderr);
        assert!(r.stderr.contains("? input required: "), "{}", r.stderr);
        let hint = format!("answer with: agent-host call {} --task {id}", s.base);
        assert!(r.stderr.contains(&hint), "{}", r.stderr);
    })
    .await;
}

/// `tasks watch` of a task that has ended shows it as `call` did: its tool uses (the one
/// refused as refused), the question with the answer it got, then its text (before, only
/// the text and the end: the steps were lost once the task had ended).
#[tokio::test]
async fn watch_of_an_ended_task_shows_its_steps_and_the_answers_it_got() {
    limit(async {
        let s = TestServer::start().await;
        let r = agent_host(&["call", &s.base, "approval edit=WATCHED.md"]).await;
        assert_eq!(r.code, 4, "{}", r.stderr);
        let id = task_id(&r.stderr);
        let r = agent_host(&["call", &s.base, "--task", &id, "no"]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        let r = agent_host(&["tasks", "watch", &s.base, &id]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines.first(), Some(&"✓ Bash: ls"), "{}", r.stdout);
        assert_eq!(
            lines.get(1),
            Some(&"⊘ Edit: WATCHED.md · refused"),
            "{}",
            r.stdout
        );
        assert!(
            lines.get(2).is_some_and(|l| l.contains("denied")),
            "{}",
            r.stdout
        );
        assert!(r.stderr.contains("? asked: "), "{}", r.stderr);
        assert!(r.stderr.contains("  answered: no"), "{}", r.stderr);
        assert!(r.stderr.contains("✓ completed"), "{}", r.stderr);
        assert!(!r.stderr.contains("answer with:"), "{}", r.stderr);
    })
    .await;
}

/// An agent whose final result differs from the text it streamed: `call` (streaming and
/// `--no-stream`) and `tasks watch` print both, each once.
#[tokio::test]
async fn a_result_that_differs_from_the_streamed_text_is_printed_too() {
    limit(async {
        let scenario = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/scenarios/result-after-text.jsonl"
        );
        let s = TestServer::with(crate::common::Options {
            adapter: "jsonl",
            extra_args: vec!["--scenario".into(), scenario.into()],
            ..crate::common::Options::default()
        })
        .await;
        let want = "While make runs. \nAll done.\n";
        let r = agent_host(&["call", &s.base, "build it"]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stdout, want, "{}", r.stderr);
        let r = agent_host(&["call", &s.base, "build it", "--no-stream"]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stdout, want, "{}", r.stderr);
        let r = agent_host(&["tasks", "watch", &s.base, &task_id(&r.stderr)]).await;
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(r.stdout, want, "{}", r.stderr);
    })
    .await;
}

/// An empty or blank message is a usage error (exit 2), as MCP's `start_task` refuses an
/// empty prompt: no task starts. The server itself still takes one (A2A says nothing).
#[tokio::test]
async fn call_refuses_an_empty_message_as_a_usage_error() {
    limit(async {
        let s = TestServer::start().await;
        let c = Client::connect(&s.base).await.expect("connect");
        for empty in ["", "   \n\t"] {
            let r = agent_host(&["call", &s.base, empty]).await;
            assert_eq!(r.code, 2, "{empty:?}: {}", r.stderr);
            assert!(
                r.stderr.contains("the message is empty"),
                "{empty:?}: {}",
                r.stderr
            );
            let r = agent_host(&["call", &s.base, empty, "--task", "some-task"]).await;
            assert_eq!(r.code, 2, "{empty:?}: {}", r.stderr);
            assert!(r.stderr.contains("the answer is empty"), "{}", r.stderr);
        }
        let l = c
            .list_tasks(ListTasksRequest::default())
            .await
            .expect("list");
        assert!(l.tasks.is_empty(), "a task started: {:?}", l.tasks);
    })
    .await;
}

/// A pty for a child's stdin (a terminal, so `call` asks on it): the master, kept open while
/// the child runs, and the slave. Both ends close-on-exec, so no other test's child keeps one.
fn pty_for_stdin() -> (nix::pty::PtyMaster, std::fs::File) {
    use nix::fcntl::OFlag;
    use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt};
    let master = posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC).expect("pty");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let path = ptsname_r(&master).expect("ptsname");
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the pty's slave");
    (master, slave)
}

/// `agent-host ARGS` with a terminal on stdin, interrupted with SIGINT once stderr shows
/// `until` (the prompt waits for a line that never comes): how soon it exited after the
/// signal, its exit code and stderr.
async fn interrupt_at_prompt(args: &[&str], until: &str) -> (Duration, i32, String) {
    use tokio::io::AsyncReadExt;
    let (master, slave) = pty_for_stdin();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(args)
        .env_remove("A2A_TOKEN")
        .stdin(Stdio::from(slave))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn agent-host");
    let mut err = child.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    tokio::time::timeout(WAIT, async {
        let mut buf = [0u8; 4096];
        while !String::from_utf8_lossy(&seen).contains(until) {
            let n = err.read(&mut buf).await.expect("read stderr");
            assert!(n > 0, "stderr ended: {}", String::from_utf8_lossy(&seen));
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {until:?}: {}", String::from_utf8_lossy(&seen)));
    // The prompt is on stderr; give its thread the moment to start reading the line.
    time_passes(Duration::from_millis(200)).await;
    let pid = nix::unistd::Pid::from_raw(child.id().expect("pid") as i32);
    let at = std::time::Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let status = match tokio::time::timeout(Duration::from_secs(10), child.wait()).await {
        Ok(status) => status.expect("wait"),
        Err(_) => {
            let _ = child.kill().await;
            let mut rest = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(2), err.read_to_end(&mut rest)).await;
            seen.extend_from_slice(&rest);
            panic!(
                "still running 10 s after Ctrl-C at the prompt: {}",
                String::from_utf8_lossy(&seen)
            );
        }
    };
    let took = at.elapsed();
    let mut rest = Vec::new();
    err.read_to_end(&mut rest).await.expect("read stderr");
    seen.extend_from_slice(&rest);
    drop(master);
    (
        took,
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&seen).into_owned(),
    )
}

/// Ctrl-C at the `Allow? [y/N]` prompt (stdin a terminal) ends the command at once with 130,
/// having said what it did: detached, or with `--cancel-on-interrupt` canceled the task;
/// `tasks watch` at the prompt too. It does not wait for the line the prompt would read.
#[tokio::test]
async fn ctrl_c_at_the_allow_prompt_exits_130_at_once() {
    limit(async {
        let s = TestServer::start().await;
        let c = Client::connect(&s.base).await.expect("connect");
        let quick = Duration::from_secs(3);

        let (took, code, err) =
            interrupt_at_prompt(&["call", &s.base, "approval please"], "Allow? [y/N]").await;
        assert_eq!(code, 130, "{err}");
        assert!(took < quick, "exited {took:?} after Ctrl-C: {err}");
        let id = task_id(&err);
        assert!(err.contains(&format!("detached from task {id}")), "{err}");
        let t = c.get_task(&id).await.expect("get");
        assert_eq!(t.status.state, TaskState::InputRequired, "it goes on");

        // `tasks watch` of the task that waits asks again; Ctrl-C there detaches as well.
        let (took, code, err) =
            interrupt_at_prompt(&["tasks", "watch", &s.base, &id], "Allow? [y/N]").await;
        assert_eq!(code, 130, "{err}");
        assert!(took < quick, "exited {took:?} after Ctrl-C: {err}");
        assert!(err.contains(&format!("detached from task {id}")), "{err}");

        let (took, code, err) = interrupt_at_prompt(
            &["call", &s.base, "approval please", "--cancel-on-interrupt"],
            "Allow? [y/N]",
        )
        .await;
        assert_eq!(code, 130, "{err}");
        assert!(took < quick, "exited {took:?} after Ctrl-C: {err}");
        let id = task_id(&err);
        assert!(err.contains(&format!("canceled task {id}")), "{err}");
        let t = c.get_task(&id).await.expect("get");
        assert_eq!(t.status.state, TaskState::Canceled);
    })
    .await;
}
