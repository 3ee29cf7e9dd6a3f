//! The cluster part of the PostgreSQL store: leases, owners, claims, wake-ups.

use std::time::Duration;

use crate::protocol::v1::TaskState;
use crate::store::postgres::testing::TestDb;
use crate::store::suite::{status, task};
use crate::store::{ClusterStore, HostRecord, StoreError, TaskStore};

fn host(id: &str, pid: u32) -> HostRecord {
    HostRecord {
        id: id.into(),
        address: format!("http://{id}"),
        machine: "m1".into(),
        pid,
    }
}

const LONG: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_live_host_id_is_refused_and_a_recognised_one_replaced() {
    let Some(db) = TestDb::new("host_id").await else {
        return;
    };
    let (a, b) = (db.store().await, db.store().await);
    a.register(&host("a", 1), LONG, false).await.unwrap();
    let err = b.register(&host("a", 2), LONG, false).await.unwrap_err();
    match &err {
        StoreError::HostIdInUse(h) => assert_eq!((h.record.pid, h.live), (1, true)),
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("pid 1"), "{err}");
    // A previous run the caller recognised is replaced.
    b.register(&host("a", 2), LONG, true).await.unwrap();
    let hosts = a.hosts().await.unwrap();
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].record.pid, 2);
    assert!(a.heartbeat("a", LONG).await.unwrap());
    assert!(!a.heartbeat("gone", LONG).await.unwrap());
}

