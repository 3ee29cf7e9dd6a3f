//! Starting a task's program without forking the host.
//!
//! What must happen in the task's first process before its program runs ([`Steps`]): join
//! the task's cgroups (so that everything it starts is tracked from its first instruction),
//! the task's network namespace when the host made it ([`crate::egress::netns`]),
//! the file size limit (`RLIMIT_FSIZE`), the sandbox user (`setgroups`, `setgid`, `setuid`),
//! Landlock (with `no_new_privs`), and on a pty a new session with the terminal as its
//! controlling tty.
//!
//! # Where the steps run
//!
//! Between fork and exec (`CommandExt::pre_exec`) is the obvious place, but any such hook
//! makes the standard library fork the host for real instead of using `posix_spawn` (a
//! `vfork`-like clone that shares the host's memory until the exec): a fork copies the page
//! tables of the whole host, which grow with the tasks it serves. With a thousand live tasks
//! that copy was about a quarter of the host's CPU, and each event cost almost twice what it
//! cost without the sandbox.
//!
//! So the host starts its own executable instead, through `posix_spawn`, in a hidden mode:
//! `agent-host __exec-setup STEPS -- PROGRAM ARGS` ([`main_if_asked`]) applies the steps to
//! itself and execs the program: same pid, same process group (set by `posix_spawn`), and
//! nothing is started before the steps are in force. The price is one more exec, of a file
//! already in the page cache that the kernel maps lazily; the setup mode runs before the
//! host's own start (no runtime, no logging, no configuration).
//!
//! Options not taken:
//! - placing the child from outside after it started (writing its pid into `cgroup.procs`,
//!   `prlimit(2)`): the program could fork before that and its child would escape the
//!   task's cgroup;
//! - `clone3(CLONE_INTO_CGROUP)`: cgroup v2 only (v1 machines still need another way), it
//!   covers neither the user, the limits, Landlock nor the session, and the standard library
//!   does not offer it (a hand-made `vfork` running Rust code in the host's memory is the
//!   kind of code this module exists to avoid);
//! - bubblewrap's own options: it has none for cgroups or limits, and the user and Landlock
//!   steps are for the cases it does not cover.
//!
//! The host's spawn returns once the setup mode is exec'd, before the steps are applied: until
//! then the cgroup does not list the process (nor, on a pty, does it lead a session of its
//! own), but it starts nothing before they are applied, the runner signals the leader by its
//! pid as well as its group and cgroup, and it asks the cgroup whether a task's processes are
//! gone only after their leader was reaped.
//!
//! Where no executable offers the mode (a program embedding this library, the library's own
//! tests), [`command`] falls back to the same steps in a pre-exec hook, which forks.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use nix::unistd::{Gid, Uid};

use super::cgroup::TaskCgroup;
use super::landlock;
use super::SandboxError;

/// The first argument that selects the setup mode (hidden from `--help`).
pub const MODE: &str = "__exec-setup";

/// Where the executable that offers the setup mode is shown inside bubblewrap's sandbox
/// (its `/run` is the sandbox's own), to run the steps that must run in there.
pub const IN_SANDBOX: &str = "/run/agent-host/agent-host-exec";

/// Exit status of the setup mode when a step fails (as `env` and `timeout` use it).
const STEP_FAILED: i32 = 125;
/// Exit status when the program cannot be run (as shells use them).
const NOT_EXECUTABLE: i32 = 126;
const NOT_FOUND: i32 = 127;

