use super::*;
use crate::settings::ServeArgs;

fn settings() -> Settings {
    Settings::resolve(&ServeArgs::defaults().unwrap()).unwrap()
}

fn env(path: &str) -> Vec<(String, String)> {
    vec![("PATH".to_string(), path.to_string())]
}

#[test]
fn an_unset_adapter_picks_the_first_installed_cli_else_demo() {
    let mut r = Registry::builtin().unwrap();
    let mut cli = r.get("demo").unwrap().clone();
    cli.id = "some-cli".into();
    cli.binary = "sh".into();
    cli.detect = true;
    r.insert(cli);
    let s = settings();
    assert_eq!(
        choose_adapter(&s, &r, &env("/bin:/usr/bin")).unwrap().id,
        "some-cli"
    );
    assert_eq!(
        choose_adapter(&s, &r, &env("/nonexistent")).unwrap().id,
        "demo"
    );
    let mut named = settings();
    named.adapter = Some("jsonl".into());
    assert_eq!(
        choose_adapter(&named, &r, &env("/bin")).unwrap().id,
        "jsonl"
    );
    named.adapter = Some("nope".into());
    let err = choose_adapter(&named, &r, &env("/bin"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown adapter 'nope'") && err.contains("demo"),
        "{err}"
    );
}

#[test]
fn secrets_are_dropped_from_the_agent_env_even_inside_longer_values() {
    let mut env: Vec<(String, String)> = [
        ("PATH", "/bin"),
        ("EXACT", "tok-secret-1"),
        ("WRAPPED", "prefix-tok-secret-1-suffix"),
        ("URL", "https://u:tok-secret-1@example.com"),
        ("AGENT_HOST_OTHER", "x"),
        ("FINE", "tok-secret"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    drop_secrets(&mut env, &["tok-secret-1".to_string()]);
    let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["PATH", "FINE"]);
}

#[test]
fn adapters_dir_overrides_by_id() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("demo.toml"),
        "id = \"demo\"\nname = \"My demo\"\ndescription = \"d\"\nbinary = \"sh\"\nwire = \"agent-host-jsonl\"\n",
    )
    .unwrap();
    let mut s = settings();
    s.adapters_dir = Some(dir.path().to_path_buf());
    let r = registry(&s).unwrap();
    assert_eq!(r.get("demo").unwrap().name, "My demo");
    assert!(r.get("jsonl").is_ok());
    std::fs::write(dir.path().join("bad.toml"), "id = 1\n").unwrap();
    let err = registry(&s).unwrap_err().to_string();
    assert!(err.contains("bad.toml"), "{err}");
}
