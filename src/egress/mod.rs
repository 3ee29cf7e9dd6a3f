//! The way out of a task's sandbox in the `proxy` network mode: an HTTP proxy per task that
//! reaches only the hosts of the task's allow-list ([`Rules`]).
//!
//! The task runs in a network namespace of its own that has only loopback. The host listens
//! for each task on a Unix socket of its own ([`TaskProxy`]), in a folder the sandbox hides;
//! bubblewrap binds that one socket into the sandbox at [`SANDBOX_SOCKET`], so whatever
//! speaks on it is that task. Inside, a relay ([`relay`], the host's own executable in a
//! hidden mode) listens on the namespace's `127.0.0.1:3128` and carries each connection to
//! the socket; the program gets `HTTPS_PROXY` and `HTTP_PROXY` pointing there. For each
//! loopback address the list names with a port (the tests' model server), the relay also
//! listens on that address inside the namespace and tunnels it through the proxy, so a
//! program that never uses a proxy for loopback still reaches it.
//!
//! The proxy resolves names itself and checks every address ([`allow::special`]); each
//! refusal is logged (task, host, port, why), counted (`agent_host_egress_refused_total`)
//! and kept for the task's metadata (`egressRefused`).

mod allow;
mod proxy;
pub mod relay;

pub use allow::{special, Rules, RulesError};

use std::path::{Path, PathBuf};
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

/// The proxy of one running task; stops (and removes its socket) when dropped.
pub struct TaskProxy {
    socket: PathBuf,
    log: Arc<TaskLog>,
    accept: tokio::task::JoinHandle<()>,
}

impl TaskProxy {
    /// Listens for task `task_id` under `rules`. Must be called in a tokio runtime.
    pub fn start(rules: Arc<Rules>, task_id: &str) -> std::io::Result<TaskProxy> {
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
        let log = Arc::new(TaskLog {
            task_id: task_id.to_string(),
            ..TaskLog::default()
        });
        let ctx = Arc::new(proxy::Ctx {
            rules,
            log: log.clone(),
        });
        let accept = tokio::spawn(async move {
            // Connections end with the task: dropping the set aborts them.
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    a = listener.accept() => match a {
                        Ok((io, _)) => {
                            conns.spawn(proxy::serve(io, ctx.clone()));
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "egress proxy cannot accept");
                            break;
                        }
                    },
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Ok(TaskProxy {
            socket,
            log,
            accept,
        })
    }

    /// The socket on the host's side.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The task's refusals so far.
    pub fn log(&self) -> &TaskLog {
        &self.log
    }
}

impl Drop for TaskProxy {
    fn drop(&mut self) {
        self.accept.abort();
        let _ = std::fs::remove_file(&self.socket);
        // Only an empty folder is removed.
        if let Some(dir) = self.socket.parent() {
            let _ = std::fs::remove_dir(dir);
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
