//! Races: an answer followed at once by a new question (the lost wake-up of issue 17), a
//! burst of sends against the admission limits, two callers racing one new contextId.

use std::time::Duration;

use agent_host::server::grpc::pb;
use agent_host::settings::{Credential, HostLimits, Secret, Security};
use serde_json::{json, Value};

use crate::common::*;
use crate::grpc;

/// The four ways to send a message.
#[derive(Debug, Clone, Copy)]
enum Binding {
    RpcV1,
    RpcV03,
    RestV1,
    RestV03,
}

const BINDINGS: [Binding; 4] = [
    Binding::RpcV1,
    Binding::RpcV03,
    Binding::RestV1,
    Binding::RestV03,
];

/// A send body in the binding's shape; `task` makes it an answer.
fn message(b: Binding, text: &str, task: Option<&str>) -> Value {
    let mut m = match b {
        Binding::RpcV1 | Binding::RestV1 => {
            json!({"messageId": uuid(), "role": "ROLE_USER", "parts": [{"text": text}]})
        }
        Binding::RpcV03 => {
            json!({"kind": "message", "messageId": uuid(), "role": "user", "parts": [{"kind": "text", "text": text}]})
        }
        Binding::RestV03 => {
            json!({"messageId": uuid(), "role": "ROLE_USER", "content": [{"text": text}]})
        }
    };
    if let Some(t) = task {
        m["taskId"] = json!(t);
    }
    json!({ "message": m })
}

/// Sends (or streams) a body; the response as it comes.
async fn post(s: &TestServer, b: Binding, body: Value, stream: bool) -> reqwest::Response {
    let (path, v1, rpc_method) = match (b, stream) {
        (Binding::RpcV1, false) => ("/", true, Some("SendMessage")),
        (Binding::RpcV1, true) => ("/", true, Some("SendStreamingMessage")),
        (Binding::RpcV03, false) => ("/", false, Some("message/send")),
        (Binding::RpcV03, true) => ("/", false, Some("message/stream")),
        (Binding::RestV1, false) => ("/a2a/rest/message:send", true, None),
        (Binding::RestV1, true) => ("/a2a/rest/message:stream", true, None),
        (Binding::RestV03, false) => ("/a2a/rest03/v1/message:send", false, None),
        (Binding::RestV03, true) => ("/a2a/rest03/v1/message:stream", false, None),
    };
    let body = match rpc_method {
        Some(m) => json!({"jsonrpc": "2.0", "id": 1, "method": m, "params": body}),
        None => body,
    };
    let mut req = s
        .client
        .post(format!("{}{path}", s.base))
        .header("content-type", "application/json")
        .body(body.to_string());
    if v1 {
        req = req.header("A2A-Version", "1.0");
    }
    req.send().await.expect("send")
}

/// The first task status state found in a response or frame, as a v0.3 word
/// (`input-required`, `completed`, ...).
fn state_of(v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => {
            if let Some(s) = o
                .get("status")
                .and_then(|s| s.get("state"))
                .and_then(Value::as_str)
            {
                return Some(
                    s.to_lowercase()
                        .trim_start_matches("task_state_")
                        .replace('_', "-"),
                );
            }
            o.values().find_map(state_of)
        }
        _ => None,
    }
}

/// The id of the task in a response (the object that has a status).
fn task_id_of(v: &Value) -> Option<String> {
    match v {
        Value::Object(o) => {
            if o.contains_key("status") {
                if let Some(id) = o.get("id").and_then(Value::as_str) {
                    return Some(id.to_string());
                }
            }
            o.values().find_map(task_id_of)
        }
        _ => None,
    }
}

/// How long an answer may take before it counts as lost (hang detection, not a speed check:
/// an answer normally settles in milliseconds; a lost one never does).
const HANG: Duration = Duration::from_secs(5);

/// One answer; the state the call ended at, or None when it did not end (a lost wake-up).
async fn answer(s: &TestServer, b: Binding, task: &str, stream: bool) -> Option<String> {
    let call = async {
        let resp = post(s, b, message(b, "an answer", Some(task)), stream).await;
        let status = resp.status();
        if status != 200 {
            panic!("{b:?}: {status} {}", resp.text().await.unwrap_or_default());
        }
        if !stream {
            let v: Value = resp.json().await.expect("json");
            return state_of(&v);
        }
        let mut r = SseReader::from_response(resp);
        assert!(r.is_sse);
        let mut last = None;
        while let Some(f) = r.next().await {
            if let Some(st) = state_of(&f.data) {
                last = Some(st);
            }
        }
        last
    };
    until_settled(s, task, call).await
}

