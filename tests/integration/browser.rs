//! A real browser for the console tests: Debian's `chromedriver` started on a free port in
//! its own process group, driving a headless Chromium with a fresh profile, over WebDriver
//! (`fantoccini`). Dropping a [`Browser`] kills chromedriver and everything it started, also
//! when a test fails. Without Chromium, a test skips loudly, or fails under `CI=true`.
//!
//! WebDriver from Rust rather than Playwright from npm: the tests stay in the one integration
//! binary, next to `TestServer`, with no Node packages to install, and Debian's
//! `chromium-driver` always matches its `chromium`.
//!
//! Also a TCP proxy that cuts one streaming connection, for the resume test.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{eventually, limit_to, ready};

/// Browser tests run one at a time (two cores, one Chromium each).
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Longest wait for something to show on the page.
pub const WAIT: Duration = Duration::from_secs(30);

pub struct Browser {
    pub client: Client,
    driver: tokio::process::Child,
    _profile: tempfile::TempDir,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

fn find(names: &[&str]) -> Option<PathBuf> {
    names.iter().find_map(|n| which::which(n).ok())
}

/// Where screenshots go: `target/console-screenshots/` (or under `CARGO_TARGET_DIR`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    target.join("console-screenshots")
}

/// A browser test's whole budget, browser start included, counted from when the test's turn
/// with the browser begins.
pub const BROWSER_LIMIT: Duration = Duration::from_secs(90);

/// Runs `body` with a headless Chromium, or skips loudly when it is not installed outside CI
/// (under `CI=true` a missing Chromium or chromedriver fails the test).
///
/// Browser tests take turns, and [`BROWSER_LIMIT`] counts from the start of this test's
/// turn: the wait for it is the other browser tests' time, not a hang of this one (seen in
/// CI: a test queued behind the others ran out of its limit before its browser started).
/// Every turn is bounded by its own limit, so the wait is too.
pub async fn with_browser(body: impl AsyncFnOnce(Browser)) {
    let Some((chromium, driver)) = installed() else {
        return;
    };
    let turn = ONE_AT_A_TIME.lock().await;
    limit_to(BROWSER_LIMIT, async move {
        body(Browser::start(&chromium, &driver, turn).await).await
    })
    .await
}

/// Chromium's and chromedriver's paths, or None (with a loud message) when one is missing
/// outside CI.
fn installed() -> Option<(PathBuf, PathBuf)> {
    let chromium = find(&["chromium", "chromium-browser", "google-chrome"]);
    let driver = find(&["chromedriver"]);
    let (Some(chromium), Some(driver)) = (chromium, driver) else {
        let msg =
            "Chromium or chromedriver is not installed (apt-get install chromium chromium-driver)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true: {msg}; the console's browser tests cannot run");
        }
        eprintln!("\n!!!!!!!! SKIPPED console browser test: {msg} !!!!!!!!\n");
        return None;
    };
    Some((chromium, driver))
}

