//! Which turn runs when: contexts, their queues, admission against `max_running` and
//! `max_queued`, the queue of turns waiting for a free slot.
//!
//! **Waiting tasks and slots.** A turn whose agent asks a question keeps its program alive
//! (it waits on its stdin for the answer), but it uses no CPU: it gives its running slot back
//! while it waits, and counts against a second, larger limit instead, `max_live` programs
//! alive at once (running or waiting). Otherwise twenty approvals fanned out on sixteen
//! slots deadlock an orchestrator that gathers every question before answering: sixteen
//! wait for answers that never come while four never start (issue 33). Stopping a waiting
//! program and resuming its session with the answer would free the memory too, but only
//! adapters that resume sessions could do it, and a CLI mid-approval cannot always be
//! resumed at the same tool call; the live limit bounds the memory instead. An answered task
//! takes its slot back at once, even over `max_running` (its program is already alive, and
//! an answer must not wait behind new work); new turns start again once the count is below
//! the limit.
//!
//! A synchronous state machine with no I/O: the engine holds it under its lock, and every
//! method returns what the engine must do (turns to start, tasks to end). Admission checks
//! and reserves in one call ([`Scheduler::admit`]), so a burst of concurrent sends cannot all
//! pass the check before any of them is counted, and a new context gets its owner in the same
//! call, so two callers racing one new `contextId` are never both accepted.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;

use crate::store::ContextRecord;

/// A turn waiting to start.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pending {
    pub task_id: String,
    pub prompt: String,
    /// The trace the request that made this turn belongs to.
    pub traceparent: Option<String>,
    /// The request activated the tool-trace extension.
    pub tool_trace: bool,
    /// The `messageId` of the message that started the turn (the adapter's `{message_id}`).
    pub message_id: String,
    /// The task ran before (a host restart cut it off): the turn resumes it.
    pub continuing: bool,
}

/// A turn to start now: it holds its context and a running slot.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Start {
    pub context_id: String,
    pub pending: Pending,
    /// The context's CLI session, to resume.
    pub session: Option<String>,
    /// The context's working directory (None: the adapter's).
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Default)]
struct Context {
    /// The task holding the context (running, waiting for a slot, or waiting for an answer).
    running: Option<String>,
    queue: VecDeque<Pending>,
    /// Admitted sends not yet enqueued.
    reserved: usize,
    session: Option<String>,
    /// The credential whose conversation this is.
    owner: Option<String>,
    /// The folder its turns work in: the one its first message chose, else the host's
    /// default at the time. None only for a context stored before folders were recorded
    /// (its turns work in the host's default).
    cwd: Option<PathBuf>,
    /// Its folder must be remembered: its first message chose it, or it was restored from
    /// the store (possibly another host's). A context in the host's default folder with
    /// nothing else to remember is forgotten; made again, it gets the same folder.
    keeps_cwd: bool,
}

impl Context {
    fn record(&self, context_id: &str) -> ContextRecord {
        ContextRecord {
            context_id: context_id.to_string(),
            session_id: self.session.clone(),
            owner: self.owner.clone(),
            cwd: self.cwd.as_ref().map(|p| p.to_string_lossy().into_owned()),
        }
    }

    /// Nothing to remember: no task, no session, no owner, no chosen directory.
    fn is_empty(&self) -> bool {
        self.running.is_none()
            && self.queue.is_empty()
            && self.reserved == 0
            && self.session.is_none()
            && self.owner.is_none()
            && !self.keeps_cwd
    }
}

/// Why a send is refused.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Refusal {
    ShuttingDown,
    /// The context belongs to another caller.
    NotOwner,
    /// The message asks for a working directory other than the context's.
    CwdDiffers,
    /// No free slot and the queue is full; `queued` tasks wait.
    Busy {
        queued: usize,
    },
}

/// Whether an admitted send will start at once or wait.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Reservation {
    Start,
    Queue,
}

/// An admitted send: its place is reserved until [`Scheduler::enqueue`] or
/// [`Scheduler::release`].
#[derive(Debug)]
#[must_use = "a ticket must be enqueued or released"]
pub(super) struct Ticket {
    pub context_id: String,
    reservation: Reservation,
    /// The context record to store when this send created the context.
    pub new_context: Option<ContextRecord>,
    /// The context's working directory, if it has one.
    pub context_cwd: Option<PathBuf>,
    /// What it waits for, when it does not start at once.
    pub wait: Option<Wait>,
}

