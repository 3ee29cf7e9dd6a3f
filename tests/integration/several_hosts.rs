//! Several hosts on one PostgreSQL database (docs/several-hosts.md): streams of a task that
//! runs on another host, resuming there with `Last-Event-ID`, a host started beside a live
//! one leaving its tasks alone, and a host killed with SIGKILL whose tasks another host
//! takes over.
//!
//! The database comes from `AGENT_HOST_TEST_PG` (default
//! `postgres://root@127.0.0.1:5432/test`); each test has a schema of its own. Unreachable: a
//! failure under `CI=true`, a loud skip elsewhere.

use std::time::Duration;

use serde_json::json;

use crate::common::*;
use crate::postgres::Schema;
use agent_host::settings::cluster::ClusterSettings;

fn on(db: &Schema) -> Options {
    Options {
        adapter: "demo",
        postgres: Some(db.url.clone()),
        ..Options::default()
    }
}

/// The task id a stream's first frame names.
fn task_id(f: &Frame) -> String {
    let r = &f.data["result"];
    r["task"]["id"]
        .as_str()
        .or(r["statusUpdate"]["taskId"].as_str())
        .expect("a task id in the first frame")
        .to_string()
}

/// The frames' ids, which must be consecutive sequence numbers.
fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().map(|f| f.id.expect("an SSE id")).collect()
}

fn consecutive(ids: &[u64]) -> bool {
    ids.windows(2).all(|w| w[1] == w[0] + 1)
}

