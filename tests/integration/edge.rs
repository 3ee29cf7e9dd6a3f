//! The edge of the host: slow and idle connections, connection caps, failed logins
//! throttled per address, risky settings warned about at start. Loopback only, bounded
//! counts; no timed assertions (every wait is bounded by the test's limit).

use std::net::SocketAddr;
use std::time::Duration;

use agent_host::settings::{Credential, HostLimits, Secret, Security};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::*;

fn addr_of(base: &str) -> SocketAddr {
    base.trim_start_matches("http://").parse().expect("address")
}

/// A connection from `from` (a loopback address) that sends the start of a request header
/// and never finishes it.
async fn slow_client(to: SocketAddr, from: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().expect("socket");
    sock.bind(format!("{from}:0").parse().expect("from"))
        .expect("bind");
    let mut s = sock.connect(to).await.expect("connect");
    s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("write");
    s
}

/// What the server sent before it closed the connection (None: still open after `wait`).
async fn read_until_closed(s: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(wait, s.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Some(String::from_utf8_lossy(&out).into_owned()),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return None,
        }
    }
}

/// Every slow connection sends one more header byte, as a slowloris client does to look
/// alive; connections the server closed are skipped.
async fn dribble(conns: &mut [TcpStream]) {
    for c in conns.iter_mut() {
        let _ = c.write_all(b"X").await;
    }
}

/// The status of `GET /health`; None when the connection failed (a refused connection may
/// be reset instead of answered when the host is busy).
async fn health(base: &str) -> Option<reqwest::StatusCode> {
    reqwest::Client::new()
        .get(format!("{base}/health"))
        .send()
        .await
        .ok()
        .map(|r| r.status())
}

/// 50 slowloris connections against a cap of 20: the 30 beyond the cap get a fast 503, the
/// 20 admitted are closed by the header-read timeout (3 s here: long enough that the 50
/// connect before it frees places, even on a busy machine) although they keep sending
/// a byte now and then, and a normal request is then answered while the slow clients still
/// hold their sockets. The same attack against a host whose header timeout is long (the
/// protection off) keeps the normal request out.
#[tokio::test]
async fn slowloris_is_cut_off_by_the_header_timeout() {
    limit(async {
        let host = HostProcess::spawn(
            &[],
            &["--max-connections", "20", "--header-timeout", "3000ms"],
        )
        .await;
        let to = addr_of(&host.base);
        let mut conns = Vec::new();
        for _ in 0..50 {
            conns.push(slow_client(to, "127.0.0.1").await);
        }
        // The refused ones are answered at once and closed; the admitted ones are closed
        // by the timer, whatever they send meanwhile.
        let mut refused = 0;
        let mut timed_out = 0;
        for c in conns.iter_mut() {
            dribble(std::slice::from_mut(c)).await;
            let text = read_until_closed(c, Duration::from_secs(20))
                .await
                .expect("the server closes every slow connection");
            if text.starts_with("HTTP/1.1 503") {
                assert!(text.contains("retry-after"), "{text}");
                refused += 1;
            } else {
                timed_out += 1;
            }
        }
        // 20 places: about 20 were admitted (more when the timer freed places while the 50
        // were still connecting, on a busy machine), the rest refused. One fewer happens
        // (1 run in 10 with the debug build): the connection of the host's start check
        // (`HostProcess::spawn`) is closed when the test starts, but its place is freed by
        // the host's connection task a moment after the close, and the first slow clients
        // can be accepted in that moment. The test is about the timer, so it allows that.
        assert_eq!(refused + timed_out, 50);
        assert!(
            timed_out >= 19 && refused >= 1,
            "{refused} refused, {timed_out} timed out"
        );
        // The slow clients' sockets are still open on their side; a normal request gets
        // through (retried while the server frees the places of the closed ones).
        eventually("a normal request gets through", WAIT, async || {
            let status = health(&host.base).await;
            assert!(
                matches!(
                    status,
                    None | Some(reqwest::StatusCode::OK | reqwest::StatusCode::SERVICE_UNAVAILABLE)
                ),
                "{status:?}"
            );
            ready(status == Some(reqwest::StatusCode::OK), status)
        })
        .await;
        drop(conns);

        // Protection off (a header timeout longer than the test): the slow connections
        // keep every place and a normal request is refused.
        let open = HostProcess::spawn(
            &[],
            &["--max-connections", "20", "--header-timeout", "600000ms"],
        )
        .await;
        let to = addr_of(&open.base);
        // More slow clients than places, as an attacker would open (so every place is held
        // even if the first ones came before the start check's place was freed).
        let mut conns = Vec::new();
        for _ in 0..25 {
            conns.push(slow_client(to, "127.0.0.1").await);
        }
        // A place freed after those connects (the start check's, which the host frees a
        // moment after its close) goes to one more slow client, until a new one is refused:
        // then every place is held. A place that frees only after that (1 run in 3 alone)
        // let the normal request in: the attacker then fills it too, and the request is
        // tried again, up to 5 times.
        let mut status = None;
        for _ in 0..5 {
            for _ in 0..20 {
                let mut more = slow_client(to, "127.0.0.1").await;
                match read_until_closed(&mut more, Duration::from_millis(500)).await {
                    Some(_) => break,
                    None => conns.push(more),
                }
            }
            dribble(&mut conns).await;
            status = health(&open.base).await;
            if status != Some(reqwest::StatusCode::OK) {
                break;
            }
        }
        assert!(
            matches!(
                status,
                None | Some(reqwest::StatusCode::SERVICE_UNAVAILABLE)
            ),
            "without the header timeout, slow clients hold every connection: {status:?}"
        );
    })
    .await;
}

