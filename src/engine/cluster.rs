//! The engine as one of several hosts on a shared store (docs/several-hosts.md): it claims
//! its own tasks at start, renews its lease, takes over the tasks of hosts whose lease
//! expired, and follows other hosts' tasks through the store's wake-ups. Commands for a task
//! another live host runs are passed to it (`forward.rs`); they are refused only when they
//! were forwarded already or the owner's lease has expired.
//!
//! Without a cluster part in the store ([`crate::store::TaskStore::cluster`]) or before
//! [`Engine::join_cluster`], none of this happens and the engine is a single host.

use std::time::Duration;

use tokio::sync::watch;

use super::schedule::CancelPlan;
use super::{lock, Control, Engine, Inner, Recovery};
use crate::protocol::A2AError;
use crate::store::{ClusterStore, HostInfo, HostRecord, Snapshot, StoreError, Takeover};

/// This host among the others.
#[derive(Debug, Clone)]
pub struct ClusterRole {
    pub me: HostRecord,
    /// How often the lease is renewed, dead hosts looked for, and other hosts' tasks polled.
    pub heartbeat: Duration,
    pub lease: Duration,
}

impl Engine {
    /// Makes this engine one host of its store's cluster (before [`Engine::recover`]):
    /// registers the host with its lease. A live row of the same id is taken over only when
    /// it is a previous run of this host (same machine, its process gone). Returns false,
    /// doing nothing, when the store has no cluster part or the engine joined already.
    pub async fn join_cluster(&self, role: ClusterRole) -> Result<bool, StoreError> {
        let Some(c) = self.inner.store.cluster() else {
            return Ok(false);
        };
        if self.inner.cluster.get().is_some() {
            return Ok(false);
        }
        match c.register(&role.me, role.lease, false).await {
            Err(StoreError::HostIdInUse(h))
                if h.record.machine == role.me.machine
                    && (h.record.pid == role.me.pid
                        || !crate::runner::process_exists(h.record.pid)) =>
            {
                tracing::info!(host = %role.me.id, previous_pid = h.record.pid, "this host restarted before its lease expired; taking its place");
                c.register(&role.me, role.lease, true).await?;
            }
            other => other?,
        }
        tracing::info!(host = %role.me.id, address = %role.me.address, lease_ms = role.lease.as_millis() as u64, "joined the hosts sharing this store");
        let _ = self.inner.cluster.set(role);
        Ok(true)
    }

    /// This host's id, when it is one of several.
    pub fn host_id(&self) -> Option<&str> {
        self.inner.cluster.get().map(|c| c.me.id.as_str())
    }

    fn cluster(&self) -> Option<(&dyn ClusterStore, &ClusterRole)> {
        Some((self.inner.store.cluster()?, self.inner.cluster.get()?))
    }

    /// This host's unfinished tasks, claimed (None when the engine is a single host).
    pub(super) async fn claim_own(&self) -> Result<Option<Vec<Snapshot>>, StoreError> {
        match self.cluster() {
            Some((c, role)) => Ok(Some(c.claim_own(&role.me.id).await?)),
            None => Ok(None),
        }
    }

    /// Takes over the tasks of a host whose lease expired (claimed by the store): stops the
    /// process groups it left on this machine, then treats its tasks as a restart does,
    /// except that running ones fail with a message that says the host was lost.
    pub async fn take_over(&self, t: Takeover) -> Recovery {
        let mut r = Recovery::default();
        // The tasks are this host's now: whatever fails before, they are still taken up
        // (a claimed task left aside would stay unfinished for good).
        if let Err(e) = self.adopt_leftovers(&t, &mut r).await {
            tracing::error!(lost_host = %t.host.id, error = %e, "could not stop the programs or restore the contexts of a lost host");
        }
        let lost = t.host.id.clone();
        self.pick_up(t.tasks, Some(&lost), &mut r).await;
        tracing::warn!(
            lost_host = %lost,
            address = %t.host.address,
            failed = r.failed,
            waiting_for_input = r.waiting,
            queued = r.queued,
            stale_processes_stopped = r.stale_processes,
            "took over the tasks of a host whose lease expired"
        );
        r
    }

