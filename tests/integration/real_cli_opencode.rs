//! opencode (npm `opencode-ai`, pinned in tests/clis) through agent-host (the `opencode`
//! adapter: ACP over stdio) against the scripted model server's Chat Completions API, with
//! the model as an OpenAI-compatible provider in `OPENCODE_CONFIG_CONTENT` (the way the
//! adapter was recorded). Three hosts: opencode's default permissions (a tool use, a follow-up
//! that resumes the session, a cancel, an auth error); `bash` set to ask (an approval answered
//! yes and one answered no); and `XDG_DATA_HOME` set for the CLI to a folder of the operator's
//! (opencode keeps its database there: its sessions must still be written and resumed).
//! `#[ignore]`d like the other real-CLI tests; `.ci/run` runs them.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;
use crate::model_server::FIRST_TEXT;
use crate::real_cli::*;

/// opencode's three hosts, one after the other.
const SUITE_LIMIT: Duration = Duration::from_secs(300);

/// The options of an opencode host talking to the model server at `base`; `permission` is
/// opencode's `permission` setting, `env` more variables for the CLI.
fn options(base: &str, permission: serde_json::Value, env: Vec<(String, String)>) -> Options {
    let config = json!({
        "model": "fake/fake-model",
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": format!("{base}/v1"), "apiKey": "sk-test"},
            "models": {"fake-model": {"name": "Fake Model", "tool_call": true}}
        }},
        "permission": permission,
    });
    let mut all = vec![
        ("OPENCODE_CONFIG_CONTENT".to_string(), config.to_string()),
        ("OPENCODE_DISABLE_MODELS_FETCH".to_string(), "1".to_string()),
    ];
    all.extend(env);
    Options {
        adapter: "opencode",
        env: all,
        ..Options::default()
    }
}

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn opencode() {
    let program = find_cli("opencode", "OPENCODE_PATH");
    limit_to(SUITE_LIMIT, async {
        let started = Instant::now();
        {
            let rig = Rig::start("opencode", program.clone(), |base, _home| {
                options(base, json!({}), Vec::new())
            })
            .await;
            let ctx = uuid();
            let (session, marker) = tool_use(&rig, &ctx).await;
            follow_up(&rig, &ctx, &session, &marker).await;
            cancel(&rig).await;
            auth_error(&rig).await;
        }
        {
            let rig = Rig::start("opencode", program.clone(), |base, _home| {
                options(base, json!({"bash": "ask"}), Vec::new())
            })
            .await;
            // A rejected tool stops opencode's run: the turn ends with the text so far, and
            // the model is not asked again.
            let deny = Deny::EndsTurn(FIRST_TEXT);
            approval(&rig, "yes", deny).await;
            approval(&rig, "no", deny).await;
            change(&rig).await;
        }
        with_xdg_data_home(&program).await;
        eprintln!("[opencode] all scenarios in {:?}", started.elapsed());
    })
    .await;
}

/// The host's operator set `XDG_DATA_HOME` (as docs/task-store.md suggests, to place the
/// database): the CLI gets it too, and opencode keeps its database and sessions under it.
/// Both turns complete, and the follow-up resumes the first turn's session.
async fn with_xdg_data_home(program: &Path) {
    let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("data dir");
    let dir = data.path().display().to_string();
    let rig = Rig::start("opencode", program.to_path_buf(), |base, _home| {
        options(
            base,
            json!({}),
            vec![("XDG_DATA_HOME".to_string(), dir.clone())],
        )
    })
    .await;
    let ctx = uuid();
    let (session, marker) = tool_use(&rig, &ctx).await;
    follow_up(&rig, &ctx, &session, &marker).await;
}
