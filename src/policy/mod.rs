//! What a task may do without asking and how much it may spend: approval rules that answer
//! a program's permission requests without a round trip ([`rules`]), and budgets per task
//! and per context ([`budget`]). Pure: no I/O; the engine applies both to each turn's events.
//!
//! The host's side (named rule sets, the budget ceilings and defaults, `on_budget`) is
//! [`Controls`]; what one request asks for (`metadata.approvals`, `metadata.budget`) is
//! checked against it by [`Controls::for_request`], before anything starts.

pub mod budget;
pub mod config;
pub mod rules;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

pub use budget::{Budget, Limits, OnBudget, Spent};
pub use rules::{Policy, RuleSet};

/// A request's controls that cannot be used: the field and why (JSON-RPC -32602).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct BadInput {
    /// The metadata field, e.g. `metadata.budget.usd`.
    pub field: String,
    pub why: String,
}

impl BadInput {
    pub fn new(field: impl Into<String>, why: impl Into<String>) -> BadInput {
        BadInput {
            field: field.into(),
            why: why.into(),
        }
    }
}

/// The host's controls: its named rule sets and the one used when a request names none,
/// the budget ceilings and defaults, and what happens at a budget's limit.
#[derive(Debug, Clone)]
pub struct Controls {
    pub sets: BTreeMap<String, Arc<RuleSet>>,
    /// The set of a request that names none.
    pub default_set: String,
    /// Highest task budget a request may set; also the budget of the kinds neither the
    /// request nor the default sets (a request that leaves a kind out does not escape it).
    pub ceiling: Limits,
    /// Highest context budget a request may set; also the context budget of the kinds the
    /// request leaves out.
    pub context_ceiling: Limits,
    /// The task budget of a request that sets none.
    pub default_budget: Limits,
    /// What happens at a budget's limit when the request does not say (the adapter's
    /// `on_budget`, else the host's).
    pub on_budget: OnBudget,
}

impl Default for Controls {
    fn default() -> Self {
        Controls {
            sets: rules::shipped_sets(),
            default_set: rules::ASK_ALL.to_string(),
            ceiling: Limits::default(),
            context_ceiling: Limits::default(),
            default_budget: Limits::default(),
            on_budget: OnBudget::Ask,
        }
    }
}

/// What one task runs under: its rules and its budget.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskControls {
    pub policy: Policy,
    pub budget: Budget,
}

impl Controls {
    /// The controls of a request from its metadata (`approvals`, `budget`; the message's
    /// wins over the request's), checked against the host's sets and ceilings.
    pub fn for_request(
        &self,
        message: Option<&Map<String, Value>>,
        request: Option<&Map<String, Value>>,
    ) -> Result<TaskControls, BadInput> {
        let pick = |key: &str| {
            message
                .and_then(|m| m.get(key))
                .or_else(|| request.and_then(|m| m.get(key)))
                .filter(|v| !v.is_null())
        };
        let policy = match pick("approvals") {
            Some(v) => rules::policy_of(v, &self.sets, &self.default_set)?,
            None => self.default_policy(),
        };
        // No budget reads as an empty one: every kind from the defaults and the ceilings.
        let none = Value::Object(Map::new());
        let budget = budget::parse(pick("budget").unwrap_or(&none), self)?;
        Ok(TaskControls { policy, budget })
    }

    /// The host's default set, with no rules of the request's.
    pub fn default_policy(&self) -> Policy {
        let set = self
            .sets
            .get(&self.default_set)
            .cloned()
            .unwrap_or_else(|| Arc::new(RuleSet::empty(rules::ASK_ALL)));
        Policy::of(set)
    }

    /// The card's view: the named sets (with their rules) and the ceilings.
    pub fn describe(&self) -> Value {
        let sets: Map<String, Value> = self
            .sets
            .iter()
            .map(|(name, set)| (name.clone(), set.describe()))
            .collect();
        serde_json::json!({
            "ruleSets": sets,
            "defaultRuleSet": self.default_set,
            "budgetCeiling": self.ceiling.to_json(),
            "contextBudgetCeiling": self.context_ceiling.to_json(),
            "defaultBudget": self.default_budget.to_json(),
            "onBudget": self.on_budget.word(),
        })
    }
}
