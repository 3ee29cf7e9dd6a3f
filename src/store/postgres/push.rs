//! [`PushStore`] on PostgreSQL.

use async_trait::async_trait;
use tokio_postgres::Row;

use super::PgStore;
use crate::store::push::{DeadLetter, PushRecord, PushStore};
use crate::store::StoreError;

const COLUMNS: &str = "task_id, id, url, token, auth_scheme, auth_credentials, version, \
                       delivered_seq, attempts, next_at_ms, last_error";

fn record(r: &Row) -> PushRecord {
    PushRecord {
        task_id: r.get(0),
        id: r.get(1),
        url: r.get(2),
        token: r.get(3),
        auth_scheme: r.get(4),
        auth_credentials: r.get(5),
        version: r.get(6),
        delivered_seq: r.get::<_, i64>(7) as u64,
        attempts: r.get::<_, i64>(8) as u32,
        next_at_ms: r.get::<_, i64>(9) as u64,
        last_error: r.get(10),
    }
}

impl PgStore {
    async fn push_query(
        &self,
        sql: &str,
        args: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<PushRecord>, StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(sql).await?;
        Ok(c.query(&stmt, args).await?.iter().map(record).collect())
    }
}

#[async_trait]
impl PushStore for PgStore {
    async fn put_push(&self, rec: &PushRecord) -> Result<(), StoreError> {
        self.exec(
            &format!(
                "INSERT INTO push_configs ({COLUMNS})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                 ON CONFLICT (task_id, id) DO UPDATE SET url = $3, token = $4,
                    auth_scheme = $5, auth_credentials = $6, version = $7, delivered_seq = $8,
                    attempts = $9, next_at_ms = $10, last_error = $11"
            ),
            &[
                &rec.task_id,
                &rec.id,
                &rec.url,
                &rec.token,
                &rec.auth_scheme,
                &rec.auth_credentials,
                &rec.version,
                &(rec.delivered_seq as i64),
                &(rec.attempts as i64),
                &(rec.next_at_ms as i64),
                &rec.last_error,
            ],
        )
        .await?;
        Ok(())
    }

    async fn get_push(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, StoreError> {
        Ok(self
            .push_query(
                &format!("SELECT {COLUMNS} FROM push_configs WHERE task_id = $1 AND id = $2"),
                &[&task_id, &id],
            )
            .await?
            .pop())
    }

    async fn list_push(&self, task_id: &str) -> Result<Vec<PushRecord>, StoreError> {
        self.push_query(
            &format!("SELECT {COLUMNS} FROM push_configs WHERE task_id = $1 ORDER BY id"),
            &[&task_id],
        )
        .await
    }

    async fn all_push(&self) -> Result<Vec<PushRecord>, StoreError> {
        self.push_query(
            &format!("SELECT {COLUMNS} FROM push_configs ORDER BY task_id, id"),
            &[],
        )
        .await
    }

    async fn delete_push(&self, task_id: &str, id: &str) -> Result<(), StoreError> {
        self.exec(
            "DELETE FROM push_configs WHERE task_id = $1 AND id = $2",
            &[&task_id, &id],
        )
        .await?;
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
        self.exec(
            "UPDATE push_configs SET delivered_seq = $3, attempts = $4, next_at_ms = $5,
                last_error = $6 WHERE task_id = $1 AND id = $2",
            &[
                &task_id,
                &id,
                &(delivered_seq as i64),
                &(attempts as i64),
                &(next_at_ms as i64),
                &last_error,
            ],
        )
        .await?;
        Ok(())
    }

    async fn dead_letter(&self, d: &DeadLetter) -> Result<(), StoreError> {
        self.exec(
            "INSERT INTO push_dead_letters (task_id, config_id, seq, attempts, error, at)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &d.task_id,
                &d.config_id,
                &(d.seq as i64),
                &(d.attempts as i64),
                &d.error,
                &crate::task::now_timestamp(),
            ],
        )
        .await?;
        Ok(())
    }

    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError> {
        let rows = self
            .client()
            .await?
            .query(
                "SELECT task_id, config_id, seq, attempts, error FROM push_dead_letters ORDER BY n",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| DeadLetter {
                task_id: r.get(0),
                config_id: r.get(1),
                seq: r.get::<_, i64>(2) as u64,
                attempts: r.get::<_, i64>(3) as u32,
                error: r.get(4),
            })
            .collect())
    }
}
