//! Commands for another host's task, passed to that host (docs/several-hosts.md): with
//! several hosts on one store, a cancel, an answer, a message to a working task or a
//! follow-up in a context that another live host runs are carried out there, and the caller
//! gets that host's result.
//!
//! The engine decides *where* (it asks the store who owns the task or the context) and the
//! [`Forwarder`] the application gives it carries the command *there* (the server's HTTP
//! peer client): the engine knows no transport. A command another host passed on
//! ([`Relay::forwarded_by`]) is never passed on again: if this host is not the owner either,
//! the local path refuses it with an error that names the owner.

use std::sync::Arc;

use async_trait::async_trait;

use super::{lock, state_word, store_err, Accepted, Engine, Owner, RequestOptions};
use crate::protocol::v1::{SendMessageRequest, SendMessageResponse, Task};
use crate::protocol::A2AError;
use crate::store::{ClusterStore, HostInfo, HostRecord, ListQuery};
use crate::task::TaskEvent;

/// What a request carries that its task's owner needs to act for the same caller: passed on
/// unchanged with a forwarded command, so that the owner authenticates the caller, applies
/// its per-credential task ownership and sees the request's trace and extensions. Opaque to
/// the engine.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Relay {
    /// Name and value of each header to pass on (credentials, trace context, extensions).
    pub headers: Vec<(String, String)>,
    /// The id of the host that passed this request on, when it was passed on.
    pub forwarded_by: Option<String>,
}

impl std::fmt::Debug for Relay {
    // Values are credentials: only the names are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Relay")
            .field("headers", &names)
            .field("forwarded_by", &self.forwarded_by)
            .finish()
    }
}

/// Carries a command to the host that owns its task or context, as the caller (`relay`).
/// Errors are the owner's answer (an A2A error it returned) or [`A2AError::Unavailable`]
/// when it could not be reached in time.
#[async_trait]
pub trait Forwarder: Send + Sync {
    /// Sends the message to `to` without waiting for the task to settle (the caller of this
    /// host follows the task through the shared store); the task as `to` accepted it.
    async fn send(
        &self,
        to: &HostRecord,
        req: SendMessageRequest,
        relay: &Relay,
    ) -> Result<SendMessageResponse, A2AError>;

    /// Cancels the task on `to`; the task as canceled there.
    async fn cancel(&self, to: &HostRecord, task_id: &str, relay: &Relay)
        -> Result<Task, A2AError>;
}

fn internal(e: crate::store::StoreError) -> A2AError {
    A2AError::Internal(e.to_string())
}

impl Engine {
    /// Lets this engine pass commands for other hosts' tasks to them. Only the first call
    /// has an effect; without one (or without a cluster) every command is carried out here.
    pub fn set_forwarder(&self, f: Arc<dyn Forwarder>) {
        let _ = self.inner.forwarder.set(f);
    }

    /// The forwarder, the store's cluster part and this host's id, when commands may be
    /// passed on: the engine has joined a cluster and has a forwarder, and the request was
    /// not passed on already.
    pub(super) fn forwarding(
        &self,
        opts: &RequestOptions,
    ) -> Option<(&dyn Forwarder, &dyn ClusterStore, &str)> {
        if opts.relay.forwarded_by.is_some() {
            return None;
        }
        Some((
            self.inner.forwarder.get()?.as_ref(),
            self.inner.store.cluster()?,
            self.host_id()?,
        ))
    }

    /// The live host other than this one that runs `task_id` (None: this host, no host, or
    /// a host whose lease expired, whose tasks a takeover is about to move).
    async fn task_elsewhere(&self, task_id: &str) -> Result<Option<HostInfo>, A2AError> {
        Ok(self.remote_owner(task_id).await?.filter(|h| h.live))
    }

    /// The live host other than `me` that owns `context_id`: the context's own record, else
    /// (a context whose record does not name a host) the host of its latest task.
    pub(super) async fn context_elsewhere(
        &self,
        c: &dyn ClusterStore,
        me: &str,
        context_id: &str,
    ) -> Result<Option<HostInfo>, A2AError> {
        // A turn of it runs here: it is this host's.
        {
            let st = lock(&self.inner.state);
            if st
                .sched
                .holder_of(context_id)
                .is_some_and(|t| st.live.contains_key(t))
            {
                return Ok(None);
            }
        }
        if let Some(id) = c.context_host(context_id).await.map_err(internal)? {
            if id == me {
                return Ok(None);
            }
            let hosts = c.hosts().await.map_err(internal)?;
            return Ok(hosts.into_iter().find(|h| h.record.id == id && h.live));
        }
        let latest = self
            .inner
            .store
            .list(
                &ListQuery {
                    context_id: Some(context_id.to_string()),
                    page_size: 1,
                    ..ListQuery::default()
                },
                false,
            )
            .await
            .map_err(store_err)?;
        match latest.tasks.first() {
            Some(t) => Ok(c
                .task_host(&t.id)
                .await
                .map_err(internal)?
                .filter(|h| h.record.id != me && h.live)),
            None => Ok(None),
        }
    }

