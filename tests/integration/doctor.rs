//! `agent-host doctor`: a CLI with and without its credentials (a fake program and HOME in
//! a temporary folder), the exit codes, the `--json` document; `tasks prune` from the
//! command line.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::common::limit;

/// An adapter folder with `fakecli`: a program that prints the version Claude Code 2.1.330
/// prints for `--version` (recorded), whose credentials are a variable or a login file.
fn setup(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let bin = root.join("fakecli");
    std::fs::write(&bin, "#!/bin/sh\necho '2.1.330 (Claude Code)'\n").unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let adapters = root.join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    std::fs::write(
        adapters.join("fakecli.toml"),
        format!(
            r#"id = "fakecli"
name = "Fake CLI"
description = "doctor test"
binary = "{}"
wire = "claude-stream-json"
tested_versions = ["2.1.330"]

[doctor]
credentials_env = ["AGENT_HOST_DOCTOR_TEST_KEY"]
credentials_files = ["~/.fakecli/auth.json"]
"#,
            bin.display()
        ),
    )
    .unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    (adapters, home)
}

async fn doctor(adapters: &Path, home: &Path, repo: &Path, json: bool) -> (i32, String) {
    doctor_with(adapters, home, repo, json, &[]).await
}

async fn doctor_with(
    adapters: &Path,
    home: &Path,
    repo: &Path,
    json: bool,
    env: &[(&str, &str)],
) -> (i32, String) {
    doctor_run(adapters, home, repo, json, env, &["--store", "memory"]).await
}

