//! The in-memory store: tasks and logs in maps, gone when the host stops.
//!
//! In the shape every store follows ([`crate::store`]), its checkpoint is the task itself,
//! kept current by applying each event in place as it is appended; the log is a vector of
//! shared events. An append costs the same whatever the task's length.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use base64::Engine as _;

use super::{
    ContextRecord, DeadLetter, ListPage, ListQuery, PushRecord, PushStore, Snapshot, StoreError,
    TaskStore, TerminalTask,
};
use crate::protocol::v1::{StreamResponse, Task};
use crate::task::{apply, LoggedEvent, TaskEvent};

struct Record {
    task: Task,
    log: Vec<Arc<LoggedEvent>>,
    owner: Option<String>,
}

/// Tasks in memory. Each task has its own lock, so appends to different tasks do not wait on
/// each other beyond a read lock of the index.
#[derive(Default)]
pub struct MemoryStore {
    tasks: RwLock<HashMap<String, Arc<Mutex<Record>>>>,
    contexts: Mutex<HashMap<String, ContextRecord>>,
    processes: Mutex<HashMap<String, (u32, u64)>>,
    push: Mutex<Vec<PushRecord>>,
    dead: Mutex<Vec<DeadLetter>>,
}

impl MemoryStore {
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn record(&self, id: &str) -> Result<Option<Arc<Mutex<Record>>>, StoreError> {
        let map = self.tasks.read().map_err(|_| poisoned())?;
        Ok(map.get(id).cloned())
    }
}

fn poisoned() -> StoreError {
    StoreError::Poisoned
}

/// When the task was created: the timestamp of its first history message's task snapshot,
/// approximated by the status timestamp (tasks are created submitted).
fn first_timestamp(t: &Task) -> String {
    t.status.timestamp.clone().unwrap_or_default()
}

/// Sort key: newest status timestamp first, then id (descending) to break ties.
pub(crate) fn key(t: &Task) -> (String, String) {
    (t.status.timestamp.clone().unwrap_or_default(), t.id.clone())
}

pub(crate) fn encode_token(k: &(String, String)) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{}\n{}", k.0, k.1))
}

pub(crate) fn decode_token(token: &str) -> Result<(String, String), StoreError> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| StoreError::BadPageToken)?;
    let s = String::from_utf8(bytes).map_err(|_| StoreError::BadPageToken)?;
    let (ts, id) = s.split_once('\n').ok_or(StoreError::BadPageToken)?;
    Ok((ts.to_string(), id.to_string()))
}

#[async_trait]
impl TaskStore for MemoryStore {
    fn durable(&self) -> bool {
        false
    }

    async fn create_owned(&self, task: Task, owner: Option<String>) -> Result<u64, StoreError> {
        let mut map = self.tasks.write().map_err(|_| poisoned())?;
        if map.contains_key(&task.id) {
            return Err(StoreError::Exists(task.id));
        }
        let first = Arc::new(LoggedEvent::new(
            1,
            TaskEvent::Stream(StreamResponse::Task(task.clone())),
        ));
        map.insert(
            task.id.clone(),
            Arc::new(Mutex::new(Record {
                task,
                log: vec![first],
                owner,
            })),
        );
        Ok(1)
    }

    async fn append(&self, task_id: &str, events: Vec<TaskEvent>) -> Result<u64, StoreError> {
        let rec = self
            .record(task_id)?
            .ok_or_else(|| StoreError::NotFound(task_id.to_string()))?;
        let mut rec = rec.lock().map_err(|_| poisoned())?;
        let mut seq = rec.log.len() as u64;
        for ev in events {
            apply(&mut rec.task, &ev);
            seq += 1;
            rec.log.push(Arc::new(LoggedEvent::new(seq, ev)));
        }
        Ok(seq)
    }

    async fn get(&self, task_id: &str) -> Result<Option<Snapshot>, StoreError> {
        let Some(rec) = self.record(task_id)? else {
            return Ok(None);
        };
        let rec = rec.lock().map_err(|_| poisoned())?;
        Ok(Some(Snapshot {
            task: rec.task.clone(),
            last_seq: rec.log.len() as u64,
            owner: rec.owner.clone(),
        }))
    }

