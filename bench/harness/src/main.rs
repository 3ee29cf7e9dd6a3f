//! loadgen: the side-by-side benchmark of agent-host, a Node @a2a-js/sdk host (the baseline)
//! and the floor (`floor-relay`, the least a host can do for the same job); `bench/run.sh`
//! builds everything and runs this.
//!
//! For every scenario it starts a fresh agent-host, runs the load, stops it, then does the
//! same with the baseline and the floor (hosts alternate within one run), and prints one
//! table. Every
//! scenario is bounded in count and time; hosts listen on 127.0.0.1 only.
//!
//! A harness binary: a failure to set up (no free port, a host that does not start) ends
//! the run with a message; nothing here is timed as a pass/fail assertion.

mod client;
mod host;
mod pg;
mod report;
mod spread;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use host::{Host, Kind, Programs};
use report::{Measure, Row};

/// One load: `streams` concurrent streams (started `stagger` apart), each a task whose CLI
/// prints `events` lines `pause_us` apart.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub streams: usize,
    pub events: usize,
    pub pause_us: u64,
    pub stagger: Duration,
    pub limit: Duration,
    /// Times agent-host runs the load in a row on one host (the baseline runs it once), so
    /// that its CPU time spans enough 10 ms clock ticks to be read; per-event figures divide
    /// by all the frames streamed.
    pub reps: usize,
}

/// What one load did on one host.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub cpu: Duration,
    pub wall: Duration,
    pub frames: u64,
    pub events: u64,
    pub expected: u64,
    pub latencies_ns: Vec<u64>,
    /// Latencies of each stream's lines after its first [`client::WARM_UP`].
    pub steady_ns: Vec<u64>,
    /// Latencies of the lines written while every stream was running ([`client::settle`]).
    pub settled_ns: Vec<u64>,
    pub starts_ns: Vec<u64>,
    pub peak_rss_kib: u64,
    pub errors: Vec<String>,
    pub incomplete: usize,
    pub card_after: Duration,
    pub idle_rss_kib: u64,
    /// CPU the PostgreSQL server spent meanwhile (PostgreSQL store on this machine only).
    pub db_cpu: Option<Duration>,
}

impl Outcome {
    /// Counts the streams of the load in.
    fn add(&mut self, results: Vec<client::StreamResult>) {
        for r in results {
            self.frames += r.frames;
            self.events += r.events;
            self.latencies_ns
                .extend(r.timed.iter().map(|(_, lat)| *lat));
            self.steady_ns.extend(r.steady_ns);
            self.settled_ns.extend(r.settled_ns);
            if let Some(s) = r.start {
                self.starts_ns.push(s.as_nanos() as u64);
            }
            if !r.completed {
                self.incomplete += 1;
            }
            if let Some(e) = r.error {
                self.errors.push(e);
            }
        }
    }
}

/// The streams of `load`, stream `i` sent to and read from `addrs[i % addrs.len()]`.
pub(crate) async fn drive(
    addrs: &[SocketAddr],
    load: Load,
    tag: &str,
) -> Vec<client::StreamResult> {
    let deadline = tokio::time::Instant::now() + load.limit;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..load.streams {
        let body = client::request_body(
            &format!("n={} pause_us={}", load.events, load.pause_us),
            &format!("{tag}-{i}"),
        );
        let addr = addrs[i % addrs.len()];
        let delay = load.stagger * i as u32;
        set.spawn(async move {
            tokio::time::sleep(delay).await;
            client::stream(addr, &body, load.events, deadline).await
        });
    }
    let mut out = Vec::with_capacity(load.streams);
    while let Some(r) = set.join_next().await {
        out.push(r.unwrap_or_else(|e| client::StreamResult {
            error: Some(format!("join: {e}")),
            ..Default::default()
        }));
    }
    client::settle(&mut out);
    out
}