/// What the engine does to cancel a task that is not terminal.
#[derive(Debug, PartialEq)]
pub(super) enum CancelPlan {
    /// A process runs it: stop the process (the turn ends the task).
    Running,
    /// Not running a process (queued, waiting for a slot, waiting for an answer after a
    /// restart, or not known here): end it; when it `holds_context`, call
    /// [`Scheduler::finish`] afterwards.
    Finalize {
        context_id: Option<String>,
        holds_context: bool,
    },
}

/// A task the scheduler knows about: admitted and not yet finished.
#[derive(Debug)]
struct Entry {
    context_id: String,
    /// It holds a running slot (its turn was started).
    slot: bool,
    /// Its turn waits for an answer: its slot is given back, its program counts as live.
    waiting: bool,
}

/// What an admitted task that does not start at once waits for.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Wait {
    /// A free running slot: its place in the queue (1 = next) when it was admitted, and the
    /// limits in the way.
    Slot {
        place: usize,
        running: usize,
        max_running: usize,
        live: usize,
        max_live: usize,
    },
    /// The task ahead of it in its context, and its place in the context's queue.
    Context { ahead: String, place: usize },
}

/// The scheduling state.
#[derive(Debug)]
pub(super) struct Scheduler {
    max_running: usize,
    max_queued: usize,
    /// Programs alive at once: running turns plus turns waiting for an answer.
    max_live: usize,
    /// Turns waiting for an answer (their program alive, their slot given back).
    waiting: usize,
    contexts: HashMap<String, Context>,
    tasks: HashMap<String, Entry>,
    /// Turns holding a slot (with a process, or starting one).
    running: usize,
    /// Turns whose context is free but which wait for a slot.
    ready: VecDeque<(String, Pending)>,
    reserved_start: usize,
    reserved_queue: usize,
    shutting_down: bool,
}

impl Scheduler {
    pub fn new(max_running: usize, max_queued: usize, max_live: usize) -> Scheduler {
        Scheduler {
            max_running,
            max_queued,
            max_live: max_live.max(max_running),
            waiting: 0,
            contexts: HashMap::new(),
            tasks: HashMap::new(),
            running: 0,
            ready: VecDeque::new(),
            reserved_start: 0,
            reserved_queue: 0,
            shutting_down: false,
        }
    }

    /// Turns holding a slot.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Turns whose program is alive but waits for an answer.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// What a turn that waits for a running slot waits for: its place in the queue (1 =
    /// next) and the limits in the way.
    fn slot_queue(&self) -> Wait {
        // Turns admitted to start that have not yet started hold their slot already: left
        // out, a queued task read "14 of 16 tasks running" with every slot taken.
        let running = self.running + self.reserved_start;
        Wait::Slot {
            place: self.ready.len() + self.reserved_queue + 1,
            running,
            max_running: self.max_running,
            live: running + self.waiting,
            max_live: self.max_live,
        }
    }

    /// What a task resumed now would wait for, when it would not start at once.
    pub fn resume_waits(&self) -> Option<Wait> {
        (!self.has_room()).then(|| self.slot_queue())
    }

    /// Whether one more turn may start now: a running slot free, and room for one more
    /// live program.
    fn has_room(&self) -> bool {
        let starting = self.running + self.reserved_start;
        starting < self.max_running && starting + self.waiting < self.max_live
    }

    /// The task's turn waits for an answer: it gives its slot back (its program stays
    /// alive, counted against `max_live`). Returns the turns that start in the slot.
    /// Nothing for a task without a slot or already waiting.
    pub fn wait_for_answer(&mut self, task_id: &str) -> Vec<Start> {
        match self.tasks.get_mut(task_id) {
            Some(e) if e.slot && !e.waiting => {
                e.waiting = true;
                self.running = self.running.saturating_sub(1);
                self.waiting += 1;
                self.fill_slots()
            }
            _ => Vec::new(),
        }
    }

    /// The task's turn works again (answered): it takes a slot back at once, even over
    /// `max_running` (see the module's doc).
    pub fn answered(&mut self, task_id: &str) {
        if let Some(e) = self.tasks.get_mut(task_id).filter(|e| e.waiting) {
            e.waiting = false;
            self.waiting = self.waiting.saturating_sub(1);
            self.running += 1;
        }
    }

