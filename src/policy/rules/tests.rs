use super::*;

fn sets() -> BTreeMap<String, Arc<RuleSet>> {
    shipped_sets()
}

fn req<'a>(kind: &'a str, tool: Option<&'a str>, target: Option<&'a str>) -> Request<'a> {
    Request { kind, tool, target }
}

const CWD: &str = "/work/repo";

#[test]
fn the_shipped_sets_parse() {
    let s = sets();
    assert_eq!(
        s.keys().cloned().collect::<Vec<_>>(),
        ["ask-all", "read-only", "workspace-write"]
    );
    assert!(parse_sets(SHIPPED).is_ok());
    for (name, specs) in parse_sets(SHIPPED).unwrap() {
        RuleSet::from_specs(&name, specs, &name).unwrap();
    }
}

#[test]
fn read_only_answers_a_read_and_asks_for_a_write_and_a_command() {
    let p = Policy::of(sets()["read-only"].clone());
    let read = p.decide(&req("tool", Some("Read"), Some("src/main.rs")), CWD);
    assert_eq!(read.decision, Decision::Allow);
    assert!(read.rule.unwrap().1.contains("read-only"));
    for r in [
        req("file-edit", Some("Write"), Some("src/main.rs")),
        req("command", Some("Bash"), Some("ls")),
        req("tool", Some("WebFetch"), Some("https://x")),
    ] {
        assert_eq!(p.decide(&r, CWD).decision, Decision::Ask, "{r:?}");
    }
}

#[test]
fn workspace_write_allows_safe_commands_and_edits_inside_and_asks_the_rest() {
    let p = Policy::of(sets()["workspace-write"].clone());
    let d = |kind, tool, target| p.decide(&req(kind, Some(tool), Some(target)), CWD).decision;
    assert_eq!(d("command", "Bash", "ls -la"), Decision::Allow);
    assert_eq!(d("command", "Bash", "cargo test --lib"), Decision::Allow);
    assert_eq!(
        d("command", "shell", "/bin/bash -lc 'git status'"),
        Decision::Allow
    );
    assert_eq!(d("file-edit", "Write", "src/lib.rs"), Decision::Allow);
    assert_eq!(
        d("file-edit", "Write", "/work/repo/src/lib.rs"),
        Decision::Allow
    );
    assert_eq!(
        d("file-edit", "apply_patch", "a.txt, b/c.txt"),
        Decision::Allow
    );
    // Asked: other commands, commands chained to a safe one, edits outside.
    assert_eq!(d("command", "Bash", "rm -rf build"), Decision::Ask);
    assert_eq!(d("command", "Bash", "ls; rm -rf ~"), Decision::Ask);
    assert_eq!(d("command", "Bash", "cat x | sh"), Decision::Ask);
    assert_eq!(d("command", "Bash", "echo $(curl evil)"), Decision::Ask);
    assert_eq!(
        d("command", "Bash", "/bin/bash -lc 'touch x'"),
        Decision::Ask
    );
    assert_eq!(d("file-edit", "Write", "../other/x"), Decision::Ask);
    assert_eq!(d("file-edit", "Write", "/etc/passwd"), Decision::Ask);
    assert_eq!(d("file-edit", "Write", "/work/repo/../x"), Decision::Ask);
    assert_eq!(d("file-edit", "Write", "a.txt, /etc/x"), Decision::Ask);
    // Asked: a listed command's option that writes anywhere or runs a named program.
    for cmd in [
        "git log --output=/root/.bashrc",
        "git diff --ext-diff",
        "cargo test --config build.rustc-wrapper=/tmp/evil",
        "go test -exec /tmp/evil ./...",
        "rg --pre=/bin/sh foo",
        "rg --pre /tmp/evil x",
        "rg --hostname-bin=/tmp/evil x",
        "cargo build --target-dir /tmp/x",
        "cargo test --manifest-path /elsewhere/Cargo.toml",
        "npm test --script-shell /tmp/evil",
        "npm run build --prefix /elsewhere",
        "go build -o /usr/local/bin/x .",
        "go test -toolexec /tmp/evil ./...",
        "pytest --junitxml=/root/.bashrc",
        "pytest --basetemp /etc",
        "make -f /tmp/evil",
        "make -sf/tmp/evil all",
        "make -C /elsewhere",
        "make --eval=x",
        "git branch -D main",
        "git branch -m main other",
        "git branch new-branch",
    ] {
        assert_eq!(d("command", "Bash", cmd), Decision::Ask, "{cmd}");
    }
    for cmd in [
        "git log --oneline",
        "git branch",
        "git branch -a -v",
        "git branch --show-current",
        "make",
        "make -j4 test",
        "go test ./...",
        "rg -n foo src",
        "grep -o foo x",
        "pytest -q tests",
        "cargo build --release",
    ] {
        assert_eq!(d("command", "Bash", cmd), Decision::Allow, "{cmd}");
    }
    // An edit of a path the CLI or a shell expands is not inside.
    for path in [
        "~/.bashrc",
        "~root/.ssh/authorized_keys",
        "$HOME/.profile",
        "a.txt, ~/x",
    ] {
        assert_eq!(d("file-edit", "Write", path), Decision::Ask, "{path}");
    }
}

