//! `agent-host call URL "message"` and `agent-host tasks list|get|cancel|watch`: the client
//! library for a person at a terminal (or, with `--json`, a script).
//!
//! Exit codes: 0 completed, 1 failed (or an error), 2 usage error, 3 canceled, 4 input
//! required (and no terminal to ask on), 130 interrupted (Ctrl-C).
//!
//! Ctrl-C while a task is followed detaches: the task goes on on the host, and the command
//! says so and prints how to follow it again (`tasks watch`) or cancel it (`tasks cancel`).
//! With `--cancel-on-interrupt` it cancels the task instead and says whether that worked.
//! Detaching is the default because the task is the host's, not the terminal's: closing a
//! laptop lid or a flaky SSH session must not throw away an agent's work.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use futures::StreamExt;

use super::render::{Outcome, Renderer};
use crate::client::{
    Approval, Binding, Client, ClientError, Event, EventStream, ProtocolVersion, Request,
};
use crate::protocol::v1::{SendMessageResponse, StreamResponse};

/// Exit code of a usage error.
pub const EXIT_USAGE: i32 = 2;

/// Exit code after Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

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
    /// Working directory for the agent (sent as message metadata `cwd`; a relative one is
    /// taken from the current directory and sent absolute).
    #[arg(long, value_name = "DIR")]
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
    /// Apply the task's change (its `changes` patch) to the current directory's repository
    /// with git apply; on a conflict nothing is applied and the files are named.
    #[arg(long)]
    pub apply: bool,
    /// Fetch the context's branch (agent-host/...) from the host into the current
    /// directory's repository.
    #[arg(long)]
    pub fetch: bool,
    /// Ctrl-C cancels the task (and says whether that worked) instead of detaching from it
    /// and leaving it running on the host.
    #[arg(long)]
    pub cancel_on_interrupt: bool,
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

/// Ctrl-C, while a command follows a task: what it does then.
pub(super) struct Interrupt {
    signal: Option<tokio::signal::unix::Signal>,
    /// Cancel the task (else detach from it).
    cancel: bool,
}

impl Interrupt {
    /// Catches Ctrl-C from now on (a terminal command); without a handler (`None`), Ctrl-C
    /// kills the process as usual.
    pub(super) fn catch(cancel: bool) -> Self {
        let signal = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt());
        Interrupt {
            signal: signal.ok(),
            cancel,
        }
    }

    /// No handling: an embedding program or test keeps its own.
    pub(super) fn none() -> Self {
        Interrupt {
            signal: None,
            cancel: false,
        }
    }

    /// Waits for Ctrl-C (forever when not caught).
    async fn recv(&mut self) {
        match self.signal.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
}

/// How following a stream ended.
enum Followed {
    Ended,
    Interrupted,
}

/// Renders a stream until the outcome is known (or the stream ends); the renderer knows
/// it. A status line ticks on stderr while nothing arrives. A stream that goes on after the
/// outcome (a subscription that opened on a task already waiting for input) is not waited
/// on: the question is asked at once.
async fn follow<O: Write, E: Write>(
    r: &mut Renderer<O, E>,
    mut events: EventStream,
    interrupt: &mut Interrupt,
) -> Result<Followed, ClientError> {
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(ev)) => {
                    r.event(&ev);
                    if r.decided() {
                        return Ok(Followed::Ended);
                    }
                }
                Some(Err(e)) => return Err(e),
                None => return Ok(Followed::Ended),
            },
            _ = tick.tick() => r.tick(),
            () = interrupt.recv() => return Ok(Followed::Interrupted),
        }
    }
}

