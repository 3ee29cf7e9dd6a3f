//! `agent-host call URL "message"` and `agent-host tasks list|get|cancel|watch`: the client
//! library for a person at a terminal (or, with `--json`, a script).
//!
//! Exit codes: 0 completed, 1 failed (or an error), 2 usage error, 3 canceled, 4 input
//! required (and no terminal to ask on).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use futures::StreamExt;

use super::render::{Outcome, Renderer};
use super::{Binding, Client, ClientError, EventStream, ProtocolVersion, Request};
use crate::protocol::v1::{SendMessageResponse, StreamResponse};

pub use super::tasks::{run_tasks, TasksArgs, TasksCommand};

/// Exit code of a usage error.
pub const EXIT_USAGE: i32 = 2;

/// How to reach the agent (shared by `call` and `tasks`).
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Bearer token sent as `Authorization: Bearer ...`.
    #[arg(long, env = "A2A_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// Only this binding: jsonrpc or rest (default: the card's first, JSON-RPC or HTTP+JSON).
    #[arg(long, global = true)]
    pub binding: Option<String>,
    /// Only this A2A version: 1.0 or 0.3 (default: 1.0 when offered, else 0.3).
    #[arg(long = "a2a-version", global = true)]
    pub a2a_version: Option<String>,
    /// Print one JSON event per line on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// `agent-host call`.
#[derive(Debug, Clone, Args)]
pub struct CallArgs {
    /// The agent's base URL (its card is at URL/.well-known/agent-card.json).
    pub url: String,
    /// The message (with --task: the answer, e.g. yes or no).
    pub message: String,
    /// Continue this conversation (context id).
    #[arg(long = "context")]
    pub context: Option<String>,
    /// Answer this task, which waits for input.
    #[arg(long = "task")]
    pub task: Option<String>,
    /// Working directory for the agent (sent as message metadata `cwd`).
    #[arg(long)]
    pub cwd: Option<String>,
    /// The task's budget, e.g. usd=2,tokens=500000,toolCalls=50,seconds=1200 (metadata `budget`).
    #[arg(long, value_name = "LIMITS")]
    pub budget: Option<crate::policy::Limits>,
    /// The conversation's budget, the sum over its tasks (metadata `budget.context`).
    #[arg(long, value_name = "LIMITS")]
    pub context_budget: Option<crate::policy::Limits>,
    /// At the budget's limit: ask (the task asks whether to continue) or fail.
    #[arg(long, value_name = "ask|fail")]
    pub on_budget: Option<crate::policy::OnBudget>,
    /// The approval rule set the host answers the agent's requests with (metadata
    /// `approvals`): read-only, workspace-write, ask-all or one of the host's.
    #[arg(long, value_name = "SET")]
    pub approvals: Option<String>,
    /// Blocking send: no streaming, print the task when it has ended or waits for input.
    #[arg(long)]
    pub no_stream: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

pub(super) fn fail(e: &ClientError) -> i32 {
    eprintln!("agent-host: {e}");
    match e {
        ClientError::Usage(_) => EXIT_USAGE,
        _ => 1,
    }
}

pub(super) async fn connect(url: &str, c: &ConnectArgs) -> Result<Client, ClientError> {
    let mut b = Client::builder(url);
    if let Some(t) = &c.token {
        b = b.bearer(t.clone());
    }
    if let Some(s) = &c.binding {
        let binding = Binding::parse(s)
            .ok_or_else(|| ClientError::Usage(format!("--binding {s}: use jsonrpc or rest")))?;
        b = b.bindings(vec![binding]);
    }
    if let Some(v) = &c.a2a_version {
        let version = ProtocolVersion::parse(v)
            .ok_or_else(|| ClientError::Usage(format!("--a2a-version {v}: use 1.0 or 0.3")))?;
        b = b.versions(vec![version]);
    }
    if !url.starts_with("http://") && !url.starts_with("https://") {
        return Err(ClientError::Usage(format!(
            "{url} is not an http:// or https:// URL"
        )));
    }
    b.connect().await
}

/// Renders a stream to its end; the renderer knows the outcome. A status line ticks on
/// stderr while nothing arrives.
async fn follow<O: Write, E: Write>(
    r: &mut Renderer<O, E>,
    mut events: EventStream,
) -> Result<(), ClientError> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(ev)) => r.event(&ev),
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            _ = tick.tick() => r.tick(),
        }
    }
}

/// Asks on the terminal what to answer; None when the user gives nothing.
async fn ask(outcome: &Outcome) -> Option<String> {
    let Outcome::InputRequired { approval, .. } = outcome else {
        return None;
    };
    let decision = approval.as_ref().is_some_and(|a| a.is_decision());
    let prompt = if decision { "Allow? [y/N] " } else { "> " };
    let line = tokio::task::spawn_blocking(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut s = String::new();
        std::io::stdin().read_line(&mut s).ok().map(|_| s)
    })
    .await
    .ok()
    .flatten()?;
    let line = line.trim().to_string();
    if decision {
        let yes = matches!(line.to_ascii_lowercase().as_str(), "y" | "yes");
        return Some(if yes { "yes" } else { "no" }.to_string());
    }
    (!line.is_empty()).then_some(line)
}

