#!/usr/bin/env python3
"""The cost of the `proxy` network mode against `open`, in the same run (bench/egress.sh).

1. Task start: N tasks one after the other on the demo agent, each sent with
   SendStreamingMessage; the time from the send to the first frame that carries the agent's
   output (the program started in its sandbox and printed), p50 and p99; and the host's CPU
   per task (utime + stime of the agent-host process, its children not included).
2. First byte of a model request: a jsonl agent runs curl M times against a local HTTP
   server (the scripted model server's stand-in, on the allow-list by address and port) and
   reports curl's time from the connection to the first byte; under `proxy` through the relay's loopback listener
   (the way a CLI that bypasses proxies for loopback goes) and through the proxy port
   (absolute-form HTTP), under `open` directly.

Usage: egress.py AGENT_HOST_BINARY [N] [M] (ROUNDS=R: the modes alternate R times, default 4,
each round N/R starts and M/R requests per way; GAP_MS=G: a pause of G ms before each start,
default none: starts a person sends now and then pay what back-to-back starts share, such as
the kernel's wait when a process joins a cgroup). Prints a markdown table on stdout.
"""

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

BIN = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 100
M = int(sys.argv[3]) if len(sys.argv) > 3 else 100
ROUNDS = int(os.environ.get("ROUNDS", "4"))
GAP = float(os.environ.get("GAP_MS", "0")) / 1000
TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def model_server():
    """A stand-in for the model API: reads a request head, answers it in one write."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    body = b'{"ok":true}'
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)

    def serve(c):
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = c.recv(4096)
            if not chunk:
                break
            head += chunk
        c.sendall(answer)
        c.close()

    def accept():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv.getsockname()[1]


AGENT = r"""#!/bin/bash
for prompt; do :; done
set -- $prompt
out=""
for i in $(seq "$2"); do
  if [ "$1" = proxyport ]; then
    t=$(curl -s -o /dev/null -w '%{time_connect}:%{time_starttransfer}' -x http://127.0.0.1:3128 "http://127.0.0.1:$3/v1")
  else
    t=$(curl -s -o /dev/null -w '%{time_connect}:%{time_starttransfer}' --noproxy '*' "http://127.0.0.1:$3/v1")
  fi
  out="$out $t"
done
printf '{"type":"text","text":"%s"}\n{"type":"done"}\n' "$out"
"""


def start_host(work, network, adapter, binary, allow, sandbox="auto"):
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.path.join(work, "home"),
        "AGENT_ADAPTER": adapter,
        "AGENT_REPO_PATH": os.path.join(work, "work"),
        "AGENT_HOST_RATE_LIMIT": "0",
        "AGENT_HOST_SANDBOX": sandbox,
        "AGENT_HOST_SANDBOX_NETWORK": network,
        "AGENT_HOST_SANDBOX_ALLOW_HOSTS": allow,
        "AGENT_HOST_LOG": "warn",
    }
    if binary:
        env["AGENT_BINARY"] = binary
    p = subprocess.Popen(
        [BIN, "serve", "--port", str(port), "--store", "memory"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(400):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/.well-known/agent-card.json")
            c.getresponse().read()
            return p, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("agent-host did not start")


def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def send_stream(port, text):
    """Seconds from the send to the first frame with the agent's output, and the whole text."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": text}],
                }
            },
        }
    )
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t0 = time.perf_counter()
    c.request("POST", "/", body, {"Content-Type": "application/json", "A2A-Version": "1.0"})
    r = c.getresponse()
    first = None
    texts = []
    while True:
        line = r.fp.readline()
        if not line:
            break
        if not line.startswith(b"data:"):
            continue
        if first is None and b"artifactUpdate" in line:
            first = time.perf_counter() - t0
        ev = json.loads(line[5:])
        res = ev.get("result", {})
        art = res.get("artifactUpdate", {}).get("artifact", {})
        for part in art.get("parts", []):
            if "text" in part:
                texts.append(part["text"])
        st = res.get("statusUpdate", {}).get("status", {}).get("state", "")
        if st in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"):
            break
    c.close()
    return first, "".join(texts)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def starts(work, network, sandbox="auto"):
    p, port = start_host(work, network, "demo", None, "", sandbox)
    try:
        send_stream(port, "warm up")
        c0 = cpu(p.pid)
        ts = []
        for i in range(N):
            time.sleep(GAP)
            ts.append(send_stream(port, f"hello {i}")[0])
        c1 = cpu(p.pid)
    finally:
        p.terminate()
        p.wait()
    return [t for t in ts if t is not None], (c1 - c0) / N


