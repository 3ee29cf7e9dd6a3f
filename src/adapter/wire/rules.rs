//! `jsonl-rules`: any CLI that prints one JSON object per line, read by rules in the adapter's
//! `wire_options`, so a new JSON CLI needs only a TOML file.
//!
//! ```toml
//! [wire_options]
//! non_json = "warn"            # lines that are not JSON: "warn" (default), "ignore" or "text"
//! answer_allow = '{"type":"approval","id":"{id}","allow":true}'   # optional, see below
//! answer_deny = '{"type":"approval","id":"{id}","allow":false}'
//!
//! [[wire_options.rules]]
//! match = { "/type" = "system", "/subtype" = "init" }   # JSON pointer = value, all must hold
//! event = "init"
//! session_id = "/session_id"                             # fields: JSON pointers into the line
//! model = "/model"
//!
//! [[wire_options.rules]]
//! match = { "/type" = "assistant" }
//! each = "/message/content"        # one event per array element, pointers relative to it
//! items = [
//!   { match = { "/type" = "text" }, event = "text", text = "/text", set = { delta = false } },
//!   { match = { "/type" = "tool_use" }, event = "tool_use", id = "/id", name = "/name", input = "/input" },
//! ]
//! ```
//!
//! Rules are tried in order; the first one that produces an event ends the search for that
//! line, unless it says `continue = true` (e.g. a `usage` rule before the `done` rule on the
//! same line). With `each`, every element gets the event of the first item whose `match` holds.
//! `set` gives constant field values (`delta`, `is_error`, `kind`, ...).
//!
//! Events and their fields:
//!
//! | event | fields |
//! |---|---|
//! | `init` | `session_id`, `model`, `cwd`, `tools` (array of strings) |
//! | `text` | `text`, `delta` (bool, default true) |
//! | `thinking` | `text` |
//! | `tool_use` | `id`, `name`, `input` (any JSON) |
//! | `tool_result` | `id`, `output` (a string, an array of `{text}` blocks, or JSON), `is_error` |
//! | `approval` | `id`, `kind` (default `tool`), `tool`, `target`, `detail` |
//! | `usage` | `input_tokens`, `output_tokens`, `cost_usd`, `duration_ms` |
//! | `done` | `result`, `is_error` |
//! | `error` | `message`, `kind` |
//! | `warning` | `message` |
//!
//! Answers to approvals: `answer_allow` / `answer_deny` are written on stdin with `{id}`
//! replaced by the request's id (JSON-escaped); without them the format takes no answers.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::{Decision, OptionsError, RuleProblem, WireParser};
use crate::adapter::{AdapterSpec, AgentEvent, Usage};

pub const FORMAT: &str = "jsonl-rules";

/// The event kinds a rule can produce, with the fields each reads.
const EVENTS: &[(&str, &[&str])] = &[
    ("init", &["session_id", "model", "cwd", "tools"]),
    ("text", &["text", "delta"]),
    ("thinking", &["text"]),
    ("tool_use", &["id", "name", "input"]),
    ("tool_result", &["id", "output", "is_error"]),
    ("approval", &["id", "kind", "tool", "target", "detail"]),
    (
        "usage",
        &["input_tokens", "output_tokens", "cost_usd", "duration_ms"],
    ),
    ("done", &["result", "is_error"]),
    ("error", &["message", "kind"]),
    ("warning", &["message"]),
];

/// What to do with a line that is not a JSON object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum NonJson {
    #[default]
    Warn,
    Ignore,
    Text,
}

/// `wire_options` of a `jsonl-rules` adapter, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsDef {
    #[serde(default)]
    rules: Vec<RuleDef>,
    #[serde(default)]
    non_json: NonJson,
    answer_allow: Option<String>,
    answer_deny: Option<String>,
}

