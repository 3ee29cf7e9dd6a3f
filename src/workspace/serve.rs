//! A workspace served read-only over git's smart HTTP protocol, so that a caller can
//! `git fetch` the context's branch: git's own server side, `git http-backend` run as a CGI
//! program, for the two requests of a fetch (`GET info/refs?service=git-upload-pack` and
//! `POST git-upload-pack`). Pushing (`git-receive-pack`) and the "dumb" protocol's file reads
//! are never run: the caller decides what to ask for ([`GitRequest::service`]) and only
//! `upload-pack` reaches git.
//!
//! The program runs in a folder the agent may have written, so it gets the hardened
//! environment of every host-side git call ([`super::git`]) plus the settings that keep a
//! fetch to what the workspace's refs reach: `uploadpack.allow*SHA1InWant` off (a want of a
//! bare object id, say one of the source repository's objects the workspace borrows, is
//! refused), no file reads of the dumb protocol (`uploadpack.packObjectsHook`, which runs a
//! program, is read by git only from the machine's and the user's configuration, never from
//! the repository's). Configuration given on
//! the command line passes to the `upload-pack` that `http-backend` starts and wins over the
//! workspace's own.

use std::path::Path;
use std::process::Stdio;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::git::Git;
use super::{Workspace, WorkspaceError};

/// Configuration every served fetch overrides, beside [`super::git`]'s.
const SERVE_PINNED: &[&str] = &[
    "uploadpack.allowAnySHA1InWant=false",
    "uploadpack.allowReachableSHA1InWant=false",
    "uploadpack.allowTipSHA1InWant=false",
    "http.getanyfile=false",
    "http.receivepack=false",
    "http.uploadpack=true",
];

/// Largest header block git's CGI answer may have.
const MAX_HEADERS: usize = 16 * 1024;

/// Which of the smart protocol's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitEndpoint {
    /// `GET info/refs?service=git-upload-pack`: the refs advertised.
    InfoRefs,
    /// `POST git-upload-pack`: the negotiation and the pack.
    UploadPack,
}

/// A request of `git fetch`, as the HTTP layer received it.
pub struct GitRequest {
    pub endpoint: GitEndpoint,
    /// `Content-Type` of a POST.
    pub content_type: Option<String>,
    /// `Content-Encoding` of a POST (git compresses large requests with gzip).
    pub content_encoding: Option<String>,
    /// `Content-Length`, when announced.
    pub content_length: Option<u64>,
    /// The request body (empty for GET).
    pub body: BoxStream<'static, Result<Bytes, std::io::Error>>,
}

/// git's answer: status, headers, and the body as git writes it.
pub struct GitResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: BoxStream<'static, Result<Bytes, std::io::Error>>,
}

impl std::fmt::Debug for GitResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitResponse")
            .field("status", &self.status)
            .field("headers", &self.headers)
            .finish_non_exhaustive()
    }
}

/// Runs `git http-backend` for `req` on the workspace's repository.
pub async fn serve(ws: &Workspace, req: GitRequest) -> Result<GitResponse, WorkspaceError> {
    let checkout = ws.checkout();
    let git = Git::workspace(&checkout)?.with_config(SERVE_PINNED);
    super::make::keep_borrowing(&checkout, &ws.source_git)?;
    let mut cmd = tokio::process::Command::from(git.command(["http-backend"]));
    cgi_env(&mut cmd, &ws.dir, &req);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd
        .spawn()
        .map_err(|e| WorkspaceError::GitMissing(e.to_string()))?;
    if let Some(stdin) = child.stdin.take() {
        tokio::spawn(feed(stdin, req.body));
    }
    if let Some(mut err) = child.stderr.take() {
        // Read apart so that git never blocks on a full pipe; logged when it says anything.
        tokio::spawn(async move {
            let mut text = String::new();
            let _ = (&mut err).take(64 * 1024).read_to_string(&mut text).await;
            if !text.trim().is_empty() {
                tracing::warn!(stderr = %text.trim(), "git http-backend");
            }
        });
    }
    let Some(mut out) = child.stdout.take() else {
        return Err(failed("no output"));
    };
    let (head, rest) = read_head(&mut out).await?;
    let (status, headers) = parse_head(&head)?;
    let body = futures::stream::once(async move { Ok(Bytes::from(rest)) })
        .chain(body_of(out, child))
        .filter(|r| futures::future::ready(!matches!(r, Ok(b) if b.is_empty())))
        .boxed();
    Ok(GitResponse {
        status,
        headers,
        body,
    })
}

