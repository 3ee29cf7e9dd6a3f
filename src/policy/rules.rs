//! Approval rules: allow or deny a program's permission request by its `kind`, `tool` and a
//! pattern on its `target` (a command line, a file path), first match wins, and what no rule
//! matches is asked. A request may name one of the host's sets and add rules of its own in
//! front of it, which may only narrow it (deny or ask, never allow).
//!
//! Patterns are anchored: a glob (`*` any run of characters except the shell's control
//! characters `; & | $ \` < >` and newlines, so that `cargo test*` does not match
//! `cargo test; rm -rf ~`; `?` one such character), or a regular expression matched against
//! the whole target. A command wrapped in a shell (`/bin/bash -lc 'ls -la'`, as Codex asks)
//! is matched by what it runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::BadInput;

/// The set that asks everything (what a host without rules does).
pub const ASK_ALL: &str = "ask-all";

/// The shipped sets, in their config form.
const SHIPPED: &str = include_str!("sets.toml");

/// What a rule (or the absence of one) answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
    Ask,
}

impl Decision {
    pub fn word(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
            Decision::Ask => "ask",
        }
    }
}

/// The kinds of request a rule may name.
const KINDS: &[&str] = &["command", "file-edit", "tool", "question", "other"];

/// A rule as written in the config file or in `metadata.approvals.rules`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    pub decision: Decision,
    /// The request's kind: `command`, `file-edit`, `tool`, `question` or `other`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// A glob on the tool's name (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A glob on the target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// A regular expression on the whole target.
    #[serde(
        default,
        alias = "targetRegex",
        skip_serializing_if = "Option::is_none"
    )]
    pub target_regex: Option<String>,
    /// The target is a path (or several, comma-separated) inside the working directory.
    #[serde(
        default,
        alias = "inWorkdir",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub in_workdir: bool,
}

/// A rule, its patterns compiled.
#[derive(Debug, Clone)]
pub struct Rule {
    pub spec: RuleSpec,
    tool: Option<Regex>,
    target: Option<Regex>,
}

impl PartialEq for Rule {
    fn eq(&self, other: &Rule) -> bool {
        self.spec == other.spec
    }
}

impl Rule {
    /// Compiles a rule; the error says which pattern does not parse.
    pub fn new(spec: RuleSpec) -> Result<Rule, RuleError> {
        if spec.target.is_some() && spec.target_regex.is_some() {
            return Err(RuleError::TwoTargets);
        }
        // A misspelt kind would make a rule that never applies: a deny that denies nothing.
        if let Some(k) = &spec.kind {
            if !KINDS.iter().any(|known| known.eq_ignore_ascii_case(k)) {
                return Err(RuleError::Kind(k.clone()));
            }
        }
        let tool = match &spec.tool {
            Some(g) => Some(compile(&format!("(?i){}", glob_regex(g)), "tool")?),
            None => None,
        };
        let target = match (&spec.target, &spec.target_regex) {
            (Some(g), _) => Some(compile(&glob_regex(g), "target")?),
            (None, Some(r)) => Some(compile(r, "target_regex")?),
            (None, None) => None,
        };
        Ok(Rule { spec, tool, target })
    }

    /// Whether the rule applies to `req`, made in working directory `cwd`.
    pub fn matches(&self, req: &Request<'_>, cwd: &str) -> bool {
        if let Some(k) = &self.spec.kind {
            if !k.eq_ignore_ascii_case(req.kind) {
                return false;
            }
        }
        if let Some(t) = &self.tool {
            if !req.tool.is_some_and(|name| t.is_match(name)) {
                return false;
            }
        }
        let target = req.target.map(|t| {
            if req.kind == "command" {
                unwrap_shell(t)
            } else {
                t
            }
        });
        if let Some(p) = &self.target {
            if !target.is_some_and(|t| p.is_match(t)) {
                return false;
            }
        }
        if self.spec.in_workdir && !target.is_some_and(|t| paths_inside(t, cwd)) {
            return false;
        }
        true
    }

    /// How the rule reads: `allow command "ls *"`.
    pub fn text(&self) -> String {
        let s = &self.spec;
        let mut out = s.decision.word().to_string();
        // "allow tool \"Read\"", not "allow tool tool \"Read\"".
        if let Some(k) = s
            .kind
            .as_ref()
            .filter(|k| !(*k == "tool" && s.tool.is_some()))
        {
            out.push_str(&format!(" {k}"));
        }
        if let Some(t) = &s.tool {
            out.push_str(&format!(" tool {t:?}"));
        }
        if let Some(t) = &s.target {
            out.push_str(&format!(" {t:?}"));
        }
        if let Some(t) = &s.target_regex {
            out.push_str(&format!(" /{t}/"));
        }
        if s.in_workdir {
            out.push_str(" inside the working directory");
        }
        out
    }
}

