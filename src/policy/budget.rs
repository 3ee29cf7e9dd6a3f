//! Budgets: what a task (and the whole context, the sum over its tasks) may spend in US
//! dollars, tokens, tool calls and seconds, and the [`Meter`] that counts a turn's spending
//! from its events and says when a budget is reached.
//!
//! A tool call is the one too many when the agent starts it with the budget's calls all
//! made: it is not counted, and the agent is stopped. Dollars, tokens and seconds are
//! reached when the spending gets to the budget. A CLI's usage report is the total of its
//! run so far (a later report replaces an earlier one).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{BadInput, Controls};

/// Declared by adapters too (`on_budget` in an adapter's file), so defined with them.
pub use crate::adapter::OnBudget;

/// A budget setting (`usd=5,toolCalls=200`, `ask`) or a budget question's answer that does
/// not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    #[error(transparent)]
    OnBudget(#[from] crate::adapter::BadOnBudget),
    #[error("'{0}' is not KIND=AMOUNT")]
    NotKindAmount(String),
    #[error("'{0}' is not one of usd, tokens, toolCalls, seconds")]
    Kind(String),
    #[error(transparent)]
    Amount(#[from] BadAmount),
    /// An answer's `add` names amounts that do not read.
    #[error(transparent)]
    Add(#[from] BadInput),
    #[error("add must be an object {{KIND: N}}")]
    AddNotAnObject,
    #[error("the task stopped at its budget: answer 'continue' (or 'continue with N'), or 'stop'; or send a data part {{\"option\": \"continue\"|\"stop\", \"add\": {{KIND: N}}}}")]
    Answer,
}

/// An amount out of its kind's range: "must be a whole number of 0 or more", ...
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("must be {what} {range}")]
pub struct BadAmount {
    /// "a number" or "a whole number".
    what: &'static str,
    /// "of 0 or more", or up to the host's ceiling.
    range: String,
}

/// Amounts of each kind, each optional (unset: no limit of that kind).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    pub usd: Option<f64>,
    pub tokens: Option<u64>,
    pub tool_calls: Option<u64>,
    pub seconds: Option<u64>,
}

/// The names of the kinds, as in `metadata.budget`.
pub const KINDS: [&str; 4] = ["usd", "tokens", "toolCalls", "seconds"];

/// The longest time budget (ten years, in seconds): a clock's instant plus a number of
/// seconds near `u64::MAX` does not exist (it overflowed and panicked the turn), and no task
/// runs for longer anyway. More is refused like an amount above a ceiling.
pub const MAX_SECONDS: u64 = 10 * 365 * 24 * 3600;

impl Limits {
    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The amount of one kind, as a number.
    pub fn get(&self, kind: &str) -> Option<f64> {
        match kind {
            "usd" => self.usd,
            "tokens" => self.tokens.map(|v| v as f64),
            "toolCalls" => self.tool_calls.map(|v| v as f64),
            "seconds" => self.seconds.map(|v| v as f64),
            _ => None,
        }
    }

    /// Sets one kind's amount (a whole number for all but dollars).
    pub fn set(&mut self, kind: &str, v: f64) {
        match kind {
            "usd" => self.usd = Some(v),
            "tokens" => self.tokens = Some(v as u64),
            "toolCalls" => self.tool_calls = Some(v as u64),
            "seconds" => self.seconds = Some(v as u64),
            _ => {}
        }
    }

    /// `self`, with each kind it leaves unset taken from `other`.
    pub fn or(self, other: Limits) -> Limits {
        Limits {
            usd: self.usd.or(other.usd),
            tokens: self.tokens.or(other.tokens),
            tool_calls: self.tool_calls.or(other.tool_calls),
            seconds: self.seconds.or(other.seconds),
        }
    }

    pub fn to_json(self) -> Value {
        let mut m = Map::new();
        for k in KINDS {
            if let Some(v) = self.get(k) {
                m.insert(k.into(), number(k, v));
            }
        }
        Value::Object(m)
    }

    /// Read back from [`Limits::to_json`] (a task's metadata); what does not parse is unset.
    pub fn from_json(v: &Value) -> Limits {
        let mut out = Limits::default();
        for k in KINDS {
            if let Some(n) = v.get(k).and_then(Value::as_f64).filter(|n| *n >= 0.0) {
                out.set(k, n);
            }
        }
        out
    }
}

