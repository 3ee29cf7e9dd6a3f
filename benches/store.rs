//! Store cost per appended event, by task length: the memory store beside the SQLite store,
//! then the PostgreSQL store when a database answers.
//!
//! Each run creates tasks of 100, 1,000 and 10,000 events and appends them one event per call
//! (a live stream: the worst case, no batching by the caller), each event a 100-byte chunk of
//! a streamed answer, then ends the task. Prints the process CPU time (every thread: the
//! caller, the runtime's blocking threads and SQLite's writer thread) and the wall time per
//! event. `cargo bench --bench store`; `cargo test --all-targets` runs it once, small.
//! `LENGTHS=10000,100000 cargo bench --bench store` measures other task lengths.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use agent_host::protocol::v1::{
    Artifact, Part, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
    TaskStatusUpdateEvent,
};
use agent_host::store::{MemoryStore, SqliteStore, TaskStore};
use agent_host::task::TaskEvent;

fn cpu_seconds() -> f64 {
    // Bench code: a clock that cannot be read is a broken machine, so it panics.
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .expect("process CPU clock");
    t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9
}

fn status(id: &str, state: TaskState) -> TaskEvent {
    TaskEvent::Stream(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
        task_id: id.into(),
        context_id: "c".into(),
        status: TaskStatus {
            state,
            message: None,
            timestamp: Some(agent_host::task::now_timestamp()),
        },
        metadata: None,
    }))
}

fn chunk(id: &str, text: &str) -> TaskEvent {
    TaskEvent::Stream(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: id.into(),
        context_id: "c".into(),
        artifact: Artifact {
            artifact_id: "answer".into(),
            parts: vec![Part::text(text)],
            ..Artifact::default()
        },
        append: true,
        last_chunk: false,
        metadata: None,
    }))
}

/// Runs `tasks` tasks of `events` events each; returns (CPU µs, wall µs) per event.
async fn run(store: &dyn TaskStore, tag: &str, tasks: usize, events: usize) -> (f64, f64) {
    let text = "x".repeat(99) + "\n";
    let cpu = cpu_seconds();
    let wall = Instant::now();
    for t in 0..tasks {
        let id = format!("{tag}-{events}-{t}");
        let task = Task {
            id: id.clone(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(agent_host::task::now_timestamp()),
            },
            ..Task::default()
        };
        store.create(task).await.expect("create");
        store
            .append(&id, vec![status(&id, TaskState::Working)])
            .await
            .expect("append");
        for _ in 0..events {
            store
                .append(&id, vec![chunk(&id, &text)])
                .await
                .expect("append");
        }
        store
            .append(&id, vec![status(&id, TaskState::Completed)])
            .await
            .expect("append");
    }
    let n = (tasks * events) as f64;
    (
        (cpu_seconds() - cpu) * 1e6 / n,
        wall.elapsed().as_secs_f64() * 1e6 / n,
    )
}

fn main() {
    // `cargo test --all-targets` runs benches with `--test`... and plain `cargo bench` with
    // `--bench`: a test run only checks that the bench works, on small tasks.
    let quick = !std::env::args().any(|a| a == "--bench");
    let asked: Option<Vec<usize>> = std::env::var("LENGTHS").ok().map(|l| {
        l.split(',')
            .map(|n| n.trim().parse().expect("LENGTHS: numbers"))
            .collect()
    });
    let lengths: &[usize] = match &asked {
        _ if quick => &[10],
        Some(l) => l,
        None => &[100, 1000, 10_000],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    rt.block_on(async {
        let memory = MemoryStore::new();
        let sqlite = SqliteStore::open(&dir.path().join("bench.db")).expect("open");
        println!("| events per task | memory CPU/event | SQLite CPU/event | SQLite/memory | memory wall/event | SQLite wall/event |");
        println!("|---:|---:|---:|---:|---:|---:|");
        for &events in lengths {
            // About 10,000 events per measurement (at least one task).
            let tasks = (10_000 / events).max(1);
            let (mc, mw) = run(&memory, "m", tasks, events).await;
            let (sc, sw) = run(&sqlite, "s", tasks, events).await;
            println!(
                "| {events} | {mc:.1} µs | {sc:.1} µs | {:.2}x | {mw:.1} µs | {sw:.1} µs |",
                sc / mc
            );
        }
        postgres(lengths).await;
    });
}

/// The PostgreSQL store on `AGENT_HOST_TEST_PG` (default the local test database), in a schema
/// of its own dropped afterwards; skipped with a note when the database does not answer. Its
/// CPU is this process's only (the driver, the writer task): the server's is not counted.
async fn postgres(lengths: &[usize]) {
    let url = std::env::var("AGENT_HOST_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://root@127.0.0.1:5432/test".into());
    let schema = format!("bench_{}", uuid::Uuid::new_v4().simple());
    let store = match agent_host::store::PgStore::open(&url, Some(&schema)).await {
        Ok(s) => s,
        Err(e) => {
            println!("\n(PostgreSQL at {url} not reachable, its row skipped: {e})");
            return;
        }
    };
    println!("\n| events per task | PostgreSQL CPU/event (host only) | PostgreSQL wall/event |");
    println!("|---:|---:|---:|");
    for &events in lengths {
        let tasks = (10_000 / events).max(1);
        let (pc, pw) = run(&store, "p", tasks, events).await;
        println!("| {events} | {pc:.1} µs | {pw:.1} µs |");
    }
    let client = store.pool().get().await.expect("connection");
    client
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .expect("drop the bench schema");
}
