//! `fake-agent --scenario FILE` and `--replay FILE`: output scripted by a file rather than
//! by the prompt's keywords.

use std::io::{self, BufRead};
use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use super::{str_field, End, Out};

pub(super) fn run_scenario(path: &Path, out: &mut Out, input: &mut dyn BufRead) -> io::Result<End> {
    let text = std::fs::read_to_string(path)?;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let step: Value = serde_json::from_str(line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}:{}: {e}", path.display(), n + 1),
            )
        })?;
        if let Some(v) = step.get("emit") {
            out.emit(v)?;
        } else if let Some(s) = str_field(&step, "print") {
            out.line(s)?;
        } else if let Some(s) = str_field(&step, "stderr") {
            out.err_line(s)?;
        } else if let Some(ms) = step.get("sleep_ms").and_then(Value::as_u64) {
            std::thread::sleep(Duration::from_millis(ms));
        } else if step.get("read_stdin").is_some() {
            let mut got = String::new();
            if input.read_line(&mut got)? == 0 {
                out.error("stdin closed", "stdin_closed")?;
                return Ok(End::Exit(2));
            }
            let got = got.trim_end_matches(['\n', '\r']);
            out.emit(
                &json!({"type": "tool_result", "id": "stdin", "output": got, "is_error": false}),
            )?;
        } else if let Some(code) = step.get("exit").and_then(Value::as_i64) {
            return Ok(End::Exit(i32::try_from(code).unwrap_or(1)));
        } else {
            out.err_line(&format!(
                "fake-agent: {}:{}: unknown step {line}",
                path.display(),
                n + 1
            ))?;
        }
    }
    Ok(End::Exit(0))
}

pub(super) fn run_replay(path: &Path, out: &mut Out) -> io::Result<End> {
    let bytes = std::fs::read(path)?;
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        out.raw(line)?;
    }
    Ok(End::Exit(0))
}
