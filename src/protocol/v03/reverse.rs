//! The client's direction: v1 requests → v0.3 (JSON-RPC params and REST bodies), and v0.3
//! responses and stream events (JSON-RPC objects and REST ProtoJSON) → v1.
//!
//! [`super::convert`] is the server's direction; these are its inverses, so that a client
//! keeps one v1.0 model and talks v0.3 on the wire. Decoding is lenient like the server's
//! (unknown fields ignored, `kind` optional when the shape is clear); a response that does
//! not decode is [`A2AError::InvalidAgentResponse`].

use serde_json::Value;

use super::rest::{
    RestArtifact03, RestMessage03, RestPart03, RestSendConfiguration03, RestSendMessageRequest03,
    RestStatus03, RestStreamResponse03, RestTask03,
};
use super::types::*;
use super::{message_to_v03, TaskState03};
use crate::protocol::v1;
use crate::protocol::A2AError;

fn bad(what: &str, e: impl std::fmt::Display) -> A2AError {
    A2AError::InvalidAgentResponse(format!("cannot read the v0.3 {what}: {e}"))
}

// ---------------------------------------------------------------------------------------
// v1 → v0.3 (requests)
// ---------------------------------------------------------------------------------------

/// v1 send configuration ⇒ v0.3 (`blocking = !returnImmediately`, always explicit).
pub fn configuration_to_v03(c: &v1::SendMessageConfiguration) -> MessageSendConfiguration03 {
    MessageSendConfiguration03 {
        accepted_output_modes: c.accepted_output_modes.clone(),
        blocking: Some(!c.return_immediately),
        // v0.3 0 means "unset": a v1 0 ("no history") has no v0.3 spelling; 1 is closest.
        history_length: c.history_length.map(|n| n.max(1)),
        push_notification_config: c.task_push_notification_config.as_ref().map(Into::into),
    }
}

/// v1 `SendMessageRequest` ⇒ v0.3 `MessageSendParams` (tenant dropped).
pub fn send_request_to_v03(r: &v1::SendMessageRequest) -> MessageSendParams03 {
    MessageSendParams03 {
        message: message_to_v03(&r.message),
        configuration: r.configuration.as_ref().map(configuration_to_v03),
        metadata: r.metadata.clone(),
    }
}

/// v1 `SendMessageRequest` ⇒ the v0.3 REST body (ProtoJSON of the v0.3 proto).
pub fn send_request_to_rest03(r: &v1::SendMessageRequest) -> RestSendMessageRequest03 {
    let p = send_request_to_v03(r);
    RestSendMessageRequest03 {
        message: RestMessage03::from(&p.message),
        configuration: p.configuration.map(|c| RestSendConfiguration03 {
            accepted_output_modes: c.accepted_output_modes,
            push_notification: c.push_notification_config,
            history_length: c.history_length,
            blocking: c.blocking,
        }),
        metadata: p.metadata,
    }
}

// ---------------------------------------------------------------------------------------
// v0.3 JSON-RPC objects → v1
// ---------------------------------------------------------------------------------------

impl From<TaskStatus03> for v1::TaskStatus {
    fn from(s: TaskStatus03) -> Self {
        v1::TaskStatus {
            state: s.state.into(),
            message: s.message.map(Into::into),
            timestamp: s.timestamp,
        }
    }
}

impl From<Artifact03> for v1::Artifact {
    fn from(a: Artifact03) -> Self {
        v1::Artifact {
            artifact_id: a.artifact_id,
            name: a.name,
            description: a.description,
            parts: a.parts.into_iter().map(Into::into).collect(),
            metadata: a.metadata,
            extensions: a.extensions,
        }
    }
}

impl From<Task03> for v1::Task {
    fn from(t: Task03) -> Self {
        v1::Task {
            id: t.id,
            context_id: t.context_id,
            status: t.status.into(),
            artifacts: t.artifacts.into_iter().map(Into::into).collect(),
            history: t.history.into_iter().map(Into::into).collect(),
            metadata: t.metadata,
        }
    }
}

