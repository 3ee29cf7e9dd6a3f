//! Pseudo-terminal support: a raw, wide pty whose master is read and written asynchronously.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt, PtyMaster, Winsize};
use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Terminal width given to pty children: wide, so CLIs do not wrap their lines.
pub(crate) const PTY_COLS: u16 = 500;
/// Terminal height given to pty children.
pub(crate) const PTY_ROWS: u16 = 50;

/// A freshly opened pty pair. Both ends are close-on-exec; the master is non-blocking.
pub(crate) struct Pty {
    pub(crate) master: PtyMaster,
    pub(crate) slave: OwnedFd,
}

/// Open a pty in raw mode (no echo, no `\n` -> `\r\n`, no line editing or line-length limit)
/// with a `PTY_COLS` x `PTY_ROWS` window, both set before any child can see the slave.
///
/// Not `openpty(3)`: it opens both ends without `O_CLOEXEC`, and a child spawned concurrently
/// by another thread would inherit the slave and keep our reader from ever seeing EOF.
pub(crate) fn open_pty() -> io::Result<Pty> {
    let master =
        posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let slave_path = ptsname_r(&master)?;
    // std opens files with O_CLOEXEC.
    let slave: OwnedFd = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(nix::libc::O_NOCTTY)
        .open(&slave_path)?
        .into();

    let mut termios = tcgetattr(slave.as_fd())?;
    cfmakeraw(&mut termios);
    tcsetattr(slave.as_fd(), SetArg::TCSANOW, &termios)?;

    let size = Winsize {
        ws_row: PTY_ROWS,
        ws_col: PTY_COLS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one `winsize` through the pointer, which points to a live value;
    // the fd is a valid, open pty master.
    let rc = unsafe { nix::libc::ioctl(master.as_raw_fd(), nix::libc::TIOCSWINSZ, &size) };
    Errno::result(rc)?;

    Ok(Pty { master, slave })
}

/// Make the calling process (the child before it execs its program) the leader of a new
/// session whose controlling terminal is the pty on fd 1. Only async-signal-safe calls.
pub(crate) fn become_session_leader() -> io::Result<()> {
    nix::unistd::setsid()?;
    // SAFETY: plain ioctl on fd 1 (the pty slave, set up by the spawner) with an integer argument.
    let rc = unsafe { nix::libc::ioctl(1, nix::libc::TIOCSCTTY as _, 0) };
    Errno::result(rc)?;
    Ok(())
}

/// The pty master, shared by the output reader and the stdin writer.
///
/// Reading returns EOF when the child side is gone (Linux reports that as EIO).
#[derive(Clone)]
pub(crate) struct Master(Arc<AsyncFd<PtyMaster>>);

impl Master {
    /// Must be called inside a tokio runtime.
    pub(crate) fn new(master: PtyMaster) -> io::Result<Self> {
        // SAFETY: `PtyMaster` owns its fd and returns that same open fd from `as_raw_fd` until it
        // is dropped, which only happens together with the `AsyncFd`.
        let fd = unsafe { AsyncFd::register(master) }.map_err(|e| e.into_parts().1)?;
        Ok(Master(Arc::new(fd)))
    }
}

impl AsyncRead for Master {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.0.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let result = guard
                .try_io(|fd| nix::unistd::read(fd.as_raw_fd(), unfilled).map_err(io::Error::from));
            match result {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.raw_os_error() == Some(Errno::EIO as i32) => {
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                Err(_would_block) => continue,
            }
        }
    }
}

impl AsyncWrite for Master {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut guard = ready!(self.0.poll_write_ready(cx))?;
            match guard.try_io(|fd| nix::unistd::write(fd.get_ref(), buf).map_err(io::Error::from))
            {
                Ok(result) => return Poll::Ready(result),
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::termios::LocalFlags;

    #[test]
    fn pty_is_raw_and_wide() {
        let pty = open_pty().expect("open pty");
        let t = tcgetattr(pty.slave.as_fd()).expect("tcgetattr");
        assert!(!t.local_flags.contains(LocalFlags::ECHO));
        assert!(!t.local_flags.contains(LocalFlags::ICANON));
        let mut size = Winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCGWINSZ writes one winsize into a live value.
        let rc =
            unsafe { nix::libc::ioctl(pty.slave.as_raw_fd(), nix::libc::TIOCGWINSZ, &mut size) };
        assert_eq!(rc, 0);
        assert_eq!((size.ws_col, size.ws_row), (PTY_COLS, PTY_ROWS));
    }
}
