//! The SQLite store: round trips, reopening, migrations, concurrent writers, compaction.

use super::*;
use crate::protocol::v1::TaskState;
use crate::store::suite::{answer, chunk, status, task};
use crate::store::ContextRecord;
use rusqlite::params;

mod on_disk;

#[tokio::test]
async fn round_trip_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sub/agent-host.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        assert_eq!(
            s.create(task("t1", "c", "2026-01-01T00:00:00.000Z"))
                .await
                .unwrap(),
            1
        );
        assert!(matches!(
            s.create(task("t1", "c", "x")).await,
            Err(StoreError::Exists(_))
        ));
        let seq = s
            .append(
                "t1",
                vec![
                    status("t1", TaskState::Working, "2026-01-01T00:00:01.000Z"),
                    chunk("t1", "Hel", false),
                    chunk("t1", "lo", true),
                ],
            )
            .await
            .unwrap();
        assert_eq!(seq, 4);
        let snap = s.get("t1").await.unwrap().unwrap();
        assert_eq!(snap.last_seq, 4);
        assert_eq!(snap.task.status.state, TaskState::Working);
        assert_eq!(answer(&snap.task), "Hello");
        // From the in-memory window.
        let evs = s.events_after("t1", 1, 10).await.unwrap();
        assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3, 4]);
        assert!(matches!(
            s.append("nope", vec![chunk("nope", "x", false)]).await,
            Err(StoreError::NotFound(_))
        ));
        s.put_context(&ContextRecord {
            context_id: "c".into(),
            session_id: Some("session-1".into()),
            owner: Some("alice".into()),
            cwd: Some("/srv/repo".into()),
        })
        .await
        .unwrap();
        assert_eq!(s.path(), path);
    }
    // A new store on the same file (a restart) sees everything.
    let s = SqliteStore::open(&path).unwrap();
    let snap = s.get("t1").await.unwrap().unwrap();
    assert_eq!(snap.last_seq, 4);
    assert_eq!(answer(&snap.task), "Hello");
    let evs = s.events_after("t1", 2, 10).await.unwrap();
    assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3, 4]);
    assert!(matches!(
        evs[0].event,
        TaskEvent::Stream(StreamResponse::ArtifactUpdate(_))
    ));
    assert!(matches!(
        s.events_after("nope", 0, 10).await,
        Err(StoreError::NotFound(_))
    ));
    // Appending after the restart continues the sequence.
    assert_eq!(
        s.append(
            "t1",
            vec![status(
                "t1",
                TaskState::Completed,
                "2026-01-01T00:00:02.000Z"
            )]
        )
        .await
        .unwrap(),
        5
    );
    assert_eq!(s.unfinished().await.unwrap().len(), 0);
    let contexts = s.contexts().await.unwrap();
    assert_eq!(contexts.len(), 1);
    assert_eq!(contexts[0].session_id.as_deref(), Some("session-1"));
    assert_eq!(contexts[0].owner.as_deref(), Some("alice"));
    assert_eq!(contexts[0].cwd.as_deref(), Some("/srv/repo"));
}

#[tokio::test]
async fn an_older_schema_is_migrated_and_its_tasks_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    let fixture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/db/schema-v1.sql"),
    )
    .unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch(&fixture)
        .unwrap();
    let s = SqliteStore::open(&path).unwrap();
    let version: i64 = Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version as usize, SCHEMA_VERSION);
    let done = s.get("t-done").await.unwrap().unwrap();
    assert_eq!(done.task.status.state, TaskState::Completed);
    assert_eq!(answer(&done.task), "Hi there");
    assert_eq!(done.task.history.len(), 2);
    let unfinished = s.unfinished().await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].task.id, "t-stuck");
    s.put_context(&ContextRecord {
        context_id: "c-2".into(),
        session_id: Some("s".into()),
        ..ContextRecord::default()
    })
    .await
    .unwrap();
    let page = s
        .list(
            &ListQuery {
                page_size: 10,
                ..ListQuery::default()
            },
            true,
        )
        .await
        .unwrap();
    assert_eq!(page.total_size, 2);
    assert_eq!(page.tasks[0].id, "t-stuck", "newest status first");
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.db");
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let err = SqliteStore::open(&path).err().unwrap().to_string();
    assert!(err.contains("newer"), "{err}");
}

#[tokio::test]
async fn concurrent_writers_keep_every_log_whole_and_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(SqliteStore::open(&dir.path().join("c.db")).unwrap());
    let mut handles = Vec::new();
    for t in 0..16 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let id = format!("task-{t}");
            s.create(task(&id, "c", "2026-01-01T00:00:00.000Z"))
                .await
                .unwrap();
            for i in 0..150 {
                s.append(&id, vec![chunk(&id, &format!("{i},"), i > 0)])
                    .await
                    .unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    drop(s);
    let s = SqliteStore::open(&dir.path().join("c.db")).unwrap();
    for t in 0..16 {
        let id = format!("task-{t}");
        let evs = s.events_after(&id, 0, 1000).await.unwrap();
        let seqs: Vec<u64> = evs.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=151).collect::<Vec<u64>>());
        let snap = s.get(&id).await.unwrap().unwrap();
        let expected: String = (0..150).map(|i| format!("{i},")).collect();
        assert_eq!(answer(&snap.task), expected);
    }
}

