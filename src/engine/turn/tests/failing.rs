//! Issue 15 item 2: a store that refuses writes (a full disk) fails the task, says so, and
//! still ends its streams; the engine reports the failing store.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::store::{ContextRecord, ListPage, ListQuery, StoreError, TaskStore};
use crate::task::{LoggedEvent, TaskEvent};

use super::*;

/// A memory store standing for a disk: its appends fail while `full` is set, like a database
/// on a full disk, and each takes `delay` first, like one on a slow disk; each read of a
/// task or its events takes `read_delay`, like a task of very long lines read back.
pub(super) struct Disk {
    pub(super) inner: MemoryStore,
    pub(super) full: AtomicBool,
    pub(super) delay: Duration,
    pub(super) read_delay: Duration,
    /// Milliseconds each forgetting of a process group takes (a turn's last store write).
    pub(super) forget_delay_ms: std::sync::atomic::AtomicU64,
}

impl Disk {
    /// An engine running the demo adapter on a disk with room whose appends take `delay`
    /// and whose reads take `read_delay`; the disk, to fill or read.
    pub(super) fn engine(
        delay: Duration,
        read_delay: Duration,
    ) -> (Arc<Disk>, Engine, mpsc::UnboundedReceiver<Script>) {
        let store = Arc::new(Disk {
            inner: MemoryStore::new(),
            full: AtomicBool::new(false),
            delay,
            read_delay,
            forget_delay_ms: Default::default(),
        });
        let adapter = Registry::builtin().unwrap().get("demo").unwrap().clone();
        let (e, scripts) = engine_on(
            store.clone(),
            launch_of(adapter, HARD, IDLE),
            EngineConfig::default(),
        );
        (store, e, scripts)
    }
}

fn disk_full() -> StoreError {
    StoreError::Io {
        path: "/data/tasks.db".into(),
        source: std::io::Error::from_raw_os_error(28),
    }
}

#[async_trait]
impl TaskStore for Disk {
    async fn create_owned(
        &self,
        task: crate::protocol::v1::Task,
        owner: Option<String>,
    ) -> Result<u64, StoreError> {
        self.inner.create_owned(task, owner).await
    }
    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        if self.full.load(Ordering::SeqCst) {
            return Err(disk_full());
        }
        self.inner.append(task_id, events).await
    }
    async fn get(&self, task_id: &str) -> Result<Option<Snapshot>, StoreError> {
        if !self.read_delay.is_zero() {
            tokio::time::sleep(self.read_delay).await;
        }
        self.inner.get(task_id).await
    }
    async fn events_after(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
        if !self.read_delay.is_zero() {
            tokio::time::sleep(self.read_delay).await;
        }
        self.inner.events_after(task_id, after, limit).await
    }
    async fn list(&self, query: &ListQuery, with_artifacts: bool) -> Result<ListPage, StoreError> {
        self.inner.list(query, with_artifacts).await
    }
    async fn unfinished(&self) -> Result<Vec<Snapshot>, StoreError> {
        self.inner.unfinished().await
    }
    async fn put_context(&self, ctx: &ContextRecord) -> Result<(), StoreError> {
        self.inner.put_context(ctx).await
    }
    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError> {
        self.inner.contexts().await
    }
    async fn record_process(&self, task_id: &str, pgid: u32, start: u64) -> Result<(), StoreError> {
        self.inner.record_process(task_id, pgid, start).await
    }
    async fn forget_process(&self, task_id: &str) -> Result<(), StoreError> {
        let ms = self.forget_delay_ms.load(Ordering::SeqCst);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        self.inner.forget_process(task_id).await
    }
    async fn recorded_processes(&self) -> Result<Vec<(String, u32, u64)>, StoreError> {
        self.inner.recorded_processes().await
    }
    async fn terminal_tasks(&self) -> Result<Vec<crate::store::TerminalTask>, StoreError> {
        self.inner.terminal_tasks().await
    }
    async fn delete_terminal(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        self.inner.delete_terminal(ids).await
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_that_refuses_writes_fails_the_task_and_ends_its_streams() {
    let (store, e, mut scripts) = Disk::engine(Duration::ZERO, Duration::ZERO);
    let (task, script) = start(&e, &mut scripts).await;
    while e.get(&task, None, None).await.unwrap().status.state != TaskState::Working {
        tokio::task::yield_now().await;
    }
    assert_eq!(e.store_failure(), None);
    // A stream following the task since its start.
    let mut stream = e.subscribe(&task, 0, None).await.unwrap();
    store.full.store(true, Ordering::SeqCst);
    script.emit(json!({"type": "text", "text": "more work", "delta": true}));

    // Even the failure could not be stored: the stream still ends with it.
    let mut last = None;
    while let Some(ev) = stream.next().await {
        last = Some(ev);
    }
    let last = last.expect("events");
    assert!(last.event.ends_stream(), "{:?}", last.event);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Failed);
    let text = status_text(&snap);
    println!("{text}");
    assert!(text.contains("task store failed"), "{text}");
    let why = e.store_failure().expect("the engine says the store fails");
    println!("store failure: {why}");
    assert!(why.contains("No space left"), "{why}");
    while e.live_count() > 0 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(script.log().contains(&"terminate".to_string()));
    // The store still says working: the next start repairs it (as after a crash).
    let stored = store.inner.get(&task).await.unwrap().unwrap();
    assert_eq!(stored.task.status.state, TaskState::Working);

    // Space freed: the next write clears the failure.
    store.full.store(false, Ordering::SeqCst);
    let (next, mut script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "done", "result": "ok", "is_error": false}));
    script.exit(0);
    assert_eq!(
        settled(&e, &next, 0).await.task.status.state,
        TaskState::Completed
    );
    assert_eq!(e.store_failure(), None);
}