/// Writes to stdout. A closed stdout (`agent-host tasks list URL | head -1`) is a normal end
/// for a command, not an error: what is left is dropped.
pub fn print_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
}

/// The line that tells how to answer a task waiting for input.
fn answer_hint(base: &str, task_id: &str) -> String {
    format!("answer with: agent-host call {base} --task {task_id} yes|no|\"your answer\"")
}

/// Where a command writes, and whether it may ask on the terminal.
pub(super) struct Io<O: Write, E: Write> {
    pub(super) out: O,
    pub(super) err: E,
    /// Ask for input on the terminal (stdin is one).
    pub(super) interactive: bool,
    /// Draw the live status line (stderr is a terminal).
    pub(super) live: bool,
}

impl Io<std::io::Stdout, std::io::Stderr> {
    pub(super) fn terminal(json: bool) -> Self {
        Io {
            out: std::io::stdout(),
            err: std::io::stderr(),
            interactive: std::io::stdin().is_terminal() && !json,
            live: std::io::stderr().is_terminal(),
        }
    }
}

/// Follows a stream, answering input requests on the terminal when there is one; the exit
/// code. A closed stdout ends it with 0.
pub(super) async fn drive<O: Write, E: Write>(
    client: &Client,
    events: EventStream,
    json: bool,
    io: Io<O, E>,
) -> i32 {
    let mut r = Renderer::new(io.out, io.err, json, io.live);
    let mut events = events;
    loop {
        if let Err(e) = follow(&mut r, events).await {
            if r.closed() {
                return 0;
            }
            return fail(&e);
        }
        if r.closed() {
            return 0;
        }
        let outcome = r.outcome();
        if let Outcome::InputRequired { task_id, .. } = &outcome {
            if io.interactive {
                if let Some(answer) = ask(&outcome).await {
                    r.resume();
                    events = match client.answer(task_id, &answer).await {
                        Ok(s) => s,
                        Err(e) => return fail(&e),
                    };
                    continue;
                }
            } else {
                r.say(&answer_hint(&client.inner.base, task_id));
            }
        }
        return outcome.exit_code();
    }
}

/// Shows one task (the answer of a blocking send, a task that has ended) like a stream that
/// ends with it; the exit code.
pub(super) fn show_task<O: Write, E: Write>(
    client: &Client,
    response: StreamResponse,
    json: bool,
    io: Io<O, E>,
) -> i32 {
    let ev = super::Event { id: None, response };
    let mut r = Renderer::new(io.out, io.err, json, false);
    r.event(&ev);
    if r.closed() {
        return 0;
    }
    let outcome = r.outcome();
    if let Outcome::InputRequired { task_id, .. } = &outcome {
        r.say(&answer_hint(&client.inner.base, task_id));
    }
    outcome.exit_code()
}

/// `agent-host call`: the exit code.
pub async fn run_call(args: CallArgs) -> i32 {
    let io = Io::terminal(args.connect.json);
    call_with(args, io).await
}

/// `agent-host call` writing to `out` and `err`, never asking on the terminal (what a
/// program embedding the command, or a test, uses); the exit code.
pub async fn run_call_to<O: Write, E: Write>(args: CallArgs, out: O, err: E) -> i32 {
    let io = Io {
        out,
        err,
        interactive: false,
        live: false,
    };
    call_with(args, io).await
}

/// `metadata.budget` from --budget, --context-budget and --on-budget.
fn budget_metadata(args: &CallArgs) -> Option<serde_json::Value> {
    if args.budget.is_none() && args.context_budget.is_none() && args.on_budget.is_none() {
        return None;
    }
    let mut b = args
        .budget
        .map(|l| l.to_json())
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(c) = &args.context_budget {
        b["context"] = c.to_json();
    }
    if let Some(o) = args.on_budget {
        b["onBudget"] = serde_json::json!(o.word());
    }
    Some(b)
}

async fn call_with<O: Write, E: Write>(args: CallArgs, io: Io<O, E>) -> i32 {
    let client = match connect(&args.url, &args.connect).await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let mut req = Request::text(args.message.clone());
    if let Some(c) = &args.context {
        req = req.context(c.clone());
    }
    if let Some(t) = &args.task {
        req = req.task(t.clone());
    }
    if let Some(d) = &args.cwd {
        req = req.metadata("cwd", d.clone());
    }
    if let Some(b) = budget_metadata(&args) {
        req = req.metadata("budget", b);
    }
    if let Some(a) = &args.approvals {
        req = req.metadata("approvals", a.clone());
    }
    let json = args.connect.json;
    if args.no_stream {
        return match client.send(req).await {
            Ok(resp) => {
                let response = match resp {
                    SendMessageResponse::Task(t) => StreamResponse::Task(t),
                    SendMessageResponse::Message(m) => StreamResponse::Message(m),
                };
                show_task(&client, response, json, io)
            }
            Err(e) => fail(&e),
        };
    }
    match client.stream(req).await {
        Ok(events) => drive(&client, events, json, io).await,
        Err(e) => fail(&e),
    }
}