/// What the task's first process does to itself before its program runs, in this order.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Steps {
    /// The `cgroup.procs` files of the task's cgroups.
    pub join: Vec<CString>,
    /// A network namespace to join (the host made it, with the task's proxy in it).
    pub netns: Option<CString>,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_size: Option<u64>,
    /// uid, gid, groups of the sandbox user.
    pub user: Option<(u32, u32, Vec<Gid>)>,
    /// Landlock: what the task may write (the rest is read-only), when it is in force.
    pub landlock: Option<Vec<PathBuf>>,
    /// Landlock: only the abstract Unix sockets made by the task itself (the host's network
    /// is shared, and with it the host's abstract sockets; see [`landlock`]).
    pub scope_sockets: bool,
    /// Lead a new session whose controlling terminal is the pty on stdout.
    pub session: bool,
    /// Sources of bubblewrap's binds to open without following links and hand over as
    /// descriptors (see [`super::pin`]); the command is bubblewrap's.
    pub pin: Vec<PathBuf>,
    /// Give up every capability for good (bounding, inheritable and ambient sets), so that
    /// a root task keeps none after its exec: see [`drop_capabilities`].
    pub drop_caps: bool,
    /// Enter a user namespace of its own, root in it mapped to root in the caller's (see
    /// [`enter_own_user_namespace`]): run inside bubblewrap's sandbox, so that the sandbox's
    /// mounts belong to a namespace in which the task has no capability.
    pub own_userns: bool,
}

impl Steps {
    pub fn is_empty(&self) -> bool {
        self == &Steps::default()
    }