/// The same tasks as [`drive`], started with no stream open (`returnImmediately`); returns
/// once they have had the time to run (their lines are not read).
async fn drive_detached(addr: SocketAddr, load: Load, tag: &str) -> Vec<client::StreamResult> {
    let deadline = tokio::time::Instant::now() + load.limit;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..load.streams {
        let body = client::detached_body(
            &format!("n={} pause_us={}", load.events, load.pause_us),
            &format!("{tag}-{i}"),
        );
        let delay = load.stagger * i as u32;
        set.spawn(async move {
            tokio::time::sleep(delay).await;
            client::send_detached(addr, &body, deadline).await
        });
    }
    let mut out = Vec::with_capacity(load.streams);
    while let Some(r) = set.join_next().await {
        let error = match r {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => Some(format!("join: {e}")),
        };
        out.push(client::StreamResult {
            completed: error.is_none(),
            error,
            ..Default::default()
        });
    }
    // The tasks print for events × pause; the RSS is sampled meanwhile.
    let run_for =
        Duration::from_micros(load.pause_us * load.events as u64) + Duration::from_secs(1);
    tokio::time::sleep_until((tokio::time::Instant::now() + run_for).min(deadline)).await;
    out
}

/// The tasks of [`drive`], each sent to `a` (`returnImmediately`) and streamed from `b`
/// (`SubscribeToTask`): `b` follows a task another host runs, from the shared store.
async fn drive_two(
    a: SocketAddr,
    b: SocketAddr,
    load: Load,
    tag: &str,
) -> Vec<client::StreamResult> {
    let deadline = tokio::time::Instant::now() + load.limit;
    let mut set = tokio::task::JoinSet::new();
    for i in 0..load.streams {
        let body = client::detached_body(
            &format!("n={} pause_us={}", load.events, load.pause_us),
            &format!("{tag}-{i}"),
        );
        let delay = load.stagger * i as u32;
        set.spawn(async move {
            tokio::time::sleep(delay).await;
            let reply = match client::send_detached(a, &body, deadline).await {
                Ok(r) => r,
                Err(e) => {
                    return client::StreamResult {
                        error: Some(e),
                        ..Default::default()
                    }
                }
            };
            let Some(id) = client::task_id_of(&reply) else {
                return client::StreamResult {
                    error: Some(format!("no task id in {}", &reply[..reply.len().min(300)])),
                    ..Default::default()
                };
            };
            client::stream(b, &client::subscribe_body(&id), load.events, deadline).await
        });
    }
    let mut out = Vec::with_capacity(load.streams);
    while let Some(r) = set.join_next().await {
        out.push(r.unwrap_or_else(|e| client::StreamResult {
            error: Some(format!("join: {e}")),
            ..Default::default()
        }));
    }
    client::settle(&mut out);
    out
}

/// Two hosts on a fresh schema of the database at `base`: the load's tasks run on the
/// first and are streamed from the second; CPU is both hosts'.
fn run_two(
    rt: &tokio::runtime::Runtime,
    base: &str,
    progs: &Programs,
    load: Load,
    tag: &str,
) -> Result<Outcome, String> {
    let schema = format!("bench_{}_{}", std::process::id(), tag.replace('-', "_"));
    let url = rt.block_on(pg::create(base, &schema))?;
    let kind = Kind::AgentHost { store: url };
    let run = || -> Result<Outcome, String> {
        let a = Host::start(&kind, progs, &format!("{tag}-a.log"))?;
        let b = Host::start(&kind, progs, &format!("{tag}-b.log"))?;
        let (cpu0, db0) = (a.cpu() + b.cpu(), pg::server_cpu());
        let t0 = std::time::Instant::now();
        let results = rt.block_on(async {
            let mut all = Vec::new();
            for _ in 0..load.reps {
                all.extend(drive_two(a.addr, b.addr, load, tag).await);
            }
            all
        });
        let mut o = Outcome {
            cpu: (a.cpu() + b.cpu()).saturating_sub(cpu0),
            wall: t0.elapsed(),
            expected: (load.reps * load.streams * load.events) as u64,
            peak_rss_kib: a.status_kib("VmHWM:").max(b.status_kib("VmHWM:")),
            card_after: a.card_after,
            idle_rss_kib: a.idle_rss_kib,
            ..Default::default()
        };
        if let (Some(d0), Some(d1)) = (db0, pg::server_cpu()) {
            o.db_cpu = Some(d1.saturating_sub(d0));
        }
        o.add(results);
        Ok(o)
    };
    let o = run();
    rt.block_on(pg::drop(base, &schema));
    o
}