#[tokio::test]
async fn long_tasks_are_compacted_and_ended_tasks_leave_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("long", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    // More events than a window keeps, past the first checkpoint's size.
    let n = crate::store::window::WINDOW + 1000;
    for i in 0..n {
        s.append("long", vec![chunk("long", "x", i > 0)])
            .await
            .unwrap();
    }
    s.flush().await.unwrap();
    let snapshot_seq: i64 = Connection::open(&path)
        .unwrap()
        .query_row(
            "SELECT seq FROM snapshots WHERE task_id = 'long'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(snapshot_seq > 1, "a checkpoint was written");
    let snap = s.get("long").await.unwrap().unwrap();
    assert_eq!(answer(&snap.task).len(), n);
    // Old events beyond the memory window come from the database.
    let evs = s.events_after("long", 1, 5).await.unwrap();
    assert_eq!(evs[0].seq, 2);
    s.append(
        "long",
        vec![status(
            "long",
            TaskState::Completed,
            "2026-01-01T00:00:09.000Z",
        )],
    )
    .await
    .unwrap();
    assert!(
        s.live.lock().unwrap().is_empty(),
        "ended tasks leave memory"
    );
    let snap = s.get("long").await.unwrap().unwrap();
    assert_eq!(snap.task.status.state, TaskState::Completed);
    assert_eq!(answer(&snap.task).len(), n);
}

#[tokio::test]
async fn readers_never_see_an_end_before_it_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db")).unwrap();
    store
        .create(task("t1", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    store
        .append(
            "t1",
            vec![status("t1", TaskState::Working, "2026-01-01T00:00:01.000Z")],
        )
        .await
        .unwrap();
    // An end in the window that the writer has not committed yet.
    {
        let mut live = store.live.lock().unwrap();
        let l = live.get_mut("t1").unwrap();
        l.last_seq += 1;
        let ev = status("t1", TaskState::Completed, "2026-01-01T00:00:02.000Z");
        l.window
            .keep(1, Arc::new(LoggedEvent::new(l.last_seq, ev)), WINDOW_BYTES);
    }
    // A subscriber does not get it, so it cannot act on a state that GetTask does not show.
    let seen = store.events_after("t1", 0, 10).await.unwrap();
    assert_eq!(seen.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    let snap = store.get("t1").await.unwrap().unwrap();
    assert_eq!(snap.task.status.state, TaskState::Working);
    assert_eq!(snap.last_seq, 2);
}

/// The state and last sequence of a task as another connection reads them from the file.
fn on_disk(path: &Path, id: &str) -> (String, i64) {
    Connection::open(path)
        .unwrap()
        .query_row(
            "SELECT state, last_seq FROM tasks WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

#[tokio::test]
async fn streamed_events_are_seen_at_once_and_an_end_is_on_disk_when_append_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("g", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    assert_eq!(on_disk(&path, "g"), ("TASK_STATE_SUBMITTED".into(), 1));
    s.append(
        "g",
        vec![status("g", TaskState::Working, "2026-01-01T00:00:01.000Z")],
    )
    .await
    .unwrap();
    for i in 0..100 {
        s.append("g", vec![chunk("g", "x", i > 0)]).await.unwrap();
    }
    // Subscribers read the streamed events from memory at once, committed or not.
    let evs = s.events_after("g", 0, 1000).await.unwrap();
    assert_eq!(evs.len(), 102);
    // Each is encoded once: the stored JSON's inner part is the cached v1.0 wire JSON.
    assert!(evs[5].v1_json.get().is_some());
    // A read of the task waits for them.
    let snap = s.get("g").await.unwrap().unwrap();
    assert_eq!(snap.last_seq, 102);
    assert_eq!(answer(&snap.task).len(), 100);
    // A question to the user is committed before the append returns, with all before it.
    let seq = s
        .append(
            "g",
            vec![status(
                "g",
                TaskState::InputRequired,
                "2026-01-01T00:00:02.000Z",
            )],
        )
        .await
        .unwrap();
    assert_eq!(
        on_disk(&path, "g"),
        ("TASK_STATE_INPUT_REQUIRED".into(), seq as i64)
    );
    s.append("g", vec![chunk("g", "y", true)]).await.unwrap();
    let seq = s
        .append(
            "g",
            vec![status(
                "g",
                TaskState::Completed,
                "2026-01-01T00:00:03.000Z",
            )],
        )
        .await
        .unwrap();
    assert_eq!(
        on_disk(&path, "g"),
        ("TASK_STATE_COMPLETED".into(), seq as i64)
    );
}

#[tokio::test]
async fn a_background_write_that_fails_is_reported_at_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.db");
    let s = SqliteStore::open(&path).unwrap();
    s.create(task("f", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    // The database refuses the task's third event, as a full disk would.
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.first_seq <= 3 AND NEW.last_seq >= 3
             BEGIN SELECT RAISE(ABORT, 'database or disk is full (test)'); END;",
        )
        .unwrap();
    // Streamed events return before their commit: the failure is not known yet.
    for i in 0..4 {
        assert_eq!(
            s.append("f", vec![chunk("f", "x", i > 0)]).await.unwrap(),
            2 + i
        );
    }
    s.flush().await.unwrap();
    // The next append hears of it, once; the event after the refused one was not written
    // either (it would have followed a hole).
    let err = s
        .append("f", vec![chunk("f", "z", true)])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Background(_)), "{err:?}");
    assert!(err.to_string().contains("disk is full (test)"), "{err}");
    let seq = s
        .append(
            "f",
            vec![status("f", TaskState::Failed, "2026-01-01T00:00:01.000Z")],
        )
        .await
        .unwrap();
    assert_eq!(seq, 6, "sequence numbers given out are not reused");
    let seqs: Vec<u64> = s
        .events_after("f", 0, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, vec![1, 2, 6]);
    let snap = s.get("f").await.unwrap().unwrap();
    assert_eq!(snap.task.status.state, TaskState::Failed);
}
