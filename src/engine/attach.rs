//! Saving the binary parts of a task's first message as files the agent can open:
//! `<working dir>/.agent-host/attachments/<task id>/<name>` (names from
//! [`input::attachments`]), with a `.agent-host/.gitignore` so git leaves them alone.
//!
//! With `sandbox_user`, the task's folder and files are given to that user (the agent runs as
//! it), and the folders leading to it get search permission for others (`0711`: passable,
//! not listable), so that the user can reach its own folder and nothing else there.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::input::{self, Attachment};
use crate::protocol::v1::Message;
use crate::protocol::A2AError;
use crate::runner::sandbox::RunAs;

/// Why the attachments could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("cannot write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not inside the working directory (a symbolic link on the way?)")]
    Outside { path: PathBuf },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> AttachError + '_ {
    move |source| AttachError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `files` into `dir` (the task's attachments directory under `work_dir`, canonical),
/// and `.agent-host/.gitignore` when missing. Refuses a directory that symbolic links lead
/// elsewhere, and never replaces an existing file. `owner`: the user the task runs as.
pub fn write(
    work_dir: &Path,
    dir: &Path,
    files: &[Attachment],
    owner: Option<&RunAs>,
) -> Result<(), AttachError> {
    prepare(work_dir, dir)?;
    for f in files {
        create_new(&dir.join(&f.name), &f.bytes)?;
    }
    if let Some(u) = owner {
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        give(work_dir, dir, &names, u)?;
    }
    Ok(())
}

/// Makes the task's folder `dir` under `work_dir` (canonical), refusing one that symbolic
/// links lead elsewhere, and `.agent-host/.gitignore` when missing.
fn prepare(work_dir: &Path, dir: &Path) -> Result<(), AttachError> {
    make_dirs_inside(work_dir, dir)?;
    let real = dir.canonicalize().map_err(io(dir))?;
    if real != dir {
        return Err(AttachError::Outside {
            path: dir.to_path_buf(),
        });
    }
    let ignore = work_dir.join(input::HOST_DIR).join(".gitignore");
    if std::fs::symlink_metadata(&ignore).is_err() {
        create_new(&ignore, b"*\n")?;
    }
    Ok(())
}

/// Writes the prompt of a turn of task `task_id` working in `work_dir` into its file
/// ([`input::prompt_file`]), for an adapter that takes a long prompt in a file: in the
/// task's own folder (made as for attachments, never through a symbolic link), replacing
/// one an interrupted turn left. With `owner`, the folder and file are that user's. Returns
/// the file's canonical path, for [`remove_prompt`].
pub fn write_prompt(
    work_dir: &Path,
    task_id: &str,
    prompt: &str,
    owner: Option<&RunAs>,
) -> Result<PathBuf, AttachError> {
    let work = work_dir.canonicalize().map_err(io(work_dir))?;
    let dir = input::attachments_dir(&work, task_id);
    prepare(&work, &dir)?;
    let path = dir.join(input::PROMPT_FILE_NAME);
    remove_prompt(&path)?;
    create_new(&path, prompt.as_bytes())?;
    if let Some(u) = owner {
        give(&work, &dir, &[input::PROMPT_FILE_NAME], u)?;
    }
    Ok(path)
}

/// Removes a prompt's file (a link is removed, never followed); a missing one is fine.
pub fn remove_prompt(path: &Path) -> Result<(), AttachError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path)(e)),
        _ => Ok(()),
    }
}

/// Gives the task's folder and its files `names` to `user`; makes the host's folders between
/// `work_dir` and it passable for others (never the working directory itself: the operator's).
fn give(work_dir: &Path, dir: &Path, names: &[&str], user: &RunAs) -> Result<(), AttachError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let me = nix::unistd::geteuid().as_raw();
    for between in dir.ancestors().skip(1).take_while(|a| *a != work_dir) {
        let meta = std::fs::symlink_metadata(between).map_err(io(between))?;
        if meta.uid() == me && meta.mode() & 0o001 == 0 {
            let mode = (meta.mode() & 0o7777) | 0o011;
            std::fs::set_permissions(between, std::fs::Permissions::from_mode(mode))
                .map_err(io(between))?;
        }
    }
    user.give(dir).map_err(io(dir))?;
    for name in names {
        let path = dir.join(name);
        user.give(&path).map_err(io(&path))?;
    }
    Ok(())
}