    /// Stops the process groups a lost host left on this machine and restores its contexts.
    async fn adopt_leftovers(&self, t: &Takeover, r: &mut Recovery) -> Result<(), StoreError> {
        let store = &self.inner.store;
        let ids: std::collections::HashSet<&str> =
            t.tasks.iter().map(|s| s.task.id.as_str()).collect();
        let here = self
            .cluster()
            .is_some_and(|(_, role)| role.me.machine == t.host.machine);
        for (task_id, pgid, start) in store.recorded_processes().await? {
            if !ids.contains(task_id.as_str()) {
                continue;
            }
            if here {
                r.stale_processes += crate::runner::kill_stale_group(pgid, start);
            }
            store.forget_process(&task_id).await?;
        }
        // The contexts of these tasks, and every other context the lost host owned, as it
        // left them (sessions, directories): a follow-up in one of them resumes its session
        // here.
        let contexts: std::collections::HashSet<&str> = t
            .tasks
            .iter()
            .map(|s| s.task.context_id.as_str())
            .chain(t.contexts.iter().map(String::as_str))
            .collect();
        let records: Vec<_> = store
            .contexts()
            .await?
            .into_iter()
            .filter(|c| contexts.contains(c.context_id.as_str()))
            .collect();
        for cwd in records.iter().filter_map(|c| c.cwd.as_deref()) {
            self.inner.note_work_dir(std::path::Path::new(cwd));
        }
        let mut st = lock(&self.inner.state);
        for c in records {
            st.sched.restore_context(c);
        }
        Ok(())
    }

    /// Renews the lease and takes over dead hosts, every heartbeat, until the engine is
    /// dropped (the caller aborts it at shutdown). A host that finds its row gone (another
    /// host took its tasks over) registers again and stops the programs of the tasks it lost.
    pub async fn run_membership(self) {
        let Some((_, role)) = self.cluster() else {
            return;
        };
        let role = role.clone();
        let mut tick = tokio::time::interval(role.heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = self.membership_round(&role).await {
                tracing::error!(error = %e, host = %role.me.id, "cluster heartbeat failed");
            }
        }
    }

    async fn membership_round(&self, role: &ClusterRole) -> Result<(), StoreError> {
        let Some((c, _)) = self.cluster() else {
            return Ok(());
        };
        if !c.heartbeat(&role.me.id, role.lease).await? {
            tracing::error!(host = %role.me.id, "this host's lease expired and another host took its tasks over; registering again");
            c.register(&role.me, role.lease, true).await?;
            self.stop_lost_tasks(c, &role.me.id).await?;
        }
        while let Some(t) = c.claim_expired(&role.me.id).await? {
            self.take_over(t).await;
        }
        Ok(())
    }

    /// Lets go of the tasks another host owns now (their ends are its to write; this host's
    /// writes to them are refused): those waiting here (for a slot, behind their context's
    /// turn, or for an answer with no program) are forgotten before anything else starts,
    /// and the running turns are stopped.
    async fn stop_lost_tasks(&self, c: &dyn ClusterStore, me: &str) -> Result<(), StoreError> {
        let ids: Vec<String> = lock(&self.inner.state).live.keys().cloned().collect();
        let mut lost = Vec::new();
        for id in ids {
            let owner = c.task_host(&id).await?;
            if owner.is_none_or(|h| h.record.id != me) {
                lost.push(id);
            }
        }
        let (running, turns) = {
            let mut st = lock(&self.inner.state);
            let mut running = Vec::new();
            let mut holders = Vec::new();
            // Out of every queue first, so that no context or slot they free starts another
            // of them.
            for id in &lost {
                match st.sched.cancel(id) {
                    CancelPlan::Running => {
                        if let Some(control) = st.live.get(id).and_then(|l| l.control.clone()) {
                            running.push((id.clone(), control));
                        }
                    }
                    CancelPlan::Finalize { holds_context, .. } => {
                        tracing::warn!(task = %id, "forgetting a task another host took over before it ran here");
                        st.live.remove(id);
                        if holds_context {
                            holders.push(id.clone());
                        }
                    }
                }
            }
            let mut starts = Vec::new();
            for id in holders {
                starts.extend(st.sched.finish(&id));
            }
            (running, self.inner.prepare(&mut st, starts))
        };
        // What this host kept of their ends is not theirs: reads show the store's version.
        for id in &lost {
            self.inner.health.forget(id);
        }
        self.inner.turn_ended.notify_waiters();
        for (id, control) in running {
            tracing::warn!(task = %id, "stopping a task another host took over");
            let _ = control.send(Control::Shutdown);
        }
        self.inner.spawn(turns);
        Ok(())
    }
}

