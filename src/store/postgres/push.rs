//! [`PushStore`] on PostgreSQL, shared by every host on the database: deliveries are
//! claimed (see [`crate::store::push`]). A claim is two columns of the config's row
//! (`claimed_by`, `claimed_until`), taken and checked by single `UPDATE`s, so a claim needs no
//! transaction held open across a webhook request; the scan for due work locks the rows it
//! takes with `FOR UPDATE SKIP LOCKED`, so hosts scanning at once take different configs.
//! Storing a config sends a wake-up on [`PUSH_CHANNEL`] with its commit, so every host learns
//! of it (and the one that can claim it starts delivering) at once.

use async_trait::async_trait;
use tokio_postgres::Row;

use super::listen::PUSH_CHANNEL;
use super::row::{col, unsigned};
use super::PgStore;
use crate::store::push::{Claim, DeadLetter, PushRecord, PushStore, PushWake};
use crate::store::StoreError;

const COLUMNS: &str = "task_id, id, url, token, auth_scheme, auth_credentials, version, \
                       delivered_seq, attempts, next_at_ms, last_error";

const WHAT: &str = "push_configs";

/// `claimed_until` for a claim taken or renewed now ($n: the lease in seconds).
fn until(n: usize) -> String {
    format!("clock_timestamp() + make_interval(secs => ${n})")
}

fn record(r: &Row) -> Result<PushRecord, StoreError> {
    Ok(PushRecord {
        task_id: col(r, WHAT, 0)?,
        id: col(r, WHAT, 1)?,
        url: col(r, WHAT, 2)?,
        token: col(r, WHAT, 3)?,
        auth_scheme: col(r, WHAT, 4)?,
        auth_credentials: col(r, WHAT, 5)?,
        version: col(r, WHAT, 6)?,
        delivered_seq: unsigned(r, WHAT, 7)?,
        attempts: unsigned(r, WHAT, 8)?,
        next_at_ms: unsigned(r, WHAT, 9)?,
        last_error: col(r, WHAT, 10)?,
    })
}

fn dead(r: &Row) -> Result<DeadLetter, StoreError> {
    const WHAT: &str = "push_dead_letters";
    Ok(DeadLetter {
        task_id: col(r, WHAT, 0)?,
        config_id: col(r, WHAT, 1)?,
        seq: unsigned(r, WHAT, 2)?,
        attempts: unsigned(r, WHAT, 3)?,
        error: col(r, WHAT, 4)?,
    })
}

