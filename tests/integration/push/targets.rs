//! Where deliveries may go: SSRF probes and every IPv6 form of a blocked address refused as
//! webhook targets; deliveries that ignore an HTTP proxy set in the host's environment.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_host::push::PushSettings;
use serde_json::json;

use super::{fast, received, receiver, server_with_task};
use crate::common::*;

#[tokio::test]
async fn ssrf_probes_are_refused_without_allow_private() {
    limit(async {
        let (s, id) = server_with_task(PushSettings::default(), "hang").await;
        for url in [
            "http://127.0.0.1:8080/hook",
            "http://10.0.0.1/hook",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::1]:8080/hook",
            "http://localhost:8080/hook",
            "file:///etc/passwd",
            "gopher://example.com/",
        ] {
            let r = s
                .rpc(
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": id, "url": url}),
                )
                .await;
            assert_eq!(r["error"]["code"], -32602, "{url}: {r}");
            assert!(
                r["error"]["message"].as_str().unwrap().contains("url"),
                "{r}"
            );
        }
        // Inline too: the message is refused before any task is made.
        let mut p = send_params("hello");
        p["configuration"] = json!({"taskPushNotificationConfig": {"url": "http://127.0.0.1:1/x"}});
        assert_eq!(s.rpc("SendMessage", p).await["error"]["code"], -32602);
        let r = s
            .rpc(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "url": "https://93.184.215.14/hook",
                "authentication": {"scheme": ""}}),
            )
            .await;
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("authentication.scheme"),
            "{r}"
        );
        s.rpc("CancelTask", json!({"id": id})).await;
    })
    .await;
}

/// A listener standing in for an HTTP proxy: counts the connections it gets.
async fn fake_proxy() -> (String, Arc<Mutex<usize>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let count = Arc::new(Mutex::new(0usize));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((_s, _)) = listener.accept().await {
            *c.lock().unwrap() += 1;
        }
    });
    (url, count)
}

/// With HTTP(S)_PROXY / ALL_PROXY set in the host's environment (a child host process,
/// so this test's own environment is untouched), deliveries still go straight to the
/// webhook: a proxy would resolve the name itself, past the address check, and receive the
/// tokens. A client that does use the proxy for the same loopback URL reaches it (no
/// implicit bypass hides the difference).
#[tokio::test]
async fn deliveries_ignore_http_proxy_in_the_environment() {
    limit(async {
        let rx = receiver(0).await;
        let (proxy, proxied) = fake_proxy().await;
        let key = "5a".repeat(32);
        let host = HostProcess::spawn(
            &[
                ("HTTP_PROXY", &proxy),
                ("http_proxy", &proxy),
                ("HTTPS_PROXY", &proxy),
                ("ALL_PROXY", &proxy),
                ("AGENT_PUSH_KEY", &key),
            ],
            &["--push", "--push-allow-private"],
        )
        .await;
        let mut p = send_params("hello");
        p["configuration"] =
            json!({"taskPushNotificationConfig": {"url": rx.url, "token": "tok-1"}});
        let v = host.rpc("/", "SendMessage", p, &[]).await;
        assert!(v["result"]["task"]["id"].is_string(), "{v}");
        let hits = received(&rx, 1).await;
        assert_eq!(hits[0].token.as_deref(), Some("tok-1"));
        assert_eq!(
            *proxied.lock().unwrap(),
            0,
            "a delivery went through the proxy"
        );

        // The control: a client that honours the proxy sends the same URL to it.
        let via_proxy = reqwest::Client::builder()
            .proxy(reqwest::Proxy::all(&proxy).unwrap())
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let _ = via_proxy.post(&rx.url).body("{}").send().await;
        assert_eq!(*proxied.lock().unwrap(), 1);
    })
    .await;
}

/// Every IPv6 form of a loopback, private or metadata IPv4 address is refused as a webhook
/// target (IPv4-mapped, -translated, -compatible, 6to4, NAT64 both prefixes, Teredo).
#[tokio::test]
async fn every_ipv6_form_of_a_blocked_address_is_refused() {
    limit(async {
        let settings = PushSettings {
            allow_private: false,
            ..fast()
        };
        let (s, id) = server_with_task(settings, "approval").await;
        for host in [
            "::ffff:127.0.0.1",
            "::ffff:0:7f00:1",
            "::7f00:1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "64:ff9b::a00:1",
            "64:ff9b:1::a9fe:a9fe",
            "2001:0:7f00:1::f7f7:f7f7",
            "2001:0:808:808::80ff:fefe",
        ] {
            let url = format!("http://[{host}]:9/hook");
            let c = s
                .rpc(
                    "CreateTaskPushNotificationConfig",
                    json!({"taskId": id, "url": url}),
                )
                .await;
            assert_eq!(c["error"]["code"], -32602, "{host}: {c}");
        }
    })
    .await;
}
