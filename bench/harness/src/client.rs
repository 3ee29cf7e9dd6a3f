//! One `SendStreamingMessage` SSE stream over a plain TCP connection (HTTP/1.1, chunked body
//! decoded by hand), so the client costs little next to the host it measures.
//!
//! Each frame is looked at for what the harness needs: the first `working` status (task
//! start latency), the bench CLI's lines (`ev=NNNNNN @t=<ns>`: event latency and loss) and
//! the final state.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What one stream saw.
#[derive(Debug, Default)]
pub struct StreamResult {
    /// SSE frames with data (keep-alive comments not counted).
    pub frames: u64,
    /// Distinct CLI lines received (by index).
    pub events: u64,
    /// Per CLI line: when the CLI wrote it (realtime ns) and the latency CLI write → frame
    /// read (ns).
    pub timed: Vec<(u64, u64)>,
    /// The latencies of the lines after the stream's first [`WARM_UP`] (its steady state).
    pub steady_ns: Vec<u64>,
    /// The latencies of the lines written while every stream of the load was running (set
    /// by [`settle`]).
    pub settled_ns: Vec<u64>,
    /// When its first CLI line arrived (its program running), realtime ns.
    pub started_rt: Option<u64>,
    /// When its final frame arrived, realtime ns.
    pub ended_rt: Option<u64>,
    /// Send → first `working` frame.
    pub start: Option<Duration>,
    pub completed: bool,
    pub error: Option<String>,
}

/// Lines of each stream left out of [`StreamResult::steady_ns`]: a stream's start (the CLI
/// and the connection warming up) is measured by the task start and the overall percentiles.
pub const WARM_UP: u64 = 10;

/// Fills each stream's [`StreamResult::settled_ns`]: the latencies of the lines its CLI
/// wrote after the last stream of `batch` (one load) had its first line (its program set up
/// and running) and before the first one had its last frame. Those lines met no task
/// starting or ending on the host beside them (no sandbox being set up or torn down, no
/// program started or reaped), so their tail is the steady state's. Empty when a stream
/// never started or never ended.
pub fn settle(batch: &mut [StreamResult]) {
    let all =
        |f: fn(&StreamResult) -> Option<u64>| batch.iter().map(f).collect::<Option<Vec<u64>>>();
    let (Some(started), Some(ended)) = (all(|r| r.started_rt), all(|r| r.ended_rt)) else {
        return;
    };
    let (Some(from), Some(to)) = (started.into_iter().max(), ended.into_iter().min()) else {
        return;
    };
    for r in batch.iter_mut() {
        r.settled_ns = r
            .timed
            .iter()
            .filter(|(written, _)| (from..to).contains(written))
            .map(|(_, lat)| *lat)
            .collect();
    }
}

pub fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The number at the start of `hay` and its length in bytes.
fn digits(hay: &[u8]) -> Option<(u64, usize)> {
    let len = hay.iter().take_while(|b| b.is_ascii_digit()).count();
    let v = hay[..len].iter().fold(0u64, |v, &b| {
        v.wrapping_mul(10).wrapping_add(u64::from(b - b'0'))
    });
    (len > 0).then_some((v, len))
}

/// Every bench-CLI line (`ev=<index> @t=<ns>`) in a frame, as (index, write time). An update
/// holds one; the task a subscription starts with holds every line written before it, in its
/// artifacts.
fn lines_in(data: &[u8]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = find(rest, b"ev=") {
        rest = &rest[at + 3..];
        let Some((index, len)) = digits(rest) else {
            continue;
        };
        rest = &rest[len..];
        if let Some(t) = rest.strip_prefix(b" @t=").and_then(digits) {
            out.push((index, t.0));
        }
    }
    out
}

/// The JSON-RPC body of a v1.0 `SendStreamingMessage` with a text prompt.
pub fn request_body(prompt: &str, message_id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":{{"message":{{"messageId":"{message_id}","role":"ROLE_USER","parts":[{{"text":"{prompt}"}}]}}}}}}"#
    )
}

/// The JSON-RPC body of a v1.0 `SendMessage` that answers at once (`returnImmediately`):
/// the task runs on with no stream open.
pub fn detached_body(prompt: &str, message_id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{{"message":{{"messageId":"{message_id}","role":"ROLE_USER","parts":[{{"text":"{prompt}"}}]}},"configuration":{{"returnImmediately":true}}}}}}"#
    )
}

