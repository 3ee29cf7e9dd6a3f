//! `agent-host tasks list|get|cancel|watch`: the tasks of an A2A agent, for a person (a
//! table, a followed stream) or, with `--json`, a script.

use super::call::{
    after_answer, connect, drive, fail, print_stdout, replay_task, show_task, ConnectArgs,
    Interrupt, Io, Wanted, EXIT_USAGE,
};
use crate::client::{Client, ClientError};
use crate::protocol::v1::{ListTasksRequest, StreamResponse, Task, TaskState};
use crate::task::mapping::METADATA_ARTIFACT;
use clap::{Args, Subcommand};

/// `agent-host tasks`. The flags that reach an agent (`--token`, `--binding`, ...) are those
/// of the subcommands that talk to one, not of `prune`, which reads this machine's store.
#[derive(Debug, Clone, Args)]
pub struct TasksArgs {
    #[command(subcommand)]
    pub command: TasksCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum TasksCommand {
    /// List tasks (A2A 1.0), newest first: id, state, last change, working directory and
    /// prompt.
    List {
        /// The agent's base URL (e.g. http://127.0.0.1:41242).
        #[arg(value_name = "URL")]
        url: String,
        /// Only this conversation.
        #[arg(long)]
        context: Option<String>,
        /// Only this state (working, completed, input-required, ... or TASK_STATE_*).
        #[arg(long)]
        state: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 20)]
        limit: i32,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Show a task (its JSON).
    Get {
        /// The agent's base URL (e.g. http://127.0.0.1:41242).
        #[arg(value_name = "URL")]
        url: String,
        /// The task id (as `call` and `tasks list` print it).
        #[arg(value_name = "ID")]
        id: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Cancel a task.
    Cancel {
        /// The agent's base URL (e.g. http://127.0.0.1:41242).
        #[arg(value_name = "URL")]
        url: String,
        /// The task id (as `call` and `tasks list` print it).
        #[arg(value_name = "ID")]
        id: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Follow a task like `call` does; a task that has ended is shown as `call` showed it, its
    /// steps and the answers to its questions replayed (exit as
    /// `call`: 0 completed, 1 failed, 3 canceled, 4 input required, 130 interrupted).
    Watch {
        /// The agent's base URL (e.g. http://127.0.0.1:41242).
        #[arg(value_name = "URL")]
        url: String,
        /// The task id (as `call` and `tasks list` print it).
        #[arg(value_name = "ID")]
        id: String,
        /// Replay from after this event id.
        #[arg(long)]
        last_event_id: Option<String>,
        /// Once the task has completed (or waits for input), apply its change (its `changes`
        /// patch) to the current directory's repository with git apply, as `call --apply`
        /// does; on a conflict nothing is applied and the files are named. Also for a task
        /// that ended before.
        #[arg(long)]
        apply: bool,
        /// Once the task has completed (or waits for input), fetch the context's branch
        /// (agent-host/...) from the host into the current directory's repository, as
        /// `call --fetch` does.
        #[arg(long)]
        fetch: bool,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Delete terminal tasks (and their attachments) from this machine's store, by age
    /// and/or count; a dry run that lists them unless --yes. Never deletes a task that is
    /// not terminal. Refuses while a host has the database open (it applies [retention]
    /// itself). Exit: 0 done, 1 failed, 2 usage.
    Prune(super::prune::PruneArgs),
}

/// The longest prompt shown in a `tasks list` row.
const PROMPT_WIDTH: usize = 60;

/// `agent-host tasks ...`: the exit code.
pub async fn run_tasks(args: TasksArgs) -> i32 {
    let (url, how) = match &args.command {
        TasksCommand::List { url, connect, .. }
        | TasksCommand::Get { url, connect, .. }
        | TasksCommand::Cancel { url, connect, .. }
        | TasksCommand::Watch { url, connect, .. } => (url.clone(), connect.clone()),
        TasksCommand::Prune(p) => {
            return match super::prune::run(p, p.json).await {
                Ok(text) => {
                    print_stdout(&text);
                    0
                }
                Err(e) => {
                    eprintln!("agent-host: {e}");
                    e.exit_code()
                }
            };
        }
    };
    let json = how.json;
    let client = match connect(&url, &how).await {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    match args.command {
        TasksCommand::List {
            context,
            state,
            limit,
            ..
        } => {
            let status = match state.as_deref() {
                None => None,
                Some(s) => match TaskState::parse_lenient(s) {
                    Some(st) => Some(st),
                    None => {
                        return fail(&ClientError::Usage(format!(
                            "--state {s}: not a task state"
                        )))
                    }
                },
            };
            let req = ListTasksRequest {
                context_id: context,
                status,
                page_size: Some(limit.clamp(1, 100)),
                // The prompt is the first message; the directory is in the metadata artifact.
                include_artifacts: (!json).then_some(true),
                ..ListTasksRequest::default()
            };
            match client.list_tasks(req).await {
                Ok(list) if json => {
                    print_stdout(&format!(
                        "{}\n",
                        serde_json::to_string(&list).unwrap_or_default()
                    ));
                    0
                }
                Ok(list) => {
                    print_stdout(&table(&list.tasks));
                    eprintln!("{} of {} tasks", list.tasks.len(), list.total_size);
                    0
                }
                Err(e) => fail(&e),
            }
        }
        TasksCommand::Get { id, .. } => match client.get_task(&id).await {
            Ok(t) => {
                let text = if json {
                    serde_json::to_string(&t)
                } else {
                    serde_json::to_string_pretty(&t)
                };
                print_stdout(&format!("{}\n", text.unwrap_or_default()));
                0
            }
            Err(e) => fail(&e),
        },
        TasksCommand::Cancel { id, .. } => match client.cancel(&id).await {
            Ok(t) => {
                if json {
                    print_stdout(&format!(
                        "{}\n",
                        serde_json::to_string(&t).unwrap_or_default()
                    ));
                } else {
                    print_stdout(&format!(
                        "task {} {}\n",
                        t.id,
                        crate::protocol::v03::reverse::state_name_03(t.status.state)
                    ));
                }
                0
            }
            Err(e) => fail(&e),
        },
        TasksCommand::Watch {
            id,
            last_event_id,
            apply,
            fetch,
            ..
        } => {
            let code = watch(&client, &id, last_event_id.as_deref(), json).await;
            if !(apply || fetch) {
                return code;
            }
            let wanted = Wanted {
                apply,
                fetch,
                url: &url,
                connect: &how,
            };
            let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
            after_answer(&client, &wanted, &id, code, &mut out, &mut err).await
        }
        TasksCommand::Prune(_) => EXIT_USAGE,
    }
}

/// `tasks watch`: follows the task to its end (or its question), or shows how it ended.
async fn watch(client: &Client, id: &str, last_event_id: Option<&str>, json: bool) -> i32 {
    let io = Io::terminal(json);
    // Ctrl-C stops watching; the task goes on (and the command says so).
    let interrupt = Interrupt::catch(false);
    match client.subscribe_from(id, last_event_id).await {
        Ok(events) => drive(client, events, json, io, interrupt).await,
        // The task has ended (a server only streams a task that has not): show how.
        Err(ClientError::Remote(r)) if r.reason.as_deref() == Some("UNSUPPORTED_OPERATION") => {
            match client.get_task(id).await {
                // Shown from its events, as `call` showed it, where the host still has them
                // (a replay from the start); else as it ended.
                Ok(t) if t.status.state.is_terminal() => {
                    match client.subscribe_from(id, Some("0")).await {
                        Ok(events) => replay_task(events, t, json, io, interrupt).await,
                        Err(_) => show_task(client, StreamResponse::Task(t), json, io),
                    }
                }
                Ok(_) => fail(&ClientError::Remote(r)),
                Err(e) => fail(&e),
            }
        }
        Err(e) => fail(&e),
    }
}

/// The first line of a text, at most `max` characters.
fn one_line(s: &str, max: usize) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line
    }
}

/// What the task was asked: its first user message.
fn prompt_of(t: &Task) -> String {
    t.history
        .iter()
        .find(|m| m.role == crate::protocol::v1::Role::User)
        .map(|m| one_line(&m.text(), PROMPT_WIDTH))
        .unwrap_or_default()
}

/// Where the agent worked: the directory its CLI reported, else the one the message asked.
fn cwd_of(t: &Task) -> String {
    let reported = t
        .artifacts
        .iter()
        .filter(|a| a.name.as_deref().unwrap_or(&a.artifact_id) == METADATA_ARTIFACT)
        .flat_map(|a| a.parts.iter())
        .find_map(|p| p.data.as_ref()?.get("cwd")?.as_str().map(str::to_string));
    let asked = || {
        t.history.iter().find_map(|m| {
            m.metadata
                .as_ref()?
                .get("cwd")?
                .as_str()
                .map(str::to_string)
        })
    };
    reported.or_else(asked).unwrap_or_else(|| "-".into())
}

/// The `tasks list` table: a header row, then one row per task.
fn table(tasks: &[Task]) -> String {
    let mut rows: Vec<[String; 5]> = vec![[
        "ID".into(),
        "STATE".into(),
        "UPDATED".into(),
        "DIRECTORY".into(),
        "PROMPT".into(),
    ]];
    for t in tasks {
        rows.push([
            t.id.clone(),
            crate::protocol::v03::reverse::state_name_03(t.status.state).to_string(),
            t.status.timestamp.clone().unwrap_or_else(|| "-".into()),
            cwd_of(t),
            prompt_of(t),
        ]);
    }
    let widths: Vec<usize> = (0..4)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        for (cell, w) in r.iter().zip(&widths) {
            let pad = w - cell.chars().count();
            out.push_str(cell);
            out.push_str(&" ".repeat(pad + 2));
        }
        out.push_str(&r[4]);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, prompt: &str, cwd: Option<&str>) -> Task {
        let artifacts = match cwd {
            Some(c) => json!([{"artifactId": METADATA_ARTIFACT, "name": METADATA_ARTIFACT,
                               "parts": [{"data": {"cwd": c}}]}]),
            None => json!([]),
        };
        serde_json::from_value(json!({
            "id": id, "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": "2026-11-24T03:00:00.000Z"},
            "history": [{"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": prompt}]}],
            "artifacts": artifacts,
        }))
        .unwrap()
    }

    #[test]
    fn the_table_has_a_header_and_the_prompt_and_directory_of_each_task() {
        let long = "Add a health check endpoint\nthat answers 200 ".repeat(5);
        let out = table(&[
            task("t-1", "Fix the build", Some("/srv/repo")),
            task("t-22", &long, None),
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 3, "{out}");
        assert!(
            lines[0].starts_with("ID  ") && lines[0].ends_with("PROMPT"),
            "{out}"
        );
        assert!(lines[0].contains("STATE") && lines[0].contains("DIRECTORY"));
        assert!(lines[1].contains("completed") && lines[1].contains("/srv/repo"));
        assert!(lines[1].ends_with("Fix the build"), "{out}");
        // A long prompt is one line, cut with an ellipsis.
        assert!(lines[2].contains(" - ") && lines[2].ends_with('…'), "{out}");
        assert_eq!(
            lines[2].split("  ").last().unwrap().chars().count(),
            PROMPT_WIDTH
        );
        // The columns line up.
        let col = |l: &str| l.find("completed").unwrap();
        assert_eq!(col(lines[1]), col(lines[2]));
    }
}
