//! Claims on push deliveries, between stores (hosts) on one database.

use std::time::Duration;

use super::*;
use crate::store::postgres::testing::TestDb;
use crate::store::suite::{chunk, task};
use crate::store::TaskStore;

fn claim(holder: &str, lease_ms: u64) -> Claim {
    Claim {
        holder: holder.into(),
        lease: Duration::from_millis(lease_ms),
    }
}

fn config(task_id: &str, id: &str) -> PushRecord {
    PushRecord {
        task_id: task_id.into(),
        id: id.into(),
        url: "http://127.0.0.1:9/hook".into(),
        version: "1.0".into(),
        ..PushRecord::default()
    }
}

/// A task with `events` events after its first, and a config that has delivered none.
async fn pending(s: &PgStore, id: &str, events: usize) {
    s.create(task(id, "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    for i in 0..events {
        s.append(id, vec![chunk(id, &format!("{i}"), i > 0)])
            .await
            .unwrap();
    }
    s.put_push(&config(id, "cfg")).await.unwrap();
    // The streamed appends are committed (the tests write to the rows beside the store).
    s.flush_writes().await.unwrap();
}

#[tokio::test]
async fn one_holder_at_a_time_and_a_lost_claim_records_nothing() {
    let Some(db) = TestDb::new("push_claim").await else {
        return;
    };
    let (a, b) = tokio::join!(db.store(), db.store());
    pending(&a, "t", 3).await;
    let (ca, cb) = (claim("a", 60_000), claim("b", 60_000));
    let got = a.claim_push("t", "cfg", &ca).await.unwrap().unwrap();
    assert_eq!(got.delivered_seq, 0);
    // Held by a: b is refused; a claims again (renews).
    assert!(b.claim_push("t", "cfg", &cb).await.unwrap().is_none());
    assert!(a.claim_push("t", "cfg", &ca).await.unwrap().is_some());
    let progressed = PushRecord {
        delivered_seq: 2,
        ..got.clone()
    };
    assert!(a.save_claimed_push(&progressed, &ca).await.unwrap());
    // b's progress is not recorded while a holds the claim.
    let wrong = PushRecord {
        delivered_seq: 4,
        ..got.clone()
    };
    assert!(!b.save_claimed_push(&wrong, &cb).await.unwrap());
    assert_eq!(
        a.get_push("t", "cfg").await.unwrap().unwrap().delivered_seq,
        2
    );
    // b releasing what it does not hold changes nothing; a releasing hands it over, with a's
    // cursor.
    b.release_push("t", "cfg", &cb).await.unwrap();
    assert!(b.claim_push("t", "cfg", &cb).await.unwrap().is_none());
    a.release_push("t", "cfg", &ca).await.unwrap();
    let taken = b.claim_push("t", "cfg", &cb).await.unwrap().unwrap();
    assert_eq!(taken.delivered_seq, 2);
    // a now records nothing.
    assert!(!a.save_claimed_push(&progressed, &ca).await.unwrap());
    // Replacing the config (same task and id) drops the claim.
    a.put_push(&config("t", "cfg")).await.unwrap();
    assert!(!b.save_claimed_push(&taken, &cb).await.unwrap());
    assert!(a.claim_push("t", "cfg", &ca).await.unwrap().is_some());
    // A deleted config cannot be claimed.
    a.delete_push("t", "cfg").await.unwrap();
    assert!(a.claim_push("t", "cfg", &ca).await.unwrap().is_none());
}

#[tokio::test]
async fn an_expired_claim_passes_to_another_holder_and_fences_the_first() {
    let Some(db) = TestDb::new("push_expiry").await else {
        return;
    };
    let (a, b) = tokio::join!(db.store(), db.store());
    pending(&a, "t", 2).await;
    // a claims with a short lease and then does nothing (it died).
    let ca = claim("a", 300);
    let got = a.claim_push("t", "cfg", &ca).await.unwrap().unwrap();
    let cb = claim("b", 60_000);
    // b's scan and claim are refused until a's lease ends, then b takes it.
    let taken = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let due = b.claim_due_push(&cb, u64::MAX, 10).await.unwrap();
            if let Some(r) = due.into_iter().next() {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("b never took over the expired claim");
    assert_eq!((taken.task_id.as_str(), taken.delivered_seq), ("t", 0));
    // a, back, cannot record progress any more nor claim it.
    let late = PushRecord {
        delivered_seq: 3,
        ..got
    };
    assert!(!a.save_claimed_push(&late, &ca).await.unwrap());
    assert!(a.claim_push("t", "cfg", &ca).await.unwrap().is_none());
    assert!(b.save_claimed_push(&late, &cb).await.unwrap());
}

#[tokio::test]
async fn scans_take_only_due_unclaimed_work_and_never_the_same_config() {
    let Some(db) = TestDb::new("push_scan").await else {
        return;
    };
    let (a, b) = tokio::join!(db.store(), db.store());
    for i in 0..40 {
        pending(&a, &format!("t{i:02}"), 2).await;
    }
    // Not due: caught up, waiting for a retry, claimed by a live holder.
    pending(&a, "caught-up", 2).await;
    let mut done = config("caught-up", "cfg");
    done.delivered_seq = 3;
    a.put_push(&done).await.unwrap();
    pending(&a, "retry", 2).await;
    let mut later = config("retry", "cfg");
    later.next_at_ms = 5_000;
    a.put_push(&later).await.unwrap();
    pending(&a, "held", 2).await;
    let other = claim("other", 60_000);
    assert!(a.claim_push("held", "cfg", &other).await.unwrap().is_some());

    // Two hosts scanning at once, in batches, take disjoint sets that cover the due work.
    let (ca, cb) = (claim("a", 60_000), claim("b", 60_000));
    let mut taken_a = Vec::new();
    let mut taken_b = Vec::new();
    loop {
        let (ra, rb) = tokio::join!(
            a.claim_due_push(&ca, 1_000, 7),
            b.claim_due_push(&cb, 1_000, 7)
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        if ra.is_empty() && rb.is_empty() {
            break;
        }
        taken_a.extend(ra.into_iter().map(|r| r.task_id));
        taken_b.extend(rb.into_iter().map(|r| r.task_id));
    }
    let mut all: Vec<String> = taken_a.iter().chain(&taken_b).cloned().collect();
    all.sort();
    let want: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
    assert_eq!(all, want, "each due config taken once, nothing else");
    // The retry is due once its time has come.
    let due = a.claim_due_push(&ca, 5_000, 10).await.unwrap();
    assert_eq!(
        due.iter().map(|r| r.task_id.as_str()).collect::<Vec<_>>(),
        ["retry"]
    );
}

#[tokio::test]
async fn a_bad_row_is_an_error_not_a_panic() {
    let Some(db) = TestDb::new("push_bad_row").await else {
        return;
    };
    let s = db.store().await;
    pending(&s, "t", 1).await;
    let c = s.client().await.unwrap();
    c.batch_execute(
        "UPDATE push_configs SET attempts = -1;
         UPDATE tasks SET last_seq = -5 WHERE id = 't';",
    )
    .await
    .unwrap();
    let err = s.get_push("t", "cfg").await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::BadRow {
                what: "push_configs",
                column: 8,
                ..
            }
        ),
        "{err}"
    );
    let err = s.get("t").await.unwrap_err();
    assert!(
        matches!(err, StoreError::BadRow { what: "tasks", .. }),
        "{err}"
    );
    // A NULL where a value belongs.
    c.batch_execute("ALTER TABLE push_configs ALTER COLUMN version DROP NOT NULL; UPDATE push_configs SET attempts = 0, version = NULL")
        .await
        .unwrap();
    let err = s.list_push("t").await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::BadRow {
                what: "push_configs",
                column: 6,
                ..
            }
        ),
        "{err}"
    );
}

