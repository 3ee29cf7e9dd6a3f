//! The `A2AService` methods, each on the same operations as the HTTP bindings.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tonic::{Request, Response, Status};

use super::convert::{from_pb, to_pb, to_pb_json};
use super::pb;
use super::pb::a2a_service_server::A2aService;
use super::Calls;
use crate::protocol::v1;
use crate::protocol::A2AError;
use crate::push;
use crate::server::ops::{self, TaskStream};
use crate::server::{extended, push_rpc};

/// The stream type of both streaming methods.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<pb::StreamResponse, Status>> + Send>>;

/// The metadata key of a streamed event that holds its sequence number: the same number as the
/// SSE `id` of that event. gRPC has no per-message id, so it travels in the event; send the
/// last one seen back as `last-event-id` request metadata to resume after it.
pub const EVENT_ID_KEY: &str = "eventId";

/// The service over one host's agents (the first is the default; `tenant` names another).
#[derive(Clone)]
pub struct A2aGrpc {
    pub(super) calls: Arc<Calls>,
}

#[tonic::async_trait]
impl A2aService for A2aGrpc {
    type SendStreamingMessageStream = EventStream;
    type SubscribeToTaskStream = EventStream;

    async fn send_message(
        &self,
        req: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let (call, msg) = self.calls.admit(req, "SendMessage", |m| &m.tenant)?;
        call.run(async {
            let r: v1::SendMessageRequest = from_pb(&msg)?;
            self.calls.check_conversation(&call, &r).await?;
            let resp =
                ops::send_blocking(&call.state, call.owner(), r, &call.options(), push::V1).await?;
            to_pb(&resp)
        })
        .await
    }

    async fn send_streaming_message(
        &self,
        req: Request<pb::SendMessageRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let (call, msg) = self
            .calls
            .admit(req, "SendStreamingMessage", |m| &m.tenant)?;
        call.run(async {
            let r: v1::SendMessageRequest = from_pb(&msg)?;
            self.calls.check_conversation(&call, &r).await?;
            let ts = ops::open_send_stream(&call.state, call.owner(), r, &call.options(), push::V1)
                .await?;
            Ok(events(ts))
        })
        .await
    }

    async fn get_task(
        &self,
        req: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let (call, msg) = self.calls.admit(req, "GetTask", |m| &m.tenant)?;
        call.run(async {
            let r: v1::GetTaskRequest = from_pb(&msg)?;
            let t = call
                .state
                .engine
                .get(&r.id, r.history_length, call.owner())
                .await?;
            to_pb(&t)
        })
        .await
    }

    async fn list_tasks(
        &self,
        req: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let (call, msg) = self.calls.admit(req, "ListTasks", |m| &m.tenant)?;
        call.run(async {
            let r: v1::ListTasksRequest = from_pb(&msg)?;
            let list = call.state.engine.list(r, call.owner()).await?;
            to_pb(&list)
        })
        .await
    }

    async fn cancel_task(
        &self,
        req: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let (call, msg) = self.calls.admit(req, "CancelTask", |m| &m.tenant)?;
        call.run(async {
            let r: v1::CancelTaskRequest = from_pb(&msg)?;
            let t = call
                .state
                .engine
                .cancel_from(&r.id, call.owner(), &call.options())
                .await?;
            to_pb(&t)
        })
        .await
    }

    async fn subscribe_to_task(
        &self,
        req: Request<pb::SubscribeToTaskRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let (call, msg) = self.calls.admit(req, "SubscribeToTask", |m| &m.tenant)?;
        call.run(async {
            let r: v1::SubscribeToTaskRequest = from_pb(&msg)?;
            let last = call.last_event_id.as_deref();
            let ts = ops::open_subscription(&call.state, call.owner(), last, &r.id).await?;
            Ok(events(ts))
        })
        .await
    }

    async fn create_task_push_notification_config(
        &self,
        req: Request<pb::TaskPushNotificationConfig>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        let (call, msg) = self
            .calls
            .admit(req, "CreateTaskPushNotificationConfig", |m| &m.tenant)?;
        call.run(async {
            let cfg: v1::TaskPushNotificationConfig = from_pb(&msg)?;
            let svc = push_rpc::service(&call.state)?;
            to_pb(&svc.create(call.owner(), cfg, push::V1, false).await?)
        })
        .await
    }

