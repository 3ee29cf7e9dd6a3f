//! A task's network namespace made by the host itself, with the proxy's listeners already
//! in it: the way the `proxy` mode starts on a host that may make namespaces (root).
//!
//! The relay ([`super::relay`]) needs one more exec of the host's binary inside every
//! sandbox (its listeners bound, two forks, a runtime) and one more hop for every
//! connection (the relay, then the Unix socket). Here the host makes the namespace in a
//! thread of its own (`unshare(CLONE_NEWNET)` affects that thread only), brings its
//! loopback up, binds the listeners there (a socket stays in the namespace it was made in,
//! whichever thread then accepts on it) and keeps a descriptor of the namespace. The task's
//! setup step ([`crate::runner::sandbox::setup`]) joins it through
//! `/proc/<host>/fd/<n>` before bubblewrap starts, so bubblewrap makes no namespace of its
//! own, and the host accepts the program's connections directly. No process of the host's
//! runs in the sandbox.
//!
//! Made ahead of need ([`take`]): one namespace per set of forwarded addresses is kept
//! ready and made again in the background once taken, so a task's start does not wait for
//! the kernel to make one (the namespace's cost is paid off the start's path).

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

/// A network namespace with only loopback, and the host's listeners in it.
#[derive(Debug)]
pub struct Namespace {
    /// Keeps the namespace (its processes may not have joined yet).
    fd: OwnedFd,
    /// The proxy's listener, then one per forwarded address.
    pub(super) listeners: Vec<(TcpListener, Option<SocketAddr>)>,
}

impl Namespace {
    /// The path by which another process of this machine opens the namespace (to join it)
    /// while this host keeps it.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            self.fd.as_raw_fd()
        ))
    }
}

/// Makes a namespace with the proxy's listener on `127.0.0.1:listen` and one on each of
/// `forward`, in a thread of its own that ends with it.
pub fn make(listen: u16, forward: &[SocketAddr]) -> io::Result<Namespace> {
    let forward = forward.to_vec();
    std::thread::Builder::new()
        .name("netns".into())
        .spawn(move || make_here(listen, &forward))?
        .join()
        .map_err(|_| io::Error::other("the thread making the network namespace panicked"))?
}

/// [`make`], in the calling thread, which is left in the new namespace.
fn make_here(listen: u16, forward: &[SocketAddr]) -> io::Result<Namespace> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
    loopback_up()?;
    let fd: OwnedFd = std::fs::File::open("/proc/thread-self/ns/net")?.into();
    let proxy_at = SocketAddr::from(([127, 0, 0, 1], listen));
    let mut listeners = Vec::with_capacity(1 + forward.len());
    for (addr, to) in
        std::iter::once((proxy_at, None)).chain(forward.iter().map(|f| (*f, Some(*f))))
    {
        let l = TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("listening on {addr}: {e}")))?;
        l.set_nonblocking(true)?;
        listeners.push((l, to));
    }
    Ok(Namespace { fd, listeners })
}

/// Brings the namespace's loopback up (the kernel then gives it 127.0.0.1 and ::1).
///
/// Two `ioctl`s on a datagram socket, as `ifconfig lo up` does; written out because the
/// netlink crates (`rtnetlink` and its async stack) would be a dependency tree for one
/// flag, and `nix` wraps neither `SIOCGIFFLAGS` nor `SIOCSIFFLAGS`.
fn loopback_up() -> io::Result<()> {
    use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};
    let sock = socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    // SAFETY: `ifreq` is plain data; all zeroes is a valid value of it.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *d = *s as libc::c_char;
    }
    let fd = sock.as_raw_fd();
    // SAFETY: the request and its argument match (an `ifreq`), `req` outlives the call,
    // and `fd` is an open socket.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS filled the union's flags member, the one read here.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    // SAFETY: as for SIOCGIFFLAGS.
    if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether this host makes its tasks' namespaces itself: known after the first try
/// (a host that may not, not root, keeps the relay).
static ABLE: OnceLock<bool> = OnceLock::new();

/// Namespaces made ahead of need, one per set of forwarded addresses.
static READY: Mutex<Option<HashMap<Vec<SocketAddr>, Namespace>>> = Mutex::new(None);

/// A namespace for a task whose proxy listens on `listen` and forwards `forward`: one made
/// ahead when there is one (and another is then made in the background), else one made
/// now. `None` when this host cannot make namespaces (said once in the log).
pub fn take(listen: u16, forward: &[SocketAddr]) -> Option<Namespace> {
    if ABLE.get() == Some(&false) {
        return None;
    }
    let key = forward.to_vec();
    let ready = READY
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .remove(&key);
    let ns = match ready {
        Some(ns) => ns,
        None => match make(listen, forward) {
            Ok(ns) => ns,
            Err(e) => {
                ABLE.get_or_init(|| {
                    tracing::info!(error = %e,
                        "the host cannot make network namespaces itself: each task's proxy is reached through a relay in its sandbox");
                    false
                });
                return None;
            }
        },
    };
    let _ = ABLE.set(true);
    make_ahead(listen, key);
    Some(ns)
}

