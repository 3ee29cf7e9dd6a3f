//! `agent-host-enter`: what a root task's sandbox runs just before the task's program, built
//! by `build.rs` and embedded in agent-host (see `src/runner/sandbox/enter.rs`).
//!
//! `agent-host-enter PROGRAM ARGS...` enters a user namespace of its own (root in it mapped
//! to root in bubblewrap's), so that the sandbox's mounts belong to a namespace in which the
//! task holds no capability, and execs `PROGRAM` (looked up in `PATH` when it names no
//! folder) with its arguments and environment. `agent-host-enter --probe` only exits 0.
//!
//! Why a program of its own with no C library: on a virtual machine, glibc's start asks the
//! processor about itself some hundred times with `cpuid`, which the hypervisor emulates,
//! and costs 0.7–0.9 ms of CPU before `main` where the kernel's exec costs 0.04 ms
//! (bench/log/2026-11-30-exec-start-and-commits.md). This step needs six system calls, so it
//! makes them itself. No crate gives such a program on stable Rust to a package whose profile
//! unwinds on panic (`no_std` needs `panic = "abort"`, which a profile cannot set for one
//! package); the build script compiles this one file alone with `-C panic=abort`.
//!
//! Exit status: 125 when the namespace cannot be entered, 126 when the program cannot be
//! run, 127 when it is not found (as the setup mode and shells use them).

#![no_std]
#![no_main]

#[cfg(target_arch = "x86_64")]
mod arch {
    pub const WRITE: usize = 1;
    pub const CLOSE: usize = 3;
    pub const EXECVE: usize = 59;
    pub const GETUID: usize = 102;
    pub const GETGID: usize = 104;
    pub const OPENAT: usize = 257;
    pub const UNSHARE: usize = 272;
    pub const EXIT_GROUP: usize = 231;

    core::arch::global_asm!(
        ".globl _start",
        "_start:",
        "xor ebp, ebp",
        "mov rdi, rsp",
        "and rsp, -16",
        "call {entry}",
        "ud2",
        entry = sym super::entry,
    );

    /// A system call with up to three arguments; a negative result is `-errno`.
    ///
    /// # Safety
    /// The arguments must be what the kernel expects of system call `n`.
    pub unsafe fn syscall(n: usize, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: the caller passes a valid system call; `syscall` clobbers rcx and r11.
        unsafe {
            core::arch::asm!(
                "syscall",
                inlateout("rax") n as isize => ret,
                in("rdi") a,
                in("rsi") b,
                in("rdx") c,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack)
            );
        }
        ret
    }
}

#[cfg(target_arch = "aarch64")]
mod arch {
    pub const WRITE: usize = 64;
    pub const CLOSE: usize = 57;
    pub const EXECVE: usize = 221;
    pub const GETUID: usize = 174;
    pub const GETGID: usize = 176;
    pub const OPENAT: usize = 56;
    pub const UNSHARE: usize = 97;
    pub const EXIT_GROUP: usize = 94;

    core::arch::global_asm!(
        ".globl _start",
        "_start:",
        "mov x29, #0",
        "mov x30, #0",
        "mov x0, sp",
        "bl {entry}",
        "brk #0",
        entry = sym super::entry,
    );

    /// A system call with up to three arguments; a negative result is `-errno`.
    ///
    /// # Safety
    /// The arguments must be what the kernel expects of system call `n`.
    pub unsafe fn syscall(n: usize, a: usize, b: usize, c: usize) -> isize {
        let ret: isize;
        // SAFETY: the caller passes a valid system call.
        unsafe {
            core::arch::asm!(
                "svc #0",
                in("x8") n,
                inlateout("x0") a as isize => ret,
                in("x1") b,
                in("x2") c,
                options(nostack)
            );
        }
        ret
    }
}

use arch::syscall;

const AT_FDCWD: isize = -100;
const O_WRONLY: usize = 0o1;
const O_CLOEXEC: usize = 0o2_000_000;
const CLONE_NEWUSER: usize = 0x1000_0000;
const ENOENT: isize = 2;
const EACCES: isize = 13;
const EPERM: isize = 1;

const STEP_FAILED: usize = 125;
const NOT_EXECUTABLE: usize = 126;
const NOT_FOUND: usize = 127;

fn exit(code: usize) -> ! {
    // SAFETY: exit_group takes a status and does not return.
    unsafe { syscall(arch::EXIT_GROUP, code, 0, 0) };
    #[allow(clippy::empty_loop)]
    loop {}
}

fn say(parts: &[&[u8]]) {
    for p in parts {
        // SAFETY: a valid buffer and its length, on standard error.
        unsafe { syscall(arch::WRITE, 2, p.as_ptr() as usize, p.len()) };
    }
}