/// One address cannot take every connection: slow clients from 127.0.0.2 get at most
/// `--max-connections-per-address` places (the rest a fast 503), and a client at another
/// address is answered while they stay open.
#[tokio::test]
async fn one_address_cannot_take_every_connection() {
    limit(async {
        let host = HostProcess::spawn(
            &[],
            &[
                "--max-connections",
                "20",
                "--max-connections-per-address",
                "5",
                "--header-timeout",
                "600000ms",
            ],
        )
        .await;
        let to = addr_of(&host.base);
        let mut conns = Vec::new();
        for _ in 0..20 {
            conns.push(slow_client(to, "127.0.0.2").await);
        }
        // The admitted ones stay open (no timer within the test); the others are answered.
        let answers = futures::future::join_all(
            conns
                .iter_mut()
                .map(|c| read_until_closed(c, Duration::from_secs(3))),
        )
        .await;
        let mut refused = 0;
        for text in answers.into_iter().flatten() {
            assert!(text.starts_with("HTTP/1.1 503"), "{text}");
            assert!(text.contains("this address"), "{text}");
            refused += 1;
        }
        assert_eq!(refused, 15, "5 admitted, 15 refused");
        assert_eq!(health(&host.base).await, Some(reqwest::StatusCode::OK));
    })
    .await;
}

/// An idle keep-alive connection is closed after the (here 500 ms) timeout; a client that
/// keeps it busy is served on it.
#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    limit(async {
        let host = HostProcess::spawn(&[], &["--header-timeout", "500ms"]).await;
        let mut s = TcpStream::connect(addr_of(&host.base)).await.unwrap();
        let req = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
        s.write_all(req).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf).await.unwrap();
        let first = String::from_utf8_lossy(&buf[..n]).to_string();
        assert!(first.starts_with("HTTP/1.1 200"), "{first}");
        assert!(!first.to_ascii_lowercase().contains("connection: close"));
        // Idle now: the server closes it (read sees the end), well within the test limit.
        let rest = read_until_closed(&mut s, Duration::from_secs(20))
            .await
            .expect("an idle keep-alive connection is closed by the server");
        assert!(!rest.contains("200 OK"), "{rest}");
    })
    .await;
}

fn with_token() -> Security {
    Security {
        credentials: vec![Credential {
            name: "ci".into(),
            secret: Secret::Bearer("the-right-token-0123456789".into()),
        }],
        api_key_header: "X-API-Key".into(),
        ..Security::default()
    }
}

async fn tasks_with(s: &TestServer, token: &str) -> reqwest::Response {
    s.client
        .get(format!("{}/a2a/rest/tasks", s.base))
        .header("authorization", format!("Bearer {token}"))
        .header("a2a-version", "1.0")
        .send()
        .await
        .expect("request")
}