/// `final` has no v1 counterpart: the v1 stream ends by closing.
impl From<TaskStatusUpdateEvent03> for v1::TaskStatusUpdateEvent {
    fn from(e: TaskStatusUpdateEvent03) -> Self {
        v1::TaskStatusUpdateEvent {
            task_id: e.task_id,
            context_id: e.context_id,
            status: e.status.into(),
            metadata: e.metadata,
        }
    }
}

impl From<TaskArtifactUpdateEvent03> for v1::TaskArtifactUpdateEvent {
    fn from(e: TaskArtifactUpdateEvent03) -> Self {
        v1::TaskArtifactUpdateEvent {
            task_id: e.task_id,
            context_id: e.context_id,
            artifact: e.artifact.into(),
            append: e.append.unwrap_or(false),
            last_chunk: e.last_chunk.unwrap_or(false),
            metadata: e.metadata,
        }
    }
}

/// The `kind` of a v0.3 object, or a guess from its members when it has none.
fn kind_of(v: &Value) -> &str {
    if let Some(k) = v.get("kind").and_then(Value::as_str) {
        return k;
    }
    if v.get("artifact").is_some() {
        "artifact-update"
    } else if v.get("final").is_some() || (v.get("taskId").is_some() && v.get("status").is_some()) {
        "status-update"
    } else if v.get("status").is_some() {
        "task"
    } else {
        "message"
    }
}

/// A v0.3 JSON-RPC stream event (`message/stream`, `tasks/resubscribe` result) ⇒ v1.
pub fn stream_event_from_v03(v: Value) -> Result<v1::StreamResponse, A2AError> {
    Ok(match kind_of(&v) {
        "task" => v1::StreamResponse::Task(task_from_v03(v)?),
        "message" => v1::StreamResponse::Message(
            serde_json::from_value::<Message03>(v)
                .map_err(|e| bad("message", e))?
                .into(),
        ),
        "status-update" => v1::StreamResponse::StatusUpdate(
            serde_json::from_value::<TaskStatusUpdateEvent03>(v)
                .map_err(|e| bad("status update", e))?
                .into(),
        ),
        "artifact-update" => v1::StreamResponse::ArtifactUpdate(
            serde_json::from_value::<TaskArtifactUpdateEvent03>(v)
                .map_err(|e| bad("artifact update", e))?
                .into(),
        ),
        other => return Err(bad("stream event", format!("unknown kind \"{other}\""))),
    })
}

/// A v0.3 `message/send` result (a bare task or message) ⇒ v1.
pub fn send_result_from_v03(v: Value) -> Result<v1::SendMessageResponse, A2AError> {
    match stream_event_from_v03(v)? {
        v1::StreamResponse::Task(t) => Ok(v1::SendMessageResponse::Task(t)),
        v1::StreamResponse::Message(m) => Ok(v1::SendMessageResponse::Message(m)),
        _ => Err(bad(
            "send result",
            "an update event instead of a task or message",
        )),
    }
}

/// A v0.3 JSON-RPC task (`tasks/get`, `tasks/cancel` result) ⇒ v1.
pub fn task_from_v03(v: Value) -> Result<v1::Task, A2AError> {
    Ok(serde_json::from_value::<Task03>(v)
        .map_err(|e| bad("task", e))?
        .into())
}

// ---------------------------------------------------------------------------------------
// v0.3 REST (ProtoJSON) → v1
// ---------------------------------------------------------------------------------------

fn rest_state(s: &str) -> v1::TaskState {
    v1::TaskState::parse_lenient(s).unwrap_or_default()
}

fn rest_part(p: RestPart03) -> Result<v1::Part, A2AError> {
    let p03 = Part03::try_from(p).map_err(|e| bad("part", e))?;
    Ok(p03.into())
}

fn rest_message(m: RestMessage03) -> Result<v1::Message, A2AError> {
    Ok(v1::Message {
        message_id: m.message_id,
        context_id: m.context_id.filter(|s| !s.is_empty()),
        task_id: m.task_id.filter(|s| !s.is_empty()),
        role: m.role,
        parts: m
            .content
            .into_iter()
            .map(rest_part)
            .collect::<Result<_, _>>()?,
        metadata: m.metadata,
        extensions: m.extensions,
        reference_task_ids: vec![],
    })
}

