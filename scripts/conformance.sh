#!/usr/bin/env bash
# Runs the A2A conformance kit (github.com/a2aproject/a2a-tck) against agent-host serving the
# `conformance` adapter. Not part of CI: the kit is not on a package registry, and its code
# is never committed here.
#
#   A2A_TCK_DIR=/path/to/a2a-tck@1.0-dev  A2A_TCK03_DIR=/path/to/a2a-tck@0.3.x  scripts/conformance.sh
#
# Either variable may be left unset to skip that kit. Optional: TCK_VENV_DIR (where the two
# virtualenvs are kept between runs, default target/tck-venvs), PYTHON (default python3),
# TCK_LEVEL (1.0 kit: must|should|may, default all levels), TCK_EXTRA (extra pytest args for
# the 1.0 kit), TCK_PROFILE (debug to use a debug build, default release). Reports stay in each kit's reports/ directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
venvs=${TCK_VENV_DIR:-$root/target/tck-venvs}
work=$(mktemp -d "${TMPDIR:-/tmp}/agent-host-tck.XXXXXX")
pids=()

cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

if [[ -z "${A2A_TCK_DIR:-}" && -z "${A2A_TCK03_DIR:-}" ]]; then
  echo "set A2A_TCK_DIR (a 1.0-dev checkout of a2aproject/a2a-tck) and/or A2A_TCK03_DIR (a 0.3.x checkout)" >&2
  exit 2
fi

echo "== building agent-host"
target=${CARGO_TARGET_DIR:-$root/target}
if [[ "${TCK_PROFILE:-release}" == debug ]]; then
  (cd "$root" && cargo build --quiet)
  bin=$target/debug/agent-host
else
  (cd "$root" && cargo build --release --quiet)
  bin=$target/release/agent-host
fi

