//! Metrics and trace context.

use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn metrics_count_tasks_events_and_tokens() {
    limit(async {
        let s = TestServer::start().await;
        s.rpc("SendMessage", send_params("hello")).await;
        s.stream("SendStreamingMessage", send_params("hello")).await;
        s.rpc("SendMessage", send_params("fail")).await;
        let resp = s
            .client
            .get(format!("{}/metrics", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.unwrap();
        let value = |prefix: &str| -> f64 {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        };
        assert!(
            value(r#"agent_host_tasks_finished_total{adapter="demo",state="completed"}"#) >= 2.0
        );
        assert!(value(r#"agent_host_tasks_finished_total{adapter="demo",state="failed"}"#) >= 1.0);
        assert!(value(r#"agent_host_tasks_created_total{adapter="demo"}"#) >= 3.0);
        assert!(value("agent_host_sse_events_total") >= 5.0);
        assert!(value(r#"agent_host_tokens_total{adapter="demo",kind="input"}"#) >= 24.0);
        assert!(text.contains("agent_host_task_duration_seconds"));
        assert!(text.contains("agent_host_running_tasks"));
    })
    .await;
}

#[tokio::test]
async fn traceparent_reaches_the_cli_and_the_task() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("trace.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho \"{\\\"type\\\":\\\"done\\\",\\\"result\\\":\\\"trace=${TRACEPARENT:-none}\\\"}\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let s = TestServer::with(Options {
            adapter: "jsonl",
            program: Some(script),
            ..Options::default()
        })
        .await;
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let v: serde_json::Value = s
            .client
            .post(format!("{}/", s.base))
            .header("traceparent", tp)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":send_params("x")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["message"]["parts"][0]["text"], format!("trace={tp}"));
        assert_eq!(t["metadata"]["traceparent"], tp);
        // A malformed one is ignored.
        let v: serde_json::Value = s
            .client
            .post(format!("{}/", s.base))
            .header("traceparent", "not-a-trace")
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":send_params("x")}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["result"]["task"]["status"]["message"]["parts"][0]["text"], "trace=none");
    })
    .await;
}
