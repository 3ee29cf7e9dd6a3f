//! Reads of the SQLite store: a task rebuilt from its checkpoint and the events after it,
//! event pages, listings.

use std::sync::Arc;

use rusqlite::{params, Connection, OptionalExtension};

use super::rows::unpack;
use crate::protocol::v1::Task;
use crate::store::memory::encode_token;
use crate::store::{ListPage, ListQuery, Snapshot, StoreError, TerminalTask};
use crate::task::{apply_owned, LoggedEvent, TaskEvent};

/// A task as stored: its checkpoint with the later events applied, and its last sequence.
pub(super) fn load_task(conn: &Connection, id: &str) -> Result<Option<(Task, u64)>, StoreError> {
    Ok(load_owned(conn, id)?.map(|s| (s.task, s.last_seq)))
}

/// A task as stored, with its owner.
pub(super) fn load_owned(conn: &Connection, id: &str) -> Result<Option<Snapshot>, StoreError> {
    // A task without a checkpoint is rebuilt from its first event (the task as created).
    let row = conn
        .prepare_cached(
            "SELECT s.json, s.seq, t.last_seq, t.owner FROM tasks t
             LEFT JOIN snapshots s ON s.task_id = t.id WHERE t.id = ?1",
        )?
        .query_row([id], |r| {
            Ok((
                r.get::<_, Option<String>>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?;
    let Some((snapshot, snapshot_seq, last_seq, owner)) = row else {
        return Ok(None);
    };
    // Each stored text is dropped as soon as it is parsed: a task with megabytes of output is
    // held once as the task, plus one row of events at a time.
    let mut task: Task = match snapshot {
        Some(json) => serde_json::from_str(&json)?,
        None => Task::default(),
    };
    let after = snapshot_seq.unwrap_or(0) as u64;
    for_each_event(conn, id, after, |_, json| {
        apply_owned(&mut task, serde_json::from_str::<TaskEvent>(json)?);
        Ok(true)
    })?;
    Ok(Some(Snapshot {
        task,
        last_seq: last_seq as u64,
        owner,
    }))
}

/// Up to `limit` events of a task after sequence `after`.
pub(super) fn read_events(
    conn: &Connection,
    id: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    for_each_event(conn, id, after, |seq, json| {
        out.push(Arc::new(LoggedEvent::parse_stored(seq, json)?));
        Ok(out.len() < limit)
    })?;
    Ok(out)
}

/// Calls `f` with each stored event of a task after sequence `after`, in order, until it
/// returns false. Reads one row (a batch of events) at a time; the events of the first row
/// up to `after` are skipped unparsed.
fn for_each_event(
    conn: &Connection,
    id: &str,
    after: u64,
    mut f: impl FnMut(u64, &str) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT first_seq, last_seq, json FROM events WHERE task_id = ?1 AND last_seq > ?2
         ORDER BY last_seq",
    )?;
    let mut rows = stmt.query(params![id, after as i64])?;
    while let Some(row) = rows.next()? {
        let first = row.get::<_, i64>(0)? as u64;
        let last = row.get::<_, i64>(1)? as u64;
        let json = row.get_ref(2)?.as_str().map_err(|e| StoreError::BadRow {
            what: "events",
            column: 3,
            detail: e.to_string(),
        })?;
        for ev in unpack(first, last, json, after)? {
            let (seq, json) = ev?;
            if !f(seq, json)? {
                return Ok(());
            }
        }
    }
    Ok(())
}

pub(super) fn task_exists(conn: &Connection, id: &str) -> Result<bool, StoreError> {
    Ok(conn
        .query_row("SELECT 1 FROM tasks WHERE id = ?1", [id], |_| Ok(()))
        .optional()?
        .is_some())
}

/// The last sequence number and state of a task.
pub(super) fn position(conn: &Connection, id: &str) -> Result<Option<(u64, String)>, StoreError> {
    Ok(conn
        .query_row(
            "SELECT last_seq, state FROM tasks WHERE id = ?1",
            [id],
            |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?)),
        )
        .optional()?)
}

/// One page of a listing; `after_key` is the decoded page token.
pub(super) fn list(
    conn: &Connection,
    q: &ListQuery,
    after_key: Option<(String, String)>,
    with_artifacts: bool,
) -> Result<ListPage, StoreError> {
    let mut filter = String::from(" WHERE 1=1");
    let mut args: Vec<String> = Vec::new();
    if let Some(owner) = &q.owner {
        args.push(owner.clone());
        filter.push_str(&format!(" AND (owner IS NULL OR owner = ?{})", args.len()));
    }
    if let Some(ctx) = &q.context_id {
        args.push(ctx.clone());
        filter.push_str(&format!(" AND context_id = ?{}", args.len()));
    }
    if let Some(st) = q.state {
        args.push(st.as_proto_name().to_string());
        filter.push_str(&format!(" AND state = ?{}", args.len()));
    }
    if let Some(after) = &q.status_after {
        args.push(after.clone());
        filter.push_str(&format!(" AND status_ts >= ?{}", args.len()));
    }
    let total: i64 = conn.query_row(
        &format!("SELECT COUNT(*) FROM tasks{filter}"),
        rusqlite::params_from_iter(args.iter()),
        |r| r.get(0),
    )?;
    let mut page_filter = filter.clone();
    let mut page_args = args.clone();
    if let Some((ts, id)) = &after_key {
        page_args.push(ts.clone());
        page_args.push(id.clone());
        page_filter.push_str(&format!(
            " AND (status_ts, id) < (?{}, ?{})",
            page_args.len() - 1,
            page_args.len()
        ));
    }
    let sql = format!(
        "SELECT id, status_ts FROM tasks{page_filter} ORDER BY status_ts DESC, id DESC LIMIT {}",
        q.page_size + 1
    );
    let mut stmt = conn.prepare(&sql)?;
    let keys: Vec<(String, String)> = stmt
        .query_map(rusqlite::params_from_iter(page_args.iter()), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?
        .collect::<Result<_, _>>()?;
    let more = keys.len() > q.page_size;
    let mut tasks = Vec::new();
    for (id, _) in keys.iter().take(q.page_size) {
        if let Some((mut t, _)) = load_task(conn, id)? {
            if !with_artifacts {
                t.artifacts.clear();
            }
            tasks.push(t);
        }
    }
    let next_page_token = if more {
        keys.get(q.page_size - 1)
            .map(|(id, ts)| encode_token(&(ts.clone(), id.clone())))
            .unwrap_or_default()
    } else {
        String::new()
    };
    Ok(ListPage {
        tasks,
        next_page_token,
        total_size: total as usize,
    })
}

/// Tasks not in a terminal state, oldest first.
pub(super) fn unfinished(conn: &Connection) -> Result<Vec<Snapshot>, StoreError> {
    let ids: Vec<String> = {
        let mut stmt = conn.prepare(
            "SELECT id FROM tasks WHERE state NOT IN
             ('TASK_STATE_COMPLETED','TASK_STATE_FAILED','TASK_STATE_CANCELED','TASK_STATE_REJECTED')
             ORDER BY created_at, id",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    let mut out = Vec::new();
    for id in ids {
        if let Some(snap) = load_owned(conn, &id)? {
            out.push(snap);
        }
    }
    Ok(out)
}

/// The states in which a task never changes again (as stored, proto names).
pub(super) const TERMINAL: &str =
    "('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED')";

/// Every terminal task, newest status first.
pub(super) fn terminal_tasks(conn: &mut Connection) -> Result<Vec<TerminalTask>, StoreError> {
    let sql = format!(
        "SELECT id, context_id, status_ts FROM tasks WHERE state IN {}
         ORDER BY status_ts DESC, id DESC",
        TERMINAL
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([], |r| {
        Ok(TerminalTask {
            id: r.get(0)?,
            context_id: r.get(1)?,
            status_ts: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Those of `ids` that are terminal tasks.
pub(super) fn which_terminal(
    conn: &mut Connection,
    ids: &[String],
) -> Result<Vec<String>, StoreError> {
    let sql = format!(
        "SELECT 1 FROM tasks WHERE id = ?1 AND state IN {}",
        TERMINAL
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut out = Vec::new();
    for id in ids {
        if stmt.exists([id])? {
            out.push(id.clone());
        }
    }
    Ok(out)
}