/// 100 wrong tokens from one address: 401 until the budget (20 a minute) is spent, then 429
/// with Retry-After. A right token from the same address still works (successful callers
/// are never throttled by others' failures). With the throttle off, all 100 are 401.
#[tokio::test]
async fn failed_logins_are_throttled_per_address() {
    limit(async {
        let s = TestServer::with(Options {
            security: with_token(),
            host_limits: HostLimits {
                rate_per_minute: 0,
                auth_failures_per_minute: 20,
                ..HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        let mut statuses = Vec::new();
        let mut retry_after = None;
        for i in 0..100 {
            let r = tasks_with(&s, &format!("wrong-{i}")).await;
            if r.status() == 429 {
                retry_after = r.headers().get("retry-after").cloned();
            }
            statuses.push(r.status().as_u16());
        }
        assert!(statuses[..20].iter().all(|c| *c == 401), "{statuses:?}");
        assert!(statuses[20..].iter().all(|c| *c == 429), "{statuses:?}");
        let wait: u64 = retry_after
            .expect("Retry-After on 429")
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(wait >= 1);
        let ok = tasks_with(&s, "the-right-token-0123456789").await;
        assert_eq!(ok.status(), 200, "a valid credential is not throttled");
        s.shutdown().await;

        let off = TestServer::with(Options {
            security: with_token(),
            host_limits: HostLimits {
                rate_per_minute: 0,
                auth_failures_per_minute: 0,
                ..HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        for i in 0..100 {
            assert_eq!(tasks_with(&off, &format!("wrong-{i}")).await.status(), 401);
        }
        off.shutdown().await;
    })
    .await;
}

/// Settings that open the host are named in a warning at start.
#[tokio::test]
async fn risky_settings_are_warned_about_at_start() {
    limit(async {
        let host = HostProcess::spawn(
            &[
                ("AGENT_PUSH_KEY", &"5a".repeat(32)),
                ("AGENT_HOST_TOKEN", "a-long-enough-test-token-0123456789"),
            ],
            &[
                "--allowed-hosts",
                "*",
                "--allowed-origins",
                "*",
                "--push",
                "--push-allow-private",
                "--rate-limit",
                "0",
                "--auth-failures-per-minute",
                "0",
            ],
        )
        .await;
        let warnings: Vec<&String> = host
            .start_log
            .iter()
            .filter(|l| l.contains("WARN"))
            .collect();
        let has = |needle: &str| warnings.iter().any(|l| l.contains(needle));
        assert!(has("security.allowed_hosts"), "{warnings:#?}");
        assert!(has("security.allowed_origins"), "{warnings:#?}");
        assert!(has("push.allow_private"), "{warnings:#?}");
        assert!(has("not throttled"), "{warnings:#?}");
        // A host with the defaults says none of this.
        let quiet = HostProcess::spawn(&[], &[]).await;
        assert!(
            !quiet.start_log.iter().any(|l| l.contains("WARN")),
            "{:#?}",
            quiet.start_log
        );
    })
    .await;
}

/// A prompt that starts like an option reaches the agent as its prompt (after `--`), with
/// the built-in demo adapter and with the jsonl adapter running fake-agent: the answer
/// repeats it (`echo`). Without the `--` fake-agent stops with "unknown option".
#[tokio::test]
async fn a_prompt_that_looks_like_an_option_is_the_prompt() {
    limit(async {
        for adapter in ["demo", "jsonl"] {
            let s = TestServer::with(Options {
                adapter,
                ..Options::default()
            })
            .await;
            let v = s.rpc("SendMessage", send_params("--help echo")).await;
            let task = &v["result"]["task"];
            assert_eq!(
                task["status"]["state"], "TASK_STATE_COMPLETED",
                "{adapter}: {v}"
            );
            let answer = task["artifacts"].to_string();
            assert!(answer.contains("--help echo"), "{adapter}: {answer}");
            s.shutdown().await;
        }
    })
    .await;
}

/// A conversation's directory is checked at every turn: replaced by a symbolic link to a
/// folder outside the roots after the first turn, the next turn is refused (-32602) instead
/// of running there.
#[tokio::test]
async fn a_conversation_directory_swapped_for_a_symlink_is_refused() {
    limit(async {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let proj = root.path().join("proj");
        std::fs::create_dir(&proj).unwrap();
        let s = TestServer::with(Options {
            workspace_roots: vec![root.path().canonicalize().unwrap()],
            ..Options::default()
        })
        .await;
        let mut p = send_params("hello");
        p["message"]["metadata"] = serde_json::json!({"cwd": proj.canonicalize().unwrap()});
        p["message"]["contextId"] = serde_json::json!("ctx-swap");
        let v = s.rpc("SendMessage", p).await;
        assert_eq!(
            v["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{v}"
        );
        std::fs::remove_dir(&proj).unwrap();
        std::os::unix::fs::symlink(outside.path(), &proj).unwrap();
        let mut next = send_params("hello again");
        next["message"]["contextId"] = serde_json::json!("ctx-swap");
        let v = s.rpc("SendMessage", next).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        s.shutdown().await;
    })
    .await;
}

/// One message with more file parts than `limits.max_files_per_message` is refused with
/// -32602 naming the limit, and writes nothing.
#[tokio::test]
async fn files_per_message_are_capped() {
    limit(async {
        let s = TestServer::with(Options {
            host_limits: HostLimits {
                rate_per_minute: 0,
                max_files_per_message: 5,
                ..HostLimits::default()
            },
            ..Options::default()
        })
        .await;
        let mut p = send_params("files");
        let parts = p["message"]["parts"].as_array_mut().unwrap();
        for _ in 0..6 {
            parts.push(serde_json::json!({"raw": "AAE=", "mediaType": "application/octet-stream"}));
        }
        let v = s.rpc("SendMessage", p).await;
        assert_eq!(v["error"]["code"], -32602, "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_files_per_message"));
        assert!(!s.dir().join(".agent-host").exists());
        s.shutdown().await;
    })
    .await;
}
