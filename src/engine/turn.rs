//! One turn: the tokio task that owns a CLI process from spawn to reap.
//!
//! It reads the CLI's output, parses it into AgentEvents, maps those to task updates and
//! publishes them; it writes answers to the CLI; it enforces the idle and hard timeouts; it
//! stops the process group on cancel and shutdown. Whatever happens, it publishes exactly one
//! terminal state (the mapper guarantees at most one; `on_exit` at least one).

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::child::{Child, SpawnError};
use super::deadline::{after, Deadlines, Due};
use super::{attach, changes, input, Control, Inner, SessionArgs};
use super::{Launch, PromptRoute};
use crate::adapter::wire::{parser_for, TurnStart, WireParser};
use crate::adapter::AgentEvent;
use crate::protocol::v1::StreamResponse;
use crate::protocol::A2AError;
use crate::runner::{ExitInfo, Output};
use crate::task::{ExitReason, TaskEvent, TurnMapper};

/// Everything a turn needs to start.
pub(super) struct Turn {
    pub task_id: String,
    pub context_id: String,
    pub prompt: String,
    /// The `messageId` of the message that started the turn.
    pub message_id: String,
    pub session: SessionArgs,
    /// The working directory of this turn's process.
    pub cwd: std::path::PathBuf,
    pub notify: Arc<watch::Sender<u64>>,
    pub control: mpsc::UnboundedReceiver<Control>,
    /// The task ran before and this turn resumes it (after a host restart).
    pub continuing: bool,
    /// W3C trace context of the request, for the CLI's environment.
    pub traceparent: Option<String>,
    /// Tool calls, results and reasoning also as typed parts (the tool-trace extension).
    pub tool_trace: bool,
}

/// Lines of stderr kept for the failure message.
const STDERR_TAIL_LINES: usize = 10;
/// Bytes of each stderr line kept.
const STDERR_LINE_MAX: usize = 300;

/// The output of a program that exited is read until it has been quiet for `DRAIN_TICKS`
/// ticks of `DRAIN_TICK` (half a second): what it printed last is drained, but a background
/// process it left holding the pipes (a dev server) does not keep the turn open. That process
/// is stopped with the task. The count starts again after each piece of output is handled,
/// so a backlog the turn is still working through (lines the program wrote before it exited,
/// waiting in the pipe while each is stored) is read to its end however long storing it
/// takes; and a tick that comes late does not count, since the host was not running then (a
/// loaded machine) and its reader may not have had the chance to read what is waiting. No
/// line the program printed is dropped, on a slow store or a starved host alike.
const DRAIN_TICK: Duration = Duration::from_millis(50);
const DRAIN_TICKS: u32 = 10;
/// The longest the output is read after the program exited, when something it left behind
/// keeps printing (far more than a backlog of the pipe and the output channel takes).
const DRAIN_MAX: Duration = Duration::from_secs(30);

/// The binds of the context's own CLI state for this turn (its home made as needed), when
/// the adapter's sandbox keeps the CLI's state per context.
async fn context_state(
    inner: &Arc<Inner>,
    context_id: &str,
) -> Result<Option<Vec<crate::runner::sandbox::Bind>>, crate::home::HomeError> {
    let policy = inner.launch.sandbox.as_ref();
    let (Some(homes), Some(layout)) = (
        inner.config.homes.clone(),
        policy.and_then(|p| p.state.clone()),
    ) else {
        return Ok(None);
    };
    let user = policy.and_then(|p| p.run_as.clone());
    if let Some(u) = user
        .as_ref()
        .filter(|u| !u.can_reach(&homes.root().join("x")))
    {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(user = %u.name, homes = %homes.root().display(),
                "sandbox_user cannot reach the folder of the contexts' CLI homes (its modes keep the user out): the CLI's state is the user's own, shared by every task");
        });
        return Ok(None);
    }
    let ctx = context_id.to_string();
    tokio::task::spawn_blocking(move || homes.prepare(&ctx, &layout, user.as_ref()))
        .await
        .map_err(|e| crate::home::HomeError {
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })?
        .map(Some)
}

/// How the main loop ended.
enum End {
    /// Output reached EOF: wait for the exit code.
    Eof,
    /// The host stopped the process for this reason.
    Stopped(ExitReason, Option<tokio::sync::oneshot::Sender<()>>),
}

/// The turn comes boxed: as an argument of an async fn it stays in the future's state to the
/// end (once in `run`'s and once in `drive`'s), where a box costs a pointer each.
pub(super) async fn run(inner: Arc<Inner>, turn: Box<Turn>) {
    use tracing::Instrument;
    let span = tracing::info_span!("task", task = %turn.task_id, context = %turn.context_id, adapter = %inner.launch.adapter.id);
    if let Some(tp) = &turn.traceparent {
        crate::telemetry::set_remote_parent(&span, tp);
    }
    let task_id = turn.task_id.clone();
    let context_id = turn.context_id.clone();
    let notify = turn.notify.clone();
    // A panic in the turn (a bug) must not leave the task working with nothing running it
    // and its slot taken for good: the task fails and the slot is given back.
    let driven = std::panic::AssertUnwindSafe(drive(&inner, turn).instrument(span))
        .catch_unwind()
        .await;
    match driven {
        // Parked at its budget (the slot was given back before the question was published).
        Ok(true) => {}
        Ok(false) => inner.finish_turn(&task_id),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            drop(panic);
            crashed(&inner, &task_id, &context_id, &notify, &what).await;
            inner.finish_turn(&task_id);
        }
    }
}