/// A rule that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error("give target or target_regex, not both")]
    TwoTargets,
    #[error("kind '{0}' is not a kind of request ({kinds})", kinds = KINDS.join(", "))]
    Kind(String),
    #[error("{field} does not parse as a pattern: {source}")]
    Pattern {
        field: &'static str,
        source: regex::Error,
    },
}

fn compile(pattern: &str, field: &'static str) -> Result<Regex, RuleError> {
    Regex::new(&format!("^(?:{pattern})$")).map_err(|source| RuleError::Pattern { field, source })
}

/// A glob as a regular expression (unanchored: [`compile`] anchors it).
fn glob_regex(glob: &str) -> String {
    const FREE: &str = r"[^;&|$`<>\n\r]";
    let mut out = String::new();
    for c in glob.chars() {
        match c {
            '*' => out.push_str(&format!("{FREE}*")),
            '?' => out.push_str(FREE),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out
}

/// The command a shell wrapper runs (`/bin/bash -lc 'ls -la'` → `ls -la`); any other
/// command line as it is. Only a single-quoted script with no quote inside is unwrapped.
fn unwrap_shell(cmd: &str) -> &str {
    let mut words = cmd.splitn(3, ' ');
    let (Some(shell), Some(flag), Some(rest)) = (words.next(), words.next(), words.next()) else {
        return cmd;
    };
    let shell_name = shell.rsplit('/').next().unwrap_or(shell);
    let is_shell = matches!(shell_name, "sh" | "bash" | "zsh" | "dash");
    let is_flag = matches!(flag, "-c" | "-lc" | "-cl");
    match rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
        Some(inner) if is_shell && is_flag && !inner.contains('\'') => inner,
        _ => cmd,
    }
}

/// Whether every path in `target` (comma-separated) is inside `cwd`, by its text: relative
/// paths that do not climb out, absolute ones under `cwd`. A path a shell or the CLI could
/// expand (`~/.bashrc`, `$HOME/x`) is not taken as relative: it is outside.
fn paths_inside(target: &str, cwd: &str) -> bool {
    let cwd = normalize(cwd);
    target
        .split(", ")
        .map(str::trim)
        .all(|p| !p.is_empty() && inside(p, &cwd))
}

fn inside(path: &str, cwd: &[&str]) -> bool {
    let full = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{}/{path}", cwd.join("/"))
    };
    let parts = normalize(&full);
    let expands = path.starts_with('~') || path.contains('$');
    !expands && parts.len() > cwd.len() && parts.starts_with(cwd) && !full.contains('\0')
}

/// A path's components with `.` and `..` resolved by their text (`..` at the root stays).
fn normalize(path: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for c in path.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// A permission request as the rules see it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub kind: &'a str,
    pub tool: Option<&'a str>,
    pub target: Option<&'a str>,
}

/// A named list of rules.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    pub name: String,
    pub rules: Vec<Rule>,
}

impl RuleSet {
    pub fn empty(name: &str) -> RuleSet {
        RuleSet {
            name: name.to_string(),
            rules: Vec::new(),
        }
    }

    /// A set from its rules as written; the error names the rule that does not parse.
    pub fn from_specs(name: &str, specs: Vec<RuleSpec>, field: &str) -> Result<RuleSet, BadInput> {
        let rules = specs
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                Rule::new(s).map_err(|why| BadInput::new(format!("{field}[{i}]"), why.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RuleSet {
            name: name.to_string(),
            rules,
        })
    }

    /// The rules as the card lists them.
    pub fn describe(&self) -> Value {
        json!(self.rules.iter().map(|r| r.text()).collect::<Vec<_>>())
    }
}

/// The sets every host has: `ask-all`, `read-only` and `workspace-write`.
pub fn shipped_sets() -> BTreeMap<String, Arc<RuleSet>> {
    let mut out = BTreeMap::new();
    out.insert(ASK_ALL.to_string(), Arc::new(RuleSet::empty(ASK_ALL)));
    for (name, specs) in parse_sets(SHIPPED).unwrap_or_default() {
        // The shipped file is tested to parse.
        if let Ok(set) = RuleSet::from_specs(&name, specs, &name) {
            out.insert(name, Arc::new(set));
        }
    }
    out
}

/// Sets in their TOML form: `[NAME]` tables with a `rules` list.
fn parse_sets(text: &str) -> Result<BTreeMap<String, Vec<RuleSpec>>, toml::de::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Set {
        rules: Vec<RuleSpec>,
    }
    let sets: BTreeMap<String, Set> = toml::from_str(text)?;
    Ok(sets.into_iter().map(|(k, v)| (k, v.rules)).collect())
}

