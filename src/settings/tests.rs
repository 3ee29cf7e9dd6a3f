//! Tests of the parent module.

use super::args::parse_bool;
use super::*;

#[test]
fn defaults() {
    let s = Settings::resolve(&ServeArgs::default()).unwrap();
    assert_eq!(s.bind, "127.0.0.1:41242".parse().unwrap());
    let l = s.limits.resolve(&crate::adapter::Limits::default());
    assert_eq!(l.timeout, Duration::from_secs(1800));
    assert_eq!(l.idle_timeout, Duration::from_secs(600));
    assert_eq!(l.cancel_grace, Duration::from_secs(5));
    // An adapter's limits apply where the configuration says nothing, not over it.
    let adapter = crate::adapter::Limits {
        timeout_ms: Some(1000),
        idle_timeout_ms: Some(2000),
        ..Default::default()
    };
    let mut configured = s.limits.clone();
    configured.idle_timeout = Some(Duration::from_secs(7));
    let l = configured.resolve(&adapter);
    assert_eq!(l.timeout, Duration::from_secs(1));
    assert_eq!(l.idle_timeout, Duration::from_secs(7));
    assert!(!s.force);
    assert!(s.card_legacy_v03);
    assert_eq!(s.blocking_wait, None);
}

#[test]
fn blocking_wait_from_file_and_flag() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "[server]\nblocking_wait_ms = 30000\n").unwrap();
    let args = ServeArgs {
        config: Some(p),
        ..ServeArgs::default()
    };
    let s = Settings::resolve(&args).unwrap();
    assert_eq!(s.blocking_wait, Some(Duration::from_secs(30)));
    // The flag wins; 0 means no cap.
    let off = ServeArgs {
        blocking_wait_ms: Some(0),
        ..args
    };
    assert_eq!(Settings::resolve(&off).unwrap().blocking_wait, None);
}

#[test]
fn card_signing() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    let key = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/keys/es256.pem");
    std::fs::write(
        &p,
        format!("[card]\nsign_alg = \"ES256\"\nsign_key = \"{key}\"\nsign_kid = \"k1\"\n"),
    )
    .unwrap();
    let args = ServeArgs {
        config: Some(p.clone()),
        ..ServeArgs::default()
    };
    let signer = Settings::resolve(&args).unwrap().card_signer.unwrap();
    assert_eq!((signer.alg().name(), signer.kid()), ("ES256", "k1"));
    // Flags win over the file.
    let hs = ServeArgs {
        card_sign_alg: Some("hs256".into()),
        card_sign_key: Some("secret".into()),
        ..args.clone()
    };
    assert_eq!(
        Settings::resolve(&hs)
            .unwrap()
            .card_signer
            .unwrap()
            .alg()
            .name(),
        "HS256"
    );
    let err = |a: ServeArgs| Settings::resolve(&a).unwrap_err().to_string();
    let bad_alg = ServeArgs {
        card_sign_alg: Some("none".into()),
        ..args.clone()
    };
    assert!(err(bad_alg).contains("unknown signing algorithm"));
    let missing = ServeArgs {
        card_sign_key: Some("/nonexistent.pem".into()),
        ..args.clone()
    };
    assert!(err(missing).contains("/nonexistent.pem"));
    let wrong = ServeArgs {
        card_sign_alg: Some("RS256".into()),
        ..args.clone()
    };
    assert!(err(wrong).contains("bad RS256 key"));
    let no_alg = ServeArgs {
        card_sign_key: Some("x".into()),
        ..ServeArgs::default()
    };
    assert!(err(no_alg).contains("no algorithm"));
    assert!(Settings::resolve(&ServeArgs::default())
        .unwrap()
        .card_signer
        .is_none());
}

