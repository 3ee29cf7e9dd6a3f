//! Storage of push-notification configs and their delivery progress.
//!
//! A config's delivery cursor (`delivered_seq`) points into its task's event log: the log is
//! the delivery queue, so updates go out in order, a failed one is retried before later ones,
//! and a restart resumes from the cursor (at least once: an update whose success was not yet
//! recorded when the host stopped is sent again).

use async_trait::async_trait;

use super::StoreError;

/// A push config as stored. Secrets (`token`, `credentials`) are kept sealed by the push
/// service; the store sees only the sealed strings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PushRecord {
    pub task_id: String,
    pub id: String,
    pub url: String,
    /// Sealed token, if any.
    pub token: Option<String>,
    pub auth_scheme: Option<String>,
    /// Sealed credentials, if any.
    pub auth_credentials: Option<String>,
    /// Protocol version of the payloads: "1.0" or "0.3".
    pub version: String,
    /// Sequence of the last event delivered (or skipped after too many failures).
    pub delivered_seq: u64,
    /// Failed attempts at the next event.
    pub attempts: u32,
    /// When to try again (ms since the epoch); 0 = now.
    pub next_at_ms: u64,
    pub last_error: Option<String>,
}

/// An update given up on after too many failed attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    pub task_id: String,
    pub config_id: String,
    pub seq: u64,
    pub attempts: u32,
    pub error: String,
}

/// Where push configs and their delivery state live.
#[async_trait]
pub trait PushStore: Send + Sync {
    /// Creates or replaces a config (same task and id).
    async fn put_push(&self, rec: &PushRecord) -> Result<(), StoreError>;
    async fn get_push(&self, task_id: &str, id: &str) -> Result<Option<PushRecord>, StoreError>;
    async fn list_push(&self, task_id: &str) -> Result<Vec<PushRecord>, StoreError>;
    /// Every config (for the delivery worker at start).
    async fn all_push(&self) -> Result<Vec<PushRecord>, StoreError>;
    /// Deletes a config; deleting a missing one is not an error.
    async fn delete_push(&self, task_id: &str, id: &str) -> Result<(), StoreError>;
    /// Records delivery progress of a config.
    async fn push_progress(
        &self,
        task_id: &str,
        id: &str,
        delivered_seq: u64,
        attempts: u32,
        next_at_ms: u64,
        last_error: Option<&str>,
    ) -> Result<(), StoreError>;
    /// Records an update given up on.
    async fn dead_letter(&self, dead: &DeadLetter) -> Result<(), StoreError>;
    async fn dead_letters(&self) -> Result<Vec<DeadLetter>, StoreError>;
}
