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

/// CPU time of the PostgreSQL server so far, when it runs on this machine (None otherwise):
/// user + system time of every process named `postgres`, plus the time of the children they
/// reaped (the postmaster reaps the backends of closed connections, whose time would
/// otherwise vanish with them). Other clients of the same server count too, so the figure
/// is an upper bound for one load on a machine others share.
pub fn server_cpu() -> Option<Duration> {
    let mut ticks = 0u64;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        if !head.ends_with("(postgres") {
            continue;
        }
        found = true;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // utime, stime, cutime, cstime: fields 14-17 of stat, 11-14 after the command name.
        ticks += [11, 12, 13, 14]
            .iter()
            .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
            .sum::<u64>();
    }
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    found.then(|| Duration::from_nanos(ticks * 1_000_000_000 / hz))
}
