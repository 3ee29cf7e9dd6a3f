//! A turn's approval rules and budget: read from the task's metadata when the turn starts
//! (where the request's were put when the task was accepted, and where a raised budget and
//! what was spent are kept, so that they survive a pause and a restart), applied to each
//! event the program reports.

use serde_json::{json, Value};
use tokio::time::Instant;

use super::super::Inner;
use crate::adapter::wire::Decision as Answer;
use crate::adapter::AgentEvent;
use crate::policy::budget::{Meter, Reached};
use crate::policy::rules::{Decision, Request};
use crate::policy::{Budget, Limits, OnBudget, Policy, Spent};
use crate::task::{ExitReason, TurnMapper};

/// The prompt of a turn that continues a task after its budget was raised.
pub const CONTINUE_PROMPT: &str = "You were stopped because you reached your budget; it has been raised. Continue the work where you left off and finish the request.";

/// The prompt of a turn that continues a task after its budget was raised, for an adapter
/// that cannot resume the agent's session: the program starts afresh, so it is given the
/// task's request again.
pub fn restart_prompt(request: &str) -> String {
    format!(
        "You were stopped because you reached your budget, and it has been raised; your earlier session could not be kept, so you start again. What you changed so far is in the working directory. The request:\n\n{request}\n\nContinue the work where you left off and finish the request."
    )
}

/// Whether a turn's prompt is one of a task continued after its budget was raised.
pub fn continues_at_budget(prompt: &str) -> bool {
    prompt == CONTINUE_PROMPT
        || prompt.starts_with(
            "You were stopped because you reached your budget, and it has been raised;",
        )
}

pub(in crate::engine) struct TurnControls {
    pub policy: Policy,
    pub meter: Meter,
    started: Instant,
    /// The time this run waited for the caller's answers (not counted as spent).
    waited: std::time::Duration,
    /// Since when it waits for an answer, while it does.
    waiting_since: Option<Instant>,
    adapter: String,
    ceilings: (Limits, Limits),
    /// The adapter resumes sessions: a budget's continue resumes the same one (else the
    /// program starts again with the request).
    resumes: bool,
}

/// A permission request the rules answered.
pub(in crate::engine) struct Ruled {
    pub answer: Answer,
    pub text: String,
    pub data: Value,
}

impl TurnControls {
    /// The task's controls, from its stored metadata.
    pub async fn load(inner: &Inner, task_id: &str, context_id: &str) -> TurnControls {
        let host = &inner.config.controls;
        let md = match inner.store.get(task_id).await {
            Ok(Some(s)) => s.task.metadata,
            _ => None,
        };
        let policy = md
            .as_ref()
            .and_then(|m| m.get("approvals"))
            .map(|v| {
                crate::policy::rules::policy_of(v, &host.sets, &host.default_set).unwrap_or_else(
                    |e| {
                        tracing::warn!(error = %e, "the task's rule set is no longer known; the host's default applies");
                        host.default_policy()
                    },
                )
            })
            .unwrap_or_else(|| host.default_policy());
        let b = md.as_ref().and_then(|m| m.get("budget"));
        let budget = b.map(budget_of).unwrap_or_default();
        let before = b
            .and_then(|b| b.get("spent"))
            .map(Spent::from_json)
            .unwrap_or_default();
        let step = b
            .and_then(|b| b.get("step"))
            .map(Limits::from_json)
            .unwrap_or_default();
        let context_before = if budget.context.is_empty() {
            Spent::default()
        } else {
            super::earlier_tasks(inner, context_id, task_id)
                .await
                .iter()
                .map(|t| Spent::of_task(t.metadata.as_ref()))
                .fold(Spent::default(), Spent::plus)
        };
        TurnControls {
            policy,
            meter: Meter::new(budget, before, context_before, step),
            started: Instant::now(),
            waited: std::time::Duration::ZERO,
            waiting_since: None,
            adapter: inner.launch.adapter.id.clone(),
            ceilings: (host.ceiling, host.context_ceiling),
            resumes: inner.launch.can_resume(),
        }
    }

    /// Whole seconds of this run so far, less the time it waited for the caller.
    pub fn secs(&self) -> u64 {
        let now = Instant::now();
        let waiting = self
            .waiting_since
            .map_or(std::time::Duration::ZERO, |t| now - t);
        (now - self.started)
            .saturating_sub(self.waited + waiting)
            .as_secs()
    }

    /// The task waits for the caller's answer (`true`), or works again: the time budget's
    /// clock stops while it waits.
    pub fn set_waiting(&mut self, waiting: bool) {
        match (waiting, self.waiting_since) {
            (true, None) => self.waiting_since = Some(Instant::now()),
            (false, Some(since)) => {
                self.waited += since.elapsed();
                self.waiting_since = None;
            }
            _ => {}
        }
    }

    /// When the time budget is spent, if there is one; none while the task waits for an
    /// answer (its clock is stopped).
    pub fn deadline(&self) -> Option<Instant> {
        if self.waiting_since.is_some() {
            return None;
        }
        // Checked: an instant too far to exist is no deadline (no run lasts that long).
        self.meter.seconds_left().and_then(|s| {
            self.started
                .checked_add(self.waited)?
                .checked_add(std::time::Duration::from_secs(s))
        })
    }

    /// The task's `budget` metadata now, when it has a budget.
    pub fn metadata(&self) -> Option<Value> {
        self.meter
            .active()
            .then(|| self.meter.metadata(self.secs()))
    }