fn number(kind: &str, v: f64) -> Value {
    if kind == "usd" {
        json!(v)
    } else {
        json!(v as u64)
    }
}

/// `usd=5,tokens=2000000,toolCalls=200,seconds=3600` (also `tool_calls`); empty: no limits.
impl FromStr for Limits {
    type Err = BudgetError;
    fn from_str(s: &str) -> Result<Limits, BudgetError> {
        let mut out = Limits::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| BudgetError::NotKindAmount(item.to_string()))?;
            let kind = match k.trim() {
                "tool_calls" | "toolCalls" => "toolCalls",
                k if KINDS.contains(&k) => k,
                other => return Err(BudgetError::Kind(other.to_string())),
            };
            let n = v.trim().parse::<f64>().ok().filter(|n| fits(kind, *n));
            out.set(kind, checked(kind, n, None)?);
        }
        Ok(out)
    }
}

impl fmt::Display for Limits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = KINDS
            .iter()
            .filter_map(|k| self.get(k).map(|v| format!("{k}={}", number(k, v))))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl Serialize for Limits {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Limits {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One amount of the JSON form: a non-negative number (not its text; whole, and within
/// what a count holds, for all but dollars), at most `ceiling`.
fn amount(kind: &str, v: &Value, ceiling: Option<f64>) -> Result<f64, BadAmount> {
    let n = match v {
        // Any whole number that reads as a count fits (u64::MAX as f64 rounds up to 2^64).
        Value::Number(n) => n
            .as_u64()
            .map(|u| u as f64)
            .or_else(|| n.as_f64().filter(|n| fits(kind, *n))),
        _ => None,
    };
    checked(kind, n, ceiling)
}

/// Whether `n` fits its kind: a count (all but dollars) holds whole numbers below 2^64.
fn fits(kind: &str, n: f64) -> bool {
    kind == "usd" || n < 2f64.powi(64)
}

/// The most an amount of `kind` may be: the host's `ceiling`, and for seconds at most
/// [`MAX_SECONDS`]; with whether the host's ceiling is what limits it.
fn limit_of(kind: &str, ceiling: Option<f64>) -> Option<(f64, bool)> {
    let most = (kind == "seconds").then_some(MAX_SECONDS as f64);
    match (ceiling, most) {
        (Some(c), Some(m)) if m < c => Some((m, false)),
        (Some(c), _) => Some((c, true)),
        (None, Some(m)) => Some((m, false)),
        (None, None) => None,
    }
}

/// `n` (None: it did not read) as an amount of `kind`: non-negative, whole for all but
/// dollars, at most `ceiling`.
fn checked(kind: &str, n: Option<f64>, ceiling: Option<f64>) -> Result<f64, BadAmount> {
    let whole = kind != "usd";
    let limit = limit_of(kind, ceiling);
    let bad = || BadAmount {
        what: if whole { "a whole number" } else { "a number" },
        range: match limit {
            Some((c, true)) => format!("from 0 to {} (the host's ceiling)", number(kind, c)),
            Some((c, false)) => format!("from 0 to {} (ten years)", number(kind, c)),
            None => "of 0 or more".to_string(),
        },
    };
    let n = n
        .filter(|n| {
            n.is_finite() && *n >= 0.0 && !n.is_sign_negative() && (!whole || n.fract() == 0.0)
        })
        .ok_or_else(bad)?;
    if limit.is_some_and(|(c, _)| n > c) {
        return Err(bad());
    }
    Ok(n)
}

/// A task's budget: its own, its context's, and what happens at the limit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Budget {
    pub task: Limits,
    pub context: Limits,
    /// The request set the context's budget (else a follow-up keeps the one its context has).
    pub context_named: bool,
    pub on_budget: OnBudget,
}

impl Budget {
    pub fn is_empty(&self) -> bool {
        self.task.is_empty() && self.context.is_empty()
    }
}

/// `metadata.budget`: `{usd, tokens, toolCalls, seconds, context: {...}, onBudget}`, each
/// checked against the host's ceilings; the kinds left out take the host's defaults.
pub fn parse(v: &Value, host: &Controls) -> Result<Budget, BadInput> {
    const FIELD: &str = "metadata.budget";
    let Value::Object(obj) = v else {
        return Err(BadInput::new(
            FIELD,
            "must be an object {usd, tokens, toolCalls, seconds, context, onBudget}",
        ));
    };
    let task = limits_of(obj, FIELD, &host.ceiling, &["context", "onBudget"])?;
    let context = match obj.get("context") {
        None | Some(Value::Null) => None,
        Some(Value::Object(c)) => Some(limits_of(
            c,
            &format!("{FIELD}.context"),
            &host.context_ceiling,
            &[],
        )?),
        Some(_) => {
            return Err(BadInput::new(
                format!("{FIELD}.context"),
                "must be an object {usd, tokens, toolCalls, seconds}",
            ))
        }
    };
    let on_budget = match obj.get("onBudget") {
        None => host.on_budget,
        Some(w) => {
            let field = format!("{FIELD}.onBudget");
            let word = w
                .as_str()
                .ok_or_else(|| BadInput::new(&field, "must be ask or fail"))?;
            word.parse()
                .map_err(|why: crate::adapter::BadOnBudget| BadInput::new(field, why.to_string()))?
        }
    };
    Ok(Budget {
        task: task.or(host.default_budget).or(host.ceiling),
        context: context.unwrap_or_default().or(host.context_ceiling),
        context_named: context.is_some(),
        on_budget,
    })
}

fn limits_of(
    obj: &Map<String, Value>,
    field: &str,
    ceiling: &Limits,
    other_keys: &[&str],
) -> Result<Limits, BadInput> {
    if let Some(k) = obj
        .keys()
        .find(|k| !KINDS.contains(&k.as_str()) && !other_keys.contains(&k.as_str()))
    {
        return Err(BadInput::new(
            format!("{field}.{k}"),
            "unknown key; the budget's keys are usd, tokens, toolCalls, seconds, context and onBudget",
        ));
    }
    let mut out = Limits::default();
    for k in KINDS {
        // `null` is no number: refused like any other non-number.
        if let Some(v) = obj.get(k) {
            let n = amount(k, v, ceiling.get(k))
                .map_err(|why| BadInput::new(format!("{field}.{k}"), why.to_string()))?;
            out.set(k, n);
        }
    }
    Ok(out)
}

/// The most dollars a usage report may say (more is no real cost: a CLI's garbage), so that
/// sums of them stay finite.
const MAX_USD: f64 = 1e15;

/// Whether a reported cost is an amount to count: finite, 0 or more, at most [`MAX_USD`].
pub fn usable_usd(c: f64) -> bool {
    (0.0..=MAX_USD).contains(&c)
}

/// What was spent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub usd: f64,
    pub tokens: u64,
    pub tool_calls: u64,
    pub seconds: u64,
}

impl Spent {
    pub fn get(&self, kind: &str) -> f64 {
        match kind {
            "usd" => self.usd,
            "tokens" => self.tokens as f64,
            "toolCalls" => self.tool_calls as f64,
            "seconds" => self.seconds as f64,
            _ => 0.0,
        }
    }

    pub fn plus(self, o: Spent) -> Spent {
        Spent {
            usd: (self.usd + o.usd).min(f64::MAX),
            tokens: self.tokens.saturating_add(o.tokens),
            tool_calls: self.tool_calls.saturating_add(o.tool_calls),
            seconds: self.seconds.saturating_add(o.seconds),
        }
    }

    pub fn to_json(self) -> Value {
        let rounded = (self.usd * 1e6).round() / 1e6;
        json!({
            "usd": if rounded.is_finite() { rounded } else { self.usd.min(f64::MAX) },
            "tokens": self.tokens,
            "toolCalls": self.tool_calls,
            "seconds": self.seconds,
        })
    }

    /// Read back from [`Spent::to_json`].
    pub fn from_json(v: &Value) -> Spent {
        let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        Spent {
            usd: v
                .get("usd")
                .and_then(Value::as_f64)
                .filter(|c| usable_usd(*c))
                .unwrap_or(0.0),
            tokens: u("tokens"),
            tool_calls: u("toolCalls"),
            seconds: u("seconds"),
        }
    }

    /// What a task spent, from its metadata: `budget.spent`, else its `usage`.
    pub fn of_task(metadata: Option<&Map<String, Value>>) -> Spent {
        let Some(md) = metadata else {
            return Spent::default();
        };
        if let Some(s) = md.get("budget").and_then(|b| b.get("spent")) {
            return Spent::from_json(s);
        }
        let Some(u) = md.get("usage") else {
            return Spent::default();
        };
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        Spent {
            usd: u
                .get("costUsd")
                .and_then(Value::as_f64)
                .filter(|c| usable_usd(*c))
                .unwrap_or(0.0),
            tokens: n("inputTokens").saturating_add(n("outputTokens")),
            ..Spent::default()
        }
    }
}

/// Which budget was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Task,
    Context,
}

