"""The official MCP Python SDK (`mcp`) as a client of agent-host's MCP binding.

Usage: mcp_py_client.py BASE_URL TRANSPORT AGENT_HOST_BIN TOKEN_A TOKEN_B
  TRANSPORT: http (Streamable HTTP at BASE_URL/mcp) or stdio (`agent-host mcp --url BASE_URL`)
  TOKEN_A, TOKEN_B: bearer tokens of two callers of the host.
Lists the tools, starts and waits (with progress), follows a task with get_task, answers an
approval with reply, cancels a task (its grandchild process is gone), reads get_changes, checks
that two callers see only their own tasks and that a bad argument is an MCP error that starts
nothing. Prints one line per check; exits non-zero on a failure.
"""

import asyncio
import os
import sys
import time

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

base, transport, binary, token_a, token_b = sys.argv[1:6]
failures = 0


def check(cond, what):
    global failures
    if cond:
        print(f"ok    {what}")
    else:
        failures += 1
        print(f"FAIL  {what}")


def client(token):
    if transport == "http":
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        return Client(streamable_http_client(f"{base}/mcp", http_client=http))
    env = dict(os.environ, A2A_TOKEN=token)
    params = StdioServerParameters(command=binary, args=["mcp", "--url", base], env=env)
    return Client(params)


async def call(c, tool, args, progress=None):
    r = await c.call_tool(tool, args, progress_callback=progress)
    if r.is_error:
        raise AssertionError(f"{tool} answered an error: {r.content}")
    texts = [b.text for b in r.content if getattr(b, "type", "") == "text"]
    assert texts and texts[0], f"{tool}: no text summary"
    return r.structured_content


async def error_of(c, tool, args):
    try:
        r = await c.call_tool(tool, args)
    except MCPError as e:
        return e.error
    raise AssertionError(f"{tool} {args} answered {r}")


async def follow(c, task_id, done):
    after, events = 0, []
    while True:
        r = await call(c, "get_task", {"taskId": task_id, "afterEvent": after})
        events += r.get("events", [])
        after = r["lastEvent"]
        if done(r["task"], events):
            return r["task"], events
        await anyio.sleep(0.05)


def grandchild_pid(events):
    for e in events:
        text = e.get("text") or ""
        if "grandchild pid " in text:
            return int(text.split("grandchild pid ")[1].split()[0])
    return None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting to be reaped is gone too.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].split()[0] != "Z"
    except OSError:
        return False


async def main():
    async with client(token_a) as a, client(token_b) as b:
        tools = {t.name: t for t in (await a.list_tools()).tools}
        check(
            {"start_task", "get_task", "list_tasks", "reply", "cancel_task", "get_changes"} <= set(tools),
            f"tools/list: {sorted(tools)}",
        )
        check(tools["start_task"].input_schema.get("required") == ["prompt"], "start_task requires prompt")

        progress = []

        async def on_progress(p, total, message):
            progress.append(message)

        t = await call(a, "start_task", {"prompt": "say hello", "wait": True}, on_progress)
        check(t["state"] == "completed" and t.get("answer"), f"start and wait: {t['state']}")
        check(any(m and "Bash" in m for m in progress), f"progress notifications: {len(progress)}")

        t = await call(a, "start_task", {"prompt": "hello slow"})
        task, events = await follow(a, t["id"], lambda t, _: t["state"] in ("completed", "failed", "canceled"))
        check(task["state"] == "completed" and len(events) > 2, f"get_task until the end: {len(events)} events")

        t = await call(a, "start_task", {"prompt": "approval please", "wait": True})
        check(t["state"] == "input-required" and t["question"]["approvalId"] == "appr-1", "approval asked")
        done = await call(a, "reply", {"taskId": t["id"], "decision": "allow"})
        check(done["state"] == "completed", f"approval answered with reply: {done['state']}")

        t = await call(a, "start_task", {"prompt": "grandchild"})
        _, events = await follow(a, t["id"], lambda _, ev: grandchild_pid(ev) is not None)
        pid = grandchild_pid(events)
        canceled = await call(a, "cancel_task", {"taskId": t["id"]})
        deadline = time.monotonic() + 10
        while alive(pid) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        check(canceled["state"] == "canceled" and not alive(pid), f"cancel_task: grandchild {pid} gone")

        ch = await call(a, "get_changes", {"contextId": t["contextId"]})
        check(ch == {"changes": False}, f"get_changes without a workspace change: {ch}")

        mine = await call(a, "list_tasks", {})
        e = await error_of(b, "get_task", {"taskId": t["id"]})
        theirs = await call(b, "list_tasks", {})
        check(t["id"] in e.message and theirs["tasks"] == [] and mine["tasks"], "two callers see only their own tasks")

        before = (await call(a, "list_tasks", {}))["totalSize"]
        e = await error_of(a, "start_task", {"prompt": "x", "agent": "no-such-agent"})
        e2 = await error_of(a, "start_task", {"prompt": "x", "promt": "typo"})
        after = (await call(a, "list_tasks", {}))["totalSize"]
        check(
            e.code == -32602 and "no-such-agent" in e.message and e2.code == -32602 and before == after,
            f"bad argument: {e.code} {e.message!r}; nothing started ({before} = {after})",
        )


try:
    asyncio.run(main())
except Exception as e:  # noqa: BLE001 - any failure is the test's failure
    failures += 1
    print(f"FAIL  {type(e).__name__}: {e}")
print(f"py {transport}: {'PASS' if failures == 0 else 'FAIL'}")
sys.exit(1 if failures else 0)