    /// Counts an event; the reason to stop the program when it reached a budget.
    pub fn on_event(&mut self, ev: &AgentEvent, mapper: &mut TurnMapper) -> Option<ExitReason> {
        if !self.meter.active() {
            return None;
        }
        let secs = self.secs();
        let reached = match ev {
            AgentEvent::ToolUse { .. } => self.meter.on_tool_use(secs),
            AgentEvent::Usage(u) => self.meter.on_usage(u, secs),
            // The turn ends: what it spent goes with its last status.
            AgentEvent::Done { .. }
            | AgentEvent::Error { .. }
            | AgentEvent::Message { .. }
            | AgentEvent::Rejected { .. } => None,
            _ => return None,
        };
        match reached {
            Some(r) => Some(self.stop(&r)),
            None => {
                mapper.add_metadata("budget", self.meter.metadata(secs));
                None
            }
        }
    }

    /// The clock reached the time budget: the reason to stop.
    pub fn on_clock(&self) -> Option<ExitReason> {
        self.meter.on_clock(self.secs()).map(|r| self.stop(&r))
    }

    fn stop(&self, r: &Reached) -> ExitReason {
        let secs = self.secs();
        let on = self.meter.budget.on_budget;
        metrics::counter!("agent_host_budget_stops_total", "adapter" => self.adapter.clone(), "outcome" => on.word(), "scope" => r.scope.word())
            .increment(1);
        let reached = self.meter.reached_text(r, secs);
        tracing::info!(%reached, on_budget = on.word(), "budget reached; stopping the agent");
        let budget = self.meter.metadata(secs);
        match on {
            OnBudget::Fail => ExitReason::BudgetFailed {
                text: format!("{reached}, so the agent was stopped and the task failed"),
                budget,
            },
            OnBudget::Ask => {
                let id = format!("budget-{}", uuid::Uuid::new_v4().simple());
                let question =
                    self.meter
                        .question(r, secs, &id, (&self.ceilings.0, &self.ceilings.1));
                let kept = if self.resumes {
                    "its session is kept"
                } else {
                    "this agent cannot resume its session: continuing starts it again with the request, and what it changed so far stays"
                };
                ExitReason::BudgetPaused {
                    text: format!("{reached}, so the agent was stopped ({kept}). Continue with more, or stop here?"),
                    question,
                    budget,
                }
            }
        }
    }

    /// The rules' answer to a permission request, when a rule answers it.
    pub fn rule(&self, ev: &AgentEvent, cwd: &str) -> Option<Ruled> {
        let AgentEvent::ApprovalRequired {
            id,
            kind,
            tool,
            target,
            detail,
            options,
        } = ev
        else {
            return None;
        };
        if self.policy.is_empty() || kind == "question" {
            return None;
        }
        let req = Request {
            kind,
            tool: tool.as_deref(),
            target: target.as_deref(),
        };
        let verdict = self.policy.decide(&req, cwd);
        metrics::counter!("agent_host_rule_decisions_total", "adapter" => self.adapter.clone(), "decision" => verdict.decision.word())
            .increment(1);
        let (rule, place) = verdict.rule?;
        let allow = match verdict.decision {
            Decision::Allow => true,
            Decision::Deny => false,
            Decision::Ask => return None,
        };
        let request = crate::task::mapping::approval_data(
            id,
            kind,
            tool.as_deref(),
            target.as_deref(),
            detail.as_deref(),
            options,
        );
        let what = match (tool, target) {
            (Some(t), Some(x)) => format!("{t}: {x}"),
            (Some(t), None) => t.clone(),
            (None, Some(x)) => x.clone(),
            (None, None) => kind.clone(),
        };
        let verb = if allow { "Allowed" } else { "Denied" };
        let text = format!("{verb} by {place} ({rule}): {what}");
        tracing::info!(decision = verdict.decision.word(), %rule, %what, "a rule answered the agent");
        let answer = Answer {
            id: id.clone(),
            allow,
            option: None,
            message: (!allow).then(|| format!("Denied by agent-host's approval rules ({rule})")),
            message_id: None,
        };
        let data = json!({
            "kind": "rule-decision",
            "decision": verdict.decision.word(),
            "rule": rule,
            "by": place,
            "set": self.policy.set.name,
            "request": request,
        });
        Some(Ruled { answer, text, data })
    }
}

/// The budget a task's metadata holds.
fn budget_of(b: &Value) -> Budget {
    let on_budget = b
        .get("onBudget")
        .and_then(Value::as_str)
        .and_then(|w| w.parse().ok())
        .unwrap_or_default();
    Budget {
        task: b.get("allowed").map(Limits::from_json).unwrap_or_default(),
        context: b
            .get("context")
            .and_then(|c| c.get("allowed"))
            .map(Limits::from_json)
            .unwrap_or_default(),
        context_named: false,
        on_budget,
    }
}

/// The CLI's own limit flags for the task's budget (the adapter's `budget_args`, in pairs
/// of a flag and its value): `{max_turns}` (the tool calls left, plus one for the answer),
/// `{max_budget_usd}` (the dollars left). A pair whose value is unknown is left out.
pub(in crate::engine) fn budget_args(template: &[String], meter: &Meter) -> Vec<String> {
    let left = |kind: &str| {
        meter
            .budget
            .task
            .get(kind)
            .map(|allowed| (allowed - meter.before.get(kind)).max(0.0))
    };
    let turns = left("toolCalls").map(|n| format!("{}", n as u64 + 1));
    let usd = left("usd").map(|n| format!("{n:.4}"));
    let mut out = Vec::new();
    for pair in template.chunks(2) {
        let mut filled = Vec::new();
        let mut known = true;
        for arg in pair {
            let mut a = arg.clone();
            for (key, value) in [("{max_turns}", &turns), ("{max_budget_usd}", &usd)] {
                if a.contains(key) {
                    match value {
                        Some(v) => a = a.replace(key, v),
                        None => known = false,
                    }
                }
            }
            filled.push(a);
        }
        if known {
            out.extend(filled);
        }
    }
    out
}
