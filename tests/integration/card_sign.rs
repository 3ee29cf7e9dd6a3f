//! Signed agent cards: `serve` signs the card, `card verify` checks it.

use crate::common::{limit, HostProcess};

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
        let host = HostProcess::spawn(
            &[
                ("AGENT_HOST_CARD_SIGN_KEY", "integration-secret"),
                ("AGENT_ADAPTER", "demo"),
            ],
            &["--card-sign-alg", "HS256", "--card-sign-kid", "test-key"],
        )
        .await;
        let base = format!("{}/", host.base);
        let card = &host.card;
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
