//! Reading tasks: one task as its caller may see it, and the checked list query.

use super::schedule::visible;
use super::{store_err, Engine, Owner};
use crate::protocol::v1::{ListTasksRequest, ListTasksResponse, Task, TaskState};
use crate::protocol::A2AError;
use crate::store::{ListQuery, Snapshot};
use crate::task;

impl Engine {
    pub(super) async fn snapshot(&self, task_id: &str) -> Result<Snapshot, A2AError> {
        let mut snap = self
            .inner
            .store
            .get(task_id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| A2AError::TaskNotFound(task_id.to_string()))?;
        self.inner.health.patch(&mut snap);
        Ok(snap)
    }

    /// The task as `owner` may see it: another caller's task is not found.
    pub(super) async fn snapshot_for(
        &self,
        task_id: &str,
        owner: Owner<'_>,
    ) -> Result<Snapshot, A2AError> {
        task::check_id("id", task_id).map_err(|_| A2AError::TaskNotFound(task_id.to_string()))?;
        let snap = self.snapshot(task_id).await?;
        if !visible(&snap.owner, owner) {
            return Err(A2AError::TaskNotFound(task_id.to_string()));
        }
        Ok(snap)
    }

    /// The task, with at most `history_length` messages of history.
    pub async fn get(
        &self,
        task_id: &str,
        history_length: Option<i32>,
        owner: Owner<'_>,
    ) -> Result<Task, A2AError> {
        if let Some(n) = history_length {
            if n < 0 {
                return Err(A2AError::InvalidParams(
                    "historyLength must not be negative".into(),
                ));
            }
        }
        let snap = self.snapshot_for(task_id, owner).await?;
        Ok(task::view(snap.task, history_length, true))
    }

    /// The task and the sequence number it reflects.
    pub async fn get_snapshot(
        &self,
        task_id: &str,
        owner: Owner<'_>,
    ) -> Result<Snapshot, A2AError> {
        self.snapshot_for(task_id, owner).await
    }

    /// Up to `limit` events of the task's log after sequence number `after`, for a caller
    /// that follows the task by reading instead of streaming (MCP's `get_task`).
    pub async fn events_since(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
        owner: Owner<'_>,
    ) -> Result<Vec<std::sync::Arc<crate::task::LoggedEvent>>, A2AError> {
        self.snapshot_for(task_id, owner).await?;
        self.inner
            .store
            .events_after(task_id, after, limit)
            .await
            .map_err(store_err)
    }

    /// Whether this engine holds the task, whoever owns it (for routing between engines; the
    /// engine that holds it still checks the caller).
    pub async fn has_task(&self, task_id: &str) -> bool {
        task::check_id("id", task_id).is_ok() && self.snapshot(task_id).await.is_ok()
    }

    /// Whether this engine holds the context (has a task of it) for `owner` (None: whoever
    /// owns it): where a follow-up in the context must run when several adapters are served,
    /// each with its own engine and store.
    pub async fn has_context(&self, context_id: &str, owner: Owner<'_>) -> bool {
        self.context_visible(context_id, owner)
            .await
            .unwrap_or(false)
    }

    /// Lists the caller's tasks, newest status first.
    pub async fn list(
        &self,
        req: ListTasksRequest,
        owner: Owner<'_>,
    ) -> Result<ListTasksResponse, A2AError> {
        let query = list_query(&req, owner)?;
        let page_size = query.page_size as i32;
        let include_artifacts = req.include_artifacts.unwrap_or(false);
        let page = self
            .inner
            .store
            .list(&query, include_artifacts)
            .await
            .map_err(store_err)?;
        Ok(ListTasksResponse {
            tasks: page
                .tasks
                .into_iter()
                .map(|t| task::view(t, req.history_length, include_artifacts))
                .collect(),
            next_page_token: page.next_page_token,
            page_size,
            total_size: page.total_size as i32,
        })
    }
}

/// The store query for a list request, checked: page size 1..=100 (0 or none: 50), history
/// length not negative, an RFC 3339 `statusTimestampAfter` (normalized to UTC milliseconds).
fn list_query(req: &ListTasksRequest, owner: Owner<'_>) -> Result<ListQuery, A2AError> {
    let page_size = match req.page_size {
        None | Some(0) => 50,
        Some(n) if (1..=100).contains(&n) => n,
        Some(n) => {
            return Err(A2AError::InvalidParams(format!(
                "pageSize must be between 1 and 100, got {n}"
            )))
        }
    };
    if req.history_length.is_some_and(|n| n < 0) {
        return Err(A2AError::InvalidParams(
            "historyLength must not be negative".into(),
        ));
    }
    let status_after = match &req.status_timestamp_after {
        Some(ts) => Some(
            chrono::DateTime::parse_from_rfc3339(ts)
                .map_err(|_| {
                    A2AError::InvalidParams(format!(
                        "statusTimestampAfter '{ts}' is not an ISO 8601 timestamp"
                    ))
                })?
                .with_timezone(&chrono::Utc)
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string(),
        ),
        None => None,
    };
    Ok(ListQuery {
        owner: owner.map(str::to_string),
        context_id: req.context_id.clone().filter(|c| !c.is_empty()),
        state: req.status.filter(|s| *s != TaskState::Unspecified),
        status_after,
        page_size: page_size as usize,
        page_token: req.page_token.clone().filter(|t| !t.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: serde_json::Value) -> ListTasksRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn list_requests_are_checked_and_normalized() {
        let q = list_query(&req(serde_json::json!({})), Some("alice")).unwrap();
        assert_eq!(q.page_size, 50);
        assert_eq!(q.owner.as_deref(), Some("alice"));
        assert_eq!(q.context_id, None);
        let q = list_query(
            &req(
                serde_json::json!({"pageSize": 100, "contextId": "", "pageToken": "",
                "statusTimestampAfter": "2026-01-02T03:04:05+02:00"}),
            ),
            None,
        )
        .unwrap();
        assert_eq!(q.page_size, 100);
        assert_eq!((q.context_id, q.page_token), (None, None));
        assert_eq!(q.status_after.as_deref(), Some("2026-01-02T01:04:05.000Z"));
        for bad in [
            serde_json::json!({"pageSize": 101}),
            serde_json::json!({"pageSize": -1}),
            serde_json::json!({"historyLength": -1}),
            serde_json::json!({"statusTimestampAfter": "yesterday"}),
        ] {
            let e = list_query(&req(bad.clone()), None).unwrap_err();
            assert_eq!(e.code(), -32602, "{bad}");
        }
    }
}