/// A turn that panicked: logged, and its task (unless it already ended) failed.
async fn crashed(
    inner: &Arc<Inner>,
    task_id: &str,
    context_id: &str,
    notify: &watch::Sender<u64>,
    what: &str,
) {
    tracing::error!(task = %task_id, panic = %what, "the task's turn panicked; the task fails");
    let ended =
        matches!(inner.store.get(task_id).await, Ok(Some(s)) if s.task.status.state.is_terminal());
    if !ended {
        let events = TurnMapper::new(task_id, context_id).on_exit(ExitReason::Crashed);
        inner.publish(task_id, notify, events).await;
    }
}

/// Runs the turn to its terminal state; true when it stopped at a budget that asks (the
/// task waits for the answer with no program: parked, by the turn's teardown). The steps:
/// announce the turn, start the program, open its session, run the loop of its event
/// sources until one of them ends the turn, then the teardown.
async fn drive(inner: &Arc<Inner>, turn: Box<Turn>) -> bool {
    let Turn {
        task_id,
        context_id,
        prompt,
        message_id,
        session,
        cwd,
        notify,
        mut control,
        continuing,
        traceparent,
        tool_trace,
    } = *turn;
    // Checked before anything of the turn is made here, and again once its first update
    // is committed.
    if !held_here(inner, &task_id, &context_id, &notify).await {
        return false;
    }
    let (workspace, cwd) =
        changes::turn_workspace(inner.config.workspaces.as_ref(), &context_id, &cwd).await;
    let ends = Ends {
        task_id: &task_id,
        context_id: &context_id,
        prompt: &prompt,
        notify: &notify,
        workspace: workspace.as_ref(),
    };
    // A terminal update reported before the program exited, held for the `changes` artifact.
    let mut held = Vec::new();
    let (mut mapper, controls) = announce(inner, &ends, tool_trace, continuing).await;
    if !held_here(inner, &task_id, &context_id, &notify).await {
        return false;
    }
    let how = HowToStart {
        message_id: &message_id,
        session: &session,
        cwd: &cwd,
        traceparent: traceparent.as_deref(),
    };
    let started = match start_program(inner, &ends, &how, &controls, &mut mapper).await {
        Ok(s) => s,
        Err(why) => {
            let ev = mapper.on_exit(ExitReason::SpawnFailed(why));
            ends.publish(inner, ev, &mut held, true).await;
            return false;
        }
    };
    let launch = &inner.launch;
    let mut running = Running {
        inner,
        ends: &ends,
        held,
        retry_watch: crate::adapter::retry::RetryWatch::new(&launch.adapter),
        deadlines: Deadlines {
            idle: after(Instant::now(), launch.idle_timeout),
            hard: after(Instant::now(), launch.timeout),
            linger: None,
            drain: None,
            input: None,
            budget: controls.deadline(),
        },
        mapper,
        controls,
        started,
        cwd: cwd.to_string_lossy().into_owned(),
        stderr_tail: VecDeque::new(),
        events: Vec::new(),
        reply: Vec::new(),
        asking: false,
        session_recorded: false,
        drain_until: Instant::now(),
        drain_quiet: 0,
    };
    running.open(&session, continuing).await;
    let end = running.run(&mut control).await;
    running.teardown(end).await
}

/// Whether the turn may go on here. One of several hosts, the task may have been taken over
/// while it waited here (this host stalled past its lease): its program never starts on a
/// host that does not own it. Checked last right before the program starts, with the turn's
/// first update committed: a host that takes the task over after that finds it started,
/// and fails it rather than running it again.
async fn held_here(
    inner: &Arc<Inner>,
    task_id: &str,
    context_id: &str,
    notify: &watch::Sender<u64>,
) -> bool {
    match inner.may_run(task_id).await {
        Ok(true) => true,
        Ok(false) => {
            tracing::warn!("not starting a task another host took over");
            false
        }
        Err(e) => {
            tracing::error!(error = %e, "could not confirm this host still owns the task");
            let mut m = TurnMapper::new(task_id, context_id);
            let ev = m.on_exit(ExitReason::StoreFailed(format!(
                "agent-host could not confirm that this host still owns the task: {e}"
            )));
            inner.publish(task_id, notify, ev).await;
            false
        }
    }
}

