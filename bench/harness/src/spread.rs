//! Several hosts on one PostgreSQL database, the load spread over them: how many events per
//! second 1, 2 and 4 hosts deliver together, and what each event costs the hosts and the
//! database server (`--only hosts`).
//!
//! Every host runs in its own process on 127.0.0.1, all in one fresh schema; stream `i` is
//! sent to host `i mod n` and streamed from it (a task runs where it is sent). On a machine
//! where the database, the hosts and the CLIs share the same cores, the figure stops growing
//! where the machine's CPU is spent: the table says how busy the machine was.

use std::fmt::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::host::{Host, Kind, Programs};
use crate::{pg, Load};

/// What one run with `hosts` hosts did.
pub struct Spread {
    pub hosts: usize,
    pub wall: Duration,
    pub events: u64,
    pub expected: u64,
    pub host_cpu: Duration,
    pub db_cpu: Option<Duration>,
    /// The whole machine's busy CPU meanwhile (every process, the CLIs and the load
    /// generator too).
    pub machine_cpu: Option<Duration>,
    pub errors: usize,
}

/// Busy CPU time of the whole machine so far (`/proc/stat`: all but idle and iowait).
fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    let f: Vec<u64> = cpu
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
    let busy: u64 = f.iter().take(8).sum::<u64>() - f.get(3)? - f.get(4)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Duration::from_nanos(busy * 1_000_000_000 / hz))
}

/// Runs `load` over `hosts` fresh hosts on a fresh schema of the database at `base`.
pub fn run(
    rt: &tokio::runtime::Runtime,
    base: &str,
    progs: &Programs,
    load: Load,
    hosts: usize,
) -> Result<Spread, String> {
    let tag = format!("hosts-{hosts}");
    let schema = format!("bench_{}_{}", std::process::id(), tag.replace('-', "_"));
    let url = rt.block_on(pg::create(base, &schema))?;
    let kind = Kind::AgentHost { store: url };
    let measured = (|| {
        let started: Vec<Host> = (0..hosts)
            .map(|i| Host::start(&kind, progs, &format!("{tag}-{i}.log")))
            .collect::<Result<_, _>>()?;
        let addrs: Vec<SocketAddr> = started.iter().map(|h| h.addr).collect();
        let cpu = || started.iter().map(Host::cpu).sum::<Duration>();
        let (cpu0, db0, all0) = (cpu(), pg::server_cpu(), machine_busy());
        let t0 = Instant::now();
        let results = rt.block_on(async {
            let mut all = Vec::new();
            for _ in 0..load.reps {
                all.extend(crate::drive(&addrs, load, &tag).await);
            }
            all
        });
        let wall = t0.elapsed();
        let db_cpu = match (db0, pg::server_cpu()) {
            (Some(d0), Some(d1)) => Some(d1.saturating_sub(d0)),
            _ => None,
        };
        let machine_cpu = match (all0, machine_busy()) {
            (Some(a0), Some(a1)) => Some(a1.saturating_sub(a0)),
            _ => None,
        };
        Ok(Spread {
            hosts,
            machine_cpu,
            wall,
            events: results.iter().map(|r| r.events).sum(),
            expected: (load.reps * load.streams * load.events) as u64,
            host_cpu: cpu().saturating_sub(cpu0),
            db_cpu,
            errors: results.iter().filter(|r| r.error.is_some()).count(),
        })
    })();
    rt.block_on(pg::drop(base, &schema));
    measured
}

/// Events delivered per second.
fn rate(s: &Spread) -> f64 {
    s.events as f64 / s.wall.as_secs_f64().max(1e-9)
}

/// µs of `d` per delivered event.
fn per_event(d: Duration, s: &Spread) -> f64 {
    d.as_secs_f64() * 1e6 / s.events.max(1) as f64
}

/// The table of the runs: events per second against one host, CPU per event, and the share
/// of the machine's cores the hosts and the database kept busy.
pub fn table(runs: &[Spread]) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let one = runs.first().map(rate).unwrap_or(f64::NAN);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| hosts | events / s | ÷ one host | host CPU / event | database CPU / event | cores busy: hosts + database / whole machine (of {cores:.0}) | lost |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
    for s in runs {
        let db = s
            .db_cpu
            .map_or("–".to_string(), |d| format!("{:.1} µs", per_event(d, s)));
        let wall = s.wall.as_secs_f64().max(1e-9);
        let busy = (s.host_cpu + s.db_cpu.unwrap_or_default()).as_secs_f64() / wall;
        let machine = s.machine_cpu.map_or("–".to_string(), |d| {
            format!("{:.2}", d.as_secs_f64() / wall)
        });
        let _ = writeln!(
            out,
            "| {} | {:.0} | {:.2}× | {:.1} µs | {db} | {busy:.2} / {machine} | {}{} |",
            s.hosts,
            rate(s),
            rate(s) / one,
            per_event(s.host_cpu, s),
            s.expected.saturating_sub(s.events),
            if s.errors > 0 {
                format!(" ({} short streams)", s.errors)
            } else {
                String::new()
            }
        );
    }
    out
}
