//! Landlock, where bubblewrap is missing: the task may write only its working directory, the
//! adapter's state folders, `/tmp` and `/dev` (terminals, `/dev/null`); everything else is
//! read-only. Through the `landlock` crate, the Landlock maintainers' own.
//!
//! Landlock cannot hide files (reading the host's database stays possible where file modes
//! allow it) nor processes; that needs bubblewrap.
//!
//! Where the task shares the host's network (`sandbox_network = "open"`, or no bubblewrap),
//! it also shares the host's abstract Unix sockets, which no mount hides (a desktop's X11 or
//! D-Bus, a container runtime's shim). From Landlock's ABI 6 (Linux 6.12) a domain can be
//! scoped: its processes then reach only the abstract sockets made inside it
//! ([`ABSTRACT_SCOPE_ABI`]).

use std::path::PathBuf;

use landlock::{
    path_beneath_rules, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr,
    RulesetError, Scope, ABI,
};

/// The newest ABI this code knows the access rights of.
const ABI_USED: ABI = ABI::V5;

/// The first ABI that scopes abstract Unix sockets.
pub const ABSTRACT_SCOPE_ABI: i32 = 6;

/// The kernel's Landlock ABI version, if Landlock is on.
pub fn abi() -> Option<i32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // a number; it reads no memory.
    let v = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v as i32)
}

/// A ruleset built before the program runs, applied by [`Prepared::restrict_self`].
#[derive(Debug)]
pub struct Prepared(Option<RulesetCreated>);

impl Prepared {
    /// The ruleset that limits writes to `write` (when given) and, when `scope_sockets`, the
    /// abstract Unix sockets to the task's own. `privileged`: the process that applies it
    /// may (root), so it need not set `no_new_privs` first, which would keep a setuid
    /// bubblewrap started after it from working.
    pub fn new(
        write: Option<&[PathBuf]>,
        scope_sockets: bool,
        privileged: bool,
    ) -> Result<Prepared, RulesetError> {
        let all = AccessFs::from_all(ABI_USED);
        let mut ruleset = Ruleset::default();
        if write.is_some() {
            // Without bubblewrap the task sees the host's processes: it may not signal
            // them either (kernels with Landlock ABI 6; ignored by older ones).
            ruleset = ruleset.handle_access(all)?.scope(Scope::Signal)?;
        }
        if scope_sockets {
            ruleset = ruleset.scope(Scope::AbstractUnixSocket)?;
        }
        let mut created = ruleset.create()?;
        if let Some(write) = write {
            let mut writable: Vec<PathBuf> = write.iter().filter(|p| p.exists()).cloned().collect();
            writable.extend(["/tmp", "/dev", "/proc/self"].map(PathBuf::from));
            created = created
                .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI_USED)))
                .and_then(|r| r.add_rules(path_beneath_rules(&writable, all)))?;
        }
        // Writes limited: `no_new_privs` as always (nothing setuid runs after it).
        let privileged = privileged && write.is_none();
        Ok(Prepared(Some(created.no_new_privs(!privileged))))
    }

    /// In the task's first process: no new privileges, then the ruleset. Makes system calls
    /// only (the crate allocates solely to report an error), so it may run between fork and
    /// exec.
    pub fn restrict_self(&mut self) -> std::io::Result<()> {
        match self.0.take() {
            Some(r) => r
                .restrict_self()
                .map(|_| ())
                .map_err(|_| std::io::Error::other("landlock_restrict_self failed")),
            None => Ok(()),
        }
    }
}
