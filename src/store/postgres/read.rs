//! Reads of the PostgreSQL store. Each read of tasks is one statement (one consistent view, one
//! round trip): the task's checkpoint with the events after it gathered into an array.

use std::sync::Arc;

use deadpool_postgres::ClientWrapper;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row};

use super::row::{col, unsigned};
use crate::protocol::v1::Task;
use crate::store::memory::encode_token;
use crate::store::{ListPage, ListQuery, Snapshot, StoreError};
use crate::task::{apply_owned, LoggedEvent, TaskEvent};

/// A task's checkpoint, last sequence, owner and the events after its checkpoint.
pub(super) const LOAD: &str = "SELECT t.id, s.json, t.last_seq, t.owner,
    COALESCE((SELECT array_agg(e.json ORDER BY e.seq) FROM events e
              WHERE e.task_id = t.id AND e.seq > s.seq), '{}') AS later,
    t.status_ts
    FROM tasks t JOIN snapshots s ON s.task_id = t.id";

/// The task a [`LOAD`] row describes.
pub(super) fn snapshot(row: &Row) -> Result<Snapshot, StoreError> {
    let mut task: Task = serde_json::from_str(col::<&str>(row, TASKS, 1)?)?;
    for json in col::<Vec<&str>>(row, TASKS, 4)? {
        apply_owned(&mut task, serde_json::from_str::<TaskEvent>(json)?);
    }
    Ok(Snapshot {
        task,
        last_seq: unsigned(row, TASKS, 2)?,
        owner: col(row, TASKS, 3)?,
    })
}

/// What the rows read here hold, for [`crate::store::StoreError::BadRow`].
const TASKS: &str = "tasks";
const EVENTS: &str = "events";

/// A task as stored, with its owner.
pub(super) async fn load(c: &ClientWrapper, id: &str) -> Result<Option<Snapshot>, StoreError> {
    let stmt = c.prepare_cached(&format!("{LOAD} WHERE t.id = $1")).await?;
    match c.query_opt(&stmt, &[&id]).await? {
        Some(row) => Ok(Some(snapshot(&row)?)),
        None => Ok(None),
    }
}

/// Up to `limit` events of a task after sequence `after`.
pub(super) async fn events(
    c: &ClientWrapper,
    id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
    let stmt = c
        .prepare_cached(
            "SELECT seq, json FROM events WHERE task_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
        )
        .await?;
    let rows = c
        .query(
            &stmt,
            &[
                &id,
                &i64::try_from(after).unwrap_or(i64::MAX),
                &i64::try_from(limit).unwrap_or(i64::MAX),
            ],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Arc::new(LoggedEvent::parse_stored(
                unsigned(r, EVENTS, 0)?,
                col::<&str>(r, EVENTS, 1)?,
            )?))
        })
        .collect()
}

/// The last sequence number and state of a task.
pub(super) async fn position(
    c: &ClientWrapper,
    id: &str,
) -> Result<Option<(u64, String)>, StoreError> {
    let stmt = c
        .prepare_cached("SELECT last_seq, state FROM tasks WHERE id = $1")
        .await?;
    match c.query_opt(&stmt, &[&id]).await? {
        Some(r) => Ok(Some((unsigned(&r, TASKS, 0)?, col(&r, TASKS, 1)?))),
        None => Ok(None),
    }
}

fn refs(a: &[String]) -> Vec<&(dyn ToSql + Sync)> {
    a.iter().map(|s| s as &(dyn ToSql + Sync)).collect()
}

/// One page of a listing; `after_key` is the decoded page token.
pub(super) async fn list<C: GenericClient>(
    c: &C,
    q: &ListQuery,
    after_key: Option<(String, String)>,
    with_artifacts: bool,
) -> Result<ListPage, StoreError> {
    let mut filter = String::from(" WHERE true");
    let mut args: Vec<String> = Vec::new();
    if let Some(owner) = &q.owner {
        args.push(owner.clone());
        filter.push_str(&format!(
            " AND (t.owner IS NULL OR t.owner = ${})",
            args.len()
        ));
    }
    if let Some(ctx) = &q.context_id {
        args.push(ctx.clone());
        filter.push_str(&format!(" AND t.context_id = ${}", args.len()));
    }
    if let Some(st) = q.state {
        args.push(st.as_proto_name().to_string());
        filter.push_str(&format!(" AND t.state = ${}", args.len()));
    }
    if let Some(after) = &q.status_after {
        args.push(after.clone());
        filter.push_str(&format!(" AND t.status_ts >= ${}", args.len()));
    }
    let total: usize = unsigned(
        &c.query_one(
            &format!("SELECT COUNT(*) FROM tasks t{filter}"),
            &refs(&args),
        )
        .await?,
        "COUNT(*) of tasks",
        0,
    )?;
    if let Some((ts, id)) = after_key {
        args.push(ts);
        args.push(id);
        filter.push_str(&format!(
            " AND (t.status_ts, t.id) < (${}, ${})",
            args.len() - 1,
            args.len()
        ));
    }
    let sql = format!(
        "{LOAD}{filter} ORDER BY t.status_ts DESC, t.id DESC LIMIT {}",
        q.page_size + 1
    );
    let rows = c.query(&sql, &refs(&args)).await?;
    let more = rows.len() > q.page_size;
    let mut tasks = Vec::with_capacity(q.page_size);
    let mut last_key = None;
    for row in rows.iter().take(q.page_size) {
        let mut t = snapshot(row)?.task;
        if !with_artifacts {
            t.artifacts.clear();
        }
        last_key = Some((col::<String>(row, TASKS, 5)?, col::<String>(row, TASKS, 0)?));
        tasks.push(t);
    }
    let next_page_token = match (more, last_key) {
        (true, Some(k)) => encode_token(&k),
        _ => String::new(),
    };
    Ok(ListPage {
        tasks,
        next_page_token,
        total_size: total,
    })
}

/// Tasks not in a terminal state, oldest first.
pub(super) async fn unfinished<C: GenericClient>(c: &C) -> Result<Vec<Snapshot>, StoreError> {
    let rows = c
        .query(
            &format!(
                "{LOAD} WHERE t.state NOT IN
                 ('TASK_STATE_COMPLETED','TASK_STATE_FAILED','TASK_STATE_CANCELED','TASK_STATE_REJECTED')
                 ORDER BY t.created_at, t.id"
            ),
            &[],
        )
        .await?;
    rows.iter().map(snapshot).collect()
}
