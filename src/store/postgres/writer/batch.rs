//! One batch of writes in one transaction, in a fixed number of round trips (see the
//! [writer's docs](super)).

use std::collections::HashMap;

use deadpool_postgres::Object;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::{wake_payloads, Progress, Write, EVENTS_CHANNEL};
use crate::store::postgres::read;
use crate::store::postgres::row::{col, unsigned};
use crate::store::StoreError;

/// A task's index row after the appends of a batch.
struct Update<'a> {
    id: &'a str,
    last_seq: i64,
    state: Option<&'a str>,
    ts: Option<&'a str>,
    host: Option<&'a str>,
    bytes: usize,
    /// Events appended to the task in this batch.
    rows: usize,
    checkpoint: bool,
    ended: bool,
}

/// What a batch writes, gathered into one array per column.
#[derive(Default)]
struct Plan<'a> {
    // New tasks.
    c_id: Vec<&'a str>,
    c_context: Vec<&'a str>,
    c_state: Vec<&'a str>,
    c_ts: Vec<String>,
    c_owner: Vec<Option<&'a str>>,
    c_host: Vec<Option<&'a str>>,
    c_snapshot: Vec<String>,
    c_first: Vec<&'a str>,
    /// Index rows of appended tasks, one per task, in the order first appended.
    updates: Vec<Update<'a>>,
    // Appended event rows.
    e_task: Vec<&'a str>,
    e_seq: Vec<i64>,
    e_json: Vec<&'a str>,
    /// Last sequence number per task (created or appended), for the wake-ups.
    last: Vec<(&'a str, i64)>,
}

impl<'a> Plan<'a> {
    fn of(batch: &'a [Write]) -> Result<Plan<'a>, StoreError> {
        let mut p = Plan::default();
        let mut index: HashMap<&'a str, usize> = HashMap::new();
        for w in batch {
            match w {
                Write::Create {
                    task,
                    first,
                    owner,
                    host,
                    ..
                } => {
                    p.c_id.push(&task.id);
                    p.c_context.push(&task.context_id);
                    p.c_state.push(task.status.state.as_proto_name());
                    p.c_ts
                        .push(task.status.timestamp.clone().unwrap_or_default());
                    p.c_owner.push(owner.as_deref());
                    p.c_host.push(host.as_deref());
                    // The task as created is both its first event and its first checkpoint.
                    p.c_snapshot.push(serde_json::to_string(task)?);
                    p.c_first.push(first);
                    p.last.push((&task.id, 1));
                }
                Write::Append {
                    task_id,
                    first_seq,
                    rows,
                    status,
                    checkpoint,
                    ended,
                    host,
                    ..
                } => {
                    let first = i64::try_from(*first_seq).unwrap_or(i64::MAX);
                    for (i, json) in rows.iter().enumerate() {
                        p.e_task.push(task_id);
                        p.e_seq.push(first.saturating_add(i as i64));
                        p.e_json.push(json);
                    }
                    let last = first.saturating_add(rows.len() as i64 - 1);
                    let bytes: usize = rows.iter().map(String::len).sum();
                    let (state, ts) = match status {
                        Some((s, t)) => (Some(s.as_str()), Some(t.as_str())),
                        None => (None, None),
                    };
                    // A task appended twice in one batch gets one index row: its latest.
                    match index.get(task_id.as_str()) {
                        Some(&i) => {
                            let u = &mut p.updates[i];
                            u.last_seq = u.last_seq.max(last);
                            if state.is_some() {
                                (u.state, u.ts) = (state, ts);
                            }
                            u.host = u.host.or(host.as_deref());
                            u.bytes += bytes;
                            u.rows += rows.len();
                            u.checkpoint |= *checkpoint;
                            u.ended |= *ended;
                        }
                        None => {
                            index.insert(task_id, p.updates.len());
                            p.updates.push(Update {
                                id: task_id,
                                last_seq: last,
                                state,
                                ts,
                                host: host.as_deref(),
                                bytes,
                                rows: rows.len(),
                                checkpoint: *checkpoint,
                                ended: *ended,
                            });
                        }
                    }
                    match p.last.iter_mut().find(|(t, _)| *t == task_id.as_str()) {
                        Some(l) => l.1 = l.1.max(last),
                        None => p.last.push((task_id, last)),
                    }
                }
                Write::Flush { .. } => {}
            }
        }
        Ok(p)
    }
}

const MEASURE: &str = "SELECT u.id, COALESCE(octet_length(s.json), 0)::BIGINT,
        COALESCE((SELECT SUM(octet_length(e.json)) FROM events e
                  WHERE e.task_id = u.id AND e.seq > COALESCE(s.seq, 0)), 0)::BIGINT
        , (SELECT COUNT(*) FROM events e
           WHERE e.task_id = u.id AND e.seq > COALESCE(s.seq, 0))::BIGINT
     FROM UNNEST($1::TEXT[]) AS u(id) LEFT JOIN snapshots s ON s.task_id = u.id";

const CREATE: &str = "WITH t AS (
        INSERT INTO tasks (id, context_id, state, status_ts, created_at, last_seq, owner, host)
        SELECT id, ctx, st, ts, ts, 1, ow, ho
        FROM UNNEST($1::TEXT[], $2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[])
            AS c(id, ctx, st, ts, ow, ho)
     ), s AS (
        INSERT INTO snapshots (task_id, seq, json)
        SELECT id, 1, j FROM UNNEST($1::TEXT[], $7::TEXT[]) AS c(id, j)
     )
     INSERT INTO events (task_id, seq, json)
     SELECT id, 1, j FROM UNNEST($1::TEXT[], $8::TEXT[]) AS c(id, j)";

