//! Two hosts delivering from one PostgreSQL database (two stores and two push services on one
//! schema, as two `agent-host serve` processes have): each update delivered once in the
//! steady state, in order per config; a host that dies mid-delivery, its claim not released,
//! leaves the work to the other once the claim expires (at least once, in order).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode};
use tokio::sync::Notify;

use super::*;
use crate::protocol::v1::TaskState;
use crate::store::postgres::testing::TestDb;
use crate::store::suite::{chunk, status, task};
use crate::store::PgStore;

/// A webhook receiver on 127.0.0.1: records each request as it arrives (config key from the
/// path, the `X-A2A-Event-Seq` header) and answers 200, except the one request it is told to
/// hang on (the first time it comes), which it never answers.
#[derive(Clone)]
struct Receiver {
    base: String,
    hits: Arc<Mutex<Vec<(String, u64)>>>,
    hang_on: Arc<Mutex<Option<(String, u64)>>>,
    hung: Arc<Notify>,
}

impl Receiver {
    async fn start() -> (Receiver, tokio::task::JoinHandle<()>) {
        let rx = Receiver {
            base: String::new(),
            hits: Arc::default(),
            hang_on: Arc::default(),
            hung: Arc::new(Notify::new()),
        };
        let r = rx.clone();
        let app = axum::Router::new().route(
            "/hook/{key}",
            axum::routing::post(move |Path(key): Path<String>, headers: HeaderMap| {
                let r = r.clone();
                async move {
                    let seq = headers
                        .get("x-a2a-event-seq")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    r.hits.lock().unwrap().push((key.clone(), seq));
                    let hang = {
                        let mut h = r.hang_on.lock().unwrap();
                        if h.as_ref() == Some(&(key, seq)) {
                            h.take();
                            true
                        } else {
                            false
                        }
                    };
                    if hang {
                        r.hung.notify_one();
                        std::future::pending::<()>().await;
                    }
                    StatusCode::OK
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (
            Receiver {
                base: format!("http://{addr}/hook"),
                ..rx
            },
            server,
        )
    }

    /// The sequence numbers received per config key, in arrival order.
    fn by_key(&self) -> HashMap<String, Vec<u64>> {
        let mut m: HashMap<String, Vec<u64>> = HashMap::new();
        for (k, s) in self.hits.lock().unwrap().iter() {
            m.entry(k.clone()).or_default().push(*s);
        }
        m
    }

    fn count(&self) -> usize {
        self.hits.lock().unwrap().len()
    }
}

fn settings(lease: Duration, timeout: Duration) -> PushSettings {
    PushSettings {
        allow_private: true,
        retry_base: Duration::from_millis(50),
        retry_max: Duration::from_millis(200),
        timeout,
        claim_lease: lease,
        ..PushSettings::default()
    }
}

/// One host: its own store (pool, writer) on the test schema and its push service.
async fn host(db: &TestDb, s: PushSettings) -> (Arc<PgStore>, PushService) {
    host_named(db, s, None).await
}

/// One host holding its claims under `id` (as `agent-host serve` does under its host id).
async fn host_named(db: &TestDb, s: PushSettings, id: Option<&str>) -> (Arc<PgStore>, PushService) {
    let store = Arc::new(db.store().await);
    let svc = PushService::start(
        s,
        store.clone(),
        store.clone(),
        Sealer::from_hex(&"5a".repeat(32)).unwrap(),
        id,
    )
    .await
    .unwrap();
    (store, svc)
}

fn config(rx: &Receiver, task_id: &str, id: &str) -> TaskPushNotificationConfig {
    TaskPushNotificationConfig {
        id: Some(id.into()),
        task_id: Some(task_id.into()),
        url: format!("{}/{task_id}-{id}", rx.base),
        ..TaskPushNotificationConfig::default()
    }
}

/// Waits (at most a minute) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "gave up waiting until {what}");
}

/// Every config caught up to its task and unclaimed: both hosts idle.
async fn idle(store: &PgStore) -> bool {
    let c = store.pool().get().await.unwrap();
    let busy: i64 = c
        .query_one(
            "SELECT COUNT(*) FROM push_configs p JOIN tasks t ON t.id = p.task_id COLLATE \"C\"
             WHERE p.delivered_seq < t.last_seq OR p.claimed_by IS NOT NULL",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    busy == 0
}

#[tokio::test]
async fn two_hosts_deliver_each_update_once_in_order() {
    let Some(db) = TestDb::new("push_two_hosts").await else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(120), async {
        let (rx, server) = Receiver::start().await;
        // A lease far longer than any request here: in the steady state no claim expires.
        let s = settings(Duration::from_secs(20), Duration::from_secs(5));
        let (a, b) = (host(&db, s.clone()).await, host(&db, s).await);
        let hosts = [&a, &b];
        let tasks = 12;
        let rounds = 8;
        for t in 0..tasks {
            let id = format!("t{t}");
            // Each task runs on one host (its owner appends and wakes its own pushes) and
            // has one config created through each host, so both hosts hold work for it.
            let owner = hosts[t % 2];
            owner
                .0
                .create(task(&id, "c", "2026-01-01T00:00:00.000Z"))
                .await
                .unwrap();
            for (h, name) in [(&a, "x"), (&b, "y")] {
                h.1.create(None, config(&rx, &id, name), V1, true)
                    .await
                    .unwrap();
            }
        }
        for round in 0..rounds {
            for t in 0..tasks {
                let id = format!("t{t}");
                let owner = hosts[t % 2];
                let ev = if round + 1 == rounds {
                    status(&id, TaskState::Completed, "2026-01-01T00:00:01.000Z")
                } else {
                    chunk(&id, &format!("{round},"), round > 0)
                };
                owner.0.append(&id, vec![ev]).await.unwrap();
                owner.1.on_update(&id);
            }
        }
        let last = 1 + rounds as u64;
        let want = tasks * 2 * last as usize;
        until("every update is delivered", || rx.count() >= want).await;
        // Both hosts idle: nothing more can be sent (a second send would need a claim).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !idle(&a.0).await {
            assert!(tokio::time::Instant::now() < deadline, "hosts never idle");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let got = rx.by_key();
        assert_eq!(got.len(), tasks * 2);
        for (key, seqs) in &got {
            assert_eq!(
                seqs,
                &(1..=last).collect::<Vec<_>>(),
                "{key}: each update once, in order"
            );
        }
        assert_eq!(rx.count(), want, "no update delivered twice");
        a.1.shutdown();
        b.1.shutdown();
        server.abort();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_host_that_dies_mid_delivery_leaves_the_rest_to_the_other() {
    let Some(db) = TestDb::new("push_host_dies").await else {
        return;
    };
    // A's claim expires soon; B, another holder, takes the work over then.
    dies_mid_delivery(&db, Duration::from_millis(1500), None, "b").await;
}

#[tokio::test]
async fn a_host_restarted_under_its_id_takes_its_claims_back_at_once() {
    let Some(db) = TestDb::new("push_host_restarts").await else {
        return;
    };
    // A's claim would last ten minutes (longer than the test may run): only the same
    // holder, A restarted under its host id, can take the work up before that.
    dies_mid_delivery(&db, Duration::from_secs(600), Some("host-a"), "host-a").await;
}

/// Host A delivers a task's updates and dies while sending update 5 (its claim left in
/// place); then host `then` starts and must deliver the rest: at least once, in order.
async fn dies_mid_delivery(db: &TestDb, lease: Duration, a_id: Option<&'static str>, then: &str) {
    tokio::time::timeout(Duration::from_secs(120), async {
        let (rx, server) = Receiver::start().await;
        // Host A lives in a runtime of its own, so it can die at once (every task of it
        // dropped mid-await, as a killed process stops) without a clean shutdown.
        let rt_a = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // A's request timeout is long: when it dies, its request is still waiting.
        let s_a = settings(lease, Duration::from_secs(300));
        let events = 8u64;
        let last = events + 2;
        *rx.hang_on.lock().unwrap() = Some(("t-x".into(), 5));
        let (dbu, dbs) = (db.url.clone(), db.schema.clone());
        let cfg = config(&rx, "t", "x");
        let a_push = rt_a
            .spawn(async move {
                let store = Arc::new(PgStore::open(&dbu, Some(&dbs)).await.unwrap());
                store
                    .create(task("t", "c", "2026-01-01T00:00:00.000Z"))
                    .await
                    .unwrap();
                for i in 0..events {
                    store
                        .append("t", vec![chunk("t", &format!("{i},"), i > 0)])
                        .await
                        .unwrap();
                }
                store
                    .append(
                        "t",
                        vec![status(
                            "t",
                            TaskState::Completed,
                            "2026-01-01T00:00:01.000Z",
                        )],
                    )
                    .await
                    .unwrap();
                let svc = PushService::start(
                    s_a,
                    store.clone(),
                    store.clone(),
                    Sealer::from_hex(&"5a".repeat(32)).unwrap(),
                    a_id,
                )
                .await
                .unwrap();
                svc.create(None, cfg, V1, true).await.unwrap();
                svc
            })
            .await
            .unwrap();
        // A delivers 1..4 and is stuck sending 5; then it dies.
        tokio::time::timeout(Duration::from_secs(60), rx.hung.notified())
            .await
            .expect("A never reached update 5");
        rt_a.shutdown_background();
        drop(a_push);
        {
            let look = db.store().await;
            let c = look.pool().get().await.unwrap();
            let row = c
                .query_one(
                    "SELECT claimed_by, delivered_seq FROM push_configs WHERE task_id = 't'",
                    &[],
                )
                .await
                .unwrap();
            let (holder, delivered): (Option<String>, i64) = (row.get(0), row.get(1));
            assert!(holder.is_some(), "A's claim was left in place");
            assert_eq!(delivered, 4);
        }
        let b = host_named(db, settings(lease, Duration::from_secs(1)), Some(then)).await;
        // B takes the work over (once A's claim has expired, or at once when B is A
        // restarted), from A's recorded cursor.
        until("B delivers the rest", || {
            rx.by_key()
                .get("t-x")
                .is_some_and(|s| s.last() == Some(&last))
        })
        .await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !idle(&b.0).await {
            assert!(tokio::time::Instant::now() < deadline, "B never idle");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seqs = rx.by_key().remove("t-x").unwrap();
        // Update 5 twice (A's request, never answered, and B's), everything else once, in order.
        let mut want: Vec<u64> = (1..=5).collect();
        want.extend(5..=last);
        assert_eq!(seqs, want);
        b.1.shutdown();
        server.abort();
    })
    .await
    .expect("test timed out");
}

#[tokio::test]
async fn a_config_created_through_one_host_follows_events_another_host_stores() {
    let Some(db) = TestDb::new("push_cross_wake").await else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(120), async {
        let (rx, server) = Receiver::start().await;
        // A long lease: the queue is scanned every 10 s; the wake-ups are what is timed.
        let s = settings(Duration::from_secs(60), Duration::from_secs(5));
        let a = host_named(&db, s.clone(), Some("a")).await;
        let b = host_named(&db, s, Some("b")).await;
        let id = format!("x{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        a.0.create(task(&id, "c", "2026-01-01T00:00:00.000Z"))
            .await
            .unwrap();
        // The config is created through B (for updates from now on); A runs the task.
        b.1.create(None, config(&rx, &id, "y"), V1, false)
            .await
            .unwrap();
        let started = std::time::Instant::now();
        let events = 6u64;
        for i in 0..events {
            a.0.append(&id, vec![chunk(&id, &format!("{i},"), i > 0)])
                .await
                .unwrap();
            a.1.on_update(&id);
        }
        let key = format!("{id}-y");
        until("every update is delivered", || {
            rx.by_key().get(&key).is_some_and(|s| s.len() as u64 >= events)
        })
        .await;
        // A figure (one machine, a loaded one perhaps), not an assertion.
        eprintln!(
            "config created through B, events stored by A: all {events} delivered {} ms after the first",
            started.elapsed().as_millis()
        );
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !idle(&a.0).await {
            assert!(tokio::time::Instant::now() < deadline, "hosts never idle");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            rx.by_key().remove(&key).unwrap(),
            (2..=1 + events).collect::<Vec<_>>(),
            "each update once, in order"
        );
        a.1.shutdown();
        b.1.shutdown();
        server.abort();
    })
    .await
    .expect("test timed out");
}