impl Browser {
    /// Chromium driven by a chromedriver of its own, for the test holding `turn`.
    async fn start(
        chromium: &Path,
        driver: &Path,
        turn: tokio::sync::MutexGuard<'static, ()>,
    ) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let mut cmd = tokio::process::Command::new(driver);
        cmd.arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        let child = cmd.spawn().expect("start chromedriver");
        let profile = tempfile::tempdir().expect("profile dir");
        let url = format!("http://127.0.0.1:{port}");
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium.display().to_string(),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        });
        let serde_json::Value::Object(caps) = caps else {
            unreachable!()
        };
        Browser {
            client: connect(&url, caps).await,
            driver: child,
            _profile: profile,
            _turn: turn,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    /// The first element matching `css`, waiting for it.
    pub async fn el(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    /// Waits until the text of `css` satisfies `ok`; returns it.
    pub async fn text_until(&self, css: &str, ok: impl Fn(&str) -> bool) -> String {
        eventually(&format!("{css} gets the expected text"), WAIT, async || {
            let e = self.client.find(Locator::Css(css)).await;
            let t = match e {
                Ok(e) => e.text().await.map_err(|e| e.to_string())?,
                Err(e) => return Err(e.to_string()),
            };
            ready(ok(&t), t)
        })
        .await
    }

    /// The text of `css` now, found again if the page replaced it between finding it and
    /// reading it (a live page re-renders its header, lists and badges).
    pub async fn text(&self, css: &str) -> String {
        self.text_until(css, |_| true).await
    }

    /// Waits for the task's state badge to read `state`.
    pub async fn state_is(&self, state: &str) {
        self.text_until("#task-state", |t| t == state).await;
    }

    /// Runs `js` (a function body) and returns its value.
    pub async fn js(&self, js: &str) -> serde_json::Value {
        self.client.execute(js, vec![]).await.expect("script")
    }

    /// Clicks `css`, finding it again if the page replaced it in between (a live page
    /// re-renders its lists and boxes).
    pub async fn click(&self, css: &str) {
        eventually(&format!("click {css}"), WAIT, async || {
            match self.el(css).await.click().await {
                Err(e) if e.is_stale_element_reference() => Err(e.to_string()),
                Err(e) => panic!("click {css}: {e}"),
                Ok(()) => Ok(()),
            }
        })
        .await
    }

    /// Types into `css` (found again if the page replaced it).
    pub async fn type_into(&self, css: &str, text: &str) {
        eventually(&format!("type into {css}"), WAIT, async || {
            match self.el(css).await.send_keys(text).await {
                Err(e) if e.is_stale_element_reference() => Err(e.to_string()),
                Err(e) => panic!("type into {css}: {e}"),
                Ok(()) => Ok(()),
            }
        })
        .await
    }

    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).expect("screenshot dir");
        std::fs::write(dir.join(name), png).expect("write screenshot");
    }

    /// Ends the session and chromedriver.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.clone().close()).await;
        self.kill();
    }

    fn kill(&mut self) {
        if let Some(pid) = self.driver.id() {
            // chromedriver and the Chromium it started share its process group.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = self.driver.start_kill();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn connect(url: &str, caps: serde_json::Map<String, serde_json::Value>) -> Client {
    let what = "chromedriver starts a WebDriver session";
    eventually(what, Duration::from_secs(20), async || {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let mut builder = ClientBuilder::new(connector);
        builder.capabilities(caps.clone());
        builder.connect(url).await.map_err(|e| e.to_string())
    })
    .await
}

/// A TCP proxy in front of `upstream` that cuts the first connection carrying a
/// `SubscribeToTask` call after `after` bytes of its answer.
pub struct CuttingProxy {
    pub addr: std::net::SocketAddr,
    pub cuts: Arc<AtomicUsize>,
    /// The largest `Last-Event-ID` a `SubscribeToTask` request sent after the cut.
    pub resumed_from: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttingProxy {
    pub async fn start(upstream: std::net::SocketAddr, after: usize) -> CuttingProxy {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = l.local_addr().expect("addr");
        let cuts = Arc::new(AtomicUsize::new(0));
        let resumed_from = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(true));
        let (c, r) = (cuts.clone(), resumed_from.clone());
        let task = tokio::spawn(async move {
            while let Ok((down, _)) = l.accept().await {
                let (c, r, armed) = (c.clone(), r.clone(), armed.clone());
                tokio::spawn(async move {
                    let Ok(up) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (mut dr, mut dw) = down.into_split();
                    let (mut ur, mut uw) = up.into_split();
                    let marked = Arc::new(AtomicBool::new(false));
                    let m = marked.clone();
                    let to_up = tokio::spawn(async move {
                        let mut buf = vec![0u8; 16384];
                        while let Ok(n) = dr.read(&mut buf).await {
                            if n == 0 {
                                break;
                            }
                            let text = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
                            if text.contains("subscribetotask") {
                                if armed.swap(false, Ordering::SeqCst) {
                                    m.store(true, Ordering::SeqCst);
                                } else if let Some(id) = last_event_id(&text) {
                                    r.fetch_max(id, Ordering::SeqCst);
                                }
                            }
                            if uw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    });
                    let mut buf = vec![0u8; 4096];
                    // Bytes of answers since the marked request went up.
                    let mut sent: Option<usize> = None;
                    while let Ok(n) = ur.read(&mut buf).await {
                        if n == 0 || dw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                        if marked.load(Ordering::SeqCst) {
                            sent = Some(sent.unwrap_or(0) + n);
                        }
                        if sent.is_some_and(|s| s >= after) {
                            c.fetch_add(1, Ordering::SeqCst);
                            break;
                        }
                    }
                    to_up.abort();
                });
            }
        });
        CuttingProxy {
            addr,
            cuts,
            resumed_from,
            task,
        }
    }
}

/// The `Last-Event-ID` of a request's head (lower-cased text).
fn last_event_id(request: &str) -> Option<usize> {
    let line = request.lines().find(|l| l.starts_with("last-event-id:"))?;
    line["last-event-id:".len()..].trim().parse().ok()
}

impl Drop for CuttingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
