#!/usr/bin/env bash
# The side-by-side benchmark: agent-host vs a Node A2A host built on @a2a-js/sdk 1.3.0 (the
# baseline) and vs the floor, `floor-relay` (bench/harness/src/bin/floor-relay.rs): the least a
# host can do for the same job, a thread per connection that starts the CLI and relays each of
# its lines as an SSE frame, with no store, no limits and no sandbox. The table gives
# baseline ÷ agent-host (above 1: agent-host costs less) and agent-host ÷ floor (how far
# agent-host is from the floor; 1 is the floor itself).
#
# Usage: bench/run.sh [--scale F] [--only SCENARIO] [--hosts LIST]
#   --scale F   multiply the event/task counts of the CPU and latency loads by F (default 1)
#   --only S    run these scenarios (comma-separated: cpu-50x100, cpu-10x1000, cpu-50x1000,
#               cpu-1x10000, cpu-1x2000, latency-1, latency-100, latency-500, start, live-1000,
#               hosts)
#   --hosts L   run only these hosts (comma-separated: agent-host, baseline, floor,
#               agent-host-sqlite, agent-host-postgres, agent-host-postgres-2,
#               agent-host-detached); a table row needs agent-host (a host left out shows
#               as –); every run's summary goes to stderr
#   --sandbox M agent-host's --sandbox mode (default: its own, auto: bubblewrap and a cgroup
#               per task where the machine has them; the baseline runs its CLIs bare)
#
# The CPU and latency loads also run agent-host on its SQLite store and, when a PostgreSQL
# database answers at AGENT_HOST_BENCH_PG (else AGENT_HOST_TEST_PG, else
# postgres://root@127.0.0.1:5432/test), on the PostgreSQL store (a fresh schema per run, dropped
# after it): one host, and two hosts where each task is sent to one and streamed from the other;
# without a database those rows are skipped with a note. With the database on this machine those
# rows also give its server's CPU per event, and a second table puts the stores side by side
# (PostgreSQL against SQLite, the database server's CPU counted in a total per event). A third
# table (`hosts`) gives the events per second that 1, 2 and 4 hosts on one database deliver
# together, 40 streams of 5,000 events spread over them, with the CPU per event of the hosts
# and of the database server and how many of the machine's cores they kept busy.
#
# Builds agent-host and the harness (bench/harness: the fake CLI `bench-cli`, the floor
# `floor-relay` and the load generator `loadgen`) in release mode, installs the baseline's
# pinned npm packages into bench/baseline/node_modules when missing, then runs every scenario
# on a fresh agent-host, a fresh baseline and a fresh floor in turn, and prints the table (markdown) on stdout; progress and each
# run's summary go to stderr. Everything listens on 127.0.0.1; every load is bounded in count
# and time, the whole run by a 30-minute timeout; hosts and their CLIs are stopped on exit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
# Where cargo puts the binaries (CARGO_TARGET_DIR when set).
target="${CARGO_TARGET_DIR:-$root/target}"

echo "run.sh: building (release)" >&2
(cd "$root" && cargo build --release --quiet --bin agent-host -p agent-host \
    && cargo build --release --quiet -p agent-host-bench)
if [[ ! -d "$here/baseline/node_modules/@a2a-js/sdk" ]]; then
    echo "run.sh: installing the baseline's packages (npm ci)" >&2
    (cd "$here/baseline" && npm ci --no-audit --no-fund --silent)
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-bench.XXXXXX")"
lg_pid=""
cleanup() {
    if [[ -n "$lg_pid" ]] && kill -0 "$lg_pid" 2>/dev/null; then
        # loadgen stops its hosts when it ends; a TERM'd loadgen cannot, so stop its group.
        kill -TERM -- "-$lg_pid" 2>/dev/null || true
        sleep 1
        kill -KILL -- "-$lg_pid" 2>/dev/null || true
    fi
    # Any host left behind (each leads its own process group, started from loadgen).
    for f in /proc/[0-9]*/cwd; do
        pid="${f#/proc/}"; pid="${pid%/cwd}"
        if [[ "$(readlink "$f" 2>/dev/null)" == "$work" ]]; then
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "run.sh: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(free -g | awk '/^Mem:/ {print $2}') GiB; work dir $work" >&2
setsid timeout 1800 "$target/release/loadgen" \
    --agent-host "$target/release/agent-host" \
    --baseline "$here/baseline/server.mjs" \
    --cli "$target/release/bench-cli" \
    --floor "$target/release/floor-relay" \
    --work "$work" \
    --postgres "${AGENT_HOST_BENCH_PG:-${AGENT_HOST_TEST_PG:-postgres://root@127.0.0.1:5432/test}}" "$@" &
lg_pid=$!
wait "$lg_pid"