    /// The task's turn ended but the task goes on, waiting for an answer with no program
    /// (stopped at its budget): it gives its slot back and keeps its context, until
    /// [`Scheduler::resume`] or [`Scheduler::finish`]. Returns the turns that start in the slot.
    pub fn park(&mut self, task_id: &str) -> Vec<Start> {
        if let Some(e) = self.tasks.get_mut(task_id) {
            if e.slot && e.waiting {
                self.waiting = self.waiting.saturating_sub(1);
            } else if e.slot {
                self.running = self.running.saturating_sub(1);
            }
            e.slot = false;
            e.waiting = false;
        }
        self.fill_slots()
    }

    /// Turns waiting: for their context, or for a slot.
    pub fn queued(&self) -> usize {
        self.ready.len() + self.contexts.values().map(|c| c.queue.len()).sum::<usize>()
    }

    #[cfg(test)]
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Admits a new task of `context_id` from `owner` (None: no authentication) that asks for
    /// working directory `cwd` (`default_cwd`: the adapter's, for contexts without one), and
    /// reserves its place. A context that does not exist yet is created with this owner and
    /// directory, in the same step.
    pub fn admit(
        &mut self,
        context_id: &str,
        owner: Option<&str>,
        cwd: Option<&PathBuf>,
        default_cwd: &PathBuf,
    ) -> Result<Ticket, Refusal> {
        if self.shutting_down {
            return Err(Refusal::ShuttingDown);
        }
        let queued = self.queued() + self.reserved_queue;
        let room = self.has_room();
        let new = !self.contexts.contains_key(context_id);
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        if new {
            ctx.owner = owner.map(str::to_string);
            // Recorded whatever its source, so that a host taking the context over runs
            // its turns in this folder, not in its own default.
            ctx.cwd = Some(cwd.unwrap_or(default_cwd).clone());
            ctx.keeps_cwd = cwd.is_some();
        } else {
            if !visible(&ctx.owner, owner) {
                return Err(Refusal::NotOwner);
            }
            let current = ctx.cwd.as_ref().unwrap_or(default_cwd);
            if cwd.is_some_and(|want| want != current) {
                return Err(Refusal::CwdDiffers);
            }
        }
        let busy = ctx.running.is_some() || !ctx.queue.is_empty() || ctx.reserved > 0;
        let reservation = if !busy && room {
            Reservation::Start
        } else if queued < self.max_queued {
            Reservation::Queue
        } else {
            if new {
                self.contexts.remove(context_id);
            }
            return Err(Refusal::Busy { queued });
        };
        let wait = match reservation {
            Reservation::Start => None,
            Reservation::Queue if busy => Some(Wait::Context {
                ahead: ctx.running.clone().unwrap_or_default(),
                place: ctx.queue.len() + ctx.reserved + 1,
            }),
            Reservation::Queue => Some(self.slot_queue()),
        };
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        ctx.reserved += 1;
        let ticket = Ticket {
            wait,
            context_id: context_id.to_string(),
            reservation,
            new_context: new.then(|| ctx.record(context_id)),
            context_cwd: ctx.cwd.clone(),
        };
        match reservation {
            Reservation::Start => self.reserved_start += 1,
            Reservation::Queue => self.reserved_queue += 1,
        }
        Ok(ticket)
    }

    fn unreserve(&mut self, ticket: &Ticket) {
        match ticket.reservation {
            Reservation::Start => self.reserved_start = self.reserved_start.saturating_sub(1),
            Reservation::Queue => self.reserved_queue = self.reserved_queue.saturating_sub(1),
        }
        if let Some(ctx) = self.contexts.get_mut(&ticket.context_id) {
            ctx.reserved = ctx.reserved.saturating_sub(1);
        }
    }

    /// Gives up an admitted send that could not be accepted after all (its task could not be
    /// stored). A context it created is forgotten unless something else uses it. Returns the
    /// turns that start in the slot it had reserved.
    pub fn release(&mut self, ticket: Ticket) -> Vec<Start> {
        self.unreserve(&ticket);
        let unused = self.contexts.get(&ticket.context_id).is_some_and(|c| {
            c.running.is_none() && c.queue.is_empty() && c.reserved == 0 && c.session.is_none()
        });
        if ticket.new_context.is_some() && unused {
            self.contexts.remove(&ticket.context_id);
        }
        self.fill_slots()
    }

