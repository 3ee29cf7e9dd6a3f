//! The one table from a CLI's error to the task's `errorKind` (status metadata of a `failed`
//! task), for every adapter: parsers pass what they know (a kind of their own, from the CLI's
//! structured error, or none) with the CLI's own error text, and [`kind_of`] settles the kind.
//!
//! | `errorKind` | meaning | read from |
//! |---|---|---|
//! | `auth` | the model API refused the credentials | 401 / 403, "invalid/incorrect API key", "unauthorized", `API_KEY_INVALID`, a missing key variable |
//! | `rate-limit` | too many requests, or the quota is used up | 429, "rate limit", "quota", `RESOURCE_EXHAUSTED` |
//! | `model` | the model API failed or refused the request | 5xx, "internal server error" (litellm's `InternalServerError`), "overloaded", an unknown model, another API error |
//! | `network` | the model API could not be reached | "connection refused", "could not resolve", "fetch failed", "network" |
//! | `session-not-found` | the CLI session to resume is gone | "no conversation found", "no previous sessions", "invalid session identifier" |
//! | `max-turns`, `budget` | a limit of the CLI ended the turn | the CLI's result subtype |
//! | `permission` | the CLI refused a tool it would have had to ask about | the CLI's rejection |
//! | `interrupted` | the turn was interrupted | the CLI's result |
//! | `timeout` | agent-host stopped the CLI (idle or hard time limit) | the host |
//! | `config` | the adapter or its program cannot run as configured | the host |
//! | `execution` | anything else: the CLI failed while working | — |
//!
//! A parser's own names for the same things (`rate_limit`, `server_error`, `api_error`,
//! `connection`, ...) are folded into these. A specific kind from the parser wins over the
//! text; a generic one (`execution`, `api`) gives way to what the text says.

pub const AUTH: &str = "auth";
pub const RATE_LIMIT: &str = "rate-limit";
pub const MODEL: &str = "model";
pub const NETWORK: &str = "network";
pub const SESSION_NOT_FOUND: &str = "session-not-found";
pub const MAX_TURNS: &str = "max-turns";
pub const BUDGET: &str = "budget";
#[allow(
    dead_code,
    reason = "documented kinds (docs/processes.md) that only an adapter's own error kind names"
)]
pub const PERMISSION: &str = "permission";
#[allow(
    dead_code,
    reason = "documented kinds (docs/processes.md) that only an adapter's own error kind names"
)]
pub const INTERRUPTED: &str = "interrupted";
pub const TIMEOUT: &str = "timeout";
pub const CONFIG: &str = "config";
pub const EXECUTION: &str = "execution";

/// Text patterns (lowercase substrings), first match wins: specific causes before the
/// generic "the API failed".
const TEXT: &[(&str, &[&str])] = &[
    (
        AUTH,
        &[
            "401",
            "403 forbidden",
            "unauthorized",
            "unauthenticated",
            "authenticationerror",
            "authentication failed",
            "authentication_error",
            "invalid api key",
            "incorrect api key",
            "invalid x-api-key",
            "api key not valid",
            "api_key_invalid",
            "missing environment variable",
            "no api key",
            "api key is missing",
            "not logged in",
            "please run /login",
        ],
    ),
    (
        RATE_LIMIT,
        &[
            "429",
            "rate limit",
            "rate_limit",
            "ratelimit",
            "too many requests",
            "quota",
            "resource_exhausted",
        ],
    ),
    (
        SESSION_NOT_FOUND,
        &[
            "no conversation found",
            "no previous sessions",
            "invalid session identifier",
            "session not found",
        ],
    ),
    (
        NETWORK,
        &[
            "connection refused",
            "econnrefused",
            "econnreset",
            "enotfound",
            "could not resolve",
            "failed to resolve",
            "name or service not known",
            "fetch failed",
            "connection error",
            "apiconnectionerror",
            "network error",
            "unable to connect",
            "cannot connect",
            "connection reset",
        ],
    ),
    (
        MODEL,
        &[
            "500",
            "502",
            "503",
            "504",
            "529",
            "internal server error",
            // litellm's exception names (aider): `litellm.InternalServerError: ...`.
            "internalservererror",
            "serviceunavailableerror",
            "internal error",
            "server error",
            "service unavailable",
            "bad gateway",
            "overloaded",
            "high demand",
            "model not found",
            "model_not_found",
            "unknown model",
            "api error",
            "apierror",
            "badrequesterror",
            "400 bad request",
        ],
    ),
];

/// A parser's own kind names, folded into the table's.
const ALIASES: &[(&str, &str)] = &[
    ("rate_limit", RATE_LIMIT),
    ("server", MODEL),
    ("server_error", MODEL),
    ("api", MODEL),
    ("api_error", MODEL),
    ("billing", RATE_LIMIT),
    ("connection", NETWORK),
    ("session_not_found", SESSION_NOT_FOUND),
    ("max_turns", MAX_TURNS),
];

/// Kinds a parser may name that say no more than "it failed": the text decides.
const GENERIC: &[&str] = &[EXECUTION, MODEL];

/// The kind the CLI's error text names, if any.
pub fn of_text(text: &str) -> Option<&'static str> {
    let t = text.to_ascii_lowercase();
    TEXT.iter()
        .find(|(_, patterns)| patterns.iter().any(|p| contains_token(&t, p)))
        .map(|(kind, _)| *kind)
}

/// `haystack` contains `needle`; a numeric needle (a status code) only as a whole number, so
/// that `4010 tokens` is not a 401.
fn contains_token(haystack: &str, needle: &str) -> bool {
    if !needle.bytes().all(|b| b.is_ascii_digit()) {
        return haystack.contains(needle);
    }
    haystack.match_indices(needle).any(|(i, _)| {
        let before = haystack[..i].chars().next_back();
        let after = haystack[i + needle.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

/// A parser's kind in the table's names (unknown names are kept: the parser knows best).
pub fn normalize(kind: &str) -> String {
    ALIASES
        .iter()
        .find(|(from, _)| *from == kind)
        .map_or(kind, |(_, to)| *to)
        .to_string()
}

/// The `errorKind` of a failure: the parser's specific kind, else what the CLI's text says,
/// else the parser's generic kind, else `execution`.
pub fn kind_of(parser_kind: Option<&str>, text: &str) -> String {
    let given = parser_kind.filter(|k| !k.is_empty()).map(normalize);
    match given {
        Some(k) if !GENERIC.contains(&k.as_str()) => k,
        given => of_text(text)
            .map(str::to_string)
            .or(given)
            .unwrap_or_else(|| EXECUTION.to_string()),
    }
}

#[cfg(test)]
mod tests;
