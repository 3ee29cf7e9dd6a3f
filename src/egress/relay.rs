//! The relay inside a task's network namespace: `agent-host __egress-relay --socket PATH
//! --listen PORT [--forward ADDR:PORT]... -- PROGRAM ARGS`.
//!
//! It binds its listeners on the namespace's loopback first (so the program never finds
//! them missing), then forks: a grandchild carries the connections, the process itself
//! execs the program (which keeps its pid, the one bubblewrap waits for). The grandchild is
//! adopted by the sandbox's init and dies with the sandbox's PID namespace, that is with the
//! task. Connections to `--listen` go to the task's proxy socket as they are (the program
//! speaks HTTP proxy); connections to a `--forward` address are tunnelled with a
//! `CONNECT ADDR:PORT` first.

use std::ffi::{OsStr, OsString};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The first argument that selects the relay mode (hidden from `--help`).
pub const MODE: &str = "__egress-relay";

/// Exit status when the relay cannot be set up (as the setup mode's).
const FAILED: i32 = 125;

#[derive(Debug, Default, PartialEq)]
struct Args {
    socket: PathBuf,
    listen: u16,
    forward: Vec<SocketAddr>,
    command: Vec<OsString>,
}

/// The arguments that run `program args` behind a relay (before the program).
pub fn args(socket: &str, listen: u16, forward: &[SocketAddr]) -> Vec<String> {
    let mut a = vec![
        MODE.to_string(),
        "--socket".into(),
        socket.into(),
        "--listen".into(),
        listen.to_string(),
    ];
    for f in forward {
        a.push("--forward".into());
        a.push(f.to_string());
    }
    a.push("--".into());
    a
}

/// Why the relay mode cannot start.
#[derive(Debug, thiserror::Error)]
enum RelayError {
    #[error("{0} needs a value")]
    NoValue(&'static str),
    #[error("{flag} {value}")]
    BadValue { flag: &'static str, value: String },
    #[error("unknown argument {0}")]
    Unknown(String),
    #[error("no program after --")]
    NoProgram,
    #[error("no -- before the program")]
    NoSeparator,
    #[error("fork: {0}")]
    Fork(#[from] nix::Error),
}

fn parse(args: Vec<OsString>) -> Result<Args, RelayError> {
    let mut out = Args::default();
    let mut it = args.into_iter();
    let value = |it: &mut std::vec::IntoIter<OsString>, flag: &'static str| {
        it.next()
            .and_then(|v| v.into_string().ok())
            .ok_or(RelayError::NoValue(flag))
    };
    let bad = |flag: &'static str, value: String| RelayError::BadValue { flag, value };
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--") => {
                out.command = it.collect();
                if out.command.is_empty() {
                    return Err(RelayError::NoProgram);
                }
                return Ok(out);
            }
            Some("--socket") => out.socket = PathBuf::from(value(&mut it, "--socket")?),
            Some("--listen") => {
                let v = value(&mut it, "--listen")?;
                out.listen = v.parse().map_err(|_| bad("--listen", v))?;
            }
            Some("--forward") => {
                let v = value(&mut it, "--forward")?;
                out.forward
                    .push(v.parse().map_err(|_| bad("--forward", v))?);
            }
            _ => return Err(RelayError::Unknown(a.to_string_lossy().into_owned())),
        }
    }
    Err(RelayError::NoSeparator)
}

/// The relay mode: when this process was started as `EXE __egress-relay ...`, sets the relay
/// up and execs the program; returns only when it was not. Call it first thing in `main`.
pub fn main_if_asked() {
    let mut argv = std::env::args_os();
    if argv.nth(1).as_deref() != Some(OsStr::new(MODE)) {
        return;
    }
    std::process::exit(run(argv.collect()));
}

