//! The boundary between the host and its agents: a message may choose a working directory
//! only inside the roots; an agent's error text reaches callers without local paths or
//! secrets; the binary refuses an open bind and keeps its token from the agent.

use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn a_message_may_only_choose_a_working_directory_inside_the_roots() {
    limit(async {
        let outside = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let sub = root.path().join("project");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("inside.txt"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("escape")).unwrap();
        let s = TestServer::with(Options {
            workspace_roots: vec![root.path().canonicalize().unwrap()],
            ..Options::default()
        })
        .await;
        let with_cwd = |cwd: &str| {
            let mut p = send_params("hello");
            p["message"]["metadata"] = json!({"cwd": cwd});
            p
        };
        let esc = root.path().join("escape");
        let probes = [
            "../".to_string(),
            "project".to_string(),
            format!("{}/../", root.path().display()),
            outside.path().display().to_string(),
            esc.display().to_string(),
            root.path().join("missing").display().to_string(),
            sub.join("inside.txt").display().to_string(),
        ];
        for cwd in &probes {
            let v = s.rpc("SendMessage", with_cwd(cwd)).await;
            assert_eq!(v["error"]["code"], -32602, "{cwd}: {v}");
            assert!(!v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&*root.path().to_string_lossy()));
        }
        // Inside: the agent works there (fake-agent lists its directory).
        let mut p = with_cwd(&sub.display().to_string());
        p["message"]["contextId"] = json!("ctx-cwd");
        let v = s.rpc("SendMessage", p).await;
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        let history = t["history"].to_string();
        assert!(
            t["artifacts"].to_string().contains("1 entry") || history.contains("1 entry"),
            "{v}"
        );
        // The iac-code shape works too; a follow-up naming another directory is refused.
        let mut p = send_params("again");
        p["message"]["contextId"] = json!("ctx-cwd");
        p["message"]["metadata"] = json!({"iac_code": {"cwd": root.path().display().to_string()}});
        assert_eq!(s.rpc("SendMessage", p).await["error"]["code"], -32602);
    })
    .await;
}

#[tokio::test]
async fn error_messages_name_paths_but_not_secrets() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("leaky.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\n\
             echo '{\"type\":\"tool_use\",\"id\":\"1\",\"name\":\"Read\",\"input\":{}}'\n\
             echo '{\"type\":\"tool_result\",\"id\":\"1\",\"output\":\"cannot open /home/alice/.ssh/id_rsa\",\"is_error\":true}'\n\
             echo '{\"type\":\"error\",\"message\":\"request to /opt/provider/bin failed with key sk-live-abcdefghijklmnop\"}'\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let s = TestServer::with(Options {
            adapter: "jsonl",
            program: Some(script),
            ..Options::default()
        })
        .await;
        let v = s.rpc("SendMessage", send_params("go")).await;
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        let text = t["status"]["message"]["parts"][0]["text"].as_str().unwrap();
        assert!(!text.contains("sk-live"), "{text}");
        // Paths are named (a path is what makes an error useful); only secrets are masked.
        assert!(text.contains("/opt/provider/bin"), "{text}");
        let frames = {
            let mut r = s.open_stream("SubscribeToTask", json!({"id": t["id"]}), Some(0)).await;
            r.all().await
        };
        let all = serde_json::to_string(&frames.iter().map(|f| f.data.clone()).collect::<Vec<_>>()).unwrap();
        assert!(all.contains("/home/alice/.ssh/id_rsa"), "a failed tool's path is named too");
        assert!(!all.contains("sk-live"), "tool errors are cleaned too");
    })
    .await;
}

/// The push key of the agent-env test (64 hex digits).
const PUSH_KEY: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn the_binary_refuses_an_open_bind_and_keeps_its_token_from_agents() {
    limit(async {
        let bin = env!("CARGO_BIN_EXE_agent-host");
        let out = tokio::process::Command::new(bin)
            .args(["serve", "--bind", "0.0.0.0", "--port", "1", "--store", "memory"])
            .env_remove("AGENT_HOST_TOKEN")
            .env_remove("AGENT_HOST_API_KEY")
            .output()
            .await
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("without authentication") && err.contains("AGENT_HOST_TOKEN"), "{err}");

        // An agent that prints the host's token variable, even when asked to pass it.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("env.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho \"{\\\"type\\\":\\\"done\\\",\\\"result\\\":\\\"token=${AGENT_HOST_TOKEN:-none} copy=${COPY:-none} push=${AGENT_PUSH_KEY:-none} pushcopy=${PUSHCOPY:-none}\\\"}\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = tokio::process::Command::new(bin)
            .args(["serve", "--adapter", "jsonl", "--store", "memory", "--port", &port.to_string()])
            .env("AGENT_BINARY", &script)
            .env("AGENT_HOST_TOKEN", "host-secret-987654321")
            .env("COPY", "host-secret-987654321")
            // Issue 37: the push key too (its older name has no AGENT_HOST_ prefix).
            .env("AGENT_PUSH", "true")
            .env("AGENT_PUSH_KEY", PUSH_KEY)
            .env("PUSHCOPY", PUSH_KEY)
            .env("AGENT_PASS_ENV", "AGENT_HOST_TOKEN,COPY,AGENT_PUSH_KEY,PUSHCOPY")
            .env("AGENT_REPO_PATH", dir.path())
            .kill_on_drop(true)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let client = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}/");
        answers(&url).await;
        let body: Value = client
            .post(&url)
            .bearer_auth("host-secret-987654321")
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":send_params("x")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let text = body["result"]["task"]["status"]["message"]["parts"][0]["text"].as_str().unwrap_or("").to_string();
        assert_eq!(text, "token=none copy=none push=none pushcopy=none", "{body}");
        let _ = child.kill().await;
    })
    .await;
}
