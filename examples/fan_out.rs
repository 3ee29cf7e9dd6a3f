//! A small orchestrator: sends one job to two A2A agents (two agent-host servers, or two
//! adapters of one) in parallel with agent-host's client library, follows both streams, and
//! combines the answers.
//!
//! Usage: fan_out URL_A URL_B ["the job"]
//!
//! Two servers need two databases (one host per database):
//!
//! ```sh
//! agent-host serve --port 41242 & agent-host serve --port 41243 --store sqlite:/tmp/b.db &
//! cargo run --example fan_out -- http://127.0.0.1:41242 http://127.0.0.1:41243 "Review src/lib.rs"
//! ```

use agent_host::client::{Client, ClientError, Request};
use agent_host::protocol::v1::{StreamResponse, TaskState};
use futures::StreamExt;

/// What one agent produced.
struct Answer {
    url: String,
    state: TaskState,
    text: String,
    tools: Vec<String>,
}

/// Runs the job on one agent: stream it, keep the streamed text and the tools used.
async fn run(url: String, job: String) -> Result<Answer, ClientError> {
    let client = Client::connect(url.clone()).await?;
    let mut events = client.stream(Request::text(job)).await?;
    let (mut state, mut text, mut result, mut tools) =
        (TaskState::Submitted, String::new(), None, Vec::new());
    while let Some(ev) = events.next().await {
        let ev = ev?;
        state = ev.state().unwrap_or(state);
        match &ev.response {
            StreamResponse::ArtifactUpdate(a) => {
                let chunk: String = a
                    .artifact
                    .parts
                    .iter()
                    .filter_map(|p| p.text.clone())
                    .collect();
                match a.artifact.name.as_deref() {
                    Some("result") => result = Some(chunk),
                    Some("agent-metadata") => {}
                    _ => text.push_str(&chunk),
                }
            }
            StreamResponse::StatusUpdate(s) => {
                let md = s.status.message.as_ref().and_then(|m| m.metadata.as_ref());
                if let Some(tool) = md.and_then(|m| m.get("toolName")).and_then(|v| v.as_str()) {
                    tools.push(tool.to_string());
                }
            }
            StreamResponse::Message(m) => text.push_str(&m.text()),
            StreamResponse::Task(_) => {}
        }
    }
    Ok(Answer {
        url,
        state,
        text: result.unwrap_or(text),
        tools,
    })
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: fan_out URL_A URL_B [\"the job\"]");
        std::process::exit(2);
    }
    let job = args
        .get(2)
        .cloned()
        .unwrap_or_else(|| "Summarize this project".into());
    // Both agents at once; each result on its own, so one failure does not hide the other.
    let (a, b) = tokio::join!(run(args[0].clone(), job.clone()), run(args[1].clone(), job));
    let mut ok = 0;
    println!("# {} agents, one job\n", 2);
    for r in [a, b] {
        match r {
            Ok(ans) => {
                ok += usize::from(ans.state == TaskState::Completed);
                println!(
                    "## {} ({:?}, tools: {})\n",
                    ans.url,
                    ans.state,
                    ans.tools.join(", ")
                );
                println!("{}\n", ans.text.trim());
            }
            Err(e) => println!("## failed: {e}\n"),
        }
    }
    println!("{ok} of 2 completed");
    std::process::exit(if ok == 2 { 0 } else { 1 });
}
