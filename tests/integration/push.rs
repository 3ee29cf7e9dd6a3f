//! Push notifications: every update to a webhook on 127.0.0.1, in order, through failures
//! and restarts; configs in both versions; SSRF probes refused (`targets.rs`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_host::push::PushSettings;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

mod targets;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Hit {
    pub auth: Option<String>,
    pub token: Option<String>,
    pub body: Value,
}

/// A webhook receiver on 127.0.0.1: records what it accepts; answers 503 to the first
/// `fail_first` requests and while `down` is set (counting those in `refused`).
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    pub hits: Arc<Mutex<Vec<Hit>>>,
    pub down: Arc<Mutex<bool>>,
    /// Requests answered 503 while `down`.
    pub refused: Arc<AtomicUsize>,
}

pub async fn receiver(fail_first: usize) -> Receiver {
    let hits = Arc::new(Mutex::new(Vec::new()));
    let down = Arc::new(Mutex::new(false));
    let refused = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(Mutex::new(fail_first));
    let (h, d, r) = (hits.clone(), down.clone(), refused.clone());
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: String| {
            let (hits, down, failures) = (h.clone(), d.clone(), failures.clone());
            let refused = r.clone();
            async move {
                if *down.lock().unwrap() {
                    refused.fetch_add(1, Ordering::SeqCst);
                    return StatusCode::SERVICE_UNAVAILABLE;
                }
                {
                    let mut f = failures.lock().unwrap();
                    if *f > 0 {
                        *f -= 1;
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                }
                let get = |k: &str| {
                    headers
                        .get(k)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                hits.lock().unwrap().push(Hit {
                    auth: get("authorization"),
                    token: get("x-a2a-notification-token"),
                    body: serde_json::from_str(&body).unwrap_or(Value::Null),
                });
                StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Receiver {
        url: format!("http://{addr}/hook"),
        hits,
        down,
        refused,
    }
}

pub fn fast() -> PushSettings {
    PushSettings {
        allow_private: true,
        retry_base: Duration::from_millis(40),
        retry_max: Duration::from_millis(200),
        ..PushSettings::default()
    }
}

/// The task's stream events, from its log (what every push config must receive).
pub async fn log_of(s: &TestServer, id: &str) -> Vec<Value> {
    let mut r = s
        .open_stream("SubscribeToTask", json!({"id": id}), Some(0))
        .await;
    r.all()
        .await
        .into_iter()
        .map(|f| f.data["result"].clone())
        .collect()
}

/// What the receiver accepted, once it has accepted `n` updates.
pub async fn received(rx: &Receiver, n: usize) -> Vec<Hit> {
    eventually(
        &format!("the receiver gets {n} updates"),
        WAIT,
        async || {
            let hits = rx.hits.lock().unwrap().clone();
            ready(hits.len() >= n, hits)
        },
    )
    .await
}

/// A server with push on and a task started with `prompt` (not waited for); its id.
async fn server_with_task(push: PushSettings, prompt: &str) -> (TestServer, String) {
    let s = TestServer::with(Options {
        push: Some(push),
        ..Options::default()
    })
    .await;
    let mut p = send_params(prompt);
    p["configuration"] = json!({"returnImmediately": true});
    let id = s.rpc("SendMessage", p).await["result"]["task"]["id"]
        .as_str()
        .expect("task id")
        .to_string();
    (s, id)
}

#[tokio::test]
async fn every_update_reaches_the_webhook_in_order_with_its_credentials() {
    limit(async {
        let rx = receiver(3).await; // fails the first three attempts
        let s = TestServer::with(Options {
            push: Some(fast()),
            ..Options::default()
        })
        .await;
        let card: Value = s
            .client
            .get(format!("{}/.well-known/agent-card.json", s.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(card["capabilities"]["pushNotifications"], true);
        let mut p = send_params("hello");
        p["configuration"] = json!({"taskPushNotificationConfig": {
            "url": rx.url, "token": "tok-1",
            "authentication": {"scheme": "Bearer", "credentials": "secret-1"}}});
        let v = s.rpc("SendMessage", p).await;
        let id = v["result"]["task"]["id"].as_str().unwrap().to_string();
        let log = log_of(&s, &id).await;
        let hits = received(&rx, log.len()).await;
        let bodies: Vec<Value> = hits.iter().map(|h| h.body.clone()).collect();
        assert_eq!(
            bodies, log,
            "every update, in order, once each (retries included)"
        );
        assert!(bodies[0]["task"].is_object(), "the task first");
        assert_eq!(
            bodies.last().unwrap()["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        for h in &hits {
            assert_eq!(h.auth.as_deref(), Some("Bearer secret-1"));
            assert_eq!(h.token.as_deref(), Some("tok-1"));
        }
    })
    .await;
}

#[tokio::test]
async fn configs_in_both_versions() {
    limit(async {
        let rx = receiver(0).await;
        let (s, id) = server_with_task(fast(), "approval").await;
        s.task_when(&id, |t| t["status"]["state"] == "TASK_STATE_INPUT_REQUIRED").await;
        // v1.0 create / get / list / delete.
        let c = s
            .rpc("CreateTaskPushNotificationConfig", json!({"taskId": id, "id": "cfg-1", "url": rx.url,
                "authentication": {"scheme": "Bearer", "credentials": "c1"}}))
            .await;
        assert_eq!(c["result"]["id"], "cfg-1", "{c}");
        let g = s.rpc("GetTaskPushNotificationConfig", json!({"taskId": id, "id": "cfg-1"})).await;
        assert_eq!(g["result"]["url"], rx.url.as_str());
        assert_eq!(g["result"]["authentication"]["credentials"], "c1");
        let missing = s.rpc("GetTaskPushNotificationConfig", json!({"taskId": id, "id": "nope"})).await;
        assert_eq!(missing["error"]["code"], -32001);
        // v0.3 set / get / list, on the same task.
        let set = s
            .rpc03("tasks/pushNotificationConfig/set", json!({"taskId": id, "pushNotificationConfig": {
                "id": "cfg-03", "url": rx.url, "token": "t03", "authentication": {"schemes": ["Bearer"], "credentials": "c03"}}}))
            .await;
        assert_eq!(set["result"]["pushNotificationConfig"]["id"], "cfg-03", "{set}");
        let get03 = s
            .rpc03("tasks/pushNotificationConfig/get", json!({"id": id, "pushNotificationConfigId": "cfg-03"}))
            .await;
        assert_eq!(get03["result"]["pushNotificationConfig"]["authentication"]["schemes"][0], "Bearer");
        let list03 = s.rpc03("tasks/pushNotificationConfig/list", json!({"id": id})).await;
        assert_eq!(list03["result"].as_array().unwrap().len(), 2);
        let list = s.rpc("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
        assert_eq!(list["result"]["configs"].as_array().unwrap().len(), 2);
        // Updates from now on reach both, each in its version's shape.
        let mut reply = send_params("yes");
        reply["message"]["taskId"] = json!(id);
        s.rpc("SendMessage", reply).await;
        // Both configs get the rest of the turn, up to its end, each in its version's shape.
        eventually("both configs get the final update", WAIT, async || {
            let hits = rx.hits.lock().unwrap().clone();
            let v03_final = hits
                .iter()
                .any(|h| h.token.as_deref() == Some("t03") && h.body["final"] == true);
            let v1_final = hits.iter().any(|h| {
                h.auth.as_deref() == Some("Bearer c1")
                    && h.body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            });
            ready(v03_final && v1_final, hits.len())
        })
        .await;
        let hits = rx.hits.lock().unwrap().clone();
        let v03: Vec<&Hit> = hits.iter().filter(|h| h.token.as_deref() == Some("t03")).collect();
        let v1: Vec<&Hit> = hits.iter().filter(|h| h.auth.as_deref() == Some("Bearer c1")).collect();
        assert!(v03.iter().all(|h| h.body["kind"].is_string()), "v0.3 events carry kind");
        assert!(v1.iter().all(|h| h.body.get("kind").is_none()));
        // Delete is idempotent.
        for _ in 0..2 {
            let d = s.rpc("DeleteTaskPushNotificationConfig", json!({"taskId": id, "id": "cfg-1"})).await;
            assert_eq!(d["result"], json!({}), "{d}");
        }
        let d = s.rpc03("tasks/pushNotificationConfig/delete", json!({"id": id, "pushNotificationConfigId": "cfg-03"})).await;
        assert_eq!(d["result"], Value::Null);
        assert!(d.get("error").is_none());
        let list = s.rpc("ListTaskPushNotificationConfigs", json!({"taskId": id})).await;
        assert_eq!(list["result"]["configs"], json!([]));
        let unknown = s.rpc("ListTaskPushNotificationConfigs", json!({"taskId": "no-task"})).await;
        assert_eq!(unknown["error"]["code"], -32001);
    })
    .await;
}

#[tokio::test]
async fn deliveries_survive_a_receiver_outage_and_a_host_restart() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("push.db");
        let rx = receiver(0).await;
        *rx.down.lock().unwrap() = true;
        let s = TestServer::with(Options {
            push: Some(fast()),
            db: Some(db.clone()),
            ..Options::default()
        })
        .await;
        let mut p = send_params("hello");
        p["configuration"] =
            json!({"taskPushNotificationConfig": {"url": rx.url, "token": "tok-secret-9"}});
        let id = s.rpc("SendMessage", p).await["result"]["task"]["id"]
            .as_str()
            .unwrap()
            .to_string();
        let log = log_of(&s, &id).await;
        // The host tried, and the receiver, down, took nothing.
        eventually("the host tries to deliver", WAIT, async || {
            let n = rx.refused.load(Ordering::SeqCst);
            ready(n > 0, n)
        })
        .await;
        assert!(rx.hits.lock().unwrap().is_empty());
        s.shutdown().await;
        // Secrets are sealed at rest.
        let raw = std::fs::read(&db).unwrap();
        let wal = std::fs::read(db.with_extension("db-wal")).unwrap_or_default();
        for bytes in [&raw, &wal] {
            assert!(
                !bytes.windows(12).any(|w| w == b"tok-secret-9"),
                "a push token is stored in plain text"
            );
        }
        // The receiver is back; a new host on the same database delivers everything.
        *rx.down.lock().unwrap() = false;
        let _s2 = TestServer::with(Options {
            push: Some(fast()),
            db: Some(db.clone()),
            ..Options::default()
        })
        .await;
        let hits = received(&rx, log.len()).await;
        let bodies: Vec<Value> = hits.iter().map(|h| h.body.clone()).collect();
        assert_eq!(bodies.len(), log.len());
        for (i, (b, l)) in bodies.iter().zip(&log).enumerate() {
            assert_eq!(b, l, "update {i}");
        }
    })
    .await;
}

#[tokio::test]
async fn push_configs_over_http_json_in_both_versions() {
    limit(async {
        let rx = receiver(0).await;
        let (s, id) = server_with_task(fast(), "hang").await;
        let base = format!("{}/a2a/rest/tasks/{id}/pushNotificationConfigs", s.base);
        let created: Value = s
            .client
            .post(&base)
            .header("content-type", "application/json")
            .json(&json!({"id": "r1", "url": rx.url, "token": "t"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(created["id"], "r1", "{created}");
        assert_eq!(created["taskId"], id.as_str());
        let got: Value = s
            .client
            .get(format!("{base}/r1"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(got["url"], rx.url.as_str());
        let base03 = format!(
            "{}/a2a/rest03/v1/tasks/{id}/pushNotificationConfigs",
            s.base
        );
        let created03: Value = s
            .client
            .post(&base03)
            .header("content-type", "application/json")
            .json(&json!({"parent": format!("tasks/{id}"), "configId": "r03",
                "config": {"pushNotificationConfig": {"url": rx.url}}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            created03["name"],
            format!("tasks/{id}/pushNotificationConfigs/r03"),
            "{created03}"
        );
        // Python SDK 1.3.0: proto field names, the id in `config.name`.
        let sdk: Value = s
            .client
            .post(&base03)
            .header("content-type", "application/json")
            .json(&json!({"parent": format!("tasks/{id}"),
                "config": {"name": format!("tasks/{id}/pushNotificationConfigs/sdk"),
                    "push_notification_config": {"url": rx.url, "token": "tok"}}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            sdk["name"],
            format!("tasks/{id}/pushNotificationConfigs/sdk"),
            "{sdk}"
        );
        assert_eq!(sdk["pushNotificationConfig"]["token"], "tok", "{sdk}");
        let got03: Value = s
            .client
            .get(format!("{base03}/sdk"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(got03["pushNotificationConfig"]["url"], rx.url.as_str());
        let del03 = s
            .client
            .delete(format!("{base03}/sdk"))
            .send()
            .await
            .unwrap();
        assert_eq!(del03.status(), 200);
        let list: Value = s
            .client
            .get(&base)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list["configs"].as_array().unwrap().len(), 2);
        let del = s.client.delete(format!("{base}/r1")).send().await.unwrap();
        assert_eq!(del.status(), 200);
        let missing = s.client.get(format!("{base}/r1")).send().await.unwrap();
        assert_eq!(missing.status(), 404);
        s.rpc("CancelTask", json!({"id": id})).await;
    })
    .await;
}

#[tokio::test]
async fn a_v03_config_set_without_id_is_the_tasks_default() {
    limit(async {
        let rx = receiver(0).await;
        let (s, id) = server_with_task(fast(), "approval").await;
        let set = s
            .rpc03(
                "tasks/pushNotificationConfig/set",
                json!({"taskId": id, "pushNotificationConfig": {"url": rx.url}}),
            )
            .await;
        assert_eq!(
            set["result"]["pushNotificationConfig"]["id"], "default",
            "{set}"
        );
        let get = s
            .rpc03(
                "tasks/pushNotificationConfig/get",
                json!({"id": id, "pushNotificationConfigId": "default"}),
            )
            .await;
        assert_eq!(
            get["result"]["pushNotificationConfig"]["url"],
            rx.url.as_str(),
            "{get}"
        );
        // Setting another id-less config replaces it.
        s.rpc03(
            "tasks/pushNotificationConfig/set",
            json!({"taskId": id, "pushNotificationConfig": {"url": rx.url}}),
        )
        .await;
        let list = s
            .rpc03("tasks/pushNotificationConfig/list", json!({"id": id}))
            .await;
        assert_eq!(list["result"].as_array().unwrap().len(), 1, "{list}");
        s.rpc("CancelTask", json!({"id": id})).await;
    })
    .await;
}

/// A task takes at most `max_configs_per_task` push configs; one more is refused with
/// -32602 naming the limit; replacing an existing config (same id) is still allowed.
#[tokio::test]
async fn push_configs_are_capped_per_task() {
    limit(async {
        let rx = receiver(0).await;
        let settings = PushSettings {
            max_configs_per_task: 3,
            ..fast()
        };
        let (s, id) = server_with_task(settings, "approval").await;
        let create = |n: usize| json!({"taskId": id, "id": format!("cfg-{n}"), "url": rx.url});
        for n in 0..3 {
            let c = s.rpc("CreateTaskPushNotificationConfig", create(n)).await;
            assert_eq!(c["result"]["id"], format!("cfg-{n}"), "{c}");
        }
        let over = s.rpc("CreateTaskPushNotificationConfig", create(3)).await;
        assert_eq!(over["error"]["code"], -32602, "{over}");
        let msg = over["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("max_configs_per_task"), "{msg}");
        let again = s.rpc("CreateTaskPushNotificationConfig", create(1)).await;
        assert_eq!(again["result"]["id"], "cfg-1", "{again}");
        let list = s
            .rpc("ListTaskPushNotificationConfigs", json!({"taskId": id}))
            .await;
        assert_eq!(
            list["result"]["configs"].as_array().map(Vec::len),
            Some(3),
            "{list}"
        );
    })
    .await;
}
