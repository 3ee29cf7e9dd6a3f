//! Prompts too long for one command-line argument: the built-in adapters whose CLI reads its
//! prompt from stdin get it there, the others refuse it up front.

use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::adapter::{Registry, MAX_ARG_PROMPT};

fn launch(id: &str) -> Launch {
    let r = Registry::builtin().unwrap();
    Launch {
        adapter: r.get(id).unwrap().clone(),
        program: PathBuf::from("/bin/true"),
        extra_args: vec![],
        prompt_via: PromptVia::Arg,
        cwd: PathBuf::from("/tmp"),
        env: vec![],
        model: None,
        force: false,
        max_line_bytes: 1024,
        timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(1),
        cancel_grace: Duration::from_secs(1),
        sandbox: None,
    }
}

fn tail(args: &[String], n: usize) -> Vec<&str> {
    args[args.len() - n..].iter().map(String::as_str).collect()
}

fn on_stdin(prompt: &str) -> StdinMode {
    StdinMode::Write {
        initial: prompt.as_bytes().to_vec(),
        keep_open: false,
    }
}

#[test]
fn codex_exec_reads_a_long_prompt_from_stdin_on_a_dash() {
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    let l = launch("codex-exec");
    assert!(l.check_prompt(&long).is_ok());
    let first = l.spawn_spec(&long, &SessionArgs::None);
    assert_eq!(tail(&first.args, 2), ["--", "-"]);
    assert_eq!(first.stdin, on_stdin(&long));
    // `codex exec resume ID` reads stdin only on `-`.
    let next = l.spawn_spec(&long, &SessionArgs::Resume("s1".into()));
    assert_eq!(tail(&next.args, 4), ["resume", "s1", "--", "-"]);
    // A prompt that fits stays the argument, and stdin stays closed.
    let short = l.spawn_spec("fix it", &SessionArgs::None);
    assert_eq!(tail(&short.args, 2), ["--", "fix it"]);
    assert_eq!(short.stdin, StdinMode::Null);
    // At the limit exactly it is still an argument.
    let edge = "q".repeat(MAX_ARG_PROMPT);
    assert_eq!(
        l.spawn_spec(&edge, &SessionArgs::None).args.last(),
        Some(&edge)
    );
}

#[test]
fn gemini_reads_a_long_prompt_from_stdin_instead_of_its_prompt_option() {
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    let l = launch("gemini-json");
    assert!(l.check_prompt(&long).is_ok());
    let spec = l.spawn_spec(&long, &SessionArgs::None);
    assert!(
        !spec.args.iter().any(|a| a.starts_with("--prompt")),
        "{:?}",
        spec.args
    );
    assert_eq!(spec.stdin, on_stdin(&long));
    let short = l.spawn_spec("fix it", &SessionArgs::None);
    assert_eq!(
        short.args.last().map(String::as_str),
        Some("--prompt=fix it")
    );
}

#[test]
fn the_argv_adapters_whose_cli_cannot_read_stdin_refuse_up_front() {
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    for id in [
        "opencode-json",
        "cursor",
        "aider",
        "jsonl",
        "generic",
        "conformance",
    ] {
        let err = launch(id).check_prompt(&long).unwrap_err();
        assert_eq!(err.code(), -32602, "{id}");
        assert!(err.to_string().contains("128 KiB"), "{id}: {err}");
    }
    // Every built-in adapter that takes the prompt as an argument is in one of the two lists.
    let r = Registry::builtin().unwrap();
    for a in r.all() {
        if a.prompt != PromptVia::Arg {
            continue;
        }
        let stdin = a.long_prompt == crate::adapter::LongPrompt::Stdin;
        assert_eq!(
            stdin,
            ["demo", "codex-exec", "gemini-json"].contains(&a.id.as_str()),
            "{}",
            a.id
        );
    }
}
