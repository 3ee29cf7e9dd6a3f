//! Signed agent cards: `serve` signs the card, `card verify` checks it.

use crate::common::{fake_agent, limit};

async fn verify(url: &str, key: &str) -> (i32, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
        .args(["card", "verify", url, "--key", key])
        .env_remove("AGENT_HOST_CARD_SIGN_KEY")
        .kill_on_drop(true)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn served_card_is_signed_and_verifies() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let _child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"))
            .args(["serve", "--store", "memory", "--port", &port.to_string()])
            .args(["--card-sign-alg", "HS256", "--card-sign-kid", "test-key"])
            .env("AGENT_HOST_CARD_SIGN_KEY", "integration-secret")
            .env("AGENT_ADAPTER", "demo")
            .env("AGENT_BINARY", fake_agent())
            .env("AGENT_REPO_PATH", dir.path())
            .kill_on_drop(true)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}/");
        let client = reqwest::Client::new();
        let mut card = serde_json::Value::Null;
        for _ in 0..100 {
            if let Ok(r) = client
                .get(format!("{base}.well-known/agent-card.json"))
                .send()
                .await
            {
                card = r.json().await.unwrap();
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let sigs = card["signatures"].as_array().expect("signatures");
        assert_eq!(sigs.len(), 1, "{card}");
        assert!(sigs[0]["protected"].is_string() && sigs[0]["signature"].is_string());

        let (code, out) = verify(&base, "integration-secret").await;
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("kid=test-key alg=HS256 OK"), "{out}");

        let (code, out) = verify(&base, "wrong-secret").await;
        assert_eq!(code, 1, "{out}");
        assert!(out.contains("FAILED"), "{out}");
    })
    .await;
}