/// Asks on the terminal what to answer; None when the user gives nothing (or Ctrl-C, then
/// `interrupted` is set).
async fn ask(
    outcome: &Outcome,
    interrupt: &mut Interrupt,
    interrupted: &mut bool,
) -> Option<String> {
    let Outcome::InputRequired { approval, .. } = outcome else {
        return None;
    };
    let decision = approval.as_ref().is_some_and(|a| a.is_decision());
    let prompt = if decision { "Allow? [y/N] " } else { "> " };
    // A thread of its own (not the runtime's blocking pool): on Ctrl-C the command ends
    // without waiting for the line that never comes.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        eprint!("{prompt}");
        let _ = std::io::stderr().flush();
        let mut s = String::new();
        let _ = tx.send(std::io::stdin().read_line(&mut s).ok().map(|_| s));
    });
    let line = tokio::select! {
        line = rx => line.ok().flatten()?,
        () = interrupt.recv() => {
            *interrupted = true;
            eprintln!();
            return None;
        }
    };
    let line = line.trim().to_string();
    if decision {
        let yes = matches!(line.to_ascii_lowercase().as_str(), "y" | "yes");
        return Some(if yes { "yes" } else { "no" }.to_string());
    }
    (!line.is_empty()).then_some(line)
}

/// What Ctrl-C did: the task canceled, or left running with how to follow or cancel it;
/// the exit code (130).
async fn interrupted<O: Write, E: Write>(
    client: &Client,
    r: &mut Renderer<O, E>,
    cancel: bool,
) -> i32 {
    let base = client.base_url().to_string();
    let Some(id) = r.task_id.clone() else {
        r.notice(&format!(
            "^C: interrupted before the host named the task; it may have started: \
             agent-host tasks list {base}"
        ));
        return EXIT_INTERRUPTED;
    };
    r.interrupted();
    if cancel {
        match client.cancel(&id).await {
            Ok(t) if t.status.state == crate::protocol::v1::TaskState::Canceled => {
                r.notice(&format!("^C: canceled task {id}"));
                return EXIT_INTERRUPTED;
            }
            Ok(t) => r.notice(&format!(
                "^C: task {id} was not canceled: it is already {}",
                super::render::state_word(t.status.state)
            )),
            Err(e) => r.notice(&format!("^C: canceling task {id} failed: {e}")),
        }
        return EXIT_INTERRUPTED;
    }
    r.notice(&format!(
        "^C: detached from task {id}; it goes on running on the host.\n  \
         follow it again: agent-host tasks watch {base} {id}\n  \
         cancel it:       agent-host tasks cancel {base} {id}"
    ));
    EXIT_INTERRUPTED
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
    /// The stream follows this answer to an approval (yes: true).
    pub(super) answer: Option<bool>,
    /// The stream follows an answer (to an approval or a question): a task frame that
    /// waits for input may be the question just answered.
    pub(super) follows_answer: bool,
}

