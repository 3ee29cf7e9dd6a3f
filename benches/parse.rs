//! Parsing throughput per wire format on the recorded transcripts (MB/s of CLI output).
//!
//! One group per format; one iteration parses every recorded session of the format with a
//! fresh parser per session, as a turn would. `cargo bench --bench parse`.

// Benchmarks are test code: a broken fixture should stop them loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;

fn parse(c: &mut Criterion) {
    for f in common::FORMATS {
        let spec = common::adapter(f);
        let sessions = common::sessions(f);
        let bytes: usize = sessions.iter().flatten().map(|l| l.len() + 1).sum();
        let lines: usize = sessions.iter().map(Vec::len).sum();
        let mut g = c.benchmark_group(format!("parse/{}", f.wire));
        g.throughput(Throughput::Bytes(bytes as u64));
        g.bench_function(format!("{} sessions, {lines} lines", sessions.len()), |b| {
            let (mut out, mut reply) = (Vec::new(), Vec::new());
            b.iter(|| {
                for s in &sessions {
                    let mut p = common::parser(&spec);
                    for l in s {
                        out.clear();
                        reply.clear();
                        p.parse_line(black_box(l), &mut out, &mut reply);
                        black_box(&out);
                    }
                }
            })
        });
        g.finish();
    }

    // The harness's fake CLI line (a ~100-byte text delta), the e2e benchmark's unit of work.
    let spec = common::adapter(&common::FORMATS[6]);
    let lines: Vec<String> = (0..1000).map(common::text_line).collect();
    let bytes: usize = lines.iter().map(|l| l.len() + 1).sum();
    let mut g = c.benchmark_group("parse/agent-host-jsonl");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("1000 text deltas of ~100 bytes", |b| {
        let mut p = common::parser(&spec);
        let (mut out, mut reply) = (Vec::new(), Vec::new());
        b.iter(|| {
            for l in &lines {
                out.clear();
                p.parse_line(black_box(l), &mut out, &mut reply);
                black_box(&out);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
