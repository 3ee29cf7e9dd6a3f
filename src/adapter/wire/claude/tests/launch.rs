//! The two modes as adapters choose them: `wire_options`, and the commands the built-in
//! `claude-code` and `qwen` adapters start.

use super::super::*;

#[test]
fn wire_options_choose_the_mode() {
    let t: toml::Table = toml::from_str("input = \"stream-json\"\ninitialize = true").unwrap();
    assert_eq!(
        Options::from_table(&t),
        Options {
            input: InputMode::StreamJson,
            initialize: true
        }
    );
    assert_eq!(Options::from_table(&toml::Table::new()), Options::default());
}

/// The built-in adapters start the recorded commands in the two-way mode.
#[test]
fn builtin_adapters_run_the_recorded_commands() {
    use crate::engine::{Launch, SessionArgs};
    use crate::runner::StdinMode;
    let registry = crate::adapter::Registry::builtin().unwrap();
    let ids = registry.ids();
    let pos = |id: &str| ids.iter().position(|i| *i == id).unwrap();
    assert!(
        pos("claude-code") < pos("qwen"),
        "claude-code is detected first"
    );
    let launch = |id: &str, force: bool| Launch {
        adapter: registry.get(id).unwrap().clone(),
        program: "/usr/bin/true".into(),
        extra_args: Vec::new(),
        prompt_via: registry.get(id).unwrap().prompt,
        cwd: "/workspace/project".into(),
        env: Vec::new(),
        model: None,
        force,
        max_line_bytes: 1 << 20,
        timeout: std::time::Duration::from_secs(60),
        idle_timeout: std::time::Duration::from_secs(60),
        cancel_grace: std::time::Duration::from_secs(1),
        sandbox: None,
    };

    let claude = launch("claude-code", false);
    assert!(crate::adapter::wire::parser_for(&claude.adapter).is_some());
    assert_eq!(
        Options::from_table(&claude.adapter.wire_options),
        Options {
            input: InputMode::StreamJson,
            initialize: false
        }
    );
    let first = claude.spawn_spec(
        "create a file",
        &SessionArgs::New("11111111-2222-4333-8444-555555555555".into()),
    );
    // The recorded stdio command, plus the host-chosen session id.
    assert_eq!(
        first.args.join(" "),
        "-p --input-format stream-json --output-format stream-json --verbose \
         --permission-prompt-tool stdio --session-id 11111111-2222-4333-8444-555555555555"
    );
    assert!(
        matches!(first.stdin, StdinMode::Write { ref initial, keep_open: true } if initial.is_empty()),
        "the prompt goes through the parser's start()"
    );
    let forced = launch("claude-code", true).spawn_spec(
        "x",
        &SessionArgs::Resume("11111111-2222-4333-8444-555555555555".into()),
    );
    assert!(forced
        .args
        .join(" ")
        .ends_with("--resume 11111111-2222-4333-8444-555555555555 --dangerously-skip-permissions"));

    let qwen = launch("qwen", false);
    assert_eq!(
        Options::from_table(&qwen.adapter.wire_options),
        Options {
            input: InputMode::StreamJson,
            initialize: true
        }
    );
    assert_eq!(
        qwen.spawn_spec("x", &SessionArgs::None).args.join(" "),
        "--input-format stream-json -o stream-json"
    );
}
