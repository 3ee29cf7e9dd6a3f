#!/usr/bin/env bash
# The memory bench: what a task with very long output lines costs the host, in resident memory.
#
# Usage: bench/memory.sh [--lines N] [--bytes B] [--store sqlite|memory]
#   --lines N   lines of output of the task (default 3)
#   --bytes B   bytes of text in each line (default 15000000: three lines of 15 MB, under the
#               16 MiB line limit and, together, under the 64 MiB kept per task)
#   --store S   the host's store (default sqlite, the host's own default)
#
# Builds agent-host and bench-cli (bench/harness) in release mode, unless AGENT_HOST_BIN and
# BENCH_CLI name binaries to use. For each way a client can follow a task (a blocking
# SendMessage that answers with the whole task; a SendStreamingMessage SSE stream; a
# SendMessage with returnImmediately and nobody following, then one GetTask once the agent
# exited), it starts a fresh
# host (`--adapter jsonl`, AGENT_BINARY = bench-cli, prompt `n=N bytes=B`) on 127.0.0.1, reads
# its VmRSS from /proc when it is idle, runs one task to its end with curl, reads VmRSS again
# a second after the task ended (what the host keeps), and VmHWM (its peak resident memory),
# then stops it. Prints one markdown table on stdout; progress goes to stderr. Every host is
# stopped on exit; every request has a time limit.
set -euo pipefail

lines=3
bytes=15000000
store=sqlite
while [[ $# -gt 0 ]]; do
    case "$1" in
        --lines) lines="$2"; shift 2 ;;
        --bytes) bytes="$2"; shift 2 ;;
        --store) store="$2"; shift 2 ;;
        *) echo "usage: bench/memory.sh [--lines N] [--bytes B] [--store sqlite|memory]" >&2; exit 2 ;;
    esac
done

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
host_bin="${AGENT_HOST_BIN:-}"
cli_bin="${BENCH_CLI:-}"
if [[ -z "$host_bin" || -z "$cli_bin" ]]; then
    echo "memory.sh: building (release)" >&2
    (cd "$root" && cargo build --release --quiet --bin agent-host -p agent-host \
        && cargo build --release --quiet -p agent-host-bench --bin bench-cli)
    host_bin="${host_bin:-$target/release/agent-host}"
    cli_bin="${cli_bin:-$target/release/bench-cli}"
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-memory.XXXXXX")"
host_pid=""
cleanup() {
    if [[ -n "$host_pid" ]] && kill -0 "$host_pid" 2>/dev/null; then
        kill -TERM "$host_pid" 2>/dev/null || true
        wait "$host_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# A /proc/PID/status field in MiB (one decimal).
field() { awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

start_host() {
    local dir="$1"
    mkdir -p "$dir"
    local store_arg="memory"
    [[ "$store" == sqlite ]] && store_arg="sqlite:$dir/tasks.db"
    AGENT_BINARY="$cli_bin" "$host_bin" serve --adapter jsonl --port 0 --store "$store_arg" \
        --repo-path "$dir" --sandbox off --color never >"$dir/log" 2>&1 &
    host_pid=$!
    for _ in $(seq 200); do
        url="$(grep -o 'listening on http://[0-9.:]*' "$dir/log" | head -1 | sed 's/listening on //')" || true
        [[ -n "$url" ]] && return 0
        sleep 0.05
    done
    echo "memory.sh: the host did not start; its log:" >&2
    cat "$dir/log" >&2
    exit 1
}

stop_host() {
    kill -TERM "$host_pid" 2>/dev/null || true
    wait "$host_pid" 2>/dev/null || true
    host_pid=""
}

rpc() {
    local method="$1" params="$2" out="$3"
    shift 3
    curl -sS --max-time 600 "$@" -X POST "$url/" -H 'content-type: application/json' \
        -d "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$method\",\"params\":$params}" -o "$out"
}

message="{\"message\":{\"messageId\":\"m-1\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"n=$lines bytes=$bytes\"}]}"

echo "| how the client follows the task ($lines lines of $bytes bytes, $store store) | RSS idle | peak RSS (VmHWM) | RSS 1 s after the end | bytes the client got |"
echo "|---|---|---|---|---|"
for mode in blocking stream detached; do
    dir="$work/$mode"
    start_host "$dir"
    sleep 0.5
    idle="$(field "$host_pid" VmRSS)"
    echo "memory.sh: $mode: host pid $host_pid at $url, idle RSS $idle MiB" >&2
    case "$mode" in
        blocking)
            rpc SendMessage "$message}" "$dir/out"
            ;;
        stream)
            rpc SendStreamingMessage "$message}" "$dir/out" -N -H 'accept: text/event-stream'
            ;;
        detached)
            rpc SendMessage "$message,\"configuration\":{\"returnImmediately\":true}}" "$dir/sent"
            id="$(grep -o '"id":"[^"]*"' "$dir/sent" | head -1 | cut -d'"' -f4)"
            # Wait for the end without reading the task: the host logs the agent's exit.
            for _ in $(seq 1200); do
                grep -q 'agent exited' "$dir/log" && break
                sleep 0.1
            done
            sleep 0.5
            rpc GetTask "{\"id\":\"$id\"}" "$dir/out"
            ;;
    esac
    got="$(stat -c %s "$dir/out")"
    if ! grep -q 'TASK_STATE_COMPLETED' "$dir/out"; then
        echo "memory.sh: $mode: the task did not complete; the host's log:" >&2
        tail -20 "$dir/log" >&2
    fi
    sleep 1
    after="$(field "$host_pid" VmRSS)"
    peak="$(field "$host_pid" VmHWM)"
    echo "| $mode | $idle MiB | $peak MiB | $after MiB | $got |"
    stop_host
done
