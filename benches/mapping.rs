//! AgentEvent → A2A updates: [`TurnMapper::on_event`] per event. `cargo bench --bench mapping`.

// Benchmarks are test code: a broken fixture should stop them loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agent_host::adapter::AgentEvent;
use agent_host::task::TurnMapper;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use serde_json::json;
use std::hint::black_box;

fn mapping(c: &mut Criterion) {
    let mut g = c.benchmark_group("mapping");
    g.throughput(Throughput::Elements(1));

    // The common case: a streamed text chunk becomes an artifact append.
    let text = AgentEvent::Text {
        text: "ev 000017 t=1767225600123456789 a chunk of the streamed answer".into(),
        delta: true,
    };
    g.bench_function("text delta", |b| {
        let mut m = TurnMapper::new("task-1", "context-1");
        m.started();
        b.iter_batched(
            || text.clone(),
            |ev| black_box(m.on_event(ev)),
            BatchSize::SmallInput,
        )
    });

    let tool = AgentEvent::ToolUse {
        id: "tool-1".into(),
        name: "Bash".into(),
        input: json!({"command": "ls -la src", "description": "list the sources"}),
    };
    g.bench_function("tool use", |b| {
        let mut m = TurnMapper::new("task-1", "context-1");
        m.started();
        b.iter_batched(
            || tool.clone(),
            |ev| black_box(m.on_event(ev)),
            BatchSize::SmallInput,
        )
    });
    g.finish();

    // Every event of every recorded session, a fresh mapper per session (the per-event mean
    // over real traffic: mostly text, tool use and results, some init/usage/done).
    let sessions: Vec<Vec<AgentEvent>> = common::FORMATS.iter().flat_map(common::events).collect();
    let n: usize = sessions.iter().map(Vec::len).sum();
    let mut g = c.benchmark_group("mapping");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function(format!("recorded sessions ({n} events)"), |b| {
        b.iter_batched(
            || sessions.clone(),
            |sessions| {
                for s in sessions {
                    let mut m = TurnMapper::new("task-1", "context-1");
                    black_box(m.started());
                    for ev in s {
                        black_box(m.on_event(ev));
                    }
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, mapping);
criterion_main!(benches);
