//! Tests of the launch: arguments, environment, program lookup.
use super::*;
use crate::adapter::Registry;

mod long_prompts;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn child_env_is_an_allow_list() {
    let r = Registry::builtin().unwrap();
    let demo = r.get("demo").unwrap();
    let host = env(&[
        ("PATH", "/bin"),
        ("AGENT_HOST_TOKEN", "secret"),
        ("ANTHROPIC_API_KEY", "k"),
        ("HOME", "/h"),
    ]);
    let e = child_env(demo, &host, &[]);
    assert!(e.iter().any(|(k, _)| k == "PATH"));
    assert!(e.iter().any(|(k, v)| k == "NO_COLOR" && v == "1"));
    assert!(!e.iter().any(|(k, _)| k == "AGENT_HOST_TOKEN"));
    assert!(!e.iter().any(|(k, _)| k == "ANTHROPIC_API_KEY"));
    let e = child_env(demo, &host, &["ANTHROPIC_API_KEY".to_string()]);
    assert!(e.iter().any(|(k, _)| k == "ANTHROPIC_API_KEY"));
}

#[test]
fn arguments_for_first_and_follow_up_turns() {
    let r = Registry::builtin().unwrap();
    let launch = Launch {
        adapter: r.get("demo").unwrap().clone(),
        program: PathBuf::from("/bin/true"),
        extra_args: vec!["--x".into()],
        prompt_via: PromptVia::Arg,
        cwd: PathBuf::from("/tmp"),
        env: vec![],
        model: Some("m1".into()),
        force: false,
        max_line_bytes: 1024,
        timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        cancel_grace: Duration::from_secs(1),
        sandbox: None,
    };
    let first = launch.spawn_spec("hello", &SessionArgs::New("s1".into()));
    assert_eq!(
        first.args,
        [
            "--x",
            "fake-agent",
            "--model",
            "m1",
            "--session-id",
            "s1",
            "--",
            "hello"
        ]
    );
    let next = launch.spawn_spec("again", &SessionArgs::Resume("s1".into()));
    assert_eq!(
        next.args,
        [
            "--x",
            "fake-agent",
            "--model",
            "m1",
            "--resume",
            "s1",
            "--",
            "again"
        ]
    );
    let mut via_stdin = launch.clone();
    via_stdin.prompt_via = PromptVia::Stdin;
    let spec = via_stdin.spawn_spec("p", &SessionArgs::None);
    assert!(
        matches!(spec.stdin, StdinMode::Write { ref initial, keep_open: false } if initial == b"p")
    );
    let mut via_protocol = launch.clone();
    via_protocol.prompt_via = PromptVia::Protocol;
    let spec = via_protocol.spawn_spec("p", &SessionArgs::None);
    assert!(!spec.args.contains(&"p".to_string()));
    assert!(
        matches!(spec.stdin, StdinMode::Write { ref initial, keep_open: true } if initial.is_empty())
    );
}

/// Every adapter that passes the prompt as an argument: a prompt that looks like an
/// option arrives as the prompt (after the CLI's end-of-options marker, or joined to
/// its option with `=`), never as an option of its own.
#[test]
fn a_prompt_that_looks_like_an_option_stays_the_prompt() {
    let r = Registry::builtin().unwrap();
    let argv_adapters: Vec<_> = r
        .all()
        .iter()
        .filter(|a| a.prompt == PromptVia::Arg)
        .collect();
    let ids: Vec<&str> = argv_adapters.iter().map(|a| a.id.as_str()).collect();
    for id in [
        "codex-exec",
        "cursor",
        "opencode-json",
        "demo",
        "jsonl",
        "generic",
        "gemini-json",
        "aider",
    ] {
        assert!(ids.contains(&id), "{id} takes its prompt as an argument");
    }
    for a in argv_adapters {
        let launch = Launch {
            adapter: a.clone(),
            program: PathBuf::from("/bin/true"),
            extra_args: vec![],
            prompt_via: PromptVia::Arg,
            cwd: PathBuf::from("/tmp"),
            env: vec![],
            model: Some("m".into()),
            force: false,
            max_line_bytes: 1024,
            timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            cancel_grace: Duration::from_secs(1),
            sandbox: None,
        };
        for prompt in ["--help", "--dangerously-skip-permissions", "-p"] {
            for session in [
                SessionArgs::New("s".into()),
                SessionArgs::Resume("s".into()),
            ] {
                let args = launch.spawn_spec(prompt, &session).args;
                let last = args.last().unwrap();
                let ok = if a.prompt_args.is_empty() {
                    last == prompt && args[args.len() - 2] == "--"
                } else {
                    // `--option={prompt}`: one argument, the option's value.
                    last.ends_with(&format!("={prompt}"))
                        && last.starts_with('-')
                        && !args.iter().any(|x| x == prompt)
                };
                assert!(ok, "{}: {prompt} in {args:?}", a.id);
            }
        }
    }
}

