//! The table: one row per measure, agent-host vs the baseline and the ratio
//! (baseline ÷ agent-host: above 1 means agent-host costs less).

use std::fmt::Write;

use crate::{Load, Outcome};

#[derive(Debug, Clone, Copy)]
pub enum Measure {
    CpuPerEvent,
    Latency,
    Start,
    Live,
}

pub struct Row {
    measure: Measure,
    load: Load,
    ours: Option<Outcome>,
    base: Option<Outcome>,
    sqlite: Option<Outcome>,
    /// agent-host on the PostgreSQL store (one host).
    postgres: Option<Outcome>,
    /// Two agent-hosts on the PostgreSQL store: tasks run on one, streamed from the other.
    postgres_two: Option<Outcome>,
    /// agent-host running the same tasks with no stream open (the live load only).
    detached: Option<Outcome>,
}

impl Row {
    pub fn new(measure: Measure, load: Load) -> Row {
        Row {
            measure,
            load,
            ours: None,
            base: None,
            sqlite: None,
            postgres: None,
            postgres_two: None,
            detached: None,
        }
    }

    pub fn set(&mut self, who: &str, o: Outcome) {
        match who {
            "agent-host" => self.ours = Some(o),
            "baseline" => self.base = Some(o),
            "agent-host-detached" => self.detached = Some(o),
            "agent-host-postgres" => self.postgres = Some(o),
            "agent-host-postgres-2" => self.postgres_two = Some(o),
            _ => self.sqlite = Some(o),
        }
    }
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64
}

fn sorted(v: &[u64]) -> Vec<u64> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s
}

/// Host CPU per streamed frame, µs.
fn cpu_per_event(o: &Outcome) -> f64 {
    o.cpu.as_secs_f64() * 1e6 / o.frames.max(1) as f64
}

/// The database server's CPU per event, when measured: `; database server N µs`.
fn db_cpu(o: &Outcome) -> String {
    match o.db_cpu {
        Some(d) => format!(
            "; database server {:.1} µs",
            d.as_secs_f64() * 1e6 / o.frames.max(1) as f64
        ),
        None => String::new(),
    }
}

fn ms(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e7 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.3} ms", ns / 1e6)
    }
}

fn ratio(base: f64, ours: f64) -> String {
    if ours > 0.0 && base.is_finite() && ours.is_finite() {
        format!("{:.1}×", base / ours)
    } else {
        "–".into()
    }
}

/// Losses and failures, when there were any.
fn problems(o: &Outcome) -> String {
    let mut s = String::new();
    if o.events < o.expected {
        let _ = write!(s, " ({} lost", o.expected - o.events);
        if !o.errors.is_empty() {
            let _ = write!(s, "; {} errors: {}", o.errors.len(), o.errors[0]);
        }
        s.push(')');
    } else if o.incomplete > 0 || !o.errors.is_empty() {
        let _ = write!(s, " ({} not completed)", o.incomplete.max(o.errors.len()));
    }
    s
}

pub fn summary(o: &Outcome) -> String {
    let l = sorted(&o.latencies_ns);
    format!(
        "{} frames, {}/{} lines, cpu {:.3} s ({:.1} µs/frame){}, wall {:.2} s, p50 {} p99 {}, peak rss {:.1} MiB, idle rss {:.1} MiB, card {:.0} ms{}",
        o.frames,
        o.events,
        o.expected,
        o.cpu.as_secs_f64(),
        cpu_per_event(o),
        db_cpu(o),
        o.wall.as_secs_f64(),
        ms(pct(&l, 0.5)),
        ms(pct(&l, 0.99)),
        o.peak_rss_kib as f64 / 1024.0,
        o.idle_rss_kib as f64 / 1024.0,
        o.card_after.as_secs_f64() * 1e3,
        problems(o)
    )
}

fn line(out: &mut String, measure: &str, ours: &str, base: &str, ratio: &str) {
    let _ = writeln!(out, "| {measure} | {ours} | {base} | {ratio} |");
}

pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    line(
        &mut out,
        "measure",
        "agent-host",
        "baseline (Node SDK)",
        "ratio",
    );
    line(&mut out, "---", "---", "---", "---");
    let mut starts: Vec<&Outcome> = Vec::new();
    let mut base_starts: Vec<&Outcome> = Vec::new();
    let mut sqlite_starts: Vec<&Outcome> = Vec::new();
    let mut pg_starts: Vec<&Outcome> = Vec::new();
    for r in rows {
        let (Some(a), Some(b)) = (&r.ours, &r.base) else {
            continue;
        };
        starts.push(a);
        base_starts.push(b);
        sqlite_starts.extend(&r.sqlite);
        pg_starts.extend(&r.postgres);
        let ld = r.load;
        match r.measure {
            Measure::CpuPerEvent => {
                let what = format!(
                    "host CPU / event, {} × {}-event tasks, lines back to back (agent-host: {} runs)",
                    ld.streams, ld.events, ld.reps
                );
                let (x, y) = (cpu_per_event(a), cpu_per_event(b));
                line(
                    &mut out,
                    &what,
                    &format!("{x:.1} µs{}", problems(a)),
                    &format!("{y:.1} µs{}", problems(b)),
                    &ratio(y, x),
                );
                let eps = |o: &Outcome| o.frames as f64 / o.wall.as_secs_f64();
                let stores = [
                    (
                        &r.sqlite,
                        "same, agent-host with its default SQLite store (CPU / event; events/s; ÷ memory)",
                    ),
                    (
                        &r.postgres,
                        "same, agent-host with the PostgreSQL store, one host (CPU / event; events/s; ÷ memory; the database server's CPU / event when it runs on this machine)",
                    ),
                    (
                        &r.postgres_two,
                        "same, two agent-hosts on the PostgreSQL store: tasks run on A, streamed from B (both hosts' CPU / event; events/s; ÷ memory; database server)",
                    ),
                ];
                for (o, what) in stores {
                    let Some(s) = o else { continue };
                    let z = cpu_per_event(s);
                    line(
                        &mut out,
                        what,
                        &format!(
                            "{z:.1} µs, {:.2}× memory; {:.0}/s{}{}",
                            z / x,
                            eps(s),
                            db_cpu(s),
                            problems(s)
                        ),
                        &format!("{y:.1} µs; {:.0}/s (in memory)", eps(b)),
                        &ratio(y, z),
                    );
                }
            }
            Measure::Latency => {
                let offered = ld.streams as f64 * 1e6 / ld.pause_us.max(1) as f64;
                let what = format!(
                    "event latency CLI write → SSE read, {} stream(s) × {} events, {} ms apart ({:.0} events/s offered), p50 / p99",
                    ld.streams,
                    ld.events,
                    ld.pause_us / 1000,
                    offered
                );
                let (la, lb) = (sorted(&a.latencies_ns), sorted(&b.latencies_ns));
                line(
                    &mut out,
                    &what,
                    &format!(
                        "{} / {}{}",
                        ms(pct(&la, 0.5)),
                        ms(pct(&la, 0.99)),
                        problems(a)
                    ),
                    &format!(
                        "{} / {}{}",
                        ms(pct(&lb, 0.5)),
                        ms(pct(&lb, 0.99)),
                        problems(b)
                    ),
                    &format!(
                        "{} / {}",
                        ratio(pct(&lb, 0.5), pct(&la, 0.5)),
                        ratio(pct(&lb, 0.99), pct(&la, 0.99))
                    ),
                );
                let stores = [
                    (&r.sqlite, "same, agent-host with its default SQLite store (p50 / p99; host CPU / event)"),
                    (&r.postgres, "same, agent-host with the PostgreSQL store, one host (p50 / p99; host CPU / event)"),
                    (&r.postgres_two, "same, two agent-hosts on the PostgreSQL store: tasks run on A, streamed from B (p50 / p99; both hosts' CPU / event)"),
                ];
                for (o, what) in stores {
                    let Some(s) = o else { continue };
                    let ls = sorted(&s.latencies_ns);
                    line(
                        &mut out,
                        what,
                        &format!(
                            "{} / {}; {:.1} µs (memory: {:.1} µs){}{}",
                            ms(pct(&ls, 0.5)),
                            ms(pct(&ls, 0.99)),
                            cpu_per_event(s),
                            cpu_per_event(a),
                            db_cpu(s),
                            problems(s)
                        ),
                        &format!(
                            "{} / {}; {:.1} µs (in memory)",
                            ms(pct(&lb, 0.5)),
                            ms(pct(&lb, 0.99)),
                            cpu_per_event(b)
                        ),
                        &format!(
                            "{} / {}",
                            ratio(pct(&lb, 0.5), pct(&ls, 0.5)),
                            ratio(pct(&lb, 0.99), pct(&ls, 0.99))
                        ),
                    );
                }
            }
            Measure::Start => {
                let (sa, sb) = (sorted(&a.starts_ns), sorted(&b.starts_ns));
                line(
                    &mut out,
                    &format!(
                        "task start, send → first `working` frame, p50 / p99 of {} tasks",
                        ld.streams
                    ),
                    &format!("{} / {}", ms(pct(&sa, 0.5)), ms(pct(&sa, 0.99))),
                    &format!("{} / {}", ms(pct(&sb, 0.5)), ms(pct(&sb, 0.99))),
                    &format!(
                        "{} / {}",
                        ratio(pct(&sb, 0.5), pct(&sa, 0.5)),
                        ratio(pct(&sb, 0.99), pct(&sa, 0.99))
                    ),
                );
            }
            Measure::Live => {
                let what = format!(
                    "{} live tasks ({} events each, {} ms apart): events lost / peak host RSS",
                    ld.streams,
                    ld.events,
                    ld.pause_us / 1000
                );
                let cell = |o: &Outcome| {
                    format!(
                        "{} / {:.0} MiB{}",
                        o.expected - o.events.min(o.expected),
                        o.peak_rss_kib as f64 / 1024.0,
                        if o.incomplete > 0 {
                            format!(" ({} not completed)", o.incomplete)
                        } else {
                            String::new()
                        }
                    )
                };
                line(
                    &mut out,
                    &what,
                    &cell(a),
                    &cell(b),
                    &ratio(b.peak_rss_kib as f64, a.peak_rss_kib as f64),
                );
                if let Some(s) = &r.sqlite {
                    line(
                        &mut out,
                        "same, agent-host with its default SQLite store",
                        &cell(s),
                        &cell(b),
                        &ratio(b.peak_rss_kib as f64, s.peak_rss_kib as f64),
                    );
                }
                let (la, lb) = (sorted(&a.latencies_ns), sorted(&b.latencies_ns));
                let (sa, sb) = (sorted(&a.starts_ns), sorted(&b.starts_ns));
                line(
                    &mut out,
                    "same: event latency p50 / p99; send → first `working` frame p50 / p99",
                    &format!(
                        "{} / {}; {} / {}",
                        ms(pct(&la, 0.5)),
                        ms(pct(&la, 0.99)),
                        ms(pct(&sa, 0.5)),
                        ms(pct(&sa, 0.99))
                    ),
                    &format!(
                        "{} / {}; {} / {}",
                        ms(pct(&lb, 0.5)),
                        ms(pct(&lb, 0.99)),
                        ms(pct(&sb, 0.5)),
                        ms(pct(&sb, 0.99))
                    ),
                    &format!(
                        "{} ; {}",
                        ratio(pct(&lb, 0.99), pct(&la, 0.99)),
                        ratio(pct(&sb, 0.5), pct(&sa, 0.5))
                    ),
                );
                // (peak − idle) ÷ tasks: what one live task and its open stream cost.
                let per_task = |o: &Outcome| {
                    o.peak_rss_kib.saturating_sub(o.idle_rss_kib) as f64 / ld.streams.max(1) as f64
                };
                let mut ours = match &r.detached {
                    Some(d) => format!(
                        "{:.1} KiB ({:.1} KiB the task, {:.1} KiB its stream)",
                        per_task(a),
                        per_task(d),
                        per_task(a) - per_task(d)
                    ),
                    None => format!("{:.1} KiB", per_task(a)),
                };
                if let Some(s) = &r.sqlite {
                    let _ = write!(ours, "; SQLite store: {:.1} KiB", per_task(s));
                }
                line(
                    &mut out,
                    "same: RSS per live task with its open stream, (peak − idle) ÷ tasks",
                    &ours,
                    &format!("{:.1} KiB", per_task(b)),
                    &ratio(per_task(b), per_task(a)),
                );
            }
        }
    }
    let med = |v: Vec<u64>| pct(&sorted(&v), 0.5);
    let idle = |v: &[&Outcome]| med(v.iter().map(|o| o.idle_rss_kib).collect());
    let card = |v: &[&Outcome]| med(v.iter().map(|o| o.card_after.as_nanos() as u64).collect());
    if !starts.is_empty() {
        let (ia, ib) = (idle(&starts), idle(&base_starts));
        let (ca, cb) = (card(&starts), card(&base_starts));
        line(
            &mut out,
            &format!(
                "idle RSS; start → card served (medians of {} / {} starts)",
                starts.len(),
                base_starts.len()
            ),
            &format!("{:.1} MiB; {}", ia / 1024.0, ms(ca)),
            &format!("{:.1} MiB; {}", ib / 1024.0, ms(cb)),
            &format!("{} ; {}", ratio(ib, ia), ratio(cb, ca)),
        );
    }
    for (v, store) in [
        (&sqlite_starts, "its default SQLite store"),
        (&pg_starts, "the PostgreSQL store"),
    ] {
        if v.is_empty() {
            continue;
        }
        let (iz, ib) = (idle(v), idle(&base_starts));
        let (cz, cb) = (card(v), card(&base_starts));
        line(
            &mut out,
            &format!(
                "same, agent-host with {store} (medians of {} starts)",
                v.len()
            ),
            &format!("{:.1} MiB; {}", iz / 1024.0, ms(cz)),
            &format!("{:.1} MiB; {}", ib / 1024.0, ms(cb)),
            &format!("{} ; {}", ratio(ib, iz), ratio(cb, cz)),
        );
    }
    out
}