/// The index rows first: their condition on the owning host fences the event rows, which
/// are inserted only for the tasks whose row was updated. Returns those tasks.
const APPEND: &str = "WITH t AS (
        UPDATE tasks SET last_seq = u.last_seq, state = COALESCE(u.state, tasks.state),
            status_ts = COALESCE(u.ts, tasks.status_ts)
        FROM UNNEST($1::TEXT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[])
            AS u(id, last_seq, state, ts, host)
        WHERE tasks.id = u.id AND (u.host IS NULL OR tasks.host IS NULL OR tasks.host = u.host)
        RETURNING tasks.id
     ), e AS (
        INSERT INTO events (task_id, seq, json)
        SELECT r.task_id, r.seq, r.json
        FROM UNNEST($6::TEXT[], $7::BIGINT[], $8::TEXT[]) AS r(task_id, seq, json)
        WHERE r.task_id IN (SELECT id FROM t)
     )
     SELECT id FROM t";

const NOTIFY: &str = "SELECT pg_notify($1, p) FROM UNNEST($2::TEXT[]) AS p";

const CHECKPOINT: &str = "INSERT INTO snapshots (task_id, seq, json)
     SELECT * FROM UNNEST($1::TEXT[], $2::BIGINT[], $3::TEXT[])
     ON CONFLICT (task_id) DO UPDATE SET seq = EXCLUDED.seq, json = EXCLUDED.json";

