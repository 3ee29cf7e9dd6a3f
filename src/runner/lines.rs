//! Bounded line splitting and cleaning of a child's output streams.
//!
//! Lines are split on `\n`, kept up to `max_line_bytes` (longer lines are skipped without being
//! buffered and reported as [`Output::TooLong`]), decoded as lossy UTF-8, and cleaned of `\r` and
//! ANSI escape sequences. Empty lines (after cleaning) are dropped.
//!
//! A line is held once: a long line's buffer becomes the line itself (no copy), and the lines
//! waiting for the consumer are bounded in bytes ([`Budget`]), not only in number, so a
//! program printing lines of many megabytes costs about one line at a time in each stage.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, Semaphore};

use super::Output;

/// Which stream a reader serves; decides the [`Output`] variant of its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// What the splitter found in a chunk of input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    /// A complete line (cleaned, non-empty).
    Line(String),
    /// A line of `bytes` bytes (without its `\n`) that was over the limit and discarded.
    TooLong(usize),
}

/// Incremental, bounded line splitter.
#[derive(Debug)]
pub(crate) struct LineSplitter {
    max: usize,
    buf: Vec<u8>,
    /// `Some(n)`: we are skipping an over-long line of which `n` bytes were seen so far.
    skipping: Option<usize>,
}

impl LineSplitter {
    pub(crate) fn new(max_line_bytes: usize) -> Self {
        LineSplitter {
            max: max_line_bytes,
            buf: Vec::new(),
            skipping: None,
        }
    }

    /// Feed a chunk; complete lines are appended to `out`.
    pub(crate) fn push(&mut self, mut chunk: &[u8], out: &mut Vec<Piece>) {
        while !chunk.is_empty() {
            let newline = chunk.iter().position(|&b| b == b'\n');
            let (part, rest) = match newline {
                Some(i) => (&chunk[..i], Some(&chunk[i + 1..])),
                None => (chunk, None),
            };
            if let Some(seen) = self.skipping.as_mut() {
                *seen += part.len();
            } else if self.buf.len() + part.len() > self.max {
                self.skipping = Some(self.buf.len() + part.len());
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(part);
            }
            match rest {
                Some(rest) => {
                    self.finish_line(out);
                    chunk = rest;
                }
                None => break,
            }
        }
    }

    /// True when part of a line (without its newline yet) is buffered.
    pub(crate) fn has_partial(&self) -> bool {
        !self.buf.is_empty() && self.skipping.is_none()
    }

    /// End of input: deliver a last line that had no trailing newline.
    pub(crate) fn finish(&mut self, out: &mut Vec<Piece>) {
        if self.skipping.is_some() || !self.buf.is_empty() {
            self.finish_line(out);
        }
    }

    fn finish_line(&mut self, out: &mut Vec<Piece>) {
        if let Some(bytes) = self.skipping.take() {
            out.push(Piece::TooLong(bytes));
            return;
        }
        let line = if self.buf.len() <= REUSE_MAX {
            // A usual line: copied out, and the buffer kept for the next one.
            let line = clean(&self.buf);
            self.buf.clear();
            line
        } else {
            // A long line: its buffer becomes the line (no second copy of megabytes), and
            // the next line starts with a new, small buffer.
            clean_owned(std::mem::take(&mut self.buf))
        };
        if !line.is_empty() {
            out.push(Piece::Line(line));
        }
    }
}

/// Lines up to this long are copied out of the splitter's buffer, which is kept; longer
/// ones take the buffer with them.
const REUSE_MAX: usize = 64 * 1024;

