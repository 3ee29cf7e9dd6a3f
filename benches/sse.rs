//! SSE encoding per event: the v1.0 JSON-RPC frame and the v0.3 frame of a logged event.
//!
//! "first subscriber" serializes the event (a fresh [`LoggedEvent`], empty cache); "cached"
//! is every further subscriber of the same event, which only wraps the cached JSON in its
//! envelope and frame. `cargo bench --bench sse`.

// Benchmarks are test code: a broken fixture should stop them loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_host::adapter::AgentEvent;
use agent_host::protocol::v1::StreamResponse;
use agent_host::server::sse::Flavor;
use agent_host::task::{LoggedEvent, TaskEvent, TurnMapper};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::json;
use std::hint::black_box;

/// The updates of a typical event of each kind (bench code: panics if the mapper changes).
fn updates() -> Vec<(&'static str, StreamResponse)> {
    let mut m = TurnMapper::new("0b9c7d1e-6f1a-4c55-9a5e-2f1b3c4d5e6f", "8c89f818-aa01-4b2e");
    let working = m.started().remove(0);
    m.on_event(AgentEvent::Text {
        text: "first".into(),
        delta: true,
    });
    let text = m
        .on_event(AgentEvent::Text {
            text: "ev 000017 t=1767225600123456789 a chunk of the streamed answer".into(),
            delta: true,
        })
        .remove(0);
    let tool = m
        .on_event(AgentEvent::ToolUse {
            id: "tool-1".into(),
            name: "Bash".into(),
            input: json!({"command": "ls -la src"}),
        })
        .remove(0);
    vec![
        ("status working", working),
        ("artifact append", text),
        ("tool use", tool),
    ]
}

fn sse(c: &mut Criterion) {
    let flavors = [
        ("v1 jsonrpc", Flavor::V1JsonRpc { id: "1".into() }),
        ("v0.3 jsonrpc", Flavor::V03JsonRpc { id: "1".into() }),
    ];
    let mut g = c.benchmark_group("sse");
    g.throughput(Throughput::Elements(1));
    for (kind, sr) in updates() {
        for (fname, flavor) in &flavors {
            g.bench_function(format!("{fname}/{kind}/first subscriber"), |b| {
                b.iter_batched(
                    || LoggedEvent::new(42, TaskEvent::Stream(sr.clone())),
                    |e| black_box(flavor.encode(&e)),
                    BatchSize::SmallInput,
                )
            });
            let e = LoggedEvent::new(42, TaskEvent::Stream(sr.clone()));
            g.bench_function(format!("{fname}/{kind}/cached"), |b| {
                b.iter(|| black_box(flavor.encode(black_box(&e))))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, sse);
criterion_main!(benches);