/// One rule as written. Field values are JSON pointers.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleDef {
    #[serde(default, rename = "match")]
    matches: BTreeMap<String, toml::Value>,
    event: Option<String>,
    each: Option<String>,
    #[serde(default)]
    items: Vec<RuleDef>,
    #[serde(default)]
    set: toml::Table,
    #[serde(default, rename = "continue")]
    cont: bool,
    session_id: Option<String>,
    model: Option<String>,
    cwd: Option<String>,
    tools: Option<String>,
    text: Option<String>,
    delta: Option<String>,
    id: Option<String>,
    name: Option<String>,
    input: Option<String>,
    output: Option<String>,
    is_error: Option<String>,
    kind: Option<String>,
    tool: Option<String>,
    target: Option<String>,
    detail: Option<String>,
    input_tokens: Option<String>,
    output_tokens: Option<String>,
    cost_usd: Option<String>,
    duration_ms: Option<String>,
    result: Option<String>,
    message: Option<String>,
}

impl RuleDef {
    fn pointers(&self) -> Vec<(&'static str, &Option<String>)> {
        vec![
            ("session_id", &self.session_id),
            ("model", &self.model),
            ("cwd", &self.cwd),
            ("tools", &self.tools),
            ("text", &self.text),
            ("delta", &self.delta),
            ("id", &self.id),
            ("name", &self.name),
            ("input", &self.input),
            ("output", &self.output),
            ("is_error", &self.is_error),
            ("kind", &self.kind),
            ("tool", &self.tool),
            ("target", &self.target),
            ("detail", &self.detail),
            ("input_tokens", &self.input_tokens),
            ("output_tokens", &self.output_tokens),
            ("cost_usd", &self.cost_usd),
            ("duration_ms", &self.duration_ms),
            ("result", &self.result),
            ("message", &self.message),
        ]
    }
}

/// A checked rule.
#[derive(Debug, Clone)]
struct Rule {
    matches: Vec<(String, Value)>,
    body: Body,
    cont: bool,
}

#[derive(Debug, Clone)]
enum Body {
    Event(EventRule),
    Each { pointer: String, items: Vec<Rule> },
}

/// An event to build: its kind, and for each field a pointer or a constant.
#[derive(Debug, Clone)]
struct EventRule {
    event: String,
    fields: BTreeMap<String, Source>,
}

#[derive(Debug, Clone)]
enum Source {
    Pointer(String),
    Const(Value),
}

/// Checked `wire_options`.
#[derive(Debug, Clone)]
struct Options {
    rules: Vec<Rule>,
    non_json: NonJson,
    answer_allow: Option<String>,
    answer_deny: Option<String>,
}

fn check_pointer(p: &str, field: &str) -> Result<(), RuleProblem> {
    if p.is_empty() || p.starts_with('/') {
        Ok(())
    } else {
        Err(RuleProblem::NotAPointer {
            field: field.to_string(),
            pointer: p.to_string(),
        })
    }
}