/// The decimal digits of `n` in `buf`, returned as a slice of it.
fn digits(mut n: usize, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || i == 0 {
            return &buf[i..];
        }
    }
}

/// The words of a few errors this program meets, else none (the number says it).
fn error_text(errno: isize) -> &'static [u8] {
    match errno {
        1 => b"Operation not permitted ",
        2 => b"No such file or directory ",
        8 => b"Exec format error ",
        13 => b"Permission denied ",
        20 => b"Not a directory ",
        22 => b"Invalid argument ",
        28 => b"No space left on device ",
        87 => b"Too many users ",
        _ => b"",
    }
}

fn say_error(errno: isize) {
    let mut buf = [0u8; 20];
    say(&[
        error_text(errno),
        b"(os error ",
        digits(errno.unsigned_abs(), &mut buf),
        b")\n",
    ]);
}

/// The bytes of the C string at `p`, without its NUL.
///
/// # Safety
/// `p` points to a NUL-terminated string.
unsafe fn c_bytes<'a>(p: *const u8) -> &'a [u8] {
    let mut n = 0;
    // SAFETY: the string ends with a NUL, which the loop stops at.
    unsafe {
        while *p.add(n) != 0 {
            n += 1;
        }
        core::slice::from_raw_parts(p, n)
    }
}

/// Writes `text` to the file at `path` (NUL-terminated); `-errno` on failure.
fn write_file(path: &[u8], text: &[u8]) -> Result<(), isize> {
    // SAFETY: `path` ends with a NUL; the flags open it for writing.
    let fd = unsafe {
        syscall(
            arch::OPENAT,
            AT_FDCWD as usize,
            path.as_ptr() as usize,
            O_WRONLY | O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(-fd);
    }
    // SAFETY: a valid buffer on the descriptor just opened, then closed.
    let n = unsafe { syscall(arch::WRITE, fd as usize, text.as_ptr() as usize, text.len()) };
    // SAFETY: as above.
    unsafe { syscall(arch::CLOSE, fd as usize, 0, 0) };
    match n {
        n if n < 0 => Err(-n),
        n if n as usize != text.len() => Err(22),
        _ => Ok(()),
    }
}

/// A user namespace of its own, root in it mapped to root in the caller's: the only mapping
/// a process may write for itself without a capability in the parent namespace.
fn own_user_namespace() -> Result<(), isize> {
    // SAFETY: neither call takes an argument.
    let (uid, gid) = unsafe {
        (
            syscall(arch::GETUID, 0, 0, 0),
            syscall(arch::GETGID, 0, 0, 0),
        )
    };
    if uid != 0 || gid != 0 {
        return Err(EPERM);
    }
    // SAFETY: unshare takes its flags.
    let r = unsafe { syscall(arch::UNSHARE, CLONE_NEWUSER, 0, 0) };
    if r < 0 {
        return Err(-r);
    }
    write_file(b"/proc/self/setgroups\0", b"deny")?;
    write_file(b"/proc/self/uid_map\0", b"0 0 1")?;
    write_file(b"/proc/self/gid_map\0", b"0 0 1")
}

/// `PATH`'s value in `envp`, or the shells' default.
///
/// # Safety
/// `envp` is the NUL-terminated array of the process's environment.
unsafe fn path_var<'a>(envp: *const *const u8) -> &'a [u8] {
    let mut i = 0;
    // SAFETY: the array ends with a null pointer, each entry is a C string.
    unsafe {
        while !(*envp.add(i)).is_null() {
            let e = c_bytes(*envp.add(i));
            if let Some(v) = e.strip_prefix(b"PATH=") {
                return v;
            }
            i += 1;
        }
    }
    b"/usr/local/bin:/usr/bin:/bin"
}

/// Execs `argv[0]` (a folder named, or each of `PATH`'s in turn) and returns the error that
/// stopped it.
///
/// # Safety
/// `argv` and `envp` are the process's NUL-terminated arrays.
unsafe fn exec(argv: *const *const u8, envp: *const *const u8) -> isize {
    // SAFETY: per the function's contract.
    let program = unsafe { c_bytes(*argv) };
    let run = |path: *const u8| -> isize {
        // SAFETY: a C string and the process's arrays; returns only on failure.
        -unsafe { syscall(arch::EXECVE, path as usize, argv as usize, envp as usize) }
    };
    if program.contains(&b'/') {
        return run(program.as_ptr());
    }
    let mut buf = [0u8; 4096];
    let mut found = ENOENT;
    // SAFETY: per the function's contract.
    for dir in unsafe { path_var(envp) }.split(|&b| b == b':') {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        let len = dir.len() + 1 + program.len();
        if len >= buf.len() {
            continue;
        }
        buf[..dir.len()].copy_from_slice(dir);
        buf[dir.len()] = b'/';
        buf[dir.len() + 1..len].copy_from_slice(program);
        buf[len] = 0;
        match run(buf.as_ptr()) {
            ENOENT | 20 => {}
            // Found but not runnable: said unless a later folder has one that runs.
            EACCES => found = EACCES,
            e => return e,
        }
    }
    found
}

/// The process's entry: `sp` points at `argc`, then `argv`, its null, then `envp`.
///
/// # Safety
/// Called once, by `_start`, with the stack the kernel made.
unsafe extern "C" fn entry(sp: *const usize) -> ! {
    // SAFETY: the layout the kernel gives every new program.
    let (argc, argv) = unsafe { (*sp, sp.add(1) as *const *const u8) };
    // SAFETY: as above: the environment follows argv's null.
    let envp = unsafe { argv.add(argc + 1) };
    if argc < 2 {
        say(&[b"agent-host-enter: agent-host runs this program in a root task's sandbox (agent-host-enter PROGRAM ARGS); it is not meant to be run by hand\n"]);
        exit(2);
    }
    // SAFETY: argv[1] exists (argc >= 2).
    let first = unsafe { c_bytes(*argv.add(1)) };
    if first == b"--probe" {
        exit(0);
    }
    if let Err(e) = own_user_namespace() {
        say(&[b"agent-host: cannot contain the task: a user namespace of its own: "]);
        if e == EPERM {
            say(&[b"only a task that is root in its sandbox gets one; "]);
        }
        say_error(e);
        exit(STEP_FAILED);
    }
    // SAFETY: argv + 1 is the program's own NUL-terminated argv.
    let e = unsafe { exec(argv.add(1), envp) };
    say(&[b"agent-host: cannot run ", first, b": "]);
    say_error(e);
    exit(if e == ENOENT {
        NOT_FOUND
    } else {
        NOT_EXECUTABLE
    })
}

// What a C library would give the code the compiler generates (copies, fills, the length
// of a C string): byte by byte, through volatile accesses so that the compiler does not turn
// these very loops into calls of themselves. And the symbol that the precompiled `core`'s
// unwinding tables name, never called here (a panic exits).

/// # Safety
/// As C's `memcpy`.
#[no_mangle]
pub unsafe extern "C" fn memcpy(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: the caller's buffers hold `n` bytes each.
        unsafe { core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i))) };
    }
    dst
}