/// A stream raced against a timer that fires more often than the store answers (an SSE
/// response against its keep-alive, every 200 ms in the tests, while a task of 15 MB lines is
/// read back on a busy machine): each read goes on across the cancelled calls, so the
/// stream still reaches the task's end.
#[tokio::test(start_paused = true)]
async fn a_stream_whose_reads_outlast_its_keep_alive_still_reaches_the_end() {
    let (_disk, e, mut scripts) = Disk::engine(Duration::ZERO, Duration::from_millis(300));
    let (task, mut script) = start(&e, &mut scripts).await;
    script.emit(json!({"type": "text", "text": "long line", "delta": true}));
    script.emit(json!({"type": "done", "result": "ok", "is_error": false}));
    script.exit(0);
    let snap = settled(&e, &task, 0).await;
    assert_eq!(snap.task.status.state, TaskState::Completed);

    let mut stream = e.subscribe(&task, 0, None).await.unwrap();
    let (mut events, mut ticks) = (Vec::new(), 0);
    let followed = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            tokio::select! {
                ev = stream.next() => match ev {
                    Some(ev) => events.push(ev),
                    None => break,
                },
                () = tokio::time::sleep(Duration::from_millis(50)) => ticks += 1,
            }
        }
    })
    .await;
    assert!(
        followed.is_ok(),
        "the stream stood still: {} events in 60 s, {ticks} keep-alive ticks",
        events.len()
    );
    let last = events.last().expect("events");
    assert!(last.event.ends_stream(), "{:?}", last.event);
    assert_eq!(
        last.seq, snap.last_seq,
        "the stream reached the task's last event"
    );
    assert!(ticks > 0, "the timer fired while reads were under way");
}

/// A spawner whose spawn panics (a bug in the host's code during a turn).
struct Panicking;

#[async_trait]
impl Spawner for Panicking {
    async fn spawn(&self, _spec: SpawnSpec) -> Result<Box<dyn Child>, SpawnError> {
        panic!("a bug while starting the agent");
    }
}

/// A panic in a turn fails its task (instead of leaving it working with nothing running
/// it) and gives its running slot back; a cancel then has nothing to stop.
#[tokio::test(start_paused = true)]
async fn a_turn_that_panics_fails_its_task_and_gives_its_slot_back() {
    let adapter = Registry::builtin().unwrap().get("demo").unwrap().clone();
    let e = Engine::with_spawner(
        Arc::new(MemoryStore::new()),
        launch_of(adapter, HARD, IDLE),
        EngineConfig::default(),
        Arc::new(Panicking),
    );
    let acc = e
        .send(request("hi", None), None, &RequestOptions::default())
        .await
        .unwrap();
    let snap = tokio::time::timeout(Duration::from_secs(60), settled(&e, &acc.task_id, 0))
        .await
        .expect("the task ends");
    assert_eq!(snap.task.status.state, TaskState::Failed);
    assert!(
        status_text(&snap).contains("internal error"),
        "{}",
        status_text(&snap)
    );
    assert_eq!(e.load(), (0, 0), "the slot is given back");
    assert_eq!(e.live_count(), 0);
}