fn compile_rule(def: RuleDef, at: &str, nested: bool) -> Result<Rule, OptionsError> {
    let err = |problem| OptionsError::Rule {
        at: at.to_string(),
        problem,
    };
    let mut matches = Vec::new();
    for (p, v) in def.matches.iter() {
        check_pointer(p, "match").map_err(err)?;
        let v = serde_json::to_value(v).map_err(|source| {
            err(RuleProblem::Value {
                what: format!("match {p}"),
                source,
            })
        })?;
        matches.push((p.clone(), v));
    }
    let body = match (&def.each, &def.event) {
        (Some(_), Some(_)) => return Err(err(RuleProblem::EachAndEvent)),
        (Some(_), None) if nested => return Err(err(RuleProblem::NestedEach)),
        (Some(each), None) => {
            check_pointer(each, "each").map_err(err)?;
            if def.items.is_empty() {
                return Err(err(RuleProblem::EachWithoutItems));
            }
            if def.pointers().iter().any(|(_, v)| v.is_some()) || !def.set.is_empty() {
                return Err(err(RuleProblem::FieldsBesideEach));
            }
            let pointer = each.clone();
            let items = def
                .items
                .into_iter()
                .enumerate()
                .map(|(i, d)| compile_rule(d, &format!("{at}.items[{i}]"), true))
                .collect::<Result<Vec<_>, _>>()?;
            Body::Each { pointer, items }
        }
        (None, None) => return Err(err(RuleProblem::NoEvent)),
        (None, Some(event)) => {
            if !def.items.is_empty() {
                return Err(err(RuleProblem::ItemsWithoutEach));
            }
            let allowed = EVENTS
                .iter()
                .find(|(e, _)| e == event)
                .map(|(_, f)| *f)
                .ok_or_else(|| {
                    let known: Vec<&str> = EVENTS.iter().map(|(e, _)| *e).collect();
                    err(RuleProblem::UnknownEvent {
                        event: event.clone(),
                        known: known.join(", "),
                    })
                })?;
            let no_field = |field: &str| {
                err(RuleProblem::NoSuchField {
                    event: event.clone(),
                    field: field.to_string(),
                })
            };
            let mut fields = BTreeMap::new();
            for (name, p) in def.pointers() {
                let Some(p) = p else { continue };
                if !allowed.contains(&name) {
                    return Err(no_field(name));
                }
                check_pointer(p, name).map_err(err)?;
                fields.insert(name.to_string(), Source::Pointer(p.clone()));
            }
            for (name, v) in def.set.iter() {
                if !allowed.contains(&name.as_str()) {
                    return Err(no_field(name));
                }
                let v = serde_json::to_value(v).map_err(|source| {
                    err(RuleProblem::Value {
                        what: format!("set {name}"),
                        source,
                    })
                })?;
                fields.insert(name.clone(), Source::Const(v));
            }
            Body::Event(EventRule {
                event: event.clone(),
                fields,
            })
        }
    };
    Ok(Rule {
        matches,
        body,
        cont: def.cont,
    })
}

fn compile(table: &toml::Table) -> Result<Options, OptionsError> {
    let def: OptionsDef = toml::Value::Table(table.clone())
        .try_into()
        .map_err(OptionsError::Shape)?;
    if def.rules.is_empty() {
        return Err(OptionsError::NoRules);
    }
    let rules = def
        .rules
        .into_iter()
        .enumerate()
        .map(|(i, d)| compile_rule(d, &format!("wire_options.rules[{i}]"), false))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Options {
        rules,
        non_json: def.non_json,
        answer_allow: def.answer_allow,
        answer_deny: def.answer_deny,
    })
}

/// Checks an adapter's rules (for the registry, at load time).
pub fn validate(spec: &AdapterSpec) -> Result<(), OptionsError> {
    compile(&spec.wire_options).map(|_| ())
}

/// The parser: checked rules, or the reason they are invalid (reported on the first line).
#[derive(Debug)]
pub struct RulesParser {
    options: Result<Options, OptionsError>,
    reported: bool,
}

impl RulesParser {
    pub fn new(spec: &AdapterSpec) -> Self {
        RulesParser {
            options: compile(&spec.wire_options),
            reported: false,
        }
    }
}

fn matches(v: &Value, conds: &[(String, Value)]) -> bool {
    conds.iter().all(|(p, want)| v.pointer(p) == Some(want))
}

/// Applies a rule to `v`; true when it produced an event.
fn apply(rule: &Rule, v: &Value, out: &mut Vec<AgentEvent>) -> bool {
    if !matches(v, &rule.matches) {
        return false;
    }
    match &rule.body {
        Body::Event(e) => {
            out.push(build(e, v));
            true
        }
        Body::Each { pointer, items } => {
            let Some(Value::Array(elems)) = v.pointer(pointer) else {
                return false;
            };
            let mut any = false;
            for el in elems {
                if items.iter().any(|item| apply(item, el, out)) {
                    any = true;
                }
            }
            any
        }
    }
}

fn field<'a>(e: &'a EventRule, v: &'a Value, name: &str) -> Option<&'a Value> {
    match e.fields.get(name)? {
        Source::Pointer(p) => v.pointer(p),
        Source::Const(c) => Some(c),
    }
}