/// `agent-host doctor` with `args` besides the adapter's (a `--store` among them).
async fn doctor_run(
    adapters: &Path,
    home: &Path,
    repo: &Path,
    json: bool,
    env: &[(&str, &str)],
    args: &[&str],
) -> (i32, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_agent-host"));
    // The program may live in /tmp (the sandbox's private /tmp shows it again).
    cmd.args(["doctor", "--adapter", "fakecli", "--port", "0"])
        .args(args)
        .arg("--adapters-dir")
        .arg(adapters)
        .arg("--repo-path")
        .arg(repo)
        .env("HOME", home)
        .env_remove("AGENT_HOST_DOCTOR_TEST_KEY")
        .env_remove("AGENT_HOST_CONFIG")
        .env_remove("AGENT_BINARY")
        .env_remove("AGENT_HOST_SANDBOX_STATE")
        .envs(env.iter().copied())
        .kill_on_drop(true);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().await.unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn doctor_fails_without_credentials_and_passes_with_them() {
    limit(async {
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();

        let (code, out) = doctor(&adapters, &home, &repo, false).await;
        assert_eq!(code, 1, "{out}");
        let line = out
            .lines()
            .find(|l| l.contains("fakecli credentials"))
            .unwrap_or_default();
        assert!(line.starts_with("FAIL"), "{out}");
        assert!(line.contains("AGENT_HOST_DOCTOR_TEST_KEY"), "{line}");
        assert!(line.contains(".fakecli/auth.json"), "{line}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("pass") && l.contains("2.1.330 (tested)")),
            "{out}"
        );
        // Not a git repository: a warning, not a failure.
        assert!(
            out.lines()
                .any(|l| l.starts_with("warn") && l.contains("not in a git repository")),
            "{out}"
        );

        // Logged in: the file the CLI's login writes is there.
        std::fs::create_dir_all(home.join(".fakecli")).unwrap();
        std::fs::write(home.join(".fakecli/auth.json"), "{}").unwrap();
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        let (code, out) = doctor(&adapters, &home, &repo, true).await;
        assert_eq!(code, 0, "{out}");
        let doc: serde_json::Value = serde_json::from_str(out.trim()).expect(&out);
        assert_eq!(doc["ok"], true);
        let checks = doc["checks"].as_array().unwrap();
        for c in checks {
            assert!(c["check"].is_string() && c["detail"].is_string(), "{c}");
            assert!(
                ["pass", "warn", "fail"].contains(&c["status"].as_str().unwrap()),
                "{c}"
            );
        }
        let creds = checks
            .iter()
            .find(|c| c["check"] == "fakecli credentials")
            .unwrap();
        assert_eq!(creds["status"], "pass", "{creds}");
        let wd = checks
            .iter()
            .find(|c| c["check"] == "working directory")
            .unwrap();
        assert_eq!(wd["status"], "pass", "{wd}");
        assert!(checks.iter().any(|c| c["check"] == "store"));
        assert!(checks.iter().any(|c| c["check"] == "port"));
        assert!(checks.iter().any(|c| c["check"] == "sandbox"));
    })
    .await
}

/// The version check runs as a task's program would: one that cannot run there (its
/// interpreter is missing) fails `doctor`, which says why and what it printed.
#[tokio::test]
async fn doctor_fails_when_the_program_cannot_run_as_a_task() {
    limit(async {
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        std::fs::create_dir_all(home.join(".fakecli")).unwrap();
        std::fs::write(home.join(".fakecli/auth.json"), "{}").unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let (code, out) = doctor(&adapters, &home, &repo, false).await;
        assert_eq!(code, 0, "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("pass") && l.contains("fakecli runs")),
            "{out}"
        );

        std::fs::write(
            tmp.path().join("fakecli"),
            "#!/nonexistent/interpreter\necho 2.1.330\n",
        )
        .unwrap();
        let (code, out) = doctor(&adapters, &home, &repo, false).await;
        assert_eq!(code, 1, "{out}");
        let line = out
            .lines()
            .find(|l| l.contains("fakecli runs"))
            .unwrap_or_default();
        assert!(line.starts_with("FAIL"), "{out}");
        assert!(line.contains("exited with code"), "{line}");
        assert!(line.contains("fakecli"), "the path is named: {line}");
    })
    .await
}

#[tokio::test]
async fn doctor_says_when_the_program_is_missing() {
    limit(async {
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        std::fs::remove_file(tmp.path().join("fakecli")).unwrap();
        let (code, out) = doctor(&adapters, &home, tmp.path(), false).await;
        assert_eq!(code, 1, "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("FAIL") && l.contains("fakecli program")),
            "{out}"
        );
    })
    .await
}

/// Where the CLI's state is: a home per context where bubblewrap runs; the host user's,
/// shared by every task (a warning saying why), with `sandbox_state = "shared"` or the
/// sandbox off.
#[tokio::test]
async fn doctor_says_where_the_cli_state_is() {
    limit(async {
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        let file = adapters.join("fakecli.toml");
        let toml = std::fs::read_to_string(&file).unwrap();
        std::fs::write(
            &file,
            format!("{toml}\n[sandbox]\nwrite = [\"~/.fakecli/\"]\n"),
        )
        .unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        let line = |out: &str| {
            out.lines()
                .find(|l| l.contains("fakecli CLI state"))
                .unwrap_or_else(|| panic!("no CLI state line: {out}"))
                .to_string()
        };
        let (_, out) = doctor(&adapters, &home, &repo, false).await;
        if agent_host::runner::sandbox::Capabilities::get()
            .bwrap
            .is_some()
        {
            let l = line(&out);
            assert!(
                l.starts_with("pass") && l.contains("a home of its own per context"),
                "{l}"
            );
        }
        for (k, v, why) in [
            (
                "AGENT_HOST_SANDBOX_STATE",
                "shared",
                "sandbox_state = \"shared\"",
            ),
            ("AGENT_HOST_SANDBOX", "off", "the sandbox is off"),
        ] {
            let (_, out) = doctor_with(&adapters, &home, &repo, false, &[(k, v)]).await;
            let l = line(&out);
            assert!(
                l.starts_with("warn") && l.contains("shared by every task"),
                "{l}"
            );
            assert!(l.contains(why) && l.contains(".fakecli"), "{l}");
        }
    })
    .await
}

/// The store line of doctor's output.
fn store_line(out: &str) -> String {
    out.lines()
        .find(|l| l.split_whitespace().nth(1) == Some("store"))
        .unwrap_or_else(|| panic!("no store line: {out}"))
        .to_string()
}

/// The tables of `db`'s schema.
async fn tables(db: &crate::postgres::Schema) -> Vec<String> {
    let client = db.client().await;
    let rows = client
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1
             ORDER BY 1",
            &[&db.name()],
        )
        .await
        .unwrap();
    rows.iter().map(|r| r.get::<_, String>(0)).collect()
}

/// Doctor reads a PostgreSQL schema and writes nothing: an empty database stays empty, an
/// older schema stays older, a newer one fails the check.
#[tokio::test]
async fn doctor_reads_a_postgres_schema_without_changing_it() {
    limit(async {
        let Some(db) = crate::postgres::Schema::new("doctor_ro").await else {
            return;
        };
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        let key = [("AGENT_HOST_DOCTOR_TEST_KEY", "k")];
        let run = async || {
            let args = ["--store", db.url.as_str()];
            doctor_run(&adapters, &home, tmp.path(), false, &key, &args).await
        };
        let (_, out) = run().await;
        let line = store_line(&out);
        assert!(
            line.starts_with("pass")
                && line.contains("schema missing (created at the first start)"),
            "{line}"
        );
        assert_eq!(
            tables(&db).await,
            Vec::<String>::new(),
            "doctor wrote to the database"
        );

        let client = db.client().await;
        client
            .batch_execute(
                "CREATE TABLE agent_host_schema (version INTEGER PRIMARY KEY);
                 INSERT INTO agent_host_schema VALUES (1);",
            )
            .await
            .unwrap();
        let (_, out) = run().await;
        let line = store_line(&out);
        assert!(
            line.contains("schema older (1, this build ")
                && line.contains("migrated at the next start"),
            "{line}"
        );
        assert_eq!(tables(&db).await, vec!["agent_host_schema".to_string()]);

        client
            .batch_execute("INSERT INTO agent_host_schema VALUES (999);")
            .await
            .unwrap();
        let (code, out) = run().await;
        let line = store_line(&out);
        assert!(
            line.starts_with("FAIL") && line.contains("schema newer (999"),
            "{line}"
        );
        assert_eq!(code, 1, "{out}");
        drop(client);
        db.drop_now().await;
    })
    .await
}

