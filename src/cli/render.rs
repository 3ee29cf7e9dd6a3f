//! How `agent-host call` shows a task to a person (or, with `--json`, to a program).
//!
//! Human mode: the agent's text on stdout as it streams, one line per tool use saying what
//! became of it (`✓ Bash: ls` ran, `✗ Bash: ls · error` failed, `⊘ Bash: ls · refused` was
//! denied at its approval, `→ Bash: ls · running` when other output comes while it runs),
//! printed once that is known, so a tool that waits for an approval never reads as if it had
//! run; the answer at the end when nothing streamed; on stderr the task ids, a live status line
//! (spinner, state, tool in use, elapsed time; only when stderr is a terminal) and a closing
//! summary whose duration counts from the task's creation (its `createdAt` metadata), not from
//! when this command started. JSON mode: one v1.0 `StreamResponse` per line on stdout.

use std::collections::HashMap;
use std::io::Write;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::client::{Approval, Event};
use crate::protocol::v1::{Artifact, Message, StreamResponse, Task, TaskState};
use crate::task::mapping::{METADATA_ARTIFACT, RESULT_ARTIFACT};

const SPINNER: &[&str] = &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/// How the task ended, as far as the stream told.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Completed,
    Failed(String),
    Canceled,
    /// Waits for input: what it asks, and the task.
    InputRequired {
        task_id: String,
        approval: Option<Approval>,
    },
    /// The stream ended without a final state.
    Unfinished,
}

impl Outcome {
    /// The exit code of `agent-host call`: 0 completed, 1 failed, 3 canceled, 4 input
    /// required.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Completed => 0,
            Outcome::Failed(_) | Outcome::Unfinished => 1,
            Outcome::Canceled => 3,
            Outcome::InputRequired { .. } => 4,
        }
    }
}

/// A tool use whose end is not known yet.
#[derive(Debug, Clone)]
struct PendingTool {
    id: String,
    /// `Bash: ls`.
    label: String,
    /// An approval asked about it.
    asked: bool,
    /// Already shown as running.
    shown: bool,
}

pub struct Renderer<O: Write, E: Write> {
    out: O,
    err: E,
    json: bool,
    live: bool,
    started: Instant,
    state: Option<TaskState>,
    tool: Option<String>,
    pub task_id: Option<String>,
    context_id: Option<String>,
    at_line_start: bool,
    printed_text: bool,
    /// The text of each artifact (by id) printed so far: a task frame or a replacing
    /// chunk prints only what is new, so every text is printed exactly once.
    printed: HashMap<String, String>,
    /// All the text printed so far, without its whitespace: a final text (the `result`
    /// artifact, the final status message) that it already holds is not printed again.
    shown: String,
    /// Set when stdout is closed (`agent-host call ... | head -1`): nothing more is shown.
    closed: bool,
    status_drawn: bool,
    frame: usize,
    outcome: Option<Outcome>,
    usage: Option<Value>,
    /// Tool uses that have not reported their result, oldest first.
    pending: Vec<PendingTool>,
    /// The answer given to the approval this stream follows (yes: true); a tool then
    /// pending reads as approved or, failing, refused.
    answer: Option<bool>,
    /// When the host created the task (its `createdAt` metadata).
    created_at: Option<DateTime<Utc>>,
    /// The host's time of the latest status seen.
    last_status_at: Option<DateTime<Utc>>,
    /// A task frame's wait for input, not yet the outcome: a frame is the task as it was
    /// when the stream opened (an answer's stream can open on the question just answered,
    /// which a turn resumed after a host restart has not left yet), so what follows it
    /// decides; it is the outcome only when the stream ends on it ([`Renderer::ended`]).
    waits: Option<(TaskState, Option<Message>)>,
    /// The stream follows an answer (`--task`, or one given at the prompt): a task frame
    /// that waits for input may be the question just answered. Otherwise (`tasks watch`,
    /// a new task) a frame that waits is the question, whatever follows it.
    follows_answer: bool,
    /// Replaying a task that has ended (`tasks watch` of an ended task): each question it
    /// asked and the answer it got, by `approvalId`, from the task's history. A question in
    /// the replay is shown with its answer and the replay goes on.
    replay: Option<HashMap<String, Answered>>,
}

