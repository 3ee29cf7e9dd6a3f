//! PostgreSQL-only tests: migrations, several stores on one database. The suite every store
//! passes is in [`crate::store::suite`].

use super::testing::TestDb;
use super::*;
use crate::protocol::v1::TaskState;
use crate::store::suite::{answer, chunk, status, task};
use std::time::Duration;

mod cluster;

#[tokio::test]
async fn an_older_schema_is_migrated_and_its_tasks_stay_readable() {
    let Some(db) = TestDb::new("older_schema").await else {
        return;
    };
    let p = pool(&db.url, Some(&db.schema)).await.unwrap();
    {
        let mut c = p.get().await.unwrap();
        assert_eq!(migrate_to(&mut c, 1).await.unwrap(), 0);
        // A task written by a version-1 host, then left unfinished.
        c.batch_execute(
            r#"INSERT INTO tasks VALUES ('old', 'c', 'TASK_STATE_WORKING',
                 '2026-01-01T00:00:01.000Z', '2026-01-01T00:00:00.000Z', 2, NULL);
               INSERT INTO snapshots VALUES ('old', 1,
                 '{"id":"old","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"}}');
               INSERT INTO events VALUES ('old', 1, '{"task":{"id":"old","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"}}}');"#,
        )
        .await
        .unwrap();
    }
    let s = PgStore::with_pool(p.clone()).await.unwrap();
    let versions: Vec<i32> = p
        .get()
        .await
        .unwrap()
        .query(
            "SELECT version FROM agent_host_schema ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION as i32).collect::<Vec<_>>());
    let old = s.get("old").await.unwrap().unwrap();
    assert_eq!(old.last_seq, 2);
    assert_eq!(s.unfinished().await.unwrap().len(), 1);
    // Appending continues its sequence.
    let seq = s
        .append(
            "old",
            vec![status("old", TaskState::Failed, "2026-01-01T00:00:02.000Z")],
        )
        .await
        .unwrap();
    assert_eq!(seq, 3);
    assert!(s.unfinished().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_newer_schema_is_refused() {
    let Some(db) = TestDb::new("newer_schema").await else {
        return;
    };
    let p = pool(&db.url, Some(&db.schema)).await.unwrap();
    {
        let mut c = p.get().await.unwrap();
        migrate(&mut c).await.unwrap();
        c.execute("INSERT INTO agent_host_schema (version) VALUES (99)", &[])
            .await
            .unwrap();
    }
    let err = PgStore::with_pool(p).await.err().unwrap().to_string();
    assert!(err.contains("newer"), "{err}");
}

#[tokio::test]
async fn hosts_starting_together_migrate_once_and_share_the_rows() {
    let Some(db) = TestDb::new("shared").await else {
        return;
    };
    let (a, b) = tokio::join!(db.store(), db.store());
    a.create(task("t", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    a.append("t", vec![chunk("t", "from a", false)])
        .await
        .unwrap();
    // Streamed progress is committed in the background: another host sees it once it is.
    a.flush_writes().await.unwrap();
    let seen = b.get("t").await.unwrap().unwrap();
    assert_eq!(answer(&seen.task), "from a");
    assert_eq!(b.events_after("t", 0, 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn appends_queued_during_a_round_trip_share_one_commit() {
    let Some(db) = TestDb::new("batched").await else {
        return;
    };
    let s = Arc::new(db.store().await);
    s.create(task("t", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    // Appends that do not wait for each other: queued together, committed together, in order.
    let n = 200;
    let mut pending = Vec::new();
    for i in 0..n {
        let s = s.clone();
        let ev = chunk("t", &format!("{i},"), i > 0);
        pending.push(tokio::spawn(async move { s.append("t", vec![ev]).await }));
        tokio::task::yield_now().await;
    }
    for p in pending {
        p.await.unwrap().unwrap();
    }
    let commits = writing_transactions(&s, "t").await;
    let seqs: Vec<u64> = s
        .events_after("t", 0, 1000)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=n as u64 + 1).collect::<Vec<_>>());
    assert!(
        commits < n as i64,
        "{n} appends took {commits} commits: not batched"
    );
}

/// How many transactions wrote the events of task `id` after its first: the distinct
/// `xmin` (inserting transaction) of its event rows. Counted on the rows themselves, so other
/// tests committing in the same database at the same time do not count.
async fn writing_transactions(s: &PgStore, id: &str) -> i64 {
    let c = s.client().await.unwrap();
    c.query_one(
        "SELECT COUNT(DISTINCT xmin::text) FROM events WHERE task_id = $1 AND seq > 1",
        &[&id],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn a_task_behind_a_slow_commit_does_not_hold_back_another_tasks_commit() {
    let Some(db) = TestDb::new("overlap").await else {
        return;
    };
    let s = Arc::new(db.store().await);
    for id in ["slow", "quick"] {
        s.create(task(id, "c", "2026-01-01T00:00:00.000Z"))
            .await
            .unwrap();
    }
    // Another session holds the slow task's index row: its next commit waits for it.
    let locker = s.client().await.unwrap();
    let locker_pid: i32 = locker
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    locker
        .batch_execute("BEGIN; SELECT * FROM tasks WHERE id = 'slow' FOR UPDATE")
        .await
        .unwrap();
    let ended = |id: &str| vec![status(id, TaskState::Completed, "2026-01-01T00:00:01.000Z")];
    let slow = {
        let (s, events) = (s.clone(), ended("slow"));
        tokio::spawn(async move { s.append("slow", events).await })
    };
    let watcher = s.client().await.unwrap();
    let blocked = async {
        loop {
            let n: i64 = watcher
                .query_one(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                    &[&locker_pid],
                )
                .await
                .unwrap()
                .get(0);
            if n > 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), blocked)
        .await
        .expect("the slow task's commit reached the locked row");
    drop(watcher);
    // The quick task's commit starts beside the waiting one and ends first.
    let quick =
        tokio::time::timeout(Duration::from_secs(20), s.append("quick", ended("quick"))).await;
    let slow_done_first = slow.is_finished();
    locker.batch_execute("ROLLBACK").await.unwrap();
    quick
        .expect("the quick task's commit waited for the slow one's")
        .unwrap();
    assert!(!slow_done_first, "the slow task's commit did not wait");
    slow.await.unwrap().unwrap();
}

#[tokio::test]
async fn reads_of_tasks_another_host_writes_go_together_and_each_gets_its_own_events() {
    let Some(db) = TestDb::new("gather").await else {
        return;
    };
    let a = db.store().await;
    let n: u64 = 50;
    for i in 0..n {
        let id = format!("t{i}");
        a.create(task(&id, "c", "2026-01-01T00:00:00.000Z"))
            .await
            .unwrap();
        // Task i holds i + 1 events after the first.
        let evs = (0..=i)
            .map(|k| chunk(&id, &format!("{k},"), k > 0))
            .collect();
        a.append(&id, evs).await.unwrap();
    }
    a.flush().await.unwrap();
    // Another host's store: none of the tasks is live in it, every read goes to the database.
    let b = Arc::new(db.store().await);
    let before = b.gather.sent();
    let reads: Vec<_> = (0..n)
        .map(|i| {
            let b = b.clone();
            // Each from its own position, some cut by their limit.
            tokio::spawn(async move { b.events_after(&format!("t{i}"), i / 2, 5).await })
        })
        .collect();
    let missing = {
        let b = b.clone();
        tokio::spawn(async move { b.events_after("nobody", 0, 5).await })
    };
    for (i, r) in (0..n).zip(reads) {
        let seqs: Vec<u64> = r.await.unwrap().unwrap().iter().map(|e| e.seq).collect();
        let last = i + 2;
        let want: Vec<u64> = (i / 2 + 1..=last).take(5).collect();
        assert_eq!(seqs, want, "task t{i}");
    }
    assert!(matches!(
        missing.await.unwrap(),
        Err(StoreError::NotFound(id)) if id == "nobody"
    ));
    let statements = b.gather.sent() - before;
    assert!(
        statements <= 3,
        "{} reads asked together took {statements} statements",
        n + 1
    );
}
