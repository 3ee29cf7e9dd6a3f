//! Processes: every exit path ends the task with one terminal state and leaves nothing
//! running.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{json, Value};

use crate::common::*;

fn status_text(t: &Value) -> String {
    t["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

async fn start_task(s: &TestServer, prompt: &str) -> String {
    let mut p = send_params(prompt);
    p["configuration"] = json!({"returnImmediately": true});
    s.rpc("SendMessage", p).await["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

async fn final_state(s: &TestServer, prompt: &str) -> Value {
    let id = start_task(s, prompt).await;
    s.task_when(&id, |t| {
        matches!(
            t["status"]["state"].as_str(),
            Some("TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED")
        )
    })
    .await
}

#[tokio::test]
async fn cancel_kills_the_whole_process_tree() {
    limit(async {
        let s = TestServer::start().await;
        let id = start_task(&s, "grandchild").await;
        let t = s
            .task_when(&id, |t| status_text(t).contains("grandchild pid"))
            .await;
        let pid = grandchild_pid(&status_text(&t)).expect("pid in the tool result");
        assert!(process_alive(pid));
        let pgid = pgrp_of(pid).expect("grandchild's group");
        assert_ne!(pgid, pid, "the grandchild is in the CLI's group");
        assert_ne!(
            pgid as i32,
            nix::unistd::getpgrp().as_raw(),
            "the CLI leads its own group"
        );
        let c = s.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED");
        groups_end("every process of the task ends with its cancel", &[pgid]).await;
        assert!(!process_alive(pid));
    })
    .await;
}

#[tokio::test]
async fn an_agent_that_ignores_sigterm_is_killed_after_the_grace_period() {
    limit(async {
        let s = TestServer::with(Options {
            grace: Duration::from_millis(300),
            ..Options::default()
        })
        .await;
        let id = start_task(&s, "ignore-sigterm").await;
        s.task_when(&id, |t| {
            t["artifacts"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["artifactId"] == "assistant-response"))
        })
        .await;
        let started = std::time::Instant::now();
        let c = s.rpc("CancelTask", json!({"id": id})).await;
        assert_eq!(c["result"]["status"]["state"], "TASK_STATE_CANCELED", "{c}");
        assert!(started.elapsed() < Duration::from_secs(10));
    })
    .await;
}

#[tokio::test]
async fn hard_and_idle_timeouts_fail_the_task() {
    limit(async {
        let s = TestServer::with(Options {
            timeout: Duration::from_millis(1500),
            idle_timeout: Duration::from_secs(30),
            grace: Duration::from_millis(200),
            ..Options::default()
        })
        .await;
        let t = final_state(&s, "hang").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert!(status_text(&t).contains("limit"), "{}", status_text(&t));

        let s = TestServer::with(Options {
            idle_timeout: Duration::from_millis(600),
            grace: Duration::from_millis(200),
            ..Options::default()
        })
        .await;
        let t = final_state(&s, "hang").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert!(status_text(&t).contains("idle"), "{}", status_text(&t));
        // That waiting for an answer is not idleness is tested on the turn itself, under
        // paused time (engine::turn::tests).
    })
    .await;
}

#[tokio::test]
async fn crashes_errors_and_exit_codes_fail_the_task() {
    limit(async {
        let s = TestServer::start().await;
        let t = final_state(&s, "crash").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert!(status_text(&t).contains("signal 6"), "{}", status_text(&t));
        let t = final_state(&s, "exit=3").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert!(status_text(&t).contains("code 3"), "{}", status_text(&t));
        assert_eq!(t["metadata"]["exitCode"], 3);
        let t = final_state(&s, "fail").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert!(
            status_text(&t).contains("simulated failure"),
            "{}",
            status_text(&t)
        );
        // Stderr of a failing agent is part of the message.
        let t = final_state(&s, "exit=4 stderr").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        assert!(
            status_text(&t).contains("still stderr"),
            "{}",
            status_text(&t)
        );
    })
    .await;
}

#[tokio::test]
async fn garbage_floods_and_long_lines_do_not_break_a_task() {
    limit(async {
        let s = TestServer::with(Options {
            max_line_bytes: 4096,
            ..Options::default()
        })
        .await;
        let t = final_state(&s, "noise").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        let t = final_state(&s, "long-line=100000").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        let t = final_state(&s, "flood=3000").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        let answer = t["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["artifactId"] == "assistant-response")
            .unwrap();
        assert_eq!(
            answer["parts"].as_array().unwrap().len(),
            1,
            "chunks merge into one part"
        );
        let frames = s
            .stream("SendStreamingMessage", send_params("flood=2000"))
            .await;
        let chunks = frames
            .iter()
            .filter(|f| {
                f.data["result"]["artifactUpdate"]["artifact"]["artifactId"] == "assistant-response"
            })
            .count();
        assert!(chunks >= 2000, "every chunk streamed: {chunks}");
    })
    .await;
}

#[tokio::test]
async fn a_missing_program_fails_the_task_with_a_clear_message() {
    limit(async {
        // The host checks the program when it starts, so this one goes away after that.
        let bin = tempfile::tempdir().unwrap();
        let program = bin.path().join("agent-binary");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            &program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let s = TestServer::with(Options {
            program: Some(program.clone()),
            ..Options::default()
        })
        .await;
        std::fs::remove_file(&program).unwrap();
        let t = final_state(&s, "hello").await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED");
        let text = status_text(&t);
        assert!(text.contains("could not be started"), "{text}");
        assert!(
            !text.contains(&bin.path().display().to_string()),
            "no local paths in errors: {text}"
        );
    })
    .await;
}

#[tokio::test]
async fn shutdown_ends_every_task_and_its_processes() {
    limit(async {
        let s = TestServer::with(Options {
            grace: Duration::from_millis(300),
            ..Options::default()
        })
        .await;
        let id = start_task(&s, "grandchild").await;
        let t = s
            .task_when(&id, |t| status_text(t).contains("grandchild pid"))
            .await;
        let pid = grandchild_pid(&status_text(&t)).unwrap();
        let pgid = pgrp_of(pid).unwrap();
        let mut stream = s
            .open_stream("SubscribeToTask", json!({"id": id}), None)
            .await;
        stream.next().await.unwrap();
        let client = s.client.clone();
        let base = s.base.clone();
        s.shutdown().await;
        let rest = stream.all().await;
        assert_eq!(
            states(&rest).last().map(String::as_str),
            Some("TASK_STATE_FAILED")
        );
        groups_end("every process of the task ends with the shutdown", &[pgid]).await;
        assert!(
            client.get(format!("{base}/health")).send().await.is_err(),
            "server stopped"
        );
    })
    .await;
}

#[tokio::test]
async fn a_text_cli_on_a_pty_asks_and_gets_its_answer() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ask.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\n[ \"$1\" = -- ] && shift\necho \"Planning: $1\"\nprintf 'Delete the build directory? [y/N] '\nread answer\nif [ \"$answer\" = y ]; then echo 'Deleted.'; else echo 'Kept it.'; fi\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let s = TestServer::with(Options {
            adapter: "generic",
            program: Some(script),
            ..Options::default()
        })
        .await;
        for (answer, expect) in [("yes", "Deleted."), ("no", "Kept it.")] {
            let v = s.rpc("SendMessage", send_params("clean up")).await;
            let t = &v["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{v}");
            let question = t["status"]["message"]["parts"][0]["text"].as_str().unwrap();
            assert!(question.contains("Delete the build directory?"), "{question}");
            let mut reply = send_params(answer);
            reply["message"]["taskId"] = t["id"].clone();
            let r = s.rpc("SendMessage", reply).await;
            let t = &r["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
            let text = t["status"]["message"]["parts"][0]["text"].as_str().unwrap();
            assert!(text.contains("Planning: clean up") && text.contains(expect), "{text}");
        }
    })
    .await;
}

#[tokio::test]
async fn the_jsonl_adapter_runs_any_program_speaking_the_native_protocol() {
    limit(async {
        use agent_host::adapter::PromptVia;
        for via in [PromptVia::Arg, PromptVia::Stdin] {
            let s = TestServer::with(Options {
                adapter: "jsonl",
                prompt_via: via,
                ..Options::default()
            })
            .await;
            let v = s.rpc("SendMessage", send_params("echo this prompt")).await;
            let t = &v["result"]["task"];
            assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{via:?}: {v}");
            assert_eq!(
                t["status"]["message"]["parts"][0]["text"],
                "echo this prompt"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn binary_parts_are_saved_for_the_agent_unless_the_modes_refuse_them() {
    limit(async {
        let png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR";
        let params = json!({"message": {"messageId": uuid(), "role": "ROLE_USER", "parts": [
            {"text": "echo what is in the screenshot?"},
            {"raw": base64::engine::general_purpose::STANDARD.encode(png),
             "mediaType": "image/png", "filename": "shot.png"},
        ]}});
        let repo = tempfile::tempdir().unwrap();
        let repo_path = repo.path().to_str().unwrap();
        // The demo adapter as shipped: `agent-host fake-agent PROMPT`.
        let demo = [
            ("AGENT_ADAPTER", "demo"),
            ("AGENT_BINARY", env!("CARGO_BIN_EXE_agent-host")),
            ("AGENT_REPO_PATH", repo_path),
        ];
        let host = HostProcess::spawn(&demo, &[]).await;
        assert_eq!(
            host.card["defaultInputModes"],
            json!(["text/plain", "application/json", "*/*"])
        );
        let v = host.rpc("/", "SendMessage", params.clone(), &[]).await;
        let t = &v["result"]["task"];
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{v}");
        let id = t["id"].as_str().unwrap();
        let saved = repo
            .path()
            .canonicalize()
            .unwrap()
            .join(format!(".agent-host/attachments/{id}/shot.png"));
        assert_eq!(std::fs::read(&saved).unwrap(), png);
        assert_eq!(
            std::fs::read_to_string(repo.path().join(".agent-host/.gitignore")).unwrap(),
            "*\n"
        );
        // The echo agent answers with its prompt: the text, then where the file is.
        assert_eq!(
            status_text(t),
            format!(
                "echo what is in the screenshot?\n\nAttached file shot.png (image/png, {} bytes), saved at {}",
                png.len(),
                saved.display()
            )
        );
        drop(host);

        let narrow = HostProcess::spawn(
            &[
                demo[0],
                demo[1],
                demo[2],
                ("AGENT_INPUT_MODES", "text/plain,application/json"),
            ],
            &[],
        )
        .await;
        assert_eq!(
            narrow.card["defaultInputModes"],
            json!(["text/plain", "application/json"])
        );
        let v = narrow.rpc("/", "SendMessage", params, &[]).await;
        assert_eq!(v["error"]["code"], -32005, "{v}");
        assert_eq!(
            v["error"]["message"],
            "message.parts[1] has media type 'image/png'; this agent accepts text/plain, application/json"
        );
    })
    .await;
}

/// An executable shell script `agent.sh` with this body in `dir`.
fn agent_script(dir: &std::path::Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("agent.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The task once it has completed or failed.
async fn ended(s: &TestServer, id: &str) -> Value {
    s.task_when(id, |t| {
        matches!(
            t["status"]["state"].as_str(),
            Some("TASK_STATE_COMPLETED" | "TASK_STATE_FAILED")
        )
    })
    .await
}

/// Issue 15 item 4: an agent that exits 0 after starting a background process that keeps its
/// stdout open (a dev server) ends its turn at its exit, not at the idle timeout; the
/// background process is stopped with the task.
#[tokio::test]
async fn a_turn_ends_when_the_program_exits_and_its_leftovers_are_killed() {
    limit(async {
        let bin = tempfile::tempdir().unwrap();
        let pidfile = bin.path().join("server.pid");
        let script = agent_script(
            bin.path(),
            &format!(
                "sleep 1000 &\necho $! > {}\necho '{{\"type\":\"text\",\"text\":\"dev server started\",\"delta\":true}}'\nexit 0\n",
                pidfile.display()
            ),
        );
        let s = TestServer::with(Options {
            program: Some(script),
            // Far beyond the test's limit: only the program's exit can end the turn in time.
            idle_timeout: Duration::from_secs(600),
            ..Options::default()
        })
        .await;
        let id = start_task(&s, "start the dev server").await;
        let t = ended(&s, &id).await;
        assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
        let pid: u32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        process_ends("the background process ends with the task", pid).await;
    })
    .await;
}

/// Issue 15 item 10: a program that asks for approval and then exits 0 without waiting for the
/// answer ends `failed` saying so, not `completed` with "The agent finished without output".
#[tokio::test]
async fn a_program_that_asks_and_exits_zero_ends_failed_saying_so() {
    limit(async {
        let bin = tempfile::tempdir().unwrap();
        let script = agent_script(
            bin.path(),
            "echo '{\"type\":\"approval_required\",\"id\":\"a1\",\"kind\":\"command\",\"target\":\"rm -rf build\"}'\nexit 0\n",
        );
        let s = TestServer::with(Options {
            program: Some(script),
            ..Options::default()
        })
        .await;
        let id = start_task(&s, "clean the build").await;
        let t = ended(&s, &id).await;
        assert_eq!(t["status"]["state"], "TASK_STATE_FAILED", "{t}");
        let text = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("without waiting for the answer"), "{t}");
    })
    .await;
}
