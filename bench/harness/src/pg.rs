//! A fresh PostgreSQL schema for each run of agent-host on the PostgreSQL store, so that no
//! run reads the tasks of another; dropped when the run ends.

use std::time::Duration;

async fn client(base: &str) -> Result<tokio_postgres::Client, String> {
    let connect = tokio_postgres::connect(base, tokio_postgres::NoTls);
    let (client, conn) = tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .map_err(|_| format!("{base}: no answer in 5 s"))?
        .map_err(|e| format!("{base}: {e}"))?;
    tokio::spawn(conn);
    Ok(client)
}

/// Whether the database at `base` answers.
pub async fn reachable(base: &str) -> Result<(), String> {
    client(base)
        .await?
        .simple_query("SELECT 1")
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Creates schema `name` on `base`; returns the URL whose connections work in it.
pub async fn create(base: &str, name: &str) -> Result<String, String> {
    client(base)
        .await?
        .batch_execute(&format!("CREATE SCHEMA \"{name}\""))
        .await
        .map_err(|e| format!("create schema {name}: {e}"))?;
    let sep = if base.contains('?') { '&' } else { '?' };
    Ok(format!("{base}{sep}options=-csearch_path%3D{name}"))
}

/// Drops schema `name` and everything in it.
pub async fn drop(base: &str, name: &str) {
    if let Ok(c) = client(base).await {
        if let Err(e) = c
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
            .await
        {
            eprintln!("loadgen: dropping schema {name}: {e}");
        }
    }
}