/// The JSON-RPC body of a v1.0 `SubscribeToTask`: the task's events as an SSE stream.
pub fn subscribe_body(task_id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{{"id":"{task_id}"}}}}"#
    )
}

/// The id of the task a `SendMessage` answer holds.
pub fn task_id_of(reply: &str) -> Option<String> {
    let at = reply.find(r#""task":{"#)?;
    let rest = &reply[at..];
    let id = &rest[rest.find(r#""id":""#)? + 6..];
    Some(id[..id.find('"')?].to_string())
}

/// Sends `body` (a non-streaming request) and reads the answer to its end; an error unless
/// it is a 200 without a JSON-RPC error. Returns the answer.
pub async fn send_detached(
    addr: SocketAddr,
    body: &str,
    deadline: Instant,
) -> Result<String, String> {
    let work = async {
        let mut s = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let req = format!(
            "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| format!("write: {e}"))?;
        let mut out = Vec::new();
        s.read_to_end(&mut out)
            .await
            .map_err(|e| format!("read: {e}"))?;
        if !out.starts_with(b"HTTP/1.1 200") || find(&out, b"\"error\":{").is_some() {
            let msg = String::from_utf8_lossy(&out[..out.len().min(300)]).into_owned();
            return Err(format!("send failed: {msg}"));
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    };
    tokio::time::timeout_at(deadline, work)
        .await
        .map_err(|_| "timed out".to_string())?
}

enum Body {
    Headers,
    Chunked { need: Option<usize> },
    Plain,
    Done,
}

struct Reader {
    raw: Vec<u8>,
    body: Vec<u8>,
    state: Body,
}

impl Reader {
    /// Moves what `raw` holds of the body into `body`. Returns false on a malformed response.
    fn decode(&mut self) -> Result<(), String> {
        loop {
            match &mut self.state {
                Body::Headers => {
                    let Some(end) = find(&self.raw, b"\r\n\r\n") else {
                        return Ok(());
                    };
                    let head = String::from_utf8_lossy(&self.raw[..end]).to_ascii_lowercase();
                    if !head.starts_with("http/1.1 200") {
                        let line = head.lines().next().unwrap_or("").to_string();
                        return Err(format!("HTTP status: {line}"));
                    }
                    if !head.contains("text/event-stream") {
                        return Err("not an event stream".into());
                    }
                    self.state = if head.contains("transfer-encoding: chunked") {
                        Body::Chunked { need: None }
                    } else {
                        Body::Plain
                    };
                    self.raw.drain(..end + 4);
                }
                Body::Plain => {
                    self.body.append(&mut self.raw);
                    return Ok(());
                }
                Body::Done => return Ok(()),
                Body::Chunked { need: None } => {
                    let Some(eol) = find(&self.raw, b"\r\n") else {
                        return Ok(());
                    };
                    let line = String::from_utf8_lossy(&self.raw[..eol]);
                    let hex = line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(hex, 16)
                        .map_err(|_| format!("bad chunk size {hex:?}"))?;
                    self.raw.drain(..eol + 2);
                    self.state = if size == 0 {
                        Body::Done
                    } else {
                        Body::Chunked { need: Some(size) }
                    };
                }
                Body::Chunked { need: Some(n) } => {
                    // The chunk and its CRLF.
                    if self.raw.len() < *n + 2 {
                        return Ok(());
                    }
                    self.body.extend_from_slice(&self.raw[..*n]);
                    self.raw.drain(..*n + 2);
                    self.state = Body::Chunked { need: None };
                }
            }
        }
    }
}

/// Runs one stream to its end (or `deadline`). `expected` is the number of CLI lines; an
/// index seen twice counts once.
pub async fn stream(
    addr: SocketAddr,
    body: &str,
    expected: usize,
    deadline: Instant,
) -> StreamResult {
    let mut r = StreamResult::default();
    let sent = Instant::now();
    if let Err(e) = run(addr, body, expected, deadline, sent, &mut r).await {
        r.error = Some(e);
    }
    r
}

async fn run(
    addr: SocketAddr,
    body: &str,
    expected: usize,
    deadline: Instant,
    sent: Instant,
    r: &mut StreamResult,
) -> Result<(), String> {
    let mut s = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| format!("connect: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let req = format!(
        "POST / HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nA2A-Version: 1.0\r\nAccept: text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut seen = vec![false; expected];
    let mut rd = Reader {
        raw: Vec::with_capacity(16 * 1024),
        body: Vec::with_capacity(16 * 1024),
        state: Body::Headers,
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return Err("timed out".into()),
            Ok(Err(e)) => return Err(format!("read: {e}")),
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            break;
        }
        // Every frame in this read arrived now.
        let (now_rt, now) = (realtime_ns(), Instant::now());
        rd.raw.extend_from_slice(&buf[..n]);
        rd.decode()?;
        while let Some(end) = find(&rd.body, b"\n\n") {
            let ev: Vec<u8> = rd.body.drain(..end + 2).collect();
            let Some(at) = find(&ev, b"data:") else {
                continue; // a keep-alive comment
            };
            let data = &ev[at..];
            r.frames += 1;
            if r.start.is_none() && find(data, b"TASK_STATE_WORKING").is_some() {
                r.start = Some(now - sent);
            }
            for (i, t) in lines_in(data) {
                // A line seen again (in a task snapshot after its update) is not a new line.
                match seen.get_mut(i as usize) {
                    Some(slot) if !*slot => *slot = true,
                    _ => continue,
                }
                r.events += 1;
                let lat = now_rt.saturating_sub(t);
                r.timed.push((t, lat));
                r.started_rt.get_or_insert(now_rt);
                if i >= WARM_UP {
                    r.steady_ns.push(lat);
                }
            }
            if find(data, b"TASK_STATE_COMPLETED").is_some() {
                r.completed = true;
                r.ended_rt = Some(now_rt);
            } else if find(data, b"TASK_STATE_FAILED").is_some() {
                return Err("task failed".into());
            } else if find(data, b"\"error\":{").is_some() {
                let msg = String::from_utf8_lossy(&data[..data.len().min(300)]).into_owned();
                return Err(format!("JSON-RPC error: {msg}"));
            }
        }
        if matches!(rd.state, Body::Done) {
            break;
        }
    }
    // A short stream says how it was short (the loss accounting tells apart a stream the
    // host closed early from one that completed without some of its lines).
    if !r.completed {
        return Err(format!(
            "the stream ended after {} frames and {}/{expected} lines without the final status",
            r.frames, r.events
        ));
    }
    if (r.events as usize) < expected {
        let first = seen.iter().position(|s| !s).unwrap_or(0);
        return Err(format!(
            "completed with {}/{expected} lines, the first missing ev={first:06}",
            r.events
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(started: u64, ended: u64, written: &[u64]) -> StreamResult {
        StreamResult {
            timed: written.iter().map(|w| (*w, *w * 10)).collect(),
            started_rt: Some(started),
            ended_rt: Some(ended),
            ..Default::default()
        }
    }

    #[test]
    fn every_line_of_a_frame_is_read() {
        // An update holds one line; the task a subscription starts with holds the lines
        // printed so far, one after another in one text (as agent-host appends them).
        let update = br#"{"artifact":{"parts":[{"text":"ev=000007 @t=123 ...."}]}}"#;
        assert_eq!(lines_in(update), [(7, 123)]);
        let task = br#"{"task":{"artifacts":[{"parts":[{"text":"ev=000000 @t=5 ....ev=000001 @t=6 ...."}]}],"status":{"state":"ev="}}}"#;
        assert_eq!(lines_in(task), [(0, 5), (1, 6)]);
        assert!(lines_in(b"ev=12 t=3 ev= @t=4").is_empty());
    }

    #[test]
    fn settled_lines_are_those_written_while_every_stream_ran() {
        // All running from 5 (the later start) to 20 (the earlier end).
        let mut batch = vec![
            stream(1, 30, &[1, 4, 5, 12, 25]),
            stream(5, 20, &[5, 19, 20]),
        ];
        settle(&mut batch);
        assert_eq!(batch[0].settled_ns, [50, 120]);
        assert_eq!(batch[1].settled_ns, [50, 190]);
        // A stream that never printed leaves no window.
        let mut batch = vec![stream(1, 30, &[4]), StreamResult::default()];
        settle(&mut batch);
        assert!(batch[0].settled_ns.is_empty());
    }
}
