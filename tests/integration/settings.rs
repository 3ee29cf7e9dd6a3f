//! Settings through the binary: the old variable names (coding-agent-a2a's and this host's
//! earlier `AGENT_*` ones) and an old-style config file give the same result as the new
//! names, and the start-up log says which old names were read as which new ones.

use std::process::Command;

use crate::common::{limit, HostProcess};

const OLD_CONFIG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/config/old-agent-host.toml"
);
const NEW_CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/agent-host.toml");

/// `agent-host card ARGS` with `env` and no other setting from this environment: its
/// output, or its error.
fn card(env: &[(&str, &str)], args: &[&str]) -> String {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agent-host"));
    cmd.arg("card").args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("AGENT_") || name == "PORT" {
            cmd.env_remove(name);
        }
    }
    let out = cmd
        .envs(env.iter().copied())
        .output()
        .expect("run agent-host card");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} {env:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

#[test]
fn old_variable_names_give_the_same_card_as_the_new_ones() {
    let old = card(
        &[
            ("AGENT_ADAPTER", "demo"),
            ("PORT", "4555"),
            ("AGENT_PUSH", "yes"),
            ("AGENT_PUSH_KEY", &"5a".repeat(32)),
            ("AGENT_INPUT_MODES", "text/plain,image/*"),
            ("AGENT_TIMEOUT_MS", "5000"),
            ("AGENT_HOST_BLOCKING_WAIT_MS", "2000"),
        ],
        &["--store", "memory"],
    );
    let new = card(
        &[
            ("AGENT_HOST_ADAPTER", "demo"),
            ("AGENT_HOST_PORT", "4555"),
            ("AGENT_HOST_PUSH", "yes"),
            ("AGENT_HOST_PUSH_KEY", &"5a".repeat(32)),
            ("AGENT_HOST_INPUT_MODES", "text/plain,image/*"),
            ("AGENT_HOST_TIMEOUT", "5s"),
            ("AGENT_HOST_BLOCKING_WAIT", "2s"),
        ],
        &["--store", "memory"],
    );
    assert_eq!(old, new);
    assert!(
        new.contains("127.0.0.1:4555") && new.contains("image/*"),
        "{new}"
    );
    // Against the defaults, so that the comparison above can fail.
    let defaults = card(&[("AGENT_HOST_ADAPTER", "demo")], &["--store", "memory"]);
    assert_ne!(defaults, new);
    // An old name never overrides its new one.
    let both = card(
        &[
            ("AGENT_HOST_ADAPTER", "demo"),
            ("PORT", "4555"),
            ("AGENT_HOST_PORT", "4666"),
        ],
        &["--store", "memory"],
    );
    assert!(both.contains("127.0.0.1:4666"), "{both}");
}

#[test]
fn an_old_config_file_gives_the_same_card_as_the_new_one() {
    let env = [
        ("AGENT_HOST_ADAPTER", "demo"),
        ("AGENT_HOST_STORE", "memory"),
    ];
    let old = card(&env, &["--config", OLD_CONFIG]);
    let new = card(&env, &["--config", NEW_CONFIG]);
    assert_eq!(old, new);
}

#[tokio::test]
async fn the_start_log_names_the_old_names_read() {
    limit(async {
        // spawn sets AGENT_REPO_PATH and AGENT_BINARY (coding-agent-a2a names).
        let host = HostProcess::spawn(&[("AGENT_CANCEL_GRACE_MS", "300")], &[]).await;
        let log = host.start_log.join("\n");
        assert!(
            log.contains(
                "AGENT_CANCEL_GRACE_MS is an old name: it is read as AGENT_HOST_CANCEL_GRACE"
            ),
            "{log}"
        );
        assert!(
            log.contains(
                "AGENT_REPO_PATH is read as AGENT_HOST_REPO_PATH (a coding-agent-a2a name)"
            ),
            "{log}"
        );
        assert_eq!(log.matches("AGENT_CANCEL_GRACE_MS").count(), 1, "{log}");
        host.kill().await;
    })
    .await;
}

/// `agent-host ARGS` with no setting from this environment: exit code and stderr.
/// Runs `agent-host ARGS` without the caller's `AGENT_*` variables, expecting it to refuse
/// them: its exit code and stderr. One that starts serving instead is stopped after a
/// while (no exit code), so that a regression fails rather than hangs.
async fn refused(args: &[&str]) -> (Option<i32>, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"));
    cmd.args(args).kill_on_drop(true);
    for (name, _) in std::env::vars() {
        if name.starts_with("AGENT_") || name == "PORT" {
            cmd.env_remove(name);
        }
    }
    match tokio::time::timeout(std::time::Duration::from_secs(20), cmd.output()).await {
        Ok(out) => {
            let out = out.expect("run agent-host");
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
        Err(_) => (
            None,
            format!("agent-host {args:?} did not refuse: it kept running"),
        ),
    }
}

/// Values serve refuses, each with a message naming the setting as given (and once).
#[tokio::test]
async fn refused_values_name_their_setting() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["card", "--public-url", "notaurl"],
            "--public-url 'notaurl'",
        ),
        (
            &["card", "--max-running-tasks", "0"],
            "--max-running-tasks must be at least 1",
        ),
        (
            &["card", "--max-running-tasks", "-1"],
            "'--max-running-tasks <N>'",
        ),
        (
            &["card", "--timeout", "0s"],
            "--timeout must be greater than 0",
        ),
        (&["card", "--timeout", "1ns"], "whole milliseconds"),
        (
            &["card", "--workspace-patch-limit", "lots"],
            "--workspace-patch-limit",
        ),
        (&["doctor", "--online-timeout", "5"], "--online-timeout"),
        (
            &["serve", "--allowed-cwds", "/tmp"],
            "use --workspace-roots",
        ),
        (
            &["card", "--sandbox-resolve", "foo"],
            "--sandbox-resolve: 'foo' is not name=address",
        ),
        (
            &["card", "--sandbox-allow-hosts", "http://x"],
            "--sandbox-allow-hosts: 'http://x'",
        ),
        (
            &["card", "--approvals", "nope"],
            "--approvals: unknown rule set 'nope'",
        ),
        (
            &[
                "card",
                "--budget",
                "toolCalls=20",
                "--max-budget",
                "toolCalls=10",
            ],
            "--budget: toolCalls is above the ceiling",
        ),
        (
            &["card", "--workspace-author", "noemail"],
            "--workspace-author: 'noemail' is not of the form \"Name <email>\"",
        ),
        (
            &["card", "--workspace-roots", "/nonexistent/root"],
            "--workspace-roots: '/nonexistent/root' cannot be used",
        ),
        (
            &["card", "--workspace-patch-limit", "0"],
            "--workspace-patch-limit must be greater than 0",
        ),
    ];
    for (args, says) in cases {
        let (code, err) = refused(args).await;
        assert!(code.is_some_and(|c| c != 0), "{args:?} was accepted: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("--allowed-hosts"), "{args:?}: {err}");
    }
    // A size with its unit is taken.
    let card = card(&[], &["--workspace-patch-limit", "4MiB"]);
    assert!(card.contains("\"name\""), "{card}");
}

