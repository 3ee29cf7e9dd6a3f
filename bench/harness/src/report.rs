//! The table: one row per measure, agent-host vs the baseline (baseline ÷ agent-host: above 1
//! means agent-host costs less) and vs the floor (agent-host ÷ floor: how many times the
//! least a host can do for the same job agent-host costs; 1 is the floor itself).

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
    /// The floor host (`floor-relay`).
    floor: Option<Outcome>,
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
            floor: None,
            sqlite: None,
            postgres: None,
            postgres_two: None,
            detached: None,
        }
    }

    pub fn load(&self) -> Load {
        self.load
    }

    pub fn set(&mut self, who: &str, o: Outcome) {
        match who {
            "agent-host" => self.ours = Some(o),
            "baseline" => self.base = Some(o),
            "floor" => self.floor = Some(o),
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
        Some(d) => {
            let db = d.as_secs_f64() * 1e6 / o.frames.max(1) as f64;
            format!(
                "; database server {db:.1} µs, host + database {:.1} µs",
                cpu_per_event(o) + db
            )
        }
        None => String::new(),
    }
}

fn ms(ns: f64) -> String {
    if ns.is_nan() {
        "–".into()
    } else if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e7 {
        format!("{:.0} ms", ns / 1e6)
    } else {
        format!("{:.3} ms", ns / 1e6)
    }
}

/// `num ÷ den`, or – when either is missing.
fn ratio(num: f64, den: f64) -> String {
    if den > 0.0 && num.is_finite() && den.is_finite() {
        format!("{:.1}×", num / den)
    } else {
        "–".into()
    }
}

/// A figure of a host that may not have run (NaN then: its ratios print –).
fn val(o: Option<&Outcome>, f: impl Fn(&Outcome) -> f64) -> f64 {
    o.map_or(f64::NAN, f)
}

/// A cell of a host that may not have run.
fn cell(o: Option<&Outcome>, f: impl Fn(&Outcome) -> String) -> String {
    o.map_or_else(|| "–".into(), f)
}

/// Latency percentile `p` of all lines, in ns.
fn lat(o: &Outcome, p: f64) -> f64 {
    pct(&sorted(&o.latencies_ns), p)
}

/// p99 latency of the lines after each stream's first ones, in ns.
fn steady99(o: &Outcome) -> f64 {
    pct(&sorted(&o.steady_ns), 0.99)
}

/// p99 latency of the lines written while every stream was running, in ns.
fn settled99(o: &Outcome) -> f64 {
    pct(&sorted(&o.settled_ns), 0.99)
}

/// Task start (send → first `working` frame) percentile `p`, in ns.
fn start(o: &Outcome, p: f64) -> f64 {
    pct(&sorted(&o.starts_ns), p)
}

/// `p50 / p99 / p99 after each stream's first lines / p99 while every stream was running` of
/// the event latency.
fn lat4(o: &Outcome) -> String {
    format!(
        "{} / {} / {} / {}",
        ms(lat(o, 0.5)),
        ms(lat(o, 0.99)),
        ms(steady99(o)),
        ms(settled99(o))
    )
}

/// The ratios of the four latency figures, `num ÷ den` each.
fn lat4_ratio(num: Option<&Outcome>, den: Option<&Outcome>) -> String {
    let figures: [fn(&Outcome) -> f64; 4] =
        [|o| lat(o, 0.5), |o| lat(o, 0.99), steady99, settled99];
    figures
        .iter()
        .map(|f| ratio(val(num, f), val(den, f)))
        .collect::<Vec<_>>()
        .join(" / ")
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
        "{} frames, {}/{} lines, cpu {:.3} s ({:.1} µs/frame){}, wall {:.2} s, p50 {} p99 {} (after each stream's first {}: p99 {}; while all ran: p99 {}), peak rss {:.1} MiB, idle rss {:.1} MiB, card {:.0} ms{}",
        o.frames,
        o.events,
        o.expected,
        o.cpu.as_secs_f64(),
        cpu_per_event(o),
        db_cpu(o),
        o.wall.as_secs_f64(),
        ms(pct(&l, 0.5)),
        ms(pct(&l, 0.99)),
        crate::client::WARM_UP,
        ms(steady99(o)),
        ms(settled99(o)),
        o.peak_rss_kib as f64 / 1024.0,
        o.idle_rss_kib as f64 / 1024.0,
        o.card_after.as_secs_f64() * 1e3,
        problems(o)
    )
}

/// The errors of the short streams, distinct ones first, at most three.
pub fn errors(o: &Outcome) -> String {
    let mut kinds: Vec<&str> = Vec::new();
    for e in &o.errors {
        if kinds.len() == 3 {
            break;
        }
        if !kinds.contains(&e.as_str()) {
            kinds.push(e);
        }
    }
    kinds.join("; ")
}