fn rest_status(s: RestStatus03) -> Result<v1::TaskStatus, A2AError> {
    Ok(v1::TaskStatus {
        state: rest_state(&s.state),
        message: s.message.map(rest_message).transpose()?,
        timestamp: s.timestamp,
    })
}

fn rest_artifact(a: RestArtifact03) -> Result<v1::Artifact, A2AError> {
    Ok(v1::Artifact {
        artifact_id: a.artifact_id,
        name: a.name,
        description: a.description,
        parts: a
            .parts
            .into_iter()
            .map(rest_part)
            .collect::<Result<_, _>>()?,
        metadata: a.metadata,
        extensions: a.extensions,
    })
}

fn rest_task(t: RestTask03) -> Result<v1::Task, A2AError> {
    Ok(v1::Task {
        id: t.id,
        context_id: t.context_id,
        status: rest_status(t.status)?,
        artifacts: t
            .artifacts
            .into_iter()
            .map(rest_artifact)
            .collect::<Result<_, _>>()?,
        history: t
            .history
            .into_iter()
            .map(rest_message)
            .collect::<Result<_, _>>()?,
        metadata: t.metadata,
    })
}

/// A v0.3 REST `Task` body ⇒ v1.
pub fn task_from_rest03(v: Value) -> Result<v1::Task, A2AError> {
    rest_task(serde_json::from_value(v).map_err(|e| bad("task", e))?)
}

/// A v0.3 REST `StreamResponse` (one SSE event) ⇒ v1.
pub fn stream_event_from_rest03(v: Value) -> Result<v1::StreamResponse, A2AError> {
    let ev: RestStreamResponse03 = serde_json::from_value(v).map_err(|e| bad("stream event", e))?;
    Ok(match ev {
        RestStreamResponse03::Task(t) => v1::StreamResponse::Task(rest_task(t)?),
        RestStreamResponse03::Message(m) => v1::StreamResponse::Message(rest_message(m)?),
        RestStreamResponse03::StatusUpdate(s) => {
            v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
                task_id: s.task_id,
                context_id: s.context_id,
                status: rest_status(s.status)?,
                metadata: s.metadata,
            })
        }
        RestStreamResponse03::ArtifactUpdate(a) => {
            v1::StreamResponse::ArtifactUpdate(v1::TaskArtifactUpdateEvent {
                task_id: a.task_id,
                context_id: a.context_id,
                artifact: rest_artifact(a.artifact)?,
                append: a.append,
                last_chunk: a.last_chunk,
                metadata: a.metadata,
            })
        }
    })
}

/// A v0.3 REST `SendMessageResponse` (`{"task"}` | `{"message"}`) ⇒ v1.
pub fn send_result_from_rest03(v: Value) -> Result<v1::SendMessageResponse, A2AError> {
    match stream_event_from_rest03(v)? {
        v1::StreamResponse::Task(t) => Ok(v1::SendMessageResponse::Task(t)),
        v1::StreamResponse::Message(m) => Ok(v1::SendMessageResponse::Message(m)),
        _ => Err(bad(
            "send result",
            "an update event instead of a task or message",
        )),
    }
}

/// The v0.3 name of a v1 state (for messages that name it).
pub fn state_name_03(s: v1::TaskState) -> &'static str {
    TaskState03::from(s).as_str()
}

#[cfg(test)]
mod tests {
    use super::super::{rest, stream_event_to_v03};
    use super::*;
    use serde_json::json;