/// The mapper of a turn and its budget and rules, with the turn's first update published.
async fn announce(
    inner: &Arc<Inner>,
    ends: &Ends<'_>,
    tool_trace: bool,
    continuing: bool,
) -> (TurnMapper, controls::TurnControls) {
    let mut mapper = TurnMapper::new(ends.task_id, ends.context_id)
        .with_redactor(inner.redactor.clone())
        .with_output_limit(inner.config.limits.max_output_bytes)
        .with_tool_trace(tool_trace);
    mapper.add_metadata("adapter", serde_json::json!(inner.launch.adapter.id));
    let controls = controls::TurnControls::load(inner, ends.task_id, ends.context_id).await;
    if let Some(b) = controls.metadata() {
        mapper.add_metadata("budget", b);
    }
    let started = if continuing {
        // Its text goes on the answer the task has; a task that has none yet (it asked a
        // question before any answer) starts it, as a turn that was not cut off would.
        if has_answer(inner, ends.task_id).await {
            mapper.continue_answer();
        }
        mapper.resumed(if controls::continues_at_budget(ends.prompt) {
            if inner.launch.can_resume() {
                "Continuing the agent's session with the raised budget"
            } else {
                "Starting the agent again on the request with the raised budget (it cannot resume its session)"
            }
        } else {
            "Resuming the agent's session after an agent-host restart"
        })
    } else {
        mapper.started()
    };
    inner.publish(ends.task_id, ends.notify, started).await;
    (mapper, controls)
}

/// Whether the task has an answer artifact already (true when the store cannot say: a
/// piece added to an answer the task lacks is less harm than one that replaces its answer).
async fn has_answer(inner: &Arc<Inner>, task_id: &str) -> bool {
    match inner.store.get(task_id).await {
        Ok(Some(snap)) => snap
            .task
            .artifacts
            .iter()
            .any(|a| a.artifact_id == crate::task::mapping::ANSWER_ARTIFACT),
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e, "could not read whether the task has an answer yet");
            true
        }
    }
}

/// What starting a turn's program takes besides the turn's ids and prompt.
struct HowToStart<'a> {
    message_id: &'a str,
    session: &'a SessionArgs,
    cwd: &'a std::path::Path,
    traceparent: Option<&'a str>,
}

/// A turn's program, started, and what lives as long as it.
struct Started {
    parser: Box<dyn WireParser>,
    proc: Box<dyn Child>,
    egress: Option<crate::egress::TaskProxy>,
    /// Removed when the turn is over (dropped with the turn, after the program is reaped).
    _prompt_file: Option<PromptFile>,
}

/// Starts the turn's program: its parser, the prompt's file when the prompt goes in one, the
/// spawn spec (budget flags, attachments, egress proxy, workspace, trace context). The
/// error is the task's failure message.
async fn start_program(
    inner: &Arc<Inner>,
    ends: &Ends<'_>,
    how: &HowToStart<'_>,
    controls: &controls::TurnControls,
    mapper: &mut TurnMapper,
) -> Result<Started, String> {
    let launch = &inner.launch;
    let Some(parser) = parser_for(&launch.adapter) else {
        return Err(format!("unknown wire format '{}'", launch.adapter.wire));
    };
    let (task_id, prompt) = (ends.task_id, ends.prompt);
    // A long prompt that goes in a file: written now, removed when the turn ends.
    let prompt_file = if launch.prompt_route(prompt) == PromptRoute::File {
        match PromptFile::write(launch, how.cwd, task_id, prompt).await {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::error!(error = %e, "could not write the prompt's file for the agent");
                return Err(
                    "the prompt could not be written for the agent (see the host log)".into(),
                );
            }
        }
    } else {
        None
    };
    let state = match context_state(inner, ends.context_id).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "could not make the context's CLI home");
            return Err("the context's CLI home could not be made (see the host log)".into());
        }
    };
    // The spec is built and handed over in a block of its own: kept in a local of this
    // future, its few hundred bytes would stay in every live task's state to its end.
    let (spawning, egress) = {
        let mut spec = launch.spawn_spec_in(prompt, how.message_id, how.session, how.cwd, task_id);
        if let (Some(p), Some(binds)) = (spec.sandbox.as_mut(), state) {
            p.binds = binds;
        }
        let limits = controls::budget_args(&launch.adapter.budget_args, &controls.meter);
        spec.args.splice(0..0, limits);
        crate::engine::launch::reveal_attachments(&mut spec, task_id, &inner.work_dirs());
        let egress = super::proxy::attach(&mut spec, task_id);
        if let Some(w) = ends.workspace {
            crate::engine::launch::mount_workspace(&mut spec, &w.all, &w.ws);
        }
        if let Some(tp) = how.traceparent {
            spec.env.retain(|(k, _)| k != "TRACEPARENT");
            spec.env.push(("TRACEPARENT".into(), tp.to_string()));
            mapper.add_metadata("traceparent", serde_json::json!(tp));
        }
        (inner.spawner.spawn(spec), egress)
    };
    let proc = match spawning.await {
        Ok(p) => p,
        Err(SpawnError::Runner(crate::runner::RunnerError::Sandbox(
            e @ crate::runner::sandbox::SandboxError::Link(_),
        ))) => {
            // A folder of the task replaced by a link: said to the caller, whose folder it is.
            tracing::warn!(error = %e, "a folder of the task's sandbox is a link");
            return Err(format!("the agent was not started: {e}"));
        }
        Err(SpawnError::Runner(e)) => {
            metrics::counter!("agent_host_spawn_failures_total", "adapter" => launch.adapter.id.clone())
                .increment(1);
            tracing::warn!(error = %e, "could not start the agent");
            return Err("the agent's program could not be started (see the host log)".into());
        }
        Err(e @ SpawnError::Internal(_)) => {
            tracing::error!(error = %e, "spawn task failed");
            return Err("internal error".into());
        }
    };
    tracing::info!(pid = proc.pid(), "agent started");
    Ok(Started {
        parser,
        proc,
        egress,
        _prompt_file: prompt_file,
    })
}