/// A value refused from an old variable is named by that variable, as the user wrote it.
#[tokio::test]
async fn a_value_from_an_old_variable_is_named_by_it() {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"));
    cmd.arg("card").kill_on_drop(true);
    for (name, _) in std::env::vars() {
        if name.starts_with("AGENT_") || name == "PORT" {
            cmd.env_remove(name);
        }
    }
    cmd.env("AGENT_TIMEOUT_MS", "0");
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), cmd.output())
        .await
        .expect("card answers in time")
        .expect("run agent-host");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("AGENT_TIMEOUT_MS (read as AGENT_HOST_TIMEOUT) must be greater than 0"),
        "{err}"
    );
}

/// The workspace settings' errors name the setting as it was given: by its variable, or by
/// its key in the config file.
#[tokio::test]
async fn workspace_settings_are_named_as_given_in_the_environment_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("c.toml");
    std::fs::write(
        &conf,
        "[workspace]\nauthor = \"noemail\"\npatch_limit = 0\n",
    )
    .unwrap();
    let run = |env: Vec<(&'static str, String)>| async move {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"));
        cmd.arg("card").kill_on_drop(true);
        for (name, _) in std::env::vars() {
            if name.starts_with("AGENT_") || name == "PORT" {
                cmd.env_remove(name);
            }
        }
        let out = tokio::time::timeout(std::time::Duration::from_secs(20), cmd.envs(env).output())
            .await
            .expect("card answers in time")
            .expect("run agent-host");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(vec![("AGENT_HOST_WORKSPACE_AUTHOR", "noemail".into())]).await;
    assert!(
        err.contains("AGENT_HOST_WORKSPACE_AUTHOR: 'noemail' is not of the form"),
        "{err}"
    );
    let err = run(vec![("AGENT_HOST_WORKSPACE_PATCH_LIMIT", "0".into())]).await;
    assert!(
        err.contains("AGENT_HOST_WORKSPACE_PATCH_LIMIT must be greater than 0"),
        "{err}"
    );
    let file = || vec![("AGENT_HOST_CONFIG", conf.display().to_string())];
    let err = run(file()).await;
    assert!(
        err.contains("[workspace] author: 'noemail' is not of the form"),
        "{err}"
    );
    let mut fixed_author = file();
    fixed_author.push(("AGENT_HOST_WORKSPACE_AUTHOR", "A <a@b>".into()));
    let err = run(fixed_author).await;
    assert!(
        err.contains("[workspace] patch_limit must be greater than 0"),
        "{err}"
    );
}

