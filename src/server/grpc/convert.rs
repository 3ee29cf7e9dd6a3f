//! Conversions between the generated gRPC messages and the internal v1.0 model.
//!
//! Both sides speak ProtoJSON: the internal model is serde-shaped after the same
//! specification, and the generated messages carry pbjson serde. A conversion is one trip
//! through `serde_json::Value`, so a field the specification adds needs no hand-written copy
//! here, and every binding reads a message the same way (the JSON-RPC and HTTP+JSON
//! bindings decode the very same ProtoJSON). One known loss: a data part holding JSON `null`
//! reaches a gRPC client as a part without content (pbjson reads a `null` oneof member as
//! absent); agent-host's own parts never hold a bare `null`.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::protocol::A2AError;

/// A gRPC request message as the internal request type. A message that does not fit (for
/// example a part without content) is the client's error: INVALID_ARGUMENT.
pub fn from_pb<P: Serialize, T: DeserializeOwned>(msg: &P) -> Result<T, A2AError> {
    let v = serde_json::to_value(msg)
        .map_err(|e| A2AError::InvalidParams(format!("unreadable request: {e}")))?;
    crate::protocol::v03::decode_params(v)
}

/// An internal value as its gRPC message. The internal model only holds what the
/// specification allows, so a failure here is the host's own bug: INTERNAL.
pub fn to_pb<T: Serialize, P: DeserializeOwned>(value: &T) -> Result<P, A2AError> {
    let v = serde_json::to_value(value).map_err(|e| A2AError::Internal(e.to_string()))?;
    to_pb_json(v)
}

/// A ProtoJSON value (e.g. the agent card as served) as its gRPC message.
pub fn to_pb_json<P: DeserializeOwned>(v: serde_json::Value) -> Result<P, A2AError> {
    serde_json::from_value(v)
        .map_err(|e| A2AError::Internal(format!("cannot encode the answer for gRPC: {e}")))
}

#[cfg(test)]
mod tests {
    use super::super::pb;
    use super::*;
    use crate::protocol::v1;
    use serde_json::json;

    #[test]
    fn a_task_survives_the_round_trip() {
        let t: v1::Task = serde_json::from_value(json!({
            "id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-02T03:04:05.678Z",
                "message": {"messageId": "m1", "role": "ROLE_AGENT",
                    "parts": [{"text": "ok?"}, {"data": {"approvalId": "a", "n": [1.5, "x", null]}}]}},
            "artifacts": [{"artifactId": "a1", "parts": [{"raw": "aGVsbG8=", "mediaType": "text/plain", "filename": "h.txt"},
                {"url": "file:///x", "metadata": {"k": true}}]}],
            "history": [{"messageId": "u1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                "extensions": ["urn:x"], "referenceTaskIds": ["t0"]}],
            "metadata": {"agent": "codex"}
        }))
        .unwrap();
        let p: pb::Task = to_pb(&t).unwrap();
        assert_eq!(
            p.status.as_ref().unwrap().state,
            pb::TaskState::InputRequired as i32
        );
        let raw = &p.artifacts[0].parts[0].content;
        assert_eq!(raw, &Some(pb::part::Content::Raw(b"hello".to_vec())));
        let mut back: v1::Task = from_pb(&p).unwrap();
        // The same instant; pbjson writes the offset as `+00:00`. (Numbers in `data` come back
        // as doubles: google.protobuf.Value has no integers.)
        let instant = |s: &Option<String>| {
            chrono::DateTime::parse_from_rfc3339(s.as_deref().unwrap()).unwrap()
        };
        assert_eq!(
            instant(&back.status.timestamp),
            instant(&t.status.timestamp)
        );
        back.status.timestamp = t.status.timestamp.clone();
        assert_eq!(back, t);
    }

    #[test]
    fn requests_read_like_their_json_forms() {
        let p = pb::SendMessageRequest {
            message: Some(pb::Message {
                message_id: "m".into(),
                role: pb::Role::User as i32,
                parts: vec![pb::Part {
                    content: Some(pb::part::Content::Text("hi".into())),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            configuration: Some(pb::SendMessageConfiguration {
                history_length: Some(0),
                return_immediately: true,
                ..Default::default()
            }),
            ..Default::default()
        };
        let r: v1::SendMessageRequest = from_pb(&p).unwrap();
        assert_eq!(r.message.parts[0].text.as_deref(), Some("hi"));
        let cfg = r.configuration.unwrap();
        assert_eq!(cfg.history_length, Some(0));
        assert!(cfg.return_immediately);
        // A message without parts or role is refused as invalid params, as over JSON-RPC.
        let bad = pb::SendMessageRequest::default();
        let e = from_pb::<_, v1::SendMessageRequest>(&bad).unwrap_err();
        assert!(matches!(e, A2AError::InvalidParams(_)), "{e:?}");
    }
}