    async fn events_after(
        &self,
        task_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Arc<LoggedEvent>>, StoreError> {
        let rec = self
            .record(task_id)?
            .ok_or_else(|| StoreError::NotFound(task_id.to_string()))?;
        let rec = rec.lock().map_err(|_| poisoned())?;
        // Sequence n is at index n - 1.
        let start = (after as usize).min(rec.log.len());
        let end = start.saturating_add(limit).min(rec.log.len());
        Ok(rec.log[start..end].to_vec())
    }

    async fn list(&self, query: &ListQuery, with_artifacts: bool) -> Result<ListPage, StoreError> {
        let after_key = match &query.page_token {
            Some(t) if !t.is_empty() => Some(decode_token(t)?),
            _ => None,
        };
        let records: Vec<Arc<Mutex<Record>>> = {
            let map = self.tasks.read().map_err(|_| poisoned())?;
            map.values().cloned().collect()
        };
        let mut matching: Vec<((String, String), Arc<Mutex<Record>>)> = Vec::new();
        for rec in records {
            let r = rec.lock().map_err(|_| poisoned())?;
            let t = &r.task;
            if let (Some(o), Some(want)) = (&r.owner, &query.owner) {
                if o != want {
                    continue;
                }
            }
            if query
                .context_id
                .as_ref()
                .is_some_and(|c| *c != t.context_id)
            {
                continue;
            }
            if query.state.is_some_and(|s| s != t.status.state) {
                continue;
            }
            if let Some(after) = &query.status_after {
                if t.status.timestamp.as_deref().unwrap_or("") < after.as_str() {
                    continue;
                }
            }
            let k = key(t);
            drop(r);
            matching.push((k, rec));
        }
        matching.sort_by(|a, b| b.0.cmp(&a.0));
        let total_size = matching.len();
        let start = match &after_key {
            Some(k) => matching
                .iter()
                .position(|(mk, _)| mk < k)
                .unwrap_or(total_size),
            None => 0,
        };
        let end = (start + query.page_size).min(total_size);
        let mut tasks = Vec::with_capacity(end - start);
        for (_, rec) in &matching[start..end] {
            let r = rec.lock().map_err(|_| poisoned())?;
            let mut t = Task {
                id: r.task.id.clone(),
                context_id: r.task.context_id.clone(),
                status: r.task.status.clone(),
                artifacts: Vec::new(),
                history: r.task.history.clone(),
                metadata: r.task.metadata.clone(),
            };
            if with_artifacts {
                t.artifacts = r.task.artifacts.clone();
            }
            tasks.push(t);
        }
        let next_page_token = if end < total_size {
            matching[end - 1..end]
                .first()
                .map(|(k, _)| encode_token(k))
                .unwrap_or_default()
        } else {
            String::new()
        };
        Ok(ListPage {
            tasks,
            next_page_token,
            total_size,
        })
    }

    async fn unfinished(&self) -> Result<Vec<Snapshot>, StoreError> {
        let records: Vec<Arc<Mutex<Record>>> = {
            let map = self.tasks.read().map_err(|_| poisoned())?;
            map.values().cloned().collect()
        };
        let mut out = Vec::new();
        for rec in records {
            let r = rec.lock().map_err(|_| poisoned())?;
            if !r.task.status.state.is_terminal() {
                out.push(Snapshot {
                    task: r.task.clone(),
                    last_seq: r.log.len() as u64,
                    owner: r.owner.clone(),
                });
            }
        }
        out.sort_by_key(|s| first_timestamp(&s.task));
        Ok(out)
    }

    async fn put_context(&self, ctx: &ContextRecord) -> Result<(), StoreError> {
        let mut m = self.contexts.lock().map_err(|_| poisoned())?;
        m.insert(ctx.context_id.clone(), ctx.clone());
        Ok(())
    }

    async fn contexts(&self) -> Result<Vec<ContextRecord>, StoreError> {
        let m = self.contexts.lock().map_err(|_| poisoned())?;
        Ok(m.values().cloned().collect())
    }

    async fn record_process(
        &self,
        task_id: &str,
        pgid: u32,
        start_ticks: u64,
    ) -> Result<(), StoreError> {
        let mut m = self.processes.lock().map_err(|_| poisoned())?;
        m.insert(task_id.to_string(), (pgid, start_ticks));
        Ok(())
    }

    async fn forget_process(&self, task_id: &str) -> Result<(), StoreError> {
        let mut m = self.processes.lock().map_err(|_| poisoned())?;
        m.remove(task_id);
        Ok(())
    }

    async fn recorded_processes(&self) -> Result<Vec<(String, u32, u64)>, StoreError> {
        let m = self.processes.lock().map_err(|_| poisoned())?;
        Ok(m.iter().map(|(k, (p, s))| (k.clone(), *p, *s)).collect())
    }

    async fn terminal_tasks(&self) -> Result<Vec<TerminalTask>, StoreError> {
        let records: Vec<Arc<Mutex<Record>>> = {
            let map = self.tasks.read().map_err(|_| poisoned())?;
            map.values().cloned().collect()
        };
        let mut out = Vec::new();
        for rec in records {
            let r = rec.lock().map_err(|_| poisoned())?;
            if r.task.status.state.is_terminal() {
                out.push(TerminalTask {
                    id: r.task.id.clone(),
                    context_id: r.task.context_id.clone(),
                    status_ts: r.task.status.timestamp.clone().unwrap_or_default(),
                });
            }
        }
        out.sort_by(|a, b| (&b.status_ts, &b.id).cmp(&(&a.status_ts, &a.id)));
        Ok(out)
    }

    async fn delete_terminal(&self, ids: &[String]) -> Result<Vec<String>, StoreError> {
        let mut deleted = Vec::new();
        let mut contexts = Vec::new();
        {
            let mut map = self.tasks.write().map_err(|_| poisoned())?;
            for id in ids {
                let Some(rec) = map.get(id) else { continue };
                let (terminal, ctx) = {
                    let r = rec.lock().map_err(|_| poisoned())?;
                    (r.task.status.state.is_terminal(), r.task.context_id.clone())
                };
                if terminal {
                    map.remove(id);
                    deleted.push(id.clone());
                    contexts.push(ctx);
                }
            }
            let mut in_use = std::collections::HashSet::new();
            for rec in map.values() {
                in_use.insert(rec.lock().map_err(|_| poisoned())?.task.context_id.clone());
            }
            contexts.retain(|c| !in_use.contains(c));
        }
        let gone = |t: &String| deleted.contains(t);
        self.processes
            .lock()
            .map_err(|_| poisoned())?
            .retain(|k, _| !gone(k));
        self.push
            .lock()
            .map_err(|_| poisoned())?
            .retain(|p| !gone(&p.task_id));
        self.dead
            .lock()
            .map_err(|_| poisoned())?
            .retain(|d| !gone(&d.task_id));
        let mut ctx = self.contexts.lock().map_err(|_| poisoned())?;
        for c in contexts {
            ctx.remove(&c);
        }
        Ok(deleted)
    }
}

#[async_trait]
impl PushStore for MemoryStore {
    async fn put_push(&self, rec: &PushRecord) -> Result<(), StoreError> {
        let mut v = self.push.lock().map_err(|_| poisoned())?;
        v.retain(|r| !(r.task_id == rec.task_id && r.id == rec.id));
        v.push(rec.clone());
        Ok(())
    }

