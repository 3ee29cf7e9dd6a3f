//! Starting, measuring and stopping the hosts under test. Each host runs in its own process
//! group on 127.0.0.1 and is stopped (SIGTERM to the group, then SIGKILL) when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which host, and how it is started.
#[derive(Debug, Clone)]
pub enum Kind {
    /// agent-host with the `jsonl` adapter; `store` is `memory`, `sqlite:PATH` or a
    /// `postgres://` URL.
    AgentHost {
        store: String,
    },
    /// agent-host on the PostgreSQL store at `base` (a URL), in a fresh schema per run.
    AgentHostPostgres {
        base: String,
    },
    /// Two agent-hosts sharing the PostgreSQL store at `base`, in a fresh schema per run: each
    /// task is sent to the first and streamed from the second.
    AgentHostPostgresTwo {
        base: String,
    },
    Baseline,
    /// The floor: `floor-relay`, a minimal relay of the CLI's lines (std threads, no store).
    Floor,
}

/// Paths of the programs (absolute).
#[derive(Debug, Clone)]
pub struct Programs {
    pub agent_host: PathBuf,
    pub baseline: PathBuf,
    pub cli: PathBuf,
    /// The floor host's binary (`floor-relay`).
    pub floor: PathBuf,
    pub work: PathBuf,
    /// agent-host's `--sandbox` mode; None: its default (`auto`).
    pub sandbox: Option<String>,
}

pub struct Host {
    child: Child,
    pub addr: SocketAddr,
    /// Spawn → the agent card answered 200.
    pub card_after: Duration,
    /// RSS 500 ms after the card was served, KiB.
    pub idle_rss_kib: u64,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One GET of the agent card; true on a 200 with a body.
fn card_served(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!(
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out.starts_with(b"HTTP/1.1 200") && out.windows(6).any(|w| w == b"\"name\"")
}

impl Host {
    pub fn start(kind: &Kind, p: &Programs, log: &str) -> Result<Host, String> {
        let port = free_port().map_err(|e| format!("no free port: {e}"))?;
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let log_file = std::fs::File::create(p.work.join(log)).map_err(|e| e.to_string())?;
        let mut cmd = match kind {
            Kind::AgentHost { store } => {
                let mut c = Command::new(&p.agent_host);
                c.args(["serve", "--adapter", "jsonl", "--bind", "127.0.0.1"])
                    .args(["--port", &port.to_string(), "--store", store])
                    .arg("--binary")
                    .arg(&p.cli)
                    .arg("--repo-path")
                    .arg(&p.work)
                    // The baseline has no limits; lift agent-host's (16 running, 256
                    // queued, 600 requests a minute) so both take the same load.
                    .args(["--max-running-tasks", "5000", "--max-queued-tasks", "5000"])
                    .args(["--rate-limit", "0"])
                    .args(["--max-connections", "5000", "--max-streams", "5000"])
                    .args(["--max-connections-per-address", "5000"]);
                if let Some(mode) = &p.sandbox {
                    c.args(["--sandbox", mode]);
                }
                c
            }
            Kind::AgentHostPostgres { .. } | Kind::AgentHostPostgresTwo { .. } => {
                return Err("start it as Kind::AgentHost with its schema's URL".into())
            }
            Kind::Baseline => {
                let mut c = Command::new("node");
                c.arg(&p.baseline)
                    .env("PORT", port.to_string())
                    .env("BENCH_CLI", &p.cli)
                    .env("BENCH_CWD", &p.work);
                c
            }
            Kind::Floor => {
                let mut c = Command::new(&p.floor);
                c.arg(port.to_string()).arg(&p.cli).arg(&p.work);
                c
            }
        };
        for var in [
            "AGENT_HOST_CONFIG",
            "AGENT_ARGS",
            "AGENT_PROMPT_VIA",
            "AGENT_HOST_ADAPTERS_DIR",
            "AGENT_HOST_PUBLIC_URL",
            "AGENT_HOST_STORE",
            "RUST_LOG",
        ] {
            cmd.env_remove(var);
        }
        cmd.current_dir(&p.work)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
            .stderr(log_file)
            .process_group(0);
        let t0 = Instant::now();
        let child = cmd.spawn().map_err(|e| format!("spawn {kind:?}: {e}"))?;
        let mut host = Host {
            child,
            addr,
            card_after: Duration::ZERO,
            idle_rss_kib: 0,
        };
        loop {
            if card_served(addr) {
                host.card_after = t0.elapsed();
                break;
            }
            if let Ok(Some(st)) = host.child.try_wait() {
                return Err(format!("{kind:?} exited at start ({st}); see {log}"));
            }
            if t0.elapsed() > Duration::from_secs(20) {
                return Err(format!("{kind:?} served no card within 20 s; see {log}"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(500));
        host.idle_rss_kib = host.status_kib("VmRSS:");
        Ok(host)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU time the host process has used (user + system, its threads; not its children).
    pub fn cpu(&self) -> Duration {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // Fields after the command name (which may hold spaces) in parentheses.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|&i| f.get(i).and_then(|v| v.parse::<u64>().ok()))
            .sum();
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Duration::from_nanos(ticks * 1_000_000_000 / hz)
    }

    /// A `/proc/<pid>/status` field in KiB (`VmRSS:`, `VmHWM:`).
    pub fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let pg = -(self.pid() as i32);
        // SAFETY: kill has no memory preconditions; the group is the one we created.
        unsafe { libc::kill(pg, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe { libc::kill(pg, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}
