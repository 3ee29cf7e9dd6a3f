//! The network and the sockets a sandboxed task sees.
//!
//! - `open`: the host's network (its abstract Unix socket namespace too, which Landlock
//!   keeps the task from where the kernel can scope it: [`super::landlock`]);
//! - `none`: a network namespace of its own with loopback only;
//! - `proxy`: the same namespace, and one way out, the host's egress proxy for the task
//!   ([`crate::egress`]): listening on the namespace's loopback itself when the host made
//!   the namespace (root hosts, [`Mount::Joined`]), else reached through a relay there
//!   ([`Mount::Relay`]).
//!
//! In every sandboxed mode the host's Unix sockets are out of sight: `/run` (and `/var/run`
//! where it is not a link to it) is an empty tmpfs, and so is `/tmp` (its `.X11-unix`
//! included), and a socket bound elsewhere gets `/dev/null` over it ([`super::sockets`]); in
//! `none` and `proxy` the abstract socket namespace is the namespace's own.
//! An adapter names the sockets its CLI needs (`[sandbox] sockets`); those are bound in.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::{Network, SandboxPolicy};
use crate::egress::Rules;

/// The egress of a task in the `proxy` mode.
#[derive(Debug, Clone, PartialEq)]
pub struct Egress {
    /// What the task may reach.
    pub rules: Arc<Rules>,
    /// The task's proxy, once started for a turn; without one the task has no network.
    pub mount: Option<Mount>,
}

/// How the program reaches its proxy.
#[derive(Debug, Clone, PartialEq)]
pub enum Mount {
    /// A network namespace the host made with the proxy's listeners in it
    /// ([`crate::egress::netns`]): the task's first process joins it (this path) before
    /// bubblewrap starts, which then makes no network namespace of its own.
    Joined { netns: PathBuf },
    /// bubblewrap makes the namespace; the host's proxy socket is bound in and a relay (the
    /// host's executable) carries the program's connections to it.
    Relay {
        /// The task's proxy socket on the host.
        socket: PathBuf,
        /// The host's executable, which runs the relay.
        relay: PathBuf,
        /// Loopback addresses the relay also listens on (tunnelled through the proxy).
        forward: Vec<SocketAddr>,
    },
}

/// The namespace the task's first process joins, when the host made one for it.
pub fn joined(policy: &SandboxPolicy) -> Option<&Path> {
    match policy.egress.as_ref()?.mount.as_ref()? {
        Mount::Joined { netns } if policy.network == Network::Proxy => Some(netns),
        _ => None,
    }
}

/// The host's executable, by its real path (bubblewrap binds it into the sandbox), when it
/// offers the relay mode (the `agent-host` binary; not a program embedding the library).
pub fn relay_executable() -> Option<PathBuf> {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    if let Some(e) = EXE.get() {
        return Some(e.clone());
    }
    // Not kept while unknown: a host sets its executable before its first task.
    let real = std::fs::canonicalize(super::setup::own_executable()?).ok()?;
    if real.to_string_lossy().ends_with(" (deleted)") {
        return None;
    }
    Some(EXE.get_or_init(|| real).clone())
}

/// The network a task gets: `asked`, unless the machine cannot give it. `proxy` needs
/// bubblewrap and, unless the host makes the namespaces itself, agent-host's own executable
/// (the relay): without
/// bubblewrap the task gets the host's network (the sandbox's report says what is missing),
/// without the executable no network. Said once in the log.
pub fn effective(asked: Network, have_bwrap: bool) -> Network {
    static SAID: OnceLock<()> = OnceLock::new();
    let (got, why) = match asked {
        Network::Proxy if !have_bwrap => (
            Network::Open,
            "sandbox_network = \"proxy\" needs bubblewrap (a network namespace); tasks get the host's network",
        ),
        Network::Proxy if relay_executable().is_none() && !host_makes_namespaces() => (
            Network::None,
            "sandbox_network = \"proxy\" needs agent-host's own executable for its relay; tasks get no network",
        ),
        other => return other,
    };
    SAID.get_or_init(|| tracing::warn!("{why}"));
    got
}

/// Whether the host makes its tasks' network namespaces itself (root, and `netns` not in
/// `sandbox_disable`); it learns at the first task whether the kernel lets it.
fn host_makes_namespaces() -> bool {
    let caps = super::Capabilities::get();
    caps.root && !caps.disabled.contains(&super::Piece::Netns)
}