#[tokio::test]
async fn a_task_on_one_host_is_streamed_and_resumed_on_another() {
    limit(async {
        let Some(db) = Schema::new("stream_across").await else {
            return;
        };
        let a = TestServer::with(on(&db)).await;
        let b = TestServer::with(on(&db)).await;
        // A slow task on A (300 ms between its lines), followed from the start on A.
        let mut on_a = a
            .open_stream("SendStreamingMessage", send_params("slow"), None)
            .await;
        let first = on_a.next().await.expect("a first frame");
        let id = task_id(&first);
        // B follows it from the start too, while it runs on A.
        let mut whole_on_b = b
            .open_stream("SubscribeToTask", json!({"id": id}), Some(0))
            .await;
        // The client reads a few events on A, then drops its stream...
        let mut seen = vec![first];
        for _ in 0..3 {
            seen.push(on_a.next().await.expect("a frame on A"));
        }
        drop(on_a);
        let last = seen.last().and_then(|f| f.id).expect("an SSE id on A");
        // ... and resumes on B where it left off.
        let resumed = b
            .open_stream("SubscribeToTask", json!({"id": id}), Some(last))
            .await
            .all()
            .await;
        let whole = whole_on_b.all().await;
        assert_eq!(
            states(&resumed).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{resumed:?}"
        );
        assert_eq!(states(&whole).last(), states(&resumed).last());
        // The task's whole log, read once it ended.
        let log = a
            .open_stream("SubscribeToTask", json!({"id": id}), Some(0))
            .await
            .all()
            .await;
        let log_ids = ids(&log);
        assert!(consecutive(&log_ids) && log_ids[0] == 1, "{log_ids:?}");
        // B's stream from the start is the log, every event once, in order.
        assert_eq!(ids(&whole), log_ids);
        for (x, y) in whole.iter().zip(&log) {
            assert_eq!(x.data["result"], y.data["result"], "event {:?}", x.id);
        }
        // What the client saw on A and then on B is the log from the first event A sent
        // with an id: nothing lost, nothing twice.
        let mut joined: Vec<u64> = seen.iter().filter_map(|f| f.id).collect();
        joined.extend(ids(&resumed));
        assert!(consecutive(&joined), "{joined:?}");
        assert_eq!(joined.last(), log_ids.last());
        assert!(resumed.len() > 1, "B only had the end to send: {resumed:?}");
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// The pid of the task's grandchild, once its text names it.
async fn grandchild_of(s: &TestServer, id: &str) -> u32 {
    let t = s
        .task_when(id, |t| grandchild_pid(&t.to_string()).is_some())
        .await;
    grandchild_pid(&t.to_string()).expect("pid")
}

#[tokio::test]
async fn a_host_started_beside_a_live_one_leaves_its_tasks_and_programs_alone() {
    limit(async {
        let Some(db) = Schema::new("beside_live").await else {
            return;
        };
        let a = TestServer::with(on(&db)).await;
        let mut p = send_params("grandchild");
        p["configuration"] = json!({"returnImmediately": true});
        let id = a.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .expect("task id")
            .to_string();
        let pid = grandchild_of(&a, &id).await;
        assert!(process_alive(pid));
        // B starts on the same database, stops, and starts again: A's task is not its own.
        let b = TestServer::with(on(&db)).await;
        b.shutdown().await;
        let b = TestServer::with(on(&db)).await;
        assert!(
            process_alive(pid),
            "a starting host stopped a live peer's program"
        );
        let on_b = b.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(on_b["result"]["status"]["state"], "TASK_STATE_WORKING");
        // A cancel sent to B does not pretend: B passes it to A, which runs the task.
        let canceled = b.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(
            canceled["result"]["status"]["state"], "TASK_STATE_CANCELED",
            "{canceled}"
        );
        let on_a = a.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(on_a["result"]["status"]["state"], "TASK_STATE_CANCELED");
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// Host A, a real process (so that it can be killed mid-task) serving the demo agent with
/// `env` set, and host B in this process, both on `db` with a short heartbeat and lease.
async fn short_leases(db: &Schema, env: &[(&str, &str)]) -> (HostProcess, TestServer) {
    short_leases_in(db, env, Vec::new()).await
}

/// [`short_leases`] with B allowing `roots` as working directories (besides its own folder
/// when empty).
async fn short_leases_in(
    db: &Schema,
    env: &[(&str, &str)],
    roots: Vec<std::path::PathBuf>,
) -> (HostProcess, TestServer) {
    let mut vars = vec![("AGENT_SANDBOX", "off"), ("AGENT_ADAPTER", "demo")];
    vars.extend(env.iter().copied());
    let a = HostProcess::spawn(
        &vars,
        &[
            "--store",
            &db.url,
            "--binary",
            env!("CARGO_BIN_EXE_agent-host"),
            "--heartbeat",
            "200ms",
            "--lease",
            "1000ms",
        ],
    )
    .await;
    let b = TestServer::with(Options {
        cluster: Some(ClusterSettings {
            heartbeat: Duration::from_millis(200),
            lease: Duration::from_millis(1000),
            ..ClusterSettings::default()
        }),
        workspace_roots: roots,
        ..on(db)
    })
    .await;
    (a, b)
}

#[tokio::test]
async fn a_killed_hosts_tasks_end_or_stay_answerable_on_another() {
    limit(async {
        let Some(db) = Schema::new("kill9").await else {
            return;
        };
        let (mut a, b) = short_leases(&db, &[]).await;
        let send = |text: &str| {
            let mut p = send_params(text);
            p["configuration"] = json!({"returnImmediately": true});
            p
        };
        // A task working (with a program that would outlive A), one waiting for an answer.
        let working = a.rpc("/", "SendMessage", send("grandchild"), &[]).await["result"]["task"]
            ["id"]
            .as_str()
            .expect("task id")
            .to_string();
        let asking = a.rpc("/", "SendMessage", send("question"), &[]).await["result"]["task"]["id"]
            .as_str()
            .expect("task id")
            .to_string();
        let pid = grandchild_of(&b, &working).await;
        b.task_when(&asking, |t| {
            t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        })
        .await;
        // A client follows the working task on B.
        let mut follower = b
            .open_stream("SubscribeToTask", json!({"id": working}), Some(0))
            .await;
        a.kill9().await;
        let killed = std::time::Instant::now();
        assert!(
            process_alive(pid),
            "the orphaned program runs on after SIGKILL"
        );
        // Within the lease (and a heartbeat), B ends or keeps every task of A.
        let failed = b
            .task_when(&working, |t| t["status"]["state"] == "TASK_STATE_FAILED")
            .await;
        let why = failed["status"]["message"].to_string();
        assert!(why.contains("was lost"), "{why}");
        // A figure for the record (lease 1000 ms, heartbeat 200 ms), not an assertion.
        eprintln!(
            "kill -9: B reported A's working task failed {} ms after the kill",
            killed.elapsed().as_millis()
        );
        let held = b.rpc("GetTask", json!({"id": asking})).await;
        assert_eq!(
            held["result"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        // B runs on A's machine: the program A left is stopped.
        process_ends("the dead host's program is stopped", pid).await;
        // The follower on B saw the end written by the takeover, after every event.
        let frames = follower.all().await;
        assert!(consecutive(&ids(&frames)), "{frames:?}");
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_FAILED")
        );
        // The waiting task is answered on B, which resumes its session there.
        let mut answer = send_params("src/main.rs");
        answer["message"]["taskId"] = json!(asking);
        let answered = b.rpc("SendMessage", answer).await;
        assert!(answered.get("error").is_none(), "{answered}");
        let done = b
            .task_when(&asking, |t| {
                t["status"]["state"]
                    .as_str()
                    .is_some_and(|s| s == "TASK_STATE_COMPLETED" || s == "TASK_STATE_FAILED")
            })
            .await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// A context made without `metadata.cwd` works in its host's folder; after a takeover the
/// taker (working in a folder of its own) runs the context's next turn in that folder too,
/// not in its own (docs/several-hosts.md: "in the context's folder itself").
#[tokio::test]
async fn a_taken_over_context_keeps_working_in_its_own_folder() {
    limit(async {
        let Some(db) = Schema::new("takeover_cwd").await else {
            return;
        };
        let a_dir = tempfile::tempdir().expect("tempdir");
        for f in ["only-on-a.txt", "also-on-a.txt"] {
            std::fs::write(a_dir.path().join(f), "A's project\n").expect("write");
        }
        let a_repo = a_dir.path().to_str().expect("a UTF-8 path");
        let (mut a, b) = short_leases(&db, &[("AGENT_REPO_PATH", a_repo)]).await;
        assert!(!b.dir().join("only-on-a.txt").exists());
        let mut p = send_params("question");
        p["configuration"] = json!({"returnImmediately": true});
        let asking = a.rpc("/", "SendMessage", p, &[]).await["result"]["task"]["id"]
            .as_str()
            .expect("task id")
            .to_string();
        b.task_when(&asking, |t| {
            t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        })
        .await;
        a.kill9().await;
        // Answered on B once B has taken A's tasks over (until then B passes the answer to
        // A, which is gone: UNAVAILABLE).
        let answered = eventually("B takes the answer itself", WAIT, async || {
            let mut answer = send_params("src/main.rs");
            answer["message"]["taskId"] = json!(asking);
            let r = b.rpc("SendMessage", answer).await;
            ready(r.get("error").is_none(), r)
        })
        .await;
        assert!(answered.get("result").is_some(), "{answered}");
        let done = b
            .task_when(&asking, |t| {
                t["status"]["state"]
                    .as_str()
                    .is_some_and(|s| s == "TASK_STATE_COMPLETED" || s == "TASK_STATE_FAILED")
            })
            .await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        // The resumed turn ran in A's folder (two entries there), not B's (one).
        let cwd = done["artifacts"][0]["parts"][0]["data"]["cwd"].clone();
        assert_eq!(
            done["artifacts"][0]["artifactId"], "agent-metadata",
            "{done}"
        );
        assert_eq!(cwd, json!(a_repo), "B's folder is {}", b.dir().display());
        let said = done["status"]["message"].to_string();
        assert!(said.contains("The directory has 2 entries"), "{said}");
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// The id of the task a `SendMessage` with `returnImmediately` made on `host`.
async fn sent(host: &HostProcess, text: &str) -> String {
    let mut p = send_params(text);
    p["configuration"] = json!({"returnImmediately": true});
    let r = host.rpc("/", "SendMessage", p, &[]).await;
    r["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {r}"))
        .to_string()
}

/// A host that stalls past its lease (SIGSTOP) while a task waits in its queue: another
/// host takes the task over and runs it; the stalled host, once it goes on, lets go of the
/// task and never runs its program (docs/several-hosts.md: "A host only ever starts, stops,
/// resumes or fails the tasks it owns").
#[tokio::test]
async fn a_stalled_host_runs_none_of_the_tasks_taken_from_it() {
    limit(async {
        let Some(db) = Schema::new("stalled").await else {
            return;
        };
        let repo = tempfile::tempdir().expect("tempdir");
        let repo_path = repo.path().to_str().expect("a UTF-8 path");
        let (a, b) = short_leases(
            &db,
            &[
                ("AGENT_REPO_PATH", repo_path),
                ("AGENT_HOST_MAX_RUNNING_TASKS", "1"),
            ],
        )
        .await;
        let notes = repo.path().join("NOTES.md");
        let edits = || {
            std::fs::read_to_string(&notes)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("queued-task-ran"))
                .count()
        };
        // A runs a task that never ends; the next one waits for its slot.
        let hang = sent(&a, "hang").await;
        b.task_when(&hang, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let queued = sent(&a, "edit queued-task-ran").await;
        // A stalls past its lease: B takes both over, fails the running one and runs the
        // queued one.
        a.pause();
        let done = b
            .task_when(&queued, |t| {
                t["status"]["state"]
                    .as_str()
                    .is_some_and(|s| s == "TASK_STATE_COMPLETED" || s == "TASK_STATE_FAILED")
            })
            .await;
        assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
        assert_eq!(edits(), 1);
        a.resume();
        // A finds the queued task taken and lets go of it (or, without that, runs it again).
        eventually("A lets go of the queued task", WAIT, async || {
            let let_go = a
                .log_lines(&[&queued, "took over"])
                .into_iter()
                .any(|l| !l.contains("stopping"));
            ready(let_go || edits() > 1, edits())
        })
        .await;
        assert_eq!(edits(), 1, "the queued task ran twice");
        assert_eq!(
            a.log_lines(&[&queued, "agent started"]),
            Vec::<String>::new()
        );
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// A (a real process) with a task working (`hang`) and one waiting for an answer
/// (`question`) stalls past its lease (SIGSTOP) until B has taken both over, then goes on:
/// it finds both taken (B, on the same machine, stopped their programs meanwhile). Returns
/// once A has dealt with both turns' ends (tried to store them, or kept the task as it is).
async fn lose_the_lease(db: &Schema) -> (HostProcess, TestServer, String, String) {
    let (a, b) = short_leases(db, &[]).await;
    let hang = sent(&a, "hang").await;
    let asking = sent(&a, "question").await;
    b.task_when(&hang, |t| t["status"]["state"] == "TASK_STATE_WORKING")
        .await;
    b.task_when(&asking, |t| {
        t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    })
    .await;
    a.pause();
    let failed = b
        .task_when(&hang, |t| t["status"]["state"] == "TASK_STATE_FAILED")
        .await;
    assert!(
        failed["status"]["message"].to_string().contains("was lost"),
        "{failed}"
    );
    a.resume();
    for id in [&hang, &asking] {
        eventually(
            "A deals with the end of a task taken from it",
            WAIT,
            async || {
                let lines = a.log_lines(&[id.as_str()]);
                let dealt = lines.iter().any(|l| {
                    l.contains("could not store task events")
                        || l.contains("another host owns")
                        || l.contains("kept for the next start")
                });
                ready(dealt, lines)
            },
        )
        .await;
    }
    (a, b, hang, asking)
}

/// A host whose writes were refused because another host took its tasks over is not a host
/// whose store fails: its `/health` says healthy once it registered again.
#[tokio::test]
async fn a_host_that_lost_its_lease_stays_healthy() {
    limit(async {
        let Some(db) = Schema::new("lost_health").await else {
            return;
        };
        let (a, b, _, _) = lose_the_lease(&db).await;
        let r = reqwest::get(format!("{}/health", a.base))
            .await
            .expect("GET /health");
        let status = r.status();
        let body = r.text().await.expect("body");
        assert_eq!(status, 200, "{body}");
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// A host that lost its lease reads the tasks taken from it as the store has them (their
/// new owner's word), not as it last saw them: the working one failed because the host was
/// lost, the one waiting for an answer still waiting.
#[tokio::test]
async fn a_host_that_lost_its_lease_reads_its_former_tasks_from_the_store() {
    limit(async {
        let Some(db) = Schema::new("lost_reads").await else {
            return;
        };
        let (a, b, hang, asking) = lose_the_lease(&db).await;
        for id in [&hang, &asking] {
            let on_a = a.rpc("/", "GetTask", json!({"id": id}), &[]).await["result"].clone();
            let on_b = b.rpc("GetTask", json!({"id": id})).await["result"].clone();
            assert_eq!(on_a["status"], on_b["status"], "task {id}");
        }
        let on_a = a.rpc("/", "GetTask", json!({"id": asking}), &[]).await["result"].clone();
        assert_eq!(
            on_a["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{on_a}"
        );
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// A context whose host died with no unfinished task in it moves to the taker with its CLI
/// session: the taker's next turn in it resumes that session.
#[tokio::test]
async fn a_taken_over_context_resumes_its_session_on_the_taker() {
    limit(async {
        let Some(db) = Schema::new("takeover_session").await else {
            return;
        };
        // A's folder is one B allows: the context keeps working in it there.
        let repo = tempfile::tempdir().expect("tempdir");
        let repo_path = repo.path().to_str().expect("a UTF-8 path");
        let (mut a, b) = short_leases_in(
            &db,
            &[("AGENT_REPO_PATH", repo_path)],
            vec![repo.path().canonicalize().expect("canonical")],
        )
        .await;
        let first =
            a.rpc("/", "SendMessage", send_params("hello"), &[]).await["result"]["task"].clone();
        assert_eq!(first["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
        let context = first["contextId"].as_str().expect("a context").to_string();
        a.kill9().await;
        // Taken by B once A's lease expired (until then B passes the message to A, which is
        // gone: UNAVAILABLE).
        let next = eventually("B runs the follow-up itself", WAIT, async || {
            let mut p = send_params("hello again");
            p["message"]["contextId"] = json!(context);
            let r = b.rpc("SendMessage", p).await;
            ready(r.get("error").is_none(), r)
        })
        .await;
        let task = &next["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{next}");
        assert!(task.to_string().contains("Resuming session"), "{next}");
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// The context's row: (owner host, CLI session).
async fn context_row(db: &Schema, context: &str) -> (Option<String>, String) {
    let row = db
        .client()
        .await
        .query_one(
            "SELECT host, session_id FROM contexts WHERE context_id = $1",
            &[&context],
        )
        .await
        .expect("the context's row");
    (row.get(0), row.get(1))
}

/// A host that stalls (SIGSTOP) while its turn's program starts, past its lease, goes on
/// with that turn's first line (the CLI's session) after another host took the context over
/// and ran a turn of its own in it: the context stays the taker's, with the taker's
/// session, and a follow-up through the taker resumes that session there.
#[tokio::test]
async fn a_stalled_host_does_not_take_a_context_back() {
    limit(async {
        let Some(db) = Schema::new("context_back").await else {
            return;
        };
        let repo = tempfile::tempdir().expect("tempdir");
        let repo_path = repo.path().to_str().expect("a UTF-8 path");
        let (a, b) = short_leases_in(
            &db,
            &[("AGENT_REPO_PATH", repo_path)],
            vec![repo.path().canonicalize().expect("canonical")],
        )
        .await;
        // A's program prints its session once the test opens its gate: A, stalled by then,
        // reads it only when it goes on.
        let mut p = send_params("gate edit hello");
        p["configuration"] = json!({"returnImmediately": true});
        let task = a.rpc("/", "SendMessage", p, &[]).await["result"]["task"].clone();
        let id = task["id"].as_str().expect("task id").to_string();
        let context = task["contextId"].as_str().expect("a context").to_string();
        eventually("A starts the program", WAIT, async || {
            let started = a.log_lines(&[&id, "agent started"]);
            ready(!started.is_empty(), started)
        })
        .await;
        b.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        a.pause();
        std::fs::write(repo.path().join("GATE"), "").expect("the gate");
        // The program went on past its session (to its edit) before B took A's tasks over
        // (and stopped the program).
        let notes = repo.path().join("NOTES.md");
        eventually("A's program prints its session", WAIT, async || {
            ready(notes.exists(), ())
        })
        .await;
        b.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_FAILED")
            .await;
        // B runs a turn in the context it took: the context has B's session now.
        let follow_up = |text: &str| {
            let mut p = send_params(text);
            p["message"]["contextId"] = json!(context);
            p
        };
        let next = b.rpc("SendMessage", follow_up("hello again")).await;
        assert_eq!(
            next["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{next}"
        );
        let before = context_row(&db, &context).await;
        assert!(!before.1.is_empty(), "{before:?}");
        a.resume();
        eventually("A deals with its turn's session", WAIT, async || {
            let refused = a.log_lines(&[&context, "another host owns"]);
            let now = context_row(&db, &context).await;
            ready(!refused.is_empty() || now != before, now)
        })
        .await;
        assert_eq!(context_row(&db, &context).await, before, "A took it back");
        // A follow-up through B runs on B, in B's session.
        let last = b.rpc("SendMessage", follow_up("hello once more")).await;
        let said = last["result"]["task"].to_string();
        assert!(
            said.contains(&format!("Resuming session {}", before.1)),
            "{last}"
        );
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// Clients following tasks on the host that owns them while that host stalls past its
/// lease: the task it ran (failed by the taker) and one waiting in its queue (run by the
/// taker). Once the host goes on and lets go of them, its streams go on with what the taker
/// writes, to each task's end: the queued task's stream, whose task this host forgot, does
/// not end with the task still running on the taker.
#[tokio::test]
async fn streams_on_a_stalled_host_follow_its_tasks_to_the_ends_the_taker_writes() {
    limit(async {
        let Some(db) = Schema::new("stalled_streams").await else {
            return;
        };
        let (a, b) = short_leases(&db, &[("AGENT_HOST_MAX_RUNNING_TASKS", "1")]).await;
        let hang = sent(&a, "hang").await;
        b.task_when(&hang, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        let mut ran = a.open_stream("SubscribeToTask", json!({"id": hang})).await;
        // Queued behind `hang`; on the taker its lines come 400 ms apart.
        let mut queued = a
            .open_stream("SendStreamingMessage", send_params("sleep=400 hello"))
            .await;
        let id = task_id(&queued.next().await.expect("a first frame"));
        a.pause();
        b.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_WORKING")
            .await;
        a.resume();
        let frames = queued.all().await;
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{frames:?}"
        );
        let frames = ran.all().await;
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_FAILED"),
            "{frames:?}"
        );
        let last = frames
            .last()
            .map(|f| f.data.to_string())
            .unwrap_or_default();
        assert!(last.contains("was lost"), "{last}");
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// Makes the next statement that updates `tasks` (by any host) wait 3 s before it touches a
/// row: the commit of the next task event a host writes comes late.
async fn delay_next_task_update(db: &Schema) {
    db.client()
        .await
        .batch_execute(
            "CREATE SEQUENCE delay_once;
             CREATE FUNCTION delay_once() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
                IF nextval('delay_once') = 1 THEN PERFORM pg_sleep(3); END IF;
                RETURN NULL;
             END $$;
             CREATE TRIGGER delay_once BEFORE UPDATE ON tasks
                FOR EACH STATEMENT EXECUTE FUNCTION delay_once();",
        )
        .await
        .expect("the delaying trigger");
}

/// A host that stalls (SIGSTOP) right after it started a task's program, past its lease,
/// while the task's `working` is still on its way to the database: the host that takes its
/// tasks over must find the task started, and fail it (its host was lost) rather than run
/// it a second time.
#[tokio::test]
async fn a_task_started_before_its_host_stalled_is_not_run_again() {
    limit(async {
        let Some(db) = Schema::new("started_once").await else {
            return;
        };
        let repo = tempfile::tempdir().expect("tempdir");
        let repo_path = repo.path().to_str().expect("a UTF-8 path");
        let (a, b) = short_leases(&db, &[("AGENT_REPO_PATH", repo_path)]).await;
        let notes = repo.path().join("NOTES.md");
        let edits = || {
            std::fs::read_to_string(&notes)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains("started-once"))
                .count()
        };
        delay_next_task_update(&db).await;
        let id = sent(&a, "gate edit started-once").await;
        eventually("A starts the program", WAIT, async || {
            let started = a.log_lines(&[&id, "agent started"]);
            ready(!started.is_empty(), started)
        })
        .await;
        a.pause();
        std::fs::write(repo.path().join("GATE"), "").expect("the gate");
        eventually("A's program makes its edit", WAIT, async || {
            ready(edits() > 0, edits())
        })
        .await;
        let done = b
            .task_when(&id, |t| {
                t["status"]["state"]
                    .as_str()
                    .is_some_and(|s| s == "TASK_STATE_COMPLETED" || s == "TASK_STATE_FAILED")
            })
            .await;
        assert_eq!(edits(), 1, "the task ran twice: {done}");
        assert_eq!(done["status"]["state"], "TASK_STATE_FAILED", "{done}");
        assert!(done.to_string().contains("was lost"), "{done}");
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}