/// The CGI variables of the request: the repository as `GIT_PROJECT_ROOT` + `PATH_INFO`.
fn cgi_env(cmd: &mut tokio::process::Command, root: &Path, req: &GitRequest) {
    let (method, path, query) = match req.endpoint {
        GitEndpoint::InfoRefs => ("GET", "/repo/.git/info/refs", "service=git-upload-pack"),
        GitEndpoint::UploadPack => ("POST", "/repo/.git/git-upload-pack", ""),
    };
    cmd.env("GIT_PROJECT_ROOT", root)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", method)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env_remove("REMOTE_USER")
        .env_remove("REMOTE_ADDR")
        .env_remove("GIT_PROTOCOL")
        .env_remove("HTTP_GIT_PROTOCOL");
    for (name, value) in [
        ("CONTENT_TYPE", req.content_type.clone()),
        ("HTTP_CONTENT_ENCODING", req.content_encoding.clone()),
        ("CONTENT_LENGTH", req.content_length.map(|n| n.to_string())),
    ] {
        match value {
            Some(v) => cmd.env(name, v),
            None => cmd.env_remove(name),
        };
    }
}

/// Copies the request body to git's input, then closes it.
async fn feed(
    mut stdin: tokio::process::ChildStdin,
    mut body: BoxStream<'static, Result<Bytes, std::io::Error>>,
) {
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else { return };
        if stdin.write_all(&chunk).await.is_err() {
            return;
        }
    }
    let _ = stdin.shutdown().await;
}

fn failed(message: &str) -> WorkspaceError {
    WorkspaceError::Git {
        command: "git http-backend".into(),
        message: message.to_string(),
    }
}

/// Reads git's answer up to the end of its CGI headers: the headers and what came after.
async fn read_head(
    out: &mut tokio::process::ChildStdout,
) -> Result<(Vec<u8>, Vec<u8>), WorkspaceError> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((end, skip)) = head_end(&buf) {
            let rest = buf.split_off(end + skip);
            buf.truncate(end);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEADERS {
            return Err(failed("headers too long"));
        }
        let n = out.read(&mut chunk).await.map_err(|e| WorkspaceError::Io {
            path: "git http-backend".into(),
            source: e,
        })?;
        if n == 0 {
            return Err(failed("it ended before its headers"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Where the header block ends (the blank line) and the length of the separator.
fn head_end(buf: &[u8]) -> Option<(usize, usize)> {
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4));
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The status (CGI `Status:`, else 200) and the other headers.
fn parse_head(head: &[u8]) -> Result<(u16, Vec<(String, String)>), WorkspaceError> {
    let text = std::str::from_utf8(head).map_err(|_| failed("headers not UTF-8"))?;
    let mut status = 200;
    let mut headers = Vec::new();
    for line in text.lines().map(|l| l.trim_end_matches('\r')) {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            status = value
                .split_whitespace()
                .next()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| failed("a bad Status header"))?;
        } else {
            headers.push((name.trim().to_string(), value.to_string()));
        }
    }
    Ok((status, headers))
}

/// The rest of git's output, then git's exit reaped (a failure logged: the answer's status
/// was sent already).
fn body_of(
    out: tokio::process::ChildStdout,
    child: tokio::process::Child,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::unfold(Some((out, child)), |state| async move {
        let (mut out, mut child) = state?;
        let mut buf = vec![0u8; 64 * 1024];
        match out.read(&mut buf).await {
            Ok(0) => {
                match child.wait().await {
                    Ok(s) if !s.success() => tracing::warn!(status = %s, "git http-backend failed"),
                    Err(e) => {
                        tracing::warn!(error = %e, "git http-backend could not be waited for")
                    }
                    Ok(_) => {}
                }
                None
            }
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some((out, child))))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgi_headers_give_the_status_and_the_rest() {
        let (status, headers) =
            parse_head(b"Status: 403 Forbidden\r\nContent-Type: text/plain").unwrap();
        assert_eq!(status, 403);
        assert_eq!(headers, [("Content-Type".into(), "text/plain".into())]);
        let (status, _) = parse_head(b"Content-Type: x").unwrap();
        assert_eq!(status, 200);
        assert_eq!(head_end(b"A: b\r\n\r\nbody"), Some((4, 4)));
        assert_eq!(head_end(b"A: b\n\nbody"), Some((4, 2)));
        assert_eq!(head_end(b"A: b\r\n"), None);
    }
}