#[test]
fn placeholders_fill_in_one_pass() {
    let values = [
        ("message_id", "{cwd}"),
        ("cwd", "/w"),
        ("prompt", "{message_id}"),
    ];
    assert_eq!(fill("--id={message_id}", &values), "--id={cwd}");
    assert_eq!(fill("{cwd}/{prompt}", &values), "/w/{message_id}");
    assert_eq!(fill("{unknown} {", &values), "{unknown} {");
    assert_eq!(fill("a{cwd}b{cwd}", &values), "a/wb/w");
}

#[test]
fn program_lookup_prefers_the_path_variable_and_reports_what_to_set() {
    let r = Registry::builtin().unwrap();
    let demo = r.get("demo").unwrap();
    let host = env(&[("DEMO_PATH", "/bin/sh"), ("PATH", "/nonexistent")]);
    assert_eq!(
        resolve_program(demo, None, &host, Path::new("/")).unwrap(),
        PathBuf::from("/bin/sh")
    );
    let jsonl = r.get("jsonl").unwrap();
    let err = resolve_program(jsonl, None, &env(&[]), Path::new("/")).unwrap_err();
    assert!(err.to_string().contains("AGENT_HOST_BINARY"), "{err}");
    let err = resolve_program(
        jsonl,
        Some("no-such-program-xyz"),
        &env(&[("PATH", "/bin")]),
        Path::new("/"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("JSONL_PATH"), "{err}");
    assert!(resolve_program(
        jsonl,
        Some("sh"),
        &env(&[("PATH", "/bin:/usr/bin")]),
        Path::new("/")
    )
    .is_ok());
}

/// A state folder the host creates for a sandbox user is the user's, the folders on the way
/// that it created too; one that exists keeps its owner; none is made without a home.
#[test]
fn state_folders_made_for_a_sandbox_user_are_given_to_it() {
    use std::os::unix::fs::MetadataExt;
    if !nix::unistd::geteuid().is_root() {
        eprintln!("*** SKIPPED: giving files to another user needs root ***");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let user = RunAs {
        name: "nobody".into(),
        uid: 65534,
        gid: 65534,
        groups: vec![65534],
        home: home.clone(),
    };
    prepare_state_path(&format!("{}/.config/cli/", home.display()), Some(&user));
    prepare_state_path(&format!("{}/.cli.json", home.display()), Some(&user));
    for p in [".config", ".config/cli", ".cli.json"] {
        assert_eq!(std::fs::metadata(home.join(p)).unwrap().uid(), 65534, "{p}");
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".cli.json")).unwrap(),
        "{}"
    );
    assert_eq!(
        std::fs::metadata(&home).unwrap().uid(),
        0,
        "the home was there"
    );
    let homeless = RunAs {
        home: dir.path().join("nonexistent"),
        ..user
    };
    prepare_state_path(
        &format!("{}/.cli/", homeless.home.display()),
        Some(&homeless),
    );
    assert!(!homeless.home.exists());
}

