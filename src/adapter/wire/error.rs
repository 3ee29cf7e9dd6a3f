//! Why an adapter's `wire_options` cannot be used (the `jsonl-rules` and `text` formats).

/// An invalid `wire_options` table; the message names the key and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// The table does not have the format's shape (unknown key, wrong type).
    #[error("wire_options: {}", .0.message())]
    Shape(#[source] toml::de::Error),
    /// A pattern that is not a regular expression.
    #[error("wire_options.{key}: {source}")]
    Regex {
        key: &'static str,
        #[source]
        source: regex::Error,
    },
    #[error("wire_options.rules is empty: the format has nothing to read")]
    NoRules,
    /// A rule of `jsonl-rules`, `at` naming it (`wire_options.rules[2].items[0]`).
    #[error("{at}: {problem}")]
    Rule {
        at: String,
        #[source]
        problem: RuleProblem,
    },
}

/// What is wrong with one `jsonl-rules` rule.
#[derive(Debug, thiserror::Error)]
pub enum RuleProblem {
    #[error("{field}: '{pointer}' is not a JSON pointer (it must start with '/')")]
    NotAPointer { field: String, pointer: String },
    #[error("a rule has either 'each' or 'event'")]
    EachAndEvent,
    #[error("items cannot have 'each'")]
    NestedEach,
    #[error("'each' needs 'items'")]
    EachWithoutItems,
    #[error("a rule with 'each' takes its fields in 'items'")]
    FieldsBesideEach,
    #[error("'event' is missing")]
    NoEvent,
    #[error("'items' needs 'each'")]
    ItemsWithoutEach,
    #[error("unknown event '{event}' (known: {known})")]
    UnknownEvent { event: String, known: String },
    #[error("event '{event}' has no field '{field}'")]
    NoSuchField { event: String, field: String },
    /// A `match` or `set` value that has no JSON form (`what` is `match /p` or `set name`).
    #[error("{what}: {source}")]
    Value {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}
