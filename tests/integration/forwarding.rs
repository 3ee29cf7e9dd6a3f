//! Commands sent to a host that does not run their task, on one PostgreSQL database
//! (docs/several-hosts.md): the host passes them to the owner and answers with the owner's
//! result. A cancel stops the program where it runs, an answer reaches the program that
//! asked, a follow-up runs where its context lives; an owner out of reach is an error, not
//! a local act; a passed-on command is never passed on again; the caller's credentials go
//! along.
//!
//! The database comes from `AGENT_HOST_TEST_PG` (default
//! `postgres://root@127.0.0.1:5432/test`); each test has a schema of its own. Unreachable: a
//! failure under `CI=true`, a loud skip elsewhere.

use agent_host::settings::cluster::ClusterSettings;
use agent_host::settings::{Credential, Secret, Security};
use serde_json::{json, Value};

use crate::common::*;
use crate::postgres::Schema;

/// Host `id` on the database.
fn host(db: &Schema, id: &str) -> Options {
    Options {
        adapter: "demo",
        postgres: Some(db.url.clone()),
        cluster: Some(ClusterSettings {
            host_id: Some(id.into()),
            ..ClusterSettings::default()
        }),
        ..Options::default()
    }
}

fn state(t: &Value) -> &str {
    t["status"]["state"].as_str().unwrap_or("")
}

fn settled(t: &Value) -> bool {
    matches!(
        state(t),
        "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED"
    )
}