/// The next wake-up that names one of `ids` (or says some were missed), within 20 s. Tests
/// running at once share the database and so its notification channels: their wake-ups are
/// passed over.
async fn wake_of(rx: &mut tokio::sync::broadcast::Receiver<PushWake>, ids: &[&str]) -> PushWake {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match rx.recv().await.unwrap() {
                PushWake::Events(t) | PushWake::Config(t) if !ids.contains(&t.as_str()) => {}
                w => return w,
            }
        }
    })
    .await
    .expect("a wake-up within 20 s")
}

#[tokio::test]
async fn wakes_tell_of_configs_and_events_another_host_stored() {
    let Some(db) = TestDb::new("push_wakes").await else {
        return;
    };
    let (a, b) = tokio::join!(db.store(), db.store());
    let t = format!("w{}", uuid::Uuid::new_v4().simple());
    let t = t.as_str();
    let mut rx = b.push_wakes().expect("a store with a LISTEN connection");
    // The first wake-up says the connection listens: whatever came before, look again.
    assert_eq!(wake_of(&mut rx, &[t]).await, PushWake::Missed);
    a.create(task(t, "c", "2026-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    assert_eq!(wake_of(&mut rx, &[t]).await, PushWake::Events(t.into()));
    a.put_push(&config(t, "cfg")).await.unwrap();
    assert_eq!(wake_of(&mut rx, &[t]).await, PushWake::Config(t.into()));
    a.append(t, vec![chunk(t, "x", false)]).await.unwrap();
    assert_eq!(wake_of(&mut rx, &[t]).await, PushWake::Events(t.into()));
    // A store without the connection settings has none.
    let pooled = PgStore::with_pool(a.pool().clone()).await.unwrap();
    assert!(pooled.push_wakes().is_none());
}

#[tokio::test]
async fn a_holder_frees_all_its_claims_at_once_and_no_other() {
    let Some(db) = TestDb::new("push_own_claims").await else {
        return;
    };
    let (before, after) = tokio::join!(db.store(), db.store());
    pending(&before, "t", 3).await;
    pending(&before, "u", 3).await;
    // A host's run claims a config and dies with the claim live for a long while.
    let ch = claim("host-a", 600_000);
    assert!(before.claim_push("t", "cfg", &ch).await.unwrap().is_some());
    let other = claim("b", 600_000);
    assert!(before
        .claim_push("u", "cfg", &other)
        .await
        .unwrap()
        .is_some());
    drop(before);
    let scan = after.claim_due_push(&ch, u64::MAX, 10).await.unwrap();
    assert!(scan.is_empty(), "{scan:?}");
    // The same host restarted frees what its previous run held, and only that.
    assert_eq!(after.release_all_push(&ch).await.unwrap(), 1);
    let again = after.claim_due_push(&ch, u64::MAX, 10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].task_id.as_str(), again[0].id.as_str()),
        ("t", "cfg")
    );
}
