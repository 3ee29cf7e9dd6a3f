#!/usr/bin/env bash
# Real-client tests: the official A2A SDKs (Python a2a-sdk, JS @a2a-js/sdk) run
# their flows against one agent-host server, in both protocol versions and both
# HTTP bindings (JSON-RPC and HTTP+JSON): 8 combinations, and the Python SDK over gRPC
# (A2A 1.0): 1 more. Then the other way round:
# agent-host's Rust client library (examples/sdk_interop.rs) against the Python SDK's
# server (sdk_server.py): 4 more combinations. And the official MCP SDKs (Python mcp,
# TypeScript @modelcontextprotocol/sdk) against agent-host's MCP binding, over Streamable
# HTTP and over stdio (`agent-host mcp`): 4 more (mcp_py_client.py, mcp_js_client.mjs).
#
# Usage: tests/clients/run.sh [PATH_TO_AGENT_HOST]
#   binary: the argument, else $AGENT_HOST_BIN, else target/debug/agent-host
#   (relative to the repo root). Builds nothing: build the server first
#   (`cargo build`; the demo agent is its `fake-agent` subcommand) and the
#   interop driver (`cargo build --examples`; $SDK_INTEROP_BIN overrides its path).
# Client dependencies live in tests/clients/.venv and tests/clients/node_modules
# (git-ignored) and are installed from the pinned files when missing.
# Prints one summary line per combination, then "N passed, M failed"; exits
# non-zero if any combination failed or the server could not be started.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

bin="${1:-${AGENT_HOST_BIN:-$root/target/debug/agent-host}}"
if [[ ! -x "$bin" ]]; then
    echo "run.sh: agent-host binary '$bin' not found or not executable (build it with cargo build)" >&2
    exit 2
fi
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"

py_timeout=120
health_wait_s=20

# --- client dependencies (only when missing; .ci/run installs them up front) ---
venv="$here/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
    echo "run.sh: creating $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$here/requirements.txt"
fi
if ! "$venv/bin/python" -c 'import mcp' 2>/dev/null; then
    "$venv/bin/pip" install --quiet -r "$here/requirements.txt"
fi
if [[ ! -d "$here/node_modules/@a2a-js/sdk" || ! -d "$here/node_modules/@modelcontextprotocol/sdk" ]]; then
    echo "run.sh: installing node_modules (npm ci)"
    (cd "$here" && npm ci --no-audit --no-fund)
fi