fn run(argv: Vec<OsString>) -> i32 {
    let fail = |what: String| {
        eprintln!("agent-host: cannot set up the task's network relay: {what}");
        FAILED
    };
    let args = match parse(argv) {
        Ok(a) => a,
        Err(e) => return fail(e.to_string()),
    };
    let mut listeners = Vec::new();
    let proxy_at = SocketAddr::from(([127, 0, 0, 1], args.listen));
    for (addr, forward) in
        std::iter::once((proxy_at, None)).chain(args.forward.iter().map(|f| (*f, Some(*f))))
    {
        match std::net::TcpListener::bind(addr) {
            Ok(l) => listeners.push((l, forward)),
            Err(e) => return fail(format!("listening on {addr}: {e}")),
        }
    }
    if let Err(e) = spawn_relay(listeners, args.socket) {
        return fail(e.to_string());
    }
    let Some((program, rest)) = args.command.split_first() else {
        return fail("no program".into());
    };
    // The listeners are close-on-exec: the program does not hold them.
    let err = std::process::Command::new(program).args(rest).exec();
    eprintln!(
        "agent-host: cannot run {}: {err}",
        std::path::Path::new(program).display()
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Forks the relay off as a grandchild (adopted by the sandbox's init) and waits for the
/// child in between.
fn spawn_relay(
    listeners: Vec<(std::net::TcpListener, Option<SocketAddr>)>,
    socket: PathBuf,
) -> Result<(), RelayError> {
    use nix::unistd::{fork, ForkResult};
    // SAFETY: this process runs no other thread (the relay mode starts before anything in
    // `main`); the children only make system calls and start their own runtime.
    match unsafe { fork() }? {
        ForkResult::Parent { child } => {
            let _ = nix::sys::wait::waitpid(child, None);
            drop(listeners);
            Ok(())
        }
        ForkResult::Child => {
            // SAFETY: as above, still one thread.
            if let Ok(ForkResult::Child) = unsafe { fork() } {
                quiet_stdio();
                relay(listeners, socket);
            }
            std::process::exit(0);
        }
    }
}

/// The relay keeps none of the program's output open (the host waits for it to close).
fn quiet_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors, with a descriptor this function owns.
            unsafe {
                libc::dup2(null.as_raw_fd(), fd);
            }
        }
    }
}

fn relay(listeners: Vec<(std::net::TcpListener, Option<SocketAddr>)>, socket: PathBuf) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let mut accepts = tokio::task::JoinSet::new();
        for (l, forward) in listeners {
            let _ = l.set_nonblocking(true);
            let Ok(l) = tokio::net::TcpListener::from_std(l) else {
                continue;
            };
            let socket = socket.clone();
            accepts.spawn(async move {
                while let Ok((conn, _)) = l.accept().await {
                    let _ = conn.set_nodelay(true);
                    tokio::spawn(carry(conn, socket.clone(), forward));
                }
            });
        }
        while accepts.join_next().await.is_some() {}
    });
}

/// One connection: to the proxy as it is, or tunnelled to `forward`.
async fn carry(mut conn: tokio::net::TcpStream, socket: PathBuf, forward: Option<SocketAddr>) {
    let Ok(mut up) = tokio::net::UnixStream::connect(&socket).await else {
        return;
    };
    if let Some(to) = forward {
        let ask = format!("CONNECT {to} HTTP/1.1\r\nHost: {to}\r\n\r\n");
        if up.write_all(ask.as_bytes()).await.is_err() || !connected(&mut up).await {
            return;
        }
    }
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut up).await;
}

/// Reads the proxy's answer to a CONNECT up to its blank line: a 200 or not.
async fn connected(up: &mut tokio::net::UnixStream) -> bool {
    let mut head = Vec::with_capacity(128);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 8192 || !matches!(up.read(&mut byte).await, Ok(1)) {
            return false;
        }
        head.push(byte[0]);
    }
    head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_survive_the_command_line() {
        let fwd: Vec<SocketAddr> = vec![
            "127.0.0.1:4567".parse().unwrap(),
            "[::1]:9".parse().unwrap(),
        ];
        let mut a: Vec<OsString> = args("/run/x.sock", 3128, &fwd)
            .into_iter()
            .skip(1)
            .map(OsString::from)
            .collect();
        a.extend(["/bin/prog", "--", "-x"].map(OsString::from));
        let back = parse(a).unwrap();
        assert_eq!(back.socket, PathBuf::from("/run/x.sock"));
        assert_eq!(back.listen, 3128);
        assert_eq!(back.forward, fwd);
        assert_eq!(back.command, ["/bin/prog", "--", "-x"].map(OsString::from));
        for bad in [
            vec!["--listen", "x", "--", "p"],
            vec!["--socket"],
            vec!["--"],
            vec!["--what"],
        ] {
            assert!(parse(bad.into_iter().map(OsString::from).collect()).is_err());
        }
    }
}