/// # Safety
/// As C's `memmove`.
#[no_mangle]
pub unsafe extern "C" fn memmove(dst: *mut u8, src: *const u8, n: usize) -> *mut u8 {
    if (dst as usize) <= (src as usize) {
        // SAFETY: forwards, each byte read before it can be overwritten.
        return unsafe { memcpy(dst, src, n) };
    }
    for i in (0..n).rev() {
        // SAFETY: the caller's buffers hold `n` bytes each; backwards for an overlap.
        unsafe { core::ptr::write_volatile(dst.add(i), core::ptr::read_volatile(src.add(i))) };
    }
    dst
}

/// # Safety
/// As C's `memset`.
#[no_mangle]
pub unsafe extern "C" fn memset(dst: *mut u8, c: i32, n: usize) -> *mut u8 {
    for i in 0..n {
        // SAFETY: the caller's buffer holds `n` bytes.
        unsafe { core::ptr::write_volatile(dst.add(i), c as u8) };
    }
    dst
}

/// # Safety
/// As C's `memcmp`.
#[no_mangle]
pub unsafe extern "C" fn memcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    for i in 0..n {
        // SAFETY: the caller's buffers hold `n` bytes each.
        let (x, y) = unsafe {
            (
                core::ptr::read_volatile(a.add(i)),
                core::ptr::read_volatile(b.add(i)),
            )
        };
        if x != y {
            return i32::from(x) - i32::from(y);
        }
    }
    0
}

/// # Safety
/// As C's `bcmp`.
#[no_mangle]
pub unsafe extern "C" fn bcmp(a: *const u8, b: *const u8, n: usize) -> i32 {
    // SAFETY: as memcmp.
    unsafe { memcmp(a, b, n) }
}

/// # Safety
/// As C's `strlen`.
#[no_mangle]
pub unsafe extern "C" fn strlen(s: *const u8) -> usize {
    let mut n = 0;
    // SAFETY: the string ends with a NUL, which the loop stops at.
    while unsafe { core::ptr::read_volatile(s.add(n)) } != 0 {
        n += 1;
    }
    n
}

#[no_mangle]
extern "C" fn rust_eh_personality() {}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    say(&[b"agent-host-enter: internal error\n"]);
    exit(STEP_FAILED)
}