# --- server ---
work="$(mktemp -d "${TMPDIR:-/tmp}/agent-host-clients.XXXXXX")"
server_pid=""
sdk_pid=""
mcp_pid=""
cleanup() {
    if [[ -n "$mcp_pid" ]]; then
        kill -TERM -- "-$mcp_pid" 2>/dev/null || true
        wait "$mcp_pid" 2>/dev/null || true
    fi
    if [[ -n "$sdk_pid" ]]; then
        kill -TERM -- "-$sdk_pid" 2>/dev/null || true
        wait "$sdk_pid" 2>/dev/null || true
    fi
    if [[ -n "$server_pid" ]]; then
        # setsid made the server a process group leader: stop it and its agents.
        kill -TERM -- "-$server_pid" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL -- "-$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A git repository inside the server's folder: the Python clients' task that edits a file
# there gets its change back as the `changes` artifact and applies its patch.
changes_repo="$work/changes-repo"
mkdir -p "$changes_repo"
git -C "$changes_repo" init -q
echo "a repository for the change test" >"$changes_repo/README.md"
git -C "$changes_repo" add README.md
git -C "$changes_repo" -c user.name=t -c user.email=t@t -c commit.gpgSign=false commit -q -m base
export CHANGES_REPO="$changes_repo"

port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
grpc_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
base="http://127.0.0.1:$port"
log="$work/server.log"

# The demo adapter is pinned (an installed real CLI would otherwise be served);
# settings that could come from the caller's environment are cleared.
(
    cd "$work"
    exec env -u AGENT_HOST_CONFIG -u AGENT_BINARY -u AGENT_ARGS -u AGENT_PROMPT_VIA \
        -u AGENT_HOST_ADAPTERS_DIR -u AGENT_HOST_PUBLIC_URL -u AGENT_HOST_CARD_LEGACY_V03 \
        AGENT_ADAPTER=demo AGENT_HOST_BIND=127.0.0.1 PORT="$port" AGENT_HOST_GRPC_PORT="$grpc_port" AGENT_REPO_PATH="$work" \
        AGENT_HOST_STORE="sqlite:$work/agent-host.db" \
        setsid "$bin" serve
) >"$log" 2>&1 &
server_pid=$!

echo "run.sh: server $bin (pid $server_pid) at $base, log $log"
if ! python3 - "$base/health" "$health_wait_s" "$server_pid" <<'EOF'; then
import os, sys, time, urllib.request
url, wait, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + wait
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(f"the server exited before answering {url}")
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(f"no 200 from {url} within {wait:.0f} s")
EOF
    echo "run.sh: the server did not become healthy; its log:" >&2
    sed 's/^/    server| /' "$log" >&2 || true
    echo "0 passed, 17 failed"
    exit 1
fi

# --- the nine combinations ---
passed=0
failed=0
summary=()
run_one() { # name ("<lang> <version> <binding>"), command...
    local name="$1"
    shift
    local out="$work/$(echo "$name" | tr ' .+' '___').out"
    local start rc=0
    start=$(date +%s.%N)
    echo
    echo "=== $name ==="
    local version binding
    read -r _ version binding <<<"$name"
    (cd "$here" && timeout "$py_timeout" "$@" "$base" "$version" "$binding") >"$out" 2>&1 || rc=$?
    sed 's/^/    /' "$out"
    local took
    took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$start" "$(date +%s.%N)")
    if [[ $rc -eq 0 ]]; then
        passed=$((passed + 1))
        summary+=("PASS  $name  (${took} s)")
    else
        failed=$((failed + 1))
        local why
        if [[ $rc -eq 124 ]]; then
            why="timed out after ${py_timeout} s"
        else
            why="exit $rc: $(grep -m1 '^FAIL' "$out" || tail -n1 "$out")"
        fi
        summary+=("FAIL  $name  (${took} s)  $why")
    fi
}

for binding in JSONRPC HTTP+JSON; do
    run_one "py 1.0 $binding" "$venv/bin/python" py_client.py
    run_one "py 0.3 $binding" "$venv/bin/python" py_client.py
    run_one "js 1.0 $binding" node js_client.mjs
    run_one "js 0.3 $binding" node js_client.mjs
done
# gRPC (A2A 1.0 only): the Python SDK's gRPC transport on the card's GRPC interface.
run_one "py 1.0 GRPC" "$venv/bin/python" py_client.py

if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "run.sh: the server died during the tests" >&2
fi

# --- our client library against the Python SDK's server: 4 combinations ---
interop_bin="${SDK_INTEROP_BIN:-$(dirname "$bin")/examples/sdk_interop}"
sdk_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
sdk_log="$work/sdk_server.log"
echo
echo "=== rust client vs a2a-sdk server ==="
interop_fail() { # reason
    failed=$((failed + 4))
    summary+=("FAIL  rust-client vs a2a-sdk server (4 combinations)  $1")
}
if [[ ! -x "$interop_bin" ]]; then
    interop_fail "no $interop_bin (build it with cargo build --examples)"
else
    (cd "$here" && exec setsid "$venv/bin/python" sdk_server.py "$sdk_port") >"$sdk_log" 2>&1 &
    sdk_pid=$!
    if ! python3 - "http://127.0.0.1:$sdk_port/.well-known/agent-card.json" "$health_wait_s" "$sdk_pid" <<'EOF'; then
import os, sys, time, urllib.request
url, wait, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + wait
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(f"the SDK server exited before answering {url}")
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(f"no 200 from {url} within {wait:.0f} s")
EOF
        sed 's/^/    sdk-server| /' "$sdk_log" >&2 || true
        interop_fail "the SDK server did not start"
    else
        interop_out="$work/interop.out"
        rc=0
        timeout "$py_timeout" "$interop_bin" "http://127.0.0.1:$sdk_port" >"$interop_out" 2>&1 || rc=$?
        sed 's/^/    /' "$interop_out"
        n_pass=$(grep -c '^PASS' "$interop_out" || true)
        n_fail=$(grep -c '^FAIL' "$interop_out" || true)
        passed=$((passed + n_pass))
        failed=$((failed + n_fail))
        while IFS= read -r line; do summary+=("$line"); done < <(grep -E '^(PASS|FAIL)' "$interop_out")
        if [[ $((n_pass + n_fail)) -ne 4 ]]; then
            failed=$((failed + 4 - n_pass - n_fail))
            summary+=("FAIL  rust-client vs a2a-sdk server  exit $rc, $((n_pass + n_fail)) of 4 combinations reported")
            sed 's/^/    sdk-server| /' "$sdk_log" | tail -n 40
        fi
    fi
fi

# --- MCP: the official MCP SDKs (Python mcp, TypeScript @modelcontextprotocol/sdk) over
# Streamable HTTP and over stdio (`agent-host mcp`): 4 combinations, against a second server
# with two callers (bearer tokens), so that owners are checked too, and no sandbox, so that the
# clients see the real pid of the process cancel_task must stop ---
mcp_port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mcp_base="http://127.0.0.1:$mcp_port"
mcp_log="$work/mcp-server.log"
mcp_token_a="mcp-alice-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
mcp_token_b="mcp-bob-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
printf '[auth]\ntokens = [{ name = "alice", token = "%s" }, { name = "bob", token = "%s" }]\n' \
    "$mcp_token_a" "$mcp_token_b" >"$work/mcp.toml"
mkdir -p "$work/mcp-repo"
(
    cd "$work/mcp-repo"
    exec env -u AGENT_HOST_TOKEN -u AGENT_HOST_API_KEY -u AGENT_BINARY -u AGENT_ARGS -u AGENT_PROMPT_VIA \
        -u AGENT_HOST_ADAPTERS_DIR -u AGENT_HOST_PUBLIC_URL -u AGENT_HOST_MCP \
        AGENT_HOST_CONFIG="$work/mcp.toml" AGENT_ADAPTER=demo AGENT_HOST_BIND=127.0.0.1 PORT="$mcp_port" \
        AGENT_REPO_PATH="$work/mcp-repo" AGENT_HOST_STORE=memory AGENT_SANDBOX=off \
        setsid "$bin" serve
) >"$mcp_log" 2>&1 &
mcp_pid=$!
if ! python3 - "$mcp_base/health" "$health_wait_s" "$mcp_pid" <<'EOF'; then
import os, sys, time, urllib.request
url, wait, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + wait
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit(f"the MCP server exited before answering {url}")
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.2)
sys.exit(f"no 200 from {url} within {wait:.0f} s")
EOF
    sed 's/^/    mcp-server| /' "$mcp_log" >&2 || true
    failed=$((failed + 4))
    summary+=("FAIL  MCP (4 combinations)  the MCP server did not start")
