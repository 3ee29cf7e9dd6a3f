//! `text`: CLIs that print plain text (aider, prompt-based CLIs on a pty). Every non-empty
//! line is answer text; a line matching `approval_pattern` is a question waiting for y/n.
//!
//! `wire_options` keys (all optional):
//!
//! | key | meaning |
//! |---|---|
//! | `approval_pattern` | regex; a matching line is an approval request (kind `other`, the line as detail) |
//! | `approval_response_yes` | written on stdin to approve (default `"y\n"`) |
//! | `approval_response_no` | written on stdin to deny (default `"n\n"`) |
//! | `skip_pattern` | regex; matching lines are dropped (banners, warnings) |
//! | `error_patterns` | array of `{ pattern = regex, kind = "auth" }`; the first matching line ends the turn as an error |
//!
//! A prompt the CLI leaves without a newline (`Continue? [y/N] `) still reaches the parser: on
//! a pty the runner hands over a partial line once the CLI has been quiet for a moment, and on
//! pipes the last line at EOF.
//!
//! Only a line that *ends* with the pattern's match is a question (trailing blanks aside),
//! whatever the pattern says: once answered, terminal prompts redraw their line with the typed
//! answer after it (aider 0.86.2: `... (Y)es/(N)o [Yes]: y`), and that redraw, like the
//! terminal's echo of the answer, is dropped rather than read as a new question or as text.

use regex::Regex;
use serde::Deserialize;

use super::{Decision, OptionsError, WireParser};
use crate::adapter::{AdapterSpec, AgentEvent};

pub const FORMAT: &str = "text";

const DEFAULT_YES: &str = "y\n";
const DEFAULT_NO: &str = "n\n";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptionsDef {
    approval_pattern: Option<String>,
    approval_response_yes: Option<String>,
    approval_response_no: Option<String>,
    skip_pattern: Option<String>,
    #[serde(default)]
    error_patterns: Vec<ErrorPatternDef>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorPatternDef {
    pattern: String,
    kind: Option<String>,
}

#[derive(Debug, Clone)]
struct Options {
    approval: Option<Regex>,
    yes: String,
    no: String,
    skip: Option<Regex>,
    errors: Vec<(Regex, Option<String>)>,
}

fn regex(key: &'static str, p: &str) -> Result<Regex, OptionsError> {
    Regex::new(p).map_err(|source| OptionsError::Regex { key, source })
}

fn compile(table: &toml::Table) -> Result<Options, OptionsError> {
    let def: OptionsDef = toml::Value::Table(table.clone())
        .try_into()
        .map_err(OptionsError::Shape)?;
    let approval = def
        .approval_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| regex("approval_pattern", p))
        .transpose()?;
    let skip = def
        .skip_pattern
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(|p| regex("skip_pattern", p))
        .transpose()?;
    let errors = def
        .error_patterns
        .into_iter()
        .map(|e| Ok((regex("error_patterns", &e.pattern)?, e.kind)))
        .collect::<Result<Vec<_>, OptionsError>>()?;
    Ok(Options {
        approval,
        yes: def
            .approval_response_yes
            .unwrap_or_else(|| DEFAULT_YES.into()),
        no: def
            .approval_response_no
            .unwrap_or_else(|| DEFAULT_NO.into()),
        skip,
        errors,
    })
}

/// Checks an adapter's `wire_options` (for the registry, at load time).
pub fn validate(spec: &AdapterSpec) -> Result<(), OptionsError> {
    compile(&spec.wire_options).map(|_| ())
}

/// The parser: checked options, or the reason they are invalid (reported on the first line).
#[derive(Debug)]
pub struct TextParser {
    options: Result<Options, OptionsError>,
    reported: bool,
    prompts: u64,
    /// The last question's line, until the next line that is not its redraw.
    asked: Option<String>,
    /// The answer just written, until the next line (its echo is dropped).
    answered: Option<String>,
}

impl TextParser {
    pub fn new(spec: &AdapterSpec) -> Self {
        TextParser {
            options: compile(&spec.wire_options),
            reported: false,
            prompts: 0,
            asked: None,
            answered: None,
        }
    }

    /// The line is the terminal's redraw of the question just answered (the question followed
    /// by the typed answer), the echo of that answer, or a redraw of the question still
    /// waiting for its answer (aider redraws it after warning that the terminal does not
    /// answer cursor position requests).
    fn is_redraw(&mut self, line: &str) -> bool {
        let line = line.trim();
        let Some(answer) = self.answered.take() else {
            return self.asked.as_deref() == Some(line);
        };
        let answer_text = answer.trim();
        let echo = line == answer_text;
        // The question and the typed answer, perhaps more than once: on a pty the echo of the
        // answer and the redraw can come on one line once the cursor moves between them are
        // stripped (`... [Yes]: y... [Yes]: y`, seen with aider 0.86.2 through agent-host).
        let redraw = self.asked.as_deref().is_some_and(|q| {
            line.starts_with(q)
                && line
                    .split(q)
                    .flat_map(str::split_whitespace)
                    .all(|w| w == answer_text)
        });
        if echo || redraw {
            // Both can come (echo, then redraw): stay on guard for one more line.
            self.answered = Some(answer);
            return true;
        }
        self.asked = None;
        false
    }
}

/// Whether `re` matches `line` at its end (trailing blanks aside).
fn matches_at_end(re: &Regex, line: &str) -> bool {
    let line = line.trim_end();
    re.find_iter(line).any(|m| m.end() == line.len())
}

impl WireParser for TextParser {
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, _reply: &mut Vec<u8>) {
        let opts = match &self.options {
            Ok(o) => o,
            Err(e) => {
                if !self.reported {
                    self.reported = true;
                    out.push(AgentEvent::Error {
                        message: format!("the adapter's wire_options are invalid: {e}"),
                        kind: Some("config".into()),
                    });
                }
                return;
            }
        };
        if line.trim().is_empty() {
            return;
        }
        if opts.skip.as_ref().is_some_and(|r| r.is_match(line)) {
            return;
        }
        let approval = opts.approval.clone();
        if self.is_redraw(line) {
            return;
        }
        let Ok(opts) = &self.options else {
            return;
        };
        if let Some((_, kind)) = opts.errors.iter().find(|(r, _)| r.is_match(line)) {
            out.push(AgentEvent::Error {
                message: line.trim().to_string(),
                kind: kind.clone(),
            });
            return;
        }
        if approval.as_ref().is_some_and(|r| matches_at_end(r, line)) {
            self.prompts += 1;
            self.asked = Some(line.trim().to_string());
            out.push(AgentEvent::ApprovalRequired {
                id: format!("prompt-{}", self.prompts),
                kind: "other".into(),
                tool: None,
                target: None,
                detail: Some(line.trim().to_string()),
                options: Vec::new(),
            });
            return;
        }
        out.push(AgentEvent::Text {
            text: format!("{line}\n"),
            delta: true,
        });
    }

    fn encode_decision(&mut self, d: &Decision) -> Option<Vec<u8>> {
        let opts = self.options.as_ref().ok()?;
        opts.approval.as_ref()?;
        let answer = if d.allow { &opts.yes } else { &opts.no };
        let bytes = answer.as_bytes().to_vec();
        self.answered = Some(answer.clone());
        Some(bytes)
    }
}

#[cfg(test)]
mod tests;