/// A turn whose program runs: the state its event sources' handlers share. Each handler
/// (`on_control`, `on_output`, `on_timer`) says whether the turn goes on or how it ends;
/// [`Running::teardown`] is the one place a turn ends.
struct Running<'a> {
    inner: &'a Arc<Inner>,
    ends: &'a Ends<'a>,
    held: Vec<StreamResponse>,
    mapper: TurnMapper,
    controls: controls::TurnControls,
    started: Started,
    retry_watch: Option<crate::adapter::retry::RetryWatch>,
    /// The working directory, as the rules match paths against it.
    cwd: String,
    stderr_tail: VecDeque<String>,
    /// Reused for each output line: the events parsed from it, and the parser's reply.
    events: Vec<AgentEvent>,
    reply: Vec<u8>,
    /// After the CLI reported the end of its turn it gets the cancel grace to exit by itself
    /// (`linger`).
    deadlines: Deadlines,
    /// The agent waits for an answer: its slot is given back meanwhile (see `schedule`).
    asking: bool,
    session_recorded: bool,
    drain_until: Instant,
    drain_quiet: u32,
}

impl Running<'_> {
    /// Records the program's process group, tells the parser the context's earlier turns
    /// when the session is resumed, and writes the parser's opening message.
    async fn open(&mut self, session: &SessionArgs, continuing: bool) {
        let (inner, ends) = (self.inner, self.ends);
        let proc = &mut self.started.proc;
        if let Err(e) = inner
            .store
            .record_process(ends.task_id, proc.pid(), proc.start_ticks())
            .await
        {
            tracing::warn!(error = %e, "could not record the agent's process group");
        }
        let (session_id, resume) = match session {
            SessionArgs::New(s) => (Some(s.as_str()), false),
            SessionArgs::Resume(s) => (Some(s.as_str()), true),
            SessionArgs::None => (None, false),
        };
        let parser = &mut self.started.parser;
        if resume || continuing {
            let earlier = earlier_tasks(inner, ends.context_id, ends.task_id).await;
            if !earlier.is_empty() {
                parser.set_history(&crate::task::history::earlier_turns(&earlier));
            }
        }
        let opening = parser.start(&TurnStart {
            prompt: ends.prompt,
            session_id,
            resume,
            cwd: &self.cwd,
            model: inner.launch.model.as_deref(),
        });
        if !opening.is_empty() {
            if let Err(e) = proc.write_stdin(&opening).await {
                tracing::warn!(error = %e, "could not write the opening message to the agent");
            }
        }
    }

    /// The loop: waits for the first of the control channel, the program's output and the
    /// timer, and hands it to its handler, until one ends the turn.
    async fn run(&mut self, control: &mut mpsc::UnboundedReceiver<Control>) -> End {
        let timer = tokio::time::sleep_until(self.deadlines.next(true));
        tokio::pin!(timer);
        loop {
            // The idle timeout counts while the agent works (not while it waits for an
            // answer, nor once it ended its turn).
            let idle_counts =
                !self.mapper.state().is_interrupted() && self.deadlines.linger.is_none();
            if let Some(at) =
                self.deadlines
                    .reset_to(timer.deadline(), timer.is_elapsed(), idle_counts)
            {
                timer.as_mut().reset(at);
            }
            let step = tokio::select! {
                ctl = control.recv() => self.on_control(ctl).await,
                out = self.started.proc.next_or_exit() => self.on_output(out).await,
                () = &mut timer => self.on_timer(idle_counts).await,
            };
            if let ControlFlow::Break(end) = step {
                return end;
            }
        }
    }

    async fn publish(&mut self, updates: Vec<StreamResponse>, exited: bool) -> bool {
        self.ends
            .publish(self.inner, updates, &mut self.held, exited)
            .await
    }

    fn idle_again(&mut self) {
        self.deadlines.idle = after(Instant::now(), self.inner.launch.idle_timeout);
    }

    /// A command for the task: a message for the program, a cancel, the host's shutdown.
    async fn on_control(&mut self, ctl: Option<Control>) -> ControlFlow<End> {
        match ctl {
            Some(Control::Reply(msg, ack)) => {
                let _ = ack.send(self.on_reply(*msg).await);
                ControlFlow::Continue(())
            }
            Some(Control::Cancel(ack)) => {
                ControlFlow::Break(End::Stopped(ExitReason::Canceled, Some(ack)))
            }
            Some(Control::Shutdown) | None => {
                ControlFlow::Break(End::Stopped(ExitReason::Shutdown, None))
            }
        }
    }

    /// Passes a message to the program (the answer to its question, or a message while it
    /// works) and stores it; the stored message's sequence number.
    async fn on_reply(&mut self, msg: crate::protocol::v1::Message) -> Result<u64, A2AError> {
        let (proc, parser) = (self.started.proc.as_mut(), self.started.parser.as_mut());
        let note = if self.mapper.pending_approval().is_some() || self.mapper.state().is_terminal()
        {
            Some(deliver_answer(proc, parser, &mut self.mapper, &msg).await?)
        } else {
            deliver_message(proc, parser, self.ends.task_id, &msg).await?;
            None
        };
        let mut ev = vec![TaskEvent::UserMessage(msg)];
        if let Some(note) = note {
            ev.extend(
                self.mapper
                    .resumed(&note)
                    .into_iter()
                    .map(TaskEvent::Stream),
            );
        }
        let stored = self
            .inner
            .publish_events(self.ends.task_id, self.ends.notify, ev)
            .await;
        self.idle_again();
        self.track_question();
        stored.ok_or_else(|| {
            A2AError::Internal("the answer reached the agent but could not be stored".into())
        })
    }

    fn track_question(&mut self) {
        let was = self.asking;
        self.asking = self.inner.track_question(
            self.ends.task_id,
            self.asking,
            self.mapper.state(),
            &mut self.deadlines,
        );
        // The time budget does not count the wait for the caller: its clock stops, and a
        // question waiting is never swapped for the budget's.
        if self.asking != was {
            self.controls.set_waiting(self.asking);
            self.deadlines.budget = self.controls.deadline();
        }
    }

    /// What the program printed, or its exit (its output is then drained).
    async fn on_output(&mut self, out: Result<Option<Output>, ExitInfo>) -> ControlFlow<End> {
        let output = matches!(out, Ok(Some(_)));
        let leader_exited = self.deadlines.drain.is_some();
        let step = match out {
            Err(exit) => {
                tracing::debug!(code = ?exit.code, signal = ?exit.signal, "the agent exited; draining its output");
                self.drain_until = Instant::now() + DRAIN_MAX;
                self.deadlines.drain = Some(Instant::now() + DRAIN_TICK);
                ControlFlow::Continue(())
            }
            Ok(Some(Output::Line(line))) => self.on_line(line).await,
            Ok(Some(Output::Stderr(line))) => self.on_stderr(&line).await,
            Ok(Some(Output::TooLong { bytes })) => {
                self.idle_again();
                tracing::warn!(
                    bytes,
                    "the agent printed a line longer than the limit; skipped"
                );
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Break(End::Eof),
        };
        if step.is_continue() && output && leader_exited {
            // Handled: the quiet count starts now (storing the line may have taken longer
            // than the whole wait while more lines were waiting).
            self.drain_quiet = 0;
            self.deadlines.drain = Some(Instant::now() + DRAIN_TICK);
        }
        step
    }

    /// A line of the program's output: parsed, mapped, published, answered.
    async fn on_line(&mut self, line: String) -> ControlFlow<End> {
        let lingering = self.deadlines.linger.is_some();
        self.idle_again();
        let (mut events, mut reply) = (
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.reply),
        );
        events.clear();
        reply.clear();
        self.started
            .parser
            .parse_line(&line, &mut events, &mut reply);
        // The events own what they need of it: a long line is not held twice while they
        // are stored.
        drop(line);
        note_refusals(self.started.egress.as_ref(), &mut self.mapper);
        let was_terminal = self.mapper.state().is_terminal();
        let mut updates = Vec::new();
        let mut budget_stop = None;
        for ev in events.drain(..) {
            // At a budget the program is stopped: what it reported after the event that
            // reached it is not mapped.
            if budget_stop.is_none() {
                budget_stop = self.map_event(ev, &mut updates).await;
            }
        }
        self.events = events;
        if !was_terminal && self.mapper.state().is_terminal() {
            note_limit(self.started.proc.as_ref(), &mut updates);
        }
        if !self.publish(updates, false).await && !self.mapper.state().is_terminal() {
            // What the agent does can no longer be kept: stop it, and end the task.
            let reason = ExitReason::StoreFailed(self.inner.health.failure());
            return ControlFlow::Break(End::Stopped(reason, None));
        }
        if let Some(reason) = budget_stop {
            return ControlFlow::Break(End::Stopped(reason, None));
        }
        self.track_question();
        let proc = &mut self.started.proc;
        if !reply.is_empty() {
            if let Err(e) = proc.write_stdin(&reply).await {
                tracing::debug!(error = %e, "could not answer the agent");
            }
        }
        self.reply = reply;
        if self.mapper.state().is_terminal() && !lingering {
            proc.close_stdin();
            self.deadlines.linger = Some(after(Instant::now(), self.inner.launch.cancel_grace));
        }
        ControlFlow::Continue(())
    }

    /// One event of the program into `updates`, unless a rule answers it; the reason to
    /// stop the program when the event reached a budget.
    async fn map_event(
        &mut self,
        ev: AgentEvent,
        updates: &mut Vec<StreamResponse>,
    ) -> Option<ExitReason> {
        if !self.mapper.state().is_terminal() {
            if let Some(stop) = self.controls.on_event(&ev, &mut self.mapper) {
                return Some(stop);
            }
        }
        if let Some(ruled) = self.controls.rule(&ev, &self.cwd) {
            if let Some(bytes) = self.started.parser.encode_decision(&ruled.answer) {
                if let Err(e) = self.started.proc.write_stdin(&bytes).await {
                    tracing::debug!(error = %e, "could not answer the agent");
                }
                updates.extend(self.mapper.rule_decided(&ruled.text, ruled.data));
                return None;
            }
        }
        match &ev {
            AgentEvent::Init {
                session_id: Some(s),
                ..
            } if !self.session_recorded => {
                self.inner.set_session(self.ends.context_id, s).await;
                self.session_recorded = true;
            }
            AgentEvent::Thinking { text } => tracing::trace!(thinking = %text),
            AgentEvent::Usage(u) => count_usage(&self.inner.launch.adapter.id, u),
            AgentEvent::Warning { message } => tracing::debug!(%message, "agent output"),
            _ => {}
        }
        updates.extend(self.mapper.on_event(ev));
        None
    }

    /// A line of the program's stderr: progress (some CLIs report their work only there),
    /// except the retries CLIs print there while they are stuck (Gemini retries a failing
    /// API for minutes); kept for the failure message.
    async fn on_stderr(&mut self, line: &str) -> ControlFlow<End> {
        tracing::debug!(stderr = %line);
        if crate::adapter::retry::is_progress(self.retry_watch.as_ref(), line) {
            self.idle_again();
        }
        if self.stderr_tail.len() == STDERR_TAIL_LINES {
            self.stderr_tail.pop_front();
        }
        self.stderr_tail.push_back(truncate(line, STDERR_LINE_MAX));
        // A CLI that keeps retrying a failing model request: the adapter's retry limit ends
        // the turn with the CLI's own error.
        let Some(ev) = self.retry_watch.as_mut().and_then(|w| w.on_line(line)) else {
            return ControlFlow::Continue(());
        };
        if !self.mapper.state().is_terminal() {
            let updates = self.mapper.on_event(ev);
            self.publish(updates, false).await;
            if self.mapper.state().is_terminal() {
                let exit = ExitInfo {
                    code: None,
                    signal: None,
                };
                return ControlFlow::Break(End::Stopped(exited(exit, &self.stderr_tail), None));
            }
        }
        ControlFlow::Continue(())
    }

    /// A deadline: the drain's quiet tick, the linger after the turn's end, a timeout, the
    /// budget's clock.
    async fn on_timer(&mut self, idle_counts: bool) -> ControlFlow<End> {
        let now = Instant::now();
        let launch = &self.inner.launch;
        let stop = |reason| ControlFlow::Break(End::Stopped(reason, None));
        match self.deadlines.due(now, idle_counts) {
            Some(Due::Drain) => {
                let tick = self.deadlines.drain.unwrap_or(now);
                // A late tick: the host was not running, so this was no quiet of the output.
                if now.saturating_duration_since(tick) < DRAIN_TICK {
                    self.drain_quiet += 1;
                }
                if self.drain_quiet >= DRAIN_TICKS || now >= self.drain_until {
                    tracing::debug!(
                        "the agent exited but something it started still holds its output"
                    );
                    return ControlFlow::Break(End::Eof);
                }
                self.deadlines.drain = Some(now + DRAIN_TICK);
                ControlFlow::Continue(())
            }
            Some(Due::Linger) => {
                tracing::debug!("the agent finished its turn but did not exit; stopping it");
                let exit = self.started.proc.terminate(launch.cancel_grace).await;
                stop(exited(exit, &self.stderr_tail))
            }
            Some(Due::Hard) => stop(ExitReason::HardTimeout {
                secs: launch.timeout.as_secs(),
            }),
            Some(Due::Idle) => stop(ExitReason::IdleTimeout {
                secs: launch.idle_timeout.as_secs(),
            }),
            Some(Due::Input) => stop(ExitReason::InputExpired {
                secs: self.inner.config.limits.input_timeout.as_secs(),
            }),
            Some(Due::Budget) => {
                self.deadlines.budget = None;
                match self.controls.on_clock() {
                    Some(reason) => stop(reason),
                    None => ControlFlow::Continue(()),
                }
            }
            // A deadline moved later (output came): the timer is set again by the loop.
            None => ControlFlow::Continue(()),
        }
    }

    /// The one place a turn ends: the program reaped (or stopped), the terminal update
    /// published, the process group forgotten. True when the task is parked at a budget.
    async fn teardown(mut self, end: End) -> bool {
        note_refusals(self.started.egress.as_ref(), &mut self.mapper);
        self.started.egress = None;
        let parked = match end {
            End::Eof => {
                let reason = self.reap().await;
                self.finish_with(reason).await;
                false
            }
            End::Stopped(ExitReason::Shutdown, _)
                if self
                    .inner
                    .keeps_on_shutdown(self.ends.context_id, self.mapper.state()) =>
            {
                // Left exactly as a crash would leave it: the next start resumes the session
                // (or keeps waiting for the answer).
                let exit = self
                    .started
                    .proc
                    .terminate(self.inner.launch.cancel_grace)
                    .await;
                tracing::info!(code = ?exit.code, signal = ?exit.signal, state = ?self.mapper.state(), "agent stopped; the task is kept for the next start");
                false
            }
            End::Stopped(reason, ack) => {
                let parks = matches!(reason, ExitReason::BudgetPaused { .. })
                    && !self.mapper.state().is_terminal();
                let reason = self.stop(reason).await;
                if parks {
                    // Parked before the question is published: an answer to the task shown
                    // waiting finds it without a program (answered as a parked task, not
                    // sent to this turn, which reads no more answers), and its slot given
                    // back (a continue that started a turn before the park would have
                    // its slot taken back by it).
                    self.inner.park_turn(self.ends.task_id);
                }
                self.finish_with(reason).await;
                if let Some(ack) = ack {
                    let _ = ack.send(());
                }
                parks
            }
        };
        if let Err(e) = self.inner.store.forget_process(self.ends.task_id).await {
            tracing::warn!(error = %e, "could not forget the agent's process group");
        }
        parked
    }

    /// Waits for the program that closed its output to exit (stops it after the grace);
    /// why the turn ended.
    async fn reap(&mut self) -> ExitReason {
        let grace = self.inner.launch.cancel_grace;
        let proc = &mut self.started.proc;
        let exit = match tokio::time::timeout(grace, proc.wait(grace)).await {
            Ok(exit) => exit,
            Err(_) => proc.terminate(grace).await,
        };
        tracing::info!(code = ?exit.code, signal = ?exit.signal, "agent exited");
        match proc.limit_hit() {
            Some(limit) => ExitReason::LimitReached(limit),
            None => exited(exit, &self.stderr_tail),
        }
    }

    /// Stops the program the host ends the turn of (asking it first to end its turn, where
    /// its protocol can); why the turn ended.
    async fn stop(&mut self, reason: ExitReason) -> ExitReason {
        tracing::info!(reason = ?reason, "stopping the agent");
        let grace = self.inner.launch.cancel_grace;
        let proc = &mut self.started.proc;
        // A program still starting would read the interrupt only once it runs.
        if let Some(bytes) = self.started.parser.interrupt().filter(|_| !proc.starting()) {
            interrupt(proc.as_mut(), &bytes, grace).await;
        }
        let exit = proc.terminate(grace).await;
        tracing::info!(code = ?exit.code, signal = ?exit.signal, "agent stopped");
        match reason {
            // The turn may have finished properly just before being stopped.
            ExitReason::Exited { .. } => match proc.limit_hit() {
                Some(limit) => ExitReason::LimitReached(limit),
                None => exited(exit, &self.stderr_tail),
            },
            other => other,
        }
    }

    /// Publishes the turn's terminal update for `reason`, with the budget's final figures.
    async fn finish_with(&mut self, reason: ExitReason) {
        if let Some(b) = self.controls.metadata() {
            self.mapper.add_metadata("budget", b);
        }
        let ev = self.mapper.on_exit(reason);
        self.publish(ev, true).await;
    }
}

