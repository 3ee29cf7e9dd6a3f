//! Push notifications: clients register webhook URLs for a task (config methods of both
//! versions, or inline in `SendMessage`), and every update of the task is POSTed to each, in
//! order, at least once, also across restarts.
//!
//! Each config has a cursor into its task's event log (stored with the config); a delivery
//! job per config posts the events after the cursor one by one and moves the cursor on
//! success. A failure is retried with exponential backoff and jitter; after
//! `max_attempts` the update is recorded as a dead letter and skipped. Secrets are sealed at
//! rest ([`seal`]); URLs are checked against SSRF when stored and when sent ([`guard`]).
//!
//! With a store several hosts share (PostgreSQL), a job delivers only while its host holds
//! the config's claim (a lease in the database, renewed with each recorded delivery; see
//! [`crate::store::push`]), and each host scans the queue for due work no live claim covers:
//! updates of tasks another host runs whose configs it does not watch, and work a dead host
//! left claimed, taken over once its claim expires. Each update is then delivered by one host,
//! at least once, in order per config. Claims are held under the host's id, so a host
//! restarted under its id frees (and takes up) its previous run's claims at once. The store's wake-ups
//! ([`PushStore::push_wakes`]) tell every host of events any host stored and of configs
//! created through any host, so the host that can claim a config's work starts at once
//! rather than at its next scan.

pub(crate) mod config;
mod deliver;
pub(crate) mod guard;
pub(crate) mod seal;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::protocol::v1::{AuthenticationInfo, TaskPushNotificationConfig};
use crate::protocol::A2AError;
use crate::store::{Claim, PushRecord, PushStore, Snapshot, StoreError, TaskStore};
pub use config::{DeliveryConfig, PushConfig, PushKey};
pub use seal::Sealer;

/// First retry delay of a failed delivery (doubled with each further failure).
pub const RETRY_BASE: Duration = Duration::from_secs(1);
/// Longest delay between two attempts.
pub const RETRY_MAX: Duration = Duration::from_secs(300);
/// Shortest claim lease (with a shared store); a claim lasts at least three webhook timeouts,
/// as it is renewed between requests, not during one.
pub const CLAIM_LEASE: Duration = Duration::from_secs(30);

/// How pushes are delivered.
#[derive(Debug, Clone)]
pub struct PushSettings {
    /// Allow callbacks to loopback, private and link-local addresses (local testing).
    pub allow_private: bool,
    /// Attempts at one update before it becomes a dead letter.
    pub max_attempts: u32,
    /// First retry delay; doubles with each failure (with ±20% jitter).
    pub retry_base: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// Timeout of one webhook request.
    pub timeout: Duration,
    /// Push configs one task may have; more are refused (-32602).
    pub max_configs_per_task: usize,
    /// With a store several hosts share: how long a host's claim on a config's deliveries
    /// lasts without renewal (a dead host's work passes to another after it). Longer than
    /// `timeout`: the claim is renewed between requests, not during one.
    pub claim_lease: Duration,
}

impl Default for PushSettings {
    fn default() -> Self {
        PushSettings {
            allow_private: false,
            max_attempts: 8,
            retry_base: RETRY_BASE,
            retry_max: RETRY_MAX,
            timeout: Duration::from_secs(10),
            max_configs_per_task: 10,
            claim_lease: CLAIM_LEASE,
        }
    }
}

impl PushSettings {
    /// The delivery settings `[push]` gives; the retry delays and the claim lease are
    /// constants (the lease at least three request timeouts).
    pub fn from_config(c: &DeliveryConfig) -> PushSettings {
        PushSettings {
            allow_private: c.allow_private,
            max_attempts: c.max_attempts.max(1),
            retry_base: RETRY_BASE,
            retry_max: RETRY_MAX,
            timeout: c.timeout.0,
            max_configs_per_task: c.max_configs_per_task.max(1),
            claim_lease: CLAIM_LEASE.max(c.timeout.0 * 3),
        }
    }
}

/// Payload version of a config: v1.0 `StreamResponse` or the v0.3 event.
pub const V1: &str = "1.0";
/// See [`V1`].
pub const V03: &str = "0.3";

struct Inner {
    settings: PushSettings,
    store: Arc<dyn PushStore>,
    tasks: Arc<dyn TaskStore>,
    sealer: Sealer,
    client: reqwest::Client,
    /// This host's claim on the deliveries it makes (used by shared stores).
    claim: Claim,
    /// Tasks that have at least one config.
    watched: Mutex<HashSet<String>>,
    /// Delivery jobs running, by (task, config): true when more work arrived meanwhile.
    jobs: Mutex<HashMap<(String, String), bool>>,
    wake: mpsc::UnboundedSender<String>,
    /// Set when the host stops: jobs end before their next request.
    stop: tokio::sync::watch::Sender<bool>,
    /// Held while a config is counted and stored, so that the cap per task holds under
    /// concurrent creates.
    creating: tokio::sync::Mutex<()>,
}