/// A task or status timestamp.
fn parse_ts(s: Option<&str>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// The first line of a text, at most `max` characters.
fn short(s: &str, max: usize) -> String {
    let line = s.lines().next().unwrap_or("").trim();
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

/// What a tool works on: the usual input fields, else the first string.
fn tool_target(input: Option<&Value>) -> String {
    let Some(obj) = input.and_then(Value::as_object) else {
        return String::new();
    };
    for k in ["command", "file_path", "path", "pattern", "url", "query"] {
        if let Some(s) = obj.get(k).and_then(Value::as_str) {
            return short(s, 80);
        }
    }
    obj.values()
        .find_map(Value::as_str)
        .map(|s| short(s, 80))
        .unwrap_or_default()
}

pub(super) fn state_word(s: TaskState) -> &'static str {
    match s {
        TaskState::Submitted => "submitted",
        TaskState::Working => "working",
        TaskState::Completed => "completed",
        TaskState::Failed => "failed",
        TaskState::Canceled => "canceled",
        TaskState::InputRequired => "input required",
        TaskState::Rejected => "rejected",
        TaskState::AuthRequired => "auth required",
        TaskState::Unspecified => "unknown",
    }
}

/// The text parts of an artifact, joined.
fn artifact_text(a: &Artifact) -> String {
    a.parts.iter().filter_map(|p| p.text.as_deref()).collect()
}

/// The answer of an ended task: its `result` artifact, else its text artifacts, else the
/// status message.
fn answer_of(t: &Task) -> String {
    let texts = artifact_text;
    if let Some(r) = t
        .artifacts
        .iter()
        .find(|a| a.name.as_deref() == Some(RESULT_ARTIFACT) || a.artifact_id == RESULT_ARTIFACT)
    {
        return texts(r);
    }
    let all: Vec<String> = t
        .artifacts
        .iter()
        .filter(|a| a.name.as_deref() != Some(METADATA_ARTIFACT))
        .map(texts)
        .filter(|s| !s.is_empty())
        .collect();
    if !all.is_empty() {
        return all.join("\n");
    }
    t.status
        .message
        .as_ref()
        .map(Message::text)
        .unwrap_or_default()
}

/// The answer a question got, as its task's history holds it.
#[derive(Debug, Clone)]
struct Answered {
    /// Allowed (an approval), or answered at all (a question).
    yes: bool,
    text: String,
}

/// The answers in a task's history: each user message after an agent message that asks
/// (a data part with `approvalId`), by that id, read as the host read it
/// ([`crate::engine::input::decision_of`]); an answer it would not take as a decision (a
/// budget's "continue with 5") counts as a yes.
fn answers_in(t: &Task) -> HashMap<String, Answered> {
    let mut out = HashMap::new();
    let mut asked: Option<(String, String)> = None;
    for m in &t.history {
        let data = m.parts.iter().find_map(|p| p.data.as_ref());
        let field = |k: &str| data.and_then(|d| d.get(k)?.as_str()).map(str::to_string);
        if m.role == crate::protocol::v1::Role::Agent {
            if let Some(id) = field("approvalId") {
                asked = Some((id, field("kind").unwrap_or_default()));
            }
            continue;
        }
        let Some((id, kind)) = asked.take() else {
            continue;
        };
        let decision = crate::engine::input::decision_of(m, &id, &kind).ok();
        let text = m.text().trim().to_string();
        let text = match field("decision") {
            Some(d) if text.is_empty() => d,
            _ => text,
        };
        let yes = decision.is_none_or(|d| d.allow);
        out.insert(id, Answered { yes, text });
    }
    out
}

impl<O: Write, E: Write> Renderer<O, E> {
    pub fn new(out: O, err: E, json: bool, live: bool) -> Self {
        Renderer {
            out,
            err,
            json,
            live,
            started: Instant::now(),
            state: None,
            tool: None,
            task_id: None,
            context_id: None,
            at_line_start: true,
            printed_text: false,
            printed: HashMap::new(),
            shown: String::new(),
            closed: false,
            status_drawn: false,
            frame: 0,
            outcome: None,
            usage: None,
            pending: Vec::new(),
            answer: None,
            created_at: None,
            last_status_at: None,
            waits: None,
            follows_answer: false,
            replay: None,
        }
    }

    /// Shows a replay of a task that has ended, `ended` being the task as it ended (its
    /// history holds the answers to its questions).
    pub fn replaying(&mut self, ended: &Task) {
        self.replay = Some(answers_in(ended));
    }

    /// The answer given to an approval: `false` (no) makes a tool that fails next read as
    /// refused.
    pub fn answered(&mut self, yes: bool) {
        self.answer = Some(yes);
        self.follows_answer = true;
    }

    /// The stream follows an answer (to a question as well as to an approval): a task
    /// frame's wait for input is not yet the outcome.
    pub fn follows_answer(&mut self) {
        self.follows_answer = true;
    }

    /// True once the outcome is known: nothing the stream may still send changes it.
    pub fn decided(&self) -> bool {
        self.outcome.is_some()
    }

    /// How long the task has taken: from its creation to its latest status (the host's
    /// clock), else to now; without `createdAt`, since this command started.
    fn took(&self, ended: bool) -> Duration {
        let Some(start) = self.created_at else {
            return self.started.elapsed();
        };
        let end = match self.last_status_at {
            Some(t) if ended => t,
            _ => Utc::now(),
        };
        (end - start).to_std().unwrap_or_default()
    }

    pub fn outcome(&self) -> Outcome {
        self.outcome.clone().unwrap_or(Outcome::Unfinished)
    }

    /// The stream has ended: a task frame's wait for input that nothing after it replaced
    /// is the outcome.
    pub fn ended(&mut self) {
        if let Some((st, msg)) = self.waits.take() {
            self.status(st, msg.as_ref());
        }
    }

    /// Forgets the outcome (a new stream follows an answer).
    pub fn resume(&mut self) {
        self.outcome = None;
        self.waits = None;
        self.follows_answer = true;
    }

    fn clear_status(&mut self) {
        if self.status_drawn {
            let _ = write!(self.err, "\r\x1b[2K");
            let _ = self.err.flush();
            self.status_drawn = false;
        }
    }

    /// Redraws the status line (live mode, and only between lines of text).
    pub fn tick(&mut self) {
        if !self.live || self.json || !self.at_line_start || self.outcome.is_some() {
            return;
        }
        self.frame = (self.frame + 1) % SPINNER.len();
        let state = self.state.map(state_word).unwrap_or("connecting");
        let tool = self
            .tool
            .as_ref()
            .map(|t| format!(" · {t}"))
            .unwrap_or_default();
        let secs = self.took(false).as_secs_f64();
        let _ = write!(
            self.err,
            "\r\x1b[2K{} {state}{tool} · {secs:.1}s",
            SPINNER[self.frame]
        );
        let _ = self.err.flush();
        self.status_drawn = true;
    }

    /// True once stdout is closed: the caller stops following and ends normally.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Writes to stdout; a closed stdout is remembered, not an error.
    fn put(&mut self, s: &str) {
        if self.closed {
            return;
        }
        if let Err(e) = self
            .out
            .write_all(s.as_bytes())
            .and_then(|()| self.out.flush())
        {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                self.closed = true;
            }
        }
    }

    fn text(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        // The agent writes after the answer: the tool it was answered about went first (its
        // own result may come later, or only in the task at the end, for a quick agent).
        if self.answer.is_some() && self.pending.iter().any(|p| p.asked) {
            self.settle_asked();
        }
        self.show_running();
        self.clear_status();
        self.put(s);
        self.at_line_start = s.ends_with('\n');
        self.printed_text = true;
        self.shown.extend(s.chars().filter(|c| !c.is_whitespace()));
    }

    /// Prints a text that ends the task (its `result`, its final status message) unless
    /// what was printed already holds it (whitespace aside: the common case, where the
    /// final text repeats the streamed one, or its last part); after other text, on a line
    /// of its own.
    fn final_text(&mut self, s: &str) {
        let bare: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        if self.json || bare.is_empty() || self.shown.contains(&bare) {
            return;
        }
        self.end_text_line();
        self.text(s);
    }

    /// Prints what of an artifact's text is new: the chunk when `append`, else what the
    /// text adds to the text printed so far (all of it when it replaced that text).
    fn artifact_text(&mut self, id: &str, text: &str, append: bool) {
        let new = self.new_artifact_text(id, text, append);
        self.text(&new);
    }

    /// What of an artifact's text is new (see [`Renderer::artifact_text`]), counted as
    /// printed.
    fn new_artifact_text(&mut self, id: &str, text: &str, append: bool) -> String {
        let seen = self.printed.entry(id.to_string()).or_default();
        let new = if append {
            seen.push_str(text);
            text.to_string()
        } else if let Some(rest) = text.strip_prefix(seen.as_str()) {
            let rest = rest.to_string();
            *seen = text.to_string();
            rest
        } else if seen.starts_with(text) {
            String::new() // an older state of what was printed
        } else {
            *seen = text.to_string();
            text.to_string()
        };
        new
    }

    fn line(&mut self, s: &str) {
        self.clear_status();
        if !self.at_line_start {
            self.put("\n");
        }
        self.put(&format!("{s}\n"));
        self.at_line_start = true;
    }

    fn note(&mut self, s: &str) {
        self.clear_status();
        let _ = writeln!(self.err, "{s}");
        let _ = self.err.flush();
    }

    fn end_text_line(&mut self) {
        if !self.at_line_start {
            self.put("\n");
            self.at_line_start = true;
        }
    }

    fn learn_ids(&mut self, task_id: &str, context_id: &str) {
        if self.task_id.is_none() && !task_id.is_empty() {
            self.task_id = Some(task_id.to_string());
            self.context_id = Some(context_id.to_string());
            if !self.json {
                self.note(&format!("task {task_id} · context {context_id}"));
            }
        }
    }

    /// Shows one event.
    pub fn event(&mut self, ev: &Event) {
        if self.json {
            let line = serde_json::to_string(&ev.response).unwrap_or_default();
            self.put(&format!("{line}\n"));
        }
        if !matches!(ev.response, StreamResponse::ArtifactUpdate(_)) {
            // A later state replaces what a task frame said.
            self.waits = None;
        }
        match &ev.response {
            StreamResponse::Task(t) => self.task(t),
            StreamResponse::Message(m) => {
                if !self.json {
                    self.text(&m.text());
                }
                self.finish(Outcome::Completed, None);
            }
            StreamResponse::ArtifactUpdate(a) => {
                self.learn_ids(&a.task_id, &a.context_id);
                let name = a
                    .artifact
                    .name
                    .as_deref()
                    .unwrap_or(&a.artifact.artifact_id);
                if name == METADATA_ARTIFACT || self.json {
                    return;
                }
                let t = artifact_text(&a.artifact);
                if name == RESULT_ARTIFACT && self.printed_text {
                    self.final_text(&t);
                } else {
                    self.artifact_text(&a.artifact.artifact_id, &t, a.append);
                }
            }
            StreamResponse::StatusUpdate(s) => {
                self.learn_ids(&s.task_id, &s.context_id);
                if s.metadata.as_ref().and_then(|m| m.get("usage")).is_some() {
                    self.usage = s.metadata.as_ref().and_then(|m| m.get("usage")).cloned();
                }
                if let Some(ts) = parse_ts(s.status.timestamp.as_deref()) {
                    self.last_status_at = Some(ts);
                }
                self.status(s.status.state, s.status.message.as_ref());
            }
        }
    }

    /// The tool uses a task frame's history shows without their result yet, and the tool an
    /// approval it waits on (or was just answered) names: a stream that opens after the
    /// question (`--task ID yes`) still says what became of that tool.
    fn seed_tools(&mut self, t: &Task) {
        let mut open: Vec<(&str, &str, Option<&Value>)> = Vec::new();
        let mut asked: Option<(Option<&str>, Option<&str>)> = None;
        for m in &t.history {
            if let Some(d) = m.parts.iter().find_map(|p| p.data.as_ref()) {
                if d.get("approvalId").is_some() {
                    let field = |k: &str| d.get(k).and_then(Value::as_str);
                    asked = Some((field("tool"), field("target")));
                }
            }
            let Some(md) = m.metadata.as_ref() else {
                continue;
            };
            let id = md.get("toolUseId").and_then(Value::as_str).unwrap_or("");
            match md.get("toolName").and_then(Value::as_str) {
                Some(name) => open.push((id, name, md.get("toolInput"))),
                None => open.retain(|(o, _, _)| *o != id),
            }
        }
        for (id, name, input) in open {
            if !id.is_empty() {
                self.tool_started(id, name, input);
            }
        }
        let waits = self.answer.is_some() || t.status.state.is_interrupted();
        if let (true, Some((tool, target))) = (waits, asked) {
            self.tool_asked(tool, target);
        }
        if t.status.state.is_interrupted() {
            self.tool = None;
        }
    }

    fn task(&mut self, t: &Task) {
        self.learn_ids(&t.id, &t.context_id);
        self.state = Some(t.status.state);
        if let Some(u) = t.metadata.as_ref().and_then(|m| m.get("usage")) {
            self.usage = Some(u.clone());
        }
        let created = t.metadata.as_ref().and_then(|m| m.get("createdAt"));
        if let Some(c) = parse_ts(created.and_then(Value::as_str)) {
            self.created_at = Some(c);
        }
        self.last_status_at = parse_ts(t.status.timestamp.as_deref()).or(self.last_status_at);
        self.seed_tools(t);
        let st = t.status.state;
        // The text the task already carries (a stream that starts with the task: an answer,
        // a subscription) is printed here, the chunks that follow by the artifact updates.
        if !self.json {
            let mut new = Vec::new();
            for a in &t.artifacts {
                let name = a.name.as_deref().unwrap_or(&a.artifact_id);
                if name != METADATA_ARTIFACT && name != RESULT_ARTIFACT {
                    new.push(self.new_artifact_text(&a.artifact_id, &artifact_text(a), false));
                }
            }
            // An answer's stream that opens on a task gone on past the approval (a quick
            // agent: it wrote after the tool, or ended): the tool answered came first, so
            // its line does too, then what the agent wrote after it.
            let went_on = st.is_terminal() || new.iter().any(|s| !s.is_empty());
            if self.answer.is_some() && !st.is_interrupted() && went_on {
                self.settle_asked();
            }
            for s in new {
                self.text(&s);
            }
        }
        if st.is_interrupted() && self.follows_answer {
            self.waits = Some((st, t.status.message.clone()));
        } else if st.is_interrupted() || st.is_terminal() {
            if st == TaskState::Completed {
                let a = answer_of(t);
                self.final_text(&a);
            }
            self.status(st, t.status.message.as_ref());
        }
    }

    fn status(&mut self, st: TaskState, msg: Option<&Message>) {
        self.state = Some(st);
        let md = msg.and_then(|m| m.metadata.as_ref());
        if let Some(name) = md.and_then(|m| m.get("toolName")).and_then(Value::as_str) {
            let id = md
                .and_then(|m| m.get("toolUseId"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            self.tool_started(id, name, md.and_then(|m| m.get("toolInput")));
            return;
        }
        if let Some(id) = md.and_then(|m| m.get("toolUseId")) {
            let failed = md.and_then(|m| m.get("isError")) == Some(&Value::Bool(true));
            let text = msg.map(Message::text).unwrap_or_default();
            self.tool_ended(id.as_str().unwrap_or_default(), failed, &text);
            return;
        }
        let text = msg.map(Message::text).unwrap_or_default();
        match st {
            TaskState::Completed => {
                self.final_text(&text);
                self.finish(Outcome::Completed, None);
            }
            TaskState::Failed | TaskState::Rejected => {
                let why = if text.is_empty() {
                    state_word(st).to_string()
                } else {
                    text
                };
                self.finish(Outcome::Failed(why), None);
            }
            TaskState::Canceled => self.finish(Outcome::Canceled, None),
            TaskState::InputRequired | TaskState::AuthRequired => {
                let approval = msg.and_then(|m| {
                    Approval::from_status(&crate::protocol::v1::TaskStatus {
                        state: st,
                        message: Some(m.clone()),
                        timestamp: None,
                    })
                });
                if let Some(a) = &approval {
                    self.tool_asked(a.tool.as_deref(), a.target.as_deref());
                }
                if self.replay.is_some() {
                    self.replayed_question(approval.as_ref(), &text);
                    return;
                }
                let task_id = self.task_id.clone().unwrap_or_default();
                self.finish(Outcome::InputRequired { task_id, approval }, None);
            }
            _ => {}
        }
    }

    /// A tool use begins: shown once its end (or an approval, or other output) says more.
    fn tool_started(&mut self, id: &str, name: &str, input: Option<&Value>) {
        let target = tool_target(input);
        let sep = if target.is_empty() { "" } else { ": " };
        let label = format!("{name}{sep}{target}");
        self.tool = Some(label.clone());
        if self.pending.iter().any(|p| p.id == id && !id.is_empty()) {
            return; // the same tool use again (a task frame's history, then the stream)
        }
        self.pending.push(PendingTool {
            id: id.to_string(),
            label,
            asked: false,
            shown: false,
        });
    }

    /// An approval asks about a tool: the newest pending use of it (or the newest one);
    /// when this command saw none begin (an agent that asks before it says it uses the tool,
    /// a stream that opens after the question), the tool the approval names.
    fn tool_asked(&mut self, tool: Option<&str>, target: Option<&str>) {
        let hit = self
            .pending
            .iter()
            .rposition(|p| tool.is_some_and(|t| p.label.starts_with(t)))
            .or(self.pending.len().checked_sub(1));
        match (hit, tool) {
            (Some(i), _) => self.pending[i].asked = true,
            (None, Some(name)) => {
                let target = target.map(|t| short(t, 80)).unwrap_or_default();
                let sep = if target.is_empty() { "" } else { ": " };
                self.pending.push(PendingTool {
                    id: String::new(),
                    label: format!("{name}{sep}{target}"),
                    asked: true,
                    shown: false,
                });
            }
            (None, None) => {}
        }
    }

    /// A tool use reports its result: one line saying what became of it.
    fn tool_ended(&mut self, id: &str, failed: bool, text: &str) {
        self.tool = None;
        let pos = (self.pending.iter().position(|p| p.id == id))
            .or_else(|| self.pending.iter().position(|p| p.id.is_empty() && p.asked));
        let Some(p) = pos.map(|i| self.pending.remove(i)) else {
            // A use this command did not see begin.
            if failed && !self.json {
                self.line(&format!("✗ {}", short(text, 100)));
            }
            return;
        };
        if self.json {
            return;
        }
        let why = short(text.trim_start_matches("Tool result: "), 100);
        let line = match (failed, p.asked) {
            (true, true) if self.answer == Some(false) => format!("⊘ {} · refused", p.label),
            (true, _) => format!("✗ {} · {why}", p.label),
            (false, true) => format!("✓ {} · approved", p.label),
            (false, false) => format!("✓ {}", p.label),
        };
        self.line(&line);
    }

    /// Other output comes while tools run: they are shown as running first (once).
    fn show_running(&mut self) {
        if self.json {
            return;
        }
        let running: Vec<String> = self
            .pending
            .iter_mut()
            .filter(|p| !p.shown && !p.asked)
            .map(|p| {
                p.shown = true;
                format!("→ {} · running", p.label)
            })
            .collect();
        for l in running {
            self.line(&l);
        }
    }

    /// At the end, the tool uses that never reported a result. The one an answer approved
    /// reads as approved: an answer's stream starts from the task as it is by then, so a
    /// quick agent's result for it is in that task, not in an event of its own.
    fn flush_pending(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            self.settled(&p);
        }
    }

    /// The tool uses an approval asked about, once the task went on past the answer: each
    /// reads as approved or refused, as the answer said.
    fn settle_asked(&mut self) {
        if self.answer.is_none() {
            return;
        }
        let (asked, rest) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition::<Vec<_>, _>(|p| p.asked);
        self.pending = rest;
        for p in asked {
            self.settled(&p);
        }
    }

    /// The line of a tool use that never reported its result.
    fn settled(&mut self, p: &PendingTool) {
        if self.json {
            return;
        }
        match (p.asked, self.answer) {
            (true, Some(false)) => self.line(&format!("⊘ {} · refused", p.label)),
            (true, Some(true)) => self.line(&format!("✓ {} · approved", p.label)),
            _ => self.line(&format!("→ {} · no result", p.label)),
        }
    }

    fn finish(&mut self, outcome: Outcome, _why: Option<&str>) {
        if self.outcome.is_some() {
            return;
        }
        if !matches!(outcome, Outcome::InputRequired { .. }) {
            self.flush_pending();
        }
        self.end_text_line();
        self.clear_status();
        self.tool = None;
        self.outcome = Some(outcome.clone());
        if self.json {
            return;
        }
        let took = self.took(true);
        let usage = self.usage_words();
        match &outcome {
            Outcome::Completed => self.note(&format!("✓ completed in {}{usage}", secs(took))),
            Outcome::Failed(why) => self.note(&format!(
                "✗ failed after {}: {}",
                secs(took),
                short(why, 300)
            )),
            Outcome::Canceled => self.note(&format!("■ canceled after {}", secs(took))),
            Outcome::InputRequired { approval, .. } => {
                let mut s = String::from("? input required");
                if let Some(a) = approval {
                    s.push_str(&format!(": {}", short(&a.detail, 300)));
                    if let Some(tool) = &a.tool {
                        let target = a.target.as_deref().unwrap_or("");
                        s.push_str(&format!("\n  {tool} {target}"));
                    }
                    if !a.options.is_empty() {
                        let opts: Vec<&str> = a.options.iter().map(|o| o.id.as_str()).collect();
                        s.push_str(&format!("  [{}]", opts.join(" / ")));
                    }
                }
                self.note(&s);
            }
            Outcome::Unfinished => {}
        }
    }

    /// A question in a replay: what was asked and what was answered, and the answer taken
    /// as the one to the tool it asked about.
    fn replayed_question(&mut self, approval: Option<&Approval>, text: &str) {
        let answered = approval
            .and_then(|a| a.approval_id.as_deref())
            .and_then(|id| self.replay.as_ref()?.get(id).cloned());
        if self.json {
            self.answer = answered.map(|a| a.yes);
            return;
        }
        let asked = approval.map_or(text, |a| a.detail.as_str());
        self.end_text_line();
        self.clear_status();
        self.note(&format!("? asked: {}", short(asked, 300)));
        self.answer = answered.as_ref().map(|a| a.yes);
        match answered {
            Some(a) => self.note(&format!("  answered: {}", short(&a.text, 200))),
            None => self.note("  (no answer)"),
        }
    }

    fn usage_words(&self) -> String {
        let Some(u) = &self.usage else {
            return String::new();
        };
        let mut s = String::new();
        if let (Some(i), Some(o)) = (
            u.get("inputTokens").and_then(Value::as_u64),
            u.get("outputTokens").and_then(Value::as_u64),
        ) {
            s.push_str(&format!(" · {i} in / {o} out tokens"));
        }
        if let Some(c) = u.get("costUsd").and_then(Value::as_f64) {
            s.push_str(&format!(" · ${c:.4}"));
        }
        s
    }

    /// The user stopped following (Ctrl-C): the text line ends, the tools still running are
    /// shown as such, the status line goes.
    pub fn interrupted(&mut self) {
        self.show_running();
        self.end_text_line();
        self.clear_status();
    }

    /// A line on stderr, in JSON mode too (stdout stays the events').
    pub fn notice(&mut self, s: &str) {
        self.note(s);
    }

    /// A line on stderr (human mode only).
    pub fn say(&mut self, s: &str) {
        if !self.json {
            self.note(s);
        }
    }
}

fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(v: Value) -> Event {
        Event {
            id: None,
            response: serde_json::from_value(v).expect("a StreamResponse"),
        }
    }

    fn chunk(text: &str, append: bool) -> Event {
        ev(
            json!({"artifactUpdate": {"taskId": "t", "contextId": "c", "append": append,
            "artifact": {"artifactId": "assistant-response", "name": "assistant-response",
                         "parts": [{"text": text}]}}}),
        )
    }

    fn task(state: &str, answer: &str) -> Event {
        ev(
            json!({"task": {"id": "t", "contextId": "c", "status": {"state": state},
            "artifacts": [
                {"artifactId": "agent-metadata", "name": "agent-metadata", "parts": [{"data": {"cwd": "/x"}}]},
                {"artifactId": "assistant-response", "name": "assistant-response", "parts": [{"text": answer}]}
            ]}}),
        )
    }

    fn completed(text: &str) -> Event {
        ev(
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_COMPLETED",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]}}}}),
        )
    }

    fn result(text: &str) -> Event {
        ev(json!({"artifactUpdate": {"taskId": "t", "contextId": "c",
            "artifact": {"artifactId": "result", "name": "result", "parts": [{"text": text}]}}}))
    }

    fn render(events: &[Event]) -> String {
        let mut out = Vec::new();
        let mut r = Renderer::new(&mut out, Vec::new(), false, false);
        for e in events {
            r.event(e);
        }
        r.ended();
        assert_eq!(r.outcome(), Outcome::Completed);
        drop(r);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn text_in_the_first_task_frame_is_printed_once_with_the_chunks_that_follow() {
        let all = "I looked. All fine.";
        // The stream opened after the first chunk: the task frame carries it.
        let late = [
            task("TASK_STATE_WORKING", "I looked. "),
            chunk("All fine.", true),
            result(all),
            completed(all),
        ];
        assert_eq!(render(&late), format!("{all}\n"));
        // Opened before any text, or after all of it.
        let early = [
            task("TASK_STATE_WORKING", ""),
            chunk("I looked. ", false),
            chunk("All fine.", true),
            result(all),
            completed(all),
        ];
        assert_eq!(render(&early), format!("{all}\n"));
        assert_eq!(
            render(&[task("TASK_STATE_WORKING", all), result(all), completed(all)]),
            format!("{all}\n")
        );
        // A task that has ended, shown alone.
        assert_eq!(
            render(&[task("TASK_STATE_COMPLETED", all)]),
            format!("{all}\n")
        );
        // A first chunk that repeats what the task frame had, then a new turn's text.
        let again = [
            task("TASK_STATE_WORKING", "I looked. "),
            chunk("I looked. ", false),
            chunk("All fine.", true),
            chunk("Second turn.", false),
            completed("Second turn."),
        ];
        assert_eq!(render(&again), "I looked. All fine.Second turn.\n");
    }

    fn working(md: Value, text: &str) -> Event {
        ev(
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_WORKING",
            "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}],
                        "metadata": md}}}}),
        )
    }

    fn asks() -> Event {
        ev(
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [
                {"text": "Allow Bash: ls?"},
                {"data": {"approvalId": "a1", "kind": "command", "tool": "Bash", "target": "ls",
                          "detail": "run ls", "options": [{"id": "allow"}, {"id": "deny"}]}}]}}}}),
        )
    }

    #[test]
    fn a_tool_that_waits_for_its_approval_is_not_shown_as_run() {
        let use_ls = working(
            json!({"toolName": "Bash", "toolUseId": "u1", "toolInput": {"command": "ls"}}),
            "Using tool: Bash",
        );
        let mut out = Vec::new();
        let mut r = Renderer::new(&mut out, Vec::new(), false, false);
        r.event(&use_ls);
        r.event(&asks());
        assert!(matches!(r.outcome(), Outcome::InputRequired { .. }));
        drop(r);
        assert_eq!(String::from_utf8(out).expect("utf-8"), "");

        for (yes, ok, line) in [
            (true, true, "✓ Bash: ls · approved\n"),
            (false, false, "⊘ Bash: ls · refused\n"),
        ] {
            let mut out = Vec::new();
            let mut r = Renderer::new(&mut out, Vec::new(), false, false);
            r.event(&use_ls);
            r.event(&asks());
            r.resume();
            r.answered(yes);
            r.event(&working(
                json!({"toolUseId": "u1", "isError": !ok}),
                "denied",
            ));
            drop(r);
            assert_eq!(String::from_utf8(out).expect("utf-8"), line);
        }

        // An answer's stream that opens on the task already ended (a quick agent): the
        // approved tool reads as approved, not as without a result.
        let mut out = Vec::new();
        let mut r = Renderer::new(&mut out, Vec::new(), false, false);
        r.event(&use_ls);
        r.event(&asks());
        r.resume();
        r.answered(true);
        r.event(&completed("Done."));
        drop(r);
        let shown = String::from_utf8(out).expect("utf-8");
        assert!(shown.contains("✓ Bash: ls · approved\n"), "{shown}");
        assert!(!shown.contains("no result"), "{shown}");

        // Text while a tool runs shows it as running; its end then says how it ended.
        let mut out = Vec::new();
        let mut r = Renderer::new(&mut out, Vec::new(), false, false);
        r.event(&use_ls);
        r.event(&chunk("Looking.\n", false));
        r.event(&working(
            json!({"toolUseId": "u1", "isError": true}),
            "Tool result: boom",
        ));
        drop(r);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "→ Bash: ls · running\nLooking.\n✗ Bash: ls · boom\n"
        );
    }

    /// The agent's question about an edit of NOTES.md.
    fn asked_edit() -> Value {
        json!({"messageId": "q", "role": "ROLE_AGENT", "parts": [
            {"text": "Allow Edit: NOTES.md?"},
            {"data": {"approvalId": "a1", "kind": "file-edit", "tool": "Edit",
                      "target": "NOTES.md", "detail": "add a line",
                      "options": [{"id": "allow"}, {"id": "deny"}]}}]})
    }

    /// A task's history: the prompt, the question, and the user's `answer`.
    fn asked_and_answered(answer: &str) -> Value {
        json!([
            {"messageId": "p", "role": "ROLE_USER", "parts": [{"text": "approval edit"}]},
            asked_edit(),
            {"messageId": "y", "role": "ROLE_USER", "parts": [{"text": answer}]}])
    }

    /// The task as an answer's stream opens on it when the agent was quick: it ran the
    /// approved tool and wrote its answer (and may have ended) before the stream opened.
    fn gone_on(state: &str, answer: &str) -> Event {
        ev(
            json!({"task": {"id": "t", "contextId": "c", "status": {"state": state},
            "history": asked_and_answered("yes"),
            "artifacts": [
                {"artifactId": "assistant-response", "name": "assistant-response",
                 "parts": [{"text": answer}]}]}}),
        )
    }

    #[test]
    fn the_answered_tool_comes_before_the_text_the_agent_wrote_after_it() {
        let all = "I added a note to NOTES.md.";
        for (yes, line) in [
            (true, "✓ Edit: NOTES.md · approved\n"),
            (false, "⊘ Edit: NOTES.md · refused\n"),
        ] {
            // The task still working, the rest streamed; or already completed.
            for events in [
                vec![
                    gone_on("TASK_STATE_WORKING", all),
                    result(all),
                    completed(all),
                ],
                vec![gone_on("TASK_STATE_COMPLETED", all)],
            ] {
                let mut out = Vec::new();
                let mut r = Renderer::new(&mut out, Vec::new(), false, false);
                r.answered(yes);
                for e in &events {
                    r.event(e);
                }
                r.ended();
                assert_eq!(r.outcome(), Outcome::Completed);
                drop(r);
                let shown = String::from_utf8(out).expect("utf-8");
                assert_eq!(shown, format!("{line}{all}\n"));
            }
        }
        // A stream that opens before the agent went on still waits for the tool's result.
        let mut out = Vec::new();
        let mut r = Renderer::new(&mut out, Vec::new(), false, false);
        r.answered(true);
        r.event(&gone_on("TASK_STATE_WORKING", ""));
        r.event(&working(json!({"toolUseId": "u1", "isError": false}), "ok"));
        r.event(&chunk(all, false));
        r.event(&completed(all));
        drop(r);
        let shown = String::from_utf8(out).expect("utf-8");
        assert_eq!(shown, format!("✓ Edit: NOTES.md · approved\n{all}\n"));
        // One that opens before the text, whose tool's result is never its own event (the
        // agent ran it before the stream opened): the text still comes after the tool.
        for yes in [true, false] {
            let mut out = Vec::new();
            let mut r = Renderer::new(&mut out, Vec::new(), false, false);
            r.answered(yes);
            r.event(&gone_on("TASK_STATE_WORKING", ""));
            r.event(&chunk(all, false));
            r.event(&completed(all));
            drop(r);
            let shown = String::from_utf8(out).expect("utf-8");
            let line = if yes {
                "✓ Edit: NOTES.md · approved"
            } else {
                "⊘ Edit: NOTES.md · refused"
            };
            assert_eq!(shown, format!("{line}\n{all}\n"));
        }
    }

    #[test]
    fn a_replay_shows_each_question_with_its_answer_and_goes_on_to_the_end() {
        let ended: Task = serde_json::from_value(json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}, "history": asked_and_answered("no")}))
        .expect("task");
        let asked = ev(
            json!({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED", "message": asked_edit()}}}),
        );
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut r = Renderer::new(&mut out, &mut err, false, false);
        r.replaying(&ended);
        r.event(&asked);
        assert!(!r.decided(), "a question in a replay does not end it");
        r.event(&working(
            json!({"toolUseId": "", "isError": true}),
            "denied",
        ));
        r.event(&chunk("I changed nothing.", false));
        r.event(&completed("I changed nothing."));
        r.ended();
        assert_eq!(r.outcome(), Outcome::Completed);
        drop(r);
        assert_eq!(
            String::from_utf8(out).expect("utf-8"),
            "⊘ Edit: NOTES.md · refused\nI changed nothing.\n"
        );
        let said = String::from_utf8(err).expect("utf-8");
        assert!(
            said.contains("? asked: add a line\n  answered: no\n"),
            "{said}"
        );
        assert!(!said.contains("input required"), "{said}");
    }

    fn waiting_task() -> Event {
        ev(json!({"task": {"id": "t", "contextId": "c", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"messageId": "q", "role": "ROLE_AGENT", "parts": [
                {"text": "Allow Bash: ls?"},
                {"data": {"approvalId": "a1", "kind": "command", "tool": "Bash", "target": "ls",
                          "detail": "run ls", "options": [{"id": "allow"}, {"id": "deny"}]}}]}}}}))
    }

    #[test]
    fn an_answer_stream_that_opens_on_the_answered_question_ends_with_what_follows() {
        // After a host restart the answer's stream opens on the task still waiting (the
        // resumed turn has not started yet); the turn's events then say how it ended.
        let mut err = Vec::new();
        let mut r = Renderer::new(Vec::new(), &mut err, false, false);
        r.answered(true);
        r.event(&waiting_task());
        r.event(&working(json!({}), "Resuming."));
        r.event(&completed("Done."));
        r.ended();
        assert_eq!(r.outcome(), Outcome::Completed);
        drop(r);
        let said = String::from_utf8(err).expect("utf-8");
        assert!(said.contains("✓ completed"), "{said}");
        assert!(!said.contains("input required"), "{said}");

        // A stream that ends on the task frame (asked again, a subscription to a waiting
        // task) ends waiting for input.
        let mut err = Vec::new();
        let mut r = Renderer::new(Vec::new(), &mut err, false, false);
        r.event(&waiting_task());
        r.ended();
        assert!(matches!(r.outcome(), Outcome::InputRequired { .. }));
        drop(r);
        let said = String::from_utf8(err).expect("utf-8");
        assert!(said.contains("? input required: run ls"), "{said}");
    }

    #[test]
    fn a_subscription_that_opens_on_a_waiting_task_asks_at_once() {
        // `tasks watch` on a task already waiting: the first frame is the question, whether
        // the server ends the stream after it or not.
        let mut err = Vec::new();
        let mut r = Renderer::new(Vec::new(), &mut err, false, false);
        r.event(&waiting_task());
        assert!(r.decided());
        assert!(matches!(r.outcome(), Outcome::InputRequired { .. }));
        drop(r);
        let said = String::from_utf8(err).expect("utf-8");
        assert!(said.contains("? input required: run ls"), "{said}");

        // Following an answer (also to a question, no decision), the frame may be the
        // question just answered: what follows decides.
        let mut r = Renderer::new(Vec::new(), Vec::new(), false, false);
        r.follows_answer();
        r.event(&waiting_task());
        assert!(!r.decided());
    }

    #[test]
    fn a_final_text_that_differs_from_the_streamed_one_is_printed_once() {
        let streamed = [
            chunk("While make runs. ", false),
            result("All done."),
            completed("All done."),
        ];
        assert_eq!(render(&streamed), "While make runs. \nAll done.\n");
        // Only in the final status (no result artifact).
        let status_only = [chunk("While make runs.\n", false), completed("All done.")];
        assert_eq!(render(&status_only), "While make runs.\nAll done.\n");
        // A task that has ended, shown alone (`--no-stream`, `tasks watch`).
        let frame = ev(json!({"task": {"id": "t", "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED", "message": {"messageId": "m",
            "role": "ROLE_AGENT", "parts": [{"text": "All done."}]}},
        "artifacts": [
            {"artifactId": "assistant-response", "name": "assistant-response",
             "parts": [{"text": "While make runs. "}]},
            {"artifactId": "result", "name": "result", "parts": [{"text": "All done."}]}
        ]}}));
        assert_eq!(render(&[frame]), "While make runs. \nAll done.\n");
        // A final text that repeats the streamed text, or its last part, whitespace aside,
        // is not printed again.
        let repeats = [
            chunk("I looked.\n\n", false),
            chunk("All fine.", true),
            result("I looked. All fine."),
            completed("All fine."),
        ];
        assert_eq!(render(&repeats), "I looked.\n\nAll fine.\n");
    }

    /// A writer that is closed, like a pipe whose reader has gone.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_is_noticed() {
        let mut r = Renderer::new(Closed, Vec::new(), false, false);
        assert!(!r.closed());
        r.event(&chunk("text", false));
        assert!(r.closed());
    }
}