/// The connections the task's egress proxy refused so far, in the task's metadata
/// (`egressRefused`) from its next status update on.
fn note_refusals(egress: Option<&crate::egress::TaskProxy>, mapper: &mut TurnMapper) {
    if let Some(list) = egress.and_then(|e| e.log().take_changed()) {
        mapper.add_metadata("egressRefused", list);
    }
}

/// Where a turn's updates go, and its workspace.
struct Ends<'a> {
    task_id: &'a str,
    context_id: &'a str,
    prompt: &'a str,
    notify: &'a watch::Sender<u64>,
    workspace: Option<&'a changes::TurnWorkspace>,
}

impl Ends<'_> {
    /// Publishes `updates`; in a workspace, the turn's `changes` artifact goes just before
    /// the update that ends the turn (a terminal one held until the program `exited`).
    async fn publish(
        &self,
        inner: &Arc<Inner>,
        updates: Vec<StreamResponse>,
        held: &mut Vec<StreamResponse>,
        exited: bool,
    ) -> bool {
        let Some(tw) = self.workspace else {
            return inner.publish(self.task_id, self.notify, updates).await;
        };
        match changes::arrange(updates, held, exited) {
            changes::Step::Now(u) => inner.publish(self.task_id, self.notify, u).await,
            changes::Step::WithChanges(before, after) => {
                let first = inner.publish(self.task_id, self.notify, before).await;
                let mut rest: Vec<StreamResponse> =
                    changes::changes_update(tw, self.task_id, self.context_id, self.prompt)
                        .await
                        .into_iter()
                        .collect();
                rest.extend(after);
                inner.publish(self.task_id, self.notify, rest).await && first
            }
        }
    }
}

