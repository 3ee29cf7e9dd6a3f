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

/// What a protocol needs to know to start a turn.
#[derive(Debug, Clone, Default)]
pub struct TurnStart<'a> {
    /// The user's prompt.
    pub prompt: &'a str,
    /// The CLI session: a host-chosen id for a new session, or the id to resume.
    pub session_id: Option<&'a str>,
    /// True when `session_id` names an existing session to resume.
    pub resume: bool,
    /// Working directory of the CLI.
    pub cwd: &'a str,
    /// Model requested by the configuration.
    pub model: Option<&'a str>,
}

/// A parser (and, for two-way protocols, the host's side of the conversation) for one CLI's
/// output format.
pub trait WireParser: Send {
    /// Bytes to write on the CLI's stdin right after it starts: the prompt in the CLI's input
    /// protocol, or the first step of a JSON-RPC handshake. Default: nothing (the prompt went
    /// as an argument or as raw stdin).
    fn start(&mut self, _turn: &TurnStart<'_>) -> Vec<u8> {
        Vec::new()
    }

    /// Parses one cleaned line of output (no trailing newline), appending events to `out`
    /// and any bytes the protocol must send back at once (JSON-RPC responses, the next
    /// handshake step) to `reply`. Never fails: lines it does not understand become nothing
    /// or a warning.
    fn parse_line(&mut self, line: &str, out: &mut Vec<AgentEvent>, reply: &mut Vec<u8>);

    /// The bytes to write on the CLI's stdin to answer an approval request, if the format
    /// supports answering.
    fn encode_decision(&mut self, decision: &Decision) -> Option<Vec<u8>>;

    /// Bytes asking the CLI to end the turn by itself (its own interrupt), sent before the
    /// process group is signalled. Default: none.
    fn interrupt(&mut self) -> Option<Vec<u8>> {
        None
    }
}

/// A parser for the named format.
pub fn parser_for(format: &str) -> Option<Box<dyn WireParser>> {
    match format {
        native::FORMAT => Some(Box::new(native::NativeParser)),
        _ => None,
    }
}