    /// The steps as arguments of the setup mode (before its `--`).
    pub(crate) fn to_args(&self) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        for j in &self.join {
            a.push("--join".into());
            a.push(OsStr::from_bytes(j.as_bytes()).to_os_string());
        }
        if let Some(n) = &self.netns {
            a.push("--netns".into());
            a.push(OsStr::from_bytes(n.as_bytes()).to_os_string());
        }
        if let Some(n) = self.file_size {
            a.push("--fsize".into());
            a.push(n.to_string().into());
        }
        if let Some((uid, gid, groups)) = &self.user {
            let groups: Vec<String> = groups.iter().map(|g| g.as_raw().to_string()).collect();
            a.push("--user".into());
            a.push(format!("{uid}:{gid}:{}", groups.join(",")).into());
        }
        if let Some(write) = &self.landlock {
            a.push("--landlock".into());
            for w in write {
                a.push("--write".into());
                a.push(w.as_os_str().to_os_string());
            }
        }
        if self.scope_sockets {
            a.push("--scope-sockets".into());
        }
        if self.session {
            a.push("--session".into());
        }
        if self.own_userns {
            a.push("--own-userns".into());
        }
        if self.drop_caps {
            a.push("--drop-caps".into());
        }
        for p in &self.pin {
            a.push("--pin".into());
            a.push(p.as_os_str().to_os_string());
        }
        a
    }

    /// The steps and the command after `--`, from the setup mode's arguments.
    fn parse(args: Vec<OsString>) -> Result<(Steps, Vec<OsString>), ArgsError> {
        let mut steps = Steps::default();
        let mut it = args.into_iter();
        let text = |v: Option<OsString>, flag: &'static str| {
            v.and_then(|v| v.into_string().ok())
                .ok_or(ArgsError::NoValue(flag))
        };
        let bad = |flag: &'static str, value: String| ArgsError::BadValue { flag, value };
        while let Some(a) = it.next() {
            match a.to_str() {
                Some("--") => {
                    let command: Vec<OsString> = it.collect();
                    if command.is_empty() {
                        return Err(ArgsError::NoProgram);
                    }
                    return Ok((steps, command));
                }
                Some("--join") => {
                    let p = it.next().ok_or(ArgsError::NoPath("--join"))?;
                    steps.join.push(CString::new(p.into_vec())?);
                }
                Some("--netns") => {
                    let p = it.next().ok_or(ArgsError::NoPath("--netns"))?;
                    steps.netns = Some(CString::new(p.into_vec())?);
                }
                Some("--fsize") => {
                    let n = text(it.next(), "--fsize")?;
                    steps.file_size = Some(n.parse().map_err(|_| bad("--fsize", n))?);
                }
                Some("--user") => {
                    let u = text(it.next(), "--user")?;
                    steps.user = Some(parse_user(&u).ok_or_else(|| bad("--user", u))?);
                }
                Some("--landlock") => {
                    steps.landlock.get_or_insert_with(Vec::new);
                }
                Some("--write") => {
                    let p = it.next().ok_or(ArgsError::NoPath("--write"))?;
                    steps
                        .landlock
                        .get_or_insert_with(Vec::new)
                        .push(PathBuf::from(p));
                }
                Some("--scope-sockets") => steps.scope_sockets = true,
                Some("--session") => steps.session = true,
                Some("--own-userns") => steps.own_userns = true,
                Some("--drop-caps") => steps.drop_caps = true,
                Some("--pin") => {
                    let p = it.next().ok_or(ArgsError::NoPath("--pin"))?;
                    steps.pin.push(PathBuf::from(p));
                }
                _ => return Err(ArgsError::Unknown(a.to_string_lossy().into_owned())),
            }
        }
        Err(ArgsError::NoSeparator)
    }

    /// Applies the steps to the calling process: join the cgroups (as root, before anything
    /// else), the file size limit, the user (groups first, uid last: after setuid nothing
    /// else may be changed; as root, setgid and setuid set the real, effective and saved ids
    /// alike), the Landlock ruleset `ruleset` (built from [`Steps::landlock`] and
    /// [`Steps::scope_sockets`]), the session.
    /// On failure, which step failed. System calls only, no allocation: it also runs between
    /// fork and exec.
    fn apply(
        &self,
        ruleset: Option<&mut landlock::Prepared>,
    ) -> Result<(), (&'static str, io::Error)> {
        let step = |name: &'static str| move |e: io::Error| (name, e);
        TaskCgroup::join_self(&self.join).map_err(step("joining the task's cgroup"))?;
        if let Some(path) = &self.netns {
            join_netns(path).map_err(step("joining the task's network namespace"))?;
        }
        if let Some(max) = self.file_size {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE, max, max)
                .map_err(|e| ("the file size limit", e.into()))?;
        }
        if let Some((uid, gid, groups)) = &self.user {
            nix::unistd::setgroups(groups)
                .and_then(|()| nix::unistd::setgid(Gid::from_raw(*gid)))
                .and_then(|()| nix::unistd::setuid(Uid::from_raw(*uid)))
                .map_err(|e| ("becoming the sandbox user", e.into()))?;
        }
        if self.own_userns {
            enter_own_user_namespace().map_err(step("a user namespace of its own"))?;
        }
        if self.drop_caps {
            drop_capabilities().map_err(step("giving up the capabilities"))?;
        }
        if let Some(r) = ruleset {
            r.restrict_self().map_err(step("Landlock"))?;
        }
        if self.session {
            crate::runner::pty::become_session_leader()
                .map_err(step("a new session on the terminal"))?;
        }
        Ok(())
    }

    /// The Landlock ruleset of [`Steps::landlock`] and [`Steps::scope_sockets`], built.
    fn ruleset(&self) -> Result<Option<landlock::Prepared>, ::landlock::RulesetError> {
        if self.landlock.is_none() && !self.scope_sockets {
            return Ok(None);
        }
        // Still root when the ruleset is applied (it comes after the user step).
        let privileged = nix::unistd::geteuid().is_root() && self.user.is_none();
        landlock::Prepared::new(self.landlock.as_deref(), self.scope_sockets, privileged).map(Some)
    }
}