/// The rules one task runs under: the request's own (deny or ask only) in front of a set.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub set: Arc<RuleSet>,
    pub own: Vec<Rule>,
}

/// What the rules answered, and which rule did.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub decision: Decision,
    /// The rule that decided: its text and where it is (`rule 2 of set "read-only"`, `rule 1
    /// of the request`); None: no rule matched.
    pub rule: Option<(String, String)>,
}

impl Policy {
    pub fn of(set: Arc<RuleSet>) -> Policy {
        Policy {
            set,
            own: Vec::new(),
        }
    }

    /// Whether any rule could answer without asking.
    pub fn is_empty(&self) -> bool {
        self.set.rules.is_empty() && self.own.is_empty()
    }

    /// The first matching rule's answer, the request's rules first; "ask" when none matches.
    pub fn decide(&self, req: &Request<'_>, cwd: &str) -> Verdict {
        let own = self
            .own
            .iter()
            .enumerate()
            .map(|(i, r)| (r, format!("rule {} of the request", i + 1)));
        let set = self
            .set
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (r, format!("rule {} of set \"{}\"", i + 1, self.set.name)));
        for (rule, place) in own.chain(set) {
            if rule.matches(req, cwd) {
                return Verdict {
                    decision: rule.spec.decision,
                    rule: Some((rule.text(), place)),
                };
            }
        }
        Verdict {
            decision: Decision::Ask,
            rule: None,
        }
    }

    /// How the task's metadata names it: the set, and the request's rules.
    pub fn describe(&self) -> Value {
        let mut v = json!({"set": self.set.name});
        if !self.own.is_empty() {
            v["rules"] = json!(self.own.iter().map(Rule::text).collect::<Vec<_>>());
        }
        v
    }
}

/// `metadata.approvals`: a set's name, or `{"set": NAME, "rules": [...]}` (the set: the
/// host's default when left out). The request's rules may only deny or ask.
pub fn policy_of(
    v: &Value,
    sets: &BTreeMap<String, Arc<RuleSet>>,
    default_set: &str,
) -> Result<Policy, BadInput> {
    const FIELD: &str = "metadata.approvals";
    let find = |name: &str, field: &str| {
        sets.get(name).cloned().ok_or_else(|| {
            BadInput::new(
                field,
                format!(
                    "unknown rule set '{name}'; the host's sets are {}",
                    sets.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
        })
    };
    let obj = match v {
        Value::String(name) => return Ok(Policy::of(find(name, FIELD)?)),
        Value::Object(o) => o,
        _ => {
            return Err(BadInput::new(
                FIELD,
                "must be a rule set's name or an object {\"set\": NAME, \"rules\": [...]}",
            ))
        }
    };
    if let Some(k) = obj.keys().find(|k| *k != "set" && *k != "rules") {
        return Err(BadInput::new(
            format!("{FIELD}.{k}"),
            "unknown key; the keys are set and rules",
        ));
    }
    let set = match obj.get("set") {
        Some(Value::String(name)) => find(name, "metadata.approvals.set")?,
        None | Some(Value::Null) => find(default_set, "metadata.approvals.set")?,
        Some(_) => {
            return Err(BadInput::new(
                "metadata.approvals.set",
                "must be a rule set's name",
            ))
        }
    };
    let own = own_rules(obj.get("rules"))?;
    Ok(Policy { set, own })
}

fn own_rules(v: Option<&Value>) -> Result<Vec<Rule>, BadInput> {
    const FIELD: &str = "metadata.approvals.rules";
    let list = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err(BadInput::new(FIELD, "must be a list of rules")),
    };
    list.iter()
        .enumerate()
        .map(|(i, r)| {
            let field = format!("{FIELD}[{i}]");
            let spec: RuleSpec = serde_json::from_value(r.clone())
                .map_err(|e| BadInput::new(&field, format!("is not a rule: {e}")))?;
            if spec.decision == Decision::Allow {
                return Err(BadInput::new(
                    format!("{field}.decision"),
                    "a request may only narrow its rule set: deny or ask, not allow",
                ));
            }
            Rule::new(spec).map_err(|why| BadInput::new(field, why.to_string()))
        })
        .collect()
}

/// Rule sets of the config file (`[approvals.sets.NAME] rules = [...]`), checked.
pub fn config_sets(
    raw: &BTreeMap<String, Vec<RuleSpec>>,
) -> Result<BTreeMap<String, Arc<RuleSet>>, BadInput> {
    let mut out = shipped_sets();
    for (name, specs) in raw {
        let field = format!("[approvals] sets.{name}.rules");
        let set = RuleSet::from_specs(name, specs.clone(), &field)?;
        out.insert(name.clone(), Arc::new(set));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
