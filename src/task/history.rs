//! The earlier turns of a context as plain text, for a CLI that must be told them because its
//! own session could not be resumed ([`crate::adapter::wire::WireParser::set_history`]).

use crate::protocol::v1::{Role, Task};

use super::mapping::{ANSWER_ARTIFACT, RESULT_ARTIFACT};

/// Longest history told (the most recent turns are kept).
pub const HISTORY_MAX_CHARS: usize = 64 * 1024;

/// `User: ...` / `Agent: ...` paragraphs for the tasks of a context, oldest first: each task's
/// user messages and its answer (the streamed answer, else the result artifact). Only the
/// most recent [`HISTORY_MAX_CHARS`] characters are kept.
pub fn earlier_turns(tasks: &[Task]) -> String {
    let mut turns: Vec<String> = Vec::new();
    for t in tasks {
        for m in t.history.iter().filter(|m| m.role == Role::User) {
            let text = m.text();
            if !text.trim().is_empty() {
                turns.push(format!("User: {}", text.trim()));
            }
        }
        let answer = [ANSWER_ARTIFACT, RESULT_ARTIFACT].iter().find_map(|id| {
            let a = t.artifacts.iter().find(|a| a.artifact_id == *id)?;
            let text: String = a.parts.iter().filter_map(|p| p.text.as_deref()).collect();
            (!text.trim().is_empty()).then_some(text)
        });
        if let Some(a) = answer {
            turns.push(format!("Agent: {}", a.trim()));
        }
    }
    let all = turns.join("\n\n");
    let count = all.chars().count();
    if count <= HISTORY_MAX_CHARS {
        return all;
    }
    all.chars().skip(count - HISTORY_MAX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::v1::{Artifact, Message, Part};

    #[test]
    fn user_messages_and_answers_in_order() {
        let task = |q: &str, a: &str| Task {
            history: vec![
                Message {
                    role: Role::User,
                    parts: vec![Part::text(q)],
                    ..Message::default()
                },
                Message {
                    role: Role::Agent,
                    parts: vec![Part::text("Using tool: execute")],
                    ..Message::default()
                },
            ],
            artifacts: vec![Artifact {
                artifact_id: ANSWER_ARTIFACT.into(),
                parts: vec![Part::text(a)],
                ..Artifact::default()
            }],
            ..Task::default()
        };
        assert_eq!(
            earlier_turns(&[task("my name is Ada", "Hello Ada"), task("and?", "Yes")]),
            "User: my name is Ada\n\nAgent: Hello Ada\n\nUser: and?\n\nAgent: Yes"
        );
        let long = "x".repeat(HISTORY_MAX_CHARS + 10);
        assert_eq!(
            earlier_turns(&[task(&long, "y")]).chars().count(),
            HISTORY_MAX_CHARS
        );
    }
}