/// Starts a fresh host, runs the load, samples the host's RSS, stops it.
fn run_load(
    rt: &tokio::runtime::Runtime,
    kind: &Kind,
    progs: &Programs,
    load: Load,
    tag: &str,
    detached: bool,
) -> Result<Outcome, String> {
    if let Kind::AgentHostPostgresTwo { base } = kind {
        return run_two(rt, base, progs, load, tag);
    }
    if let Kind::AgentHostPostgres { base } = kind {
        let schema = format!("bench_{}_{}", std::process::id(), tag.replace('-', "_"));
        let url = rt.block_on(pg::create(base, &schema))?;
        let store = Kind::AgentHost { store: url };
        let db0 = pg::server_cpu();
        let mut o = run_load(rt, &store, progs, load, tag, detached);
        if let (Ok(o), Some(d0), Some(d1)) = (&mut o, db0, pg::server_cpu()) {
            o.db_cpu = Some(d1.saturating_sub(d0));
        }
        rt.block_on(pg::drop(base, &schema));
        return o;
    }
    let host = Host::start(kind, progs, &format!("{tag}.log"))?;
    let cpu0 = host.cpu();
    let t0 = std::time::Instant::now();
    let mut peak = 0u64;
    let reps = if matches!(kind, Kind::Baseline) {
        1
    } else {
        load.reps
    };
    let results = rt.block_on(async {
        let work = async {
            let mut all = Vec::new();
            for _ in 0..reps {
                if detached {
                    all.extend(drive_detached(host.addr, load, tag).await);
                } else {
                    all.extend(drive(&[host.addr], load, tag).await);
                }
            }
            all
        };
        tokio::pin!(work);
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                r = &mut work => break r,
                _ = tick.tick() => peak = peak.max(host.status_kib("VmRSS:")),
            }
        }
    });
    let wall = t0.elapsed();
    let cpu = host.cpu().saturating_sub(cpu0);
    let mut o = Outcome {
        cpu,
        wall,
        expected: (reps * load.streams * load.events) as u64,
        peak_rss_kib: peak.max(host.status_kib("VmHWM:")),
        card_after: host.card_after,
        idle_rss_kib: host.idle_rss_kib,
        ..Default::default()
    };
    o.add(results);
    drop(host);
    Ok(o)
}

