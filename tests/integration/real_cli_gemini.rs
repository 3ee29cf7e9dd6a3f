//! Gemini CLI through agent-host (the `gemini` adapter, ACP) with the scenarios of
//! `real_cli.rs`, plus follow-ups within the UTC minute of the first turn (where Gemini CLI
//! 0.61.0 cannot load its own session) and a model API that answers 500. `#[ignore]`d like
//! the other real-CLI tests; `.ci/run` runs them.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;
use crate::model_server::{Scenario, FINAL_TEXT, PLAIN_TEXT};
use crate::real_cli::*;

/// The whole series under this limit (it may first wait up to 45 s for a fresh minute).
const SUITE_LIMIT: Duration = Duration::from_secs(300);

/// A follow-up in context `ctx` right after the earlier turns: the task completes, and the
/// model request carries each of `earlier` (texts of the earlier turns), whether the CLI
/// resumed its own session or was told the earlier turns in a new one (`sessionReplaced`).
/// Returns the task.
pub async fn follow_up_keeps_context(
    rig: &Rig,
    ctx: &str,
    prompt: &str,
    earlier: &[&str],
) -> Value {
    let (name, m) = (rig.name, &rig.model);
    m.set_scenario(Scenario::Text);
    m.clear();
    let (_, t) = rig.turn(ctx, None, prompt).await;
    eprintln!(
        "[{name}] follow-up {prompt:?}: {} | {:?} | session {} | sessionReplaced {}",
        state(&t),
        status_text(&t["status"]),
        t["metadata"]["sessionId"],
        t["metadata"]["sessionReplaced"]
    );
    assert_eq!(
        state(&t),
        "TASK_STATE_COMPLETED",
        "{name}: the context broke: {t}"
    );
    assert!(
        artifact_text(&t, "result").contains(PLAIN_TEXT),
        "{name}: {t}"
    );
    let req = m.model_requests().last().cloned().expect("a model request");
    for e in earlier {
        assert!(
            req.text().contains(e),
            "{name}: the model was not given the earlier turn's {e:?}: {}",
            req.text().chars().take(2000).collect::<String>()
        );
    }
    t
}

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn gemini() {
    let program = find_cli("gemini", "GEMINI_PATH");
    limit_to(SUITE_LIMIT, async {
        let started = Instant::now();
        let rig = Rig::start("gemini", program, |base, home| {
            // With only the variables, 0.61.0 picks the auth type "gateway" and rejects it.
            std::fs::create_dir_all(home.join(".gemini")).unwrap();
            std::fs::write(
                home.join(".gemini/settings.json"),
                r#"{"security":{"auth":{"selectedType":"gemini-api-key"}}}"#,
            )
            .unwrap();
            Options {
                adapter: "gemini",
                env: vec![
                    ("GOOGLE_GEMINI_BASE_URL".into(), base.to_string()),
                    ("GEMINI_API_KEY".into(), "sk-test".into()),
                ],
                // A fixed model: the default "auto" first asks a router model.
                model: Some("gemini-2.5-pro".into()),
                ..Options::default()
            }
        })
        .await;
        // Gemini CLI 0.61.0 names a session's file after the UTC minute it was created
        // (`chats/session-<YYYY-MM-DDTHH-MM>-<id prefix>.jsonl`), and its ACP `session/load`
        // starts a new recording for the id *before* reading the old one: within that minute
        // the load finds the conversation reset and fails ("No previous sessions found").
        // agent-host then goes on in a new session told the earlier turns (metadata
        // `sessionReplaced`). So the first turn starts early in a minute and the follow-ups
        // come right after it, inside that minute; each must still carry the context.
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            % 60;
        if second > 15 {
            let now = epoch_minute();
            let next = Duration::from_secs(61);
            eventually("the next minute starts", next, async || {
                let minute = epoch_minute();
                ready(minute != now, minute)
            })
            .await;
        }
        let ctx = uuid();
        let first_minute = epoch_minute();
        let (_, marker) = tool_use(&rig, &ctx).await;
        let second_prompt = "And what did it print?";
        let t2 = follow_up_keeps_context(&rig, &ctx, second_prompt, &[&marker, FINAL_TEXT]).await;
        let t3 = follow_up_keeps_context(
            &rig,
            &ctx,
            "Thanks, anything else?",
            &[&marker, FINAL_TEXT, second_prompt, PLAIN_TEXT],
        )
        .await;
        let replaced = [&t2, &t3]
            .iter()
            .filter(|t| t["metadata"]["sessionReplaced"].is_object())
            .count();
        eprintln!(
            "[gemini] follow-ups done in minute {} of the first turn's {first_minute}: {replaced} of 2 went on in a new session",
            epoch_minute()
        );
        // A rejected call goes back as the function's error: `Tool "run_shell_command" was
        // canceled by the user.`
        let deny = Deny::ToModel("canceled by the user");
        approval(&rig, "yes", deny).await;
        approval(&rig, "no", deny).await;
        change(&rig).await;
        cancel(&rig).await;
        auth_error(&rig).await;
        // Gemini CLI retries a failing request with backoff for minutes; the adapter's
        // retry limit (adapters/gemini.toml) ends the task at the third failed attempt.
        server_error(&rig).await;
        eprintln!("[gemini] all scenarios in {:?}", started.elapsed());
    })
    .await;
}
