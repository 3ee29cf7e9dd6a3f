//! The web console at `/ui/` in a real browser (headless Chromium over WebDriver) against a
//! host serving the demo agent: approvals, questions, cancel, a long stream cut by a proxy
//! and resumed, paging and filters over 500 tasks, the token prompt, text never parsed as
//! HTML. Headers and the JSON route are checked without a browser too.

use std::time::Duration;

use agent_host::settings::{Credential, Secret, Security};
use agent_host::store::{SqliteStore, TaskStore};
use serde_json::{json, Value};

use crate::browser::{with_browser, Browser, CuttingProxy};
use crate::common::*;

/// Starts a task from the New task page and waits for its page.
async fn start_task(b: &Browser, base: &str, prompt: &str) {
    b.goto(&format!("{base}/ui/#/new")).await;
    b.type_into("#new-prompt", prompt).await;
    b.click("#new-submit").await;
    b.el("#task-state").await;
}

#[tokio::test]
async fn static_files_have_strict_headers_and_the_api_needs_the_token() {
    limit(async {
        let s = TestServer::with(Options {
            security: token_security(),
            ..Options::default()
        })
        .await;
        let r = s
            .client
            .get(format!("{}/ui/", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let h = r.headers().clone();
        assert_eq!(h["content-type"], "text/html; charset=utf-8");
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
        assert_eq!(h["x-content-type-options"], "nosniff");
        let etag = h["etag"].clone();
        let again = s
            .client
            .get(format!("{}/ui/main.js", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(
            again.headers()["content-type"],
            "text/javascript; charset=utf-8"
        );
        let r = s
            .client
            .get(format!("{}/ui/", s.base))
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 304);
        // The files are public; the data is not.
        let r = s
            .client
            .get(format!("{}/ui/api/host", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        let r = s
            .client
            .get(format!("{}/ui/api/host", s.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let info: Value = r.json().await.unwrap();
        assert_eq!(info["adapters"][0]["id"], "demo", "{info}");
        assert!(info["workspaceRoots"][0].is_string(), "{info}");
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_console_is_off_when_set_so() {
    limit(async {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Options::default().settings(dir.path());
        settings.ui = false;
        let app = agent_host::app::App::start(&settings, "127.0.0.1:1".parse().unwrap())
            .await
            .unwrap();
        let r = tower::ServiceExt::oneshot(
            app.router(),
            axum::http::Request::get("/ui/")
                .header("host", "127.0.0.1:1")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 404);
    })
    .await;
}

const TOKEN: &str = "console-token-0123456789";

fn token_security() -> Security {
    Security {
        credentials: vec![Credential {
            name: "op".into(),
            secret: Secret::Bearer(TOKEN.into()),
        }],
        api_key_header: "X-API-Key".into(),
        ..Security::default()
    }
}

#[tokio::test]
async fn approvals_allowed_and_denied_and_a_question_answered_in_the_page() {
    with_browser(async |b| {
        let s = TestServer::start().await;
        start_task(&b, &s.base, "please approval").await;
        b.el("#approve-allow").await;
        b.el("#approve-deny").await;
        let detail = b.text_until(".approval dl", |t| t.contains("Bash")).await;
        assert!(
            detail.contains("command") && detail.contains("ls"),
            "{detail}"
        );
        b.screenshot("console-approval.png").await;
        // On the Tasks page it waits on top, counted in the title; its link leads back.
        b.goto(&format!("{}/ui/#/", s.base)).await;
        b.el("#waiting tr.task-row").await;
        let title = b.js("return document.title").await;
        assert_eq!(title, json!("(1) agent-host"));
        b.click("#waiting td.prompt a").await;
        b.el("#approve-allow").await;
        b.text_until("#waiting-count", |t| t.starts_with("1 waiting"))
            .await;
        b.click("#approve-allow").await;
        b.state_is("completed").await;
        // The header's counts follow the task's end while its page stays open (the host
        // may still count it as running when the page sees the end).
        b.text_until("#load", |t| t.starts_with("0 running · 0 queued"))
            .await;
        b.text_until("#waiting-count", |t| t.starts_with("0 waiting"))
            .await;
        let result = b.text_until("#answer", |t| !t.is_empty()).await;
        assert!(result.contains("Everything looks fine"), "{result}");
        b.screenshot("console-task-done.png").await;
        assert!(b
            .el("#answer")
            .await
            .text()
            .await
            .unwrap()
            .contains("I looked at the project"));

        start_task(&b, &s.base, "another approval").await;
        b.type_into("#approval-message", "not now").await;
        b.click("#approve-deny").await;
        b.text_until("#task-state", |t| t != "input-required" && t != "working")
            .await;
        let body = b.text("main").await;
        assert!(body.to_lowercase().contains("deni"), "{body}");

        start_task(&b, &s.base, "a question for you").await;
        b.type_into("#answer-text", "README.md").await;
        b.click("#answer-send").await;
        b.state_is("completed").await;
        let result = b.text_until("#answer", |t| !t.is_empty()).await;
        assert!(result.contains("README.md"), "{result}");
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

/// A task that ends while its page is open: the page sees the end at once, but the host
/// counts the task as running until its program exits (here 1.5 s after it reported the
/// end); the header's counts still come to 0 running.
#[tokio::test]
async fn the_header_counts_follow_a_task_that_ends_while_its_page_is_open() {
    with_browser(async |b| {
        let scenario = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/scenarios/done-then-exit-later.jsonl"
        );
        let s = TestServer::with(Options {
            adapter: "jsonl",
            extra_args: vec!["--scenario".into(), scenario.into()],
            grace: Duration::from_secs(5),
            ..Options::default()
        })
        .await;
        start_task(&b, &s.base, "finish, then take a while to exit").await;
        b.state_is("completed").await;
        b.text_until("#load", |t| t.starts_with("0 running · 0 queued"))
            .await;
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

/// Pids of processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                out.push(pid);
            }
        }
    }
    out
}

#[tokio::test]
async fn a_hanging_task_is_canceled_from_the_page_and_its_process_is_gone() {
    with_browser(async |b| {
        let s = TestServer::start().await;
        let marker = format!("hang-{}", uuid::Uuid::new_v4());
        start_task(&b, &s.base, &format!("hang {marker}")).await;
        b.state_is("working").await;
        eventually("the agent starts", WAIT, async || {
            let found = processes_with(&marker);
            ready(!found.is_empty(), found)
        })
        .await;
        b.click("#cancel").await;
        b.state_is("canceled").await;
        eventually("the agent ends with its cancel", WAIT, async || {
            let found = processes_with(&marker);
            ready(found.is_empty(), found)
        })
        .await;
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_long_stream_cut_by_a_proxy_resumes_without_gaps_or_duplicates() {
    with_browser(async |b| {
        let s = TestServer::start().await;
        let upstream: std::net::SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
        let proxy = CuttingProxy::start(upstream, 40_000).await;
        let base = format!("http://{}", proxy.addr);
        b.client.set_window_size(1280, 500).await.expect("resize");
        start_task(&b, &base, "flood=2000 sleep=2").await;
        b.text_until("#answer", |t| t.contains(" chunk 300")).await;
        b.screenshot("console-task-streaming.png").await;
        // The page follows the live end of the stream...
        let at_end = "return window.scrollY > 0 && window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80";
        let where_ =
            "return [window.scrollY, window.innerHeight, document.documentElement.scrollHeight]";
        eventually("the page follows the stream", crate::browser::WAIT, async || {
            let at = b.js(at_end).await == json!(true);
            ready(at, b.js(where_).await)
        })
        .await;
        // ...until the reader scrolls up: then it stays where they are while more arrives.
        let chunks = "return Number(document.getElementById('answer').dataset.chunks)";
        b.js("window.scrollTo(0, 0); window.dispatchEvent(new Event('scroll')); return 0").await;
        let before = b.js(chunks).await.as_u64().unwrap();
        eventually("more chunks arrive", crate::browser::WAIT, async || {
            let n = b.js(chunks).await.as_u64().unwrap();
            let state = b.text("#task-state").await;
            ready(n >= before + 50 || state == "completed", (n, state))
        })
        .await;
        assert_eq!(b.js("return window.scrollY").await, json!(0), "the page pulled the reader down");
        b.state_is("completed").await;
        let answer = b
            .js("return document.getElementById('answer').textContent")
            .await;
        let answer = answer.as_str().unwrap();
        let tail: String = (1..=2000).map(|i| format!(" chunk {i}")).collect();
        assert!(
            answer.starts_with("I looked at the project. ") && answer.ends_with(&tail),
            "gaps in the answer: {}…",
            &answer[..200.min(answer.len())]
        );
        assert_eq!(
            answer.matches(" chunk ").count(),
            2000,
            "duplicates in the answer"
        );
        // The final result repeats the streamed answer: it is not shown a second time.
        let second = b
            .js("return document.getElementById('final-result') === null")
            .await;
        assert_eq!(second, json!(true), "the answer shown twice");
        assert!(
            proxy.cuts.load(std::sync::atomic::Ordering::SeqCst) >= 1,
            "the proxy never cut the stream, so resuming was not tested"
        );
        let from = proxy.resumed_from.load(std::sync::atomic::Ordering::SeqCst);
        assert!(from > 0, "the page resumed without Last-Event-ID");
        let reconnects = b
            .js("return document.getElementById('conn').dataset.reconnects || '0'")
            .await;
        assert_ne!(reconnects, json!("0"), "the page never reconnected");
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

/// A SQLite store holding `n` finished tasks in five contexts (every tenth failed).
async fn store_with_tasks(path: &std::path::Path, n: usize) {
    let store = SqliteStore::open(path).unwrap();
    for i in 0..n {
        let state = if i % 10 == 0 {
            "TASK_STATE_FAILED"
        } else {
            "TASK_STATE_COMPLETED"
        };
        let (id, ctx) = (format!("task-{i:04}"), format!("ctx-{}", i % 5));
        let task: agent_host::protocol::v1::Task = serde_json::from_value(json!({
            "id": id, "contextId": ctx,
            "status": {"state": state, "timestamp": format!("2026-01-01T00:{:02}:{:02}.000Z", i / 60, i % 60)},
            "history": [{"messageId": format!("m-{i}"), "role": "ROLE_USER", "taskId": id, "contextId": ctx,
                         "parts": [{"text": format!("prompt number {i}\nsecond line")}]}],
            "metadata": {"adapter": "demo"}
        }))
        .unwrap();
        store.create(task).await.unwrap();
    }
}

#[tokio::test]
async fn five_hundred_tasks_page_and_filter() {
    with_browser(async |b| {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("tasks.db");
        store_with_tasks(&db, 500).await;
        let s = TestServer::with(Options {
            db: Some(db),
            ..Options::default()
        })
        .await;
        b.goto(&format!("{}/ui/#/", s.base)).await;
        let info = b.text_until("#page-info", |t| t.contains("of 500")).await;
        assert!(info.contains("page 1 · 50 of 500"), "{info}");
        let rows = b.js("return document.querySelectorAll('#list tr.task-row').length").await;
        assert_eq!(rows, json!(50));
        b.screenshot("console-tasks.png").await;
        let mut seen = std::collections::HashSet::new();
        for page in 1..=10 {
            b.text_until("#page-info", |t| t.starts_with(&format!("page {page} "))).await;
            let ids = b
                .js("return [...document.querySelectorAll('#list tr.task-row')].map(r => r.dataset.task)")
                .await;
            for id in ids.as_array().unwrap() {
                assert!(seen.insert(id.as_str().unwrap().to_string()), "{id} twice");
            }
            if page < 10 {
                b.click("#page-next").await;
            }
        }
        assert_eq!(seen.len(), 500, "every task on some page");
        let next_disabled = b.js("return document.getElementById('page-next').disabled").await;
        assert_eq!(next_disabled, json!(true));
        // The first line of the prompt, not the rest.
        let prompt = b.text("#list tr.task-row td.prompt").await;
        assert!(prompt.starts_with("prompt number") && !prompt.contains("second"), "{prompt}");

        b.goto(&format!("{}/ui/#/?state=TASK_STATE_FAILED", s.base)).await;
        b.text_until("#page-info", |t| t.contains("of 50 tasks")).await;
        let states = b
            .js("return [...new Set([...document.querySelectorAll('#list tr.task-row')].map(r => r.dataset.state))]")
            .await;
        assert_eq!(states, json!(["failed"]));
        b.goto(&format!("{}/ui/#/?context=ctx-3", s.base)).await;
        b.text_until("#page-info", |t| t.contains("of 100 tasks")).await;
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn with_a_token_the_page_asks_for_it_and_agent_text_stays_text() {
    with_browser(async |b| {
        let s = TestServer::with(Options {
            security: token_security(),
            ..Options::default()
        })
        .await;
        // Without the token: the prompt for it, and the API refuses.
        b.goto(&format!("{}/ui/", s.base)).await;
        let login = b.el("#login-token").await;
        assert!(login.is_displayed().await.unwrap());
        // A wrong token is refused and the prompt says so.
        b.type_into("#login-token", "wrong-token").await;
        b.click("#login-submit").await;
        b.text_until("#login-error", |t| t.contains("refused")).await;
        let r = s
            .client
            .post(format!("{}/", s.base))
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        b.type_into("#login-token", TOKEN).await;
        b.click("#login-submit").await;
        b.el("#page-info").await;
        let stored = b
            .js("return sessionStorage.getItem('agent-host-token')")
            .await;
        assert_eq!(stored, json!(TOKEN));
        let cookies = b.js("return document.cookie").await;
        assert_eq!(cookies, json!(""));

        let evil = "<img src=x onerror=alert(1)> echo";
        start_task(&b, &s.base, evil).await;
        b.state_is("completed").await;
        let answer = b.text_until("#answer", |t| !t.is_empty()).await;
        assert!(answer.contains("<img src=x onerror=alert(1)>"), "{answer}");
        let imgs = b.js("return document.querySelectorAll('img').length").await;
        assert_eq!(imgs, json!(0), "agent text became HTML");
        assert!(b.client.get_alert_text().await.is_err(), "a script ran");
        b.goto(&format!("{}/ui/#/", s.base)).await;
        let row = b
            .text_until("#list td.prompt", |t| t.contains("<img"))
            .await;
        assert!(row.contains("onerror"), "{row}");
        let imgs = b.js("return document.querySelectorAll('img').length").await;
        assert_eq!(imgs, json!(0), "a prompt became HTML");
        // The check can fail: the same text through innerHTML does make an element.
        let unsafe_way = b
            .js("const d = document.createElement('div'); d.innerHTML = document.querySelector('#list td.prompt').textContent; document.body.append(d); return document.querySelectorAll('img').length")
            .await;
        assert_eq!(unsafe_way, json!(1));
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_new_task_takes_a_root_as_working_directory_and_an_attachment() {
    with_browser(async |b| {
        let s = TestServer::start().await;
        let root = s.dir().canonicalize().unwrap();
        // A directory outside the roots is refused, with the host's reason on the page.
        b.goto(&format!("{}/ui/#/new", s.base)).await;
        b.type_into("#new-prompt", "echo outside").await;
        b.type_into("#new-cwd", "/").await;
        b.click("#new-submit").await;
        let err = b.text_until("#new-error", |t| !t.is_empty()).await;
        assert!(err.contains("outside"), "{err}");

        b.goto(&format!("{}/ui/#/new", s.base)).await;
        b.type_into("#new-prompt", "echo look at the file").await;
        b.el("#new-root")
            .await
            .select_by_value(&root.display().to_string())
            .await
            .expect("pick the root");
        let upload = tempfile::tempdir().unwrap();
        let file = upload.path().join("shot.bin");
        std::fs::write(&file, [0u8, 1, 2, 255]).unwrap();
        b.type_into("#new-files", &file.display().to_string()).await;
        b.click("#new-submit").await;
        b.state_is("completed").await;
        let result = b.text_until("#answer", |t| !t.is_empty()).await;
        assert!(result.contains("Attached file shot.bin"), "{result}");
        let id = b
            .js("return document.getElementById('task-id').textContent")
            .await;
        let saved = root
            .join(".agent-host/attachments")
            .join(id.as_str().unwrap())
            .join("shot.bin");
        assert_eq!(std::fs::read(&saved).unwrap(), [0u8, 1, 2, 255]);
        let cwd = b.text("#task-meta").await;
        assert!(cwd.contains(&root.display().to_string()), "{cwd}");
        b.close().await;
        s.shutdown().await;
    })
    .await;
}

/// Makes the server's folder a git repository with one commit, so that a task works in a
/// workspace of its own and brings back a `changes` artifact.
fn git_repo(dir: &std::path::Path) {
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .status()
            .expect("git")
            .success();
        assert!(ok, "git {args:?}");
    }
}

/// True when the page has no horizontal scroll (nothing wider than the window).
async fn fits(b: &Browser) -> bool {
    b.js("return document.documentElement.scrollWidth <= window.innerWidth")
        .await
        == json!(true)
}

#[tokio::test]
async fn a_task_reads_for_people_title_timeline_changes_markdown_banner_and_narrow_list() {
    with_browser(async |b| {
        let s = TestServer::start().await;
        git_repo(s.dir());

        // Titled with its prompt; its steps with durations; the change it made.
        start_task(&b, &s.base, "edit=notes.txt add a note\nsecond line").await;
        b.state_is("completed").await;
        let title = b.text("#task-title").await;
        assert_eq!(title, "edit=notes.txt add a note");
        let doc_title = b.js("return document.title").await;
        assert!(
            doc_title.as_str().unwrap().contains("edit=notes.txt add a note"),
            "{doc_title}"
        );
        let id = b.text("#task-id").await;
        assert!(!doc_title.as_str().unwrap().contains(&id), "{doc_title}");
        let tools = b
            .js("return [...document.querySelectorAll('.step-tool')].map(r => [r.dataset.status, r.querySelector('.dur').textContent])")
            .await;
        let tools = tools.as_array().unwrap();
        assert!(tools.len() >= 2, "{tools:?}");
        for t in tools {
            assert_eq!(t[0], "done", "{tools:?}");
            assert!(t[1].as_str().unwrap().ends_with(" s"), "a duration: {tools:?}");
        }
        let files = b.text_until("#changes-files", |t| t.contains("notes.txt")).await;
        assert!(files.contains("+1"), "{files}");
        let added = b
            .js("return [...document.querySelectorAll('#diff .dl-add')].map(d => d.textContent)")
            .await;
        assert_eq!(added, json!(["+- edit=notes.txt add a note"]), "the added line marked");
        let link = b
            .js("const a = document.getElementById('patch-download'); return [a.getAttribute('download'), a.href.slice(0, 5)]")
            .await;
        assert_eq!(link, json!(["changes.patch", "blob:"]));
        // The diff shows the patch the link downloads, line by line (the strict CSP keeps
        // the page itself from reading the blob back).
        let patch = b
            .js("return [...document.querySelectorAll('#diff .dl')].map(d => d.textContent).join('\\n')")
            .await;
        assert!(
            patch.as_str().unwrap().starts_with("diff --git a/notes.txt b/notes.txt"),
            "{patch}"
        );
        b.screenshot("console-task-changes-1280.png").await;
        b.client.set_window_size(400, 900).await.expect("resize");
        assert!(fits(&b).await, "the task page scrolls sideways at 400 px");
        b.screenshot("console-task-changes-400.png").await;
        b.client.set_window_size(1280, 900).await.expect("resize");

        // The answer as Markdown; HTML in it stays text and no script runs.
        let md = "Render this echo\n## Plan\n**bold** and `code` <script>window.pwned = 1</script>\n- one\n- two\n[bad](javascript:window.pwned=2) [good](https://example.com)";
        start_task(&b, &s.base, md).await;
        b.state_is("completed").await;
        b.text_until("#answer strong", |t| t == "bold").await;
        let shape = b
            .js("const a = document.getElementById('answer'); return [a.querySelector('h4')?.textContent, a.querySelector('code')?.textContent, a.querySelectorAll('li').length, a.querySelectorAll('script').length, [...a.querySelectorAll('a')].map(x => x.href), window.pwned === undefined, a.textContent.includes('<script>window.pwned = 1</script>')]")
            .await;
        assert_eq!(
            shape,
            json!(["Plan", "code", 2, 0, ["https://example.com/"], true, true])
        );
        assert!(b.client.get_alert_text().await.is_err(), "a script ran");
        b.screenshot("console-task-markdown-1280.png").await;

        // A failure: the reason and its kind in a banner above the steps.
        start_task(&b, &s.base, "fail").await;
        b.state_is("failed").await;
        let banner = b.text_until("#banner", |t| !t.is_empty()).await;
        assert!(banner.contains("Failed") && banner.contains("simulated failure"), "{banner}");
        let above = b
            .js("return document.getElementById('banner').getBoundingClientRect().top < document.getElementById('timeline').getBoundingClientRect().top")
            .await;
        assert_eq!(above, json!(true));
        b.el("#error-kind").await;
        b.screenshot("console-task-failed-1280.png").await;

        // The list at 400 px: cards, no sideways scroll.
        b.goto(&format!("{}/ui/#/", s.base)).await;
        b.el("#list tr.task-row").await;
        b.client.set_window_size(400, 900).await.expect("resize");
        let display = b
            .js("return getComputedStyle(document.querySelector('#list tr.task-row')).display")
            .await;
        assert_eq!(display, json!("flex"), "rows become cards");
        assert!(fits(&b).await, "the list scrolls sideways at 400 px");
        let header = b.text("#waiting-count").await;
        assert!(header.contains("waiting for input"), "{header}");
        b.screenshot("console-tasks-400.png").await;
        b.close().await;
        s.shutdown().await;
    })
    .await;
}