/// bubblewrap's arguments for the network and sockets of `policy` (after `/tmp`'s tmpfs).
pub fn mounts(policy: &SandboxPolicy, push: &mut dyn FnMut(&[&str])) {
    if policy.network != Network::Open && joined(policy).is_none() {
        push(&["--unshare-net"]);
    }
    push(&["--tmpfs", "/run"]);
    let var_run = Path::new("/var/run");
    if var_run.is_dir() && !var_run.is_symlink() {
        push(&["--tmpfs", "/var/run"]);
    }
    // Name resolution may live under /run (systemd-resolved's stub file).
    if let Ok(real) = std::fs::canonicalize("/etc/resolv.conf") {
        if real.starts_with("/run") || real.starts_with("/var/run") {
            let r = real.display().to_string();
            push(&["--ro-bind", &r, &r]);
        }
    }
    for s in policy.sockets.iter().filter(|s| s.exists()) {
        let s = s.display().to_string();
        push(&["--bind", &s, &s]);
    }
    if let Some(Mount::Relay { socket, relay, .. }) =
        policy.egress.as_ref().and_then(|e| e.mount.as_ref())
    {
        let socket = socket.display().to_string();
        let relay = relay.display().to_string();
        push(&["--bind", &socket, crate::egress::SANDBOX_SOCKET]);
        push(&["--ro-bind", &relay, crate::egress::SANDBOX_RELAY]);
    }
}

/// What runs before the program: the relay, when the task has a proxy.
pub fn command_prefix(policy: &SandboxPolicy) -> Vec<String> {
    match policy.egress.as_ref().and_then(|e| e.mount.as_ref()) {
        Some(Mount::Relay { forward, .. }) if policy.network == Network::Proxy => {
            let mut a = vec![crate::egress::SANDBOX_RELAY.to_string()];
            a.extend(crate::egress::relay::args(
                crate::egress::SANDBOX_SOCKET,
                crate::egress::PROXY_PORT,
                forward,
            ));
            a
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_mode_binds_the_socket_and_runs_the_relay_first() {
        let rules = Rules::new(["api.example.com", "127.0.0.1:4567"], []).unwrap();
        let policy = SandboxPolicy {
            network: Network::Proxy,
            egress: Some(Egress {
                rules: Arc::new(rules.clone()),
                mount: Some(Mount::Relay {
                    socket: "/tmp/e/x.sock".into(),
                    relay: "/opt/agent-host".into(),
                    forward: rules.loopback_forwards(),
                }),
            }),
            sockets: vec!["/".into(), "/nonexistent.sock".into()],
            ..SandboxPolicy::default()
        };
        let mut a: Vec<String> = Vec::new();
        mounts(&policy, &mut |items| {
            a.extend(items.iter().map(|s| s.to_string()))
        });
        let at = |s: &str| {
            a.iter()
                .position(|x| x == s)
                .unwrap_or_else(|| panic!("{s} in {a:?}"))
        };
        assert!(at("--unshare-net") < at("/run"));
        assert!(at("/run") < at(crate::egress::SANDBOX_SOCKET));
        assert_eq!(a[at(crate::egress::SANDBOX_SOCKET) - 1], "/tmp/e/x.sock");
        assert_eq!(a[at(crate::egress::SANDBOX_RELAY) - 1], "/opt/agent-host");
        assert!(!a.iter().any(|x| x == "/nonexistent.sock"));
        let pre = command_prefix(&policy);
        assert_eq!(pre[0], crate::egress::SANDBOX_RELAY);
        assert!(pre.contains(&"127.0.0.1:4567".to_string()));
        assert_eq!(pre.last().map(String::as_str), Some("--"));

        let open = SandboxPolicy::default();
        let mut b: Vec<String> = Vec::new();
        mounts(&open, &mut |items| {
            b.extend(items.iter().map(|s| s.to_string()))
        });
        assert!(!b.contains(&"--unshare-net".to_string()) && b.contains(&"/run".to_string()));
        assert!(command_prefix(&open).is_empty());
    }

    #[test]
    fn a_namespace_the_host_made_is_joined_not_made_and_runs_no_relay() {
        let rules = Rules::new(["api.example.com"], []).unwrap();
        let policy = SandboxPolicy {
            network: Network::Proxy,
            egress: Some(Egress {
                rules: Arc::new(rules),
                mount: Some(Mount::Joined {
                    netns: "/proc/1/fd/9".into(),
                }),
            }),
            ..SandboxPolicy::default()
        };
        let mut a: Vec<String> = Vec::new();
        mounts(&policy, &mut |items| {
            a.extend(items.iter().map(|s| s.to_string()))
        });
        assert!(!a.contains(&"--unshare-net".to_string()), "{a:?}");
        assert!(!a.iter().any(|x| x == crate::egress::SANDBOX_SOCKET));
        assert!(a.contains(&"/run".to_string()));
        assert!(command_prefix(&policy).is_empty());
        assert_eq!(joined(&policy), Some(Path::new("/proc/1/fd/9")));
        // Without the namespace the task still gets one of its own, empty.
        let lost = SandboxPolicy {
            egress: None,
            ..policy
        };
        let mut b: Vec<String> = Vec::new();
        mounts(&lost, &mut |items| {
            b.extend(items.iter().map(|s| s.to_string()))
        });
        assert!(b.contains(&"--unshare-net".to_string()));
    }
}
