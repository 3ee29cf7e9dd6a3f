//! Where tasks are kept: the `--store` choice and the default database path.

use std::path::PathBuf;

use super::SettingsError;

/// Where tasks are kept.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreChoice {
    /// In memory: gone when the host stops.
    Memory,
    /// An SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL database (its `postgres://` URL), which several hosts can share.
    Postgres(String),
}

/// The default database: `$XDG_DATA_HOME/agent-host/agent-host.db`, else
/// `$HOME/.local/share/agent-host/agent-host.db`.
pub fn default_db_path() -> Result<PathBuf, SettingsError> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
        .ok_or_else(|| {
            SettingsError::Invalid(
                "neither XDG_DATA_HOME nor HOME is set; choose a database with --store sqlite:PATH"
                    .into(),
            )
        })?;
    Ok(data.join("agent-host").join("agent-host.db"))
}

pub(super) fn parse_store(s: &str) -> Result<StoreChoice, SettingsError> {
    match s.trim() {
        "memory" => Ok(StoreChoice::Memory),
        "sqlite" | "" => Ok(StoreChoice::Sqlite(default_db_path()?)),
        url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            url.parse::<tokio_postgres::Config>().map_err(|e| {
                SettingsError::Invalid(format!("the PostgreSQL URL is not valid: {e}"))
            })?;
            Ok(StoreChoice::Postgres(url.to_string()))
        }
        other => match other.strip_prefix("sqlite:") {
            Some(p) if !p.is_empty() => Ok(StoreChoice::Sqlite(PathBuf::from(p))),
            _ => Err(SettingsError::Invalid(format!(
                "'{other}' is not one of sqlite, sqlite:PATH, memory, postgres://..."
            ))),
        },
    }
}
