//! The contexts' workspaces as callers reach them outside a turn: a context's workspace for
//! its owner (`git fetch`), and where it lives when several hosts share the store (the host
//! that owns the context, like its follow-ups).

use std::sync::Arc;

use super::{store_err, Engine, Owner, RequestOptions};
use crate::protocol::A2AError;
use crate::store::{HostRecord, ListQuery};
use crate::workspace::{Workspace, Workspaces};

impl Engine {
    /// The workspaces of this engine's contexts (None: every turn works in its folder).
    pub fn workspaces(&self) -> Option<&Arc<Workspaces>> {
        self.inner.config.workspaces.as_ref()
    }

    /// Whether `owner` may see the context: it has a task the caller may see (the tasks of
    /// one context all have the owner of its first).
    pub async fn context_visible(
        &self,
        context_id: &str,
        owner: Owner<'_>,
    ) -> Result<bool, A2AError> {
        if crate::task::check_id("contextId", context_id).is_err() {
            return Ok(false);
        }
        let page = self
            .inner
            .store
            .list(
                &ListQuery {
                    owner: owner.map(str::to_string),
                    context_id: Some(context_id.to_string()),
                    page_size: 1,
                    ..ListQuery::default()
                },
                false,
            )
            .await
            .map_err(store_err)?;
        Ok(!page.tasks.is_empty())
    }

    /// The context's workspace on this host, for a caller that may see the context; None
    /// when the caller may not, or the context has no workspace here.
    pub async fn context_workspace(
        &self,
        context_id: &str,
        owner: Owner<'_>,
    ) -> Result<Option<Workspace>, A2AError> {
        let Some(all) = self.workspaces().cloned() else {
            return Ok(None);
        };
        if !self.context_visible(context_id, owner).await? {
            return Ok(None);
        }
        let id = context_id.to_string();
        tokio::task::spawn_blocking(move || all.get(&id))
            .await
            .map_err(|e| A2AError::Internal(e.to_string()))?
            .map_err(|e| A2AError::Internal(e.to_string()))
    }

    /// The live host other than this one that owns the context (where its workspace
    /// lives), when requests may be passed on (`opts` was not passed on already); None: this
    /// host, a single host, or an owner whose lease expired.
    pub async fn context_host(
        &self,
        context_id: &str,
        opts: &RequestOptions,
    ) -> Result<Option<HostRecord>, A2AError> {
        let Some((_, c, me)) = self.forwarding(opts) else {
            return Ok(None);
        };
        Ok(self
            .context_elsewhere(c, me, context_id)
            .await?
            .map(|h| h.record))
    }
}