free_port() {
  "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# venv DIR KIT: a virtualenv with the kit installed (the two lines share a distribution name,
# so each gets its own).
venv() {
  local dir=$1 kit=$2
  if [[ ! -x "$dir/bin/python" ]]; then
    "$python" -m venv "$dir"
    "$dir/bin/pip" install --quiet --upgrade pip
  fi
  "$dir/bin/pip" install --quiet -e "$kit"
}

# serve NAME VERSION [SETTING=VALUE...]: starts agent-host serving the conformance adapter on a
# free port (in this shell, so that the trap can stop it), sets $port. Everything else is at
# its default but push (on, with loopback webhooks allowed: the kit's receiver listens on
# 127.0.0.1) and the places it writes (a temporary directory); the SETTINGs are the run's
# own additions. With AGENT_HOST_GRPC_PORT=free, gRPC is served on another free port (the
# card names it; the kit finds it there).
serve() {
  local name=$1 version=$2
  shift 2
  local extra=()
  for kv in "$@"; do
    [[ "$kv" == AGENT_HOST_GRPC_PORT=free ]] && kv=AGENT_HOST_GRPC_PORT=$(free_port)
    extra+=("$kv")
  done
  port=$(free_port)
  mkdir -p "$work/$name"
  CONFORMANCE_VERSION=$version \
  AGENT_ADAPTER=conformance \
  AGENT_HOST_BIND=127.0.0.1:$port \
  AGENT_HOST_PUSH=true \
  AGENT_HOST_PUSH_ALLOW_PRIVATE=true \
  AGENT_HOST_REPO_PATH=$work/$name \
  XDG_DATA_HOME=$work/$name/data \
    env ${extra[@]+"${extra[@]}"} "$bin" serve >"$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$port/.well-known/agent-card.json" >/dev/null 2>&1; then
      return
    fi
    sleep 0.1
  done
  echo "agent-host did not start; its log:" >&2
  cat "$work/$name.log" >&2
  exit 1
}

# The counts of pytest's last summary line ("2 failed, 171 passed, 92 skipped in 64.31s").
pytest_counts() {
  grep -E '^=* ?[0-9]+ (failed|passed|skipped|error)' "$1" | tail -n 1 | sed -E 's/^=+ //; s/ in [0-9.]+s.*//'
}

summary=()

if [[ -n "${A2A_TCK_DIR:-}" ]]; then
  echo "== 1.0 kit: $(git -C "$A2A_TCK_DIR" rev-parse --short HEAD 2>/dev/null || echo '?') ($A2A_TCK_DIR)"
  venv "$venvs/tck-1.0" "$A2A_TCK_DIR"
  # Default settings: only the adapter and push are switched on (and gRPC served, for the
  # kit's gRPC tests). The kit reads the card from `{--sut-host}/.well-known/agent-card.json`
  # with no A2A-Version (at 357c4a8 its other requests send `A2A-Version: 1.0`, the card
  # fixture does not). A request without a version is a v0.3 request (A2A 1.0: absent means
  # 0.3), and it is also exactly what v0.3 clients send (httpx, no version), so it gets the
  # card with the v0.3 fields, which the kit's schema (additionalProperties: false) refuses.
  # The kit is therefore pointed at the card URL that asks for 1.0 by query parameter, as a
  # client that cannot set the header does: `--sut-host` ends in `#`, so the path the kit
  # appends becomes a fragment, which is never sent.
  serve v1 1.0 AGENT_HOST_GRPC_PORT=free
  sut_host="http://127.0.0.1:$port/.well-known/agent-card.json?A2A-Version=1.0#"
  level=()
  [[ -n "${TCK_LEVEL:-}" ]] && level=(--level "$TCK_LEVEL")
  extra=()
  [[ -n "${TCK_EXTRA:-}" ]] && read -r -a extra <<<"$TCK_EXTRA"
  set +e
  (cd "$A2A_TCK_DIR" && "$venvs/tck-1.0/bin/python" run_tck.py --sut-host "$sut_host" \
    --transport jsonrpc,http_json,grpc "${level[@]}" ${extra[@]+-- "${extra[@]}"}) | tee "$work/v1.out"
  set -e
  counts=$(pytest_counts "$work/v1.out")
  summary+=("1.0-dev pytest: ${counts:-no summary}")
  report=$A2A_TCK_DIR/reports/compatibility.json
  if [[ -f "$report" ]]; then
    summary+=("1.0-dev requirements: $("$python" - "$report" <<'PY'
import json, sys, collections
data = json.load(open(sys.argv[1]))
c = collections.Counter()
def walk(x):
    if isinstance(x, dict):
        lvl, st = x.get("level"), x.get("status")
        if isinstance(lvl, str) and isinstance(st, str):
            c[(lvl.upper(), st.upper())] += 1
        for v in x.values():
            walk(v)
    elif isinstance(x, list):
        for v in x:
            walk(v)
walk(data)
print(", ".join(f"{l} {s} {n}" for (l, s), n in sorted(c.items())) or "no per-level data")
PY
)")
  fi
fi

if [[ -n "${A2A_TCK03_DIR:-}" ]]; then
  echo "== 0.3 kit: $(git -C "$A2A_TCK03_DIR" rev-parse --short HEAD 2>/dev/null || echo '?') ($A2A_TCK03_DIR)"
  venv "$venvs/tck-0.3" "$A2A_TCK03_DIR"
  # The 0.3 kit expects the reference agent's behaviour: tasks stay working, and a blocking
  # message/send answers with the working task. The conformance agent keeps working; a
  # blocking send answers after 500 ms with the task as it is. Its tasks stay working, so
  # the run allows more of them at once than the defaults (16 running, 256 queued).
  serve v03 0.3 AGENT_HOST_BLOCKING_WAIT=500ms AGENT_HOST_MAX_RUNNING_TASKS=1000 \
    AGENT_HOST_MAX_QUEUED_TASKS=1000 AGENT_HOST_STORE=memory
  for category in mandatory capabilities transport-equivalence quality features; do
    set +e
    (cd "$A2A_TCK03_DIR" && "$venvs/tck-0.3/bin/python" run_tck.py --sut-url "http://127.0.0.1:$port" \
      --category "$category" --verbose) >"$work/v03-$category.out" 2>&1
    set -e
    counts=$(pytest_counts "$work/v03-$category.out")
    summary+=("0.3.x $category: ${counts:-no summary (see below)}")
    grep -E '::[^ ]+ (FAILED|ERROR)' "$work/v03-$category.out" | sed -E "s/ (FAILED|ERROR).*/ \1/; s/^/  [$category] /" || true
    [[ -n "$counts" ]] || tail -n 20 "$work/v03-$category.out"
  done
fi

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