/// Numbers as the BIGINT columns hold them (values past i64::MAX are not written: the
/// counts and sequence numbers never get there, and a time in ms there is 292 million years
/// away).
fn big(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl PgStore {
    async fn push_query(
        &self,
        sql: &str,
        args: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<PushRecord>, StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(sql).await?;
        c.query(&stmt, args).await?.iter().map(record).collect()
    }
}

#[async_trait]
impl PushStore for PgStore {
    async fn put_push(&self, rec: &PushRecord) -> Result<(), StoreError> {
        // The wake-up goes with the row's commit (one statement: its own transaction).
        self.exec(
            &format!(
                "WITH stored AS (
                    INSERT INTO push_configs ({COLUMNS})
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                    ON CONFLICT (task_id, id) DO UPDATE SET url = $3, token = $4,
                       auth_scheme = $5, auth_credentials = $6, version = $7, delivered_seq = $8,
                       attempts = $9, next_at_ms = $10, last_error = $11,
                       claimed_by = NULL, claimed_until = NULL
                    RETURNING task_id)
                 SELECT pg_notify($12, task_id) FROM stored"
            ),
            &[
                &rec.task_id,
                &rec.id,
                &rec.url,
                &rec.token,
                &rec.auth_scheme,
                &rec.auth_credentials,
                &rec.version,
                &big(rec.delivered_seq),
                &i64::from(rec.attempts),
                &big(rec.next_at_ms),
                &rec.last_error,
                &PUSH_CHANNEL,
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
                &big(delivered_seq),
                &i64::from(attempts),
                &big(next_at_ms),
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
                &big(d.seq),
                &i64::from(d.attempts),
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
        rows.iter().map(dead).collect()
    }

    fn shared(&self) -> bool {
        true
    }

    fn push_wakes(&self) -> Option<tokio::sync::broadcast::Receiver<PushWake>> {
        let rx = self.listener.subscribe_all()?;
        self.listener.start();
        Some(rx)
    }

    async fn claim_push(
        &self,
        task_id: &str,
        id: &str,
        claim: &Claim,
    ) -> Result<Option<PushRecord>, StoreError> {
        // One UPDATE: its row lock orders hosts claiming at once, and the condition is checked
        // again on the row as the other committed it.
        Ok(self
            .push_query(
                &format!(
                    "UPDATE push_configs SET claimed_by = $3, claimed_until = {}
                     WHERE task_id = $1 AND id = $2 AND (claimed_by IS NULL OR claimed_by = $3
                        OR claimed_until < clock_timestamp())
                     RETURNING {COLUMNS}",
                    until(4)
                ),
                &[&task_id, &id, &claim.holder, &claim.lease.as_secs_f64()],
            )
            .await?
            .pop())
    }

    async fn claim_due_push(
        &self,
        claim: &Claim,
        now_ms: u64,
        limit: usize,
    ) -> Result<Vec<PushRecord>, StoreError> {
        // The candidates are locked as they are chosen, skipping rows another host's scan or
        // claim has locked: two hosts scanning at once take different configs.
        self.push_query(
            &format!(
                "UPDATE push_configs p SET claimed_by = $1, claimed_until = {}
                 FROM (SELECT c.task_id, c.id FROM push_configs c
                       JOIN tasks t ON t.id = c.task_id COLLATE \"C\"
                       WHERE c.delivered_seq < t.last_seq AND c.next_at_ms <= $3
                         AND (c.claimed_until IS NULL OR c.claimed_until < clock_timestamp())
                       ORDER BY c.next_at_ms, c.task_id, c.id
                       LIMIT $4
                       FOR UPDATE OF c SKIP LOCKED) due
                 WHERE p.task_id = due.task_id AND p.id = due.id
                 RETURNING {}",
                until(2),
                COLUMNS
                    .split(", ")
                    .map(|c| format!("p.{}", c.trim()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            &[
                &claim.holder,
                &claim.lease.as_secs_f64(),
                &big(now_ms),
                &big(limit as u64),
            ],
        )
        .await
    }

    async fn save_claimed_push(&self, rec: &PushRecord, claim: &Claim) -> Result<bool, StoreError> {
        // Fenced by the holder: once another host has taken the claim over (ours expired),
        // our progress is not written over its own.
        let n = self
            .exec(
                &format!(
                    "UPDATE push_configs SET delivered_seq = $3, attempts = $4, next_at_ms = $5,
                        last_error = $6, claimed_until = {}
                     WHERE task_id = $1 AND id = $2 AND claimed_by = $7",
                    until(8)
                ),
                &[
                    &rec.task_id,
                    &rec.id,
                    &big(rec.delivered_seq),
                    &i64::from(rec.attempts),
                    &big(rec.next_at_ms),
                    &rec.last_error,
                    &claim.holder,
                    &claim.lease.as_secs_f64(),
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn release_all_push(&self, claim: &Claim) -> Result<u64, StoreError> {
        self.exec(
            "UPDATE push_configs SET claimed_by = NULL, claimed_until = NULL
             WHERE claimed_by = $1",
            &[&claim.holder],
        )
        .await
    }

    async fn release_push(&self, task_id: &str, id: &str, claim: &Claim) -> Result<(), StoreError> {
        self.exec(
            "UPDATE push_configs SET claimed_by = NULL, claimed_until = NULL
             WHERE task_id = $1 AND id = $2 AND claimed_by = $3",
            &[&task_id, &id, &claim.holder],
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