#[test]
fn the_default_memory_of_a_task_is_the_machine_shared_by_the_running_tasks() {
    let registry = Registry::builtin().unwrap();
    let a = registry.get("jsonl").unwrap();
    let Some(all) = crate::runner::sandbox::default_task_memory(1) else {
        eprintln!("*** SKIPPED: no /proc/meminfo ***");
        return;
    };
    let settings = SandboxSettings {
        running_tasks: 4,
        ..SandboxSettings::default()
    };
    let p = sandbox_policy(a, &settings, &[]).unwrap();
    let each = p.limits.memory.unwrap();
    assert!(
        each <= all / 4 && each > all / 4 - (1 << 20),
        "{each} of {all}"
    );
    assert_eq!(each % (1 << 20), 0, "whole MiB");
    // Set, it wins.
    let set = SandboxSettings {
        memory: Some(1 << 30),
        ..settings
    };
    assert_eq!(
        sandbox_policy(a, &set, &[]).unwrap().limits.memory,
        Some(1 << 30)
    );
}

/// opencode keeps its data where `XDG_DATA_HOME` says (agent-host passes the variable on):
/// that folder, not `~/.local/share/opencode`, is the one made writable.
#[test]
fn opencode_writes_where_its_xdg_folders_are() {
    let registry = Registry::builtin().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let data = dir.path().join("data");
    for id in ["opencode", "opencode-json"] {
        let a = registry.get(id).unwrap();
        let h = home.display().to_string();
        let with = env(&[("HOME", &h), ("XDG_DATA_HOME", &data.display().to_string())]);
        let p = sandbox_policy(a, &SandboxSettings::default(), &with).unwrap();
        assert!(
            p.write.contains(&data.join("opencode")),
            "{id}: {:?}",
            p.write
        );
        assert!(
            data.join("opencode").is_dir(),
            "made, so that it can be bound"
        );
        let without = env(&[("HOME", &h)]);
        let p = sandbox_policy(a, &SandboxSettings::default(), &without).unwrap();
        assert!(
            p.write.contains(&home.join(".local/share/opencode")),
            "{id}: {:?}",
            p.write
        );
    }
}

/// Where bubblewrap runs, each built-in CLI's state paths are per context, with its login
/// (the `[doctor]` files in them) and its configuration named; `sandbox_state = "shared"`
/// and a sandbox that is off leave them the host user's.
#[test]
fn a_cli_state_is_per_context_where_the_sandbox_can_bind_it() {
    use crate::runner::sandbox::StateMode;
    let registry = Registry::builtin().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let with = env(&[("HOME", &home.display().to_string())]);
    let a = registry.get("claude-code").unwrap();
    let p = sandbox_policy(a, &SandboxSettings::default(), &with).unwrap();
    if crate::runner::sandbox::Capabilities::get().bwrap.is_none() {
        assert!(p.state.is_none(), "no bubblewrap: the host user's");
        return;
    }
    let layout = p.state.expect("per context");
    let at: Vec<_> = layout.entries.iter().map(|e| e.at.clone()).collect();
    assert_eq!(at, [home.join(".claude"), home.join(".claude.json")]);
    assert_eq!(layout.credentials, [home.join(".claude/.credentials.json")]);
    assert!(layout.config.contains(&home.join(".claude/settings.json")));
    for settings in [
        SandboxSettings {
            state: StateMode::Shared,
            ..SandboxSettings::default()
        },
        SandboxSettings {
            mode: Some(Mode::Off),
            ..SandboxSettings::default()
        },
    ] {
        let p = sandbox_policy(a, &settings, &with).unwrap();
        assert!(p.state.is_none(), "{settings:?}");
    }
    // A CLI with no state paths has nothing per context.
    let jsonl = registry.get("jsonl").unwrap();
    assert!(sandbox_policy(jsonl, &SandboxSettings::default(), &with)
        .unwrap()
        .state
        .is_none());
}
