//! Prompts too long for one command-line argument: the built-in adapters whose CLI reads its
//! prompt from stdin get it there, those whose CLI reads it from a file get it in one, the
//! others refuse it up front.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::super::*;
use crate::adapter::{LongPrompt, Registry, MAX_ARG_PROMPT};

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
fn opencode_reads_a_long_prompt_from_stdin_with_no_message_argument() {
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    let l = launch("opencode-json");
    assert_eq!(l.prompt_route(&long), PromptRoute::Stdin);
    assert!(l.check_prompt(&long).is_ok());
    let first = l.spawn_spec(&long, &SessionArgs::None);
    assert_eq!(first.args, ["run", "--format", "json"]);
    assert_eq!(first.stdin, on_stdin(&long));
    let next = l.spawn_spec(&long, &SessionArgs::Resume("ses_1".into()));
    assert_eq!(next.args, ["run", "--format", "json", "-s", "ses_1"]);
    assert_eq!(next.stdin, on_stdin(&long));
    let short = l.spawn_spec("fix it", &SessionArgs::None);
    assert_eq!(tail(&short.args, 2), ["--", "fix it"]);
    assert_eq!(short.stdin, StdinMode::Null);
}

#[test]
fn aider_reads_a_long_prompt_from_a_file_in_the_task_folder() {
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    let mut l = launch("aider");
    l.model = Some("openai/m".into());
    assert_eq!(l.prompt_route(&long), PromptRoute::File);
    assert!(l.check_prompt(&long).is_ok());
    let spec = l.spawn_spec_in(
        &long,
        "m1",
        &SessionArgs::None,
        Path::new("/work/repo"),
        "t1",
    );
    assert_eq!(
        spec.args.last().map(String::as_str),
        Some("--message-file=/work/repo/.agent-host/attachments/t1/.prompt.txt")
    );
    assert_eq!(
        crate::engine::input::prompt_file(Path::new("/work/repo"), "t1"),
        Path::new("/work/repo/.agent-host/attachments/t1/.prompt.txt")
    );
    assert!(!spec.args.iter().any(|a| a.starts_with("--message=")));
    assert!(spec.args.contains(&"openai/m".to_string()));
    // Still on its terminal with stdin open: its questions are answered as before.
    let open = StdinMode::Write {
        initial: Vec::new(),
        keep_open: true,
    };
    assert_eq!(spec.stdin, open);
    let short = l.spawn_spec_in("fix it", "m1", &SessionArgs::None, Path::new("/w"), "t1");
    assert_eq!(
        short.args.last().map(String::as_str),
        Some("--message=fix it")
    );
    assert_eq!(short.stdin, open);
}

#[test]
fn a_file_route_needs_arguments_naming_the_file() {
    let base =
        "id = \"x\"\nname = \"X\"\ndescription = \"d\"\nwire = \"text\"\nlong_prompt = \"file\"\n";
    let err = crate::adapter::AdapterSpec::from_toml("x.toml", base)
        .unwrap_err()
        .to_string();
    assert!(err.contains("prompt_file_args"), "{err}");
    let with_args = format!("{base}prompt_file_args = [\"--in\", \"{{prompt_file}}\"]\n");
    let spec = crate::adapter::AdapterSpec::from_toml("x.toml", &with_args).unwrap();
    let mut l = launch("generic");
    l.adapter = spec;
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    let args = l
        .spawn_spec_in(&long, "", &SessionArgs::None, Path::new("/w"), "t")
        .args;
    assert_eq!(
        tail(&args, 2),
        ["--in", "/w/.agent-host/attachments/t/.prompt.txt"]
    );
}

#[test]
fn the_argv_adapters_whose_cli_takes_no_other_way_refuse_up_front() {
    let long = "p".repeat(MAX_ARG_PROMPT + 1);
    for id in ["cursor", "jsonl", "generic", "conformance"] {
        let l = launch(id);
        assert_eq!(l.prompt_route(&long), PromptRoute::Refused, "{id}");
        let err = l.check_prompt(&long).unwrap_err();
        assert_eq!(err.code(), -32602, "{id}");
        let text = err.to_string();
        assert!(
            text.contains("128 KiB") && text.contains(&MAX_ARG_PROMPT.to_string()),
            "{id}: {text}"
        );
    }
    // Every built-in adapter that takes the prompt as an argument is in one of the lists.
    let r = Registry::builtin().unwrap();
    for a in r.all() {
        if a.prompt != PromptVia::Arg {
            continue;
        }
        let expected = match a.id.as_str() {
            "demo" | "codex-exec" | "gemini-json" | "opencode-json" => LongPrompt::Stdin,
            "aider" => LongPrompt::File,
            _ => LongPrompt::Refuse,
        };
        assert_eq!(a.long_prompt, expected, "{}", a.id);
    }
}
