#!/usr/bin/env bash
# Where a sandboxed task's start goes: the pieces of the chain agent-host runs for a task,
# each timed alone with `perf stat -r N` (elapsed time and task-clock, the CPU of the command
# and its children), on /bin/true as the program, so that each row's difference from the one
# above is that piece's price:
#   bare exec        a program with no C library that only exits (built here with cc when
#                    there is one): the kernel's fork and exec alone, so that the row below
#                    shows what the C library's start costs every program of the chain
#   exec             /bin/true itself (fork and exec from perf)
#   setup exec       the setup mode (`__exec-setup`), which then execs the program: of
#                    agent-host itself, and of the small `agent-host-exec` beside it (what the
#                    host starts when it is there)
#   bubblewrap       the sandbox as a task on a root host gets it (no network namespace)
#   + netns          the same with its own network namespace (`--unshare-net`, what the relay
#                    mode and `none` add)
#   setup + bwrap    the whole chain of the `open` mode: setup exec, then bubblewrap
#   root task        the same with the step a root task's sandbox runs before the program
#                    (its own user namespace), by the setup mode and by `agent-host-enter`,
#                    the program with no C library that agent-host embeds (as root only)
#
# Usage: bench/sandbox-start.sh [RUNS]   (AGENT_HOST_BIN: the binary; default a release build;
#   AGENT_HOST_ENTER: agent-host-enter, default the one the release build made)
# Needs perf and bubblewrap. Prints a markdown table on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
runs="${1:-300}"
bin="${AGENT_HOST_BIN:-}"
if [[ -z "$bin" ]]; then
    (cd "$root" && cargo build --release --quiet --bin agent-host -p agent-host)
    bin="$target/release/agent-host"
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/sandbox-start.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bwrap=(bwrap --die-with-parent --unshare-pid --unshare-ipc --unshare-user --uid 0 --gid 0
    --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --tmpfs /run
    --bind "$work" "$work" --chdir "$work")
echo "sandbox-start.sh: $(nproc) cores, $(uptime | sed 's/.*load/load/'); $bin; $runs runs each" >&2

# measure NAME CMD...: one table row (elapsed mean, task-clock mean).
measure() {
    local name=$1
    shift
    local out elapsed clock
    out="$(perf stat -r "$runs" -x, -e task-clock -- "$@" 2>&1 >/dev/null)"
    clock="$(echo "$out" | awk -F, '/task-clock/ {printf "%.3f", $1}')"
    # The elapsed time is not in -x output: a second, plain run of perf for it.
    elapsed="$(perf stat -r "$runs" -- "$@" 2>&1 >/dev/null |
        awk '/seconds time elapsed/ {printf "%.3f", $1 * 1000}')"
    echo "| $name | $elapsed ms | $clock ms |"
}

echo "| piece | elapsed (mean of $runs) | CPU, task-clock (mean) |"
echo "|---|---|---|"
# exit_group(0) straight from the entry point: no loader, no C library start.
cat >"$work/bare.c" <<'C'
void _start(void) {
#if defined(__x86_64__)
    __asm__ volatile("mov $231, %eax\n xor %edi, %edi\n syscall");
#elif defined(__aarch64__)
    __asm__ volatile("mov x0, #0\n mov x8, #94\n svc #0");
#endif
}
C
if cc -O2 -static -nostdlib -o "$work/bare" "$work/bare.c" 2>/dev/null; then
    measure "exec of a program with no C library" "$work/bare"
fi
measure "exec of /bin/true" /bin/true
small="$(dirname "$bin")/agent-host-exec"
measure "setup exec (agent-host), then /bin/true" "$bin" __exec-setup -- /bin/true
if [[ -x "$small" ]]; then
    measure "setup exec (agent-host-exec), then /bin/true" "$small" __exec-setup -- /bin/true
else
    small="$bin"
fi
measure "bubblewrap, then /bin/true" "${bwrap[@]}" -- /bin/true
measure "bubblewrap with --unshare-net" "${bwrap[@]}" --unshare-net -- /bin/true
measure "setup exec ($(basename "$small")), bubblewrap, /bin/true" "$small" __exec-setup -- "${bwrap[@]}" -- /bin/true
if [[ $(id -u) -eq 0 ]]; then
    inside=(--ro-bind "$small" /run/agent-host/agent-host-exec --
        /run/agent-host/agent-host-exec __exec-setup --own-userns -- /bin/true)
    measure "root task: setup exec, bubblewrap, setup exec inside, /bin/true" \
        "$small" __exec-setup -- "${bwrap[@]}" "${inside[@]}"
    enter="${AGENT_HOST_ENTER:-$(find "$target/release/build" -path '*/out/agent-host-enter' \
        -newer "$root/helpers/enter.rs" 2>/dev/null | head -n 1)}"
    if [[ -n "$enter" && -x "$enter" ]]; then
        inside=(--ro-bind "$enter" /run/agent-host/enter -- /run/agent-host/enter /bin/true)
        measure "root task: setup exec, bubblewrap, agent-host-enter inside, /bin/true" \
            "$small" __exec-setup -- "${bwrap[@]}" "${inside[@]}"
    fi
fi
