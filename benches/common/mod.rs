//! Shared by the benches: the recorded CLI transcripts (tests/fixtures/transcripts), read the
//! way the golden tests read them, and the adapter of each wire format.
//!
//! Bench code: a missing fixture or adapter is a broken checkout, so it panics.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use agent_host::adapter::wire::WireParser;
use agent_host::adapter::{AdapterSpec, AgentEvent, Registry};

/// One wire format: the built-in adapter that uses it and the fixtures recorded in it
/// (paths under tests/fixtures/transcripts; a trailing `*` matches a file-name prefix).
pub struct Format {
    pub wire: &'static str,
    pub adapter: &'static str,
    pub fixtures: &'static [&'static str],
}

pub const FORMATS: &[Format] = &[
    Format {
        wire: "claude-stream-json",
        adapter: "claude-code",
        fixtures: &["claude-code/2.1.330/claude-code-*"],
    },
    Format {
        wire: "codex-exec-json",
        adapter: "codex-exec",
        fixtures: &["codex/0.169.0/codex-exec-*", "codex/0.169.0/codex-openai-*"],
    },
    Format {
        wire: "codex-app-server",
        adapter: "codex",
        fixtures: &["codex/0.169.0/codex-app-server-*"],
    },
    Format {
        wire: "gemini-stream-json",
        adapter: "gemini-json",
        fixtures: &["gemini/0.61.0/gemini-*"],
    },
    Format {
        wire: "opencode-json",
        adapter: "opencode-json",
        fixtures: &["opencode/1.18.33/opencode-*"],
    },
    Format {
        wire: "acp",
        adapter: "qwen-acp",
        fixtures: &[
            "gemini/0.61.0/gemini-acp-*",
            "opencode/1.18.33/opencode-acp-*",
            "qwen/0.24.4/qwen-acp-*",
        ],
    },
    Format {
        wire: "agent-host-jsonl",
        adapter: "jsonl",
        fixtures: &["fake-agent/0.1.0/*"],
    },
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts")
}

/// Files of one fixture pattern that hold the CLI's stdout: `.jsonl` (JSON lines or a driven
/// run's `.transcript.jsonl`) and `.raw` (captured under a pty). An ACP transcript is only
/// taken by the `acp` format, a `.json` single document by none.
fn files(pattern: &str, wire: &str) -> Vec<PathBuf> {
    let (dir, prefix) = match pattern.rsplit_once('/') {
        Some((d, p)) => (root().join(d), p.trim_end_matches('*')),
        None => (root(), pattern.trim_end_matches('*')),
    };
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with(prefix)
                && (name.ends_with(".jsonl") || name.ends_with(".raw"))
                && (wire == "acp" || !name.contains("-acp-"))
        })
        .collect();
    out.sort();
    out
}

/// The lines a CLI printed on stdout, cleaned as the runner cleans them. A
/// `.transcript.jsonl` gives its `"dir":"out"` messages and `out-nonjson` lines.
pub fn stdout_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.to_string_lossy();
    if !name.ends_with(".transcript.jsonl") {
        return text
            .split('\n')
            .map(|l| agent_host::runner::clean_line(l.as_bytes()))
            .filter(|l| !l.is_empty())
            .collect();
    }
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| match v["dir"].as_str() {
            Some("out") => Some(v["msg"].to_string()),
            Some("out-nonjson") => v["msg"].as_str().map(str::to_string),
            _ => None,
        })
        .collect()
}

/// The recorded sessions of a format, each as its stdout lines.
pub fn sessions(f: &Format) -> Vec<Vec<String>> {
    let out: Vec<Vec<String>> = f
        .fixtures
        .iter()
        .flat_map(|p| files(p, f.wire))
        .map(|p| stdout_lines(&p))
        .collect();
    assert!(!out.is_empty(), "no fixtures for {}", f.wire);
    out
}

/// The built-in adapter of a format.
pub fn adapter(f: &Format) -> AdapterSpec {
    let reg = Registry::builtin().expect("built-in adapters");
    let spec = reg.get(f.adapter).expect("adapter").clone();
    assert_eq!(
        spec.wire, f.wire,
        "adapter {} speaks {}",
        f.adapter, spec.wire
    );
    spec
}

/// A fresh parser for the adapter.
pub fn parser(spec: &AdapterSpec) -> Box<dyn WireParser> {
    agent_host::adapter::wire::parser_for(spec).expect("parser")
}

/// Every event a format's sessions give, session by session.
pub fn events(f: &Format) -> Vec<Vec<AgentEvent>> {
    let spec = adapter(f);
    sessions(f)
        .iter()
        .map(|lines| {
            let mut p = parser(&spec);
            let (mut out, mut reply) = (Vec::new(), Vec::new());
            for l in lines {
                p.parse_line(l, &mut out, &mut reply);
            }
            out
        })
        .collect()
}

/// A line of the harness's fake CLI: a text delta of ~100 bytes.
pub fn text_line(i: usize) -> String {
    format!(
        r#"{{"type":"text","text":"ev {i:06} t=1767225600123456789 ......................","delta":true}}"#
    )
}
