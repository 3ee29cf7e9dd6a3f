//! Push notification settings: on or off, delivery limits and the sealing key.

use std::path::PathBuf;

use super::*;

/// Push notification settings, when on.
#[derive(Debug, Clone)]
pub struct PushConfig {
    pub delivery: crate::push::PushSettings,
    /// The sealing key: 64 hex digits, or a file holding them (created when missing).
    pub key: PushKey,
}

/// Where the push sealing key comes from.
#[derive(Debug, Clone)]
pub enum PushKey {
    Hex(String),
    File(PathBuf),
}

pub(super) fn resolve_push(
    args: &ServeArgs,
    p: &PushSection,
    store: &StoreChoice,
) -> Result<Option<PushConfig>, SettingsError> {
    if !args.push.or(p.enabled).unwrap_or(false) {
        return Ok(None);
    }
    let d = crate::push::PushSettings::default();
    let ms = Duration::from_millis;
    let delivery = crate::push::PushSettings {
        allow_private: args.push_allow_private.or(p.allow_private).unwrap_or(false),
        max_attempts: match p.max_attempts {
            Some(0) => {
                return Err(SettingsError::Invalid(
                    "push.max_attempts must be at least 1".into(),
                ))
            }
            Some(n) => n,
            None => d.max_attempts,
        },
        retry_base: p.retry_base_ms.map(ms).unwrap_or(d.retry_base),
        retry_max: p.retry_max_ms.map(ms).unwrap_or(d.retry_max),
        timeout: p.timeout_ms.map(ms).unwrap_or(d.timeout),
        max_configs_per_task: p
            .max_configs_per_task
            .unwrap_or(d.max_configs_per_task)
            .max(1),
        claim_lease: p.claim_lease_ms.map(ms).unwrap_or(d.claim_lease),
    };
    if delivery.claim_lease <= delivery.timeout {
        return Err(SettingsError::Invalid(format!(
            "push.claim_lease_ms ({} ms) must be longer than push.timeout_ms ({} ms): a claim is renewed between webhook requests, not during one",
            delivery.claim_lease.as_millis(),
            delivery.timeout.as_millis()
        )));
    }
    let key = match (args.push_key.clone().or_else(|| p.key.clone()), &p.key_file) {
        (Some(hex), _) => {
            crate::push::Sealer::from_hex(&hex)
                .map_err(|e| SettingsError::Invalid(format!("AGENT_PUSH_KEY: {e}")))?;
            PushKey::Hex(hex)
        }
        (None, Some(f)) => PushKey::File(f.clone()),
        (None, None) => PushKey::File(match store {
            StoreChoice::Sqlite(db) => db.with_file_name("push.key"),
            StoreChoice::Memory | StoreChoice::Postgres(_) => {
                default_db_path()?.with_file_name("push.key")
            }
        }),
    };
    Ok(Some(PushConfig { delivery, key }))
}