/// Moves the calling process into a new user namespace in which uid and gid 0 are the
/// caller's uid and gid 0 (so it stays root, with every capability, over what that namespace
/// owns), and in which `setgroups` is refused (the kernel's condition for a process to map
/// its own group).
///
/// Why: bubblewrap started by root with `--unshare-user --uid 0` makes the sandbox's mount
/// namespace in a user namespace where the program is root with every capability. The
/// mounts that hide the host's data folder, empty `/tmp` and `/run` and make `/` read-only
/// were made in that same namespace, so the program could undo them (`umount /tmp`, `mount
/// -o remount,rw /`) and, being the host's root there, write the host's files. Entered from
/// inside the sandbox, this namespace is a child of bubblewrap's: the program keeps root
/// over anything it creates (a nested sandbox, as Codex's bubblewrap makes for its
/// commands), but the mounts it was given belong to the parent and are locked (the kernel
/// does not let a less privileged namespace unmount or remount what would show what they
/// cover). `--cap-drop ALL` would lock them too, but a CLI without capabilities as root
/// cannot start a nested bubblewrap. This is what a setuid bubblewrap does after its mounts;
/// one run by root has no option for it.
///
/// System calls only, no allocation: it also runs between fork and exec.
fn enter_own_user_namespace() -> io::Result<()> {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    // The single mapping "0 <own id> 1" is the only one a process may write for itself
    // without a capability in the parent namespace; only root's is needed here.
    if !nix::unistd::getuid().is_root() || nix::unistd::getgid().as_raw() != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "only a task that is root in its sandbox gets a user namespace of its own",
        ));
    }
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)?;
    let write = |path: &std::ffi::CStr, text: &[u8]| -> io::Result<()> {
        use std::os::fd::{FromRawFd, OwnedFd};
        let raw = open(path, OFlag::O_WRONLY | OFlag::O_CLOEXEC, Mode::empty())?;
        // SAFETY: `open` just returned this descriptor, which nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let n = nix::unistd::write(&fd, text)?;
        if n == text.len() {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::WriteZero, "a short write"))
        }
    };
    write(c"/proc/self/setgroups", b"deny")?;
    write(c"/proc/self/uid_map", b"0 0 1")?;
    write(c"/proc/self/gid_map", b"0 0 1")?;
    Ok(())
}

/// Empties the calling process's bounding, ambient and inheritable capability sets: after
/// its exec, a root process then holds no capability (its permitted set is drawn from
/// those), while it stays uid 0 for the file modes.
///
/// Why: without bubblewrap a task on a root host runs as the host's root in the host's
/// namespaces, and Landlock bounds its file writes but not what capabilities allow besides
/// (rebooting the machine, loading a kernel module, reconfiguring the host's network,
/// changing its name). Written with `prctl` and `capset` rather than the `caps` crate, whose
/// functions build sets on the heap: this also runs between fork and exec.
///
/// System calls only, no allocation.
fn drop_capabilities() -> io::Result<()> {
    let last = |r: libc::c_int| {
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let (ambient, clear) = (libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL);
    // SAFETY: prctl with integer arguments only.
    let cleared = unsafe { libc::prctl(ambient, clear, 0, 0, 0) };
    last(cleared)?;
    for cap in 0..64 {
        // SAFETY: as above.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let e = io::Error::last_os_error();
            // Past the kernel's last capability.
            if e.raw_os_error() == Some(libc::EINVAL) {
                break;
            }
            return Err(e);
        }
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3: two 32-bit words per set.
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data::default(); 2];
    // SAFETY: the kernel writes two `Data` for version 3 into an array of two.
    last(unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } as i32)?;
    for d in &mut data {
        d.inheritable = 0;
    }
    // SAFETY: as above, read by the kernel.
    last(unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } as i32)
}

