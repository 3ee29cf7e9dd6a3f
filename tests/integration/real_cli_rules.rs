//! Approval rules and budgets with the real Claude Code and Codex against the scripted model
//! server (see `real_cli.rs` for how the CLIs are found and run): under `workspace-write` the
//! model's read-only command runs without `input-required` and its write (`touch`, not on the
//! safe list) asks; a rule of the request denies the write without asking, the history shows
//! the decision; a task with a budget of no tool calls stops at the model's first one, asks,
//! and after "continue" the same session runs it and completes.

use serde_json::{json, Value};

use crate::common::*;
use crate::model_server::{Scenario, FINAL_TEXT, WRITE_COMMAND};
use crate::real_cli::{
    approval_data, artifact_text, claude_options, codex_options, find_cli, state, Rig,
};

/// A turn like [`Rig::turn`], the message carrying `metadata`.
async fn turn_md(rig: &Rig, task: Option<&str>, text: &str, md: Value) -> Value {
    let mut p = send_params(text);
    p["message"]["metadata"] = md;
    if let Some(t) = task {
        p["message"]["taskId"] = json!(t);
    }
    let limit = rig.turn_limit + std::time::Duration::from_secs(15);
    let frames = tokio::time::timeout(limit, rig.server.stream("SendStreamingMessage", p))
        .await
        .unwrap_or_else(|_| panic!("{}: no end of the turn for {text:?}", rig.name));
    let id = frames
        .iter()
        .find_map(|f| {
            let r = &f.data["result"];
            r["task"]["id"]
                .as_str()
                .or(r["statusUpdate"]["taskId"].as_str())
        })
        .unwrap_or_else(|| panic!("{}: no task in {frames:?}", rig.name))
        .to_string();
    rig.server
        .rpc("GetTask", json!({"id": id, "historyLength": 100}))
        .await["result"]
        .clone()
}

fn rule_decisions(t: &Value) -> Vec<Value> {
    t["history"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("data").cloned())
        .filter(|d| d["kind"] == "rule-decision")
        .collect()
}

async fn rules_and_budget(rig: &Rig) {
    let (name, m) = (rig.name, &rig.model);
    let created = rig.server.dir().join("fake_created.txt");
    let ws = json!({"approvals": "workspace-write"});

    // The safe command runs without a question.
    m.set_scenario(Scenario::Tool);
    let t = turn_md(rig, None, "Run it please", ws.clone()).await;
    eprintln!(
        "[{name}] workspace-write, read-only command: {} | rule decisions {:?}",
        state(&t),
        rule_decisions(&t)
    );
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{name}: {t}");

    // The write is not on the safe list: asked.
    m.set_scenario(Scenario::Write);
    let _ = std::fs::remove_file(&created);
    let t = turn_md(rig, None, "Create the file please", ws).await;
    eprintln!(
        "[{name}] workspace-write, {WRITE_COMMAND}: {} | {}",
        state(&t),
        t["status"]["message"]
    );
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "{name}: {t}");
    assert!(
        approval_data(&t).to_string().contains(WRITE_COMMAND),
        "{name}: {t}"
    );
    rig.server.rpc("CancelTask", json!({"id": t["id"]})).await;

    // A rule of the request denies it without asking; the history says so.
    let deny = json!({"approvals": {"set": "workspace-write", "rules": [
        {"decision": "deny", "kind": "command", "target": "touch *"}
    ]}});
    let t = turn_md(rig, None, "Create the file please", deny).await;
    let decided = rule_decisions(&t);
    eprintln!(
        "[{name}] request rule denies {WRITE_COMMAND}: {} | {decided:?}",
        state(&t)
    );
    assert_ne!(state(&t), "TASK_STATE_INPUT_REQUIRED", "{name}: {t}");
    assert!(!created.exists(), "{name}: the denied command did not run");
    assert_eq!(decided.len(), 1, "{name}: {t}");
    assert_eq!(decided[0]["decision"], "deny");
    assert!(
        decided[0]["request"].to_string().contains("touch"),
        "{name}: {t}"
    );

    // A budget of no tool calls: the model's first call stops the agent, which asks; after
    // "continue" the same session makes it and finishes.
    m.set_scenario(Scenario::Tool);
    let t = turn_md(
        rig,
        None,
        "Run it please",
        json!({"budget": {"toolCalls": 0}}),
    )
    .await;
    eprintln!(
        "[{name}] budget of 0 tool calls: {} | {}",
        state(&t),
        t["status"]["message"]
    );
    assert_eq!(state(&t), "TASK_STATE_INPUT_REQUIRED", "{name}: {t}");
    let q = approval_data(&t);
    assert_eq!(q["kind"], "budget", "{name}: {q}");
    let session = t["metadata"]["sessionId"].clone();
    let id = t["id"].as_str().unwrap().to_string();
    let t = turn_md(rig, Some(&id), "continue with 1", json!({})).await;
    eprintln!(
        "[{name}] after continue: {} | spent {} | result {:?}",
        state(&t),
        t["metadata"]["budget"]["spent"],
        artifact_text(&t, "result")
    );
    assert_eq!(state(&t), "TASK_STATE_COMPLETED", "{name}: {t}");
    assert_eq!(
        t["metadata"]["sessionId"], session,
        "{name}: the same session"
    );
    assert_eq!(
        t["metadata"]["budget"]["spent"]["toolCalls"], 1,
        "{name}: {t}"
    );
    assert!(
        artifact_text(&t, "result").contains(FINAL_TEXT),
        "{name}: {t}"
    );
}

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn claude_code_rules_and_budget() {
    let program = find_cli("claude", "CLAUDE_CODE_PATH");
    limit_to(std::time::Duration::from_secs(300), async {
        let rig = Rig::start("claude-code", program, claude_options).await;
        rules_and_budget(&rig).await;
    })
    .await;
}

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn codex_rules_and_budget() {
    let program = find_cli("codex", "CODEX_PATH");
    limit_to(std::time::Duration::from_secs(300), async {
        let rig = Rig::start("codex", program, codex_options).await;
        rules_and_budget(&rig).await;
    })
    .await;
}