else
    run_mcp() { # name ("mcp <lang> <transport>"), command...
        local name="$1"
        shift
        local out="$work/$(echo "$name" | tr ' ' '_').out"
        local rc=0 transport
        read -r _ _ transport <<<"$name"
        echo
        echo "=== $name ==="
        (cd "$here" && timeout "$py_timeout" "$@" "$mcp_base" "$transport" "$bin" "$mcp_token_a" "$mcp_token_b") >"$out" 2>&1 || rc=$?
        sed 's/^/    /' "$out"
        if [[ $rc -eq 0 ]]; then
            passed=$((passed + 1))
            summary+=("PASS  $name")
        else
            failed=$((failed + 1))
            summary+=("FAIL  $name  exit $rc: $(grep -m1 '^FAIL' "$out" || tail -n1 "$out")")
        fi
    }
    for transport in http stdio; do
        run_mcp "mcp py $transport" "$venv/bin/python" mcp_py_client.py
        run_mcp "mcp js $transport" node mcp_js_client.mjs
    done
    if [[ $failed -gt 0 ]]; then
        echo "--- MCP server log (last 40 lines) ---"
        tail -n 40 "$mcp_log" | sed 's/^/    mcp-server| /'
    fi
fi
kill -TERM -- "-$mcp_pid" 2>/dev/null || true
wait "$mcp_pid" 2>/dev/null || true
mcp_pid=""

if [[ $failed -gt 0 ]]; then
    echo
    echo "--- server log (last 60 lines) ---"
    tail -n 60 "$log" | sed 's/^/    server| /'
fi

echo
echo "--- real clients ---"
for line in "${summary[@]}"; do echo "$line"; done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