impl Scope {
    pub fn word(self) -> &'static str {
        match self {
            Scope::Task => "task",
            Scope::Context => "context",
        }
    }
}

/// A budget reached: whose, and of which kinds.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    pub scope: Scope,
    pub kinds: Vec<&'static str>,
}

/// Counts one turn's spending against the task's and the context's budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Meter {
    pub budget: Budget,
    /// The task's spending in its earlier runs (before a pause or a restart).
    pub before: Spent,
    /// The context's other tasks' spending.
    pub context_before: Spent,
    /// This run's: tool calls counted, dollars and tokens as last reported.
    run: Spent,
    /// The first amounts of the task's budget (what "continue" adds by default).
    pub step: Limits,
}

impl Meter {
    pub fn new(budget: Budget, before: Spent, context_before: Spent, step: Limits) -> Meter {
        Meter {
            budget,
            before,
            context_before,
            run: Spent::default(),
            step: if step.is_empty() { budget.task } else { step },
        }
    }

    /// Whether there is anything to count against.
    pub fn active(&self) -> bool {
        !self.budget.is_empty()
    }

    /// The task's spending, `secs` into this run.
    pub fn task_spent(&self, secs: u64) -> Spent {
        let mut run = self.run;
        run.seconds = secs;
        self.before.plus(run)
    }