/// Runs `agent-host serve` on the memory store and the demo agent in `repo`, with `extra`
/// settings it should refuse: its stderr, after checking it did.
async fn serve_refuses(repo: &std::path::Path, extra: &[&str]) -> String {
    let repo = repo.to_str().expect("a UTF-8 path");
    let mut args = vec![
        "serve",
        "--store",
        "memory",
        "--port",
        "0",
        "--adapter",
        "demo",
    ];
    args.extend(["--repo-path", repo]);
    args.extend(extra);
    let (code, err) = refused(&args).await;
    assert!(
        code.is_some_and(|c| c != 0),
        "{extra:?} was accepted: {err}"
    );
    err
}

/// serve's error for a workspace author that is not "Name <email>" says so once.
#[tokio::test]
async fn a_bad_workspace_author_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let err = serve_refuses(dir.path(), &["--workspace-author", "nobody"]).await;
    assert_eq!(err.matches("is not of the form").count(), 1, "{err}");
}

/// serve's error for a file where the workspaces' folder should be says why once, naming
/// the setting as it was given.
#[tokio::test]
async fn serve_says_a_folder_error_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "not a folder\n").unwrap();
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(tmp.path())
        .status();
    assert!(init.is_ok_and(|s| s.success()));
    let ws = file.join("ws");
    let err = serve_refuses(tmp.path(), &["--workspace-dir", ws.to_str().unwrap()]).await;
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("workspaces: --workspace-dir: "), "{err}");
    assert_eq!(last.matches("Not a directory").count(), 1, "{last}");
}

/// `agent-host card` lists the gRPC interface serve would list, when its port is set.
#[test]
fn the_printed_card_lists_the_grpc_interface() {
    let text = card(&[], &["--grpc-port", "50113"]);
    let printed: serde_json::Value = serde_json::from_str(&text).expect("card JSON");
    let grpc = printed["supportedInterfaces"]
        .as_array()
        .expect("interfaces")
        .iter()
        .find(|i| i["protocolBinding"] == "GRPC")
        .unwrap_or_else(|| panic!("no GRPC interface: {text}"));
    assert_eq!(grpc["url"], "127.0.0.1:50113", "{grpc}");
    let text = card(&[], &[]);
    assert!(!text.contains("\"GRPC\""), "{text}");
}
