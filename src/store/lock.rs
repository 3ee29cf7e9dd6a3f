//! One host per data folder: an exclusive `flock` on a lock file beside the database, held
//! while the store is open.
//!
//! The kernel releases the lock when the holder exits, however it exits (a crash, `kill -9`),
//! so a lock file left behind never blocks a restart; and while a host holds the lock, no
//! other host can open the same database. That is also what makes the sweep of processes a
//! dead host left running safe: a host that holds the lock knows that every process recorded
//! in its database was recorded by a host that no longer does.
//!
//! The lock belongs to the process: a database opened again by the process that holds its
//! lock (a server restarted inside one test process, whose old store is still referenced)
//! shares the lock instead of refusing itself.
//!
//! The lock file says who holds it (`pid=…` and, once the host listens, `port=…`), so that a
//! second host can name the first in its refusal. The file is opened close-on-exec, so the
//! agents a host starts never inherit (and keep) the lock.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use super::{files, StoreError};

/// Another host holds the lock.
#[derive(Debug, thiserror::Error)]
#[error("another agent-host ({}) is using {}; stop it first, or give this one another data folder (--store)", holder(*.pid, *.port), .database.display())]
pub struct LockedError {
    pub database: PathBuf,
    /// The other host's process id, when its lock file says.
    pub pid: Option<u32>,
    /// The port the other host listens on, when its lock file says.
    pub port: Option<u16>,
}

fn holder(pid: Option<u32>, port: Option<u16>) -> String {
    match (pid, port) {
        (Some(pid), Some(port)) => format!("pid {pid}, port {port}"),
        (Some(pid), None) => format!("pid {pid}"),
        _ => "pid unknown".into(),
    }
}

/// The held lock of a data folder; released when the last holder in this process drops it.
#[derive(Debug, Clone)]
pub struct DataLock(Arc<Held>);

#[derive(Debug)]
struct Held {
    path: PathBuf,
    file: Mutex<Flock<File>>,
}

/// The locks this process holds, by lock file (canonical path).
static HELD: Mutex<Option<HashMap<PathBuf, Weak<Held>>>> = Mutex::new(None);

/// Where the lock of the database at `database` is: `<database>.lock`.
pub fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl DataLock {
    /// Takes the lock of the database at `database`, or says which host holds it.
    pub fn acquire(database: &Path) -> Result<DataLock, StoreError> {
        let path = lock_path(database);
        let file = files::open_private(&path).map_err(StoreError::io(&path))?;
        let key = path.canonicalize().map_err(StoreError::io(&path))?;
        let mut held = HELD.lock().map_err(|_| StoreError::Poisoned)?;
        let held = held.get_or_insert_with(HashMap::new);
        held.retain(|_, w| w.strong_count() > 0);
        if let Some(mine) = held.get(&key).and_then(Weak::upgrade) {
            return Ok(DataLock(mine));
        }
        let mut file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(f) => f,
            Err((_, Errno::EWOULDBLOCK)) => {
                // What the holder wrote; unreadable content just names no pid.
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let (pid, port) = parse(&text);
                return Err(LockedError {
                    database: database.to_path_buf(),
                    pid,
                    port,
                }
                .into());
            }
            Err((_, e)) => {
                return Err(StoreError::io(&path)(std::io::Error::from(e)));
            }
        };
        write_holder(&mut file, None).map_err(StoreError::io(&path))?;
        let mine = Arc::new(Held {
            path,
            file: Mutex::new(file),
        });
        held.insert(key, Arc::downgrade(&mine));
        Ok(DataLock(mine))
    }

    /// Records the port this host listens on, for the refusal a second host prints.
    pub fn record_port(&self, port: u16) -> Result<(), StoreError> {
        let mut file = self.0.file.lock().map_err(|_| StoreError::Poisoned)?;
        write_holder(&mut file, Some(port)).map_err(StoreError::io(&self.0.path))
    }

    /// The lock file.
    #[cfg(test)]
    fn path(&self) -> &Path {
        &self.0.path
    }
}

/// Fails, naming the holder, when another host holds the lock of the database at `database`;
/// takes nothing (a host checks this before it binds its port, and takes the lock when it
/// opens the store).
pub fn check(database: &Path) -> Result<(), StoreError> {
    if !lock_path(database).exists() {
        return Ok(());
    }
    DataLock::acquire(database).map(drop)
}

fn write_holder(file: &mut File, port: Option<u16>) -> std::io::Result<()> {
    let mut text = format!("pid={}\n", std::process::id());
    if let Some(port) = port {
        text.push_str(&format!("port={port}\n"));
    }
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// The pid and port a lock file names.
fn parse(text: &str) -> (Option<u32>, Option<u16>) {
    let mut out = (None, None);
    for line in text.lines() {
        match line.split_once('=') {
            Some(("pid", v)) => out.0 = v.trim().parse().ok(),
            Some(("port", v)) => out.1 = v.trim().parse().ok(),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// What another host does: its own lock on the file, with its pid and port in it.
    pub(crate) fn other_host(db: &Path, pid: u32, port: u16) -> Flock<File> {
        let file = files::open_private(&lock_path(db)).unwrap();
        let mut file = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        file.set_len(0).unwrap();
        file.write_all(format!("pid={pid}\nport={port}\n").as_bytes())
            .unwrap();
        file
    }

    #[test]
    fn a_second_host_is_refused_with_the_first_ones_pid_and_port() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent-host.db");
        let other = other_host(&db, 4242, 8042);
        let err = DataLock::acquire(&db).unwrap_err();
        let StoreError::Locked(locked) = &err else {
            panic!("{err}")
        };
        assert_eq!((locked.pid, locked.port), (Some(4242), Some(8042)));
        let msg = err.to_string();
        assert!(msg.contains("pid 4242, port 8042"), "{msg}");
        assert!(check(&db).is_err());
        drop(other);
        let mine = DataLock::acquire(&db).expect("free once the other host is gone");
        mine.record_port(9000).unwrap();
        let mode = std::fs::metadata(mine.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let text = std::fs::read_to_string(mine.path()).unwrap();
        assert_eq!(text, format!("pid={}\nport=9000\n", std::process::id()));
        // The same process opening the database again shares its lock.
        let again = DataLock::acquire(&db).expect("shared within the process");
        drop((mine, again));
        // Released with the last holder: another host can take it.
        let _other = other_host(&db, 1, 1);
    }

    #[test]
    fn lock_files_name_their_holder() {
        assert_eq!(parse("pid=12\nport=80\n"), (Some(12), Some(80)));
        assert_eq!(parse("pid=12\n"), (Some(12), None));
        assert_eq!(parse("garbage"), (None, None));
    }
}
