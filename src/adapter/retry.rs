//! A CLI that keeps retrying a failing model request (Gemini CLI 0.61.0 retries an HTTP 500
//! with backoff for minutes, printing `Attempt N failed with status 500. Retrying with
//! backoff... <the API's error>` on stderr) would hold its task `working` until the idle
//! timeout. The adapter's `[limits]` `retry_pattern` names such lines and `retry_limit` how
//! many the host lets pass: the next one ends the turn `failed` with that line as the message
//! (the CLI's own error text) and its `errorKind` from [`super::error_kind`].
//!
//! A named group `error` in the pattern, when it matched, is the part of the line used as the
//! message (Gemini over ACP writes the line into its debug log, after a timestamp and level).
//!
//! Bounded time: the turn ends at the `retry_limit + 1`-th failed attempt, i.e. after the
//! CLI's own backoff for those attempts (Gemini: about 5 s, 10 s, 20 s ... between attempts),
//! and in any case by the idle timeout.
//!
//! The same lines decide what a stderr line means for the idle timeout ([`is_progress`]): a
//! CLI that reports its progress only on stderr is working, but one that prints its retries
//! there while it is stuck is not.

use std::sync::LazyLock;

use regex::Regex;

use super::{error_kind, AdapterSpec, AgentEvent};

/// Failed attempts let pass when an adapter names a `retry_pattern` but no `retry_limit`.
pub const DEFAULT_RETRY_LIMIT: u32 = 2;

/// Counts the retry lines of one turn.
#[derive(Debug, Clone)]
pub struct RetryWatch {
    pattern: Regex,
    limit: u32,
    seen: u32,
}

/// An adapter's `retry_pattern` that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("limits.retry_pattern: {0}")]
pub struct BadRetryPattern(#[from] regex::Error);

/// Checks the adapter's `retry_pattern` (at load time).
pub fn validate(spec: &AdapterSpec) -> Result<(), BadRetryPattern> {
    match &spec.limits.retry_pattern {
        Some(p) => Ok(Regex::new(p).map(drop)?),
        None => Ok(()),
    }
}

/// Words of a line that reports a failed attempt being retried, whatever the CLI (Codex:
/// `stream error: ...; retrying 1/5 in 200ms`; litellm: `Retrying in 0.2 seconds...`).
static RETRY_WORDS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)\bretr(?:y|ying|ies)\b|\battempt \d+").ok());

/// A stderr line shows the CLI working (it keeps the idle timeout from running out), unless
/// it is one of its retries: the adapter's retry line, or any line that speaks of retrying.
pub fn is_progress(watch: Option<&RetryWatch>, line: &str) -> bool {
    if line.trim().is_empty() || watch.is_some_and(|w| w.pattern.is_match(line)) {
        return false;
    }
    !RETRY_WORDS.as_ref().is_some_and(|r| r.is_match(line))
}

impl RetryWatch {
    /// The adapter's watch, if it names a retry pattern (a valid one: checked at load time).
    pub fn new(spec: &AdapterSpec) -> Option<RetryWatch> {
        let pattern = Regex::new(spec.limits.retry_pattern.as_deref()?).ok()?;
        Some(RetryWatch {
            pattern,
            limit: spec.limits.retry_limit.unwrap_or(DEFAULT_RETRY_LIMIT),
            seen: 0,
        })
    }