/// A v1.0 JSON-RPC call to `s` with extra headers; the whole response.
async fn call(s: &TestServer, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
    let mut req = s
        .client
        .post(format!("{}/", s.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("send");
    assert_eq!(resp.status(), 200, "JSON-RPC answers with HTTP 200");
    resp.json().await.expect("json")
}

/// Starts `text` on `s` without waiting; the task id.
async fn start(s: &TestServer, text: &str, headers: &[(&str, &str)]) -> String {
    let mut p = send_params(text);
    p["configuration"] = json!({"returnImmediately": true});
    let r = call(s, "SendMessage", p, headers).await;
    r["result"]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task: {r}"))
        .to_string()
}

/// The pid of the grandchild a task names.
fn pid_of(task: &Value) -> Option<u32> {
    grandchild_pid(&task.to_string())
}

#[tokio::test]
async fn a_cancel_sent_to_another_host_stops_the_program_where_it_runs() {
    limit(async {
        let Some(db) = Schema::new("fwd_cancel").await else {
            return;
        };
        let a = TestServer::with(host(&db, "host-a")).await;
        let b = TestServer::with(host(&db, "host-b")).await;
        let id = start(&a, "grandchild", &[]).await;
        let t = a.task_when(&id, |t| pid_of(t).is_some()).await;
        let pid = pid_of(&t).expect("pid");
        assert!(process_alive(pid));
        // Sent to B, which does not run it: B passes it to A and answers with A's result.
        let r = b.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(r["result"]["id"], id.as_str(), "{r}");
        assert_eq!(state(&r["result"]), "TASK_STATE_CANCELED", "{r}");
        // A stopped its program, everything it started included.
        process_ends("the program on A ends with the cancel", pid).await;
        let on_a = a.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(state(&on_a["result"]), "TASK_STATE_CANCELED");
        // Once more, through B: the ended task is not cancelable, as A would say.
        let again = b.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(again["error"]["code"], -32002, "{again}");
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

#[tokio::test]
async fn an_approval_asked_on_one_host_is_answered_through_another() {
    limit(async {
        let Some(db) = Schema::new("fwd_answer").await else {
            return;
        };
        let a = TestServer::with(host(&db, "host-a")).await;
        let b = TestServer::with(host(&db, "host-b")).await;
        // The demo agent on A asks before running `ls`; denied, it says so and lists nothing.
        let id = start(&a, "approval", &[]).await;
        b.task_when(&id, |t| state(t) == "TASK_STATE_INPUT_REQUIRED")
            .await;
        // A blocking answer sent to B: A's program gets it, and B answers with the task
        // once it settled on A.
        let mut p = send_params("yes");
        p["message"]["taskId"] = json!(id);
        let r = b.rpc("SendMessage", p).await;
        let t = &r["result"]["task"];
        assert_eq!(t["id"], id.as_str(), "{r}");
        assert_eq!(state(t), "TASK_STATE_COMPLETED", "{r}");
        let text = t.to_string();
        assert!(
            text.contains("Everything looks fine") && !text.contains("denied"),
            "the program on A did not get the approval: {text}"
        );
        let on_a = a.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(state(&on_a["result"]), "TASK_STATE_COMPLETED");

        // A question on A, answered by a streamed reply to B naming only the context.
        let id = start(&a, "question", &[]).await;
        let asked = b
            .task_when(&id, |t| state(t) == "TASK_STATE_INPUT_REQUIRED")
            .await;
        let ctx = asked["contextId"].as_str().expect("context").to_string();
        let mut p = send_params("src/lib.rs");
        p["message"]["contextId"] = json!(ctx);
        let frames = b.stream("SendStreamingMessage", p).await;
        assert_eq!(
            frames[0].data["result"]["task"]["id"],
            id.as_str(),
            "the reply answered the waiting task: {frames:?}"
        );
        assert_eq!(
            states(&frames).last().map(String::as_str),
            Some("TASK_STATE_COMPLETED"),
            "{frames:?}"
        );
        let done = a.rpc("GetTask", json!({"id": id})).await;
        assert!(
            done["result"].to_string().contains("You chose src/lib.rs"),
            "{done}"
        );
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

/// "The directory has N entries." of a finished demo turn.
fn entries(t: &Value) -> Option<u64> {
    t.to_string()
        .split("The directory has ")
        .nth(1)?
        .split(' ')
        .next()?
        .parse()
        .ok()
}

/// The working directory the agent reported for its turn.
fn cwd(t: &Value) -> Value {
    t["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["artifactId"] == "agent-metadata"))
        .map(|x| x["parts"][0]["data"]["cwd"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_follow_up_sent_to_another_host_runs_where_its_context_lives() {
    limit(async {
        let Some(db) = Schema::new("fwd_context").await else {
            return;
        };
        let a = TestServer::with(host(&db, "host-a")).await;
        let b = TestServer::with(host(&db, "host-b")).await;
        // A's working directory differs from B's: three more files.
        for f in ["one.txt", "two.txt", "three.txt"] {
            std::fs::write(a.dir().join(f), "on host A\n").expect("write");
        }
        let on_a = std::fs::read_dir(a.dir()).expect("dir").count() as u64;
        let on_b = std::fs::read_dir(b.dir()).expect("dir").count() as u64;
        assert_ne!(on_a, on_b);
        let first = a.rpc("SendMessage", send_params("hello")).await;
        let first = &first["result"]["task"];
        assert_eq!(entries(first), Some(on_a), "{first}");
        let ctx = first["contextId"].as_str().expect("context").to_string();
        // The follow-up in that context, sent to B, runs on A: in A's directory.
        let mut p = send_params("and now?");
        p["message"]["contextId"] = json!(ctx);
        let r = b.rpc("SendMessage", p).await;
        let t = &r["result"]["task"];
        assert_eq!(state(t), "TASK_STATE_COMPLETED", "{r}");
        assert_ne!(t["id"], first["id"]);
        assert_eq!(t["contextId"], ctx.as_str());
        assert_eq!(
            entries(t),
            Some(on_a),
            "the follow-up did not run on A: {t}"
        );
        assert_eq!(cwd(t), cwd(first));
        // A new conversation sent to B runs on B.
        let r = b.rpc("SendMessage", send_params("hello")).await;
        assert_eq!(entries(&r["result"]["task"]), Some(on_b), "{r}");
        assert_ne!(cwd(&r["result"]["task"]), cwd(first));
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

#[tokio::test]
async fn an_owner_out_of_reach_is_an_error_and_a_passed_on_command_is_not_passed_on_again() {
    limit(async {
        let Some(db) = Schema::new("fwd_unreachable").await else {
            return;
        };
        let a = TestServer::with(host(&db, "host-a")).await;
        let b = TestServer::with(host(&db, "host-b")).await;
        let id = start(&a, "grandchild", &[]).await;
        let t = a.task_when(&id, |t| pid_of(t).is_some()).await;
        let pid = pid_of(&t).expect("pid");
        // A command that says another host passed it on is carried out here or refused,
        // never passed on: B names A instead.
        let r = call(
            &b,
            "CancelTask",
            json!({"id": id}),
            &[("A2A-Host-Forwarded-By", "host-c")],
        )
        .await;
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("runs on agent-host host-a"), "{r}");
        assert!(process_alive(pid));
        // A's lease is live but its advertised address leads nowhere.
        let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        tokio::spawn(conn);
        client
            .execute(
                "UPDATE hosts SET address = 'http://127.0.0.1:9' WHERE id = 'host-a'",
                &[],
            )
            .await
            .expect("update");
        let r = b.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(r["error"]["code"], -32051, "{r}");
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains("host-a") && msg.contains("retry"), "{r}");
        // Over HTTP+JSON: 503.
        let resp = b
            .client
            .post(format!("{}/a2a/rest/tasks/{id}:cancel", b.base))
            .header("A2A-Version", "1.0")
            .json(&json!({}))
            .send()
            .await
            .expect("send");
        assert_eq!(resp.status(), 503);
        // B did not act in A's place: the program runs on, and A still has it working.
        assert!(process_alive(pid));
        let on_a = a.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(state(&on_a["result"]), "TASK_STATE_WORKING");
        let r = a.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(state(&r["result"]), "TASK_STATE_CANCELED");
        process_ends("the program ends", pid).await;
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

#[tokio::test]
async fn a_passed_on_command_carries_the_callers_credentials() {
    limit(async {
        let Some(db) = Schema::new("fwd_creds").await else {
            return;
        };
        let security = Security {
            credentials: vec![
                Credential {
                    name: "alice".into(),
                    secret: Secret::Bearer("alice-token-0123456789".into()),
                },
                Credential {
                    name: "bob".into(),
                    secret: Secret::ApiKey("bob-key-0123456789".into()),
                },
            ],
            api_key_header: "X-API-Key".into(),
            ..Security::default()
        };
        let with_auth = |id: &str| Options {
            security: security.clone(),
            ..host(&db, id)
        };
        let a = TestServer::with(with_auth("host-a")).await;
        let b = TestServer::with(with_auth("host-b")).await;
        const ALICE: (&str, &str) = ("authorization", "Bearer alice-token-0123456789");
        const BOB: (&str, &str) = ("x-api-key", "bob-key-0123456789");
        let id = start(&a, "approval", &[ALICE]).await;
        let mut answer = send_params("yes");
        answer["message"]["taskId"] = json!(id);
        eventually("Alice's task asks, seen through B", WAIT, async || {
            let t = call(&b, "GetTask", json!({"id": id}), &[ALICE]).await;
            ready(state(&t["result"]) == "TASK_STATE_INPUT_REQUIRED", t)
        })
        .await;
        // Bob's answer or cancel through B: Alice's task does not exist for him.
        let r = call(&b, "SendMessage", answer.clone(), &[BOB]).await;
        assert_eq!(r["error"]["code"], -32001, "{r}");
        let r = call(&b, "CancelTask", json!({"id": id}), &[BOB]).await;
        assert_eq!(r["error"]["code"], -32001, "{r}");
        // Alice's answer through B: A authenticates her from the headers B passed on.
        let r = call(&b, "SendMessage", answer, &[ALICE]).await;
        assert_eq!(state(&r["result"]["task"]), "TASK_STATE_COMPLETED", "{r}");
        let t = call(&a, "GetTask", json!({"id": id}), &[ALICE]).await;
        assert!(settled(&t["result"]), "{t}");
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

#[tokio::test]
async fn the_push_config_of_a_passed_on_message_is_delivered_once_by_the_owner() {
    limit(async {
        let Some(db) = Schema::new("fwd_push").await else {
            return;
        };
        let rx = crate::push::receiver(0).await;
        let with_push = |id: &str| Options {
            push: Some(crate::push::fast()),
            ..host(&db, id)
        };
        let a = TestServer::with(with_push("host-a")).await;
        let b = TestServer::with(with_push("host-b")).await;
        let first = a.rpc("SendMessage", send_params("hello")).await;
        let ctx = first["result"]["task"]["contextId"]
            .as_str()
            .expect("context")
            .to_string();
        // A follow-up in A's context, sent to B with a webhook.
        let mut p = send_params("and now?");
        p["message"]["contextId"] = json!(ctx);
        p["configuration"] =
            json!({"taskPushNotificationConfig": {"url": rx.url, "token": "tok-f"}});
        let r = b.rpc("SendMessage", p).await;
        let t = &r["result"]["task"];
        assert_eq!(state(t), "TASK_STATE_COMPLETED", "{r}");
        let id = t["id"].as_str().expect("id");
        // Every update of the task, in order, once each: one host delivers them.
        let log = crate::push::log_of(&a, id).await;
        let hits = crate::push::received(&rx, log.len()).await;
        let bodies: Vec<Value> = hits.iter().map(|h| h.body.clone()).collect();
        assert_eq!(bodies, log);
        assert!(hits.iter().all(|h| h.token.as_deref() == Some("tok-f")));
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}

#[tokio::test]
async fn a_grpc_cancel_sent_to_another_host_stops_the_program_where_it_runs() {
    use crate::grpc::{grpc_server, task_state};
    use agent_host::server::grpc::pb;
    limit(async {
        let Some(db) = Schema::new("fwd_grpc_cancel").await else {
            return;
        };
        let a = TestServer::with(host(&db, "host-a")).await;
        let (b, mut on_b) = grpc_server(host(&db, "host-b")).await;
        let id = start(&a, "grandchild", &[]).await;
        let t = a.task_when(&id, |t| pid_of(t).is_some()).await;
        let pid = pid_of(&t).expect("pid");
        assert!(process_alive(pid));
        // CancelTask over gRPC to B, which does not run the task: B passes it to A (over
        // A's JSON-RPC endpoint) and answers with A's result as a gRPC Task.
        let canceled = on_b
            .cancel_task(pb::CancelTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
            .expect("cancel through B")
            .into_inner();
        assert_eq!(canceled.id, id);
        assert_eq!(task_state(&canceled), pb::TaskState::Canceled);
        process_ends("the program on A ends with the cancel", pid).await;
        let on_a = a.rpc("GetTask", json!({"id": id})).await;
        assert_eq!(state(&on_a["result"]), "TASK_STATE_CANCELED");
        // Once more: the ended task is not cancelable, as A would say, as a gRPC status.
        let again = on_b
            .cancel_task(pb::CancelTaskRequest {
                id: id.clone(),
                ..Default::default()
            })
            .await
            .expect_err("an ended task is not cancelable");
        assert_eq!(again.code(), tonic::Code::FailedPrecondition, "{again:?}");
        a.shutdown().await;
        b.shutdown().await;
        db.drop_now().await;
    })
    .await;
}
