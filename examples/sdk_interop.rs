//! Drives an A2A server with agent-host's client library over every binding × version it
//! offers (JSON-RPC, HTTP+JSON; 1.0, 0.3) and prints one PASS/FAIL line per combination.
//! `tests/clients/run.sh` runs it against the official Python SDK's server
//! (`tests/clients/sdk_server.py`), whose agent completes a task with an `echo: ...`
//! artifact, keeps a `hang` task working until canceled and asks for input on `ask`.
//!
//! Usage: sdk_interop BASE_URL   (exit 1 if any combination failed)

use agent_host::client::{collect, Binding, Client, ClientError, Event, ProtocolVersion, Request};
use agent_host::protocol::v1::{ListTasksRequest, SendMessageResponse, StreamResponse, TaskState};
use futures::StreamExt;

fn check(cond: bool, what: &str) -> Result<(), String> {
    if cond {
        Ok(())
    } else {
        Err(what.to_string())
    }
}

fn e(err: ClientError) -> String {
    err.to_string()
}

fn last_state(evs: &[Event]) -> Option<TaskState> {
    evs.iter().rev().find_map(Event::state)
}

fn echoed(evs: &[Event]) -> bool {
    evs.iter().any(|ev| match &ev.response {
        StreamResponse::ArtifactUpdate(a) => a
            .artifact
            .parts
            .iter()
            .any(|p| p.text.as_deref().is_some_and(|t| t.starts_with("echo:"))),
        _ => false,
    })
}

async fn flows(base: &str, b: Binding, v: ProtocolVersion) -> Result<Vec<String>, String> {
    let mut done = Vec::new();
    let c = Client::builder(base)
        .bindings(vec![b])
        .versions(vec![v])
        .connect()
        .await
        .map_err(e)?;
    check(
        c.endpoint().binding == b && c.endpoint().version == v,
        "the interface was picked",
    )?;

    let t = match c.send(Request::text("hello")).await.map_err(e)? {
        SendMessageResponse::Task(t) => t,
        SendMessageResponse::Message(_) => return Err("send: a message, not a task".into()),
    };
    check(
        t.status.state == TaskState::Completed,
        &format!("send: state {:?}", t.status.state),
    )?;
    check(
        t.artifacts.iter().any(|a| {
            a.parts
                .iter()
                .any(|p| p.text.as_deref() == Some("echo: hello"))
        }),
        "send: the echo artifact",
    )?;
    done.push("send");

    let got = c.get_task(&t.id).await.map_err(e)?;
    check(got.status.state == TaskState::Completed, "get: completed")?;
    let nf = c
        .get_task("no-such-task")
        .await
        .err()
        .and_then(|x| x.reason().map(str::to_string));
    check(
        nf.as_deref() == Some("TASK_NOT_FOUND"),
        &format!("get unknown: {nf:?}"),
    )?;
    done.push("get");

    let evs = collect(c.stream(Request::text("stream me")).await.map_err(e)?)
        .await
        .map_err(e)?;
    check(
        last_state(&evs) == Some(TaskState::Completed),
        &format!("stream: last state {:?}", last_state(&evs)),
    )?;
    check(echoed(&evs), "stream: the echo artifact")?;
    done.push("stream");

    if v == ProtocolVersion::V1 {
        let l = c
            .list_tasks(ListTasksRequest {
                context_id: Some(t.context_id.clone()),
                ..Default::default()
            })
            .await
            .map_err(e)?;
        check(
            l.tasks.iter().any(|x| x.id == t.id),
            "list: the task is listed",
        )?;
        done.push("list");
    }

    let hung = match c
        .send(Request::text("hang").return_immediately())
        .await
        .map_err(e)?
    {
        SendMessageResponse::Task(t) => t,
        SendMessageResponse::Message(_) => return Err("hang: a message".into()),
    };
    let mut sub = c.subscribe(&hung.id).await.map_err(e)?;
    let first = sub.next().await.ok_or("subscribe: no event")?.map_err(e)?;
    check(
        first.task_id() == Some(hung.id.as_str()),
        "subscribe: the task's events",
    )?;
    done.push("subscribe");
    let canceled = c.cancel(&hung.id).await.map_err(e)?;
    check(
        canceled.status.state == TaskState::Canceled,
        &format!("cancel: {:?}", canceled.status.state),
    )?;
    let mut last = None;
    while let Ok(Some(ev)) =
        tokio::time::timeout(std::time::Duration::from_secs(10), sub.next()).await
    {
        last = ev.map_err(e)?.state().or(last);
    }
    check(
        last == Some(TaskState::Canceled),
        &format!("subscribe: ended {last:?}"),
    )?;
    done.push("cancel");

    let evs = collect(c.stream(Request::text("ask me")).await.map_err(e)?)
        .await
        .map_err(e)?;
    check(
        last_state(&evs) == Some(TaskState::InputRequired),
        &format!("ask: {:?}", last_state(&evs)),
    )?;
    let task_id = evs
        .last()
        .and_then(Event::task_id)
        .ok_or("ask: no task id")?
        .to_string();
    let evs = collect(c.answer(&task_id, "main.rs").await.map_err(e)?)
        .await
        .map_err(e)?;
    check(
        last_state(&evs) == Some(TaskState::Completed),
        &format!("answer: {:?}", last_state(&evs)),
    )?;
    done.push("input-required");
    Ok(done.into_iter().map(String::from).collect())
}

#[tokio::main]
async fn main() {
    let Some(base) = std::env::args().nth(1) else {
        eprintln!("usage: sdk_interop BASE_URL");
        std::process::exit(2);
    };
    let mut failed = 0;
    for v in [ProtocolVersion::V1, ProtocolVersion::V03] {
        for b in [Binding::JsonRpc, Binding::HttpJson] {
            let name = format!("rust-client {} {}", v.as_str(), b.as_str());
            let r =
                tokio::time::timeout(std::time::Duration::from_secs(60), flows(&base, b, v)).await;
            match r {
                Ok(Ok(done)) => println!("PASS  {name}  ({})", done.join(", ")),
                Ok(Err(why)) => {
                    failed += 1;
                    println!("FAIL  {name}  {why}");
                }
                Err(_) => {
                    failed += 1;
                    println!("FAIL  {name}  timed out after 60 s");
                }
            }
        }
    }
    std::process::exit(i32::from(failed > 0));
}
