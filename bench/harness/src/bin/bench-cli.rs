//! The fake CLI of the side-by-side benchmark. Both hosts spawn it with the same arguments:
//! the prompt, as one argument (`n=N pause_us=U`).
//!
//! It prints N lines of agent-host-jsonl text deltas, ~100 bytes each, every one carrying the
//! CLOCK_REALTIME time it was written (`@t=<ns since the epoch>`) and its index (`ev=NNNNNN`),
//! with U µs between lines (0: back to back), then a `done` line, and exits 0. One write(2) per
//! line, so a host sees each line as soon as it is written. With `bytes=B` (the memory bench,
//! `bench/memory.sh`) each line's text is padded to B bytes.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn main() {
    let prompt = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let (mut n, mut pause_us, mut bytes) = (100u64, 0u64, 0usize);
    for w in prompt.split_whitespace() {
        if let Some(v) = w.strip_prefix("n=") {
            n = v.parse().unwrap_or(n);
        } else if let Some(v) = w.strip_prefix("pause_us=") {
            pause_us = v.parse().unwrap_or(pause_us);
        } else if let Some(v) = w.strip_prefix("bytes=") {
            bytes = v.parse().unwrap_or(bytes);
        }
    }
    let pause = Duration::from_micros(pause_us);
    let mut out = std::io::stdout().lock();
    let mut line = String::with_capacity(128 + bytes);
    for i in 0..n {
        if i > 0 && !pause.is_zero() {
            std::thread::sleep(pause);
        }
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        line.clear();
        line.push_str(r#"{"type":"text","text":"ev="#);
        line.push_str(&format!("{i:06} @t={t} ............................"));
        let text_len = line.len() - r#"{"type":"text","text":""#.len();
        line.extend(std::iter::repeat_n('.', bytes.saturating_sub(text_len)));
        line.push_str("\",\"delta\":true}\n");
        // A closed stdout (the host went away) ends the run.
        if out
            .write_all(line.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
        {
            std::process::exit(1);
        }
    }
    let _ = out.write_all(b"{\"type\":\"done\",\"result\":\"done\"}\n");
    let _ = out.flush();
}
