//! Storage of push-notification configs and their delivery progress.
//!
//! A config's delivery cursor (`delivered_seq`) points into its task's event log: the log is
//! the delivery queue, so updates go out in order, a failed one is retried before later ones,
//! and a restart resumes from the cursor (at least once: an update whose success was not yet
//! recorded when the host stopped is sent again).
//!
//! # Several hosts on one store
//!
//! A store several hosts share ([`PushStore::shared`]: PostgreSQL) is one delivery queue for
//! all of them. A host delivers a config's updates only while it holds the config's *claim*:
//! [`PushStore::claim_push`] takes it when no other host holds a live one, and returns the
//! config as the database has it (its cursor written by whoever delivered last). The claim is
//! a lease (`claimed_until`, on the database's clock): each recorded delivery renews it
//! ([`PushStore::save_claimed_push`], which records nothing once the claim is lost), and
//! [`PushStore::release_push`] gives it up when the config is caught up or waits for a retry.
//! A host that dies holding a claim leaves it to expire; then any host's scan
//! ([`PushStore::claim_due_push`], `FOR UPDATE SKIP LOCKED`) takes it over from the stored
//! cursor. So each update is delivered by one host, in order per config; an update whose
//! delivery was under way when its host died (or stalled past the lease) is sent again by the
//! next holder: at least once, as on one host across a restart.
//!
//! A host's claims are held under its host id, so a host restarted under the same id frees
//! its previous run's claims at start ([`PushStore::release_all_push`]) and takes the work up
//! at once, and a host taking over a dead host's tasks frees the dead
//! host's claims in the same transaction. Hosts hear of work through the store's wake-ups
//! ([`PushStore::push_wakes`]): events stored by any host, and configs created through any
//! host, so the host that can claim a config's deliveries starts at once rather than at its
//! next scan.
//!
//! A store one host owns (memory, SQLite) has nothing to arbitrate: the default methods claim
//! by reading the config and release nothing.

use std::time::Duration;

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

/// A host's claim on the deliveries of configs, in a store several hosts share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Who holds it: the host's id (docs/several-hosts.md), unique among the live hosts; a
    /// host restarted under the same id is the same holder and takes its claims back.
    pub holder: String,
    /// How long it lasts without renewal; another host may take it over after that.
    pub lease: Duration,
}

/// A wake-up from a store several hosts share (any host may have written it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushWake {
    /// Events of this task were stored.
    Events(String),
    /// A push config of this task was created or replaced, or its claim was freed.
    Config(String),
    /// Wake-ups may have been lost (the connection dropped, or the receiver lagged): look at
    /// the whole queue again.
    Missed,
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

    /// Whether several hosts may deliver from this store, so deliveries must be claimed and
    /// the queue scanned for work whose claimer died (see the [module docs](self)).
    fn shared(&self) -> bool {
        false
    }

    /// Takes (or renews) the claim on one config's deliveries; returns the config as stored,
    /// or None when it is gone or another holder's claim is live.
    async fn claim_push(
        &self,
        task_id: &str,
        id: &str,
        _claim: &Claim,
    ) -> Result<Option<PushRecord>, StoreError> {
        self.get_push(task_id, id).await
    }

    /// Claims up to `limit` configs that have updates to deliver, are due (`next_at_ms` at
    /// or before `now_ms`) and are not claimed (or whose claim expired); returns them.
    async fn claim_due_push(
        &self,
        _claim: &Claim,
        _now_ms: u64,
        _limit: usize,
    ) -> Result<Vec<PushRecord>, StoreError> {
        Ok(Vec::new())
    }

    /// Records delivery progress of a config (its cursor, attempts, next time, last error)
    /// if `claim` still holds it, and renews the claim. False: the claim was lost (another
    /// holder took it over), nothing was recorded, and this holder must stop delivering.
    async fn save_claimed_push(
        &self,
        rec: &PushRecord,
        _claim: &Claim,
    ) -> Result<bool, StoreError> {
        self.push_progress(
            &rec.task_id,
            &rec.id,
            rec.delivered_seq,
            rec.attempts,
            rec.next_at_ms,
            rec.last_error.as_deref(),
        )
        .await?;
        Ok(true)
    }

    /// Wake-ups of a store several hosts share: what any host stored (None: the store has
    /// none; local updates are the only ones). Starts listening if needed (needs a runtime).
    fn push_wakes(&self) -> Option<tokio::sync::broadcast::Receiver<PushWake>> {
        None
    }

    /// Gives up every claim `claim`'s holder has (a host starting under its id: what its
    /// previous run held is free at once, for its own scan or any host's). Returns how many.
    async fn release_all_push(&self, _claim: &Claim) -> Result<u64, StoreError> {
        Ok(0)
    }

    /// Gives up the claim on a config, if `claim` holds it.
    async fn release_push(
        &self,
        _task_id: &str,
        _id: &str,
        _claim: &Claim,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}
