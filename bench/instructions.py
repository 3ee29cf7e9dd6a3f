#!/usr/bin/env python3
"""Instructions per streamed event, counted by callgrind: a measure of the event path that a
busy machine does not move (CPU time does), for comparing two builds of agent-host.

Starts each binary under `valgrind --tool=callgrind` (the `jsonl` adapter, the memory store,
the default sandbox, limits lifted as bench/run.sh lifts them; its children are not
traced), runs a warm-up task, zeroes the counters, streams TASKS tasks one after the other
whose CLI (bench-cli) prints EVENTS lines back to back, dumps the counters and divides the
instructions by the SSE frames received (EVENTS + 4 per task, as in bench/run.sh). With
several binaries they alternate, ROUNDS times.

Usage: instructions.py BENCH_CLI [--tasks N] [--events N] [--rounds N] NAME=BINARY...
Prints a markdown table on stdout (instructions per frame, each round and the mean).
"""

import argparse
import glob
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(binary, cli, work, out):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT")}
    env.pop("RUST_LOG", None)
    cmd = [
        "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--vgdb=yes",
        binary, "serve", "--adapter", "jsonl", "--bind", "127.0.0.1", "--port", str(port),
        "--store", "memory", "--binary", cli, "--repo-path", work,
        "--max-running-tasks", "5000", "--max-queued-tasks", "5000", "--rate-limit", "0",
        "--max-connections", "5000", "--max-streams", "5000",
        "--max-connections-per-address", "5000",
    ]
    log = open(os.path.join(work, "host.log"), "ab")
    p = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=log, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/.well-known/agent-card.json")
            if c.getresponse().status == 200:
                return p, port
        except OSError:
            pass
        if p.poll() is not None:
            raise SystemExit(f"{binary} exited at start; see {work}/host.log")
        time.sleep(0.2)
    raise SystemExit(f"{binary} served no card within 120 s")


def stream(port, events):
    """Streams one task; returns the SSE frames received."""
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                               "parts": [{"text": f"n={events} pause_us=0"}]}},
    })
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    c.request("POST", "/", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})
    r = c.getresponse()
    frames = 0
    while True:
        line = r.fp.readline()
        if not line:
            break
        if line.startswith(b"data:"):
            frames += 1
            if b"TASK_STATE_COMPLETED" in line or b"TASK_STATE_FAILED" in line:
                break
    c.close()
    return frames


def control(pid, flag):
    subprocess.run(["callgrind_control", flag, str(pid)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def measure(binary, cli, tasks, events):
    work = tempfile.mkdtemp(prefix="agent-host-ir.")
    out = os.path.join(work, "cg.out")
    p, port = start(binary, cli, work, out)
    try:
        stream(port, events)
        control(p.pid, "-z")
        frames = sum(stream(port, events) for _ in range(tasks))
        control(p.pid, "-d")
        time.sleep(1)
        dumps = [f for f in glob.glob(out + "*") if f != out]
        ir = None
        for f in sorted(dumps, key=os.path.getmtime):
            m = re.search(r"^(summary|totals):\s+(\d+)", open(f).read(), re.M)
            if m:
                ir = int(m.group(2))
        if ir is None:
            raise SystemExit(f"no callgrind dump in {work}")
        return ir / frames, frames
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cli")
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    named = [b.split("=", 1) for b in a.binaries]
    results = {name: [] for name, _ in named}
    for _ in range(a.rounds):
        for name, binary in named:
            per, frames = measure(os.path.abspath(binary), os.path.abspath(a.cli), a.tasks, a.events)
            results[name].append(per)
    print(f"| build | instructions per frame ({a.tasks} tasks × {a.events} events, each round) | mean |")
    print("|---|---|---|")
    for name, xs in results.items():
        print(f"| {name} | {' / '.join(f'{x:,.0f}' for x in xs)} | {sum(xs) / len(xs):,.0f} |")


main()
