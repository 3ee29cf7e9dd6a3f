#!/usr/bin/env bash
# Regenerates link/start.ld: the list of the functions agent-host executes from its start
# through a short serving phase (four streamed tasks and one sent, whose agent prints a line
# every 10 ms) until it idles, which build.rs gives the linker of a release build on Linux so that they sit
# side by side at the front of the code (see build.rs for why). Run it after changes that
# alter what the start runs (a new dependency, a new step at start); a stale list still links,
# it only packs less.
#
#   scripts/start-layout.sh
#
# LAYOUT_BIN=PATH profiles that agent-host binary (a release build linked with its symbols, in
# the default layout) instead of linking one; LAYOUT_PERF_BIN=PATH, the same in the current
# layout, for perf.
#
# Needs: cargo, valgrind (callgrind and callgrind_control), curl, nm (binutils), and
# linux-perf (`perf`; optional, it adds what the start runs natively but not under valgrind,
# such as code chosen by CPU features or system calls valgrind does not know). Debian:
# `apt-get install valgrind linux-perf curl binutils`.
#
# What it does: links release binaries with their symbols (`cargo rustc --release -- -C
# strip=none`; only the final crate is rebuilt, and the next plain release build rebuilds the
# stripped one), one in the default layout (AGENT_HOST_START_LAYOUT=off) and one in the
# current layout. It starts each twice on each store (memory, and SQLite in a fresh
# database), waiting for the agent card plus 500 ms each time (what bench/run.sh's idle RSS
# measures), then serving a few tasks (the path every event takes, which a thousand live
# tasks keep resident): first under callgrind, which names every function executed, once
# with the default sandbox and once without (under valgrind a contained program cannot
# start: it starts through /proc/self/exe, which there is valgrind), then natively with the
# default sandbox under `perf record -e page-faults`, which names the function of each page
# fault
# (in the current layout, a fault in .text is a function the list lacks). Each name becomes a
# pattern without its hash (`_ZN...17h*`; `Cs*_` for a crate's disambiguator in v0 names),
# so the list survives rebuilds and dependency updates; the instantiations of a generic
# function, which differ in their hash only, are also named exactly, ahead of the patterns.
# Hosts listen on 127.0.0.1 only and are stopped (SIGKILL) after each run.
set -euo pipefail
# Byte order for sort and uniq (a locale's collation takes some distinct names for equal).
export LC_ALL=C

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}"
out="$root/link/start.ld"

for tool in cargo valgrind callgrind_control curl nm; do
    command -v "$tool" >/dev/null || { echo "start-layout.sh: needs $tool" >&2; exit 1; }