def first_bytes(work, network, model_port, how):
    script = os.path.join(work, "work", "curl-agent.sh")
    p, port = start_host(work, network, "jsonl", script, f"127.0.0.1:{model_port}")
    try:
        _, text = send_stream(port, f"{how} {M} {model_port}")
    finally:
        p.terminate()
        p.wait()
    # From the connection made to the first byte: curl's own start (its resolver thread, its
    # scheduling on a busy machine) is left out; what the relay and proxy add is in it.
    pairs = [x.split(":") for x in text.split()]
    return [float(b) - float(a) for a, b in pairs]


def ms(s):
    return f"{s * 1000:.2f} ms"


def start_rows(xs, ys, cx, cy):
    """The start's p50 and p99 and the host CPU per start of two series, and their difference."""
    for p in (50, 99):
        a, b = pct(xs, p), pct(ys, p)
        print(f"| task start, send to first output frame, p{p} | {ms(a)} | {ms(b)} | {ms(b - a)} |")
    print(f"| host CPU per task start | {ms(cx)} | {ms(cy)} | {ms(cy - cx)} |")


def main():
    work = tempfile.mkdtemp(prefix="agent-host-egress-bench.", dir=os.environ.get("BENCH_WORK"))
    for d in ("home", "work"):
        os.makedirs(os.path.join(work, d))
    with open(os.path.join(work, "work", "curl-agent.sh"), "w") as f:
        f.write(AGENT)
    os.chmod(os.path.join(work, "work", "curl-agent.sh"), 0o755)
    model_port = model_server()
    # The two modes alternate, ROUNDS times (a fresh host each), so that a machine whose load
    # changes during the run weighs on both alike.
    s_open, s_proxy, c_open, c_proxy, s_off, c_off = [], [], [], [], [], []
    direct, relay, port = [], [], []
    global N, M
    n_all, m_all = N, M
    N, M = max(1, n_all // ROUNDS), max(1, m_all // ROUNDS)
    for _ in range(ROUNDS):
        s, c = starts(work, "open", "off")
        s_off += s
        c_off.append(c)
        s, c = starts(work, "open")
        s_open += s
        c_open.append(c)
        s, c = starts(work, "proxy")
        s_proxy += s
        c_proxy.append(c)
        direct += first_bytes(work, "open", model_port, "direct")
        relay += first_bytes(work, "proxy", model_port, "direct")
        port += first_bytes(work, "proxy", model_port, "proxyport")
    c_open, c_proxy, c_off = (sum(c) / ROUNDS for c in (c_open, c_proxy, c_off))
    # The sandbox's own price (issue 38: the default sandbox against none) in the same run.
    apart = f"; {GAP * 1000:g} ms apart" if GAP else ""
    print(f"| task start ({len(s_off)} starts each{apart}; {ROUNDS} rounds alternating) | no sandbox | sandbox, `open` | sandbox − none |")
    print("|---|---|---|---|")
    start_rows(s_off, s_open, c_off, c_open)
    print()
    print(f"| measure ({len(s_open)} + {len(s_proxy)} task starts, {len(direct)} requests each way; {ROUNDS} rounds alternating) | open | proxy | proxy − open |")
    print("|---|---|---|---|")
    start_rows(s_open, s_proxy, c_open, c_proxy)
    for p in (50, 99):
        a, b, c = pct(direct, p), pct(relay, p), pct(port, p)
        print(f"| model request first byte p{p}: via loopback relay | {ms(a)} | {ms(b)} | {ms(b - a)} |")
        print(f"| model request first byte p{p}: via proxy port (HTTP_PROXY) | {ms(a)} | {ms(c)} | {ms(c - a)} |")
    subprocess.run(["rm", "-rf", work])


main()