    /// Starts turns waiting for a slot while slots are free.
    fn fill_slots(&mut self) -> Vec<Start> {
        let mut starts = Vec::new();
        while !self.shutting_down && self.has_room() {
            let Some((ctx, p)) = self.ready.pop_front() else {
                break;
            };
            starts.push(self.start(&ctx, p));
        }
        starts
    }

    /// Places an admitted task: behind its context's running turn, in the queue for a slot,
    /// or started. Returns the turns that start now (this one, or others when it did not use
    /// the slot it had reserved).
    pub fn enqueue(&mut self, ticket: Ticket, pending: Pending) -> Vec<Start> {
        self.unreserve(&ticket);
        let context_id = ticket.context_id;
        self.tasks.insert(
            pending.task_id.clone(),
            Entry {
                context_id: context_id.clone(),
                slot: false,
                waiting: false,
            },
        );
        let ctx = self.contexts.entry(context_id.clone()).or_default();
        let mut starts = Vec::new();
        if ctx.running.is_some() {
            ctx.queue.push_back(pending);
        } else {
            starts.extend(self.start_or_wait(&context_id, pending));
        }
        starts.extend(self.fill_slots());
        starts
    }

    /// Occupies the context with `p`, and starts it if a slot is free (else it waits in
    /// `ready`).
    fn start_or_wait(&mut self, context_id: &str, p: Pending) -> Option<Start> {
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        ctx.running = Some(p.task_id.clone());
        if !self.has_room() {
            self.ready.push_back((context_id.to_string(), p));
            return None;
        }
        Some(self.start(context_id, p))
    }

    fn start(&mut self, context_id: &str, pending: Pending) -> Start {
        self.running += 1;
        let entry = self
            .tasks
            .entry(pending.task_id.clone())
            .or_insert_with(|| Entry {
                context_id: context_id.to_string(),
                slot: false,
                waiting: false,
            });
        entry.slot = true;
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        Start {
            context_id: context_id.to_string(),
            pending,
            session: ctx.session.clone(),
            cwd: ctx.cwd.clone(),
        }
    }

    /// A task that held its context ended: frees its slot (if it had one) and its context;
    /// returns the turns that start now (the context's next, then those waiting for a slot).
    pub fn finish(&mut self, task_id: &str) -> Vec<Start> {
        let Some(entry) = self.tasks.remove(task_id) else {
            return Vec::new();
        };
        if entry.slot && entry.waiting {
            self.waiting = self.waiting.saturating_sub(1);
        } else if entry.slot {
            self.running = self.running.saturating_sub(1);
        }
        let context_id = entry.context_id;
        let mut starts = Vec::new();
        let next = match self.contexts.get_mut(&context_id) {
            Some(ctx) if ctx.running.as_deref() == Some(task_id) => {
                ctx.running = None;
                let next = if self.shutting_down {
                    None
                } else {
                    ctx.queue.pop_front()
                };
                if next.is_none() && ctx.is_empty() {
                    self.contexts.remove(&context_id);
                }
                next
            }
            _ => None,
        };
        if let Some(p) = next {
            starts.extend(self.start_or_wait(&context_id, p));
        }
        starts.extend(self.fill_slots());
        starts
    }

    /// Decides how to cancel a task: a queued or ready one is taken out of its queue.
    pub fn cancel(&mut self, task_id: &str) -> CancelPlan {
        let Some(entry) = self.tasks.get(task_id) else {
            return CancelPlan::Finalize {
                context_id: None,
                holds_context: false,
            };
        };
        if entry.slot {
            return CancelPlan::Running;
        }
        let context_id = entry.context_id.clone();
        self.ready.retain(|(_, p)| p.task_id != task_id);
        let holds_context = match self.contexts.get_mut(&context_id) {
            Some(ctx) => {
                ctx.queue.retain(|p| p.task_id != task_id);
                ctx.running.as_deref() == Some(task_id)
            }
            None => false,
        };
        if !holds_context {
            self.tasks.remove(task_id);
        }
        CancelPlan::Finalize {
            context_id: Some(context_id),
            holds_context,
        }
    }