/// Creates `dir` and the directories leading to it from `work_dir`, one at a time, each
/// checked before anything is created in it: an existing one must be a real directory (not
/// a symbolic link), so nothing is ever created through a link that leads elsewhere.
fn make_dirs_inside(work_dir: &Path, dir: &Path) -> Result<(), AttachError> {
    let outside = |p: &Path| AttachError::Outside {
        path: p.to_path_buf(),
    };
    let rel = dir.strip_prefix(work_dir).map_err(|_| outside(dir))?;
    let mut cur = work_dir.to_path_buf();
    for part in rel.components() {
        cur.push(part);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(outside(&cur)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                crate::store::files::create_dir_all(&cur).map_err(io(&cur))?
            }
            Err(e) => return Err(io(&cur)(e)),
        }
    }
    Ok(())
}

/// Creates `path` (0600) with `bytes`; an existing file (or link) is an error.
fn create_new(path: &Path, bytes: &[u8]) -> Result<(), AttachError> {
    let mut file = crate::store::files::create_new_private(path).map_err(io(path))?;
    file.write_all(bytes).map_err(io(path))
}

/// Saves the binary parts of `m`, the first message of task `task_id` working in `work_dir`
/// (canonical), and returns the directory they are in (computed even when there are none).
/// The error tells the client nothing about the host's paths; the log has them.
pub async fn save(
    work_dir: &Path,
    task_id: &str,
    m: &Message,
    owner: Option<&RunAs>,
) -> Result<PathBuf, A2AError> {
    let dir = input::attachments_dir(work_dir, task_id);
    let files = input::attachments(m);
    if files.is_empty() {
        return Ok(dir);
    }
    let (work, target, owner) = (work_dir.to_path_buf(), dir.clone(), owner.cloned());
    let written =
        tokio::task::spawn_blocking(move || write(&work, &target, &files, owner.as_ref())).await;
    let failed = match written {
        Ok(Ok(())) => return Ok(dir),
        Ok(Err(e)) => e.to_string(),
        Err(e) => format!("the writing task ended: {e}"),
    };
    tracing::error!(task = %task_id, error = %failed, "could not save the message's attachments");
    Err(A2AError::Internal(
        "could not save the message's attachments for the agent".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::Part;
    use base64::Engine as _;

    fn message() -> Message {
        let mut m = input::text_message("look at these");
        for (bytes, mt, name) in [
            (&b"\x89PNG\r\n\x1a\n"[..], "image/png", "shot.png"),
            (&b"%PDF-1.7"[..], "application/pdf", "../spec.pdf"),
        ] {
            m.parts.push(Part {
                raw: Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                media_type: Some(mt.into()),
                filename: Some(name.into()),
                ..Part::default()
            });
        }
        m
    }

    /// With a sandbox user: the task's folder and files are the user's, the host's folders
    /// on the way passable (0711), the working directory untouched.
    #[tokio::test]
    async fn a_sandbox_user_gets_its_attachments() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if !nix::unistd::geteuid().is_root() {
            eprintln!("*** SKIPPED: giving files to another user needs root ***");
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        let user = RunAs {
            name: "nobody".into(),
            uid: 65534,
            gid: 65534,
            groups: vec![65534],
            home: "/nonexistent".into(),
        };
        let meta = |p: &Path| std::fs::metadata(p).unwrap();
        let before = meta(&work).permissions().mode();
        let dir = save(&work, "t", &message(), Some(&user)).await.unwrap();
        for p in [dir.clone(), dir.join("shot.png"), dir.join("spec.pdf")] {
            assert_eq!(meta(&p).uid(), 65534, "{}", p.display());
        }
        for p in [
            work.join(".agent-host"),
            work.join(".agent-host/attachments"),
        ] {
            assert_eq!((meta(&p).uid(), meta(&p).mode() & 0o777), (0, 0o711));
        }
        assert_eq!(meta(&work).uid(), 0);
        assert_eq!(meta(&work).permissions().mode(), before);
        // A long prompt's file is the user's too.
        let prompt = write_prompt(&work, "t2", "long", Some(&user)).unwrap();
        assert_eq!(meta(&prompt).uid(), 65534);
        assert_eq!(meta(prompt.parent().unwrap()).uid(), 65534);
    }

    #[tokio::test]
    async fn binary_parts_are_written_with_a_gitignore() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        let dir = save(&work, "task-1", &message(), None).await.unwrap();
        assert_eq!(dir, work.join(".agent-host/attachments/task-1"));
        assert_eq!(
            std::fs::read(dir.join("shot.png")).unwrap(),
            b"\x89PNG\r\n\x1a\n"
        );
        assert_eq!(std::fs::read(dir.join("spec.pdf")).unwrap(), b"%PDF-1.7");
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&work.join(".agent-host")), 0o700);
        assert_eq!(mode(&dir.join("shot.png")), 0o600);
        assert_eq!(
            std::fs::read_to_string(work.join(".agent-host/.gitignore")).unwrap(),
            "*\n"
        );
        // A second task keeps the existing .gitignore.
        std::fs::write(work.join(".agent-host/.gitignore"), "*\n# mine\n").unwrap();
        save(&work, "task-2", &message(), None).await.unwrap();
        assert!(work
            .join(".agent-host/attachments/task-2/shot.png")
            .is_file());
        assert_eq!(
            std::fs::read_to_string(work.join(".agent-host/.gitignore")).unwrap(),
            "*\n# mine\n"
        );
    }

    #[tokio::test]
    async fn text_only_messages_write_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        let dir = save(&work, "t", &input::text_message("hi"), None)
            .await
            .unwrap();
        assert_eq!(dir, work.join(".agent-host/attachments/t"));
        assert!(!work.join(".agent-host").exists());
    }

    #[tokio::test]
    async fn failures_do_not_name_host_paths() {
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        // `.agent-host` is a file, so the directory cannot be made.
        std::fs::write(work.join(".agent-host"), "x").unwrap();
        let e = save(&work, "t", &message(), None).await.unwrap_err();
        assert_eq!(e.code(), -32603);
        assert!(!e.to_string().contains(&*work.to_string_lossy()), "{e}");
    }

    #[test]
    fn a_symlinked_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), work.join(".agent-host")).unwrap();
        let dir = input::attachments_dir(&work, "t");
        let e = write(&work, &dir, &input::attachments(&message()), None).unwrap_err();
        assert!(matches!(e, AttachError::Outside { .. }), "{e}");
        assert!(!elsewhere.path().join("attachments/t/shot.png").exists());
        // Nothing was created through the link either (not even the directories).
        assert!(!elsewhere.path().join("attachments").exists());
    }

    #[test]
    fn a_prompt_file_replaces_a_leftover_and_is_removed() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        let path = write_prompt(&work, "t", "first", None).unwrap();
        assert_eq!(path, input::prompt_file(&work, "t"));
        // A turn the host did not see end left its file: the next one replaces it.
        let again = write_prompt(&work, "t", "second", None).unwrap();
        assert_eq!(std::fs::read_to_string(&again).unwrap(), "second");
        let mode = std::fs::metadata(&again).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(work.join(".agent-host/.gitignore").is_file());
        remove_prompt(&again).unwrap();
        assert!(!again.exists());
        remove_prompt(&again).unwrap();
    }

    #[test]
    fn a_prompt_file_is_never_written_through_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let work = tmp.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), work.join(".agent-host")).unwrap();
        let e = write_prompt(&work, "t", "secret", None).unwrap_err();
        assert!(matches!(e, AttachError::Outside { .. }), "{e}");
        assert!(!elsewhere.path().join("attachments").exists());
        // A link in the file's place is replaced, never followed.
        std::fs::remove_file(work.join(".agent-host")).unwrap();
        let target = elsewhere.path().join("target.txt");
        std::fs::write(&target, "keep").unwrap();
        let dir = input::attachments_dir(&work, "t");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&target, dir.join(input::PROMPT_FILE_NAME)).unwrap();
        let path = write_prompt(&work, "t", "mine", None).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "mine");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn saved_names_never_start_with_a_dash() {
        let mut m = input::text_message("files");
        for name in ["-rf", "--help.png", ".-x", "../-y"] {
            m.parts.push(Part {
                raw: Some(base64::engine::general_purpose::STANDARD.encode(b"\x00\x01")),
                media_type: Some("application/octet-stream".into()),
                filename: Some(name.into()),
                ..Part::default()
            });
        }
        for a in input::attachments(&m) {
            assert!(
                !a.name.starts_with('-') && !a.name.starts_with('.'),
                "{}",
                a.name
            );
        }
    }

    #[test]
    fn files_per_message_are_capped() {
        let mut m = input::text_message("many");
        for _ in 0..5 {
            m.parts.push(Part {
                raw: Some("AA==".into()),
                ..Part::default()
            });
        }
        assert!(input::check_file_count(&m, 5).is_ok());
        let e = input::check_file_count(&m, 4).unwrap_err();
        assert_eq!(e.code(), -32602);
        assert!(e.to_string().contains("max_files_per_message"), "{e}");
    }
}