    fn sample_events() -> Vec<v1::StreamResponse> {
        let task: v1::Task = serde_json::from_value(json!({
            "id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": "2026-01-01T00:00:00.000Z"},
            "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                         "contextId": "c1", "taskId": "t1"}],
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"k": 1}}, {"url": "https://x/f", "mediaType": "text/plain", "filename": "f"}]}],
            "metadata": {"m": true}
        }))
        .unwrap();
        let status: v1::TaskStatusUpdateEvent = serde_json::from_value(json!({
            "taskId": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_CANCELED", "message": {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "bye"}]}},
            "metadata": {"usage": {"n": 1}}
        }))
        .unwrap();
        let art: v1::TaskArtifactUpdateEvent = serde_json::from_value(json!({
            "taskId": "t1", "contextId": "c1", "append": true, "lastChunk": true,
            "artifact": {"artifactId": "r", "name": "result", "parts": [{"text": "x"}, {"data": [1, 2]}]}
        }))
        .unwrap();
        let msg = v1::Message {
            message_id: "m3".into(),
            role: v1::Role::Agent,
            parts: vec![v1::Part::text("direct")],
            ..v1::Message::default()
        };
        vec![
            v1::StreamResponse::Task(task),
            v1::StreamResponse::StatusUpdate(status),
            v1::StreamResponse::ArtifactUpdate(art),
            v1::StreamResponse::Message(msg),
        ]
    }

    #[test]
    fn stream_events_round_trip_through_v03_jsonrpc() {
        for ev in sample_events() {
            let wire = stream_event_to_v03(&ev);
            assert_eq!(stream_event_from_v03(wire).unwrap(), ev);
        }
    }

    #[test]
    fn stream_events_round_trip_through_v03_rest() {
        for ev in sample_events() {
            let wire = rest::stream_event_to_rest03(&ev);
            assert_eq!(
                stream_event_from_rest03(wire.clone()).unwrap(),
                ev,
                "{wire}"
            );
        }
    }

    #[test]
    fn kindless_v03_events_are_recognised_by_their_members() {
        let ev = stream_event_from_v03(json!({"taskId": "t", "contextId": "c",
            "status": {"state": "working"}, "final": false}))
        .unwrap();
        assert!(matches!(ev, v1::StreamResponse::StatusUpdate(_)));
        let ev = stream_event_from_v03(
            json!({"id": "t", "contextId": "c", "status": {"state": "canceled"}}),
        )
        .unwrap();
        match ev {
            v1::StreamResponse::Task(t) => assert_eq!(t.status.state, v1::TaskState::Canceled),
            other => panic!("{other:?}"),
        }
        assert!(stream_event_from_v03(json!({"kind": "nope"})).is_err());
    }

    #[test]
    fn send_requests_become_v03_params_and_rest_bodies() {
        let req = v1::SendMessageRequest {
            tenant: Some("t".into()),
            message: v1::Message {
                message_id: "m".into(),
                task_id: Some("t1".into()),
                role: v1::Role::User,
                parts: vec![v1::Part::text("yes")],
                metadata: Some(json!({"cwd": "/w"}).as_object().unwrap().clone()),
                ..v1::Message::default()
            },
            configuration: Some(v1::SendMessageConfiguration {
                return_immediately: true,
                history_length: Some(0),
                ..v1::SendMessageConfiguration::default()
            }),
            metadata: None,
        };
        let p = serde_json::to_value(send_request_to_v03(&req)).unwrap();
        assert_eq!(
            p,
            json!({"message": {"kind": "message", "messageId": "m", "role": "user", "taskId": "t1",
                "parts": [{"kind": "text", "text": "yes"}], "metadata": {"cwd": "/w"}},
                "configuration": {"blocking": false, "historyLength": 1}})
        );
        // And the server reads it back as the same v1 request (less the tenant).
        let back = v1::SendMessageRequest::try_from(
            serde_json::from_value::<MessageSendParams03>(p).unwrap(),
        )
        .unwrap();
        assert_eq!(back.message, req.message);
        assert!(back.configuration.unwrap().return_immediately);
        let body = serde_json::to_value(send_request_to_rest03(&req)).unwrap();
        assert_eq!(body["message"]["content"][0]["text"], "yes");
        assert_eq!(body["message"]["role"], "ROLE_USER");
        assert_eq!(body["configuration"]["blocking"], false);
        let back = rest::decode_send_request(body).unwrap();
        assert_eq!(back.message, req.message);
    }

    #[test]
    fn rest_cancelled_with_two_ls_is_canceled() {
        let t = task_from_rest03(json!({"id": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_CANCELLED"}}))
        .unwrap();
        assert_eq!(t.status.state, v1::TaskState::Canceled);
        assert_eq!(state_name_03(t.status.state), "canceled");
    }
}