/// The answer's call's outcome, or None when it did not return although the task settled:
/// a call still open `HANG` after the task shows its next question (or its end) is lost; a
/// call that is only slow (a loaded machine) returns in that time.
async fn until_settled(
    s: &TestServer,
    task: &str,
    call: impl std::future::Future<Output = Option<String>>,
) -> Option<String> {
    tokio::pin!(call);
    if let Ok(got) = tokio::time::timeout(HANG, &mut call).await {
        return got;
    }
    s.task_when(task, |t| {
        let st = t["status"]["state"].as_str().unwrap_or("");
        st == "TASK_STATE_INPUT_REQUIRED" || st == "TASK_STATE_COMPLETED"
    })
    .await;
    tokio::time::timeout(HANG, call).await.ok().flatten()
}

/// One answer over gRPC, as [`answer`].
async fn answer_grpc(
    s: &TestServer,
    c: &mut grpc::Client,
    task: &str,
    stream: bool,
) -> Option<String> {
    let mut m = grpc::text_message("an answer");
    m.task_id = task.to_string();
    let req = pb::SendMessageRequest {
        message: Some(m),
        ..Default::default()
    };
    let call = async {
        let state = if stream {
            let s = c.send_streaming_message(req).await.expect("stream");
            let frames = grpc::collect(s.into_inner()).await;
            frames.iter().filter_map(grpc::state_of).next_back()?
        } else {
            let r = c.send_message(req).await.expect("send").into_inner();
            grpc::task_state(&grpc::task_of(r))
        };
        Some(word(state))
    };
    until_settled(s, task, call).await
}

/// A gRPC state as a v0.3 word (`input-required`).
fn word(st: pb::TaskState) -> String {
    st.as_str_name()
        .to_lowercase()
        .trim_start_matches("task_state_")
        .replace('_', "-")
}

/// How an answer cycle reaches the server.
#[derive(Debug, Clone, Copy)]
enum Via {
    Http(Binding),
    Grpc,
}

/// Answers a task that re-asks at once `asks` times; returns how many answers were lost.
async fn answer_cycles(s: &TestServer, via: Via, stream: bool, asks: usize) -> usize {
    let b = match via {
        Via::Http(b) => b,
        Via::Grpc => Binding::RpcV1,
    };
    let mut grpc = match via {
        Via::Grpc => Some(
            grpc::Client::connect(s.grpc.clone().expect("gRPC on"))
                .await
                .expect("connect"),
        ),
        Via::Http(_) => None,
    };
    let resp = post(
        s,
        b,
        message(b, &format!("question asks={asks}"), None),
        false,
    )
    .await;
    let v: Value = resp.json().await.expect("json");
    let task = task_id_of(&v).unwrap_or_else(|| panic!("{via:?}: no task in {v}"));
    assert_eq!(
        state_of(&v).as_deref(),
        Some("input-required"),
        "{via:?}: {v}"
    );
    let mut lost = 0;
    // The first answer answers `question`, the next ones `asks`; the last one completes.
    for i in 0..=asks {
        let want = if i == asks {
            "completed"
        } else {
            "input-required"
        };
        let got = match grpc.as_mut() {
            Some(c) => answer_grpc(s, c, &task, stream).await,
            None => answer(s, b, &task, stream).await,
        };
        match got {
            Some(st) => assert_eq!(st, want, "{via:?} stream={stream} answer {i}"),
            None => {
                lost += 1;
                // The agent has asked again meanwhile: wait for it before the next answer.
                s.task_when(&task, |t| {
                    let st = t["status"]["state"].as_str().unwrap_or("");
                    st == "TASK_STATE_INPUT_REQUIRED" || st == "TASK_STATE_COMPLETED"
                })
                .await;
            }
        }
    }
    lost
}

/// The agent asks again right after each answer (the conformance kit's history sequence):
/// every answer's call returns, blocking or streamed, on every binding, whatever the store
/// (issue 17 for the blocking half, issue 33 for the streamed one, which the SQLite store
/// lost about one time in fifteen: the stream started after a question its window did not
/// yet show, and waited for ever).
async fn answers_always_return(store: &str, opts: Options, asks: usize) {
    let s = TestServer::with(Options {
        grpc: true,
        // 200 answers in a row on a loaded machine outlast the tests' one-minute turn.
        timeout: RACE_LIMIT,
        host_limits: HostLimits {
            max_running: 16,
            rate_per_minute: 0,
            ..HostLimits::default()
        },
        ..opts
    })
    .await;
    let s = &s;
    let mut runs = Vec::new();
    for via in BINDINGS.map(Via::Http).into_iter().chain([Via::Grpc]) {
        for stream in [false, true] {
            runs.push(async move { (via, stream, answer_cycles(s, via, stream, asks).await) });
        }
    }
    let results = futures::future::join_all(runs).await;
    let total = results.len() * (asks + 1);
    let lost: usize = results.iter().map(|r| r.2).sum();
    println!("{store}: answer -> re-ask: {lost} of {total} answers lost ({results:?})");
    assert_eq!(lost, 0, "{store}: answers that never returned: {results:?}");
}

