//! The demo agent's one change to its working directory: the `edit` keyword (`edit=FILE`
//! names the file) adds a line to a file, creating it (and its folders) when missing, so that a
//! walk-through shows a task changing something. With `approval` the edit is asked for first
//! (kind `file-edit`). The file must stay inside the working directory: an absolute path or a
//! `..` component is refused as a failed tool call, the way a real CLI's sandbox refuses it.

use std::io::{self, BufRead, Write as _};
use std::path::{Component, Path, PathBuf};

use serde_json::json;

use super::{read_reply, str_field, Out};

/// The file `edit` changes when the prompt names none.
pub(super) const DEFAULT_FILE: &str = "NOTES.md";

/// The tool use id of the edit (its `tool_use`, approval and `tool_result` lines).
const TOOL_ID: &str = "tool-edit";

/// What the edit step came to.
#[derive(Debug, PartialEq)]
pub(super) enum Outcome {
    /// The file was changed: the sentence the answer says about it.
    Done(String),
    /// The user denied the edit: the whole answer.
    Denied(String),
    /// The host closed stdin while the agent waited for the approval.
    StdinClosed,
}

/// The edit named by `edit` / `edit=FILE` among the prompt's words, if any. The file name keeps
/// its case (the other keywords are matched case-insensitively); trailing sentence punctuation
/// is dropped (`edit=notes.txt.` names `notes.txt`).
pub(super) fn requested(prompt: &str) -> Option<String> {
    prompt.split_whitespace().find_map(|word| {
        let word = word.trim_start_matches(|c: char| !c.is_alphanumeric());
        let (key, file) = word.split_once('=').unwrap_or((word, ""));
        let key = key.trim_end_matches(|c: char| !c.is_alphanumeric());
        if !key.eq_ignore_ascii_case("edit") {
            return None;
        }
        let file = file.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
        Some(if file.is_empty() { DEFAULT_FILE } else { file }.to_string())
    })
}

/// The edit: `tool_use`, the approval when `ask` (answered on stdin), the change, its
/// `tool_result`.
pub(super) fn run(
    dir: &Path,
    file: &str,
    prompt: &str,
    ask: bool,
    out: &mut Out,
    input: &mut dyn BufRead,
) -> io::Result<Outcome> {
    let line = note_line(prompt);
    out.emit(&json!({
        "type": "tool_use", "id": TOOL_ID, "name": "Edit",
        "input": {"file_path": file, "new_line": line},
    }))?;
    if ask {
        out.emit(&json!({
            "type": "approval_required", "id": "appr-1", "kind": "file-edit", "tool": "Edit",
            "target": file, "detail": format!("The agent wants to add a line to {file}: {line}"),
            "options": [{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}],
        }))?;
        let Some(reply) = read_reply(input)? else {
            out.error("stdin closed while waiting for approval", "stdin_closed")?;
            return Ok(Outcome::StdinClosed);
        };
        let decision = str_field(&reply, "decision").or_else(|| str_field(&reply, "option"));
        if decision != Some("allow") {
            out.emit(&json!({"type": "tool_result", "id": TOOL_ID, "output": "denied by user", "is_error": true}))?;
            let mut answer = format!("The edit of {file} was denied, so I changed nothing.");
            if let Some(message) = str_field(&reply, "message") {
                answer.push_str(&format!(" You said: {message}"));
            }
            return Ok(Outcome::Denied(answer));
        }
    }
    let (output, is_error, sentence) = match apply(dir, file, &line) {
        Ok(Change::Created) => (
            format!("created {file}\n+{line}"),
            false,
            format!("I created {file} with a note. "),
        ),
        Ok(Change::Appended) => (
            format!("edited {file}\n+{line}"),
            false,
            format!("I added a note to {file}. "),
        ),
        Err(e) => (
            format!("cannot edit {file}: {e}"),
            true,
            format!("I could not edit {file} ({e}). "),
        ),
    };
    out.emit(
        &json!({"type": "tool_result", "id": TOOL_ID, "output": output, "is_error": is_error}),
    )?;
    Ok(Outcome::Done(sentence))
}

/// The line the edit adds: the prompt's first line, as a Markdown list item.
fn note_line(prompt: &str) -> String {
    let first = prompt.lines().map(str::trim).find(|l| !l.is_empty());
    format!("- {}", first.unwrap_or("(empty prompt)"))
}

/// Whether the file was there before.
#[derive(Debug, PartialEq)]
enum Change {
    Created,
    Appended,
}

/// Why the demo agent refuses or fails an edit.
#[derive(Debug, thiserror::Error)]
enum EditError {
    #[error("the path must be relative and stay inside the working directory")]
    OutsideWorkingDirectory,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Appends `line` to `dir/file`, creating the file and its folders when missing.
fn apply(dir: &Path, file: &str, line: &str) -> Result<Change, EditError> {
    let path = inside(dir, file)?;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let existed = path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    writeln!(f, "{line}")?;
    Ok(if existed {
        Change::Appended
    } else {
        Change::Created
    })
}

/// `dir/file` when `file` is a relative path without `..`.
fn inside(dir: &Path, file: &str) -> Result<PathBuf, EditError> {
    let relative = Path::new(file);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain || file.is_empty() {
        return Err(EditError::OutsideWorkingDirectory);
    }
    Ok(dir.join(relative))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keyword_names_a_file_or_the_default() {
        assert_eq!(requested("please edit the notes"), Some("NOTES.md".into()));
        assert_eq!(
            requested("Add a line, edit=docs/Plan.md."),
            Some("docs/Plan.md".into())
        );
        assert_eq!(requested("EDIT: now"), Some("NOTES.md".into()));
        assert_eq!(requested("an editor and credit"), None);
    }

    #[test]
    fn paths_outside_the_working_directory_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["/etc/passwd", "../x", "a/../../x", ""] {
            assert!(
                matches!(
                    apply(dir.path(), bad, "- x"),
                    Err(EditError::OutsideWorkingDirectory)
                ),
                "{bad}"
            );
        }
        assert_eq!(
            apply(dir.path(), "sub/new.md", "- x").unwrap(),
            Change::Created
        );
        assert_eq!(
            apply(dir.path(), "sub/new.md", "- y").unwrap(),
            Change::Appended
        );
        let text = std::fs::read_to_string(dir.path().join("sub/new.md")).unwrap();
        assert_eq!(text, "- x\n- y\n");
    }
}
