//! A2A v0.3 wire types and conversion to and from v1.0.

/// v0.3 JSON-RPC task state names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState03 {}

impl TaskState03 {
    pub fn parse(_s: &str) -> Option<TaskState03> {
        None
    }
}

impl From<TaskState03> for crate::protocol::v1::TaskState {
    fn from(s: TaskState03) -> Self {
        match s {}
    }
}