    async fn get_task_push_notification_config(
        &self,
        req: Request<pb::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        let (call, msg) = self
            .calls
            .admit(req, "GetTaskPushNotificationConfig", |m| &m.tenant)?;
        call.run(async {
            let svc = push_rpc::service(&call.state)?;
            let (task_id, id) = (required(&msg.task_id, "task_id")?, required(&msg.id, "id")?);
            to_pb(&svc.get(call.owner(), task_id, id).await?)
        })
        .await
    }

    async fn list_task_push_notification_configs(
        &self,
        req: Request<pb::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<pb::ListTaskPushNotificationConfigsResponse>, Status> {
        let (call, msg) = self
            .calls
            .admit(req, "ListTaskPushNotificationConfigs", |m| &m.tenant)?;
        call.run(async {
            let svc = push_rpc::service(&call.state)?;
            let configs = svc
                .list(call.owner(), required(&msg.task_id, "task_id")?)
                .await?;
            Ok(pb::ListTaskPushNotificationConfigsResponse {
                configs: configs.iter().map(to_pb).collect::<Result<_, _>>()?,
                next_page_token: String::new(),
            })
        })
        .await
    }

    async fn get_extended_agent_card(
        &self,
        req: Request<pb::GetExtendedAgentCardRequest>,
    ) -> Result<Response<pb::AgentCard>, Status> {
        let headers = req.metadata().clone().into_headers();
        let (call, _msg) = self
            .calls
            .admit(req, "GetExtendedAgentCard", |m| &m.tenant)?;
        call.run(async {
            let card = extended::card_json(&call.state, &headers, false)?;
            to_pb_json(card)
        })
        .await
    }

    async fn delete_task_push_notification_config(
        &self,
        req: Request<pb::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pbjson_types::Empty>, Status> {
        let (call, msg) = self
            .calls
            .admit(req, "DeleteTaskPushNotificationConfig", |m| &m.tenant)?;
        call.run(async {
            let svc = push_rpc::service(&call.state)?;
            let (task_id, id) = (required(&msg.task_id, "task_id")?, required(&msg.id, "id")?);
            svc.delete(call.owner(), task_id, id).await?;
            Ok(pbjson_types::Empty {})
        })
        .await
    }
}

/// A field the method cannot do without.
fn required<'a>(value: &'a str, name: &str) -> Result<&'a str, A2AError> {
    if value.trim().is_empty() {
        return Err(A2AError::InvalidParams(format!("{name} is required")));
    }
    Ok(value)
}

/// A task stream as gRPC messages: the snapshot (if any), then each streamed event, each with
/// its sequence number in `metadata.eventId`. Ends when the task's stream ends.
fn events(ts: TaskStream) -> EventStream {
    let first = ts
        .first
        .map(|(seq, sr)| with_event_id(seq, &sr))
        .into_iter();
    let rest = futures::stream::unfold(ts.events, |mut events| async move {
        loop {
            let e = events.next().await?;
            if let crate::task::TaskEvent::Stream(sr) = &e.event {
                metrics::counter!("agent_host_grpc_events_total").increment(1);
                return Some((with_event_id(e.seq, sr), events));
            }
        }
    });
    Box::pin(futures::StreamExt::chain(
        futures::stream::iter(first),
        rest,
    ))
}

/// One stream message, its event id added to the metadata of whatever it carries.
fn with_event_id(seq: u64, sr: &v1::StreamResponse) -> Result<pb::StreamResponse, Status> {
    let mut msg: pb::StreamResponse = to_pb(sr).map_err(|e| super::status(&e))?;
    let id = super::wkt::Value::from(seq.to_string());
    use pb::stream_response::Payload;
    let metadata = match msg.payload.as_mut() {
        Some(Payload::Task(t)) => &mut t.metadata,
        Some(Payload::Message(m)) => &mut m.metadata,
        Some(Payload::StatusUpdate(u)) => &mut u.metadata,
        Some(Payload::ArtifactUpdate(u)) => &mut u.metadata,
        None => return Ok(msg),
    };
    metadata
        .get_or_insert_with(Default::default)
        .fields
        .insert(EVENT_ID_KEY.into(), id);
    Ok(msg)
}
