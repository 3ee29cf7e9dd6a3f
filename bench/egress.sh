#!/usr/bin/env bash
# The cost of the default `proxy` network mode against `open`, in the same run: task start
# (send to the first output frame, p50/p99, host CPU per start) and the first byte of a
# model request through the proxy against a direct one (bench/egress.py says how); and the
# sandbox's own cost at a task's start (the default sandbox with `open` against none).
#
# Usage: bench/egress.sh [N_STARTS] [N_REQUESTS]
#   AGENT_HOST_BIN=path  the binary to measure (default: a release build, made here)
#   GAP_MS=G             a pause of G ms before each start (default none: back to back)
#   ROUNDS=R             the modes alternate R times (default 4)
# Needs bubblewrap (the sandbox), curl and python3. Prints a markdown table on stdout.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="${AGENT_HOST_BIN:-}"
if [[ -z "$bin" ]]; then
    echo "egress.sh: building (release)" >&2
    (cd "$root" && cargo build --release --quiet --bin agent-host -p agent-host)
    bin="$target/release/agent-host"
fi
echo "egress.sh: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); $bin" >&2
timeout 1200 python3 "$here/egress.py" "$bin" "${1:-100}" "${2:-100}"
