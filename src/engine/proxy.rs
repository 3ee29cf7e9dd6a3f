//! A turn's way out in the `proxy` network mode: starts the task's egress proxy
//! ([`crate::egress`]) and points the program's sandbox and environment at it. Here, where
//! the runner's spawn spec and the proxy meet, so that neither of the two knows the other's
//! workings.

use crate::egress::{self, TaskProxy};
use crate::runner::sandbox::{net, Capabilities, Mode, Piece, SandboxPolicy};
use crate::runner::SpawnSpec;

/// Starts the proxy of task `task_id` when its sandbox asks for one, and points the
/// program at it; `None` when the task runs without (another network mode, no sandbox, or
/// the proxy could not start: the task then has no network at all).
pub(crate) fn attach(spec: &mut SpawnSpec, task_id: &str) -> Option<TaskProxy> {
    let policy = spec.sandbox.as_mut()?;
    if policy.mode == Mode::Off {
        return None;
    }
    let own_namespace = !Capabilities::get().disabled.contains(&Piece::Netns);
    let net = policy.egress.as_mut()?;
    let proxy = match egress::TaskProxy::start(net.rules.clone(), task_id, own_namespace) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the task's egress proxy: the task has no network");
            return None;
        }
    };
    match proxy.door() {
        egress::Door::Namespace(path) => {
            net.mount = Some(net::Mount::Joined {
                netns: path.clone(),
            });
        }
        egress::Door::Socket(socket) => {
            let relay = relay_for(policy)?;
            let forward = policy.egress.as_ref()?.rules.loopback_forwards();
            // The other tasks' sockets stay out of sight (the own one is bound in by its path).
            if let Some(dir) = socket.parent().filter(|d| !d.starts_with("/tmp")) {
                policy.hide.push(dir.to_path_buf());
            }
            policy.egress.as_mut()?.mount = Some(net::Mount::Relay {
                socket: socket.clone(),
                relay,
                forward,
            });
        }
    }
    for (k, v) in egress::proxy_env() {
        spec.env.retain(|(ek, _)| *ek != k);
        spec.env.push((k, v));
    }
    Some(proxy)
}

/// The host's executable, to run the relay in the sandbox of `policy`: None (logged once)
/// when there is none or the sandbox user cannot reach it.
fn relay_for(policy: &SandboxPolicy) -> Option<std::path::PathBuf> {
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
    Some(relay)
}
