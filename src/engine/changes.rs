//! A turn in its context's workspace: the working directory it maps to at the start, and the
//! `changes` artifact at the end (committed first when `workspace_commit = "turn"`).
//!
//! The artifact goes in the task's event log like any other update, just before the update
//! that ends the turn (terminal, or waiting for input): every binding and both protocol
//! versions carry it, and a v1.0 stream sends it before the terminal status. A turn's
//! terminal update that the agent reports before its program exited is held back until the
//! program stopped, so that the change is taken from the files as the program left them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::json;

use crate::protocol::v1::{Artifact, Part, StreamResponse, TaskArtifactUpdateEvent};
use crate::protocol::A2AError;
use crate::workspace::{Changes, CommitMode, TurnEnd, Workspace, WorkspaceError, Workspaces};

/// The id and name of the artifact that carries a turn's change.
pub const CHANGES_ARTIFACT: &str = "changes";
/// The file part's name and media type.
pub const PATCH_NAME: &str = "changes.patch";
/// The name of the file part with the change since the previous turn's end (same type).
pub const TURN_PATCH_NAME: &str = "turn.patch";
pub const PATCH_MEDIA_TYPE: &str = "text/x-diff";

/// The workspace a turn runs in.
pub(super) struct TurnWorkspace {
    pub all: Arc<Workspaces>,
    pub ws: Workspace,
}

/// The error a send gets when its context's workspace cannot be made.
pub(super) fn refusal(e: WorkspaceError) -> A2AError {
    match e {
        e if e.is_bad_input() => A2AError::InvalidParams(e.to_string()),
        e @ WorkspaceError::TooMany { .. } => A2AError::Busy(e.to_string()),
        e => {
            tracing::error!(error = %e, "could not make the context's workspace");
            A2AError::Internal(
                "the context's workspace could not be made (see the host log)".into(),
            )
        }
    }
}

/// The context's workspace (made now for its first turn, from the repository `dir` is in at
/// `base_ref`), or `None` when the turn works in `dir` itself.
pub(super) async fn workspace_for(
    all: &Arc<Workspaces>,
    context_id: &str,
    dir: &Path,
    base_ref: Option<String>,
) -> Result<Option<Workspace>, A2AError> {
    let (all, context_id, dir) = (all.clone(), context_id.to_string(), dir.to_path_buf());
    tokio::task::spawn_blocking(move || all.for_turn(&context_id, &dir, base_ref.as_deref()))
        .await
        .map_err(|e| A2AError::Internal(e.to_string()))?
        .map_err(refusal)
}

/// The context's workspace, if it has one, for a turn that starts in `cwd` (a folder of the
/// source repository): the workspace and the folder in it.
pub(super) async fn turn_workspace(
    all: Option<&Arc<Workspaces>>,
    context_id: &str,
    cwd: &Path,
) -> (Option<TurnWorkspace>, PathBuf) {
    let Some(all) = all else {
        return (None, cwd.to_path_buf());
    };
    let (a, c, dir) = (all.clone(), context_id.to_string(), cwd.to_path_buf());
    let found = tokio::task::spawn_blocking(move || {
        let ws = a.get(&c)?;
        Ok::<_, WorkspaceError>(ws.map(|ws| {
            let mapped = ws.map_cwd(&dir);
            (ws, mapped)
        }))
    })
    .await;
    match found {
        Ok(Ok(Some((ws, mapped)))) => (
            Some(TurnWorkspace {
                all: all.clone(),
                ws,
            }),
            mapped,
        ),
        Ok(Ok(None)) => (None, cwd.to_path_buf()),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "the context's workspace cannot be read; the turn runs in its folder");
            (None, cwd.to_path_buf())
        }
        Err(e) => {
            tracing::error!(error = %e, "reading the context's workspace failed");
            (None, cwd.to_path_buf())
        }
    }
}