    fn reached(&self, secs: u64, tool_call: bool) -> Option<Reached> {
        let task = self.task_spent(secs);
        let context = self.context_before.plus(task);
        for (scope, limits, spent) in [
            (Scope::Task, &self.budget.task, task),
            (Scope::Context, &self.budget.context, context),
        ] {
            let kinds: Vec<&'static str> = KINDS
                .into_iter()
                .filter(|k| {
                    limits.get(k).is_some_and(|allowed| {
                        let s = spent.get(k);
                        match *k {
                            "toolCalls" => tool_call && s >= allowed,
                            _ => s >= allowed,
                        }
                    })
                })
                .collect();
            if !kinds.is_empty() {
                return Some(Reached { scope, kinds });
            }
        }
        None
    }

    /// The agent starts a tool: counted, unless it is one too many (then the budget is
    /// reached and it is not counted).
    pub fn on_tool_use(&mut self, secs: u64) -> Option<Reached> {
        if let Some(r) = self.reached(secs, true) {
            if r.kinds.contains(&"toolCalls") {
                return Some(r);
            }
        }
        self.run.tool_calls += 1;
        None
    }

    /// The CLI reported its usage so far.
    pub fn on_usage(&mut self, u: &crate::adapter::Usage, secs: u64) -> Option<Reached> {
        // A cost that is no amount (negative, not finite, beyond what adds up) is ignored:
        // it would lower what was spent, or make it unreadable.
        if let Some(c) = u.cost_usd.filter(|c| usable_usd(*c)) {
            self.run.usd = c;
        }
        let tokens = u
            .input_tokens
            .unwrap_or(0)
            .saturating_add(u.output_tokens.unwrap_or(0));
        if tokens > 0 {
            self.run.tokens = tokens;
        }
        self.reached(secs, false)
            .filter(|r| r.kinds.iter().any(|k| *k != "seconds"))
    }

    /// The clock: the budget's time is up.
    pub fn on_clock(&self, secs: u64) -> Option<Reached> {
        self.reached(secs, false)
            .filter(|r| r.kinds.contains(&"seconds"))
    }