    /// A line the CLI printed (stderr, or a protocol notification's text). Returns the error
    /// that ends the turn once more than `retry_limit` attempts failed.
    pub fn on_line(&mut self, line: &str) -> Option<AgentEvent> {
        let caps = self.pattern.captures(line)?;
        self.seen += 1;
        if self.seen <= self.limit {
            return None;
        }
        let text = caps.name("error").map_or(line, |m| m.as_str()).trim();
        Some(AgentEvent::Error {
            message: format!(
                "The agent's model requests kept failing ({} attempts; agent-host stops after {}): {text}",
                self.seen,
                self.limit + 1
            ),
            kind: Some(error_kind::kind_of(None, text)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::Registry;

    /// The recorded stderr of Gemini CLI 0.61.0 answering a model 500 (retries with backoff).
    fn recorded_stderr() -> Vec<String> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/transcripts/gemini/0.61.0/gemini-server-500.stderr.txt");
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn gemini_gives_up_on_a_model_500_after_its_limit() {
        let spec = Registry::builtin().unwrap().get("gemini").unwrap().clone();
        let mut w = RetryWatch::new(&spec).expect("gemini names its retry lines");
        let lines = recorded_stderr();
        let attempts = lines.iter().filter(|l| l.starts_with("Attempt ")).count();
        assert!(
            attempts as u32 > w.limit,
            "the recording retried {attempts} times"
        );
        let mut ended = None;
        for l in &lines {
            if let Some(ev) = w.on_line(l) {
                ended = Some(ev);
                break;
            }
        }
        match ended {
            Some(AgentEvent::Error { message, kind }) => {
                assert!(message.contains("failed with status 500"), "{message}");
                assert!(message.contains("Internal error encountered."), "{message}");
                assert_eq!(kind.as_deref(), Some("model"));
            }
            other => panic!("expected the turn to end: {other:?}"),
        }
        assert_eq!(w.seen, w.limit + 1);
    }

    /// Over ACP Gemini CLI 0.61.0 prints nothing while it retries; with its debug log on
    /// stderr (`GEMINI_DEBUG_LOG_FILE=/dev/stderr`, set by the adapter) the retries are
    /// `[<time>] [WARN] Attempt N failed with status 500. ...` lines among debug lines and
    /// stack traces (recorded with a model server answering 500).
    #[test]
    fn gemini_over_acp_gives_up_from_its_debug_log() {
        let spec = Registry::builtin().unwrap().get("gemini").unwrap().clone();
        assert_eq!(
            spec.env
                .set
                .get("GEMINI_DEBUG_LOG_FILE")
                .map(String::as_str),
            Some("/dev/stderr")
        );
        let mut w = RetryWatch::new(&spec).expect("gemini names its retry lines");
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/transcripts/gemini/0.61.0/gemini-acp-server-500.debug-log.txt");
        let log = std::fs::read_to_string(path).unwrap();
        let mut events = log.lines().filter_map(|l| w.on_line(l));
        match events.next() {
            Some(AgentEvent::Error { message, kind }) => {
                assert!(
                    message.ends_with(": Attempt 3 failed with status 500. Retrying with backoff... _ApiError: {\"error\":{\"code\":500,\"message\":\"Internal error encountered.\",\"status\":\"INTERNAL\"}}"),
                    "the message starts at the CLI's own text: {message}"
                );
                assert_eq!(kind.as_deref(), Some("model"));
            }
            other => panic!("expected the turn to end: {other:?}"),
        }
        // Stack-trace lines, debug lines and the other warnings never count.
        assert_eq!(w.seen, 3);
    }

    /// Issue 37: progress on stderr keeps a task alive; retries do not.
    #[test]
    fn stderr_progress_is_progress_and_retries_are_not() {
        let spec = Registry::builtin().unwrap().get("gemini").unwrap().clone();
        let w = RetryWatch::new(&spec);
        assert!(is_progress(w.as_ref(), "Compiling serde v1.0.200"));
        assert!(is_progress(None, "[3/10] running the test suite"));
        assert!(!is_progress(None, "   "));
        let attempts: Vec<String> = recorded_stderr()
            .into_iter()
            .filter(|l| l.starts_with("Attempt "))
            .collect();
        assert!(!attempts.is_empty());
        for l in &attempts {
            assert!(!is_progress(w.as_ref(), l), "{l}");
            assert!(
                !is_progress(None, l),
                "without the adapter's pattern too: {l}"
            );
        }
        assert!(!is_progress(
            None,
            "ERROR: stream disconnected before completion; retrying 1/5 in 188ms"
        ));
        assert!(!is_progress(None, "Retrying in 0.2 seconds..."));
    }

    #[test]
    fn without_a_pattern_there_is_no_watch_and_a_bad_one_is_refused() {
        let mut spec = Registry::builtin().unwrap().get("generic").unwrap().clone();
        assert!(RetryWatch::new(&spec).is_none());
        spec.limits.retry_pattern = Some("(".into());
        let e = validate(&spec).unwrap_err().to_string();
        assert!(e.contains("retry_pattern"), "{e}");
    }
}