/// The `changes` artifact of the turn that ends now: commits the change first when the
/// settings say so. When the change cannot be taken (git failed, the agent removed or
/// tampered with the workspace's `.git`), logged, and the artifact says why instead
/// ([`failed_artifact`]); `None` only when the thread taking it panicked.
pub(super) async fn changes_update(
    tw: &TurnWorkspace,
    task_id: &str,
    context_id: &str,
    prompt: &str,
) -> Option<StreamResponse> {
    let (all, ws) = (tw.all.clone(), tw.ws.clone());
    let (task, subject) = (task_id.to_string(), prompt.to_string());
    let taken = tokio::task::spawn_blocking(move || {
        let commit = match all.config().commit {
            CommitMode::Turn => Some((subject.as_str(), task.as_str())),
            CommitMode::Off => None,
        };
        let end = all.end_turn(&ws, commit)?;
        all.changed(&ws);
        Ok::<_, WorkspaceError>(end)
    })
    .await;
    let TurnEnd {
        committed,
        head,
        changes,
        turn,
    } = match taken {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "the turn's change could not be taken from its workspace");
            let why = e.for_client(&tw.ws.checkout());
            return Some(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
                task_id: task_id.to_string(),
                context_id: context_id.to_string(),
                artifact: failed_artifact(&tw.ws, &why),
                append: false,
                last_chunk: true,
                metadata: None,
            }));
        }
        Err(e) => {
            tracing::error!(error = %e, "taking the turn's change failed");
            return None;
        }
    };
    if let Some(c) = &committed {
        tracing::info!(commit = %c, branch = %tw.ws.branch, "turn committed");
    }
    let head = (head != tw.ws.base_commit).then_some(head);
    Some(StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: task_id.to_string(),
        context_id: context_id.to_string(),
        artifact: artifact(
            &tw.ws,
            head.as_deref(),
            committed.as_deref(),
            &changes,
            turn.as_ref(),
        ),
        append: false,
        last_chunk: true,
        metadata: None,
    }))
}

/// The artifact: a data part always, the patch as a file part when there is a change, and
/// on a follow-up the change since the previous turn's end: its files in the data part's
/// `turn`, its patch as a second file part when it is not empty and differs from the whole
/// change (it is the same when the earlier turns changed nothing).
pub fn artifact(
    ws: &Workspace,
    head: Option<&str>,
    committed: Option<&str>,
    changes: &Changes,
    turn: Option<&Changes>,
) -> Artifact {
    let mut data = json!({
        "base": { "ref": ws.base_ref, "commit": ws.base_commit },
        "branch": ws.branch,
        "files": changes.files,
        "truncated": changes.truncated,
    });
    if let Some(obj) = data.as_object_mut() {
        if let Some(h) = head {
            obj.insert("head".into(), json!(h));
        }
        if let Some(c) = committed {
            obj.insert("committed".into(), json!(c));
        }
        if ws.source_dirty {
            obj.insert("sourceDirty".into(), json!(true));
        }
        if let Some(t) = turn {
            obj.insert(
                "turn".into(),
                json!({ "files": t.files, "truncated": t.truncated }),
            );
        }
    }
    let mut parts = vec![Part {
        data: Some(data),
        ..Part::default()
    }];
    let patch_part = |patch: &[u8], name: &str| Part {
        raw: Some(base64::engine::general_purpose::STANDARD.encode(patch)),
        filename: Some(name.into()),
        media_type: Some(PATCH_MEDIA_TYPE.into()),
        ..Part::default()
    };
    if !changes.patch.is_empty() {
        parts.push(patch_part(&changes.patch, PATCH_NAME));
    }
    if let Some(t) = turn.filter(|t| !t.patch.is_empty() && t.patch != changes.patch) {
        parts.push(patch_part(&t.patch, TURN_PATCH_NAME));
    }
    Artifact {
        artifact_id: CHANGES_ARTIFACT.into(),
        name: Some(CHANGES_ARTIFACT.into()),
        description: Some(format!(
            "The change from {} to the workspace's files ({} {})",
            ws.base_ref,
            changes.files.len(),
            if changes.files.len() == 1 {
                "file"
            } else {
                "files"
            }
        )),
        parts,
        metadata: None,
        extensions: Vec::new(),
    }
}