#[test]
fn file_under_flags() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(
        &p,
        "[server]\nport = 9000\nbind = \"0.0.0.0\"\n[agent]\ntimeout_ms = 5000\nforce = true\nargs = [\"-v\"]\n[card]\nlegacy_v03_fields = false\n",
    )
    .unwrap();
    let mut args = ServeArgs {
        config: Some(p.clone()),
        insecure_no_auth: true,
        ..ServeArgs::default()
    };
    let s = Settings::resolve(&args).unwrap();
    assert_eq!(s.bind, "0.0.0.0:9000".parse().unwrap());
    assert_eq!(s.limits.timeout, Some(Duration::from_secs(5)));
    assert!(s.force);
    assert_eq!(s.args, ["-v"]);
    assert!(!s.card_legacy_v03);
    args.port = Some(9100);
    args.force = Some(false);
    args.agent_args = Some("--a 'b c'".into());
    let s = Settings::resolve(&args).unwrap();
    assert_eq!(s.bind.port(), 9100);
    assert!(!s.force);
    assert_eq!(s.args, ["--a", "b c"]);
}

#[test]
fn errors_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "[agent]\ntimeout = 5\n").unwrap();
    let err = Settings::resolve(&ServeArgs {
        config: Some(p),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("timeout") && err.contains("line 2"), "{err}");
    let err = Settings::resolve(&ServeArgs {
        bind: Some("nonsense".into()),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("nonsense"), "{err}");
    let err = Settings::resolve(&ServeArgs {
        timeout_ms: Some(0),
        ..ServeArgs::default()
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("AGENT_TIMEOUT_MS"), "{err}");
}

#[test]
fn input_modes_from_file_and_flags() {
    let s = Settings::resolve(&ServeArgs::default()).unwrap();
    assert_eq!(s.input_modes, ["text/plain", "application/json", "*/*"]);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "[agent]\ninput_modes = [\"text/plain\", \"image/*\"]\n").unwrap();
    let mut args = ServeArgs {
        config: Some(p),
        ..ServeArgs::default()
    };
    assert_eq!(
        Settings::resolve(&args).unwrap().input_modes,
        ["text/plain", "image/*"]
    );
    args.input_modes = Some(vec![" text/plain".into(), "application/pdf ".into()]);
    assert_eq!(
        Settings::resolve(&args).unwrap().input_modes,
        ["text/plain", "application/pdf"]
    );
    args.input_modes = Some(vec!["text/plain".into(), "png".into()]);
    let err = Settings::resolve(&args).unwrap_err().to_string();
    assert!(
        err.contains("AGENT_INPUT_MODES") && err.contains("'png'"),
        "{err}"
    );
    args.input_modes = Some(vec![String::new()]);
    let err = Settings::resolve(&args).unwrap_err().to_string();
    assert!(err.contains("empty"), "{err}");
}

#[test]
fn store_choices() {
    assert_eq!(parse_store("memory").unwrap(), StoreChoice::Memory);
    assert_eq!(
        parse_store("sqlite:/tmp/x.db").unwrap(),
        StoreChoice::Sqlite(PathBuf::from("/tmp/x.db"))
    );
    match parse_store("sqlite").unwrap() {
        StoreChoice::Sqlite(p) => assert!(p.ends_with("agent-host/agent-host.db"), "{p:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        parse_store("postgres://root@127.0.0.1:5432/test").unwrap(),
        StoreChoice::Postgres("postgres://root@127.0.0.1:5432/test".into())
    );
    let bad = parse_store("postgres://x:notaport/db")
        .unwrap_err()
        .to_string();
    assert!(bad.contains("PostgreSQL URL"), "{bad}");
    assert!(parse_store("mysql://x").is_err());
}

#[test]
fn bind_forms() {
    assert_eq!(
        parse_bind("0.0.0.0:8080", 1).unwrap(),
        "0.0.0.0:8080".parse().unwrap()
    );
    assert_eq!(
        parse_bind("127.0.0.1", 7).unwrap(),
        "127.0.0.1:7".parse().unwrap()
    );
    assert_eq!(
        parse_bind("[::1]:9", 7).unwrap(),
        "[::1]:9".parse().unwrap()
    );
    assert_eq!(parse_bind("::1", 7).unwrap(), "[::1]:7".parse().unwrap());
    assert_eq!(
        parse_bind("localhost", 7).unwrap(),
        "127.0.0.1:7".parse().unwrap()
    );
    assert_eq!(
        parse_bind("localhost:8", 7).unwrap(),
        "127.0.0.1:8".parse().unwrap()
    );
    assert!(parse_bool("yes").unwrap());
    assert!(!parse_bool("0").unwrap());
    assert!(parse_bool("maybe").is_err());
}

#[test]
fn the_card_provider_comes_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    let args = ServeArgs {
        config: Some(path.clone()),
        ..ServeArgs::default()
    };
    std::fs::write(&path, "[card]\n").unwrap();
    let s = Settings::resolve(&args).unwrap();
    assert_eq!(s.card_provider.organization, DEFAULT_PROVIDER_ORG);
    std::fs::write(
        &path,
        "[card]\nprovider_organization = \"Example Corp\"\nprovider_url = \"https://example.com\"\n",
    )
    .unwrap();
    let s = Settings::resolve(&args).unwrap();
    assert_eq!(
        (
            s.card_provider.organization.as_str(),
            s.card_provider.url.as_str()
        ),
        ("Example Corp", "https://example.com")
    );
    std::fs::write(&path, "[card]\nprovider_url = \"https://example.com\"\n").unwrap();
    let err = Settings::resolve(&args).unwrap_err().to_string();
    assert!(err.contains("set both or neither"), "{err}");
}

#[test]
fn a_missing_repo_path_is_named_as_given() {
    let args = ServeArgs {
        repo_path: Some("/nonexistent/agent-host-test".into()),
        ..ServeArgs::default()
    };
    let err = Settings::resolve(&args).unwrap_err().to_string();
    assert!(
        err.contains("--repo-path '/nonexistent/agent-host-test' is not a directory"),
        "{err}"
    );
}

#[test]
fn the_console_is_on_for_loopback_binds_unless_set() {
    let s = Settings::resolve(&ServeArgs::default()).unwrap();
    assert!(s.ui, "on by default on 127.0.0.1");
    let open = ServeArgs {
        bind: Some("0.0.0.0".into()),
        ..ServeArgs::default()
    };
    assert!(
        !Settings::resolve(&open).unwrap().ui,
        "off by default on 0.0.0.0"
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, "[server]\nbind = \"0.0.0.0\"\nui = true\n").unwrap();
    let file = ServeArgs {
        config: Some(p),
        ..ServeArgs::default()
    };
    assert!(Settings::resolve(&file).unwrap().ui);
    let flag = ServeArgs {
        ui: Some(false),
        ..ServeArgs::default()
    };
    assert!(!Settings::resolve(&flag).unwrap().ui);
}

#[test]
fn push_claim_lease_from_file_and_longer_than_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    let with = |toml: &str| {
        std::fs::write(&p, toml).unwrap();
        Settings::resolve(&ServeArgs {
            config: Some(p.clone()),
            ..ServeArgs::default()
        })
    };
    let s = with("[push]\nenabled = true\nkey_file = \"k\"\n").unwrap();
    assert_eq!(
        s.push.unwrap().delivery.claim_lease,
        Duration::from_secs(30)
    );
    let s = with("[push]\nenabled = true\nkey_file = \"k\"\nclaim_lease_ms = 45000\n").unwrap();
    assert_eq!(
        s.push.unwrap().delivery.claim_lease,
        Duration::from_secs(45)
    );
    // A claim that could expire during one webhook request is refused.
    let err = with(
        "[push]\nenabled = true\nkey_file = \"k\"\ntimeout_ms = 20000\nclaim_lease_ms = 20000\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("claim_lease_ms") && err.contains("timeout_ms"),
        "{err}"
    );
}