    /// Seconds this run may still take before a time budget is reached.
    pub fn seconds_left(&self) -> Option<u64> {
        let task = self
            .budget
            .task
            .seconds
            .map(|s| s.saturating_sub(self.before.seconds));
        let ctx = self.budget.context.seconds.map(|s| {
            s.saturating_sub(
                self.context_before
                    .seconds
                    .saturating_add(self.before.seconds),
            )
        });
        match (task, ctx) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The task's metadata `budget`: allowed and spent, for the task and the context.
    pub fn metadata(&self, secs: u64) -> Value {
        let task = self.task_spent(secs);
        let mut v = json!({
            "allowed": self.budget.task.to_json(),
            "spent": task.to_json(),
            "onBudget": self.budget.on_budget.word(),
            "step": self.step.to_json(),
        });
        if !self.budget.context.is_empty() {
            v["context"] = json!({
                "allowed": self.budget.context.to_json(),
                "spent": self.context_before.plus(task).to_json(),
            });
        }
        v
    }

    /// The question asked at a reached budget (a data part of the approval schema).
    pub fn question(
        &self,
        r: &Reached,
        secs: u64,
        id: &str,
        ceilings: (&Limits, &Limits),
    ) -> Value {
        let task = self.task_spent(secs);
        let (allowed, spent, ceiling) = match r.scope {
            Scope::Task => (&self.budget.task, task, ceilings.0),
            Scope::Context => (
                &self.budget.context,
                self.context_before.plus(task),
                ceilings.1,
            ),
        };
        let more = raise_by(allowed, &self.step, &r.kinds, ceiling, None);
        let mut options = Vec::new();
        if let Some(more) = &more {
            options.push(json!({"id": "continue", "label": format!("Continue with {} more", amounts(more, &r.kinds))}));
        }
        options.push(
            json!({"id": "stop", "label": "Stop here (the task completes with what was done)"}),
        );
        json!({
            "approvalId": id,
            "kind": "budget",
            "scope": r.scope.word(),
            "reached": r.kinds,
            "spent": spent.to_json(),
            "allowed": allowed.to_json(),
            "detail": self.reached_text(r, secs),
            "options": options,
            "answer": "Reply on this task: 'continue' (or 'continue with N'), or 'stop'; or a data part {\"option\": \"continue\"|\"stop\", \"add\": {KIND: N}}",
        })
    }

    /// `The task's budget of 5 tool calls is reached (5 spent)`.
    pub fn reached_text(&self, r: &Reached, secs: u64) -> String {
        let task = self.task_spent(secs);
        let (allowed, spent) = match r.scope {
            Scope::Task => (&self.budget.task, task),
            Scope::Context => (&self.budget.context, self.context_before.plus(task)),
        };
        let what: Vec<String> = r
            .kinds
            .iter()
            .map(|k| {
                format!(
                    "{} ({} spent)",
                    amount_text(k, allowed.get(k).unwrap_or(0.0)),
                    amount_text(k, spent.get(k))
                )
            })
            .collect();
        let whose = match r.scope {
            Scope::Task => "task's",
            Scope::Context => "conversation's",
        };
        format!("The {whose} budget of {} is reached", what.join(", "))
    }
}

fn amount_text(kind: &str, v: f64) -> String {
    let n = v as u64;
    let s = if n == 1 { "" } else { "s" };
    match kind {
        // Cents, but a sum under a cent with its first figures ($0.0012, not $0.00).
        "usd" if v > 0.0 && v < 0.01 => format!("${v:.4}"),
        "usd" => format!("${v:.2}"),
        "tokens" => format!("{n} token{s}"),
        "toolCalls" => format!("{n} tool call{s}"),
        _ => format!("{n} s"),
    }
}

fn amounts(l: &Limits, kinds: &[&str]) -> String {
    kinds
        .iter()
        .filter_map(|k| l.get(k).map(|v| amount_text(k, v)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How much "continue" adds to each reached kind: `asked` (else the first amount, `step`),
/// within the ceiling; None when nothing can be added.
pub fn raise_by(
    allowed: &Limits,
    step: &Limits,
    kinds: &[&str],
    ceiling: &Limits,
    asked: Option<&Limits>,
) -> Option<Limits> {
    let mut out = Limits::default();
    for k in kinds {
        let now = allowed.get(k).unwrap_or(0.0);
        let want = asked
            .and_then(|a| a.get(k))
            .or_else(|| step.get(k))
            .unwrap_or(now)
            .max(if *k == "usd" { 0.0 } else { 1.0 });
        let room = limit_of(k, ceiling.get(k)).map_or(f64::INFINITY, |(c, _)| (c - now).max(0.0));
        let add = want.min(room);
        if add > 0.0 {
            out.set(k, add);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Why "continue" can add nothing to the reached `kinds` of `allowed`: the host's
/// ceiling, or the longest time budget, is reached; None when neither is (the amount to add
/// is 0, the budget's first amount being 0).
pub fn why_no_raise(allowed: &Limits, kinds: &[&str], ceiling: &Limits) -> Option<String> {
    let at = |k: &str| {
        limit_of(k, ceiling.get(k))
            .filter(|(c, _)| allowed.get(k).unwrap_or(0.0) >= *c)
            .map(|(_, host)| host)
    };
    if kinds.iter().any(|k| at(k) == Some(true)) {
        Some(format!("the budget is at the host's ceiling ({ceiling})"))
    } else if kinds.iter().any(|k| at(k) == Some(false)) {
        Some(format!(
            "the time budget is at its most ({MAX_SECONDS} s, ten years)"
        ))
    } else {
        None
    }
}

/// The answer to a budget's question.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetAnswer {
    /// Go on: `add` to each kind it names, else `each` to each reached kind, else the
    /// first amounts again.
    Continue {
        add: Option<Limits>,
        each: Option<f64>,
    },
    Stop,
}

/// Reads the answer to a budget's question: a data part `{"option": "continue"|"stop",
/// "add": {KIND: N}}` (or `"decision": "allow"|"deny"`), else the text: `continue`,
/// `continue with N`, `yes` … or `stop`, `no` ….
pub fn answer_of(data: Option<&Value>, text: &str) -> Result<BudgetAnswer, BudgetError> {
    if let Some(d) = data.filter(|d| d.get("option").is_some() || d.get("decision").is_some()) {
        let word = d
            .get("option")
            .or_else(|| d.get("decision"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase();
        return match word.as_str() {
            "continue" | "allow" | "approve" | "yes" => {
                let add = match d.get("add") {
                    None | Some(Value::Null) => None,
                    Some(Value::Object(o)) => Some(limits_of(o, "add", &Limits::default(), &[])?),
                    Some(_) => return Err(BudgetError::AddNotAnObject),
                };
                Ok(BudgetAnswer::Continue { add, each: None })
            }
            "stop" | "deny" | "no" | "reject" => Ok(BudgetAnswer::Stop),
            _ => Err(BudgetError::Answer),
        };
    }
    let t = text
        .trim()
        .trim_end_matches(['.', '!'])
        .to_ascii_lowercase();
    let mut words = t.split_whitespace();
    match words.next() {
        Some("continue" | "yes" | "y" | "ok" | "go" | "allow") => {
            let rest: Vec<&str> = words.filter(|w| *w != "with" && *w != "more").collect();
            let each = match rest.as_slice() {
                [] => None,
                [n, ..] => Some(
                    n.trim_start_matches('$')
                        .parse::<f64>()
                        .ok()
                        .filter(|n| n.is_finite() && *n > 0.0)
                        .ok_or(BudgetError::Answer)?,
                ),
            };
            Ok(BudgetAnswer::Continue { add: None, each })
        }
        Some("stop" | "no" | "n" | "deny" | "enough") => Ok(BudgetAnswer::Stop),
        _ => Err(BudgetError::Answer),
    }
}

/// `allowed` with `more` added to each of its kinds.
pub fn raised(allowed: &Limits, more: &Limits) -> Limits {
    let mut out = *allowed;
    for k in KINDS {
        if let Some(m) = more.get(k) {
            out.set(k, allowed.get(k).unwrap_or(0.0) + m);
        }
    }
    out
}

#[cfg(test)]
mod tests;
