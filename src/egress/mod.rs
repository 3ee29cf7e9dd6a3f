//! The way out of a task's sandbox in the `proxy` network mode: an HTTP proxy per task that
//! reaches only the hosts of the task's allow-list ([`Rules`]).
//!
//! The task runs in a network namespace of its own that has only loopback, where the proxy
//! listens on `127.0.0.1:3128` ([`PROXY_PORT`]); the program gets `HTTPS_PROXY` and
//! `HTTP_PROXY` pointing there. For each loopback address the list names with a port (the
//! tests' model server), a listener on that address inside the namespace carries the
//! connection through the proxy's checks, so a program that never uses a proxy for
//! loopback still reaches it. Two ways to get there ([`Door`]):
//!
//! - a host that may make namespaces (root) makes the task's itself, with the listeners in
//!   it, ahead of need ([`netns`]); the task's first process joins it and the host accepts
//!   the program's connections directly;
//! - otherwise bubblewrap makes the namespace, the host listens for each task on a Unix
//!   socket of its own ([`TaskProxy`]) in a folder the sandbox hides, bubblewrap binds that
//!   one socket into the sandbox at [`SANDBOX_SOCKET`], and a relay ([`relay`], the host's
//!   own executable in a hidden mode) listens on the namespace's loopback and carries each
//!   connection to the socket.
//!
//! The proxy resolves names itself and checks every address ([`allow::special`]); each
//! refusal is logged (task, host, port, why), counted (`agent_host_egress_refused_total`)
//! and kept for the task's metadata (`egressRefused`).

mod allow;
pub mod netns;
mod proxy;
pub mod relay;

pub use allow::{special, Rules, RulesError};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

/// Where the task's proxy socket is inside the sandbox.
pub const SANDBOX_SOCKET: &str = "/run/agent-host/egress.sock";
/// Where the host's executable (the relay) is inside the sandbox.
pub const SANDBOX_RELAY: &str = "/run/agent-host/agent-host";
/// The port of the proxy on the namespace's loopback.
pub const PROXY_PORT: u16 = 3128;
/// Refusals kept per task (more are counted, not listed).
const KEEP: usize = 20;

/// One refused connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub host: String,
    pub port: u16,
    pub reason: String,
}

/// The refusals of one task.
#[derive(Debug, Default)]
pub struct TaskLog {
    task_id: String,
    list: Mutex<(Vec<(Refusal, u64)>, u64)>,
    changed: AtomicBool,
}

impl TaskLog {
    fn refused(&self, r: Refusal) {
        tracing::warn!(task_id = %self.task_id, host = %r.host, port = r.port, reason = %r.reason,
            "egress refused");
        metrics::counter!("agent_host_egress_refused_total").increment(1);
        if let Ok(mut g) = self.list.lock() {
            let (list, total) = &mut *g;
            *total += 1;
            if let Some((_, n)) = list.iter_mut().find(|(x, _)| *x == r) {
                *n += 1;
            } else if list.len() < KEEP {
                list.push((r, 1));
            }
        }
        self.changed.store(true, Ordering::Release);
    }

    /// The refusals as task metadata (`[{host, port, reason, count}]`), when there are new
    /// ones since the last call.
    pub fn take_changed(&self) -> Option<Value> {
        if !self.changed.swap(false, Ordering::AcqRel) {
            return None;
        }
        let g = self.list.lock().ok()?;
        let list: Vec<Value> = g
            .0
            .iter()
            .map(|(r, n)| json!({"host": r.host, "port": r.port, "reason": r.reason, "count": n}))
            .collect();
        Some(Value::Array(list))
    }
}

/// The folder of the tasks' sockets: one per host process, `0711` so that a sandbox user's
/// bubblewrap can bind its socket by its (unguessable) name but list none. Removed when its
/// last socket goes ([`TaskProxy`]'s drop), made again for the next.
fn socket_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let dir = std::env::temp_dir().join(format!("agent-host-egress-{}", std::process::id()));
    match std::fs::DirBuilder::new().mode(0o711).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    // A folder someone else made under that name (or a link) is not used.
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(std::io::Error::other(format!(
            "{} is not a folder of this user",
            dir.display()
        )));
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711))?;
    Ok(dir)
}

/// Where the program reaches its proxy from inside the sandbox.
#[derive(Debug)]
pub enum Door {
    /// A Unix socket of the host's, bound into the sandbox for a relay to carry
    /// connections to (a host that cannot make namespaces itself).
    Socket(PathBuf),
    /// A network namespace the host made, whose listeners it accepts on itself
    /// ([`netns`]); the task's first process joins it by this path.
    Namespace(PathBuf),
}

