//! The PostgreSQL store's cluster part ([`ClusterStore`]): the `hosts` table (one lease per
//! host), the host owning each task and context, and claiming a dead host's tasks. Every
//! time is the database's (`now()`), so the hosts' clocks do not matter.

use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio_postgres::Row;

use super::{read, PgStore, TERMINAL};
use crate::store::cluster::{ClusterStore, HostInfo, HostRecord, Takeover};
use crate::store::{Snapshot, StoreError};

/// The columns [`host_info`] reads.
const HOST_COLUMNS: &str = "h.id, h.address, h.machine, h.pid,
    to_char(h.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),
    h.lease_until >= now()";

fn host_info(row: &Row) -> Result<HostInfo, StoreError> {
    Ok(HostInfo {
        record: HostRecord {
            id: row.try_get(0)?,
            address: row.try_get(1)?,
            machine: row.try_get(2)?,
            pid: row.try_get::<_, i64>(3)? as u32,
        },
        started_at: row.try_get(4)?,
        live: row.try_get(5)?,
    })
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl PgStore {
    /// The unfinished tasks among `ids`, oldest first.
    async fn load_many(
        &self,
        c: &impl tokio_postgres::GenericClient,
        ids: &[String],
    ) -> Result<Vec<Snapshot>, StoreError> {
        let sql = format!(
            "{} WHERE t.id = ANY($1) ORDER BY t.created_at, t.id",
            read::LOAD
        );
        let rows = c.query(sql.as_str(), &[&ids]).await?;
        rows.iter().map(read::snapshot).collect()
    }
}

#[async_trait]
impl ClusterStore for PgStore {
    async fn register(
        &self,
        me: &HostRecord,
        lease: Duration,
        replace: bool,
    ) -> Result<(), StoreError> {
        let c = self.client().await?;
        // Taken when the row is free: no row, an expired lease, or (`replace`) a previous
        // run of this host the caller recognised.
        let taken = c
            .query_opt(
                "INSERT INTO hosts AS h (id, address, machine, pid, lease_until)
                 VALUES ($1, $2, $3, $4, now() + $5::BIGINT * interval '1 millisecond')
                 ON CONFLICT (id) DO UPDATE SET address = $2, machine = $3, pid = $4,
                    started_at = now(), heartbeat_at = now(), lease_until = EXCLUDED.lease_until
                 WHERE h.lease_until < now() OR $6
                 RETURNING h.id",
                &[
                    &me.id,
                    &me.address,
                    &me.machine,
                    &i64::from(me.pid),
                    &millis(lease),
                    &replace,
                ],
            )
            .await?;
        if taken.is_none() {
            let sql = format!("SELECT {HOST_COLUMNS} FROM hosts h WHERE h.id = $1");
            let holder = match c.query_opt(sql.as_str(), &[&me.id]).await? {
                Some(row) => host_info(&row)?,
                // Claimed and deleted meanwhile: try again.
                None => return Box::pin(self.register(me, lease, replace)).await,
            };
            return Err(StoreError::HostIdInUse(Box::new(holder)));
        }
        // Tasks and contexts written from now on are this host's.
        if self.host.set(me.id.clone()).is_err() && self.host.get() != Some(&me.id) {
            tracing::warn!(host = %me.id, "this store was registered under another host id before; keeping that one");
        }
        self.listener.start();
        Ok(())
    }

    async fn heartbeat(&self, host_id: &str, lease: Duration) -> Result<bool, StoreError> {
        let n = self
            .exec(
                "UPDATE hosts SET heartbeat_at = now(),
                    lease_until = now() + $2::BIGINT * interval '1 millisecond' WHERE id = $1",
                &[&host_id, &millis(lease)],
            )
            .await?;
        if n != 1 {
            // Another host may have taken this host's tasks over and written to them: what
            // this host remembers of them (positions, recent events) is read again from the
            // database from now on.
            self.forget_live()?;
        }
        Ok(n == 1)
    }

    async fn hold_task(&self, task_id: &str, me: &str) -> Result<bool, StoreError> {
        // A share lock of the host's row, not an update of it: a claim (FOR UPDATE) waits
        // for it or makes it wait (and it then finds the row deleted: the answer is false,
        // whatever the statement's snapshot shows of the task); starts at once do not wait
        // for each other. Each start renewing the lease instead made every task start of the
        // host update one row, one after the other, each waiting for the one before it to
        // commit: 10 ms a start with 100 tasks starting in half a second
        // (bench/log/2026-11-30-postgres-task-start.md).
        let c = self.client().await?;
        let stmt = c
            .prepare_cached(
                "WITH held AS (
                    SELECT id FROM hosts WHERE id = $2 AND lease_until > now() FOR KEY SHARE)
                 SELECT EXISTS (SELECT 1 FROM tasks t JOIN held h ON h.id = t.host
                    WHERE t.id = $1)",
            )
            .await?;
        let row = c.query_one(&stmt, &[&task_id, &me]).await?;
        Ok(row.try_get(0)?)
    }

    async fn hosts(&self) -> Result<Vec<HostInfo>, StoreError> {
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts h ORDER BY h.id");
        let rows = self.client().await?.query(sql.as_str(), &[]).await?;
        rows.iter().map(host_info).collect()
    }

    async fn task_host(&self, task_id: &str) -> Result<Option<HostInfo>, StoreError> {
        let sql = format!(
            "SELECT {HOST_COLUMNS} FROM tasks t JOIN hosts h ON h.id = t.host WHERE t.id = $1"
        );
        match self
            .client()
            .await?
            .query_opt(sql.as_str(), &[&task_id])
            .await?
        {
            Some(row) => Ok(Some(host_info(&row)?)),
            None => Ok(None),
        }
    }

    async fn context_host(&self, context_id: &str) -> Result<Option<String>, StoreError> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT host FROM contexts WHERE context_id = $1",
                &[&context_id],
            )
            .await?;
        match row {
            Some(r) => Ok(r.try_get(0)?),
            None => Ok(None),
        }
    }

    async fn set_context_host(&self, context_id: &str, host: &str) -> Result<(), StoreError> {
        self.exec(
            "UPDATE contexts SET host = $2 WHERE context_id = $1",
            &[&context_id, &host],
        )
        .await?;
        Ok(())
    }

    async fn claim_own(&self, me: &str) -> Result<Vec<Snapshot>, StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        let rows = tx
            .query(
                &format!(
                    "UPDATE tasks SET host = $1
                     WHERE (host = $1 OR host IS NULL) AND state NOT IN {TERMINAL}
                     RETURNING id"
                ),
                &[&me],
            )
            .await?;
        let ids = rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<Vec<String>, _>>()?;
        let tasks = self.load_many(&*tx, &ids).await?;
        tx.commit().await?;
        Ok(tasks)
    }

    async fn claim_expired(&self, me: &str) -> Result<Option<Takeover>, StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        // SKIP LOCKED: of two hosts claiming at once, one gets the row, the other skips it
        // (and finds it gone next time).
        let sql = format!(
            "SELECT {HOST_COLUMNS} FROM hosts h WHERE h.lease_until < now() AND h.id <> $1
             ORDER BY h.lease_until LIMIT 1 FOR UPDATE SKIP LOCKED"
        );
        let Some(row) = tx.query_opt(sql.as_str(), &[&me]).await? else {
            tx.commit().await?;
            return Ok(None);
        };
        let dead = host_info(&row)?.record;
        tx.execute("DELETE FROM hosts WHERE id = $1", &[&dead.id])
            .await?;
        let rows = tx
            .query(
                &format!(
                    "UPDATE tasks SET host = $1 WHERE host = $2 AND state NOT IN {TERMINAL}
                     RETURNING id"
                ),
                &[&me, &dead.id],
            )
            .await?;
        let ids = rows
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<Vec<String>, _>>()?;
        let contexts = tx
            .query(
                "UPDATE contexts SET host = $1 WHERE host = $2 RETURNING context_id",
                &[&me, &dead.id],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<Result<Vec<String>, _>>()?;
        // The dead host's push claims (held under its id) are freed now rather than when they
        // expire, with a wake-up per task at the commit: the hosts watching those configs
        // take the deliveries up at once.
        tx.execute(
            "WITH freed AS (
                UPDATE push_configs SET claimed_by = NULL, claimed_until = NULL
                WHERE claimed_by = $1 RETURNING task_id)
             SELECT pg_notify($2, task_id) FROM (SELECT DISTINCT task_id FROM freed) f",
            &[&dead.id, &super::listen::PUSH_CHANNEL],
        )
        .await?;
        let tasks = self.load_many(&*tx, &ids).await?;
        tx.commit().await?;
        Ok(Some(Takeover {
            host: dead,
            tasks,
            contexts,
        }))
    }

    fn watch_task(&self, task_id: &str) -> watch::Receiver<u64> {
        self.listener.watch(task_id)
    }
}