/// The file a turn's prompt was written to; removed when the turn is over (dropped after the
/// program is reaped, whichever way the turn ended).
struct PromptFile(std::path::PathBuf);

impl PromptFile {
    async fn write(
        launch: &Launch,
        cwd: &std::path::Path,
        task_id: &str,
        prompt: &str,
    ) -> Result<PromptFile, attach::AttachError> {
        let owner = launch.sandbox.as_ref().and_then(|p| p.run_as.clone());
        let (dir, task_id, prompt) = (cwd.to_path_buf(), task_id.to_string(), prompt.to_string());
        let path = dir.clone();
        tokio::task::spawn_blocking(move || {
            attach::write_prompt(&dir, &task_id, &prompt, owner.as_ref())
        })
        .await
        .map_err(|e| attach::AttachError::Io {
            path,
            source: std::io::Error::other(e),
        })?
        .map(PromptFile)
    }
}

impl Drop for PromptFile {
    fn drop(&mut self) {
        if let Err(e) = attach::remove_prompt(&self.0) {
            tracing::warn!(error = %e, "could not remove the prompt's file");
        }
    }
}

/// The other tasks of the context, oldest first (for a CLI that must be told the earlier turns).
async fn earlier_tasks(
    inner: &Inner,
    context_id: &str,
    task_id: &str,
) -> Vec<crate::protocol::v1::Task> {
    let query = crate::store::ListQuery {
        context_id: Some(context_id.to_string()),
        page_size: 100,
        ..Default::default()
    };
    match inner.store.list(&query, true).await {
        Ok(page) => {
            let mut tasks: Vec<_> = page.tasks.into_iter().filter(|t| t.id != task_id).collect();
            // The listing is newest first.
            tasks.reverse();
            tasks
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read the context's earlier turns");
            Vec::new()
        }
    }
}

