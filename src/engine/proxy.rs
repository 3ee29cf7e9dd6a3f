//! A turn's way out in the `proxy` network mode: starts the task's egress proxy
//! ([`crate::egress`]) and points the program's sandbox and environment at it. Here, where
//! the runner's spawn spec and the proxy meet, so that neither of the two knows the other's
//! workings.

use crate::egress::{self, TaskProxy};
use crate::runner::sandbox::{net, Mode};
use crate::runner::SpawnSpec;

/// Starts the proxy of task `task_id` when its sandbox asks for one, and points the
/// program at it; `None` when the task runs without (another network mode, no sandbox, or
/// the proxy could not start: the task then has no network at all).
pub(crate) fn attach(spec: &mut SpawnSpec, task_id: &str) -> Option<TaskProxy> {
    let policy = spec.sandbox.as_mut()?;
    if policy.mode == Mode::Off {
        return None;
    }
    let relay = net::relay_executable()?;
    // bubblewrap binds the relay in as the sandbox user, who must reach the file.
    if let Some(u) = policy.run_as.as_ref().filter(|u| !u.can_reach(&relay)) {
        static SAID: std::sync::OnceLock<()> = std::sync::OnceLock::new();
        SAID.get_or_init(|| {
            tracing::error!(user = %u.name, executable = %relay.display(),
                "the sandbox user cannot reach agent-host's executable, which runs the egress relay: tasks get no network (install agent-host where the user can read it)");
        });
        return None;
    }
    let net = policy.egress.as_mut()?;
    let proxy = match egress::TaskProxy::start(net.rules.clone(), task_id) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the task's egress proxy: the task has no network");
            return None;
        }
    };
    net.mount = Some(net::Mount {
        socket: proxy.socket().to_path_buf(),
        relay,
        forward: net.rules.loopback_forwards(),
    });
    // The other tasks' sockets stay out of sight (the own one is bound in by its path).
    if let Some(dir) = proxy.socket().parent().filter(|d| !d.starts_with("/tmp")) {
        policy.hide.push(dir.to_path_buf());
    }
    for (k, v) in egress::proxy_env() {
        spec.env.retain(|(ek, _)| *ek != k);
        spec.env.push((k, v));
    }
    Some(proxy)
}