/// The proxy of one running task; stops (and removes its socket or namespace) when dropped.
pub struct TaskProxy {
    door: Door,
    log: Arc<TaskLog>,
    accept: tokio::task::JoinHandle<()>,
    /// Keeps the task's namespace (when the host made it) until the task ends.
    _netns: Option<netns::Namespace>,
}

impl TaskProxy {
    /// Listens for task `task_id` under `rules`, in a network namespace the host makes when
    /// `own_namespace` and it can ([`netns::take`]), else on a Unix socket for the sandbox's
    /// relay. Must be called in a tokio runtime.
    pub fn start(
        rules: Arc<Rules>,
        task_id: &str,
        own_namespace: bool,
    ) -> std::io::Result<TaskProxy> {
        let log = Arc::new(TaskLog {
            task_id: task_id.to_string(),
            ..TaskLog::default()
        });
        let ctx = Arc::new(proxy::Ctx {
            rules: rules.clone(),
            log: log.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(proxy::MAX_CONNECTIONS)),
        });
        let made = own_namespace
            .then(|| netns::take(PROXY_PORT, &rules.loopback_forwards()))
            .flatten();
        if let Some(mut ns) = made {
            let listeners = std::mem::take(&mut ns.listeners);
            let accept = tokio::spawn(accept_tcp(listeners, ctx));
            return Ok(TaskProxy {
                door: Door::Namespace(ns.path()),
                log,
                accept,
                _netns: Some(ns),
            });
        }
        let (socket, listener) = bind_socket()?;
        let accept = tokio::spawn(accept_unix(listener, ctx));
        Ok(TaskProxy {
            door: Door::Socket(socket),
            log,
            accept,
            _netns: None,
        })
    }

    /// Where the program reaches the proxy.
    pub fn door(&self) -> &Door {
        &self.door
    }

    /// The task's refusals so far.
    pub fn log(&self) -> &TaskLog {
        &self.log
    }
}

/// A Unix socket of its own for one task, in [`socket_dir`], that anyone may connect to
/// (the sandbox user too): its path is unguessable and the folder cannot be listed.
fn bind_socket() -> std::io::Result<(PathBuf, tokio::net::UnixListener)> {
    use std::os::unix::fs::PermissionsExt;
    let name = format!("{}.sock", uuid::Uuid::new_v4().simple());
    let mut socket = socket_dir()?.join(&name);
    let listener = match tokio::net::UnixListener::bind(&socket) {
        // The folder went with another task's last socket just now.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            socket = socket_dir()?.join(&name);
            tokio::net::UnixListener::bind(&socket)?
        }
        other => other?,
    };
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))?;
    Ok((socket, listener))
}

/// The relay's connections, on the task's socket. Connections end with the task: dropping
/// the set aborts them.
async fn accept_unix(listener: tokio::net::UnixListener, ctx: Arc<proxy::Ctx>) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            a = listener.accept() => match a {
                Ok((io, _)) => {
                    if let Some(slot) = ctx.slot() {
                        conns.spawn(proxy::serve(io, ctx.clone(), slot));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "egress proxy cannot accept");
                    break;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// The program's connections, on the listeners in its namespace: to the proxy's port as
/// HTTP proxy requests, to a forwarded address carried to that address.
async fn accept_tcp(
    listeners: Vec<(std::net::TcpListener, Option<std::net::SocketAddr>)>,
    ctx: Arc<proxy::Ctx>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let mut accepts = tokio::task::JoinSet::new();
    for (l, forward) in listeners {
        let l = match tokio::net::TcpListener::from_std(l) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "egress proxy cannot accept");
                continue;
            }
        };
        let tx = tx.clone();
        accepts.spawn(async move {
            while let Ok((io, _)) = l.accept().await {
                let _ = io.set_nodelay(true);
                if tx.send((io, forward)).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            c = rx.recv() => match c {
                Some((io, forward)) => {
                    let Some(slot) = ctx.slot() else { continue };
                    match forward {
                        None => conns.spawn(proxy::serve(io, ctx.clone(), slot)),
                        Some(to) => conns.spawn(proxy::carry(io, to, ctx.clone(), slot)),
                    };
                }
                None => break,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

impl Drop for TaskProxy {
    fn drop(&mut self) {
        self.accept.abort();
        if let Door::Socket(socket) = &self.door {
            let _ = std::fs::remove_file(socket);
            // Only an empty folder is removed.
            if let Some(dir) = socket.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }
}

/// The variables that point a program at the relay: both spellings, since programs read
/// one or the other; `NO_PROXY` names loopback only (reached through the relay's own
/// listeners, or not at all).
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut env = Vec::new();
    for k in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        env.push((k.to_string(), url.clone()));
    }
    for k in ["NO_PROXY", "no_proxy"] {
        env.push((k.to_string(), "localhost,127.0.0.1,::1".to_string()));
    }
    env
}