/// A turn that ended by the agent's word while a process of it was killed at a limit (a
/// child at the memory limit, the agent going on): the update that ends it says so.
fn note_limit(proc: &dyn Child, updates: &mut [crate::protocol::v1::StreamResponse]) {
    if let Some(limit) = proc.limit_hit() {
        tracing::info!(%limit, "a process of the task ran into a limit");
        crate::task::mapping::note_limit(updates, &limit);
    }
}

fn exited(exit: ExitInfo, stderr_tail: &VecDeque<String>) -> ExitReason {
    let tail: Vec<&str> = stderr_tail.iter().map(String::as_str).collect();
    ExitReason::Exited {
        code: exit.code,
        signal: exit.signal,
        stderr_tail: tail.join("\n"),
    }
}

/// Writes the user's answer to the CLI. Returns a note for the status message.
async fn deliver_answer(
    proc: &mut dyn Child,
    parser: &mut dyn WireParser,
    mapper: &mut TurnMapper,
    msg: &crate::protocol::v1::Message,
) -> Result<String, A2AError> {
    let Some((id, kind)) = mapper.pending_approval() else {
        return Err(A2AError::UnsupportedOperation(
            "the task is not waiting for an answer".into(),
        ));
    };
    let decision = input::decision_of(msg, id, kind)?;
    let note = answer_note(kind, &decision);
    let Some(bytes) = parser.encode_decision(&decision) else {
        return Err(A2AError::UnsupportedOperation(
            "this agent cannot take answers".into(),
        ));
    };
    proc.write_stdin(&bytes).await.map_err(|e| {
        tracing::warn!(error = %e, "could not write the answer to the agent");
        A2AError::UnsupportedOperation("the agent is no longer reading answers".into())
    })?;
    Ok(note.to_string())
}