    /// The host shuts down: no new task is admitted, nothing new starts; returns the tasks
    /// that were waiting (task id, context id), which end now.
    pub fn shutdown(&mut self) -> Vec<(String, String)> {
        self.shutting_down = true;
        let mut drained: Vec<(String, String)> = self
            .ready
            .drain(..)
            .map(|(ctx, p)| (p.task_id, ctx))
            .collect();
        for (ctx_id, ctx) in self.contexts.iter_mut() {
            for p in ctx.queue.drain(..) {
                drained.push((p.task_id, ctx_id.clone()));
            }
            if ctx
                .running
                .as_ref()
                .is_some_and(|t| drained.iter().any(|(d, _)| d == t))
            {
                ctx.running = None;
            }
        }
        for (task_id, _) in &drained {
            self.tasks.remove(task_id);
        }
        drained
    }

    /// Remembers the CLI session of a context; the record to store.
    pub fn set_session(&mut self, context_id: &str, session_id: &str) -> ContextRecord {
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        ctx.session = Some(session_id.to_string());
        ctx.record(context_id)
    }

    /// Restores a stored context (after a restart).
    pub fn restore_context(&mut self, record: ContextRecord) {
        let ctx = self.contexts.entry(record.context_id).or_default();
        ctx.session = record.session_id;
        ctx.owner = record.owner;
        ctx.keeps_cwd = record.cwd.is_some();
        ctx.cwd = record.cwd.map(Into::into);
    }

    /// Whether the context is known here (it has, or had since the host started, a turn or
    /// an admitted send).
    pub fn knows(&self, context_id: &str) -> bool {
        self.contexts.contains_key(context_id)
    }

    /// The context's CLI session, if known.
    pub fn session_of(&self, context_id: &str) -> Option<&str> {
        self.contexts.get(context_id)?.session.as_deref()
    }

    /// The task holding the context (running, waiting for a slot or for an answer), if any.
    pub fn holder_of(&self, context_id: &str) -> Option<&str> {
        self.contexts.get(context_id)?.running.as_deref()
    }

    /// The context of a task the scheduler knows.
    pub fn context_of(&self, task_id: &str) -> Option<&str> {
        self.tasks.get(task_id).map(|e| e.context_id.as_str())
    }

    /// The context's working directory, if it has one.
    pub fn cwd_of(&self, context_id: &str) -> Option<&PathBuf> {
        self.contexts.get(context_id)?.cwd.as_ref()
    }

    /// Gives a restored context an owner when it has none (from its task's owner).
    pub fn claim(&mut self, context_id: &str, owner: Option<String>) {
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        if ctx.owner.is_none() {
            ctx.owner = owner;
        }
    }

    /// Queues a recovered task behind its context (started by [`Scheduler::start_idle`]).
    pub fn requeue(&mut self, context_id: &str, pending: Pending) {
        self.tasks.insert(
            pending.task_id.clone(),
            Entry {
                context_id: context_id.to_string(),
                slot: false,
                waiting: false,
            },
        );
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        ctx.queue.push_back(pending);
    }

    /// A recovered task waiting for an answer holds its context, with no process.
    pub fn hold(&mut self, context_id: &str, task_id: &str) {
        self.tasks.insert(
            task_id.to_string(),
            Entry {
                context_id: context_id.to_string(),
                slot: false,
                waiting: false,
            },
        );
        let ctx = self.contexts.entry(context_id.to_string()).or_default();
        ctx.running = Some(task_id.to_string());
    }

    /// Starts the first queued turn of every context that holds none (after recovery).
    pub fn start_idle(&mut self) -> Vec<Start> {
        let mut free: Vec<(String, Pending)> = self
            .contexts
            .iter_mut()
            .filter(|(_, c)| c.running.is_none())
            .filter_map(|(id, c)| c.queue.pop_front().map(|p| (id.clone(), p)))
            .collect();
        free.sort_by(|a, b| a.0.cmp(&b.0));
        free.into_iter()
            .filter_map(|(ctx, p)| self.start_or_wait(&ctx, p))
            .collect()
    }

    /// A task that holds its context without a process (waiting for an answer after a
    /// restart) gets its turn: started now, or when a slot is free.
    pub fn resume(&mut self, pending: Pending) -> Option<Start> {
        let context_id = self.tasks.get(&pending.task_id)?.context_id.clone();
        self.start_or_wait(&context_id, pending)
    }
}

/// True when a task (or context) owned by `owner` may be seen by `caller`.
pub(super) fn visible(owner: &Option<String>, caller: Option<&str>) -> bool {
    match (owner, caller) {
        (Some(o), Some(c)) => o == c,
        _ => true,
    }
}

#[cfg(test)]
mod tests;
