//! Qwen Code (npm `@qwen-code/qwen-code`, pinned in tests/clis) through agent-host (the `qwen`
//! adapter: two-way stdio, Claude Code's stream-json) against the scripted model server's Chat
//! Completions API: a plain answer, then a model API answering 500 and one refusing the key
//! (401). Each failure must reach the client with the CLI's own error text (its result line's
//! `error.message`), not only "error_during_execution". `#[ignore]`d like the other real-CLI
//! tests; `.ci/run` runs them.

use std::time::{Duration, Instant};

use crate::common::*;
use crate::model_server::{Scenario, PLAIN_TEXT};
use crate::real_cli::*;

/// One turn. Qwen Code 0.24.4 retries a request answered 500 by itself, silently: 28 requests
/// over about 93 s in a recorded run (7 attempts of its own, each retried 3 times by its HTTP
/// client) before its result line says `[API Error: 500 ...]`.
const TURN_LIMIT: Duration = Duration::from_secs(150);
const SUITE_LIMIT: Duration = Duration::from_secs(240);

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn qwen_code() {
    let program = find_cli("qwen", "QWEN_PATH");
    limit_to(SUITE_LIMIT, async {
        let started = Instant::now();
        let rig = Rig::start_limited("qwen", program, TURN_LIMIT, |base, _home| Options {
            adapter: "qwen",
            env: vec![("QWEN_CODE_SUPPRESS_YOLO_WARNING".into(), "1".into())],
            // The endpoint as the recorded runs passed it (adapters/qwen.toml).
            extra_args: vec![
                "--auth-type".into(),
                "openai".into(),
                "--openai-api-key".into(),
                "sk-test".into(),
                "--openai-base-url".into(),
                format!("{base}/v1"),
            ],
            model: Some("fake-model".into()),
            ..Options::default()
        })
        .await;

        // The rig works: a plain answer completes.
        rig.model.set_scenario(Scenario::Text);
        let (_, t) = rig.turn(&uuid(), None, "Say hi").await;
        eprintln!(
            "[qwen] text: {} | {:?}",
            state(&t),
            artifact_text(&t, "result")
        );
        assert_eq!(state(&t), "TASK_STATE_COMPLETED", "qwen: {t}");
        assert!(
            artifact_text(&t, "result").contains(PLAIN_TEXT),
            "qwen: {t}"
        );

        // 401: `[API Error: 401 Incorrect API key provided: ...]`, errorKind auth.
        rig.model.set_scenario(Scenario::Auth);
        let (_, t) = rig.turn(&uuid(), None, "Say hi").await;
        let text = status_text(&t["status"]);
        eprintln!(
            "[qwen] auth error: {} | {text:?} | errorKind {}",
            state(&t),
            t["metadata"]["errorKind"]
        );
        assert_eq!(state(&t), "TASK_STATE_FAILED", "qwen: {t}");
        assert!(
            text.contains("401") && text.contains("Incorrect API key provided"),
            "qwen: the failure message carries the API's error: {text:?}"
        );
        assert_eq!(t["metadata"]["errorKind"], "auth", "qwen: {t}");

        // 500, after Qwen Code's own retries.
        server_error(&rig).await;
        eprintln!("[qwen] all scenarios in {:?}", started.elapsed());
    })
    .await;
}