fn string(x: Option<&Value>) -> Option<String> {
    match x? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// A tool output: a string, the texts of an array of `{text}` blocks, or JSON.
fn output_text(x: Option<&Value>) -> String {
    match x {
        Some(Value::Array(blocks)) if blocks.iter().all(|b| b.get("text").is_some()) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        other => string(other).unwrap_or_default(),
    }
}

fn build(e: &EventRule, v: &Value) -> AgentEvent {
    let s = |name: &str| string(field(e, v, name));
    let b = |name: &str, default: bool| {
        field(e, v, name)
            .and_then(Value::as_bool)
            .unwrap_or(default)
    };
    let n = |name: &str| field(e, v, name).and_then(Value::as_u64);
    match e.event.as_str() {
        "init" => AgentEvent::Init {
            session_id: s("session_id"),
            model: s("model"),
            cwd: s("cwd"),
            tools: field(e, v, "tools")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        },
        "text" => AgentEvent::Text {
            text: s("text").unwrap_or_default(),
            delta: b("delta", true),
        },
        "thinking" => AgentEvent::Thinking {
            text: s("text").unwrap_or_default(),
        },
        "tool_use" => AgentEvent::ToolUse {
            id: s("id").unwrap_or_default(),
            name: s("name").unwrap_or_else(|| "tool".into()),
            input: field(e, v, "input").cloned().unwrap_or(Value::Null),
        },
        "tool_result" => AgentEvent::ToolResult {
            id: s("id").unwrap_or_default(),
            output: Some(output_text(field(e, v, "output"))),
            is_error: b("is_error", false),
        },
        "approval" => AgentEvent::ApprovalRequired {
            id: s("id").unwrap_or_default(),
            kind: s("kind").unwrap_or_else(|| "tool".into()),
            tool: s("tool"),
            target: s("target"),
            detail: s("detail"),
            options: Vec::new(),
        },
        "usage" => AgentEvent::Usage(Usage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cost_usd: field(e, v, "cost_usd").and_then(Value::as_f64),
            duration_ms: n("duration_ms"),
        }),
        "done" => AgentEvent::Done {
            result: s("result"),
            is_error: b("is_error", false),
        },
        "error" => AgentEvent::Error {
            message: s("message").unwrap_or_else(|| "the agent reported an error".into()),
            kind: s("kind"),
        },
        _ => AgentEvent::Warning {
            message: s("message").unwrap_or_default(),
        },
    }
}

impl WireParser for RulesParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        let opts = match &self.options {
            Ok(o) => o,
            Err(e) => {
                if !self.reported {
                    self.reported = true;
                    out.push(AgentEvent::Error {
                        message: format!("the adapter's rules are invalid: {e}"),
                        kind: Some("config".into()),
                    });
                }
                return;
            }
        };
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return;
        }
        let v: Value = match serde_json::from_str(trimmed) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                match opts.non_json {
                    NonJson::Warn => out.push(AgentEvent::Warning {
                        message: format!(
                            "non-JSON output: {}",
                            trimmed.chars().take(200).collect::<String>()
                        ),
                    }),
                    NonJson::Text => out.push(AgentEvent::Text {
                        text: format!("{trimmed}\n"),
                        delta: true,
                    }),
                    NonJson::Ignore => {}
                }
                return;
            }
        };
        for rule in &opts.rules {
            if apply(rule, &v, out) && !rule.cont {
                break;
            }
        }
    }

    fn encode_decision(&mut self, d: &Decision) -> Option<Vec<u8>> {
        let opts = self.options.as_ref().ok()?;
        let template = if d.allow {
            opts.answer_allow.as_ref()?
        } else {
            opts.answer_deny.as_ref()?
        };
        let id = Value::String(d.id.clone()).to_string();
        let id = &id[1..id.len() - 1];
        let mut bytes = template.replace("{id}", id).into_bytes();
        if bytes.last() != Some(&b'\n') {
            bytes.push(b'\n');
        }
        Some(bytes)
    }
}

#[cfg(test)]
mod tests;
