//! The push-notification config methods of both versions, and configs given inline with a
//! message. All answer `PushNotificationNotSupportedError` when push is off.

use serde::Deserialize;
use serde_json::{json, Value};

use super::AppState;
use crate::protocol::v03::{self, decode_params};
use crate::protocol::v1::{SendMessageRequest, TaskPushNotificationConfig};
use crate::protocol::{A2AError, Method};
use crate::push::{PushService, V03, V1};

pub(super) fn service(state: &AppState) -> Result<&PushService, A2AError> {
    state
        .push
        .as_ref()
        .ok_or(A2AError::PushNotificationNotSupported)
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, A2AError> {
    serde_json::to_value(v).map_err(|e| A2AError::Internal(e.to_string()))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConfigRef {
    #[serde(alias = "task_id")]
    task_id: String,
    id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskRef {
    #[serde(alias = "task_id")]
    task_id: String,
}

/// One of the push-notification config methods ([`Method::is_push_config`]).
pub async fn dispatch(
    state: &AppState,
    owner: Option<&str>,
    method: Method,
    params: Value,
) -> Result<Value, A2AError> {
    let push = service(state)?;
    match method {
        Method::CreateTaskPushNotificationConfig => {
            let cfg: TaskPushNotificationConfig = decode_params(params)?;
            to_value(&push.create(owner, cfg, V1, false).await?)
        }
        Method::GetTaskPushNotificationConfig => {
            let r: ConfigRef = decode_params(params)?;
            to_value(&push.get(owner, &r.task_id, &r.id).await?)
        }
        Method::ListTaskPushNotificationConfigs => {
            let r: TaskRef = decode_params(params)?;
            let configs = push.list(owner, &r.task_id).await?;
            Ok(json!({"configs": configs, "nextPageToken": ""}))
        }
        Method::DeleteTaskPushNotificationConfig => {
            let r: ConfigRef = decode_params(params)?;
            push.delete(owner, &r.task_id, &r.id).await?;
            Ok(json!({}))
        }
        Method::PushConfigSet => {
            let c: v03::TaskPushNotificationConfig03 = decode_params(params)?;
            let cfg = TaskPushNotificationConfig::try_from(c)?;
            to_value(&v03::push_config_to_v03(
                &push.create(owner, cfg, V03, false).await?,
            ))
        }
        Method::PushConfigGet => {
            let p: v03::TaskPushNotificationConfigParams03 = decode_params(params)?;
            let cfg = match p.push_notification_config_id.filter(|i| !i.is_empty()) {
                Some(id) => push.get(owner, &p.id, &id).await?,
                // Without a config id: the task's only (or first) config.
                None => push
                    .list(owner, &p.id)
                    .await?
                    .into_iter()
                    .next()
                    .ok_or_else(|| {
                        A2AError::TaskNotFound(format!("{} (no push notification config)", p.id))
                    })?,
            };
            to_value(&v03::push_config_to_v03(&cfg))
        }
        Method::PushConfigList => {
            let p: v03::TaskIdParams03 = decode_params(params)?;
            let all: Vec<v03::TaskPushNotificationConfig03> = push
                .list(owner, &p.id)
                .await?
                .iter()
                .map(v03::push_config_to_v03)
                .collect();
            to_value(&all)
        }
        Method::PushConfigDelete => {
            let p: v03::TaskPushNotificationConfigParams03 = decode_params(params)?;
            let id = p.push_notification_config_id.ok_or_else(|| {
                A2AError::InvalidParams("pushNotificationConfigId is required".into())
            })?;
            push.delete(owner, &p.id, &id).await?;
            Ok(Value::Null)
        }
        // The JSON-RPC dispatcher sends only the push methods here.
        other => Err(A2AError::Internal(format!(
            "{other} is not a push notification config method"
        ))),
    }
}

/// A config given with a message (`configuration.taskPushNotificationConfig`; v0.3
/// `pushNotificationConfig`): checked before the message is accepted.
pub async fn inline_config(
    state: &AppState,
    req: &SendMessageRequest,
) -> Result<Option<TaskPushNotificationConfig>, A2AError> {
    let Some(cfg) = req
        .configuration
        .as_ref()
        .and_then(|c| c.task_push_notification_config.clone())
    else {
        return Ok(None);
    };
    service(state)?.validate(&cfg).await?;
    Ok(Some(cfg))
}

/// Stores an inline config for the task the message created (or answered); for a new task
/// its whole log is delivered.
pub async fn register_inline(
    state: &AppState,
    owner: Option<&str>,
    cfg: Option<TaskPushNotificationConfig>,
    task_id: &str,
    new_task: bool,
    version: &str,
) -> Result<(), A2AError> {
    let Some(mut cfg) = cfg else {
        return Ok(());
    };
    cfg.task_id = Some(task_id.to_string());
    service(state)?
        .create(owner, cfg, version, new_task)
        .await?;
    Ok(())
}