/// What `serve` refuses, doctor fails, on a line naming the setting: a listener beyond
/// loopback without credentials, a gRPC port in use, a file where a folder of the push key,
/// the workspaces or the database should be, a folder as the database, a PostgreSQL URL
/// serve cannot read.
#[tokio::test]
async fn doctor_fails_what_serve_refuses() {
    limit(async {
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        let file = tmp.path().join("a-file");
        std::fs::write(&file, "not a folder\n").unwrap();
        let under = |name: &str| file.join(name).display().to_string();
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy_port = busy.local_addr().unwrap().port().to_string();
        let repo = tmp.path().display().to_string();
        let cases: Vec<(Vec<String>, &str, &str)> = vec![
            (vec!["--bind".into(), "0.0.0.0".into()], "bind", "--bind"),
            (
                vec!["--grpc-port".into(), busy_port.clone()],
                "grpc port",
                "--grpc-port",
            ),
            (
                vec!["--push".into(), "--push-key-file".into(), under("push.key")],
                "push key",
                "is not a directory",
            ),
            (
                vec!["--workspace-dir".into(), under("ws")],
                "git workspaces",
                "--workspace-dir",
            ),
            (
                vec!["--store".into(), format!("sqlite:{}", under("x.db"))],
                "store",
                "is not a directory",
            ),
            (
                vec!["--store".into(), format!("sqlite:{repo}")],
                "store",
                "is a directory",
            ),
            (
                vec![
                    "--store".into(),
                    "postgres://root@127.0.0.1/x?sslmode=bogus".into(),
                ],
                "settings",
                "store",
            ),
        ];
        let key = [("AGENT_HOST_DOCTOR_TEST_KEY", "k")];
        for (args, check, says) in cases {
            let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
            if !args.iter().any(|a| a == "--store") {
                all.extend(["--store", "memory"]);
            }
            let (code, out) = doctor_run(&adapters, &home, tmp.path(), false, &key, &all).await;
            assert_eq!(code, 1, "{args:?}: {out}");
            let failed = out.lines().find(|l| {
                l.starts_with("FAIL")
                    && l.split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ")
                        .starts_with(&format!("FAIL {check}"))
            });
            let line = failed.unwrap_or_else(|| panic!("{args:?}: no FAIL {check} line: {out}"));
            assert!(line.contains(says), "{args:?}: {line}");
        }
        drop(busy);
    })
    .await
}

/// The sandbox doctor reports is the one `serve` gives the adapter's tasks: an adapter's own
/// `[sandbox] mode` counts where the settings leave it unset, and a setting wins over it.
#[tokio::test]
async fn doctor_reports_the_adapters_own_sandbox() {
    limit(async {
        let tmp = tempfile::tempdir().unwrap();
        let (adapters, home) = setup(tmp.path());
        let file = adapters.join("fakecli.toml");
        let spec = std::fs::read_to_string(&file).unwrap();
        let spec = spec.replace(
            "[doctor]",
            "[sandbox]\nmode = \"off\"\nnetwork = \"open\"\n\n[doctor]",
        );
        std::fs::write(&file, spec).unwrap();
        let key = [("AGENT_HOST_DOCTOR_TEST_KEY", "k")];
        let sandbox = |out: &str| {
            out.lines()
                .find(|l| l.contains(" sandbox ") && l.contains("mode "))
                .map(str::to_string)
                .unwrap_or_else(|| panic!("no sandbox line: {out}"))
        };
        let (_, out) = doctor_with(&adapters, &home, tmp.path(), false, &key).await;
        assert!(sandbox(&out).contains("mode off"), "{out}");
        let setting = [
            ("AGENT_HOST_DOCTOR_TEST_KEY", "k"),
            ("AGENT_HOST_SANDBOX", "auto"),
        ];
        let (_, out) = doctor_with(&adapters, &home, tmp.path(), false, &setting).await;
        assert!(sandbox(&out).contains("mode auto"), "{out}");
    })
    .await
}
