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
    for _ in 0..10 {
        assert!(g.rate("x").is_ok());
    }
    assert!(g.rate("x").unwrap_err() >= 1);
    assert!(g.rate("y").is_ok(), "buckets are per credential");
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
