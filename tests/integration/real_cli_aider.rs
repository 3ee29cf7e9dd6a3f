//! aider (PyPI `aider-chat`, pinned in tests/clis/requirements.txt) through agent-host (the
//! `aider` adapter: a pty, the `text` wire format) against the scripted model server's Chat
//! Completions API. On its first run in a folder aider asks two questions on the terminal
//! before it asks the model ("No git repo found, create one ...?", then "Would you like to see
//! what's new in this version?"). Each must reach the client once, as its own input-required
//! state, and each answer must reach only the question it was given for: a redraw of an
//! answered question read as a new one would ask twice, and a later answer would then be typed
//! into a question the client never saw. A prompt over 128 KiB reaches aider in a file
//! (`--message-file`) and the model whole. `#[ignore]`d like the other real-CLI tests;
//! `.ci/run` runs them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::model_server::{Logged, Scenario, SIDE_TEXT};
use crate::real_cli::*;

/// One turn: aider starts slowly (Python imports) and asks before it works.
const TURN_LIMIT: Duration = Duration::from_secs(120);
const SUITE_LIMIT: Duration = Duration::from_secs(240);

/// The question of an input-required task, as the client is shown it.
fn question(t: &Value) -> String {
    let d = approval_data(t);
    format!(
        "{} {}",
        d["detail"].as_str().unwrap_or_default(),
        d["target"].as_str().unwrap_or_default()
    )
}

#[tokio::test]
#[ignore = "needs the real CLI (pip install -r tests/clis/requirements.txt); run with --include-ignored"]
async fn aider_first_run() {
    let program = find_cli("aider", "AIDER_PATH");
    limit_to(SUITE_LIMIT, async {
        let started = Instant::now();
        let rig = aider_rig(program, false).await;
        rig.model.set_scenario(Scenario::Text);
        let ctx = uuid();
        let (_, t) = rig.turn(&ctx, None, "Say hi").await;
        assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "aider: {t}");
        let first = question(&t);
        eprintln!("[aider] asked: {first:?} | {}", approval_data(&t));
        assert!(first.contains("No git repo found"), "aider: {t}");
        let id = t["id"].as_str().unwrap().to_string();

        // Yes: aider creates the repository, then asks its second question.
        let (frames, t) = rig.turn(&ctx, Some(&id), "yes").await;
        let asked_again = frames
            .iter()
            .filter(|f| {
                f.data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            })
            .count();
        assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "aider: {t}");
        let second = question(&t);
        eprintln!("[aider] after yes: asked {second:?} ({asked_again} input-required frame(s))");
        assert!(
            second.contains("what's new"),
            "aider: the next question is the second one, not the first again: {second:?}"
        );
        assert_eq!(asked_again, 1, "aider: one question per answer: {frames:?}");
        assert!(
            rig.server.dir().join(".git").is_dir(),
            "aider: the yes reached the git question"
        );
        assert!(
            rig.model.model_requests().is_empty() && chat_requests(&rig) == 0,
            "aider: nothing asked of the model before the questions are answered"
        );

        // No: aider goes on to the model, and the turn completes with its answer.
        let (_, t) = rig.turn(&ctx, Some(&id), "no").await;
        let result = artifact_text(&t, "result");
        eprintln!("[aider] after no: {} | {result:?}", state(&t));
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "aider: {t}");
        assert!(result.contains(SIDE_TEXT), "aider: {t}");
        assert!(
            !result.contains("(Y)es/(N)o"),
            "aider: a question's redraw is not answer text: {result:?}"
        );
        assert_eq!(chat_requests(&rig), 1, "aider: one model request");
        eprintln!("[aider] first run in {:?}", started.elapsed());
    })
    .await;
}

/// aider against the scripted model server's Chat Completions API; `force`: its first-run
/// questions answered by `AGENT_FORCE`.
async fn aider_rig(program: PathBuf, force: bool) -> Rig {
    Rig::start_limited("aider", program, TURN_LIMIT, |base, _home| Options {
        adapter: "aider",
        env: vec![
            ("OPENAI_API_KEY".into(), "sk-test".into()),
            ("OPENAI_API_BASE".into(), format!("{base}/v1")),
        ],
        model: Some("openai/fake-model".into()),
        force,
        ..Options::default()
    })
    .await
}

/// The Chat Completions requests so far (aider offers no tools, so they are not
/// `model_requests`).
fn chat_completions(rig: &Rig) -> Vec<Logged> {
    rig.model
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/chat/completions"))
        .collect()
}

fn chat_requests(rig: &Rig) -> usize {
    chat_completions(rig).len()
}

/// A prompt over 128 KiB (too long for one argument) reaches the model whole: the adapter
/// gives it to aider in a file (`--message-file`, `long_prompt = "file"`) in the task's own
/// folder, inside the sandbox, and removes the file after the turn. `AGENT_FORCE` answers
/// aider's first-run questions.
#[tokio::test]
#[ignore = "needs the real CLI (pip install -r tests/clis/requirements.txt); run with --include-ignored"]
async fn aider_long_prompt_from_a_file() {
    let program = find_cli("aider", "AIDER_PATH");
    limit_to(SUITE_LIMIT, async {
        let rig = aider_rig(program, true).await;
        rig.model.set_scenario(Scenario::Text);
        let mut prompt = String::from("Answer in one line. --message \"quoted\" ünïcode\n");
        while prompt.len() <= 150 * 1024 {
            prompt.push_str("0123456789 abcdefghij klmnopqrst uvwxyz\n");
        }
        let (_, t) = rig.turn(&uuid(), None, &prompt).await;
        let result = artifact_text(&t, "result");
        eprintln!(
            "[aider] {} byte prompt: {} | {result:?}",
            prompt.len(),
            state(&t)
        );
        assert_eq!(
            state(&t),
            "TASK_STATE_COMPLETED",
            "aider: {}",
            t["status"]["message"]
        );
        assert!(result.contains(SIDE_TEXT), "aider: {result:?}");
        let whole = chat_completions(&rig)
            .iter()
            .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
            .filter_map(|m| m["content"].as_str().map(str::to_string))
            .any(|c| c.contains(&prompt));
        assert!(whole, "aider: the model got the whole prompt");
        let id = t["id"].as_str().unwrap();
        let file = rig
            .server
            .dir()
            .join(".agent-host/attachments")
            .join(id)
            .join(".prompt.txt");
        assert!(
            !file.exists(),
            "aider: the prompt's file is removed after the turn"
        );
    })
    .await;
}

/// A model API that answers every request with a 500: aider fails the task with the API's
/// error and `errorKind: model`, as every other adapter does. `AGENT_FORCE` answers aider's
/// first-run questions.
#[tokio::test]
#[ignore = "needs the real CLI (pip install -r tests/clis/requirements.txt); run with --include-ignored"]
async fn aider_server_error() {
    let program = find_cli("aider", "AIDER_PATH");
    limit_to(SUITE_LIMIT, async {
        let rig = aider_rig(program, true).await;
        server_error(&rig).await;
    })
    .await;
}
