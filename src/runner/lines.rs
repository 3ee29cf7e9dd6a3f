//! Bounded line splitting and cleaning of a child's output streams.
//!
//! Lines are split on `\n`, kept up to `max_line_bytes` (longer lines are skipped without being
//! buffered and reported as [`Output::TooLong`]), decoded as lossy UTF-8, and cleaned of `\r` and
//! ANSI escape sequences. Empty lines (after cleaning) are dropped.
//!
//! A line is held once: a long line's buffer becomes the line itself (no copy), and a stream
//! is read only when its consumer asks for the next line ([`LineReader`]), so a program
//! printing lines of many megabytes costs about one line at a time.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::Sleep;

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
            let newline = memchr::memchr(b'\n', chunk);
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
    if needs_cleaning(&line) {
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
    if !needs_cleaning(line) {
        return lossy(line);
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
    lossy(&kept)
}

/// Whether `line` holds a `\r` or an ESC. `memchr` looks at a word or a vector register at a
/// time where a byte loop looks at one byte: this runs on every line a CLI prints.
fn needs_cleaning(line: &[u8]) -> bool {
    memchr::memchr2(0x1b, b'\r', line).is_some()
}

/// Lossy UTF-8 decoding, by way of the standard library's validation (which checks ASCII a
/// word at a time) for the usual valid line; `from_utf8_lossy` walks byte by byte.
fn lossy(line: &[u8]) -> String {
    match std::str::from_utf8(line) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(line).into_owned(),
    }
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

/// One output stream of the child, read by whoever asks for its lines: no task of its own
/// sits between the pipe and the turn (a hand-off, a wake-up and a channel per line less),
/// and what waits is only what one read brought (the pipe itself holds the rest, and the
/// child blocks on it while the consumer is busy: backpressure with no buffer of ours).
///
/// With `partial_after`, a line that has no newline yet is delivered once nothing more
/// arrived for that long: a terminal prompt such as `Apply? [y/N] ` waits for an answer
/// without ever ending its line (pty mode).
pub(crate) struct LineReader<R> {
    /// `None` once it reached EOF (or failed, which counts as EOF).
    reader: Option<R>,
    stream: Stream,
    splitter: LineSplitter,
    chunk: Vec<u8>,
    most: usize,
    pieces: Vec<Piece>,
    ready: VecDeque<Output>,
    partial_after: Option<Duration>,
    /// The quiet wait of a partial line (pty mode), made when first needed.
    quiet: Option<Pin<Box<Sleep>>>,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(
        reader: R,
        stream: Stream,
        max: usize,
        partial_after: Option<Duration>,
    ) -> Self {
        // Each live task holds one buffer per stream, so it starts small (a thousand live
        // tasks that print a line now and then need little: 256 bytes hold a usual line of
        // progress, 64 the stderr of a program that prints none) and doubles whenever a read
        // fills it, up to 16 KiB for stdout (four reads drain a full 64 KiB pipe) and 4 KiB
        // for stderr, which carries little (retries, warnings).
        let (first, most) = match stream {
            Stream::Stdout => (256, 16 * 1024),
            Stream::Stderr => (64, 4 * 1024),
        };
        LineReader {
            reader: Some(reader),
            stream,
            splitter: LineSplitter::new(max),
            chunk: vec![0u8; first],
            most,
            pieces: Vec::new(),
            ready: VecDeque::new(),
            partial_after,
            quiet: None,
        }
    }

    /// The next line; `None` at EOF. Cancel-safe: what was read is kept in `self`.
    #[cfg(test)]
    pub(crate) async fn next(&mut self) -> Option<Output> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Output>> {
        loop {
            if let Some(out) = self.ready.pop_front() {
                return Poll::Ready(Some(out));
            }
            let Some(reader) = self.reader.as_mut() else {
                return Poll::Ready(None);
            };
            let mut buf = ReadBuf::new(&mut self.chunk);
            let n = match Pin::new(reader).poll_read(cx, &mut buf) {
                Poll::Pending => {
                    if self.partial_is_due(cx) {
                        self.splitter.finish(&mut self.pieces);
                        self.take_pieces();
                        continue;
                    }
                    return Poll::Pending;
                }
                Poll::Ready(Ok(())) => buf.filled().len(),
                Poll::Ready(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Poll::Ready(Err(e)) => {
                    let stream = self.stream;
                    tracing::debug!(?stream, error = %e, "reading child output failed; treating as EOF");
                    0
                }
            };
            self.quiet = None;
            if n == 0 {
                self.splitter.finish(&mut self.pieces);
                self.reader = None;
            } else {
                self.splitter.push(&self.chunk[..n], &mut self.pieces);
                if n == self.chunk.len() && self.chunk.len() < self.most {
                    self.chunk.resize(self.chunk.len() * 2, 0);
                }
            }
            self.take_pieces();
        }
    }

    /// With a partial line waiting (pty mode): true once it has been quiet for
    /// `partial_after`; otherwise the wait is armed to wake the consumer then.
    fn partial_is_due(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(after) = self.partial_after else {
            return false;
        };
        if !self.splitter.has_partial() {
            self.quiet = None;
            return false;
        }
        let quiet = self
            .quiet
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
        if quiet.as_mut().poll(cx).is_ready() {
            self.quiet = None;
            return true;
        }
        false
    }

    fn take_pieces(&mut self) {
        let stream = self.stream;
        self.ready
            .extend(self.pieces.drain(..).map(|p| to_output(p, stream)));
    }
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
    async fn a_stream_is_read_only_as_its_lines_are_taken() {
        // A pipe of 64 bytes: the writer can get ahead of the reader by no more than that
        // and one read, however many lines it has.
        let (mut w, r) = tokio::io::duplex(64);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            for i in 0..100 {
                w.write_all(format!("line {i:03}\n").as_bytes())
                    .await
                    .unwrap();
            }
        });
        let mut reader = LineReader::new(r, Stream::Stdout, 100, None);
        assert_eq!(reader.next().await, Some(Output::Line("line 000".into())));
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
        assert!(!writer.is_finished(), "the writer was not held back");
        assert!(
            reader.ready.len() < 64,
            "{} lines were read ahead",
            reader.ready.len()
        );
        for i in 1..100 {
            assert_eq!(
                reader.next().await,
                Some(Output::Line(format!("line {i:03}")))
            );
        }
        writer.await.unwrap();
        assert_eq!(reader.next().await, None);
        assert!(reader.reader.is_none() && reader.ready.is_empty());
    }

    #[tokio::test]
    async fn a_reader_delivers_and_stops_at_eof() {
        let data: &[u8] = b"one\r\ntwo";
        let mut reader = LineReader::new(data, Stream::Stderr, 100, None);
        assert_eq!(reader.next().await, Some(Output::Stderr("one".into())));
        assert_eq!(reader.next().await, Some(Output::Stderr("two".into())));
        assert_eq!(reader.next().await, None);
        assert_eq!(reader.next().await, None);
    }

    #[tokio::test]
    async fn an_overlong_stderr_line_becomes_a_note() {
        let data: &[u8] = b"0123456789\nok\n";
        let mut reader = LineReader::new(data, Stream::Stderr, 5, None);
        assert_eq!(
            reader.next().await,
            Some(Output::Stderr(
                "[stderr line of 10 bytes discarded: too long]".into()
            ))
        );
        assert_eq!(reader.next().await, Some(Output::Stderr("ok".into())));
    }

    #[tokio::test]
    async fn a_reader_grows_its_buffer_for_bulk_output_and_loses_nothing() {
        // 2,000 lines of 50 bytes in one go: reads fill the first small buffer, so it grows,
        // and lines that straddle two reads are still whole.
        let lines: Vec<String> = (0..2000)
            .map(|i| format!("{i:06} {}", "x".repeat(42)))
            .collect();
        let data = lines.join("\n").into_bytes();
        let mut reader = LineReader::new(data.as_slice(), Stream::Stdout, 100, None);
        for l in &lines {
            assert_eq!(reader.next().await, Some(Output::Line(l.clone())));
        }
        assert_eq!(reader.next().await, None);
        assert_eq!(reader.chunk.len(), 16 * 1024);
    }

    #[tokio::test(start_paused = true)]
    async fn a_prompt_without_newline_is_delivered_after_quiet_on_a_terminal() {
        use tokio::io::AsyncWriteExt;
        let (mut w, r) = tokio::io::duplex(1024);
        let mut reader = LineReader::new(r, Stream::Stdout, 100, Some(Duration::from_millis(300)));
        w.write_all(b"Apply? [y/N] ").await.unwrap();
        let started = tokio::time::Instant::now();
        assert_eq!(
            reader.next().await,
            Some(Output::Line("Apply? [y/N] ".into()))
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        // Without a terminal's quiet rule, the same bytes wait for their newline.
        let (mut w, r) = tokio::io::duplex(1024);
        let mut reader = LineReader::new(r, Stream::Stdout, 100, None);
        w.write_all(b"Apply? [y/N] ").await.unwrap();
        let waited = tokio::time::timeout(Duration::from_secs(5), reader.next()).await;
        assert!(waited.is_err(), "a partial line was delivered: {waited:?}");
        w.write_all(b"y\n").await.unwrap();
        assert_eq!(
            reader.next().await,
            Some(Output::Line("Apply? [y/N] y".into()))
        );
    }
}