/// Joins the network namespace at `path` (as root, before the user is changed). System
/// calls only: it also runs between fork and exec.
fn join_netns(path: &std::ffi::CStr) -> io::Result<()> {
    use nix::fcntl::{open, OFlag};
    use std::os::fd::{FromRawFd, OwnedFd};
    let raw = open(
        path,
        OFlag::O_RDONLY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    // SAFETY: `open` just returned this descriptor, which nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    nix::sched::setns(fd, nix::sched::CloneFlags::CLONE_NEWNET)?;
    Ok(())
}

/// A setup-mode command line that does not read.
#[derive(Debug, thiserror::Error)]
enum ArgsError {
    #[error("{0} needs a value")]
    NoValue(&'static str),
    #[error("{0} needs a path")]
    NoPath(&'static str),
    #[error("{flag} {value}")]
    BadValue { flag: &'static str, value: String },
    #[error("--join: {0}")]
    Join(#[from] std::ffi::NulError),
    #[error("unknown argument {0}")]
    Unknown(String),
    #[error("no program after --")]
    NoProgram,
    #[error("no -- before the program")]
    NoSeparator,
}

/// `uid:gid:g1,g2,...`
fn parse_user(s: &str) -> Option<(u32, u32, Vec<Gid>)> {
    let mut parts = s.splitn(3, ':');
    let uid = parts.next()?.parse().ok()?;
    let gid = parts.next()?.parse().ok()?;
    let groups = parts
        .next()?
        .split(',')
        .filter(|g| !g.is_empty())
        .map(|g| g.parse().ok().map(Gid::from_raw))
        .collect::<Option<Vec<Gid>>>()?;
    Some((uid, gid, groups))
}

static HELPER: OnceLock<PathBuf> = OnceLock::new();

/// Starts programs through `executable`'s setup mode from now on. Its `main` must call
/// [`main_if_asked`] first. The first call wins.
pub fn use_helper(executable: PathBuf) {
    let _ = HELPER.set(executable);
}

/// The small executable that offers only the setup mode (`src/bin/exec.rs`), looked for
/// beside the host's own.
pub const SMALL_HELPER: &str = "agent-host-exec";

static OWN: OnceLock<PathBuf> = OnceLock::new();

/// Starts programs through a setup mode from now on (the `agent-host` binary calls it): of
/// [`SMALL_HELPER`] when it lies beside this executable (its exec costs a fraction of this
/// one's), else of this executable, which is also kept as the host's own
/// ([`own_executable`]). On Linux the own one is `/proc/self/exe`: the file this process
/// runs, even after an upgrade replaced the one at its path.
pub fn use_own_executable() {
    let own = PathBuf::from("/proc/self/exe");
    let own = if own.exists() {
        own
    } else if let Ok(exe) = std::env::current_exe() {
        exe
    } else {
        return;
    };
    let _ = OWN.set(own.clone());
    let small = std::env::current_exe()
        .ok()
        .and_then(|e| std::fs::canonicalize(e).ok())
        .and_then(|e| Some(e.parent()?.join(SMALL_HELPER)))
        .filter(|p| is_executable(p));
    use_helper(small.unwrap_or(own));
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The host's own executable, when it said which ([`use_own_executable`]): what runs the
/// hidden modes other than the setup (the egress relay).
pub fn own_executable() -> Option<&'static Path> {
    OWN.get().map(PathBuf::as_path)
}

/// The executable that offers the setup mode, if one was given.
pub fn helper() -> Option<&'static Path> {
    HELPER.get().map(PathBuf::as_path)
}

/// The setup mode: when this process was started as `EXE __exec-setup STEPS -- PROGRAM
/// ARGS`, applies the steps and execs the program; returns only when it was not. Call it
/// first thing in `main`. On failure it says why on stderr and exits with 125 (a step
/// failed), 126 (the program cannot be run) or 127 (not found).
pub fn main_if_asked() {
    let mut args = std::env::args_os();
    if args.nth(1).as_deref() != Some(OsStr::new(MODE)) {
        return;
    }
    std::process::exit(run(args.collect()));
}

fn run(args: Vec<OsString>) -> i32 {
    let fail = |what: String| {
        eprintln!("agent-host: cannot contain the task: {what}");
        STEP_FAILED
    };
    let (steps, command) = match Steps::parse(args) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    // Opened as the host's user, before any step changes who this process is.
    let (command, _held) = match super::pin::pin_binds(command, &steps.pin) {
        Ok(p) => p,
        Err(e) => return fail(format!("a folder of the sandbox: {e}")),
    };
    let mut ruleset = match steps.ruleset() {
        Ok(r) => r,
        Err(e) => return fail(format!("Landlock: {e}")),
    };
    if let Err((step, e)) = steps.apply(ruleset.as_mut()) {
        return fail(format!("{step}: {e}"));
    }
    let (program, args) = match command.split_first() {
        Some(c) => c,
        None => return fail("no program".into()),
    };
    let err = std::process::Command::new(program).args(args).exec();
    eprintln!(
        "agent-host: cannot run {}: {err}",
        Path::new(program).display()
    );
    if err.kind() == io::ErrorKind::NotFound {
        NOT_FOUND
    } else {
        NOT_EXECUTABLE
    }
}

/// The command that runs `program args` with `steps` applied first: through the setup mode
/// when an executable offers it, else in a pre-exec hook; without steps, the program alone.
pub fn command(
    steps: Steps,
    program: &Path,
    args: &[String],
) -> Result<tokio::process::Command, SandboxError> {
    if steps.is_empty() {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        return Ok(cmd);
    }
    if let Some(helper) = helper() {
        let mut cmd = tokio::process::Command::new(helper);
        cmd.arg(MODE)
            .args(steps.to_args())
            .arg("--")
            .arg(program)
            .args(args);
        return Ok(cmd);
    }
    let mut ruleset = steps.ruleset().map_err(SandboxError::Landlock)?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    // SAFETY: the hook runs in the forked child before exec and only makes system calls on
    // values prepared before the fork ([`Steps::apply`]).
    unsafe {
        cmd.pre_exec(move || steps.apply(ruleset.as_mut()).map_err(|(_, e)| e));
    }
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_survive_the_command_line() {
        let steps = Steps {
            join: vec![
                CString::new("/sys/fs/cgroup/pids/a b/task-1/cgroup.procs").unwrap(),
                CString::new("/sys/fs/cgroup/freezer/x/cgroup.procs").unwrap(),
            ],
            netns: Some(CString::new("/proc/4242/fd/17").unwrap()),
            file_size: Some(1 << 20),
            user: Some((65534, 65534, vec![Gid::from_raw(65534), Gid::from_raw(7)])),
            landlock: Some(vec!["/work".into(), "/home/u/.cache".into()]),
            scope_sockets: true,
            session: true,
            own_userns: true,
            drop_caps: true,
            pin: vec!["/work".into(), "/work/.agent-host/attachments/t".into()],
        };
        let mut args = steps.to_args();
        args.extend(["--", "/bin/prog", "--", "-x"].map(OsString::from));
        let (back, command) = Steps::parse(args).unwrap();
        assert_eq!(back, steps);
        assert_eq!(command, ["/bin/prog", "--", "-x"].map(OsString::from));

        let none = Steps::default();
        assert!(none.is_empty() && none.to_args().is_empty());
        let (back, _) = Steps::parse(vec!["--".into(), "p".into()]).unwrap();
        assert!(back.is_empty());
        let no_groups = Steps {
            user: Some((1, 2, Vec::new())),
            landlock: Some(Vec::new()),
            ..Steps::default()
        };
        let mut args = no_groups.to_args();
        args.extend(["--", "p"].map(OsString::from));
        assert_eq!(Steps::parse(args).unwrap().0, no_groups);
    }

    #[test]
    fn bad_setup_arguments_are_refused() {
        for bad in [
            vec!["--fsize", "x", "--", "p"],
            vec!["--user", "1:2", "--", "p"],
            vec!["--join"],
            vec!["--what", "--", "p"],
            vec!["--session"],
            vec!["--session", "--"],
        ] {
            let args = bad.iter().map(OsString::from).collect();
            assert!(Steps::parse(args).is_err(), "{bad:?}");
        }
    }
}