/// One table line: the measure, agent-host, the baseline and baseline ÷ agent-host, the floor
/// and agent-host ÷ floor.
fn line(out: &mut String, cells: [&str; 6]) {
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

#[allow(
    clippy::too_many_lines,
    reason = "one block per kind of row, each a few cells; split, it would pass the same state around"
)]
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    line(
        &mut out,
        [
            "measure",
            "agent-host",
            "baseline (Node SDK)",
            "baseline ÷ agent-host",
            "floor (minimal relay)",
            "agent-host ÷ floor",
        ],
    );
    line(&mut out, ["---"; 6]);
    let mut starts: Vec<&Outcome> = Vec::new();
    let mut base_starts: Vec<&Outcome> = Vec::new();
    let mut floor_starts: Vec<&Outcome> = Vec::new();
    let mut sqlite_starts: Vec<&Outcome> = Vec::new();
    let mut pg_starts: Vec<&Outcome> = Vec::new();
    for r in rows {
        let Some(a) = &r.ours else {
            continue;
        };
        let (b, f) = (r.base.as_ref(), r.floor.as_ref());
        starts.push(a);
        base_starts.extend(b);
        floor_starts.extend(f);
        sqlite_starts.extend(&r.sqlite);
        pg_starts.extend(&r.postgres);
        let ld = r.load;
        let us = |o: &Outcome| format!("{:.1} µs{}", cpu_per_event(o), problems(o));
        match r.measure {
            Measure::CpuPerEvent => {
                let what = format!(
                    "host CPU / event, {} × {}-event tasks, lines back to back (agent-host and floor: {} runs)",
                    ld.streams, ld.events, ld.reps
                );
                let x = cpu_per_event(a);
                let (y, z) = (val(b, cpu_per_event), val(f, cpu_per_event));
                line(
                    &mut out,
                    [
                        &what,
                        &us(a),
                        &cell(b, us),
                        &ratio(y, x),
                        &cell(f, us),
                        &ratio(x, z),
                    ],
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
                        [
                            what,
                            &format!(
                                "{z:.1} µs, {:.2}× memory; {:.0}/s{}{}",
                                z / x,
                                eps(s),
                                db_cpu(s),
                                problems(s)
                            ),
                            &cell(b, |b| format!("{y:.1} µs; {:.0}/s (in memory)", eps(b))),
                            &ratio(y, z),
                            "–",
                            "–",
                        ],
                    );
                }
            }
            Measure::Latency => {
                let offered = ld.streams as f64 * 1e6 / ld.pause_us.max(1) as f64;
                let what = format!(
                    "event latency CLI write → SSE read, {} stream(s) × {} events, {} ms apart ({:.0} events/s offered), p50 / p99 / p99 after each stream's first {} / p99 while every stream was running",
                    ld.streams,
                    ld.events,
                    ld.pause_us / 1000,
                    offered,
                    crate::client::WARM_UP
                );
                let l4 = |o: &Outcome| format!("{}{}", lat4(o), problems(o));
                line(
                    &mut out,
                    [
                        &what,
                        &l4(a),
                        &cell(b, l4),
                        &lat4_ratio(b, Some(a)),
                        &cell(f, l4),
                        &lat4_ratio(Some(a), f),
                    ],
                );
                let (x, y, z) = (
                    cpu_per_event(a),
                    val(b, cpu_per_event),
                    val(f, cpu_per_event),
                );
                line(
                    &mut out,
                    [
                        &format!(
                            "same: host CPU / event, events spaced {} ms apart, {} stream(s) at once",
                            ld.pause_us / 1000,
                            ld.streams
                        ),
                        &format!("{x:.1} µs"),
                        &cell(b, |_| format!("{y:.1} µs")),
                        &ratio(y, x),
                        &cell(f, |_| format!("{z:.1} µs")),
                        &ratio(x, z),
                    ],
                );
                let stores = [
                    (&r.sqlite, "same, agent-host with its default SQLite store (p50 / p99 / p99 after the first lines / while all ran; host CPU / event)"),
                    (&r.postgres, "same, agent-host with the PostgreSQL store, one host (p50 / p99 / p99 after the first lines / while all ran; host CPU / event)"),
                    (&r.postgres_two, "same, two agent-hosts on the PostgreSQL store: tasks run on A, streamed from B (p50 / p99 / p99 after the first lines / while all ran; both hosts' CPU / event)"),
                ];
                for (o, what) in stores {
                    let Some(s) = o else { continue };
                    line(
                        &mut out,
                        [
                            what,
                            &format!(
                                "{}; {:.1} µs (memory: {x:.1} µs){}{}",
                                lat4(s),
                                cpu_per_event(s),
                                db_cpu(s),
                                problems(s)
                            ),
                            &cell(b, |b| format!("{}; {y:.1} µs (in memory)", lat4(b))),
                            &lat4_ratio(b, Some(s)),
                            "–",
                            "–",
                        ],
                    );
                }
            }
            Measure::Start => {
                let st = |o: &Outcome| format!("{} / {}", ms(start(o, 0.5)), ms(start(o, 0.99)));
                let rs = |num: Option<&Outcome>, den: Option<&Outcome>| {
                    format!(
                        "{} / {}",
                        ratio(val(num, |o| start(o, 0.5)), val(den, |o| start(o, 0.5))),
                        ratio(val(num, |o| start(o, 0.99)), val(den, |o| start(o, 0.99)))
                    )
                };
                line(
                    &mut out,
                    [
                        &format!(
                            "task start, send → first `working` frame, p50 / p99 of {} tasks",
                            ld.streams
                        ),
                        &st(a),
                        &cell(b, st),
                        &rs(b, Some(a)),
                        &cell(f, st),
                        &rs(Some(a), f),
                    ],
                );
            }
            Measure::Live => live(&mut out, r, a),
        }
    }
    let med = |v: Vec<u64>| pct(&sorted(&v), 0.5);
    let idle = |v: &[&Outcome]| med(v.iter().map(|o| o.idle_rss_kib).collect());
    let card = |v: &[&Outcome]| med(v.iter().map(|o| o.card_after.as_nanos() as u64).collect());
    let ic = |v: &[&Outcome]| {
        if v.is_empty() {
            "–".to_string()
        } else {
            format!("{:.1} MiB; {}", idle(v) / 1024.0, ms(card(v)))
        }
    };
    let ratios = |num: &[&Outcome], den: &[&Outcome]| {
        format!(
            "{} ; {}",
            ratio(idle(num), idle(den)),
            ratio(card(num), card(den))
        )
    };
    if !starts.is_empty() {
        line(
            &mut out,
            [
                &format!(
                    "idle RSS; start → card served (medians of {} / {} / {} starts)",
                    starts.len(),
                    base_starts.len(),
                    floor_starts.len()
                ),
                &ic(&starts),
                &ic(&base_starts),
                &ratios(&base_starts, &starts),
                &ic(&floor_starts),
                &ratios(&starts, &floor_starts),
            ],
        );
    }
    for (v, store) in [
        (&sqlite_starts, "its default SQLite store"),
        (&pg_starts, "the PostgreSQL store"),
    ] {
        if v.is_empty() {
            continue;
        }
        line(
            &mut out,
            [
                &format!(
                    "same, agent-host with {store} (medians of {} starts)",
                    v.len()
                ),
                &ic(v),
                &ic(&base_starts),
                &ratios(&base_starts, v),
                "–",
                "–",
            ],
        );
    }
    out
}