/// The push service. Cheap to clone.
#[derive(Clone)]
pub struct PushService {
    inner: Arc<Inner>,
}

/// Why the push service could not start.
#[derive(Debug, thiserror::Error)]
pub enum PushStartError {
    #[error("cannot build the webhook client: {0}")]
    Client(reqwest::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn store_err(e: StoreError) -> A2AError {
    A2AError::Internal(e.to_string())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The sets behind these locks stay consistent whatever a panicking holder did (single
    // inserts and removes), so a poisoned lock is used as it is.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl PushService {
    /// Starts the service and its delivery worker, and resumes deliveries left pending.
    /// `host_id`: this host's id among several sharing the store, under which it holds its
    /// delivery claims (None: a name of its own per start).
    pub async fn start(
        settings: PushSettings,
        store: Arc<dyn PushStore>,
        tasks: Arc<dyn TaskStore>,
        sealer: Sealer,
        host_id: Option<&str>,
    ) -> Result<PushService, PushStartError> {
        // No proxy, whatever HTTP(S)_PROXY / ALL_PROXY say: a proxy would resolve the name
        // itself and so bypass the address check of the resolver below (and receive the
        // configs' tokens).
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(settings.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(guard::resolver(settings.allow_private))
            .user_agent(concat!("agent-host/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(PushStartError::Client)?;
        let (wake, rx) = mpsc::unbounded_channel();
        // Subscribed before the configs are read: a config stored meanwhile is not missed.
        let wakes = store.push_wakes();
        let configs = store.all_push().await?;
        let shared = store.shared();
        // The host id when there is one: a host restarted under it takes back the claims
        // its previous run held. Otherwise unique per start (a store one host owns has
        // nothing to claim; hosts without ids never take each other's claims for their own).
        let holder = match host_id {
            Some(id) => id.to_string(),
            None => format!(
                "pid{}-{}",
                std::process::id(),
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
        };
        let claim = Claim {
            holder,
            lease: settings.claim_lease,
        };
        if host_id.is_some() && shared {
            // The claims of this host's previous run (it died, or it would not have been
            // let in under its id): free now, for the first scan below, not when they expire.
            let freed = store.release_all_push(&claim).await?;
            if freed > 0 {
                tracing::info!(holder = %claim.holder, configs = freed, "took back the push claims this host held before its restart");
            }
        }
        let svc = PushService {
            inner: Arc::new(Inner {
                settings,
                store,
                tasks,
                sealer,
                client,
                claim,
                watched: Mutex::new(configs.iter().map(|c| c.task_id.clone()).collect()),
                jobs: Mutex::new(HashMap::new()),
                wake,
                stop: tokio::sync::watch::channel(false).0,
                creating: tokio::sync::Mutex::new(()),
            }),
        };
        tokio::spawn(deliver::worker(svc.inner.clone(), rx, wakes));
        // A shared store's pending work is found by the worker's scan, which starts at once
        // (and claims it in bulk rather than task by task).
        if !shared {
            for c in configs {
                let _ = svc.inner.wake.send(c.task_id);
            }
        }
        Ok(svc)
    }

    /// Stops delivering (the host is stopping): no request starts after this. What was not
    /// delivered stays pending in the store for the next start.
    pub fn shutdown(&self) {
        self.inner.stop.send_replace(true);
    }

    /// A task got new events: wake its deliveries. Cheap for tasks without configs.
    pub fn on_update(&self, task_id: &str) {
        if lock(&self.inner.watched).contains(task_id) {
            let _ = self.inner.wake.send(task_id.to_string());
        }
    }

    /// Checks a config before it is stored: the URL (SSRF rules) and the authentication.
    pub async fn validate(&self, cfg: &TaskPushNotificationConfig) -> Result<(), A2AError> {
        guard::check_url(&cfg.url, self.inner.settings.allow_private)
            .await
            .map_err(|e| A2AError::InvalidParams(e.to_string()))?;
        if let Some(a) = &cfg.authentication {
            if a.scheme.trim().is_empty() {
                return Err(A2AError::InvalidParams(
                    "authentication.scheme is required (e.g. Bearer)".into(),
                ));
            }
        }
        Ok(())
    }

    /// Stores a config for an existing task. `from_start` delivers the task's whole log
    /// (a config given with the message that created the task); otherwise only updates from
    /// now on. Returns the config as stored (with its id).
    pub async fn create(
        &self,
        owner: Option<&str>,
        mut cfg: TaskPushNotificationConfig,
        version: &str,
        from_start: bool,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        let task_id = cfg
            .task_id
            .clone()
            .filter(|t| !t.is_empty())
            .ok_or_else(|| A2AError::InvalidParams("taskId is required".into()))?;
        let snap = self.task(owner, &task_id).await?;
        self.validate(&cfg).await?;
        let id = cfg.id.clone().filter(|i| !i.is_empty()).unwrap_or_else(|| {
            // v0.3 clients (and its conformance kit) treat a config set without an id as
            // the task's one config, read back as "default"; setting another replaces it.
            if version == V03 {
                "default".to_string()
            } else {
                uuid::Uuid::new_v4().to_string()
            }
        });
        crate::task::check_id("id", &id)?;
        cfg.id = Some(id.clone());
        let sealer = &self.inner.sealer;
        let rec = PushRecord {
            task_id: task_id.clone(),
            id,
            url: cfg.url.clone(),
            token: cfg.token.as_deref().map(|t| sealer.seal(t)),
            auth_scheme: cfg.authentication.as_ref().map(|a| a.scheme.clone()),
            auth_credentials: cfg
                .authentication
                .as_ref()
                .and_then(|a| a.credentials.as_deref())
                .map(|c| sealer.seal(c)),
            version: version.to_string(),
            delivered_seq: if from_start { 0 } else { snap.last_seq },
            attempts: 0,
            next_at_ms: 0,
            last_error: None,
        };
        let creating = self.inner.creating.lock().await;
        let existing = self
            .inner
            .store
            .list_push(&task_id)
            .await
            .map_err(store_err)?;
        let max = self.inner.settings.max_configs_per_task;
        if existing.len() >= max && !existing.iter().any(|r| r.id == rec.id) {
            return Err(A2AError::InvalidParams(format!(
                "task {task_id} already has {} push notification configs, the most one task may have (push.max_configs_per_task = {max}); delete one first",
                existing.len()
            )));
        }
        self.inner.store.put_push(&rec).await.map_err(store_err)?;
        drop(creating);
        lock(&self.inner.watched).insert(task_id.clone());
        let _ = self.inner.wake.send(task_id);
        Ok(cfg)
    }

    /// One config of a task.
    pub async fn get(
        &self,
        owner: Option<&str>,
        task_id: &str,
        id: &str,
    ) -> Result<TaskPushNotificationConfig, A2AError> {
        self.task(owner, task_id).await?;
        let rec = self
            .inner
            .store
            .get_push(task_id, id)
            .await
            .map_err(store_err)?
            .ok_or_else(|| A2AError::PushConfigNotFound {
                task_id: task_id.to_string(),
                config_id: id.to_string(),
            })?;
        self.to_config(&rec)
    }

    /// Every config of a task.
    pub async fn list(
        &self,
        owner: Option<&str>,
        task_id: &str,
    ) -> Result<Vec<TaskPushNotificationConfig>, A2AError> {
        self.task(owner, task_id).await?;
        let recs = self
            .inner
            .store
            .list_push(task_id)
            .await
            .map_err(store_err)?;
        recs.iter().map(|r| self.to_config(r)).collect()
    }

    /// Deletes a config; deleting one that is not there succeeds too.
    pub async fn delete(
        &self,
        owner: Option<&str>,
        task_id: &str,
        id: &str,
    ) -> Result<(), A2AError> {
        self.task(owner, task_id).await?;
        self.inner
            .store
            .delete_push(task_id, id)
            .await
            .map_err(store_err)
    }

    /// The task, if `owner` may see it (another caller's task is not found).
    async fn task(&self, owner: Option<&str>, task_id: &str) -> Result<Snapshot, A2AError> {
        match self.inner.tasks.get(task_id).await.map_err(store_err)? {
            Some(s) if s.owner.is_none() || owner.is_none() || s.owner.as_deref() == owner => Ok(s),
            _ => Err(A2AError::TaskNotFound(task_id.to_string())),
        }
    }

    fn to_config(&self, r: &PushRecord) -> Result<TaskPushNotificationConfig, A2AError> {
        let open = |s: &str| {
            self.inner
                .sealer
                .open(s)
                .map_err(|e| A2AError::Internal(e.to_string()))
        };
        Ok(TaskPushNotificationConfig {
            tenant: None,
            id: Some(r.id.clone()),
            task_id: Some(r.task_id.clone()),
            url: r.url.clone(),
            token: r.token.as_deref().map(open).transpose()?,
            authentication: match &r.auth_scheme {
                Some(scheme) => Some(AuthenticationInfo {
                    scheme: scheme.clone(),
                    credentials: r.auth_credentials.as_deref().map(open).transpose()?,
                }),
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests;