impl Io<std::io::Stdout, std::io::Stderr> {
    pub(super) fn terminal(json: bool) -> Self {
        Io {
            out: std::io::stdout(),
            err: std::io::stderr(),
            interactive: std::io::stdin().is_terminal() && !json,
            live: std::io::stderr().is_terminal(),
            answer: None,
            follows_answer: false,
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
    mut interrupt: Interrupt,
) -> i32 {
    let mut r = Renderer::new(io.out, io.err, json, io.live);
    if let Some(yes) = io.answer {
        r.answered(yes);
    }
    if io.follows_answer {
        r.follows_answer();
    }
    let mut events = events;
    loop {
        match follow(&mut r, events, &mut interrupt).await {
            Ok(Followed::Ended) => r.ended(),
            Ok(Followed::Interrupted) => {
                return interrupted(client, &mut r, interrupt.cancel).await;
            }
            Err(e) if !r.closed() => return fail(&e),
            Err(_) => return 0,
        }
        if r.closed() {
            return 0;
        }
        let outcome = r.outcome();
        if let Outcome::InputRequired { task_id, approval } = &outcome {
            if io.interactive {
                let mut stopped = false;
                let answer = ask(&outcome, &mut interrupt, &mut stopped).await;
                if stopped {
                    return interrupted(client, &mut r, interrupt.cancel).await;
                }
                if let Some(answer) = answer {
                    if approval.as_ref().is_some_and(Approval::is_decision) {
                        r.answered(answer == "yes");
                    }
                    r.resume();
                    events = match client.answer(task_id, &answer).await {
                        Ok(s) => s,
                        Err(e) => return fail(&e),
                    };
                    continue;
                }
            } else {
                r.say(&answer_hint(client.base_url(), task_id));
            }
        }
        return outcome.exit_code();
    }
}

/// Shows a task that has ended from its events (`events`, replayed from its start): its
/// tool uses, its questions with their answers, its text and its end, as `call` showed them
/// (`ended`, the task as it ended, holds the answers and ends the replay that lacks its
/// end); the exit code.
pub(super) async fn replay_task<O: Write, E: Write>(
    events: EventStream,
    ended: crate::protocol::v1::Task,
    json: bool,
    io: Io<O, E>,
    mut interrupt: Interrupt,
) -> i32 {
    let mut r = Renderer::new(io.out, io.err, json, false);
    r.replaying(&ended);
    match follow(&mut r, events, &mut interrupt).await {
        Ok(Followed::Ended) => {}
        Ok(Followed::Interrupted) => {
            r.interrupted();
            return EXIT_INTERRUPTED;
        }
        Err(e) if !r.closed() => return fail(&e),
        Err(_) => return 0,
    }
    if !r.decided() && !r.closed() {
        r.event(&Event {
            id: None,
            response: StreamResponse::Task(ended),
        });
    }
    r.ended();
    if r.closed() {
        return 0;
    }
    r.outcome().exit_code()
}

/// Shows one task (the answer of a blocking send, a task that has ended) like a stream that
/// ends with it; the exit code.
pub(super) fn show_task<O: Write, E: Write>(
    client: &Client,
    response: StreamResponse,
    json: bool,
    io: Io<O, E>,
) -> i32 {
    let ev = Event { id: None, response };
    let mut r = Renderer::new(io.out, io.err, json, false);
    r.event(&ev);
    r.ended();
    if r.closed() {
        return 0;
    }
    let outcome = r.outcome();
    if let Outcome::InputRequired { task_id, .. } = &outcome {
        r.say(&answer_hint(client.base_url(), task_id));
    }
    outcome.exit_code()
}

/// `agent-host call`: the exit code.
pub async fn run_call(args: CallArgs) -> i32 {
    let io = Io::terminal(args.connect.json);
    call_with(args, io, true).await
}

/// `agent-host call` writing to `out` and `err`, never asking on the terminal (what a
/// program embedding the command, or a test, uses); the exit code.
pub async fn run_call_to<O: Write, E: Write>(args: CallArgs, out: O, err: E) -> i32 {
    let io = Io {
        out,
        err,
        interactive: false,
        live: false,
        answer: None,
        follows_answer: false,
    };
    call_with(args, io, false).await
}

/// The decision an answer gives, when it is one (`yes`, `no`, ...).
fn decision_of(answer: &str) -> Option<bool> {
    match answer.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "allow" | "approve" => Some(true),
        "n" | "no" | "deny" | "reject" => Some(false),
        _ => None,
    }
}

/// An empty (or blank) message is a usage error, as MCP's `start_task` refuses an empty
/// prompt: nothing is sent, so no task starts with nothing to do.
fn check_message(args: &CallArgs) -> Result<(), ClientError> {
    if !args.message.trim().is_empty() {
        return Ok(());
    }
    Err(ClientError::Usage(if args.task.is_some() {
        "the answer is empty: give yes, no or the answer to the question".into()
    } else {
        "the message is empty: give the prompt, e.g. agent-host call URL \"Add a test\"".into()
    }))
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

/// `catch`: handle Ctrl-C while the task is followed (a terminal command).
async fn call_with<O: Write, E: Write>(args: CallArgs, mut io: Io<O, E>, catch: bool) -> i32 {
    if let Err(e) = check_message(&args) {
        return fail(&e);
    }
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
        io.answer = decision_of(&args.message);
        io.follows_answer = true;
    }
    if let Some(d) = &args.cwd {
        // The host takes only an absolute path; a relative one means the caller's folder.
        match std::path::absolute(d) {
            Ok(p) => req = req.metadata("cwd", p.to_string_lossy().into_owned()),
            Err(e) => return fail(&ClientError::Usage(format!("--cwd '{d}': {e}"))),
        }
    }
    if let Some(b) = budget_metadata(&args) {
        req = req.metadata("budget", b);
    }
    if let Some(a) = &args.approvals {
        req = req.metadata("approvals", a.clone());
    }
    let json = args.connect.json;
    let Io {
        mut out,
        mut err,
        interactive,
        live,
        answer,
        follows_answer,
    } = io;
    let io = Io {
        out: &mut out,
        err: &mut err,
        interactive,
        live,
        answer,
        follows_answer,
    };
    // The task the answer is about, for its change afterwards.
    let task_id = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let code = if args.no_stream {
        match client.send(req).await {
            Ok(resp) => {
                let response = match resp {
                    SendMessageResponse::Task(t) => StreamResponse::Task(t),
                    SendMessageResponse::Message(m) => StreamResponse::Message(m),
                };
                let ev = Event { id: None, response };
                note_task(&task_id, ev.task_id());
                show_task(&client, ev.response, json, io)
            }
            Err(e) => fail(&e),
        }
    } else {
        stream_answer(&client, &args, req, io, catch, &task_id).await
    };
    let task_id = task_id.lock().ok().and_then(|t| t.clone());
    match task_id {
        Some(t) => {
            let wanted = Wanted {
                apply: args.apply,
                fetch: args.fetch,
                url: &args.url,
                connect: &args.connect,
            };
            after_answer(&client, &wanted, &t, code, &mut out, &mut err).await
        }
        None => code,
    }
}

/// The streamed answer, Ctrl-C caught when `catch` (see [`Interrupt`]); the task's id goes
/// into `task_id` as soon as an event names it.
async fn stream_answer<O: Write, E: Write>(
    client: &Client,
    args: &CallArgs,
    req: Request,
    io: Io<O, E>,
    catch: bool,
    task_id: &std::sync::Arc<std::sync::Mutex<Option<String>>>,
) -> i32 {
    let mut interrupt = if catch {
        Interrupt::catch(args.cancel_on_interrupt)
    } else {
        Interrupt::none()
    };
    let opened = tokio::select! {
        opened = client.stream(req) => opened,
        () = interrupt.recv() => {
            let base = client.base_url();
            eprintln!(
                "^C: interrupted while sending; the task may have started: \
                 agent-host tasks list {base}"
            );
            return EXIT_INTERRUPTED;
        }
    };
    match opened {
        Ok(events) => {
            let seen = task_id.clone();
            let events = events.inspected(move |ev| {
                if let Ok(ev) = ev {
                    note_task(&seen, ev.task_id());
                }
            });
            drive(client, events, args.connect.json, io, interrupt).await
        }
        Err(e) => fail(&e),
    }
}

fn note_task(slot: &std::sync::Mutex<Option<String>>, id: Option<&str>) {
    if let (Ok(mut slot), Some(id)) = (slot.lock(), id) {
        if slot.is_none() {
            *slot = Some(id.to_string());
        }
    }
}

/// What to do with a task's change once the task is followed to its end: `--apply` and
/// `--fetch` of `call` and of `tasks watch`.
pub(super) struct Wanted<'a> {
    pub(super) apply: bool,
    pub(super) fetch: bool,
    /// The agent's base URL as given.
    pub(super) url: &'a str,
    pub(super) connect: &'a ConnectArgs,
}