/// The rows of the live tasks: losses and peak RSS, latency and start, RSS per task.
fn live(out: &mut String, r: &Row, a: &Outcome) {
    let ld = r.load;
    let (b, f) = (r.base.as_ref(), r.floor.as_ref());
    let what = format!(
        "{} live tasks ({} events each, {} ms apart): events lost / peak host RSS",
        ld.streams,
        ld.events,
        ld.pause_us / 1000
    );
    let lost = |o: &Outcome| {
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
    let peak = |o: &Outcome| o.peak_rss_kib as f64;
    line(
        out,
        [
            &what,
            &lost(a),
            &cell(b, lost),
            &ratio(val(b, peak), peak(a)),
            &cell(f, lost),
            &ratio(peak(a), val(f, peak)),
        ],
    );
    if let Some(s) = &r.sqlite {
        line(
            out,
            [
                "same, agent-host with its default SQLite store",
                &lost(s),
                &cell(b, lost),
                &ratio(val(b, peak), peak(s)),
                "–",
                "–",
            ],
        );
    }
    let ls = |o: &Outcome| {
        format!(
            "{} / {}; {} / {}",
            ms(lat(o, 0.5)),
            ms(lat(o, 0.99)),
            ms(start(o, 0.5)),
            ms(start(o, 0.99))
        )
    };
    let rs = |num: Option<&Outcome>, den: Option<&Outcome>| {
        format!(
            "{} ; {}",
            ratio(val(num, |o| lat(o, 0.99)), val(den, |o| lat(o, 0.99))),
            ratio(val(num, |o| start(o, 0.5)), val(den, |o| start(o, 0.5)))
        )
    };
    line(
        out,
        [
            "same: event latency p50 / p99; send → first `working` frame p50 / p99 (ratios: latency p99 ; first frame p50)",
            &ls(a),
            &cell(b, ls),
            &rs(b, Some(a)),
            &cell(f, ls),
            &rs(Some(a), f),
        ],
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
    let kib = |o: &Outcome| format!("{:.1} KiB", per_task(o));
    line(
        out,
        [
            "same: RSS per live task with its open stream, (peak − idle) ÷ tasks",
            &ours,
            &cell(b, kib),
            &ratio(val(b, per_task), per_task(a)),
            &cell(f, kib),
            &ratio(per_task(a), val(f, per_task)),
        ],
    );
}

/// The database server's CPU per event, µs (NaN when not measured).
fn db_per_event(o: &Outcome) -> f64 {
    o.db_cpu
        .map_or(f64::NAN, |d| d.as_secs_f64() * 1e6 / o.frames.max(1) as f64)
}

/// Host CPU plus the database server's, per event, µs (the host's alone when the server's
/// was not measured: SQLite's and memory's database is in the host).
fn total_per_event(o: &Outcome) -> f64 {
    let db = db_per_event(o);
    cpu_per_event(o) + if db.is_nan() { 0.0 } else { db }
}

/// `host / database / total` CPU per event.
fn cpu3(o: &Outcome) -> String {
    let db = db_per_event(o);
    if db.is_nan() {
        format!("{:.1} µs{}", cpu_per_event(o), problems(o))
    } else {
        format!(
            "{:.1} / {:.1} / {:.1} µs{}",
            cpu_per_event(o),
            db,
            total_per_event(o),
            problems(o)
        )
    }
}

/// `p50 / p99` event latency.
fn lat2(o: &Outcome) -> String {
    format!("{} / {}{}", ms(lat(o, 0.5)), ms(lat(o, 0.99)), problems(o))
}

/// The stores side by side, for the loads that ran on SQLite and PostgreSQL: CPU per event
/// (host / database server / total) or latency (p50 / p99), and PostgreSQL ÷ SQLite (host
/// CPU and total CPU against SQLite's host CPU, which includes its database). Empty when no
/// load ran on both.
pub fn stores_table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| load | SQLite | PostgreSQL, one host | ÷ SQLite | PostgreSQL, two hosts (stream from B) | ÷ SQLite | two ÷ one host |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
    let mut any = false;
    for r in rows {
        let Some(s) = &r.sqlite else { continue };
        if r.postgres.is_none() && r.postgres_two.is_none() {
            continue;
        }
        any = true;
        let (p, p2) = (r.postgres.as_ref(), r.postgres_two.as_ref());
        let ld = r.load;
        let cells = match r.measure {
            Measure::CpuPerEvent => {
                let base = cpu_per_event(s);
                let vs = |o: Option<&Outcome>| {
                    format!(
                        "{} host, {} total",
                        ratio(val(o, cpu_per_event), base),
                        ratio(val(o, total_per_event), base)
                    )
                };
                [
                    format!(
                        "CPU / event (host / database / total), {} × {} events back to back",
                        ld.streams, ld.events
                    ),
                    cpu3(s),
                    cell(p, cpu3),
                    vs(p),
                    cell(p2, cpu3),
                    vs(p2),
                    ratio(val(p2, cpu_per_event), val(p, cpu_per_event)),
                ]
            }
            Measure::Latency => {
                let vs = |o: Option<&Outcome>| {
                    format!(
                        "{} / {}",
                        ratio(val(o, |o| lat(o, 0.5)), lat(s, 0.5)),
                        ratio(val(o, |o| lat(o, 0.99)), lat(s, 0.99))
                    )
                };
                let lat_cpu = |o: &Outcome| format!("{}; {}", lat2(o), cpu3(o));
                [
                    format!(
                        "latency p50 / p99; CPU / event (host / database / total), {} stream(s) × {} events {} ms apart",
                        ld.streams,
                        ld.events,
                        ld.pause_us / 1000
                    ),
                    lat_cpu(s),
                    cell(p, lat_cpu),
                    vs(p),
                    cell(p2, lat_cpu),
                    vs(p2),
                    format!(
                        "{} / {}",
                        ratio(val(p2, |o| lat(o, 0.5)), val(p, |o| lat(o, 0.5))),
                        ratio(val(p2, |o| lat(o, 0.99)), val(p, |o| lat(o, 0.99)))
                    ),
                ]
            }
            _ => continue,
        };
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
    if any {
        out
    } else {
        String::new()
    }
}
