//! The floor of the side-by-side benchmark: the least a host can do for the same job. It
//! takes the v1.0 JSON-RPC `SendStreamingMessage` POST the load generator sends, starts the
//! fake CLI with the message's text as its one argument (as the baseline does), and relays
//! each line the CLI prints as one SSE frame (a v1.0 `artifactUpdate` whose text part is the
//! line, as the CLI printed it), between a `working` status frame (sent before the CLI is
//! started, as agent-host does) and a final `completed` (exit 0) or `failed` status frame.
//!
//! Nothing else: no task store, no limits, no parsing of the CLI's lines, no sandbox. One
//! std thread per connection (small stacks), blocking I/O, one write(2) per frame (a chunk of
//! a chunked HTTP/1.1 body), TCP_NODELAY. `GET /.well-known/agent-card.json` answers a
//! minimal card (the load generator polls it to know the host is up).
//!
//! Usage: floor-relay PORT CLI [CWD] (listens on 127.0.0.1 only).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Longest request head and body read.
const MAX_REQUEST: usize = 1 << 20;

struct Config {
    cli: PathBuf,
    cwd: PathBuf,
    next_task: AtomicU64,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(port), Some(cli)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: floor-relay PORT CLI [CWD]");
        std::process::exit(2)
    };
    let cwd = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    let listener = match TcpListener::bind(format!("127.0.0.1:{port}")) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("floor-relay: bind 127.0.0.1:{port}: {e}");
            std::process::exit(1)
        }
    };
    let cfg = Arc::new(Config {
        cli: PathBuf::from(cli),
        cwd,
        next_task: AtomicU64::new(1),
    });
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let cfg = cfg.clone();
        let spawned = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || {
                let _ = conn.set_nodelay(true);
                if let Err(e) = serve(conn, &cfg) {
                    eprintln!("floor-relay: {e}");
                }
            });
        if let Err(e) = spawned {
            eprintln!("floor-relay: thread: {e}");
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request: its head (lower-cased) and its body (by Content-Length).
fn read_request(conn: &mut TcpStream) -> std::io::Result<Option<(String, Vec<u8>)>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            break end;
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 || buf.len() > MAX_REQUEST {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    let mut body = buf.split_off(end + 4);
    while body.len() < len {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some((head, body)))
}

/// The first text part's text of the message (the JSON string after `"text":"`, unescaped
/// for the escapes the load generator's prompts can hold).
fn prompt_of(body: &[u8]) -> Option<String> {
    let at = find(body, b"\"text\":\"")? + 8;
    let mut out = Vec::new();
    let mut escaped = false;
    for &b in &body[at..] {
        match (escaped, b) {
            (true, b'n') => out.push(b'\n'),
            (true, b't') => out.push(b'\t'),
            (true, c) => out.push(c),
            (false, b'\\') => {
                escaped = true;
                continue;
            }
            (false, b'"') => return String::from_utf8(out).ok(),
            (false, c) => out.push(c),
        }
        escaped = false;
    }
    None
}

fn respond(conn: &mut TcpStream, status: &str, ctype: &str, body: &str) -> std::io::Result<()> {
    let msg = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(msg.as_bytes())
}

fn serve(mut conn: TcpStream, cfg: &Config) -> std::io::Result<()> {
    let Some((head, body)) = read_request(&mut conn)? else {
        return Ok(());
    };
    if head.starts_with("get /.well-known/agent-card.json") {
        let card = r#"{"name":"floor","description":"a minimal relay","version":"0.0.0","capabilities":{"streaming":true},"supportedInterfaces":[{"url":"/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"skills":[]}"#;
        return respond(&mut conn, "200 OK", "application/json", card);
    }
    let streaming = find(&body, b"\"method\":\"SendStreamingMessage\"").is_some();
    let prompt = prompt_of(&body);
    let (true, true, Some(prompt)) = (head.starts_with("post / "), streaming, prompt) else {
        let err = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"the floor only streams SendStreamingMessage"}}"#;
        return respond(&mut conn, "200 OK", "application/json", err);
    };
    let n = cfg.next_task.fetch_add(1, Ordering::Relaxed);
    let ids = format!(r#""taskId":"t{n}","contextId":"c{n}""#);
    conn.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )?;
    let mut frame = Vec::with_capacity(512);
    let mut seq = 1u64;
    write_frame(&mut conn, &mut frame, seq, |f| status(f, &ids, "WORKING"))?;
    let child = Command::new(&cfg.cli)
        .arg(&prompt)
        .current_dir(&cfg.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let state = match child {
        Ok(mut child) => {
            let mut ok = true;
            if let Some(out) = child.stdout.take() {
                let mut lines = BufReader::with_capacity(8 * 1024, out);
                let mut line = Vec::with_capacity(256);
                loop {
                    line.clear();
                    if lines.read_until(b'\n', &mut line)? == 0 {
                        break;
                    }
                    let text = line.strip_suffix(b"\n").unwrap_or(&line);
                    if text.is_empty() {
                        continue;
                    }
                    seq += 1;
                    let sent = write_frame(&mut conn, &mut frame, seq, |f| {
                        f.extend_from_slice(br#"{"artifactUpdate":{"#);
                        f.extend_from_slice(ids.as_bytes());
                        f.extend_from_slice(
                            br#","artifact":{"artifactId":"output","parts":[{"text":""#,
                        );
                        escape(text, f);
                        f.extend_from_slice(br#""}]},"append":true}}"#);
                    });
                    if sent.is_err() {
                        // The client went away: stop the CLI.
                        let _ = child.kill();
                        ok = false;
                        break;
                    }
                }
            }
            match child.wait() {
                Ok(st) if st.success() && ok => "COMPLETED",
                _ => "FAILED",
            }
        }
        Err(_) => "FAILED",
    };
    seq += 1;
    write_frame(&mut conn, &mut frame, seq, |f| status(f, &ids, state))?;
    conn.write_all(b"0\r\n\r\n")
}

/// A status-update event's JSON.
fn status(f: &mut Vec<u8>, ids: &str, state: &str) {
    f.extend_from_slice(br#"{"statusUpdate":{"#);
    f.extend_from_slice(ids.as_bytes());
    f.extend_from_slice(br#","status":{"state":"TASK_STATE_"#);
    f.extend_from_slice(state.as_bytes());
    f.extend_from_slice(br#""}}}"#);
}

/// Writes one SSE frame (`id: <seq>`, the event in a JSON-RPC response) as one HTTP chunk,
/// in one write.
fn write_frame(
    conn: &mut TcpStream,
    frame: &mut Vec<u8>,
    seq: u64,
    event: impl FnOnce(&mut Vec<u8>),
) -> std::io::Result<()> {
    // Room for the chunk size line, filled in once the size is known.
    const SIZE_LINE: usize = 10;
    frame.clear();
    frame.resize(SIZE_LINE, b' ');
    frame.extend_from_slice(format!("id: {seq}\ndata: ").as_bytes());
    frame.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"result":"#);
    event(frame);
    frame.extend_from_slice(b"}\n\n\r\n");
    let size = format!("{:x}\r\n", frame.len() - SIZE_LINE - 2);
    let start = SIZE_LINE - size.len();
    frame[start..SIZE_LINE].copy_from_slice(size.as_bytes());
    conn.write_all(&frame[start..])
}

/// Appends `s` as the inside of a JSON string.
fn escape(s: &[u8], out: &mut Vec<u8>) {
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_the_first_text_part_unescaped() {
        let body = br#"{"params":{"message":{"parts":[{"text":"n=3 \"q\" pause_us=0"}]}}}"#;
        assert_eq!(prompt_of(body).as_deref(), Some(r#"n=3 "q" pause_us=0"#));
        assert_eq!(prompt_of(b"{}"), None);
    }

    #[test]
    fn a_line_is_escaped_into_a_json_string() {
        let mut out = Vec::new();
        escape(b"{\"a\":\"b\\c\"}\x01", &mut out);
        assert_eq!(out, br#"{\"a\":\"b\\c\"}\u0001"#);
    }
}