/// The artifact of a turn whose change could not be taken: a data part with the base, the
/// branch and `error` (why, for the caller), and no `files` (nothing is known of them).
pub fn failed_artifact(ws: &Workspace, why: &str) -> Artifact {
    let data = json!({
        "base": { "ref": ws.base_ref, "commit": ws.base_commit },
        "branch": ws.branch,
        "error": why,
    });
    Artifact {
        artifact_id: CHANGES_ARTIFACT.into(),
        name: Some(CHANGES_ARTIFACT.into()),
        description: Some(format!("The change could not be taken: {why}")),
        parts: vec![Part {
            data: Some(data),
            ..Part::default()
        }],
        metadata: None,
        extensions: Vec::new(),
    }
}

/// True for the update that ends a turn's stretch: a terminal state, or waiting for input.
pub(super) fn ends_turn(u: &StreamResponse) -> bool {
    match u {
        StreamResponse::StatusUpdate(s) => {
            s.status.state.is_terminal() || s.status.state.is_interrupted()
        }
        StreamResponse::Task(t) => t.status.state.is_terminal() || t.status.state.is_interrupted(),
        _ => false,
    }
}

fn terminal(u: &StreamResponse) -> bool {
    match u {
        StreamResponse::StatusUpdate(s) => s.status.state.is_terminal(),
        StreamResponse::Task(t) => t.status.state.is_terminal(),
        _ => false,
    }
}

/// What to publish now of `updates`, in a workspace: the updates before the one that ends
/// the turn, then (when the program has `exited`, or the turn waits for input) the
/// `changes` artifact and the ending updates, with those held before. A terminal update while
/// the program still runs is held (in `held`) until it exited.
pub(super) enum Step {
    /// Publish these.
    Now(Vec<StreamResponse>),
    /// Publish the first, then the changes artifact, then the second.
    WithChanges(Vec<StreamResponse>, Vec<StreamResponse>),
}

pub(super) fn arrange(
    mut updates: Vec<StreamResponse>,
    held: &mut Vec<StreamResponse>,
    exited: bool,
) -> Step {
    let at = updates.iter().position(ends_turn);
    let ending = at.map(|i| updates.split_off(i)).unwrap_or_default();
    // Nothing ends the turn now, and nothing held waits for the program's exit.
    if ending.is_empty() && (held.is_empty() || !exited) {
        return Step::Now(updates);
    }
    if !exited && ending.first().is_some_and(terminal) {
        held.extend(ending);
        return Step::Now(updates);
    }
    let mut after = std::mem::take(held);
    after.extend(ending);
    Step::WithChanges(updates, after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{TaskState, TaskStatus, TaskStatusUpdateEvent};

    fn status(state: TaskState) -> StreamResponse {
        StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            metadata: None,
        })
    }

    #[test]
    fn a_terminal_update_waits_for_the_program_and_input_required_does_not() {
        let mut held = Vec::new();
        let step = arrange(
            vec![status(TaskState::Working), status(TaskState::Completed)],
            &mut held,
            false,
        );
        assert!(matches!(step, Step::Now(v) if v.len() == 1));
        assert_eq!(held.len(), 1);
        let step = arrange(Vec::new(), &mut held, true);
        assert!(matches!(step, Step::WithChanges(b, a) if b.is_empty() && a.len() == 1));
        assert!(held.is_empty());
        let step = arrange(vec![status(TaskState::InputRequired)], &mut held, false);
        assert!(matches!(step, Step::WithChanges(b, a) if b.is_empty() && a.len() == 1));
        let step = arrange(vec![status(TaskState::Working)], &mut held, true);
        assert!(matches!(step, Step::Now(v) if v.len() == 1));
    }
}