/// The status note of an answer the agent got: a question's answer is an answer (nothing was
/// approved), an approval's is approved or denied.
fn answer_note(kind: &str, decision: &crate::adapter::wire::Decision) -> &'static str {
    match (kind, decision.allow) {
        ("question", true) => "Answered; the agent continues with the answer",
        ("question", false) => "Declined; the agent continues",
        (_, true) => "Approved; the agent continues",
        (_, false) => "Denied; the agent continues",
    }
}

/// Writes a message from the client to a CLI that works (and reads messages meanwhile).
async fn deliver_message(
    proc: &mut dyn Child,
    parser: &mut dyn WireParser,
    task_id: &str,
    msg: &crate::protocol::v1::Message,
) -> Result<(), A2AError> {
    let Some(bytes) = parser.encode_message(&input::prompt_of(msg, None), &msg.message_id) else {
        return Err(A2AError::UnsupportedOperation(format!(
            "task {task_id} is working and this agent takes no messages while it works; wait for input-required, or cancel it"
        )));
    };
    proc.write_stdin(&bytes).await.map_err(|e| {
        tracing::warn!(error = %e, "could not write the message to the agent");
        A2AError::UnsupportedOperation(format!(
            "task {task_id} is working and its agent no longer reads messages; wait for it to finish, or cancel it"
        ))
    })
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Asks the CLI to end its turn by itself, and gives it `grace` to finish its output. What
/// it prints meanwhile is not mapped: the task ends the way the host decided.
async fn interrupt(proc: &mut dyn Child, bytes: &[u8], grace: Duration) {
    if proc.write_stdin(bytes).await.is_err() {
        return;
    }
    proc.close_stdin();
    let drain = async { while proc.next().await.is_some() {} };
    if tokio::time::timeout(grace, drain).await.is_err() {
        tracing::debug!("the agent did not end its turn after the interrupt");
    }
}

/// Tokens and cost a CLI reported, as metrics.
fn count_usage(adapter: &str, u: &crate::adapter::Usage) {
    for (kind, n) in [("input", u.input_tokens), ("output", u.output_tokens)] {
        if let Some(n) = n {
            metrics::counter!("agent_host_tokens_total", "adapter" => adapter.to_string(), "kind" => kind)
                .increment(n);
        }
    }
    if let Some(c) = u.cost_usd.filter(|c| crate::policy::budget::usable_usd(*c)) {
        metrics::gauge!("agent_host_cost_usd_total", "adapter" => adapter.to_string()).increment(c);
    }
}

pub(super) mod controls;

#[cfg(test)]
mod tests;