done
have_perf=1
command -v perf >/dev/null || { have_perf=0; echo "start-layout.sh: no perf, callgrind only" >&2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-layout.XXXXXX")"
pid=""
cleanup() {
    if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# Two builds with symbols (only the final crate is rebuilt): one in the layout the current
# list gives, for perf, where each page fault left in .text names a function the list lacks;
# one in the default layout, for callgrind (valgrind names only the functions in .text).
link_with_symbols() {
    (cd "$root" && AGENT_HOST_START_LAYOUT="$1" \
        cargo rustc --release --quiet --bin agent-host -p agent-host -- -C strip=none)
    cp "$target/release/agent-host" "$2"
}
bin="$work/agent-host"
perf_bin="$work/agent-host-laid-out"
if [[ -n "${LAYOUT_BIN:-}" ]]; then
    cp "$LAYOUT_BIN" "$bin"
    cp "${LAYOUT_PERF_BIN:-$LAYOUT_BIN}" "$perf_bin"
else
    echo "start-layout.sh: linking release binaries with symbols" >&2
    [[ "$have_perf" == 0 ]] || link_with_symbols on "$perf_bin"
    link_with_symbols off "$bin"
fi

free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
    done
    echo "start-layout.sh: no free port" >&2
    exit 1
}

# The agent of the serving phase: agent-host-jsonl text lines 10 ms apart, then the end.
agent="$work/agent.sh"
cat >"$agent" <<'AGENT'
#!/bin/sh
i=0
while [ "$i" -lt 20 ]; do
    echo '{"type":"text","text":"a line of the layout run, number '"$i"'"}'
    i=$((i + 1))
    sleep 0.01
done
echo '{"type":"done","result":"done"}'
AGENT
chmod 755 "$agent"

# serve PORT: the serving phase: four streamed tasks at once (v1.0 JSON-RPC), read to their
# end, and one more with a plain send; then 500 ms of quiet.
serve() {
    local port="$1" i streams=()
    for i in 1 2 3 4; do
        curl -sN --max-time 120 -o /dev/null "http://127.0.0.1:$port/" \
            -H 'content-type: application/json' -H 'A2A-Version: 1.0' \
            -d '{"jsonrpc":"2.0","id":'"$i"',"method":"SendStreamingMessage","params":{"message":{"messageId":"layout-'"$i"'","role":"ROLE_USER","parts":[{"text":"go"}]}}}' &
        streams+=("$!")
    done
    # The streams only: the host is a child of this shell too.
    wait "${streams[@]}"
    curl -s --max-time 120 -o /dev/null "http://127.0.0.1:$port/" \
        -H 'content-type: application/json' -H 'A2A-Version: 1.0' \
        -d '{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":{"message":{"messageId":"layout-5","role":"ROLE_USER","parts":[{"text":"go"}]},"configuration":{"blocking":true}}}'
    sleep 0.5
}

# start WRAPPER STORE RUN BINARY SANDBOX: starts the host under WRAPPER (an array name), waits
# for its card and 500 ms more; leaves its pid in $pid and its port in $port.
start() {
    local -n wrap="$1"
    local store="$2" dir="$work/$3" host="$4" sandbox="$5"
    mkdir -p "$dir"
    port="$(free_port)"
    local st=memory
    [[ "$store" == sqlite ]] && st="sqlite:$dir/tasks.db"
    (cd "$dir" && exec "${wrap[@]}" "$host" serve --adapter jsonl --bind 127.0.0.1 --port "$port" \
        --store "$st" --binary "$agent" --repo-path "$dir" --sandbox "$sandbox" >"$dir/log" 2>&1) &
    pid=$!
    for _ in $(seq 600); do
        curl -sf --max-time 5 -o /dev/null "http://127.0.0.1:$port/.well-known/agent-card.json" && break
        kill -0 "$pid" 2>/dev/null || { echo "start-layout.sh: the host died; its log:" >&2; cat "$dir/log" >&2; exit 1; }
        sleep 0.1
    done
    sleep 0.5
}

# Stops the host: under valgrind $pid is the host; under perf, the host is perf's child (perf
# then writes its data and exits).
stop() {
    local child
    for child in $(pgrep -P "$pid" || true); do kill -KILL "$child" 2>/dev/null || true; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=""
}

# The functions of the start, and those the serving adds: the start's go first in the list,
# so that what an idle host has touched stays packed, and the serving path comes after it.
names="$work/names"
served="$work/served"
: >"$names"
: >"$served"
# own_functions BINARY: the functions of the executable itself (not of libc or the loader) in
# the callgrind dumps read on stdin.
own_functions() {
    awk -v b="$1" '/^ob=/ { ob = substr($0, 4) } /^fn=/ && ob == b { print substr($0, 4) }'
}
for store in memory sqlite; do
    for run in 1 2; do
        # Under valgrind a contained program does not start (it starts through /proc/self/exe,
        # which there is valgrind itself): with the sandbox the host runs its side of each
        # start (and its failure), without it the agent's output to its end.
        for sandbox in auto off; do
            echo "start-layout.sh: $store store, run $run, sandbox $sandbox: callgrind" >&2
            cg=("valgrind" "--tool=callgrind" "--callgrind-out-file=$work/cg.$store.$run.$sandbox"
                "--dump-instr=no" "--demangle=no" "--compress-strings=no")
            start cg "$store" "cg-$store-$run-$sandbox" "$bin" "$sandbox"
            # A dump of the start; then the serving, and a dump of what it ran.
            callgrind_control -d "$pid" >/dev/null
            serve "$port"
            callgrind_control -d "$pid" >/dev/null
            sleep 1
            stop
            dumps=()
            mapfile -t dumps < <(ls -v "$work/cg.$store.$run.$sandbox".* 2>/dev/null)
            [[ "${#dumps[@]}" -ge 2 ]] || { echo "start-layout.sh: callgrind left ${#dumps[@]} dump(s)" >&2; exit 1; }
            own_functions "$bin" <"${dumps[0]}" >>"$names"
            cat "${dumps[@]:1}" | own_functions "$bin" >>"$served"
        done
        if [[ "$have_perf" == 1 ]]; then
            # Run 1: the start; run 2: the start and the serving, with the default sandbox.
            echo "start-layout.sh: $store store, run $run: perf page faults" >&2
            pf=("perf" "record" "-q" "-e" "page-faults" "-c" "1" "-o" "$work/pf.$store.$run")
            start pf "$store" "pf-$store-$run" "$perf_bin" auto
            faults_to="$names"
            if [[ "$run" == 2 ]]; then
                serve "$port"
                faults_to="$served"
            fi
            for child in $(pgrep -P "$pid" || true); do kill -KILL "$child" 2>/dev/null || true; done
            wait "$pid" 2>/dev/null || true
            pid=""
            # The host's own faults (the first process; not the programs it starts).
            perf script -i "$work/pf.$store.$run" -F pid,ip,sym,dso --no-demangle 2>/dev/null \
                | awk -v b="$perf_bin" 'NR == 1 { host = $1 } $1 == host && index($0, "(" b ")") { print $3 }' \
                >>"$faults_to"
        fi
    done
done

# A function's pattern: its name without the hash (legacy names), the crates' disambiguators
# (v0 names) and LLVM's `.llvm.N` suffix.
pattern() {
    sed -E -e 's/\.llvm\.[0-9]+$//' -e 's/17h[0-9a-f]{16}E$/17h*/' -e 's/Cs[0-9A-Za-z]+_/Cs*_/g'
}
# executed NAMES: the function names in NAMES, once each, without the unnamed ones.
executed() {
    sort -u "$1" | grep -v -e '^(' -e '^0x' -e '^\['
}
executed "$names" >"$work/executed"
executed "$served" | comm -23 - "$work/executed" >"$work/executed-serving"
count="$(cat "$work/executed" "$work/executed-serving" | wc -l)"
[[ "$count" -gt 100 ]] || { echo "start-layout.sh: only $count functions found; not writing" >&2; exit 1; }
# How many of the binary's functions each pattern matches: more than one for the
# instantiations of a generic function, which differ in their hash only.
nm --defined-only "$bin" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | pattern | sort | uniq -c \
    | awk '{ print $2, $1 }' >"$work/matches"
# patterns EXECUTED: first, a pattern that matches one function, or the exact name of an
# instantiation run (these go stale with the next toolchain or dependency update); then, the
# patterns of the generic functions, which take their other instantiations, and once the
# exact names are stale, the ones that ran too.
patterns() {
    paste -d' ' "$1" <(pattern <"$1") \
        | awk 'NR == FNR { n[$1] = $2; next }
               n[$2] > 1 { print "1 " $1; print "2 " $2; next }
               { print "1 " $2 }' "$work/matches" - \
        | sort -u | sort -k1,1n -k2 -s | cut -d' ' -f2-
}
{ patterns "$work/executed"; patterns "$work/executed-serving"; } | awk '!seen[$0]++' >"$work/patterns"
lines="$(wc -l <"$work/patterns")"

{
    echo "/* The functions agent-host executes from its start until it idles, and while it serves"
    echo " * a few streamed tasks (generated by scripts/start-layout.sh: $count functions, $lines"
    echo " * patterns). build.rs passes this file to the linker of release builds on Linux: it"
    echo " * places these functions side by side in their own output section before .text, the"
    echo " * start's first, so the start and then the path of each event fault in few pages."
    echo " * Each is named by a pattern without its hash; an instantiation of a generic function"
    echo " * by its exact name first (those go stale with a toolchain or dependency update; the"
    echo " * patterns after them then still keep the start's functions together). */"
    echo "SECTIONS"
    echo "{"
    echo "  .text.start : {"
    # LLVM puts a cold function (`#[cold]`, such as a vector's growth) in .text.unlikely.NAME.
    awk '{ print "    *(.text." $0 " .text.unlikely." $0 ")" }' "$work/patterns"
    echo "  }"
    echo "}"
    echo "INSERT BEFORE .text;"
} >"$out"
echo "start-layout.sh: wrote $out ($count functions, $lines patterns); the next release build relinks the stripped binary" >&2
