//! Tests of the parent module.

use super::resolve::{hidden, parse_bind, parse_disable, DEFAULT_PROVIDER_ORG};
use super::store::parse_store;
use super::*;
use crate::runner::sandbox::{Mode, Piece};

fn flags(f: &[&str]) -> ServeArgs {
    ServeArgs::from_flags(f).unwrap()
}

fn resolve(f: &[&str]) -> Result<Settings, SettingsError> {
    Settings::resolve(&flags(f))
}

/// The settings from `toml` as the config file, and the extra flags.
fn with_file(toml: &str, extra: &[&str]) -> Result<Settings, SettingsError> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, toml).unwrap();
    let mut f = vec!["--config", p.to_str().unwrap()];
    f.extend_from_slice(extra);
    resolve(&f)
}

#[test]
fn defaults() {
    let s = resolve(&[]).unwrap();
    assert_eq!(s.bind, "127.0.0.1:41242".parse().unwrap());
    let l = s.limits.resolve(&crate::adapter::Limits::default());
    assert_eq!(l.timeout, Duration::from_secs(1800));
    assert_eq!(l.idle_timeout, Duration::from_secs(600));
    assert_eq!(l.cancel_grace, Duration::from_secs(5));
    // An adapter's limits apply where the configuration says nothing, not over it.
    let adapter = crate::adapter::Limits {
        timeout: Some(crate::units::Dur::from_secs(1)),
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
    assert_eq!(s.body_limit, DEFAULT_BODY_LIMIT);
    assert_eq!(s.input_modes, ["text/plain", "application/json", "*/*"]);
}

/// The types' own defaults (which tests and embedding programs start from) are what the
/// declarations give.
#[test]
fn declared_defaults_match_the_types_defaults() {
    let s = resolve(&["--push"]).unwrap();
    assert_eq!(s.host_limits, HostLimits::default());
    assert_eq!(s.conn_limits, crate::server::listen::ConnLimits::default());
    assert_eq!(s.cluster, cluster::ClusterSettings::default());
    let push = s.push.unwrap().delivery;
    let d = crate::push::PushSettings::default();
    assert_eq!(
        (
            push.max_attempts,
            push.timeout,
            push.max_configs_per_task,
            push.claim_lease
        ),
        (
            d.max_attempts,
            d.timeout,
            d.max_configs_per_task,
            d.claim_lease
        )
    );
    assert_eq!(s.retention, RetentionSettings::default());
}

#[test]
fn blocking_wait_from_file_and_flag() {
    let s = with_file("[server]\nblocking_wait = \"30s\"\n", &[]).unwrap();
    assert_eq!(s.blocking_wait, Some(Duration::from_secs(30)));
    // The flag wins; 0 means no cap.
    let s = with_file(
        "[server]\nblocking_wait = \"30s\"\n",
        &["--blocking-wait", "0"],
    )
    .unwrap();
    assert_eq!(s.blocking_wait, None);
}

#[test]
fn card_signing() {
    let key = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/keys/es256.pem");
    let file = format!("[card]\nsign_alg = \"ES256\"\nsign_key = \"{key}\"\nsign_kid = \"k1\"\n");
    let signer = with_file(&file, &[]).unwrap().card_signer.unwrap();
    assert_eq!((signer.alg().name(), signer.kid()), ("ES256", "k1"));
    // Flags win over the file.
    let hs = with_file(
        &file,
        &["--card-sign-alg", "hs256", "--card-sign-key", "secret"],
    )
    .unwrap();
    assert_eq!(hs.card_signer.unwrap().alg().name(), "HS256");
    let err = |extra: &[&str]| with_file(&file, extra).unwrap_err().to_string();
    assert!(err(&["--card-sign-alg", "none"]).contains("unknown signing algorithm"));
    assert!(err(&["--card-sign-key", "/nonexistent.pem"]).contains("/nonexistent.pem"));
    assert!(err(&["--card-sign-alg", "RS256"]).contains("bad RS256 key"));
    let no_alg = resolve(&["--card-sign-key", "x"]).unwrap_err().to_string();
    assert!(no_alg.contains("no algorithm"));
    assert!(resolve(&[]).unwrap().card_signer.is_none());
}

#[test]
fn file_under_flags() {
    let toml = "[server]\nport = 9000\nbind = \"0.0.0.0\"\n[limits]\ntimeout = \"5s\"\n[agent]\nforce = true\nargs = [\"-v\"]\n[card]\nlegacy_v03_fields = false\n";
    let s = with_file(toml, &["--insecure-no-auth"]).unwrap();
    assert_eq!(s.bind, "0.0.0.0:9000".parse().unwrap());
    assert_eq!(s.limits.timeout, Some(Duration::from_secs(5)));
    assert!(s.force);
    assert_eq!(s.args, ["-v"]);
    assert!(!s.card_legacy_v03);
    let s = with_file(
        toml,
        &[
            "--port",
            "9100",
            "--force=false",
            "--args",
            "--a 'b c'",
            "--card-legacy-v03",
        ],
    )
    .unwrap();
    assert_eq!(s.bind.port(), 9100);
    assert!(!s.force);
    assert_eq!(s.args, ["--a", "b c"]);
    assert!(s.card_legacy_v03);
}

/// A flag given at its default value still wins over the file (what counts is that it was
/// given, not its value).
#[test]
fn a_flag_at_its_default_value_wins_over_the_file() {
    let s = with_file(
        "[limits]\nmax_running_tasks = 3\n",
        &["--max-running-tasks", "16"],
    )
    .unwrap();
    assert_eq!(s.host_limits.max_running, 16);
    let s = with_file("[limits]\nmax_running_tasks = 3\n", &[]).unwrap();
    assert_eq!(s.host_limits.max_running, 3);
}

#[test]
fn errors_name_the_file_key_and_the_units() {
    let e = with_file("[agent]\ntimeout = 5\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("[agent] has no key 'timeout'"), "{e}");
    let e = with_file("[limits]\ntimeout = 5000\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[limits] timeout") && e.contains("no unit"),
        "{e}"
    );
    let e = with_file("[limits]\nmax_queued_tasks = \"many\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("[limits] max_queued_tasks"), "{e}");
    let e = with_file("[nonsense]\n", &[]).unwrap_err().to_string();
    assert!(e.contains("unknown section [nonsense]"), "{e}");
    assert!(with_file("[server]\nsse_keepalive_ms = 15000\n", &[])
        .unwrap()
        .notices[0]
        .contains("remove it"));
    let e = with_file("[server]\nsse_keepalive_ms = 1000\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no longer a setting") && e.contains("15s"),
        "{e}"
    );
    let e = resolve(&["--bind", "nonsense"]).unwrap_err().to_string();
    assert!(e.contains("nonsense"), "{e}");
    let e = resolve(&["--timeout", "0s"]).unwrap_err().to_string();
    assert_eq!(e, "--timeout must be greater than 0");
    let e = with_file("[limits]\ntimeout = \"0s\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("[limits] timeout must"), "{e}");
    // An old key is named as the file has it.
    let e = with_file("[agent]\ntimeout_ms = \"abc\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[agent] timeout_ms (read as [limits] timeout)"),
        "{e}"
    );
    let e = ServeArgs::from_flags(["--timeout", "30"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("no unit"), "{e}");
}

/// The old config file (today's keys and integer milliseconds) gives the same settings as
/// the new one, with a notice per old key.
#[test]
fn an_old_config_file_gives_the_same_settings_as_the_new_one() {
    let root = env!("CARGO_MANIFEST_DIR");
    let old = flags(&[
        "--config",
        &format!("{root}/tests/fixtures/config/old-agent-host.toml"),
    ]);
    let new = flags(&["--config", &format!("{root}/config/agent-host.toml")]);
    let (old, new) = (
        Settings::resolve(&old).unwrap(),
        Settings::resolve(&new).unwrap(),
    );
    assert_eq!(
        format!("{:?}", without_notices(old.clone())),
        format!("{:?}", without_notices(new.clone()))
    );
    assert!(new.notices.is_empty(), "{:?}", new.notices);
    assert!(
        old.notices
            .iter()
            .any(|n| n.contains("[server] body_limit_bytes") && n.contains("[server] body_limit;")),
        "{:?}",
        old.notices
    );
    let s = with_file(
        "[agent]\ntimeout_ms = 5000\n[limits]\ntask_memory = \"1G\"\n[cluster]\nlease_ms = 20000\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.limits.timeout, Some(Duration::from_secs(5)));
    assert_eq!(s.sandbox.memory, Some(1 << 30));
    assert_eq!(s.cluster.lease, Duration::from_secs(20));
    // Both names: the new one is kept.
    let s = with_file(
        "[agent]\ntimeout_ms = 5000\n[limits]\ntimeout = \"1m\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(s.limits.timeout, Some(Duration::from_secs(60)));
    assert!(
        s.notices.iter().any(|n| n.contains("ignored")),
        "{:?}",
        s.notices
    );
}

/// Without what names the file itself (the notices, the config file the sandbox hides).
fn without_notices(mut s: Settings) -> Settings {
    s.notices.clear();
    s.sandbox.hide.clear();
    s
}

#[test]
fn input_modes_from_file_and_flags() {
    let file = "[agent]\ninput_modes = [\"text/plain\", \"image/*\"]\n";
    assert_eq!(
        with_file(file, &[]).unwrap().input_modes,
        ["text/plain", "image/*"]
    );
    assert_eq!(
        with_file(file, &["--input-modes", " text/plain,application/pdf "])
            .unwrap()
            .input_modes,
        ["text/plain", "application/pdf"]
    );
    let err = with_file(file, &["--input-modes", "text/plain,png"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--input-modes") && err.contains("'png'"),
        "{err}"
    );
    let err = with_file(file, &["--input-modes", ""])
        .unwrap_err()
        .to_string();
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
    let sa = |s: &str| -> std::net::SocketAddr { s.parse().unwrap() };
    assert_eq!(parse_bind("0.0.0.0:8080", 1).unwrap(), sa("0.0.0.0:8080"));
    assert_eq!(parse_bind("127.0.0.1", 7).unwrap(), sa("127.0.0.1:7"));
    assert_eq!(parse_bind("[::1]:9", 7).unwrap(), sa("[::1]:9"));
    assert_eq!(parse_bind("::1", 7).unwrap(), sa("[::1]:7"));
    assert_eq!(parse_bind("localhost", 7).unwrap(), sa("127.0.0.1:7"));
    assert_eq!(parse_bind("localhost:8", 7).unwrap(), sa("127.0.0.1:8"));
}

#[test]
fn booleans_take_the_usual_words() {
    assert!(resolve(&["--force=yes"]).unwrap().force);
    assert!(resolve(&["--force"]).unwrap().force);
    assert!(!resolve(&["--force=0"]).unwrap().force);
    assert!(ServeArgs::from_flags(["--force=maybe"]).is_err());
}

#[test]
fn the_card_provider_comes_from_the_config_file() {
    let s = with_file("[card]\n", &[]).unwrap();
    assert_eq!(s.card_provider.organization, DEFAULT_PROVIDER_ORG);
    let s = with_file(
        "[card]\nprovider_organization = \"Example Corp\"\nprovider_url = \"https://example.com\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        (
            s.card_provider.organization.as_str(),
            s.card_provider.url.as_str()
        ),
        ("Example Corp", "https://example.com")
    );
    let err = with_file("[card]\nprovider_url = \"https://example.com\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("set both or neither"), "{err}");
}

#[test]
fn a_missing_repo_path_is_named_as_given() {
    let err = resolve(&["--repo-path", "/nonexistent/agent-host-test"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--repo-path '/nonexistent/agent-host-test' is not a directory"),
        "{err}"
    );
    let err = with_file("[agent]\nrepo_path = \"/nonexistent/x\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("[agent] repo_path '/nonexistent/x'"), "{err}");
}

#[test]
fn the_console_is_on_for_loopback_binds_unless_set() {
    assert!(resolve(&[]).unwrap().ui, "on by default on 127.0.0.1");
    assert!(
        !resolve(&["--bind", "0.0.0.0"]).unwrap().ui,
        "off by default on 0.0.0.0"
    );
    assert!(
        with_file("[server]\nbind = \"0.0.0.0\"\nui = true\n", &[])
            .unwrap()
            .ui
    );
    assert!(!resolve(&["--ui=false"]).unwrap().ui);
}

#[test]
fn push_claim_lease_is_at_least_three_request_timeouts() {
    let s = with_file("[push]\nenabled = true\nkey_file = \"k\"\n", &[]).unwrap();
    assert_eq!(
        s.push.unwrap().delivery.claim_lease,
        Duration::from_secs(30)
    );
    let s = with_file(
        "[push]\nenabled = true\nkey_file = \"k\"\ntimeout = \"20s\"\n",
        &[],
    )
    .unwrap();
    assert_eq!(
        s.push.unwrap().delivery.claim_lease,
        Duration::from_secs(60)
    );
}

#[test]
fn sandbox_values_are_checked_and_named() {
    let e = resolve(&["--sandbox", "maybe"]).unwrap_err().to_string();
    assert!(e.contains("auto, required, off"), "{e}");
    assert!(ServeArgs::from_flags(["--task-memory", "lots"]).is_err());
    let s = resolve(&["--sandbox", "off", "--task-memory", "256M"]).unwrap();
    assert_eq!(
        (s.sandbox.mode, s.sandbox.memory),
        (Some(Mode::Off), Some(256 << 20))
    );
    let s = resolve(&["--sandbox-disable", "cgroup, bubblewrap,cgroup"]).unwrap();
    assert_eq!(s.sandbox.disable, [Piece::Cgroup, Piece::Bwrap]);
    let e = parse_disable(&["seccomp".into()]).unwrap_err();
    assert!(e.contains("cgroup, bwrap, landlock"), "{e}");
    let e = resolve(&["--task-cpu-weight", "0"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("--task-cpu-weight"), "{e}");
    let e = with_file("[sandbox]\ncpu_weight = 0\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("[sandbox] cpu_weight"), "{e}");
}

#[test]
fn a_database_folder_is_hidden_whole_unless_the_work_is_inside_it() {
    let h = hidden(
        &[
            PathBuf::from("/data/ah/agent-host.db"),
            PathBuf::from("/etc/ah.toml"),
        ],
        std::path::Path::new("/src/repo"),
    );
    assert_eq!(
        h,
        [PathBuf::from("/data/ah"), PathBuf::from("/etc/ah.toml")]
    );
    let h = hidden(&[PathBuf::from("/w/tasks.db")], std::path::Path::new("/w"));
    assert!(h.contains(&PathBuf::from("/w/tasks.db")));
    assert!(h.contains(&PathBuf::from("/w/tasks.db-wal")));
    assert!(!h.contains(&PathBuf::from("/w")));
}

#[test]
fn cluster_defaults_flags_and_checks() {
    let s = resolve(&[]).unwrap().cluster;
    let bound: std::net::SocketAddr = "127.0.0.1:4000".parse().unwrap();
    assert_eq!(
        s.host_id_for(bound),
        format!("{}:4000", cluster::machine_name())
    );
    assert_eq!(s.address_for(bound), "http://127.0.0.1:4000");
    let file = "[cluster]\nhost_id = \"file\"\nadvertise_url = \"https://a.example/\"\nheartbeat = \"500ms\"\nlease = \"3s\"\n";
    let s = with_file(file, &["--host-id", "flag"]).unwrap().cluster;
    assert_eq!(s.host_id_for(bound), "flag");
    assert_eq!(s.address_for(bound), "https://a.example");
    assert_eq!(
        (s.heartbeat, s.lease),
        (Duration::from_millis(500), Duration::from_secs(3))
    );
    for bad in [
        &["--host-id", "a b"][..],
        &["--advertise-url", "ftp://x"],
        &["--heartbeat", "50ms"],
        &["--lease", "3s"],
    ] {
        assert!(resolve(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn retention_from_flags_and_file() {
    let s = with_file("[retention]\nmax_age = \"30d\"\nmax_tasks = 0\n", &[]).unwrap();
    assert_eq!(s.retention.max_age, Some(Duration::from_secs(30 * 86_400)));
    assert_eq!(s.retention.max_tasks, None);
    let s = with_file(
        "[retention]\nmax_age = \"30d\"\n",
        &["--retention-max-age", "off", "--retention-max-tasks", "5"],
    )
    .unwrap();
    assert_eq!(
        (s.retention.max_age, s.retention.max_tasks),
        (None, Some(5))
    );
    let e = with_file("[retention]\nmax_age = \"soon\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("[retention] max_age"), "{e}");
}

#[test]
fn credentials_from_flags_and_file() {
    let s = with_file(
        "[auth]\ntokens = [{ name = \"ci\", token = \"t1\" }]\nbasic = [{ name = \"al\", username = \"al\", password = \"pw\" }]\n",
        &["--token", "flagtoken"],
    )
    .unwrap();
    let names: Vec<&str> = s
        .security
        .credentials
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["token", "ci", "al"]);
    assert_eq!(s.security.api_key_header, "X-API-Key");
    let e = with_file("[auth]\ntokens = [{ name = \"ci\", token = \"\" }]\n", &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("'ci' is empty"), "{e}");
}

/// Counts whose help says "at least 1" refuse 0, naming the setting as given; the live
/// tasks are at least the running ones; the card's URL is an http(s) URL.
#[test]
fn counts_and_urls_are_checked_and_named_as_given() {
    for (flag, id) in [
        ("--max-running-tasks", "max_running_tasks"),
        ("--max-files-per-message", "max_files_per_message"),
        ("--push-max-configs-per-task", "max_configs_per_task"),
    ] {
        let e = resolve(&[flag, "0"]).unwrap_err().to_string();
        assert_eq!(e, format!("{flag} must be at least 1"));
        let section = if id == "max_configs_per_task" {
            "push"
        } else {
            "limits"
        };
        let e = with_file(&format!("[{section}]\n{id} = 0\n"), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("[{section}] {id} must be at least 1")),
            "{e}"
        );
    }
    let e = resolve(&["--max-live-tasks", "1", "--max-running-tasks", "4"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--max-live-tasks (1) must be at least --max-running-tasks (4)"),
        "{e}"
    );
    assert!(resolve(&["--max-live-tasks", "4", "--max-running-tasks", "4"]).is_ok());
    // Left at its default (64), the live limit rises to the running one.
    let s = resolve(&["--max-running-tasks", "100"]).unwrap();
    assert_eq!(s.host_limits.max_live, 100);
    let e = resolve(&["--public-url", "notaurl"])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--public-url 'notaurl' is not an http:// or https:// URL"),
        "{e}"
    );
    let s = resolve(&["--public-url", "https://agents.example.com/a2a"]).unwrap();
    assert_eq!(
        s.public_url.as_deref(),
        Some("https://agents.example.com/a2a")
    );
    let e = with_file("[log]\nformat = \"xml\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("[log] format 'xml'") && e.contains("text"),
        "{e}"
    );
}

/// The annotated example config file changes nothing, as it says: the same settings as no
/// file, also beside flags that a key set in it would contradict (a `max_live_tasks` set
/// below `--max-running-tasks` is refused) and where an adapter's own value would lose to
/// one set there (`[sandbox] mode`).
#[test]
fn the_example_config_file_changes_nothing() {
    let example = format!("{}/config/agent-host.toml", env!("CARGO_MANIFEST_DIR"));
    let loads: [&[&str]; 2] = [&[], &["--max-running-tasks", "100"]];
    for extra in loads {
        let mut with = vec!["--config", example.as_str()];
        with.extend_from_slice(extra);
        let (bare, file) = (resolve(extra).unwrap(), resolve(&with).unwrap());
        assert_eq!(
            format!("{:?}", without_notices(bare)),
            format!("{:?}", without_notices(file)),
            "with {extra:?}"
        );
    }
}