#[allow(
    clippy::too_many_lines,
    reason = "one transaction: its statements in the order they run, each with the arrays it binds"
)]
pub(super) async fn write_in(
    client: &Object,
    batch: &[Write],
    progress: &mut HashMap<String, Progress>,
) -> Result<(), StoreError> {
    let plan = Plan::of(batch)?;
    let unseen: Vec<&str> = plan
        .updates
        .iter()
        .map(|u| u.id)
        .filter(|id| !progress.contains_key(*id))
        .collect();
    // Prepared once per connection (concurrently on a fresh one).
    let (measure, create, append, notify) = futures::try_join!(
        client.prepare_cached(MEASURE),
        client.prepare_cached(CREATE),
        client.prepare_cached(APPEND),
        client.prepare_cached(NOTIFY),
    )?;
    let hosts: Vec<Option<&str>> = plan.updates.iter().map(|u| u.host).collect();
    let ids: Vec<&str> = plan.updates.iter().map(|u| u.id).collect();
    let lasts: Vec<i64> = plan.updates.iter().map(|u| u.last_seq).collect();
    let states: Vec<Option<&str>> = plan.updates.iter().map(|u| u.state).collect();
    let stamps: Vec<Option<&str>> = plan.updates.iter().map(|u| u.ts).collect();
    let payloads = wake_payloads(&plan.last);

    // Step 1, pipelined. Each statement's future is built (and polled) only when it has
    // rows to write; the server runs them in the order polled.
    let begin = client.batch_execute("BEGIN");
    let measured = async {
        if unseen.is_empty() {
            return Ok(Vec::new());
        }
        client.query(&measure, &[&unseen]).await
    };
    let created = async {
        if plan.c_id.is_empty() {
            return Ok(0);
        }
        client
            .execute(
                &create,
                &[
                    &plan.c_id,
                    &plan.c_context,
                    &plan.c_state,
                    &plan.c_ts,
                    &plan.c_owner,
                    &plan.c_host,
                    &plan.c_snapshot,
                    &plan.c_first,
                ],
            )
            .await
    };
    let appended = async {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        client
            .query(
                &append,
                &[
                    &ids,
                    &lasts,
                    &states,
                    &stamps,
                    &hosts,
                    &plan.e_task,
                    &plan.e_seq,
                    &plan.e_json,
                ],
            )
            .await
    };
    let notify_args: [&(dyn ToSql + Sync); 2] = [&EVENTS_CHANNEL, &payloads];
    let woken = client.execute(&notify, &notify_args);
    let (begun, measured, created, appended, woken) =
        futures::join!(begin, measured, created, appended, woken);
    // The first error in the order sent is the cause; the later ones follow from it.
    begun?;
    let measured = measured?;
    if let Err(e) = created {
        // Any of the three inserts may meet the existing task first.
        return Err(if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
            StoreError::Exists(first_duplicate(client, &plan.c_id).await)
        } else {
            e.into()
        });
    }
    let appended = appended?;
    woken?;
    fenced(client, &ids, &appended).await?;

    // Step 2: checkpoint progress, and which tasks are due.
    for row in &measured {
        progress.insert(
            col::<String>(row, "snapshots", 0)?,
            Progress::measured(
                unsigned::<i64>(row, "snapshots", 1)? as usize,
                unsigned::<i64>(row, "events", 2)? as usize,
                unsigned::<i64>(row, "events", 3)? as usize,
            ),
        );
    }
    for (id, snap) in plan.c_id.iter().zip(&plan.c_snapshot) {
        progress.insert(id.to_string(), Progress::fresh(snap.len()));
    }
    let mut due: Vec<&str> = Vec::new();
    let mut ended: Vec<&str> = Vec::new();
    for u in &plan.updates {
        let p = progress
            .entry(u.id.to_string())
            .or_insert_with(|| Progress::fresh(0));
        // The rule of the SQLite store: at state changes and doubling sizes, never for a
        // few large events (long lines of output).
        if p.appended(u.rows, u.bytes, u.checkpoint, u.ended) {
            due.push(u.id);
        }
        if u.ended {
            ended.push(u.id);
        }
    }

    // Steps 3 and 4.
    if due.is_empty() {
        client.batch_execute("COMMIT").await?;
    } else {
        let load_sql = format!("{} WHERE t.id = ANY($1)", read::LOAD);
        let (load, upsert) = futures::try_join!(
            client.prepare_cached(&load_sql),
            client.prepare_cached(CHECKPOINT),
        )?;
        let rows = client.query(&load, &[&due]).await?;
        let (mut c_id, mut c_seq, mut c_json) = (Vec::new(), Vec::new(), Vec::new());
        for row in &rows {
            let snap = read::snapshot(row)?;
            c_json.push(serde_json::to_string(&snap.task)?);
            c_seq.push(i64::try_from(snap.last_seq).unwrap_or(i64::MAX));
            c_id.push(snap.task.id);
        }
        // Sent together: when the checkpoints fail, the server ends the aborted
        // transaction's COMMIT as a ROLLBACK, and the failure is returned below.
        let upsert_args: [&(dyn ToSql + Sync); 3] = [&c_id, &c_seq, &c_json];
        let (written, committed) = futures::join!(
            client.execute(&upsert, &upsert_args),
            client.batch_execute("COMMIT"),
        );
        written?;
        committed?;
        for (id, json) in c_id.iter().zip(&c_json) {
            match progress.get_mut(id) {
                Some(p) => p.checkpointed(json.len()),
                None => {
                    progress.insert(id.clone(), Progress::fresh(json.len()));
                }
            }
        }
    }
    for id in ended {
        progress.remove(id);
    }
    Ok(())
}

/// The error for the first task of `ids` the append statement did not update (`updated`):
/// another host owns it, or it does not exist. Ok when it updated them all.
async fn fenced(
    client: &Object,
    ids: &[&str],
    updated: &[tokio_postgres::Row],
) -> Result<(), StoreError> {
    if updated.len() == ids.len() {
        return Ok(());
    }
    let done: Vec<String> = updated
        .iter()
        .map(|r| col::<String>(r, "tasks", 0))
        .collect::<Result<_, _>>()?;
    let Some(missing) = ids.iter().find(|id| !done.iter().any(|d| d == *id)) else {
        return Ok(());
    };
    // The transaction is aborted by nothing so far: the owner is read in it.
    let owner = client
        .query_opt("SELECT host FROM tasks WHERE id = $1", &[missing])
        .await?;
    Err(match owner {
        Some(row) => StoreError::NotOwner {
            task: missing.to_string(),
            host: col::<Option<String>>(&row, "tasks", 0)?.unwrap_or_default(),
        },
        None => StoreError::NotFound(missing.to_string()),
    })
}

/// The first of `ids` that already exists (after a unique violation on creating them).
async fn first_duplicate(client: &Object, ids: &[&str]) -> String {
    // The transaction is aborted: this read runs after rolling it back.
    let _ = client.batch_execute("ROLLBACK").await;
    let found = client
        .query_opt("SELECT id FROM tasks WHERE id = ANY($1) LIMIT 1", &[&ids])
        .await;
    match found {
        Ok(Some(row)) => row.try_get(0).unwrap_or_default(),
        // Two creations of one id in one batch: the first id stands for them.
        _ => ids.first().map(|s| s.to_string()).unwrap_or_default(),
    }
}