impl Engine {
    /// Restores a stored context this host does not know (with several hosts: one another
    /// host ran, which a follow-up here continues, its session resumed), before a message
    /// in it is admitted. Nothing on a single host, which restored every context at start.
    pub(super) async fn adopt_stored_context(&self, context_id: &str) -> Result<(), A2AError> {
        if self.cluster().is_none() || lock(&self.inner.state).sched.knows(context_id) {
            return Ok(());
        }
        let Some(record) = self
            .inner
            .store
            .context(context_id)
            .await
            .map_err(|e| A2AError::Internal(e.to_string()))?
        else {
            return Ok(());
        };
        if let Some(cwd) = record.cwd.as_deref() {
            self.inner.note_work_dir(std::path::Path::new(cwd));
        }
        let mut st = lock(&self.inner.state);
        if !st.sched.knows(context_id) {
            st.sched.restore_context(record);
        }
        Ok(())
    }

    /// The live host that runs `task_id`, when it is not this one and the task is not live
    /// here: commands for it must go there.
    pub(super) async fn remote_owner(&self, task_id: &str) -> Result<Option<HostInfo>, A2AError> {
        let Some((c, role)) = self.cluster() else {
            return Ok(None);
        };
        if lock(&self.inner.state).live.contains_key(task_id) {
            return Ok(None);
        }
        let host = c
            .task_host(task_id)
            .await
            .map_err(|e| A2AError::Internal(e.to_string()))?;
        Ok(host.filter(|h| h.record.id != role.me.id))
    }

    /// A wake-up channel and poll interval for following a task this host does not run.
    pub(super) fn remote_watch(&self, task_id: &str) -> Option<(watch::Receiver<u64>, Duration)> {
        let (c, role) = self.cluster()?;
        Some((c.watch_task(task_id), role.heartbeat))
    }
}

impl Inner {
    /// Whether this host may start or resume the task's program: always on a single host;
    /// one of several, only while it owns the task and its lease is live
    /// ([`ClusterStore::hold_task`]), so that no host takes the task over before the lease
    /// (renewed every heartbeat) expires. The task's events written so far (the turn's
    /// `working`) are committed first, so that a takeover after this check finds the task
    /// started: it fails the task instead of running it again.
    pub(super) async fn may_run(&self, task_id: &str) -> Result<bool, StoreError> {
        let (Some(c), Some(role)) = (self.store.cluster(), self.cluster.get()) else {
            return Ok(true);
        };
        self.store.flush_writes().await?;
        c.hold_task(task_id, &role.me.id).await
    }
}

/// The error for a command this host cannot carry out because another host runs the task.
pub(super) fn runs_elsewhere(task_id: &str, what: &str, host: &HostInfo) -> A2AError {
    let state = if host.live {
        "runs"
    } else {
        "ran (its lease expired; another host takes its tasks over shortly)"
    };
    A2AError::UnsupportedOperation(format!(
        "task {task_id} {state} on agent-host {} ({}); this host cannot {what} it: send the request to that host",
        host.record.id, host.record.address
    ))
}