/// Whether a thread is making a namespace ahead (for any set of forwarded addresses): a
/// burst of starts that found none ready makes one more, not one each.
static MAKING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// How many nice steps below the host the thread making a namespace ahead runs: that work
/// (about 0.5 ms of kernel CPU) is for the next task, so while one starts it should not take
/// a core from the start or from the host threads carrying events. The same step as the
/// sandbox's setup, for the same reason.
const AHEAD_NICE: i32 = 5;

/// Lowers the calling thread's CPU priority by [`AHEAD_NICE`] (Linux keeps a nice value per
/// thread). A failure leaves the priority as it was.
fn lower_own_priority() {
    // SAFETY: nice(2) takes a plain integer and touches no memory of ours; on Linux it changes
    // only the calling thread's nice value.
    let _ = unsafe { nix::libc::nice(AHEAD_NICE) };
}

/// Makes the next namespace for `forward` in the background, unless one is being made.
fn make_ahead(listen: u16, forward: Vec<SocketAddr>) {
    use std::sync::atomic::Ordering;
    if MAKING.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("netns".into())
        .spawn(move || {
            lower_own_priority();
            if let Ok(ns) = make_here(listen, &forward) {
                let mut ready = READY.lock().unwrap_or_else(|p| p.into_inner());
                ready
                    .get_or_insert_with(HashMap::new)
                    .entry(forward)
                    .or_insert(ns);
            }
            MAKING.store(false, Ordering::Release);
        });
    if let Err(e) = spawned {
        MAKING.store(false, Ordering::Release);
        tracing::debug!(error = %e, "cannot start a thread to make a network namespace ahead");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// The namespace, or None (said) where this machine does not let the test make one;
    /// under CI=true that fails.
    fn namespace(forward: &[SocketAddr]) -> Option<Namespace> {
        match make(3128, forward) {
            Ok(ns) => Some(ns),
            Err(e) => {
                assert!(
                    std::env::var("CI").as_deref() != Ok("true"),
                    "CI=true and no network namespace can be made here: {e}"
                );
                eprintln!("\n*** SKIPPED: no network namespace can be made here: {e} ***\n");
                None
            }
        }
    }

    #[test]
    fn a_process_that_joins_the_namespace_reaches_the_hosts_listeners_and_nothing_else() {
        let fwd: SocketAddr = "127.0.0.1:4567".parse().unwrap();
        let Some(ns) = namespace(&[fwd]) else {
            return;
        };
        assert_eq!(ns.listeners.len(), 2);
        assert_eq!(ns.listeners[1].1, Some(fwd));
        // A host port the joined thread must not see (its loopback is another).
        let outside = TcpListener::bind("127.0.0.1:0").unwrap();
        let outside_port = outside.local_addr().unwrap().port();
        let path = ns.path();
        let joined = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("the namespace by its path");
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let mut s = std::net::TcpStream::connect("127.0.0.1:3128").expect("the proxy's port");
            s.write_all(b"hi").unwrap();
            let host_port = std::net::TcpStream::connect(("127.0.0.1", outside_port));
            let forwarded = std::net::TcpStream::connect(fwd);
            (host_port.is_err(), forwarded.is_ok())
        });
        let (host_port_refused, forwarded) = joined.join().unwrap();
        assert!(
            host_port_refused,
            "the host's own loopback port is out of reach"
        );
        assert!(forwarded, "the forwarded address listens in the namespace");
        let (proxy, _) = &ns.listeners[0];
        proxy.set_nonblocking(false).unwrap();
        let (mut conn, _) = proxy.accept().expect("the host accepts");
        let mut got = [0u8; 2];
        conn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
    }

    #[test]
    fn one_namespace_is_made_ahead_and_taken_next() {
        if namespace(&[]).is_none() {
            return;
        }
        let fwd: Vec<SocketAddr> = vec!["127.0.0.1:4999".parse().unwrap()];
        let first = take(3128, &fwd).expect("a namespace");
        let ahead = || {
            READY
                .lock()
                .unwrap()
                .as_ref()
                .is_some_and(|r| r.contains_key(&fwd))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !ahead() {
            assert!(std::time::Instant::now() < deadline, "none made ahead");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let second = take(3128, &fwd).expect("the one made ahead");
        assert_ne!(first.path(), second.path());
    }
}
