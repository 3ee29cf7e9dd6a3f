//! [`PushStore`] on SQLite.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};

use super::{int, opt_text, text, SqliteStore};
use crate::store::push::{DeadLetter, PushRecord, PushStore};
use crate::store::StoreError;

const COLUMNS: &str = "task_id, id, url, token, auth_scheme, auth_credentials, version, \
                       delivered_seq, attempts, next_at_ms, last_error";

fn record(r: &Row<'_>) -> rusqlite::Result<PushRecord> {
    Ok(PushRecord {
        task_id: r.get(0)?,
        id: r.get(1)?,
        url: r.get(2)?,
        token: r.get(3)?,
        auth_scheme: r.get(4)?,
        auth_credentials: r.get(5)?,
        version: r.get(6)?,
        delivered_seq: r.get::<_, i64>(7)? as u64,
        attempts: r.get::<_, i64>(8)? as u32,
        next_at_ms: r.get::<_, i64>(9)? as u64,
        last_error: r.get(10)?,
    })
}

#[async_trait]
impl PushStore for SqliteStore {
    async fn put_push(&self, rec: &PushRecord) -> Result<(), StoreError> {
        self.exec(
            "INSERT OR REPLACE INTO push_configs (task_id, id, url, token, auth_scheme, \
             auth_credentials, version, delivered_seq, attempts, next_at_ms, last_error)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            vec![
                text(&rec.task_id),
                text(&rec.id),
                text(&rec.url),
                opt_text(rec.token.as_deref()),
                opt_text(rec.auth_scheme.as_deref()),
                opt_text(rec.auth_credentials.as_deref()),
                text(&rec.version),
                int(rec.delivered_seq),
                int(rec.attempts as u64),
                int(rec.next_at_ms),
                opt_text(rec.last_error.as_deref()),
            ],
        )
        .await
    }

    async fn get_push(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, StoreError> {
        let (t, i) = (task_id.to_string(), id.to_string());
        self.read(move |c| {
            c.query_row(
                &format!("SELECT {COLUMNS} FROM push_configs WHERE task_id = ?1 AND id = ?2"),
                params![t, i],
                record,
            )
            .optional()
            .map_err(StoreError::from)
        })
        .await
    }

    async fn list_push(&self, task_id: &str) -> Result<Vec<PushRecord>, StoreError> {
        let t = task_id.to_string();
        self.read(move |c| {
            let mut st = c
                .prepare(&format!(
                    "SELECT {COLUMNS} FROM push_configs WHERE task_id = ?1 ORDER BY id"
                ))
                .map_err(StoreError::from)?;
            let rows = st.query_map([t], record).map_err(StoreError::from)?;
            rows.collect::<Result<_, _>>().map_err(StoreError::from)
        })
        .await
    }

    async fn all_push(&self) -> Result<Vec<PushRecord>, StoreError> {
        self.read(|c| {
            let mut st = c
                .prepare(&format!("SELECT {COLUMNS} FROM push_configs"))
                .map_err(StoreError::from)?;
            let rows = st.query_map([], record).map_err(StoreError::from)?;
            rows.collect::<Result<_, _>>().map_err(StoreError::from)
        })
        .await
    }

    async fn delete_push(&self, task_id: &str, id: &str) -> Result<(), StoreError> {
        self.exec(
            "DELETE FROM push_configs WHERE task_id = ?1 AND id = ?2",
            vec![text(task_id), text(id)],
        )
        .await
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
        self.exec(
            "UPDATE push_configs SET delivered_seq = ?3, attempts = ?4, next_at_ms = ?5, \
             last_error = ?6 WHERE task_id = ?1 AND id = ?2",
            vec![
                text(task_id),
                text(id),
                int(delivered_seq),
                int(attempts as u64),
                int(next_at_ms),
                opt_text(last_error),
            ],
        )
        .await
    }

    async fn dead_letter(&self, d: &DeadLetter) -> Result<(), StoreError> {
        self.exec(
            "INSERT INTO push_dead_letters (task_id, config_id, seq, attempts, error, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            vec![
                text(&d.task_id),
                text(&d.config_id),
                int(d.seq),
                int(d.attempts as u64),
                text(&d.error),
                text(&crate::task::now_timestamp()),
            ],
        )
        .await
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        self.read(|c| {
            let mut st = c
                .prepare(
                    "SELECT task_id, config_id, seq, attempts, error FROM push_dead_letters ORDER BY rowid",
                )
                .map_err(StoreError::from)?;
            let rows = st
                .query_map([], |r| {
                    Ok(DeadLetter {
                        task_id: r.get(0)?,
                        config_id: r.get(1)?,
                        seq: r.get::<_, i64>(2)? as u64,
                        attempts: r.get::<_, i64>(3)? as u32,
                        error: r.get(4)?,
                    })
                })
                .map_err(StoreError::from)?;
            rows.collect::<Result<_, _>>().map_err(StoreError::from)
        })
        .await
    }
}
