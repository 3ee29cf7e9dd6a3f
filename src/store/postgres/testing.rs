//! A PostgreSQL schema of its own for one test, dropped when the test ends.
//!
//! The database comes from `AGENT_HOST_TEST_PG` (default
//! `postgres://root@127.0.0.1:5432/test`). When it cannot be reached, a test fails under
//! `CI=true` and otherwise says loudly that it skipped.

use std::time::Duration;

use super::{quote_ident, PgStore};

/// The database tests use.
pub fn test_url() -> String {
    std::env::var("AGENT_HOST_TEST_PG")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "postgres://root@127.0.0.1:5432/test".into())
}

/// A schema created for one test; dropped (with everything in it) on drop.
pub struct TestDb {
    pub url: String,
    pub schema: String,
}

impl TestDb {
    /// A fresh schema named after `test`, or None (after a loud message) when PostgreSQL is
    /// not reachable outside CI. Panics under `CI=true` when it is not reachable.
    pub async fn new(test: &str) -> Option<TestDb> {
        let url = test_url();
        let reached = async {
            let config: tokio_postgres::Config = url.parse()?;
            let (client, conn) = config.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(conn);
            client.simple_query("SELECT 1").await?;
            Ok::<_, tokio_postgres::Error>(())
        };
        let outcome = tokio::time::timeout(Duration::from_secs(10), reached).await;
        let why = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("no answer in 10 s".to_string()),
        };
        if let Some(why) = why {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("PostgreSQL at {url} (AGENT_HOST_TEST_PG) is not reachable under CI: {why}");
            }
            eprintln!(
                "\n!!! SKIPPED {test}: PostgreSQL at {url} (AGENT_HOST_TEST_PG) is not reachable: {why}\n"
            );
            return None;
        }
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let mut schema = format!("t_{}_{}", &unique[..12], test.to_lowercase());
        schema.truncate(63);
        Some(TestDb { url, schema })
    }

    /// A store confined to this schema (which it creates and migrates).
    pub async fn store(&self) -> PgStore {
        match PgStore::open(&self.url, Some(&self.schema)).await {
            Ok(s) => s,
            Err(e) => panic!("opening the PostgreSQL store: {e}"),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Drop runs outside async code: a thread of its own with a small runtime.
        let (url, schema) = (self.url.clone(), quote_ident(&self.schema));
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                let config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
                let (client, conn) = config
                    .connect(tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                client
                    .batch_execute(&format!(
                        "SET lock_timeout = '20s'; DROP SCHEMA IF EXISTS {schema} CASCADE"
                    ))
                    .await
                    .map_err(|e| e.to_string())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("dropping test schema {}: {e}", self.schema);
        }
    }
}
