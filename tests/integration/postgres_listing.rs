//! 10,000 tasks across two hosts on one PostgreSQL database: `ListTasks` on either host pages
//! through each task exactly once, with the same pages (and page tokens that work on both),
//! unfiltered and filtered by context and by state.
//!
//! The tasks are written through the store (two `PgStore`s, as the two hosts' stores would
//! write them: the fast path, so that the test stays short), plus one task run by each server.

use std::collections::{BTreeSet, HashMap};

use agent_host::protocol::v1::{Task, TaskState, TaskStatus};
use agent_host::store::{PgStore, TaskStore};
use futures::StreamExt;
use serde_json::{json, Value};

use crate::common::*;
use crate::postgres::Schema;

const TASKS: usize = 10_000;
const CONTEXTS: usize = 10;
const STATES: [TaskState; 4] = [
    TaskState::Completed,
    TaskState::Failed,
    TaskState::InputRequired,
    TaskState::Canceled,
];

/// Task `i`: its context, its state and a status time shared with other tasks (ties are
/// ordered by id, which the page tokens must carry).
fn bulk_task(i: usize) -> Task {
    Task {
        id: format!("bulk-{i:05}"),
        context_id: format!("ctx-{}", i % CONTEXTS),
        status: TaskStatus {
            state: STATES[i % STATES.len()],
            message: None,
            timestamp: Some(format!(
                "2026-02-01T00:{:02}:{:02}.000Z",
                (i / 60) % 60,
                i % 60
            )),
        },
        ..Task::default()
    }
}

/// Every page of a listing, each fetched from both hosts (which must agree), the next page
/// asked of the host that did not give the token. Returns the ids in listing order.
async fn every_page(a: &TestServer, b: &TestServer, filter: Value) -> Vec<String> {
    let mut ids = Vec::new();
    let mut token = String::new();
    let mut total = None;
    for page in 0.. {
        let mut params = filter.clone();
        params["pageSize"] = json!(100);
        if !token.is_empty() {
            params["pageToken"] = json!(token);
        }
        let (first, second) = if page % 2 == 0 { (a, b) } else { (b, a) };
        let (r1, r2) = tokio::join!(
            first.rpc("ListTasks", params.clone()),
            second.rpc("ListTasks", params)
        );
        assert_eq!(
            r1["result"], r2["result"],
            "page {page} differs between hosts"
        );
        let r = &r1["result"];
        assert!(r.is_object(), "ListTasks failed: {r1}");
        let size = r["totalSize"].as_u64().unwrap();
        assert_eq!(*total.get_or_insert(size), size, "totalSize changed");
        ids.extend(
            r["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_str().unwrap().to_string()),
        );
        token = r["nextPageToken"].as_str().unwrap_or_default().to_string();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(
        ids.len() as u64,
        total.unwrap_or(0),
        "listed as many as totalSize"
    );
    ids
}

/// Each id once.
fn once(ids: &[String]) -> BTreeSet<String> {
    let set: BTreeSet<String> = ids.iter().cloned().collect();
    assert_eq!(set.len(), ids.len(), "a task listed twice");
    set
}

#[tokio::test]
async fn ten_thousand_tasks_list_once_and_alike_on_either_host() {
    limit(async {
        let Some(db) = Schema::new("ten_k").await else {
            return;
        };
        let opts = || Options {
            adapter: "demo",
            postgres: Some(db.url.clone()),
            ..Options::default()
        };
        let a = TestServer::with(opts()).await;
        let b = TestServer::with(opts()).await;
        // One task run by each server.
        let mut real = Vec::new();
        for s in [&a, &b] {
            let r = s
                .rpc("SendMessage", send_params("Add a health check"))
                .await;
            let t = &r["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
            real.push((
                t["id"].as_str().unwrap().to_string(),
                t["contextId"].as_str().unwrap().to_string(),
            ));
        }
        // The bulk, half written by each host's store, many creates in flight at once (the
        // writers batch them into few transactions).
        let (sa, sb) = tokio::join!(PgStore::open(&db.url, None), PgStore::open(&db.url, None));
        let stores = [sa.unwrap(), sb.unwrap()];
        futures::stream::iter(0..TASKS)
            .map(|i| stores[i % 2].create(bulk_task(i)))
            .buffer_unordered(512)
            .for_each(|r| async move {
                r.unwrap();
            })
            .await;

        let mut everything: BTreeSet<String> = (0..TASKS).map(|i| bulk_task(i).id).collect();
        everything.extend(real.iter().map(|(id, _)| id.clone()));
        let all = every_page(&a, &b, json!({})).await;
        assert_eq!(once(&all), everything);
        // Newest status first, ties by id (greater first): the order every store pages in.
        let keys: HashMap<String, String> = (0..TASKS)
            .map(|i| {
                let t = bulk_task(i);
                (t.id, t.status.timestamp.unwrap_or_default())
            })
            .collect();
        let bulk_order: Vec<&String> = all.iter().filter(|id| keys.contains_key(*id)).collect();
        let mut sorted = bulk_order.clone();
        sorted.sort_by(|x, y| (&keys[*y], *y).cmp(&(&keys[*x], *x)));
        assert_eq!(bulk_order, sorted, "not newest status first");

        // By context: the bulk tasks of one context, and a server's task in its own.
        let ctx = "ctx-3";
        let want: BTreeSet<String> = (0..TASKS)
            .map(bulk_task)
            .filter(|t| t.context_id == ctx)
            .map(|t| t.id)
            .collect();
        let got = every_page(&a, &b, json!({"contextId": ctx})).await;
        assert_eq!(once(&got), want);
        let (real_id, real_ctx) = &real[1];
        let got = every_page(&a, &b, json!({"contextId": real_ctx})).await;
        assert_eq!(got, vec![real_id.clone()]);

        // By state, and by state within a context.
        for (state, name) in [
            (TaskState::InputRequired, "TASK_STATE_INPUT_REQUIRED"),
            (TaskState::Canceled, "TASK_STATE_CANCELED"),
        ] {
            let want: BTreeSet<String> = (0..TASKS)
                .map(bulk_task)
                .filter(|t| t.status.state == state)
                .map(|t| t.id)
                .collect();
            let got = every_page(&a, &b, json!({"status": name})).await;
            assert_eq!(once(&got), want, "{name}");
        }
        let want: BTreeSet<String> = (0..TASKS)
            .map(bulk_task)
            .filter(|t| t.context_id == "ctx-2" && t.status.state == TaskState::Completed)
            .map(|t| t.id)
            .collect();
        assert!(!want.is_empty());
        let got = every_page(
            &a,
            &b,
            json!({"contextId": "ctx-2", "status": "TASK_STATE_COMPLETED"}),
        )
        .await;
        assert_eq!(once(&got), want);

        a.shutdown().await;
        b.shutdown().await;
        drop(stores);
        db.drop_now().await;
    })
    .await;
}