#[tokio::test]
async fn new_tasks_and_contexts_belong_to_the_registered_host() {
    let Some(db) = TestDb::new("owners").await else {
        return;
    };
    let s = db.store().await;
    // Written before any host registered (an older agent-host): no host.
    s.create(task("old", "c0", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    s.register(&host("a", 1), LONG, false).await.unwrap();
    s.create(task("t1", "c1", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    s.put_context(&crate::store::ContextRecord {
        context_id: "c1".into(),
        session_id: Some("s".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(s.task_host("t1").await.unwrap().unwrap().record.id, "a");
    assert!(s.task_host("old").await.unwrap().is_none());
    assert_eq!(s.context_host("c1").await.unwrap().as_deref(), Some("a"));
    s.set_context_host("c1", "b").await.unwrap();
    assert_eq!(s.context_host("c1").await.unwrap().as_deref(), Some("b"));
    // A restart of `a` claims its own and the host-less task; `b` gets none of them.
    let other = db.store().await;
    other.register(&host("b", 2), LONG, false).await.unwrap();
    other
        .create(task("t2", "c2", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    let mut own: Vec<String> = s
        .claim_own("a")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.task.id)
        .collect();
    own.sort();
    assert_eq!(own, ["old", "t1"]);
    let theirs: Vec<String> = other
        .claim_own("b")
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.task.id)
        .collect();
    assert_eq!(theirs, ["t2"]);
}

#[tokio::test]
async fn an_expired_host_is_claimed_once_with_its_unfinished_tasks() {
    let Some(db) = TestDb::new("claim").await else {
        return;
    };
    let (dead, b, c) = (db.store().await, db.store().await, db.store().await);
    dead.register(&host("dead", 1), Duration::from_millis(1), false)
        .await
        .unwrap();
    dead.create(task("run", "c1", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    dead.create(task("done", "c2", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    dead.append(
        "done",
        vec![status(
            "done",
            TaskState::Completed,
            "2026-01-01T00:00:01.000Z",
        )],
    )
    .await
    .unwrap();
    b.register(&host("b", 2), LONG, false).await.unwrap();
    c.register(&host("c", 3), LONG, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    // Two hosts claim at once: one wins.
    let (x, y) = tokio::join!(b.claim_expired("b"), c.claim_expired("c"));
    let claims: Vec<_> = [x.unwrap(), y.unwrap()].into_iter().flatten().collect();
    assert_eq!(claims.len(), 1, "{claims:?}");
    let t = &claims[0];
    assert_eq!(t.host.id, "dead");
    let ids: Vec<&str> = t.tasks.iter().map(|s| s.task.id.as_str()).collect();
    assert_eq!(ids, ["run"]);
    let winner = b.task_host("run").await.unwrap().unwrap().record.id;
    assert!(winner == "b" || winner == "c", "{winner}");
    assert_eq!(b.context_host("c1").await.unwrap(), None);
    // Nothing left to claim; the dead host's heartbeat finds its row gone.
    assert!(b.claim_expired("b").await.unwrap().is_none());
    assert!(!dead.heartbeat("dead", LONG).await.unwrap());
    // Nor does it write to the task it lost; its owner does.
    let late = dead
        .append(
            "run",
            vec![status(
                "run",
                TaskState::Working,
                "2026-01-01T00:00:02.000Z",
            )],
        )
        .await;
    assert!(matches!(late, Err(StoreError::NotOwner { .. })), "{late:?}");
    assert_eq!(dead.get("run").await.unwrap().unwrap().last_seq, 1);
    // The live hosts are never claimed.
    assert_eq!(b.hosts().await.unwrap().len(), 2);
}

fn context(id: &str, session: &str) -> crate::store::ContextRecord {
    crate::store::ContextRecord {
        context_id: id.into(),
        session_id: Some(session.into()),
        ..Default::default()
    }
}

/// A host whose contexts were taken over while it stalled does not write them back: the
/// taker's session and ownership stay. A context whose owner's lease expired (not claimed
/// yet) is written, and becomes the writer's.
#[tokio::test]
async fn a_context_another_live_host_took_is_not_written_back() {
    let Some(db) = TestDb::new("context_fence").await else {
        return;
    };
    let (a, b) = (db.store().await, db.store().await);
    a.register(&host("a", 1), Duration::from_millis(1), false)
        .await
        .unwrap();
    a.put_context(&context("c1", "from-a")).await.unwrap();
    b.register(&host("b", 2), LONG, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    // `a`'s lease expired: `b` may write its context, which becomes `b`'s.
    b.put_context(&context("c1", "from-b")).await.unwrap();
    assert_eq!(b.context_host("c1").await.unwrap().as_deref(), Some("b"));
    // `a` goes on (registered again) and would store its turn's session: refused.
    a.register(&host("a", 1), LONG, true).await.unwrap();
    let late = a.put_context(&context("c1", "late-from-a")).await;
    assert!(
        matches!(&late, Err(e @ StoreError::ContextNotOwned { host, .. }) if host == "b" && e.is_not_owner()),
        "{late:?}"
    );
    let stored = a.context("c1").await.unwrap().unwrap();
    assert_eq!(stored.session_id.as_deref(), Some("from-b"));
    assert_eq!(a.context_host("c1").await.unwrap().as_deref(), Some("b"));
    // Its own contexts it writes as before.
    a.put_context(&context("c2", "new")).await.unwrap();
    a.put_context(&context("c2", "newer")).await.unwrap();
    assert_eq!(a.context_host("c2").await.unwrap().as_deref(), Some("a"));
}

#[tokio::test]
async fn another_store_wakes_a_follower_of_its_task() {
    let Some(db) = TestDb::new("wake").await else {
        return;
    };
    let (a, b) = (db.store().await, db.store().await);
    a.register(&host("a", 1), LONG, false).await.unwrap();
    b.register(&host("b", 2), LONG, false).await.unwrap();
    a.create(task("t", "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    let mut rx = b.watch_task("t");
    // The listener may connect after the first append: appends until one wakes it.
    let woke = tokio::time::timeout(Duration::from_secs(20), async {
        let mut n = 1;
        loop {
            n += 1;
            a.append(
                "t",
                vec![status("t", TaskState::Working, "2026-01-01T00:00:01.000Z")],
            )
            .await
            .unwrap();
            // The NOTIFY carries the last sequence (a reconnect's wake-up does not).
            while tokio::time::timeout(Duration::from_millis(500), rx.changed())
                .await
                .is_ok()
            {
                if *rx.borrow_and_update() == n {
                    return n;
                }
            }
        }
    })
    .await
    .expect("a wake-up");
    assert!(woke >= 2);
}

#[tokio::test]
async fn a_takeover_frees_the_dead_hosts_push_claims_and_says_so() {
    use crate::store::{Claim, PushRecord, PushStore, PushWake};
    let Some(db) = TestDb::new("takeover_push").await else {
        return;
    };
    let (dead, b) = (db.store().await, db.store().await);
    let t = format!("p{}", uuid::Uuid::new_v4().simple());
    let t = t.as_str();
    dead.register(&host("dead", 1), Duration::from_millis(1), false)
        .await
        .unwrap();
    dead.create(task(t, "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    dead.put_push(&PushRecord {
        task_id: t.into(),
        id: "cfg".into(),
        url: "http://127.0.0.1:9/hook".into(),
        version: "1.0".into(),
        ..PushRecord::default()
    })
    .await
    .unwrap();
    // The dead host's claim, held under its host id, would last ten minutes.
    let claim = |holder: &str| Claim {
        holder: holder.into(),
        lease: Duration::from_secs(600),
    };
    let held = dead.claim_push(t, "cfg", &claim("dead")).await.unwrap();
    assert!(held.is_some());
    b.register(&host("b", 2), LONG, false).await.unwrap();
    let mut rx = b.push_wakes().expect("wake-ups");
    assert_eq!(config_wake(&mut rx, t).await, PushWake::Missed, "listening");
    assert!(b.claim_push(t, "cfg", &claim("b")).await.unwrap().is_none());
    tokio::time::sleep(Duration::from_millis(20)).await;
    let took = b.claim_expired("b").await.unwrap().expect("the dead host");
    assert_eq!(took.host.id, "dead");
    // The claim is free at once, and the hosts watching the config are told.
    assert_eq!(config_wake(&mut rx, t).await, PushWake::Config(t.into()));
    assert!(b.claim_push(t, "cfg", &claim("b")).await.unwrap().is_some());
}

/// The next wake-up about a config of `t`, or that some were missed, within 20 s (other
/// tests' wake-ups, on the same database, are passed over).
async fn config_wake(
    rx: &mut tokio::sync::broadcast::Receiver<crate::store::PushWake>,
    t: &str,
) -> crate::store::PushWake {
    use crate::store::PushWake;
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match rx.recv().await.unwrap() {
                PushWake::Config(x) if x == t => return PushWake::Config(x),
                PushWake::Missed => return PushWake::Missed,
                _ => {}
            }
        }
    })
    .await
    .expect("a wake-up within 20 s")
}

#[tokio::test]
async fn a_host_that_lost_its_lease_reads_its_former_tasks_from_the_database() {
    let Some(db) = TestDb::new("lost_window").await else {
        return;
    };
    let (dead, b) = (db.store().await, db.store().await);
    dead.register(&host("dead", 1), Duration::from_millis(1), false)
        .await
        .unwrap();
    dead.create(task("run", "c1", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    let working = status("run", TaskState::Working, "2026-01-01T00:00:01.000Z");
    assert_eq!(dead.append("run", vec![working]).await.unwrap(), 2);
    b.register(&host("b", 2), LONG, false).await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(b.claim_expired("b").await.unwrap().unwrap().tasks.len(), 1);
    // The taker ends the task.
    let failed = status("run", TaskState::Failed, "2026-01-01T00:00:02.000Z");
    assert_eq!(b.append("run", vec![failed]).await.unwrap(), 3);
    // Once the lost lease is noticed, the former owner's reads show the taker's end (not
    // only the events it wrote itself and still remembers).
    assert!(!dead.heartbeat("dead", LONG).await.unwrap());
    let evs = dead.events_after("run", 0, 10).await.unwrap();
    assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert!(evs[2].event.ends_stream());
}

/// The check before a task's program starts: its own task while its lease is live; not an
/// expired host's (a claim may come any moment), nor another host's. A check does not wait
/// for an update of the host's row (before, each check updated it, and waited for the one
/// before it, or a heartbeat, to commit); a claim under way makes the check wait, and it
/// then finds the task moved.
#[tokio::test]
async fn a_host_holds_its_own_task_while_its_lease_is_live_and_never_across_a_claim() {
    let Some(db) = TestDb::new("hold").await else {
        return;
    };
    let (a, b) = (db.store().await, db.store().await);
    a.register(&host("a", 1), LONG, false).await.unwrap();
    b.register(&host("b", 2), LONG, false).await.unwrap();
    a.create(task("mine", "c1", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    assert!(a.hold_task("mine", "a").await.unwrap());
    assert!(
        !b.hold_task("mine", "b").await.unwrap(),
        "another host's task"
    );
    // Another session updates a's row and has not committed yet (a heartbeat whose commit
    // is slow; before, every other check too): the check does not wait for it.
    let other = a.client().await.unwrap();
    other
        .batch_execute("BEGIN; UPDATE hosts SET heartbeat_at = now() WHERE id = 'a'")
        .await
        .unwrap();
    let quick = tokio::time::timeout(Duration::from_secs(5), a.hold_task("mine", "a")).await;
    assert!(quick.expect("a check waited for another").unwrap());
    other.batch_execute("ROLLBACK").await.unwrap();
    // A claim under way (the row locked for update): the check waits, then finds the row
    // gone and the task moved.
    other
        .batch_execute(
            "BEGIN; UPDATE hosts SET lease_until = now() - interval '1 s' WHERE id = 'a';
             SELECT id FROM hosts WHERE id = 'a' FOR UPDATE",
        )
        .await
        .unwrap();
    let check = tokio::spawn(async move {
        let held = a.hold_task("mine", "a").await;
        (a, held)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!check.is_finished(), "the check did not wait for the claim");
    other
        .batch_execute(
            "DELETE FROM hosts WHERE id = 'a'; UPDATE tasks SET host = 'b' WHERE id = 'mine'; COMMIT",
        )
        .await
        .unwrap();
    let (a, held) = check.await.unwrap();
    assert!(!held.unwrap(), "held across a claim");
    assert!(b.hold_task("mine", "b").await.unwrap());
    // An expired lease, not claimed yet: not held.
    a.register(&host("a", 1), LONG, true).await.unwrap();
    a.create(task("late", "c2", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    assert!(a.hold_task("late", "a").await.unwrap());
    other
        .batch_execute("UPDATE hosts SET lease_until = now() - interval '1 s' WHERE id = 'a'")
        .await
        .unwrap();
    assert!(!a.hold_task("late", "a").await.unwrap(), "an expired lease");
}
