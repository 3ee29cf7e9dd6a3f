//! `agent-host call URL "message"` and `agent-host tasks list|get|cancel|watch`: the client
//! library for a person at a terminal (or, with `--json`, a script).
//!
//! Exit codes: 0 completed, 1 failed (or an error), 2 usage error, 3 canceled, 4 input
//! required (and no terminal to ask on).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::{Args, Subcommand};
use futures::StreamExt;

use super::render::{Outcome, Renderer};
use super::{Binding, Client, ClientError, EventStream, ProtocolVersion, Request};
use crate::protocol::v1::{ListTasksRequest, SendMessageResponse, StreamResponse, TaskState};

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
    /// Blocking send: no streaming, print the task when it has ended or waits for input.
    #[arg(long)]
    pub no_stream: bool,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

/// `agent-host tasks`.
#[derive(Debug, Clone, Args)]
pub struct TasksArgs {
    #[command(subcommand)]
    pub command: TasksCommand,
    #[command(flatten)]
    pub connect: ConnectArgs,
}

#[derive(Debug, Clone, Subcommand)]
pub enum TasksCommand {
    /// List tasks (A2A 1.0), newest first.
    List {
        url: String,
        /// Only this conversation.
        #[arg(long)]
        context: Option<String>,
        /// Only this state (working, completed, input-required, ... or TASK_STATE_*).
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: i32,
    },
    /// Show a task.
    Get { url: String, id: String },
    /// Cancel a task.
    Cancel { url: String, id: String },
    /// Follow a task like `call` does.
    Watch {
        url: String,
        id: String,
        /// Replay from after this event id.
        #[arg(long)]
        last_event_id: Option<String>,
    },
    /// Delete terminal tasks (and their attachments) from this machine's store, by age
    /// and/or count; a dry run that lists them unless --yes. Never deletes a task that is
    /// not terminal. Refuses while a host has the database open (it applies [retention]
    /// itself). Exit: 0 done, 1 failed, 2 usage.
    Prune(crate::cli::prune::PruneArgs),
}

fn fail(e: &ClientError) -> i32 {
    eprintln!("agent-host: {e}");
    match e {
        ClientError::Usage(_) => EXIT_USAGE,
        _ => 1,
    }
}

async fn connect(url: &str, c: &ConnectArgs) -> Result<Client, ClientError> {
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

/// Follows a stream, answering input requests on the terminal when there is one; the exit
/// code.
async fn drive(client: &Client, events: EventStream, json: bool) -> i32 {
    let live = std::io::stderr().is_terminal();
    let interactive = std::io::stdin().is_terminal() && !json;
    let mut r = Renderer::new(std::io::stdout(), std::io::stderr(), json, live);
    let mut events = events;
    loop {
        if let Err(e) = follow(&mut r, events).await {
            return fail(&e);
        }
        let outcome = r.outcome();
        if let Outcome::InputRequired { task_id, .. } = &outcome {
            if interactive {
                if let Some(answer) = ask(&outcome).await {
                    r.resume();
                    events = match client.answer(task_id, &answer).await {
                        Ok(s) => s,
                        Err(e) => return fail(&e),
                    };
                    continue;
                }
            } else if !json {
                r.say(&format!(
                    "answer with: agent-host call {} --task {task_id} yes|no|\"your answer\"",
                    client.inner.base
                ));
            }
        }
        return outcome.exit_code();
    }
}

/// `agent-host call`: the exit code.
pub async fn run_call(args: CallArgs) -> i32 {
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
    let json = args.connect.json;
    if args.no_stream {
        return match client.send(req).await {
            Ok(resp) => {
                let ev = super::Event {
                    id: None,
                    response: match resp {
                        SendMessageResponse::Task(t) => StreamResponse::Task(t),
                        SendMessageResponse::Message(m) => StreamResponse::Message(m),
                    },
                };
                let mut r = Renderer::new(std::io::stdout(), std::io::stderr(), json, false);
                r.event(&ev);
                r.outcome().exit_code()
            }
            Err(e) => fail(&e),
        };
    }
    match client.stream(req).await {
        Ok(events) => drive(&client, events, json).await,
        Err(e) => fail(&e),
    }
}

/// `agent-host tasks ...`: the exit code.
pub async fn run_tasks(args: TasksArgs) -> i32 {
    if let TasksCommand::Prune(p) = &args.command {
        return match crate::cli::prune::run(p, args.connect.json).await {
            Ok(text) => {
                use std::io::Write as _;
                let _ = std::io::stdout().write_all(text.as_bytes());
                0
            }
            Err(e) => {
                eprintln!("agent-host: {e}");
                e.exit_code()
            }
        };
    }
    let (url, json) = match &args.command {
        TasksCommand::List { url, .. }
        | TasksCommand::Get { url, .. }
        | TasksCommand::Cancel { url, .. }
        | TasksCommand::Watch { url, .. } => (url.clone(), args.connect.json),
        TasksCommand::Prune(_) => return EXIT_USAGE,
    };
    let client = match connect(&url, &args.connect).await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    match args.command {
        TasksCommand::List {
            context,
            state,
            limit,
            ..
        } => {
            let status = match state.as_deref() {
                None => None,
                Some(s) => match TaskState::parse_lenient(s) {
                    Some(st) => Some(st),
                    None => {
                        return fail(&ClientError::Usage(format!(
                            "--state {s}: not a task state"
                        )))
                    }
                },
            };
            let req = ListTasksRequest {
                context_id: context,
                status,
                page_size: Some(limit.clamp(1, 100)),
                ..ListTasksRequest::default()
            };
            match client.list_tasks(req).await {
                Ok(list) if json => {
                    println!("{}", serde_json::to_string(&list).unwrap_or_default());
                    0
                }
                Ok(list) => {
                    for t in &list.tasks {
                        println!(
                            "{}  {:<16} {}  {}",
                            t.id,
                            crate::protocol::v03::reverse::state_name_03(t.status.state),
                            t.context_id,
                            t.status.timestamp.as_deref().unwrap_or("")
                        );
                    }
                    eprintln!("{} of {} tasks", list.tasks.len(), list.total_size);
                    0
                }
                Err(e) => fail(&e),
            }
        }
        TasksCommand::Get { id, .. } => match client.get_task(&id).await {
            Ok(t) if json => {
                println!("{}", serde_json::to_string(&t).unwrap_or_default());
                0
            }
            Ok(t) => {
                println!("{}", serde_json::to_string_pretty(&t).unwrap_or_default());
                0
            }
            Err(e) => fail(&e),
        },
        TasksCommand::Cancel { id, .. } => match client.cancel(&id).await {
            Ok(t) => {
                if json {
                    println!("{}", serde_json::to_string(&t).unwrap_or_default());
                } else {
                    println!(
                        "task {} {}",
                        t.id,
                        crate::protocol::v03::reverse::state_name_03(t.status.state)
                    );
                }
                0
            }
            Err(e) => fail(&e),
        },
        TasksCommand::Watch {
            id, last_event_id, ..
        } => match client.subscribe_from(&id, last_event_id.as_deref()).await {
            Ok(events) => drive(&client, events, json).await,
            Err(e) => fail(&e),
        },
        TasksCommand::Prune(_) => EXIT_USAGE,
    }
}