    /// A message for a task or context another live host owns: passed to that host, and
    /// accepted as that host accepted it (the caller follows the task through the store).
    /// None: the message is this host's to carry out.
    pub(super) async fn forward_send(
        &self,
        req: &SendMessageRequest,
        owner: Owner<'_>,
        opts: &RequestOptions,
    ) -> Result<Option<Accepted>, A2AError> {
        let Some((fwd, c, me)) = self.forwarding(opts) else {
            return Ok(None);
        };
        let msg = &req.message;
        let (host, after) = match msg.task_id.as_deref().filter(|t| !t.is_empty()) {
            Some(task_id) => {
                crate::task::check_id("message.taskId", task_id)?;
                let Some(host) = self.task_elsewhere(task_id).await? else {
                    return Ok(None);
                };
                // Not the caller's task: not found, here as there.
                let snap = self.snapshot_for(task_id, owner).await?;
                (host, Some(snap.last_seq))
            }
            None => {
                let Some(ctx) = msg.context_id.as_deref().filter(|c| !c.is_empty()) else {
                    return Ok(None);
                };
                crate::task::check_id("message.contextId", ctx)?;
                match self.context_elsewhere(c, me, ctx).await? {
                    Some(host) => (host, None),
                    None => return Ok(None),
                }
            }
        };
        let mut out = req.clone();
        // The owner's endpoint is its default agent's or the one of this adapter.
        out.tenant = None;
        // Accepted there (with the push config, delivered by the host that writes the
        // updates), followed here: this host waits or streams as for its own tasks.
        let mut cfg = out.configuration.take().unwrap_or_default();
        cfg.return_immediately = true;
        out.configuration = Some(cfg);
        tracing::info!(host = %host.record.id, address = %host.record.address, task = ?msg.task_id, context = ?msg.context_id, "passing a message to the host that owns its task or context");
        let task_id = match fwd.send(&host.record, out, &opts.relay).await? {
            SendMessageResponse::Task(t) => t.id,
            SendMessageResponse::Message(m) => {
                m.task_id.filter(|t| !t.is_empty()).ok_or_else(|| {
                    A2AError::Internal(format!(
                        "agent-host {} answered a passed-on message without a task",
                        host.record.id
                    ))
                })?
            }
        };
        Ok(Some(self.accepted_there(&task_id, msg, after).await?))
    }

    /// What the owner did with `msg`, read from the store: a new task (its log starts with
    /// it), or an answer stored after `after` (where the task's log was before the message
    /// went out, when known), from which the caller follows what the agent does with it.
    async fn accepted_there(
        &self,
        task_id: &str,
        msg: &crate::protocol::v1::Message,
        after: Option<u64>,
    ) -> Result<Accepted, A2AError> {
        let mut cursor = after.unwrap_or(0);
        loop {
            let events = self
                .inner
                .store
                .events_after(task_id, cursor, 512)
                .await
                .map_err(store_err)?;
            let Some(last) = events.last() else { break };
            cursor = last.seq;
            for e in &events {
                let first = match &e.event {
                    TaskEvent::Stream(crate::protocol::v1::StreamResponse::Task(t))
                        if e.seq == 1 =>
                    {
                        t.history.first()
                    }
                    TaskEvent::UserMessage(m) => Some(m),
                    _ => None,
                };
                if first.is_some_and(|m| m.message_id == msg.message_id) {
                    return Ok(Accepted {
                        task_id: task_id.to_string(),
                        from_seq: if e.seq == 1 { 0 } else { e.seq },
                        new_task: e.seq == 1,
                        elsewhere: true,
                    });
                }
            }
        }
        // Not found (another message with the same id?): follow from where the log was
        // before the message went out, else from where it is now.
        let from_seq = match after {
            Some(seq) => seq,
            None => self.snapshot(task_id).await?.last_seq,
        };
        Ok(Accepted {
            task_id: task_id.to_string(),
            from_seq,
            new_task: false,
            elsewhere: true,
        })
    }

    /// Cancels a task, on the live host that runs it when that is another one; the task as
    /// canceled (there). The caller's view is checked here first: another caller's task is
    /// not found, an ended one not cancelable, as the owner would answer.
    pub async fn cancel_from(
        &self,
        task_id: &str,
        owner: Owner<'_>,
        opts: &RequestOptions,
    ) -> Result<Task, A2AError> {
        let Some((fwd, _, _)) = self.forwarding(opts) else {
            return self.cancel(task_id, owner).await;
        };
        let snap = self.snapshot_for(task_id, owner).await?;
        if snap.task.status.state.is_terminal() {
            return Err(A2AError::TaskNotCancelable(format!(
                "task {task_id} is already {} and cannot be canceled",
                state_word(snap.task.status.state)
            )));
        }
        match self.task_elsewhere(task_id).await? {
            Some(host) => {
                tracing::info!(host = %host.record.id, address = %host.record.address, task = %task_id, "passing a cancel to the host that runs the task");
                fwd.cancel(&host.record, task_id, &opts.relay).await
            }
            None => self.cancel(task_id, owner).await,
        }
    }
}
