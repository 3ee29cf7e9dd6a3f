//! A2A v0.3 JSON-RPC wire types and their conversion to and from v1.0.
//!
//! v1.0 ([`crate::protocol::v1`]) is the internal model; v0.3 is converted at the edge:
//!
//! - [`types`]: the v0.3 JSON-RPC objects (the JSON Schema shape, with `kind`). Input is
//!   liberal (unknown fields ignored, `kind` optional but checked when present, parts
//!   recognised by their member when `kind` is missing, `taskId` accepted for `id`); output
//!   is exact (`kind` and REQUIRED fields always present, `final` always present on status
//!   updates, optional fields omitted when empty).
//! - [`convert`]: v0.3 → v1 for requests and v1 → v0.3 for responses and stream events.
//! - [`reverse`]: the client's direction: v1 requests → v0.3, v0.3 responses → v1.
//! - [`rest`]: the v0.3 HTTP+JSON bodies (ProtoJSON of the v0.3 proto) and their conversion,
//!   by way of the JSON-RPC objects.
//!
//! Decode request params with [`decode_params`], which turns every decoding problem into
//! [`A2AError::InvalidParams`] with a message naming it.

pub mod convert;
pub mod rest;
pub mod reverse;
pub mod types;

pub use convert::{
    artifact_to_v03, message_to_v03, part_to_v03, push_config_to_v03, send_response_to_v03,
    status_update_to_v03, stream_event_to_v03, task_to_v03,
};
pub use types::*;

use crate::protocol::v1;
use crate::protocol::A2AError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// v0.3 JSON-RPC task state names (`"input-required"`, `"unknown"`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState03 {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    AuthRequired,
    Unknown,
}

impl TaskState03 {
    const ALL: [TaskState03; 9] = [
        TaskState03::Submitted,
        TaskState03::Working,
        TaskState03::InputRequired,
        TaskState03::Completed,
        TaskState03::Canceled,
        TaskState03::Failed,
        TaskState03::Rejected,
        TaskState03::AuthRequired,
        TaskState03::Unknown,
    ];

    /// The wire name, e.g. `input-required`.
    pub fn as_str(self) -> &'static str {
        v1::TaskState::from(self).v03_name()
    }

    /// Parses an exact v0.3 JSON-RPC state name; None for anything else.
    pub fn parse(s: &str) -> Option<TaskState03> {
        TaskState03::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl From<TaskState03> for v1::TaskState {
    fn from(s: TaskState03) -> Self {
        match s {
            TaskState03::Submitted => v1::TaskState::Submitted,
            TaskState03::Working => v1::TaskState::Working,
            TaskState03::InputRequired => v1::TaskState::InputRequired,
            TaskState03::Completed => v1::TaskState::Completed,
            TaskState03::Canceled => v1::TaskState::Canceled,
            TaskState03::Failed => v1::TaskState::Failed,
            TaskState03::Rejected => v1::TaskState::Rejected,
            TaskState03::AuthRequired => v1::TaskState::AuthRequired,
            TaskState03::Unknown => v1::TaskState::Unspecified,
        }
    }
}

impl From<v1::TaskState> for TaskState03 {
    fn from(s: v1::TaskState) -> Self {
        match s {
            v1::TaskState::Submitted => TaskState03::Submitted,
            v1::TaskState::Working => TaskState03::Working,
            v1::TaskState::InputRequired => TaskState03::InputRequired,
            v1::TaskState::Completed => TaskState03::Completed,
            v1::TaskState::Canceled => TaskState03::Canceled,
            v1::TaskState::Failed => TaskState03::Failed,
            v1::TaskState::Rejected => TaskState03::Rejected,
            v1::TaskState::AuthRequired => TaskState03::AuthRequired,
            v1::TaskState::Unspecified => TaskState03::Unknown,
        }
    }
}

/// v0.3 message role: `"user"` or `"agent"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role03 {
    User,
    Agent,
}

impl From<Role03> for v1::Role {
    fn from(r: Role03) -> Self {
        match r {
            Role03::User => v1::Role::User,
            Role03::Agent => v1::Role::Agent,
        }
    }
}

impl From<v1::Role> for Role03 {
    /// v0.3 has no "unspecified" role; an unspecified v1 role is reported as `agent`
    /// (only server-produced messages can lack a role: client input always has one).
    fn from(r: v1::Role) -> Self {
        match r {
            v1::Role::User => Role03::User,
            v1::Role::Agent | v1::Role::Unspecified => Role03::Agent,
        }
    }
}

/// Decodes v0.3 JSON-RPC `params` into one of the v0.3 types. Any decoding problem (missing
/// field, wrong `kind`, part without content, ...) becomes `InvalidParams` naming it.
pub fn decode_params<T: DeserializeOwned>(params: Value) -> Result<T, A2AError> {
    serde_json::from_value(params)
        .map_err(|e| A2AError::InvalidParams(format!("Invalid params: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn state_names_round_trip_both_ways() {
        for st in TaskState03::ALL {
            assert_eq!(TaskState03::parse(st.as_str()), Some(st));
            assert_eq!(serde_json::to_value(st).unwrap(), json!(st.as_str()));
            let back: TaskState03 = serde_json::from_value(json!(st.as_str())).unwrap();
            assert_eq!(back, st);
            assert_eq!(TaskState03::from(v1::TaskState::from(st)), st);
        }
        assert_eq!(
            v1::TaskState::from(TaskState03::Unknown),
            v1::TaskState::Unspecified
        );
        assert_eq!(TaskState03::parse("TASK_STATE_WORKING"), None);
        assert_eq!(TaskState03::parse("cancelled"), None);
        assert_eq!(
            v1::TaskState::parse_lenient("input-required"),
            Some(v1::TaskState::InputRequired)
        );
        assert_eq!(
            v1::TaskState::parse_lenient("unknown"),
            Some(v1::TaskState::Unspecified)
        );
    }

    #[test]
    fn roles_map_to_proto_roles() {
        assert_eq!(v1::Role::from(Role03::User), v1::Role::User);
        assert_eq!(v1::Role::from(Role03::Agent), v1::Role::Agent);
        assert_eq!(Role03::from(v1::Role::Unspecified), Role03::Agent);
        assert!(serde_json::from_value::<Role03>(json!("ROLE_USER")).is_err());
    }

    #[test]
    fn decode_params_reports_invalid_params() {
        let err = decode_params::<TaskIdParams03>(json!({"metadata": {}})).unwrap_err();
        match err {
            A2AError::InvalidParams(m) => assert!(m.contains("id"), "{m}"),
            other => panic!("unexpected {other:?}"),
        }
    }
}
