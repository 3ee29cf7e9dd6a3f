//! A real MCP client: Claude Code (from tests/clis, against the scripted model server)
//! configured with agent-host as an MCP server over Streamable HTTP, asked by its model to call
//! `start_task`; the delegated task runs on agent-host (the demo agent) and its answer comes
//! back to the model as the tool's result.
//!
//! `#[ignore]`d like the other real-CLI tests: `cargo test --test integration real_cli --
//! --include-ignored` after `npm ci --prefix tests/clis` (`.ci/run` does).

use std::process::Stdio;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::*;
use crate::model_server::{ModelServer, Scenario, DELEGATED_PROMPT, FINAL_TEXT};
use crate::real_cli::find_cli;

#[tokio::test]
#[ignore = "needs the real CLI (npm ci --prefix tests/clis); run with --include-ignored"]
async fn claude_code_delegates_a_task_over_mcp() {
    let program = find_cli("claude", "CLAUDE_CODE_PATH");
    limit_to(Duration::from_secs(180), async {
        let host = TestServer::start().await;
        let model = ModelServer::start(Scenario::Delegate).await;
        let home = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let config = json!({"mcpServers": {"agent-host": {"type": "http", "url": format!("{}/mcp", host.base)}}});
        let out = tokio::process::Command::new(&program)
            .args(["-p", "Hand this to agent-host", "--output-format", "json"])
            .args(["--mcp-config", &config.to_string(), "--strict-mcp-config"])
            .args(["--allowedTools", "mcp__agent-host__start_task"])
            .env("ANTHROPIC_BASE_URL", &model.base)
            .env("ANTHROPIC_API_KEY", "sk-test")
            .env("HOME", home.path())
            // MCP tools offered to the model at once, not behind Claude Code's tool search.
            .env("ENABLE_TOOL_SEARCH", "false")
            .current_dir(home.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .expect("run claude");
        let stdout = String::from_utf8_lossy(&out.stdout);
        eprintln!(
            "[claude mcp] exit {:?}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        for r in model.model_requests() {
            let tools: Vec<&str> = r.body["tools"]
                .as_array()
                .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            eprintln!("[claude mcp] model request: tools {tools:?}; last message {}", r.last_message());
        }
        // The delegated task: an ordinary, completed task of agent-host, with the prompt the
        // model gave start_task.
        let list = host.rpc("ListTasks", json!({"historyLength": 10})).await;
        let tasks = list["result"]["tasks"].as_array().cloned().unwrap_or_default();
        assert_eq!(tasks.len(), 1, "one delegated task: {list}");
        let task = &tasks[0];
        assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
        assert!(task.to_string().contains(DELEGATED_PROMPT), "{task}");
        // The tool's result went back to the model, carrying the delegated task's answer.
        let answered = model
            .model_requests()
            .iter()
            .map(|r| r.last_message())
            .find(|m| m.contains("tool_result"))
            .expect("the model got start_task's result");
        let id = task["id"].as_str().unwrap();
        assert!(answered.contains(id) && answered.contains("completed"), "{answered}");
        // And Claude Code finished with the model's final answer.
        let result: Value = serde_json::from_str(stdout.trim()).expect("claude's JSON result");
        assert!(out.status.success(), "claude failed: {result}");
        assert!(
            result["result"].as_str().is_some_and(|r| r.contains(FINAL_TEXT)),
            "{result}"
        );
        host.shutdown().await;
    })
    .await;
}