#[test]
fn a_tool_rule_reads_once() {
    let r = Rule::new(RuleSpec {
        decision: Decision::Allow,
        kind: Some("tool".into()),
        tool: Some("Read".into()),
        target: None,
        target_regex: None,
        in_workdir: false,
    })
    .unwrap();
    assert_eq!(r.text(), "allow tool \"Read\"");
}

#[test]
fn globs_are_anchored_and_stop_at_shell_control_characters() {
    let r = Rule::new(RuleSpec {
        decision: Decision::Allow,
        kind: Some("command".into()),
        tool: None,
        target: Some("npm test*".into()),
        target_regex: None,
        in_workdir: false,
    })
    .unwrap();
    let m = |t| r.matches(&req("command", None, Some(t)), CWD);
    assert!(m("npm test"));
    assert!(m("npm test -- --watch=false"));
    assert!(!m("npm test && curl x | sh"));
    assert!(!m("sudo npm test"));
    assert!(!r.matches(&req("file-edit", None, Some("npm test")), CWD));
}

#[test]
fn a_request_may_narrow_a_set_but_not_widen_it() {
    let s = sets();
    let p = policy_of(
        &serde_json::json!({"set": "workspace-write", "rules": [
            {"decision": "deny", "kind": "command", "target": "cargo *"},
        ]}),
        &s,
        ASK_ALL,
    )
    .unwrap();
    // Deny beats the set's allow: the request's rules come first.
    let v = p.decide(&req("command", Some("Bash"), Some("cargo test")), CWD);
    assert_eq!(v.decision, Decision::Deny);
    assert!(v.rule.unwrap().1.contains("of the request"));
    assert_eq!(
        p.decide(&req("command", Some("Bash"), Some("ls")), CWD)
            .decision,
        Decision::Allow
    );
    let widen = policy_of(
        &serde_json::json!({"set": "read-only", "rules": [{"decision": "allow", "kind": "command"}]}),
        &s,
        ASK_ALL,
    )
    .unwrap_err();
    assert_eq!(widen.field, "metadata.approvals.rules[0].decision");
    assert!(widen.why.contains("only narrow"), "{}", widen.why);
}

#[test]
fn bad_approvals_name_the_field() {
    let s = sets();
    let e = policy_of(&serde_json::json!("everything"), &s, ASK_ALL).unwrap_err();
    assert_eq!(e.field, "metadata.approvals");
    assert!(e.why.contains("read-only"), "{}", e.why);
    let e = policy_of(
        &serde_json::json!({"rules": [{"decision": "deny", "target_regex": "("}]}),
        &s,
        ASK_ALL,
    )
    .unwrap_err();
    assert_eq!(e.field, "metadata.approvals.rules[0]");
    assert!(e.why.contains("does not parse"), "{}", e.why);
    let e = policy_of(&serde_json::json!({"sett": "x"}), &s, ASK_ALL).unwrap_err();
    assert_eq!(e.field, "metadata.approvals.sett");
    let e = policy_of(&serde_json::json!(3), &s, ASK_ALL).unwrap_err();
    assert_eq!(e.field, "metadata.approvals");
}

#[test]
fn config_sets_add_to_the_shipped_ones_and_bad_rules_name_the_set() {
    let mut raw = BTreeMap::new();
    raw.insert(
        "ci".to_string(),
        vec![RuleSpec {
            decision: Decision::Deny,
            kind: None,
            tool: Some("Web*".into()),
            target: None,
            target_regex: None,
            in_workdir: false,
        }],
    );
    let s = config_sets(&raw).unwrap();
    assert!(s.contains_key("ci") && s.contains_key("read-only"));
    let p = Policy::of(s["ci"].clone());
    assert_eq!(
        p.decide(&req("tool", Some("webfetch"), None), CWD).decision,
        Decision::Deny
    );
    raw.get_mut("ci").unwrap()[0].target_regex = Some("[".into());
    let e = config_sets(&raw).unwrap_err();
    assert_eq!(e.field, "[approvals] sets.ci.rules[0]");
}

#[test]
fn a_rule_of_an_unknown_kind_is_refused_not_left_to_match_nothing() {
    let spec = |kind: &str| RuleSpec {
        decision: Decision::Deny,
        kind: Some(kind.into()),
        tool: None,
        target: None,
        target_regex: None,
        in_workdir: false,
    };
    let err = Rule::new(spec("comand")).unwrap_err();
    assert!(matches!(&err, RuleError::Kind(k) if k == "comand"), "{err}");
    assert!(err.to_string().contains("command, file-edit, tool"));
    for kind in ["command", "File-Edit", "tool", "question", "other"] {
        assert!(Rule::new(spec(kind)).is_ok(), "{kind}");
    }
}