/// The stores a scenario runs agent-host on, beside memory.
#[derive(Debug, Clone, Copy)]
enum Stores {
    Memory,
    Sqlite,
    /// SQLite and PostgreSQL (when a database answers).
    All,
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let need = |name: &str| -> PathBuf {
        match arg(&args, name) {
            Some(v) => std::fs::canonicalize(&v).unwrap_or_else(|e| {
                eprintln!("loadgen: {name} {v}: {e}");
                std::process::exit(2)
            }),
            None => {
                eprintln!(
                    "usage: loadgen --agent-host BIN --baseline SERVER.mjs --cli BIN --floor BIN --work DIR [--scale F] [--only NAME] [--hosts LIST] [--sandbox auto|off] [--postgres URL]"
                );
                std::process::exit(2)
            }
        }
    };
    let progs = Programs {
        agent_host: need("--agent-host"),
        baseline: need("--baseline"),
        cli: need("--cli"),
        floor: need("--floor"),
        work: need("--work"),
        sandbox: arg(&args, "--sandbox"),
    };
    let scale: f64 = arg(&args, "--scale")
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let only = arg(&args, "--only");
    // Which hosts to run (comma-separated: agent-host, baseline, floor, agent-host-sqlite,
    // agent-host-postgres, agent-host-postgres-2, agent-host-detached); all by default. A row
    // needs agent-host to be printed in the table (a host left out shows as –); the other
    // runs still print their summaries on stderr.
    let hosts = arg(&args, "--hosts");
    let wanted = |who: &str| {
        hosts
            .as_deref()
            .is_none_or(|h| h.split(',').any(|x| x.trim() == who))
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loadgen: tokio: {e}");
            std::process::exit(1)
        }
    };
    let sc = |n: usize| ((n as f64 * scale).round() as usize).max(1);
    let memory = Kind::AgentHost {
        store: "memory".into(),
    };
    let sqlite = Kind::AgentHost {
        store: format!("sqlite:{}", progs.work.join("bench.db").display()),
    };
    // The PostgreSQL store (one host), when a database answers at --postgres.
    let postgres =
        arg(&args, "--postgres").and_then(|base| match rt.block_on(pg::reachable(&base)) {
            Ok(()) => Some(Kind::AgentHostPostgres { base }),
            Err(e) => {
                eprintln!("loadgen: PostgreSQL not reachable, its rows skipped: {e}");
                None
            }
        });
    let postgres_two = postgres.as_ref().map(|k| match k {
        Kind::AgentHostPostgres { base } => Kind::AgentHostPostgresTwo { base: base.clone() },
        other => other.clone(),
    });
    use Stores::{All, Sqlite};
    let scenarios = scenarios(sc);
    let mut rows: Vec<Row> = Vec::new();
    for (name, measure, load, stores) in scenarios {
        if only
            .as_deref()
            .is_some_and(|o| !o.split(',').any(|x| x.trim() == name))
        {
            continue;
        }
        let mut row = Row::new(measure, load);
        let mut kinds = vec![
            ("agent-host", &memory),
            ("baseline", &Kind::Baseline),
            ("floor", &Kind::Floor),
        ];
        if matches!(stores, Sqlite | All) {
            kinds.push(("agent-host-sqlite", &sqlite));
        }
        if let (All, Some(pg)) = (stores, &postgres) {
            kinds.push(("agent-host-postgres", pg));
        }
        if let (All, Some(pg)) = (stores, &postgres_two) {
            kinds.push(("agent-host-postgres-2", pg));
        }
        // The live tasks once more with no stream open: what the streams cost apart.
        if matches!(measure, Measure::Live) {
            kinds.push(("agent-host-detached", &memory));
        }
        let kinds: Vec<_> = kinds.into_iter().filter(|(who, _)| wanted(who)).collect();
        run_row(&rt, &progs, name, &mut row, &kinds);
        rows.push(row);
    }
    println!("{}", report::table(&rows));
    let stores = report::stores_table(&rows);
    if !stores.is_empty() {
        println!("\n{stores}");
    }
    if let Some(Kind::AgentHostPostgres { base }) = &postgres {
        if only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|x| x.trim() == "hosts"))
        {
            println!("\n{}", hosts_table(&rt, base, &progs, sc));
        }
    }
}
/// The scenarios: name, what is measured, the load, and the stores beside memory it also
/// runs on. `sc` scales a count by `--scale`.
#[allow(
    clippy::too_many_lines,
    reason = "one entry per scenario: a table, not steps"
)]
fn scenarios(sc: impl Fn(usize) -> usize) -> Vec<(&'static str, Measure, Load, Stores)> {
    use Stores::{All, Memory, Sqlite};
    let ms = Duration::from_millis;
    vec![
        (
            "cpu-50x100",
            Measure::CpuPerEvent,
            Load {
                streams: sc(50),
                events: 100,
                pause_us: 0,
                stagger: ms(1),
                limit: ms(120_000),
                reps: 10,
            },
            All,
        ),
        (
            "cpu-10x1000",
            Measure::CpuPerEvent,
            Load {
                streams: sc(10),
                events: 1000,
                pause_us: 0,
                stagger: ms(1),
                limit: ms(180_000),
                reps: 10,
            },
            All,
        ),
        (
            "cpu-50x1000",
            Measure::CpuPerEvent,
            Load {
                streams: sc(50),
                events: 1000,
                pause_us: 0,
                stagger: ms(1),
                limit: ms(300_000),
                reps: 2,
            },
            All,
        ),
        (
            "cpu-1x10000",
            Measure::CpuPerEvent,
            Load {
                streams: 1,
                events: sc(10_000),
                pause_us: 0,
                stagger: ms(0),
                limit: ms(300_000),
                reps: 4,
            },
            All,
        ),
        (
            "cpu-1x2000",
            Measure::CpuPerEvent,
            Load {
                streams: 1,
                events: sc(2000),
                pause_us: 0,
                stagger: ms(0),
                limit: ms(180_000),
                reps: 20,
            },
            Sqlite,
        ),
        (
            "latency-1",
            Measure::Latency,
            Load {
                streams: 1,
                events: sc(400),
                pause_us: 5000,
                stagger: ms(0),
                limit: ms(60_000),
                reps: 1,
            },
            All,
        ),
        (
            "latency-100",
            Measure::Latency,
            Load {
                streams: 100,
                events: sc(100),
                pause_us: 5000,
                stagger: ms(1),
                limit: ms(120_000),
                reps: 1,
            },
            All,
        ),
        (
            "latency-500",
            Measure::Latency,
            Load {
                streams: 500,
                events: sc(20),
                pause_us: 50_000,
                stagger: ms(1),
                limit: ms(120_000),
                reps: 1,
            },
            Memory,
        ),
        (
            "start",
            Measure::Start,
            Load {
                streams: sc(30),
                events: 1,
                pause_us: 0,
                stagger: ms(100),
                limit: ms(60_000),
                reps: 1,
            },
            // Idle RSS with the default store too (it opens the database at start).
            Sqlite,
        ),
        (
            "live-1000",
            Measure::Live,
            Load {
                streams: 1000,
                events: 20,
                pause_us: 500_000,
                stagger: ms(1),
                limit: ms(120_000),
                reps: 1,
            },
            Sqlite,
        ),
    ]
}