/// Long enough for 2,010 answers on a loaded machine (each takes milliseconds; the three
/// stores' runs together took 271 s on a shared two-core machine).
const RACE_LIMIT: Duration = Duration::from_secs(600);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_followed_by_a_new_question_always_returns() {
    limit_to(
        RACE_LIMIT,
        answers_always_return("memory", Options::default(), 200),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_followed_by_a_new_question_always_returns_with_sqlite() {
    let opts = Options {
        sqlite: true,
        ..Options::default()
    };
    limit_to(RACE_LIMIT, answers_always_return("sqlite", opts, 200)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_followed_by_a_new_question_always_returns_with_postgres() {
    limit_to(RACE_LIMIT, async {
        let Some(db) = crate::postgres::Schema::new("answer_race").await else {
            return;
        };
        let opts = Options {
            postgres: Some(db.url.clone()),
            ..Options::default()
        };
        answers_always_return("postgres", opts, 200).await;
        db.drop_now().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_sends_never_exceeds_the_admission_limits() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: HostLimits {
                max_running: 1,
                max_queued: 5,
                rate_per_minute: 0,
                ..HostLimits::default()
            },
            sqlite: true,
            ..Options::default()
        })
        .await;
        let sends = (0..100).map(|_| async {
            let mut p = send_params("hang");
            p["configuration"] = json!({"returnImmediately": true});
            s.rpc("SendMessage", p).await
        });
        let answers = futures::future::join_all(sends).await;
        let accepted: Vec<&Value> = answers.iter().filter(|a| a["result"].is_object()).collect();
        let busy = answers
            .iter()
            .filter(|a| a["error"]["code"] == -32050)
            .count();
        println!("burst: {} accepted, {busy} refused as busy", accepted.len());
        assert_eq!(
            accepted.len() + busy,
            100,
            "every send is accepted or refused as busy"
        );
        assert!(
            accepted.len() <= 6,
            "max_running=1 + max_queued=5 admit at most 6, {} were accepted",
            accepted.len()
        );
        for a in accepted {
            let id = a["result"]["task"]["id"].as_str().unwrap();
            s.rpc("CancelTask", json!({"id": id})).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_callers_racing_one_new_context_are_never_both_accepted() {
    limit(async {
        let security = Security {
            credentials: vec![
                Credential {
                    name: "alice".into(),
                    secret: Secret::Bearer("alice-token-0123456789".into()),
                },
                Credential {
                    name: "bob".into(),
                    secret: Secret::Bearer("bob-token-0123456789".into()),
                },
            ],
            ..Security::default()
        };
        let s = TestServer::with(Options {
            security,
            host_limits: HostLimits {
                max_running: 64,
                max_queued: 1000,
                rate_per_minute: 0,
                ..HostLimits::default()
            },
            sqlite: true,
            ..Options::default()
        })
        .await;
        let send_as = |token: &'static str, ctx: String| {
            let s = &s;
            async move {
                let mut p = send_params("echo hi");
                p["message"]["contextId"] = json!(ctx);
                p["configuration"] = json!({"returnImmediately": true});
                let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": p});
                let v: Value = s
                    .client
                    .post(format!("{}/", s.base))
                    .header("content-type", "application/json")
                    .header("A2A-Version", "1.0")
                    .bearer_auth(token)
                    .body(body.to_string())
                    .send()
                    .await
                    .expect("send")
                    .json()
                    .await
                    .expect("json");
                v["result"].is_object()
            }
        };
        let mut both = 0;
        for _ in 0..200 {
            let ctx = uuid();
            let (a, b) = tokio::join!(
                send_as("alice-token-0123456789", ctx.clone()),
                send_as("bob-token-0123456789", ctx)
            );
            assert!(a || b, "one of the two is accepted");
            if a && b {
                both += 1;
            }
        }
        println!("context race: both accepted in {both} of 200 trials");
        assert_eq!(both, 0, "both callers were accepted into one context");
    })
    .await;
}