/// The changed files after the answer, and `--apply` / `--fetch`; the exit code (1 when one
/// of them failed on an answer that was otherwise a success). Nothing after a usage error
/// or an interrupt (detached, the task going on, or canceled).
pub(super) async fn after_answer<O: Write, E: Write>(
    client: &Client,
    args: &Wanted<'_>,
    task_id: &str,
    code: i32,
    out: &mut O,
    err: &mut E,
) -> i32 {
    if code == EXIT_USAGE || code == EXIT_INTERRUPTED {
        return code;
    }
    let task = match client.get_task(task_id).await {
        Ok(t) => t,
        Err(e) if args.apply || args.fetch => return fail(&e).max(code),
        Err(_) => return code,
    };
    let done = matches!(code, 0 | 4);
    if (args.apply || args.fetch) && !done {
        let _ = writeln!(
            err,
            "agent-host: the task did not complete: its change is neither applied nor fetched"
        );
    }
    let act = super::changes::ChangeActions {
        apply: args.apply && done,
        fetch: args.fetch && done,
        base_url: args.url.to_string(),
        token: args.connect.token.clone(),
        show: !args.connect.json,
    };
    let dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let ok = super::changes::after_answer(&task, &act, &dir, out, err).await;
    if ok || code != 0 {
        code
    } else {
        1
    }
}