    async fn get_push(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, StoreError> {
        let v = self.push.lock().map_err(|_| poisoned())?;
        Ok(v.iter()
            .find(|r| r.task_id == task_id && r.id == id)
            .cloned())
    }

    async fn list_push(&self, task_id: &str) -> Result<Vec<PushRecord>, StoreError> {
        let v = self.push.lock().map_err(|_| poisoned())?;
        let mut out: Vec<PushRecord> = v.iter().filter(|r| r.task_id == task_id).cloned().collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn all_push(&self) -> Result<Vec<PushRecord>, StoreError> {
        Ok(self.push.lock().map_err(|_| poisoned())?.clone())
    }

    async fn delete_push(&self, task_id: &str, id: &str) -> Result<(), StoreError> {
        let mut v = self.push.lock().map_err(|_| poisoned())?;
        v.retain(|r| !(r.task_id == task_id && r.id == id));
        Ok(())
    }

    async fn push_progress(
        &self,
        task_id: &str,
        id: &str,
        delivered_seq: u64,
        attempts: u32,
        next_at_ms: u64,
        last_error: Option<&str>,
    ) -> Result<(), StoreError> {
        let mut v = self.push.lock().map_err(|_| poisoned())?;
        if let Some(r) = v.iter_mut().find(|r| r.task_id == task_id && r.id == id) {
            r.delivered_seq = delivered_seq;
            r.attempts = attempts;
            r.next_at_ms = next_at_ms;
            r.last_error = last_error.map(str::to_string);
        }
        Ok(())
    }

    async fn dead_letter(&self, dead: &DeadLetter) -> Result<(), StoreError> {
        self.dead.lock().map_err(|_| poisoned())?.push(dead.clone());
        Ok(())
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        Ok(self.dead.lock().map_err(|_| poisoned())?.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{TaskState, TaskStatus, TaskStatusUpdateEvent};

    fn task(id: &str, ctx: &str, ts: &str) -> Task {
        Task {
            id: id.into(),
            context_id: ctx.into(),
            status: TaskStatus {
                state: TaskState::Submitted,
                message: None,
                timestamp: Some(ts.into()),
            },
            ..Task::default()
        }
    }

    #[tokio::test]
    async fn log_and_snapshot_stay_in_step() {
        let s = MemoryStore::new();
        assert_eq!(
            s.create(task("t1", "c", "2026-01-01T00:00:00.000Z"))
                .await
                .unwrap(),
            1
        );
        let upd = TaskEvent::Stream(StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t1".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Working,
                ..TaskStatus::default()
            },
            metadata: None,
        }));
        assert_eq!(s.append("t1", vec![upd.clone(), upd]).await.unwrap(), 3);
        let snap = s.get("t1").await.unwrap().unwrap();
        assert_eq!(snap.last_seq, 3);
        assert_eq!(snap.task.status.state, TaskState::Working);
        let evs = s.events_after("t1", 1, 10).await.unwrap();
        assert_eq!(evs.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
        assert!(s.events_after("t1", 3, 10).await.unwrap().is_empty());
        assert!(s.events_after("t1", 99, 10).await.unwrap().is_empty());
        assert!(matches!(
            s.append("nope", vec![]).await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            s.create(task("t1", "c", "x")).await,
            Err(StoreError::Exists(_))
        ));
    }
}
