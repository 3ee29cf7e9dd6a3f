//! One parser per CLI output format. A parser turns one line of output into zero or more
//! [`AgentEvent`]s and knows how to phrase answers on the CLI's stdin.

pub mod native;

use super::AgentEvent;

/// Names of the supported wire formats (the `wire` key of an adapter).
pub const FORMATS: &[&str] = &[native::FORMAT];

/// The user's answer to an approval request.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The approval request's id.
    pub id: String,
    pub allow: bool,
    /// The option chosen, when the request offered options.
    pub option: Option<String>,
    /// Free text from the user (the answer to a question, or a reason).
    pub message: Option<String>,
}

/// A parser for one CLI's output.
pub trait WireParser: Send {
    /// Parses one cleaned line of output (no trailing newline), appending events to `out`.
    /// Never fails: lines it does not understand become nothing or a warning.
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>);

    /// The bytes to write on the CLI's stdin to answer an approval request, if the format
    /// supports answering.
    fn encode_decision(&self, decision: &Decision) -> Option<Vec<u8>>;
}

/// A parser for the named format.
pub fn parser_for(format: &str) -> Option<Box<dyn WireParser>> {
    match format {
        native::FORMAT => Some(Box::new(native::NativeParser)),
        _ => None,
    }
}
