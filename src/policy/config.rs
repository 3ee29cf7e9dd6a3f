//! `[approvals]`: the host's named rule sets and the one a request that names none gets.
//! The budget's ceilings, defaults and `on_budget` are in `[limits]`
//! ([`crate::engine::config::LimitsConfig`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::rules::RuleSpec;
use super::{BadInput, Controls, Limits, OnBudget};

/// `[approvals]`: rules that answer the agents' permission requests without a round trip.
#[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[command(next_help_heading = "Approvals")]
pub struct ApprovalsConfig {
    /// Rule set of a task whose request names none (metadata.approvals): ask-all, read-only, workspace-write or a set of [approvals.sets]
    #[arg(
        id = "approvals.default",
        long = "approvals",
        env = "AGENT_HOST_APPROVALS",
        value_name = "SET",
        default_value = "ask-all"
    )]
    pub default: String,
    /// Named rule sets (config file only): [approvals.sets.NAME] rules = [{ decision, kind, tool, target | target_regex, in_workdir }]
    #[arg(skip)]
    #[serde(default)]
    pub sets: BTreeMap<String, SetConfig>,
}

/// One named set of the config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetConfig {
    pub rules: Vec<RuleSpec>,
}

/// Keys of `[approvals]` only the config file sets, with their help.
pub const APPROVALS_FILE_ONLY: &[(&str, &str)] = &[(
    "sets",
    "Named rule sets: [approvals.sets.NAME] rules = [{ decision = \"allow\"|\"deny\"|\"ask\", kind, tool, target or target_regex, in_workdir }]; first match wins, else ask",
)];

/// The budget part of `[limits]`, as [`crate::engine::config::LimitsConfig`] has it.
#[derive(Debug, Clone, Copy, Default)]
pub struct BudgetSettings {
    pub default: Limits,
    pub ceiling: Limits,
    pub context_ceiling: Limits,
    pub on_budget: OnBudget,
}

/// The host's controls from its settings: the shipped sets and the config's, the default
/// set (which must exist), the budget's ceilings and defaults (a default above a ceiling is
/// refused).
pub fn controls(approvals: &ApprovalsConfig, b: &BudgetSettings) -> Result<Controls, BadInput> {
    let raw: BTreeMap<String, Vec<RuleSpec>> = approvals
        .sets
        .iter()
        .map(|(k, v)| (k.clone(), v.rules.clone()))
        .collect();
    let sets = super::rules::config_sets(&raw)?;
    if !sets.contains_key(&approvals.default) {
        return Err(BadInput::new(
            "[approvals] default",
            format!(
                "unknown rule set '{}'; the sets are {}",
                approvals.default,
                sets.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    for k in super::budget::KINDS {
        if let (Some(d), Some(c)) = (b.default.get(k), b.ceiling.get(k)) {
            if d > c {
                return Err(BadInput::new(
                    "[limits] budget",
                    format!("{k} is above the ceiling of max_budget ({c})"),
                ));
            }
        }
    }
    Ok(Controls {
        sets,
        default_set: approvals.default.clone(),
        ceiling: b.ceiling,
        context_ceiling: b.context_ceiling,
        default_budget: b.default,
        on_budget: b.on_budget,
    })
}
