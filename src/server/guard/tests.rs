//! Unit tests of the request guard: each credential scheme, the Host allow-list, the
//! per-credential rate limit, and the throttling of failed authentications per address.
use super::*;
use crate::server::config::Credential;

fn guard(creds: Vec<Credential>) -> Guard {
    Guard::new(
        Security {
            credentials: creds,
            api_key_header: "X-API-Key".into(),
            ..Security::default()
        },
        "127.0.0.1:1".parse().unwrap(),
        None,
        2,
    )
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

#[test]
fn credentials_of_each_scheme() {
    let g = guard(vec![
        Credential {
            name: "ci".into(),
            secret: Secret::Bearer("tok-1".into()),
        },
        Credential {
            name: "bot".into(),
            secret: Secret::ApiKey("key-1".into()),
        },
        Credential {
            name: "alice".into(),
            secret: Secret::Basic {
                username: "alice".into(),
                password: "pw".into(),
            },
        },
    ]);
    let basic = base64::engine::general_purpose::STANDARD.encode("alice:pw");
    assert_eq!(
        g.authenticate(&headers(&[("authorization", "Bearer tok-1")])),
        Ok(Some("ci".into()))
    );
    assert_eq!(
        g.authenticate(&headers(&[("x-api-key", "key-1")])),
        Ok(Some("bot".into()))
    );
    assert_eq!(
        g.authenticate(&headers(&[("authorization", &format!("Basic {basic}"))])),
        Ok(Some("alice".into()))
    );
    assert!(g
        .authenticate(&headers(&[("authorization", "Bearer tok-2")]))
        .is_err());
    assert!(g
        .authenticate(&headers(&[("authorization", "Basic tok-1")]))
        .is_err());
    assert!(g.authenticate(&headers(&[])).is_err());
    assert!(guard(vec![]).authenticate(&headers(&[])) == Ok(None));
}

#[test]
fn hosts_and_rate() {
    let g = guard(vec![]);
    assert!(g.host_allowed(&headers(&[("host", "127.0.0.1:41242")])));
    assert!(g.host_allowed(&headers(&[("host", "localhost")])));
    assert!(g.host_allowed(&headers(&[("host", "[::1]:8080")])));
    assert!(!g.host_allowed(&headers(&[("host", "evil.example")])));
    assert!(!g.host_allowed(&headers(&[("host", "evil.example:41242")])));
    // Rate: a burst of max(10, rate) then refusals with a wait.
    let key = |name: &str| RateKey::of(Some(name), None);
    for _ in 0..10 {
        assert!(g.rate(&key("x"), 1.0).is_ok());
    }
    assert!(g.rate(&key("x"), 1.0).unwrap_err() >= 1);
    assert!(g.rate(&key("y"), 1.0).is_ok(), "buckets are per credential");
    assert!(ct_eq("abc", "abc") && !ct_eq("abc", "abd") && !ct_eq("abc", "abcd"));
}

#[test]
fn failures_are_throttled_per_address_and_logged_once() {
    let g = guard(vec![]).with_auth_failures_per_minute(5);
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    for _ in 0..5 {
        assert!(g.failed(a).is_ok());
    }
    let (wait, first) = g.failed(a).unwrap_err();
    assert!(wait >= 1 && first);
    assert!(!g.failed(a).unwrap_err().1, "logged once per window");
    assert!(g.failed("10.0.0.2".parse().unwrap()).is_ok(), "per address");
    assert!(guard(vec![]).failed(a).is_ok(), "0 = no limit");
}

/// A guard with the default rate limit (`[server] rate_limit`).
fn default_rate() -> Guard {
    Guard::new(
        Security::default(),
        "127.0.0.1:41242".parse().unwrap(),
        None,
        crate::engine::HostLimits::default().rate_per_minute,
    )
}

#[test]
fn callers_without_credentials_are_limited_per_address() {
    let g = default_rate();
    let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let t0 = Instant::now();
    let flood = (0..5000)
        .filter(|_| g.rate_at(&RateKey::of(None, Some(a)), 1.0, t0).is_ok())
        .count();
    let burst = crate::engine::HostLimits::default().rate_per_minute as usize;
    assert_eq!(
        flood, burst,
        "a flood of sends from one address is stopped at the burst"
    );
    assert!(
        g.rate_at(&RateKey::of(None, Some(b)), 1.0, t0).is_ok(),
        "another address keeps its own share"
    );
    assert_ne!(RateKey::of(None, Some(a)), RateKey::of(Some("a"), Some(a)));
}

/// One orchestrator without credentials, as the host's callers drive it: 20 tasks at a time,
/// each polled once a second, a send and an answer per task every 3 seconds (tasks of a
/// second), a cancel now and then; 15 minutes on the default limit. Sends, answers and cancels are writes; polls
/// are reads.
#[test]
fn an_orchestrator_at_full_tilt_is_never_refused_on_the_defaults() {
    let g = default_rate();
    let key = RateKey::of(None, Some("127.0.0.1".parse().unwrap()));
    let t0 = Instant::now();
    let mut refused = 0;
    let mut charged = 0;
    for second in 0..15 * 60u64 {
        let now = t0 + Duration::from_secs(second);
        let writes =
            if second.is_multiple_of(3) { 40 } else { 0 } + u32::from(second.is_multiple_of(30));
        for _ in 0..writes {
            refused += usize::from(g.rate_at(&key, 1.0, now).is_err());
        }
        for _ in 0..20 {
            refused += usize::from(g.rate_at(&key, READ_COST, now).is_err());
        }
        charged += writes + 20;
    }
    assert_eq!(refused, 0, "of {charged} requests");
    // The same load with every request charged as a send runs dry within the first minutes.
    let g = default_rate();
    let dry = (0..15 * 60u64)
        .flat_map(|s| (0..34).map(move |_| s))
        .filter(|s| g.rate_at(&key, 1.0, t0 + Duration::from_secs(*s)).is_err())
        .count();
    assert!(dry > 1000, "{dry} refused when reads cost a send");
}

#[test]
fn reads_and_writes_are_told_apart() {
    use axum::http::Method as M;
    assert_eq!(weight_of(&M::GET, "/tasks/abc"), Weight::Read);
    assert_eq!(
        weight_of(&M::POST, "/"),
        Weight::Read,
        "JSON-RPC: its handler charges writes"
    );
    assert_eq!(weight_of(&M::POST, "/a2a/jsonrpc"), Weight::Read);
    assert_eq!(weight_of(&M::POST, "/agents/codex"), Weight::Read);
    assert_eq!(weight_of(&M::POST, "/agents/codex/a2a"), Weight::Read);
    assert_eq!(weight_of(&M::POST, "/v1/tasks/abc:subscribe"), Weight::Read);
    assert_eq!(weight_of(&M::POST, "/message:send"), Weight::Write);
    assert_eq!(weight_of(&M::POST, "/tasks/abc:cancel"), Weight::Write);
    assert_eq!(
        weight_of(&M::POST, "/agents/codex/message:stream"),
        Weight::Write
    );
    assert_eq!(
        weight_of(&M::POST, "/mcp"),
        Weight::Read,
        "MCP: its front layer charges the calls that start or change work"
    );
    assert_eq!(
        weight_of(&M::DELETE, "/tasks/a/pushNotificationConfigs/b"),
        Weight::Write
    );
}