/// Runs the load of `row` on each of `kinds` in turn, a fresh host each, into `row`.
fn run_row(
    rt: &tokio::runtime::Runtime,
    progs: &Programs,
    name: &str,
    row: &mut Row,
    kinds: &[(&str, &Kind)],
) {
    let load = row.load();
    for &(who, kind) in kinds {
        eprintln!(
            "loadgen: {name} on {who}: {} stream(s) x {} events, {} µs apart",
            load.streams, load.events, load.pause_us
        );
        let tag = format!("{name}-{who}");
        let detached = who == "agent-host-detached";
        match run_load(rt, kind, progs, load, &tag, detached) {
            Ok(o) => {
                eprintln!("loadgen:   {}", report::summary(&o));
                if !o.errors.is_empty() {
                    eprintln!(
                        "loadgen:   {} short stream(s): {}",
                        o.errors.len(),
                        report::errors(&o)
                    );
                }
                row.set(who, o);
            }
            Err(e) => {
                eprintln!("loadgen:   {who} failed: {e}");
                std::process::exit(1)
            }
        }
    }
}

/// `--only hosts`: 1, 2 and 4 hosts on one database, 40 streams of 5,000 events spread over
/// them.
fn hosts_table(
    rt: &tokio::runtime::Runtime,
    base: &str,
    progs: &Programs,
    sc: impl Fn(usize) -> usize,
) -> String {
    let load = Load {
        streams: sc(40),
        events: 5000,
        pause_us: 0,
        stagger: Duration::from_millis(1),
        limit: Duration::from_secs(300),
        reps: 1,
    };
    let mut runs = Vec::new();
    for n in [1, 2, 4] {
        eprintln!(
            "loadgen: hosts on {n} host(s): {} stream(s) x {} events spread over them",
            load.streams, load.events
        );
        match spread::run(rt, base, progs, load, n) {
            Ok(s) => runs.push(s),
            Err(e) => {
                eprintln!("loadgen:   {n} host(s) failed: {e}");
                std::process::exit(1)
            }
        }
    }
    spread::table(&runs)
}