/// [`clean`] of a line the caller gives away: cleaned in place, and its buffer reused as the
/// string when it is valid UTF-8.
pub(crate) fn clean_owned(mut line: Vec<u8>) -> String {
    if line.iter().any(|&b| b == 0x1b || b == b'\r') {
        let mut kept = 0;
        let mut i = 0;
        while i < line.len() {
            match line[i] {
                b'\r' => i += 1,
                0x1b => i = skip_escape(&line, i),
                b => {
                    line[kept] = b;
                    kept += 1;
                    i += 1;
                }
            }
        }
        line.truncate(kept);
    }
    // The buffer grew by doubling: give back what the line does not use.
    line.shrink_to_fit();
    match String::from_utf8(line) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Lossy UTF-8 decoding with every `\r` and ANSI escape sequence removed.
///
/// Safe for JSON lines: valid JSON never contains a raw ESC or CR byte, so the fast path (no
/// ESC, no CR) leaves them untouched.
pub(crate) fn clean(line: &[u8]) -> String {
    if !line.iter().any(|&b| b == 0x1b || b == b'\r') {
        return String::from_utf8_lossy(line).into_owned();
    }
    let mut kept = Vec::with_capacity(line.len());
    let mut i = 0;
    while i < line.len() {
        match line[i] {
            b'\r' => i += 1,
            0x1b => i = skip_escape(line, i),
            b => {
                kept.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

/// `line[start]` is ESC; returns the index just past the escape sequence.
fn skip_escape(line: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    let Some(&kind) = line.get(i) else {
        return i;
    };
    i += 1;
    match kind {
        // CSI: parameter and intermediate bytes 0x20..=0x3F, then one final byte 0x40..=0x7E.
        b'[' => {
            while i < line.len() && (0x20..=0x3f).contains(&line[i]) {
                i += 1;
            }
            if i < line.len() && (0x40..=0x7e).contains(&line[i]) {
                i += 1;
            }
            i
        }
        // OSC, DCS, SOS, PM, APC: a string terminated by BEL or ST (ESC \).
        b']' | b'P' | b'X' | b'^' | b'_' => {
            while i < line.len() {
                match line[i] {
                    0x07 => return i + 1,
                    0x1b if line.get(i + 1) == Some(&b'\\') => return i + 2,
                    _ => i += 1,
                }
            }
            i
        }
        // nF sequences such as `ESC ( B`: intermediates 0x20..=0x2F, then one final byte.
        0x20..=0x2f => {
            while i < line.len() && (0x20..=0x2f).contains(&line[i]) {
                i += 1;
            }
            if i < line.len() && (0x30..=0x7e).contains(&line[i]) {
                i += 1;
            }
            i
        }
        // Any other two-byte sequence (`ESC =`, `ESC 7`, `ESC M`, ...).
        _ => i,
    }
}

/// The bytes of lines read and not yet taken by the consumer, at most `bytes` (a line longer
/// than that counts as `bytes`, so it waits until every line before it was taken). Without
/// it, the output channel's 256 places could hold 256 lines of the line limit (16 MiB each).
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    sem: Arc<Semaphore>,
    bytes: usize,
}

impl Budget {
    pub(crate) fn new(bytes: usize) -> Budget {
        Budget {
            sem: Arc::new(Semaphore::new(bytes)),
            bytes,
        }
    }

    fn cost(&self, out: &Output) -> usize {
        match out {
            Output::Line(l) | Output::Stderr(l) => l.len().clamp(1, self.bytes.max(1)),
            Output::TooLong { .. } => 0,
        }
    }

    /// Waits until `out` fits in the budget, and counts it.
    async fn take(&self, out: &Output) {
        let n = self.cost(out);
        if n == 0 {
            return;
        }
        // The semaphore is never closed; `bytes` fits in u32 (callers use a few MiB).
        if let Ok(p) = self
            .sem
            .acquire_many(u32::try_from(n).unwrap_or(u32::MAX))
            .await
        {
            p.forget();
        }
    }

    /// The consumer took `out`: its bytes are free again.
    pub(crate) fn give_back(&self, out: &Output) {
        let n = self.cost(out);
        if n > 0 {
            self.sem.add_permits(n);
        }
    }
}

/// Read `reader` to EOF, sending its lines to `tx`. Stops early if the receiver is gone.
///
/// The bounded channel gives backpressure: while the consumer is slow, this task stops reading
/// and the child blocks on a full pipe instead of our memory growing.
///
/// With `partial_after`, a line that has no newline yet is delivered once nothing more arrived
/// for that long: a terminal prompt such as `Apply? [y/N] ` waits for an answer without ever
/// ending its line (pty mode).
pub(crate) async fn pump<R>(
    mut reader: R,
    stream: Stream,
    max: usize,
    partial_after: Option<std::time::Duration>,
    tx: mpsc::Sender<Output>,
    budget: Budget,
) where
    R: AsyncRead + Unpin,
{
    let mut splitter = LineSplitter::new(max);
    // Each live task holds one buffer per stream, so it starts small (a thousand live tasks
    // that print a line now and then need little: 256 bytes hold a usual line of progress,
    // 64 the stderr of a program that prints none) and doubles whenever a read fills it, up
    // to 16 KiB for stdout (four reads drain a full 64 KiB pipe) and 4 KiB for stderr, which
    // carries little (retries, warnings).
    let (first, most) = match stream {
        Stream::Stdout => (256, 16 * 1024),
        Stream::Stderr => (64, 4 * 1024),
    };
    let mut chunk = vec![0u8; first];
    let mut pieces = Vec::new();
    loop {
        let read = reader.read(&mut chunk);
        let waiting = splitter.has_partial();
        let result = match partial_after {
            Some(quiet) if waiting => tokio::select! {
                r = read => Some(r),
                _ = tokio::time::sleep(quiet) => None,
            },
            _ => Some(read.await),
        };
        let Some(result) = result else {
            splitter.finish(&mut pieces);
            for piece in pieces.drain(..) {
                if !send(&tx, &budget, to_output(piece, stream)).await {
                    return;
                }
            }
            continue;
        };
        let n = match result {
            Ok(0) => 0,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::debug!(?stream, error = %e, "reading child output failed; treating as EOF");
                0
            }
        };
        if n == 0 {
            splitter.finish(&mut pieces);
        } else {
            splitter.push(&chunk[..n], &mut pieces);
            if n == chunk.len() && chunk.len() < most {
                chunk.resize(chunk.len() * 2, 0);
            }
        }
        for piece in pieces.drain(..) {
            if !send(&tx, &budget, to_output(piece, stream)).await {
                return;
            }
        }
        if n == 0 {
            return;
        }
    }
}

/// Sends one output once the budget has room for it; false when the consumer is gone.
async fn send(tx: &mpsc::Sender<Output>, budget: &Budget, out: Output) -> bool {
    budget.take(&out).await;
    tx.send(out).await.is_ok()
}

fn to_output(piece: Piece, stream: Stream) -> Output {
    match (piece, stream) {
        (Piece::Line(l), Stream::Stdout) => Output::Line(l),
        (Piece::Line(l), Stream::Stderr) => Output::Stderr(l),
        (Piece::TooLong(bytes), Stream::Stdout) => Output::TooLong { bytes },
        (Piece::TooLong(bytes), Stream::Stderr) => Output::Stderr(format!(
            "[stderr line of {bytes} bytes discarded: too long]"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> Vec<Piece> {
        let mut s = LineSplitter::new(max);
        let mut out = Vec::new();
        for c in chunks {
            s.push(c, &mut out);
        }
        s.finish(&mut out);
        out
    }

    fn line(s: &str) -> Piece {
        Piece::Line(s.to_string())
    }

    #[test]
    fn splits_across_chunks_and_keeps_final_line() {
        let out = split(100, &[b"ab", b"c\nde", b"f\n\ng"]);
        assert_eq!(out, vec![line("abc"), line("def"), line("g")]);
    }

    #[test]
    fn too_long_line_is_skipped_and_counted() {
        let long = vec![b'x'; 5000];
        let mut chunks: Vec<&[u8]> = vec![b"ok\n"];
        for c in long.chunks(333) {
            chunks.push(c);
        }
        chunks.push(b"\nnext\n");
        let out = split(1000, &chunks);
        assert_eq!(out, vec![line("ok"), Piece::TooLong(5000), line("next")]);
    }

    #[test]
    fn line_at_exact_limit_is_kept() {
        let out = split(3, &[b"abc\nabcd\n"]);
        assert_eq!(out, vec![line("abc"), Piece::TooLong(4)]);
    }

    #[test]
    fn too_long_final_line_without_newline() {
        let out = split(2, &[b"abcdef"]);
        assert_eq!(out, vec![Piece::TooLong(6)]);
    }

    #[test]
    fn cleans_cr_and_ansi() {
        assert_eq!(clean(b"hello\r"), "hello");
        assert_eq!(clean(b"\x1b[1;31mred\x1b[0m text"), "red text");
        assert_eq!(clean(b"\x1b]0;title\x07after"), "after");
        assert_eq!(clean(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"), "link");
        assert_eq!(clean(b"\x1b(Bplain\x1b=\x1b[?25h"), "plain");
        assert_eq!(clean(b"trailing esc\x1b"), "trailing esc");
        assert_eq!(clean("caf\u{e9} \x1b[2K\r".as_bytes()), "caf\u{e9} ");
        assert_eq!(clean(b"{\"a\":\"b\"}"), "{\"a\":\"b\"}");
        assert_eq!(clean(b"bad \xff utf8"), "bad \u{fffd} utf8");
    }

    #[test]
    fn lines_empty_after_cleaning_are_dropped() {
        let out = split(100, &[b"\r\n\x1b[0m\r\nx\r\n"]);
        assert_eq!(out, vec![line("x")]);
    }

    #[test]
    fn a_long_line_becomes_the_line_itself_and_is_cleaned_in_place() {
        let mut long = vec![b'a'; REUSE_MAX + 10];
        long.extend_from_slice(b"\x1b[1mbold\x1b[0m\r");
        let mut s = LineSplitter::new(1 << 20);
        let mut out = Vec::new();
        s.push(&long, &mut out);
        s.push(b"\nshort\n", &mut out);
        let expected = format!("{}bold", "a".repeat(REUSE_MAX + 10));
        assert_eq!(out, vec![line(&expected), line("short")]);
        // The long line took its buffer along; the splitter starts over small.
        assert!(s.buf.capacity() <= REUSE_MAX, "{}", s.buf.capacity());
        assert_eq!(
            clean_owned(b"bad \xff utf8\r".to_vec()),
            "bad \u{fffd} utf8"
        );
    }

    #[tokio::test]
    async fn lines_waiting_for_the_consumer_are_bounded_in_bytes() {
        let (tx, mut rx) = mpsc::channel(16);
        let budget = Budget::new(10);
        let data: &'static [u8] = b"11111111\n22222222\n33\n";
        let pump = tokio::spawn(pump(data, Stream::Stdout, 100, None, tx, budget.clone()));
        let first = rx.recv().await.unwrap();
        assert_eq!(first, Output::Line("11111111".into()));
        // Not given back yet: the second line (8 more bytes) does not fit in the 10.
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert!(rx.try_recv().is_err(), "a line went past the budget");
        budget.give_back(&first);
        let second = rx.recv().await.unwrap();
        assert_eq!(second, Output::Line("22222222".into()));
        budget.give_back(&second);
        assert_eq!(rx.recv().await, Some(Output::Line("33".into())));
        pump.await.unwrap();
    }

    #[tokio::test]
    async fn pump_delivers_and_stops_at_eof() {
        let (tx, mut rx) = mpsc::channel(4);
        let data: &[u8] = b"one\r\ntwo";
        pump(data, Stream::Stderr, 100, None, tx, Budget::new(1 << 20)).await;
        assert_eq!(rx.recv().await, Some(Output::Stderr("one".into())));
        assert_eq!(rx.recv().await, Some(Output::Stderr("two".into())));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn pump_grows_its_buffer_for_bulk_output_and_loses_nothing() {
        // 2,000 lines of 50 bytes in one go: reads fill the first small buffer, so it grows,
        // and lines that straddle two reads are still whole.
        let lines: Vec<String> = (0..2000)
            .map(|i| format!("{i:06} {}", "x".repeat(42)))
            .collect();
        let data = lines.join("\n").into_bytes();
        let (tx, mut rx) = mpsc::channel(4096);
        pump(
            data.as_slice(),
            Stream::Stdout,
            100,
            None,
            tx,
            Budget::new(1 << 20),
        )
        .await;
        for l in &lines {
            assert_eq!(rx.recv().await, Some(Output::Line(l.clone())));
        }
        assert_eq!(rx.recv().await, None);
    }
}
