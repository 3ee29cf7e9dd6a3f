//! One turn: the tokio task that owns a CLI process from spawn to reap.
//!
//! It reads the CLI's output, parses it into AgentEvents, maps those to task updates and
//! publishes them; it writes answers to the CLI; it enforces the idle and hard timeouts; it
//! stops the process group on cancel and shutdown. Whatever happens, it publishes exactly one
//! terminal state (the mapper guarantees at most one; `on_exit` at least one).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::child::{Child, SpawnError};
use super::deadline::{Deadlines, Due};
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
    if drive(&inner, turn).instrument(span).await {
        inner.park_turn(&task_id);
    } else {
        inner.finish_turn(&task_id);
    }
}

/// Runs the turn to its terminal state; true when it stopped at a budget that asks (the
/// task waits for the answer with no program: parked).
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
    let launch = &inner.launch;
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
    let mut mapper = TurnMapper::new(&task_id, &context_id)
        .with_redactor(inner.redactor.clone())
        .with_output_limit(inner.config.limits.max_output_bytes)
        .with_tool_trace(tool_trace);
    mapper.add_metadata("adapter", serde_json::json!(launch.adapter.id));
    let mut controls = controls::TurnControls::load(inner, &task_id, &context_id).await;
    if let Some(b) = controls.metadata() {
        mapper.add_metadata("budget", b);
    }
    let started = if continuing {
        mapper.continue_answer();
        mapper.resumed(if prompt == controls::CONTINUE_PROMPT {
            "Continuing the agent's session with the raised budget"
        } else {
            "Resuming the agent's session after an agent-host restart"
        })
    } else {
        mapper.started()
    };
    inner.publish(&task_id, &notify, started).await;

    let Some(mut parser) = parser_for(&launch.adapter) else {
        let ev = mapper.on_exit(ExitReason::SpawnFailed(format!(
            "unknown wire format '{}'",
            launch.adapter.wire
        )));
        ends.publish(inner, ev, &mut held, true).await;
        return false;
    };

    // A long prompt that goes in a file: written now, removed when the turn ends.
    let _prompt_file = if launch.prompt_route(&prompt) == PromptRoute::File {
        match PromptFile::write(launch, &cwd, &task_id, &prompt).await {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::error!(error = %e, "could not write the prompt's file for the agent");
                let ev = mapper.on_exit(ExitReason::SpawnFailed(
                    "the prompt could not be written for the agent (see the host log)".into(),
                ));
                ends.publish(inner, ev, &mut held, true).await;
                return false;
            }
        }
    } else {
        None
    };
    let state = match context_state(inner, &context_id).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "could not make the context's CLI home");
            let ev = mapper.on_exit(ExitReason::SpawnFailed(
                "the context's CLI home could not be made (see the host log)".into(),
            ));
            ends.publish(inner, ev, &mut held, true).await;
            return false;
        }
    };
    // The spec is built and handed over in a block of its own: kept in a local of this
    // future, its few hundred bytes would stay in every live task's state to its end.
    let (spawning, egress) = {
        let mut spec = launch.spawn_spec_in(&prompt, &message_id, &session, &cwd, &task_id);
        if let (Some(p), Some(binds)) = (spec.sandbox.as_mut(), state) {
            p.binds = binds;
        }
        let limits = controls::budget_args(&launch.adapter.budget_args, &controls.meter);
        spec.args.splice(0..0, limits);
        crate::engine::launch::reveal_attachments(&mut spec, &task_id, &inner.work_dirs());
        let egress = crate::egress::attach(&mut spec, &task_id);
        if let Some(w) = &workspace {
            crate::engine::launch::mount_workspace(&mut spec, &w.all, &w.ws);
        }
        if let Some(tp) = &traceparent {
            spec.env.retain(|(k, _)| k != "TRACEPARENT");
            spec.env.push(("TRACEPARENT".into(), tp.clone()));
            mapper.add_metadata("traceparent", serde_json::json!(tp));
        }
        (inner.spawner.spawn(spec), egress)
    };
    let mut proc = match spawning.await {
        Ok(p) => p,
        Err(SpawnError::Runner(e)) => {
            metrics::counter!("agent_host_spawn_failures_total", "adapter" => launch.adapter.id.clone())
                .increment(1);
            tracing::warn!(error = %e, "could not start the agent");
            let ev = mapper.on_exit(ExitReason::SpawnFailed(
                "the agent's program could not be started (see the host log)".into(),
            ));
            ends.publish(inner, ev, &mut held, true).await;
            return false;
        }
        Err(e @ SpawnError::Internal(_)) => {
            tracing::error!(error = %e, "spawn task failed");
            let ev = mapper.on_exit(ExitReason::SpawnFailed("internal error".into()));
            ends.publish(inner, ev, &mut held, true).await;
            return false;
        }
    };
    tracing::info!(pid = proc.pid(), "agent started");
    let pid = proc.pid();
    if let Err(e) = inner
        .store
        .record_process(&task_id, pid, proc.start_ticks())
        .await
    {
        tracing::warn!(error = %e, "could not record the agent's process group");
    }
    let (session_id, resume) = match &session {
        SessionArgs::New(s) => (Some(s.as_str()), false),
        SessionArgs::Resume(s) => (Some(s.as_str()), true),
        SessionArgs::None => (None, false),
    };
    if resume || continuing {
        let earlier = earlier_tasks(inner, &context_id, &task_id).await;
        if !earlier.is_empty() {
            parser.set_history(&crate::task::history::earlier_turns(&earlier));
        }
    }
    let mut retry_watch = crate::adapter::retry::RetryWatch::new(&launch.adapter);
    let cwd = cwd.to_string_lossy();
    let opening = parser.start(&TurnStart {
        prompt: &prompt,
        session_id,
        resume,
        cwd: &cwd,
        model: launch.model.as_deref(),
    });
    if !opening.is_empty() {
        if let Err(e) = proc.write_stdin(&opening).await {
            tracing::warn!(error = %e, "could not write the opening message to the agent");
        }
    }

    let grace = launch.cancel_grace;
    let mut stderr_tail: VecDeque<String> = VecDeque::new();
    let mut events: Vec<AgentEvent> = Vec::new();
    let mut reply: Vec<u8> = Vec::new();
    let idle = launch.idle_timeout;
    // After the CLI reported the end of its turn it gets `grace` to exit by itself (`linger`).
    let mut deadlines = Deadlines {
        idle: Instant::now() + idle,
        hard: Instant::now() + launch.timeout,
        linger: None,
        drain: None,
        input: None,
        budget: controls.deadline(),
    };
    // The agent waits for an answer: its slot is given back meanwhile (see `schedule`).
    let mut asking = false;
    let timer = tokio::time::sleep_until(deadlines.next(true));
    tokio::pin!(timer);
    let mut session_recorded = false;
    let mut drain_until = Instant::now();
    let mut drain_quiet = 0u32;

    let end = loop {
        let lingering = deadlines.linger.is_some();
        let leader_exited = deadlines.drain.is_some();
        // The idle timeout counts while the agent works (not while it waits for an answer,
        // nor once it ended its turn).
        let idle_counts = !mapper.state().is_interrupted() && !lingering;
        if let Some(at) = deadlines.reset_to(timer.deadline(), timer.is_elapsed(), idle_counts) {
            timer.as_mut().reset(at);
        }
        tokio::select! {
            ctl = control.recv() => match ctl {
                Some(Control::Reply(msg, ack)) => {
                    let res = if mapper.pending_approval().is_some() || mapper.state().is_terminal() {
                        deliver_answer(proc.as_mut(), parser.as_mut(), &mut mapper, &msg).await.map(Some)
                    } else {
                        deliver_message(proc.as_mut(), parser.as_mut(), &task_id, &msg).await.map(|()| None)
                    };
                    match res {
                        Ok(note) => {
                            let mut ev = vec![TaskEvent::UserMessage(*msg)];
                            if let Some(note) = note {
                                ev.extend(mapper.resumed(&note).into_iter().map(TaskEvent::Stream));
                            }
                            let stored = inner.publish_events(&task_id, &notify, ev).await;
                            deadlines.idle = Instant::now() + idle;
                            asking = inner.track_question(&task_id, asking, mapper.state(), &mut deadlines);
                            let _ = ack.send(stored.ok_or_else(|| A2AError::Internal(
                                "the answer reached the agent but could not be stored".into(),
                            )));
                        }
                        Err(e) => {
                            let _ = ack.send(Err(e));
                        }
                    }
                }
                Some(Control::Cancel(ack)) => break End::Stopped(ExitReason::Canceled, Some(ack)),
                Some(Control::Shutdown) | None => break End::Stopped(ExitReason::Shutdown, None),
            },
            out = proc.next_or_exit() => {
                let output = matches!(out, Ok(Some(_)));
                match out {
                    Err(exit) => {
                        tracing::debug!(code = ?exit.code, signal = ?exit.signal, "the agent exited; draining its output");
                        drain_until = Instant::now() + DRAIN_MAX;
                        deadlines.drain = Some(Instant::now() + DRAIN_TICK);
                    }
                    Ok(Some(Output::Line(line))) => {
                        deadlines.idle = Instant::now() + idle;
                        events.clear();
                        reply.clear();
                        parser.parse_line(&line, &mut events, &mut reply);
                        // The events own what they need of it: a long line is not held twice
                        // while they are stored.
                        drop(line);
                        note_refusals(egress.as_ref(), &mut mapper);
                        let was_terminal = mapper.state().is_terminal();
                        let mut updates = Vec::new();
                        let mut budget_stop = None;
                        for ev in events.drain(..) {
                            // At a budget the program is stopped: what it reported after
                            // the event that reached it is not mapped.
                            if budget_stop.is_some() {
                                continue;
                            }
                            if !mapper.state().is_terminal() {
                                budget_stop = controls.on_event(&ev, &mut mapper);
                            }
                            if budget_stop.is_some() {
                                continue;
                            }
                            if let Some(ruled) = controls.rule(&ev, &cwd) {
                                if let Some(bytes) = parser.encode_decision(&ruled.answer) {
                                    if let Err(e) = proc.write_stdin(&bytes).await {
                                        tracing::debug!(error = %e, "could not answer the agent");
                                    }
                                    updates.extend(mapper.rule_decided(&ruled.text, ruled.data));
                                    continue;
                                }
                            }
                            match &ev {
                                AgentEvent::Init { session_id: Some(s), .. } if !session_recorded => {
                                    inner.set_session(&context_id, s).await;
                                    session_recorded = true;
                                }
                                AgentEvent::Thinking { text } => tracing::trace!(thinking = %text),
                                AgentEvent::Usage(u) => count_usage(&launch.adapter.id, u),
                                AgentEvent::Warning { message } => tracing::debug!(%message, "agent output"),
                                _ => {}
                            }
                            updates.extend(mapper.on_event(ev));
                        }
                        if !was_terminal && mapper.state().is_terminal() {
                            note_limit(proc.as_ref(), &mut updates);
                        }
                        if !ends.publish(inner, updates, &mut held, false).await && !mapper.state().is_terminal() {
                            // What the agent does can no longer be kept: stop it, and end the task.
                            break End::Stopped(ExitReason::StoreFailed(inner.health.failure()), None);
                        }
                        if let Some(reason) = budget_stop {
                            break End::Stopped(reason, None);
                        }
                        asking = inner.track_question(&task_id, asking, mapper.state(), &mut deadlines);
                        if !reply.is_empty() {
                            if let Err(e) = proc.write_stdin(&reply).await {
                                tracing::debug!(error = %e, "could not answer the agent");
                            }
                        }
                        if mapper.state().is_terminal() && !lingering {
                            proc.close_stdin();
                            deadlines.linger = Some(Instant::now() + grace);
                        }
                    }
                    // Stderr is progress (some CLIs report their work only there), except the
                    // retries CLIs print there while they are stuck (Gemini retries a failing
                    // API for minutes).
                    Ok(Some(Output::Stderr(line))) => {
                        tracing::debug!(stderr = %line);
                        if crate::adapter::retry::is_progress(retry_watch.as_ref(), &line) {
                            deadlines.idle = Instant::now() + idle;
                        }
                        if stderr_tail.len() == STDERR_TAIL_LINES {
                            stderr_tail.pop_front();
                        }
                        stderr_tail.push_back(truncate(&line, STDERR_LINE_MAX));
                        // A CLI that keeps retrying a failing model request: the adapter's
                        // retry limit ends the turn with the CLI's own error.
                        if let Some(ev) = retry_watch.as_mut().and_then(|w| w.on_line(&line)) {
                            if !mapper.state().is_terminal() {
                                let updates = mapper.on_event(ev);
                                ends.publish(inner, updates, &mut held, false).await;
                                if mapper.state().is_terminal() {
                                    break End::Stopped(exited(ExitInfo { code: None, signal: None }, &stderr_tail), None);
                                }
                            }
                        }
                    }
                    Ok(Some(Output::TooLong { bytes })) => {
                        deadlines.idle = Instant::now() + idle;
                        tracing::warn!(bytes, "the agent printed a line longer than the limit; skipped");
                    }
                    Ok(None) => break End::Eof,
                }
                if output && leader_exited {
                    // Handled: the quiet count starts now (storing the line may have taken
                    // longer than the whole wait while more lines were waiting).
                    drain_quiet = 0;
                    deadlines.drain = Some(Instant::now() + DRAIN_TICK);
                }
            },
            () = &mut timer => {
                let now = Instant::now();
                match deadlines.due(now, idle_counts) {
                    Some(Due::Drain) => {
                        let tick = deadlines.drain.unwrap_or(now);
                        // A late tick: the host was not running, so this was no quiet of the output.
                        if now.saturating_duration_since(tick) < DRAIN_TICK {
                            drain_quiet += 1;
                        }
                        if drain_quiet >= DRAIN_TICKS || now >= drain_until {
                            tracing::debug!("the agent exited but something it started still holds its output");
                            break End::Eof;
                        }
                        deadlines.drain = Some(now + DRAIN_TICK);
                    }
                    Some(Due::Linger) => {
                        tracing::debug!("the agent finished its turn but did not exit; stopping it");
                        let exit = proc.terminate(grace).await;
                        break End::Stopped(exited(exit, &stderr_tail), None);
                    }
                    Some(Due::Hard) => {
                        break End::Stopped(ExitReason::HardTimeout { secs: launch.timeout.as_secs() }, None);
                    }
                    Some(Due::Idle) => {
                        break End::Stopped(ExitReason::IdleTimeout { secs: idle.as_secs() }, None);
                    }
                    Some(Due::Input) => {
                        let secs = inner.config.limits.input_timeout.as_secs();
                        break End::Stopped(ExitReason::InputExpired { secs }, None);
                    }
                    Some(Due::Budget) => {
                        deadlines.budget = None;
                        if let Some(reason) = controls.on_clock() {
                            break End::Stopped(reason, None);
                        }
                    }
                    // A deadline moved later (output came): the timer is set again above.
                    None => {}
                }
            }
        }
    };

    note_refusals(egress.as_ref(), &mut mapper);
    drop(egress);
    let mut parked = false;
    match end {
        End::Eof => {
            let exit = match tokio::time::timeout(grace, proc.wait(grace)).await {
                Ok(exit) => exit,
                Err(_) => proc.terminate(grace).await,
            };
            tracing::info!(code = ?exit.code, signal = ?exit.signal, "agent exited");
            let reason = match proc.limit_hit() {
                Some(limit) => ExitReason::LimitReached(limit),
                None => exited(exit, &stderr_tail),
            };
            if let Some(b) = controls.metadata() {
                mapper.add_metadata("budget", b);
            }
            let ev = mapper.on_exit(reason);
            ends.publish(inner, ev, &mut held, true).await;
        }
        End::Stopped(ExitReason::Shutdown, _)
            if inner.keeps_on_shutdown(&context_id, mapper.state()) =>
        {
            // Left exactly as a crash would leave it: the next start resumes the session
            // (or keeps waiting for the answer).
            let exit = proc.terminate(grace).await;
            tracing::info!(code = ?exit.code, signal = ?exit.signal, state = ?mapper.state(), "agent stopped; the task is kept for the next start");
        }
        End::Stopped(reason, ack) => {
            tracing::info!(reason = ?reason, "stopping the agent");
            parked = matches!(reason, ExitReason::BudgetPaused { .. });
            // A program still starting would read the interrupt only once it runs.
            if let Some(bytes) = parser.interrupt().filter(|_| !proc.starting()) {
                interrupt(proc.as_mut(), &bytes, grace).await;
            }
            let exit = proc.terminate(grace).await;
            tracing::info!(code = ?exit.code, signal = ?exit.signal, "agent stopped");
            let reason = match reason {
                // The turn may have finished properly just before being stopped.
                ExitReason::Exited { .. } => match proc.limit_hit() {
                    Some(limit) => ExitReason::LimitReached(limit),
                    None => exited(exit, &stderr_tail),
                },
                other => other,
            };
            if let Some(b) = controls.metadata() {
                mapper.add_metadata("budget", b);
            }
            let ev = mapper.on_exit(reason);
            parked = parked && mapper.state() == crate::protocol::v1::TaskState::InputRequired;
            ends.publish(inner, ev, &mut held, true).await;
            if let Some(ack) = ack {
                let _ = ack.send(());
            }
        }
    }
    if let Err(e) = inner.store.forget_process(&task_id).await {
        tracing::warn!(error = %e, "could not forget the agent's process group");
    }
    parked
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
    let Some(bytes) = parser.encode_decision(&decision) else {
        return Err(A2AError::UnsupportedOperation(
            "this agent cannot take answers".into(),
        ));
    };
    proc.write_stdin(&bytes).await.map_err(|e| {
        tracing::warn!(error = %e, "could not write the answer to the agent");
        A2AError::UnsupportedOperation("the agent is no longer reading answers".into())
    })?;
    Ok(if decision.allow {
        "Approved; the agent continues".to_string()
    } else {
        "Denied; the agent continues".to_string()
    })
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
    if let Some(c) = u.cost_usd {
        metrics::gauge!("agent_host_cost_usd_total", "adapter" => adapter.to_string()).increment(c);
    }
}

pub(super) mod controls;

#[cfg(test)]
mod tests;
