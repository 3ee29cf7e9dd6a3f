// The official MCP TypeScript SDK (@modelcontextprotocol/sdk) as a client of agent-host's MCP
// binding: the same checks as mcp_py_client.py.
//
// Usage: node mcp_js_client.mjs BASE_URL TRANSPORT AGENT_HOST_BIN TOKEN_A TOKEN_B
//   TRANSPORT: http (Streamable HTTP at BASE_URL/mcp) or stdio (`agent-host mcp --url BASE_URL`)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport, getDefaultEnvironment } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import fs from "node:fs";

const [base, transport, binary, tokenA, tokenB] = process.argv.slice(2);
let failures = 0;

function check(cond, what) {
  if (cond) {
    console.log(`ok    ${what}`);
  } else {
    failures++;
    console.log(`FAIL  ${what}`);
  }
}

async function connect(token) {
  const client = new Client({ name: "agent-host-mcp-js-test", version: "0.0.0" });
  const t =
    transport === "http"
      ? new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${token}` } },
        })
      : new StdioClientTransport({
          command: binary,
          args: ["mcp", "--url", base],
          env: { ...getDefaultEnvironment(), A2A_TOKEN: token },
        });
  await client.connect(t);
  return client;
}

async function call(c, name, args, onprogress) {
  const r = await c.callTool({ name, arguments: args }, undefined, onprogress ? { onprogress } : {});
  if (r.isError) throw new Error(`${name} answered an error: ${JSON.stringify(r.content)}`);
  if (!r.content?.[0]?.text) throw new Error(`${name}: no text summary`);
  return r.structuredContent;
}

async function errorOf(c, name, args) {
  try {
    const r = await c.callTool({ name, arguments: args });
    throw new Error(`${name} ${JSON.stringify(args)} answered ${JSON.stringify(r)}`);
  } catch (e) {
    if (e instanceof McpError) return e;
    throw e;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function follow(c, taskId, done) {
  let after = 0;
  const events = [];
  for (;;) {
    const r = await call(c, "get_task", { taskId, afterEvent: after });
    events.push(...(r.events ?? []));
    after = r.lastEvent;
    if (done(r.task, events)) return [r.task, events];
    await sleep(50);
  }
}

function grandchildPid(events) {
  for (const e of events) {
    const m = /grandchild pid (\d+)/.exec(e.text ?? "");
    if (m) return Number(m[1]);
  }
  return null;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[0] !== "Z";
  } catch {
    return false;
  }
}

// MCP tasks (2025-11-25): start_task through the SDK's callToolStream, which sends the call
// with `task`, polls tasks/get and reads tasks/result.
async function taskFlows(a, b) {
  const tasks = a.experimental.tasks;
  const start = (args) => tasks.callToolStream({ name: "start_task", arguments: args });
  const tool = (await a.listTools()).tools.find((t) => t.name === "start_task");
  check(
    tool.execution?.taskSupport === "optional" && a.getServerCapabilities()?.tasks?.requests?.tools?.call,
    `tasks announced: start_task ${JSON.stringify(tool.execution)}, capabilities.tasks ${JSON.stringify(a.getServerCapabilities()?.tasks)}`,
  );

  // Through to completion.
  const seen = [];
  let created = null;
  let result = null;
  for await (const m of start({ prompt: "say hello" })) {
    seen.push(m.type === "taskStatus" ? m.task.status : m.type);
    if (m.type === "taskCreated") created = m.task;
    if (m.type === "result") result = m.result;
    if (m.type === "error") throw m.error;
  }
  const sc = result?.structuredContent;
  check(
    created?.status === "working" && sc?.id === created.taskId && sc.state === "completed" && sc.answer,
    `task through to completion: ${seen.join(" > ")}; answer ${JSON.stringify(sc?.answer)}`,
  );
  const got = await tasks.getTask(created.taskId);
  const viaTool = await call(a, "get_task", { taskId: created.taskId });
  check(
    got.status === "completed" && got.ttl === null && viaTool.task.state === "completed",
    `tasks/get and get_task agree on the same task: ${got.status} / ${viaTool.task.state}`,
  );

  // input_required, answered with reply; tasks/result then waits for the end.
  seen.length = 0;
  result = null;
  let replied = null;
  for await (const m of start({ prompt: "approval please" })) {
    seen.push(m.type === "taskStatus" ? m.task.status : m.type);
    if (m.type === "taskStatus" && m.task.status === "input_required" && !replied) {
      replied = await call(a, "reply", { taskId: m.task.taskId, decision: "allow", wait: false });
    }
    if (m.type === "result") result = m.result;
    if (m.type === "error") throw m.error;
  }
  check(
    seen.includes("input_required") && replied && result?.structuredContent?.state === "completed",
    `input_required answered with reply: ${seen.join(" > ")}`,
  );

  // Cancel: the program and its children stop.
  let id = null;
  for await (const m of start({ prompt: "grandchild" })) {
    if (m.type === "taskCreated") {
      id = m.task.taskId;
      break;
    }
  }
  const [, events] = await follow(a, id, (_, ev) => grandchildPid(ev) !== null);
  const pid = grandchildPid(events);
  const canceled = await tasks.cancelTask(id);
  const deadline = Date.now() + 10000;
  while (alive(pid) && Date.now() < deadline) await sleep(50);
  check(
    canceled.status === "cancelled" && (await tasks.getTask(id)).status === "cancelled" && !alive(pid),
    `tasks/cancel: ${canceled.status}, grandchild ${pid} gone`,
  );
  let again = null;
  try {
    await tasks.cancelTask(id);
  } catch (e) {
    again = e;
  }
  check(again?.code === -32602, `tasks/cancel of an ended task: ${again?.code} ${again?.message}`);

  // Owners: the other caller neither sees nor lists the task.
  const mine = await tasks.listTasks();
  let theirs = null;
  try {
    await b.experimental.tasks.getTask(id);
  } catch (e) {
    theirs = e;
  }
  const theirList = await b.experimental.tasks.listTasks();
  check(
    mine.tasks.some((t) => t.taskId === id) && theirs?.code === -32602 && theirs.message.includes(id) &&
      !theirList.tasks.some((t) => t.taskId === id),
    `tasks/get and tasks/list: only the owner's (${mine.tasks.length} listed; other caller: ${theirs?.message})`,
  );

  // A bad argument: an MCP error, nothing started.
  const before = (await call(a, "list_tasks", {})).totalSize;
  let err = null;
  for await (const m of start({ prompt: "x", agent: "no-such-agent" })) {
    if (m.type === "error") err = m.error;
  }
  const after = (await call(a, "list_tasks", {})).totalSize;
  check(
    err?.code === -32602 && err.message.includes("no-such-agent") && before === after,
    `task with a bad argument: ${err?.code} ${JSON.stringify(err?.message)}; nothing started`,
  );
}

async function main() {
  const a = await connect(tokenA);
  const b = await connect(tokenB);
  try {
    const tools = (await a.listTools()).tools;
    const names = new Set(tools.map((t) => t.name));
    check(
      ["start_task", "get_task", "list_tasks", "reply", "cancel_task", "get_changes"].every((n) => names.has(n)),
      `tools/list: ${[...names].sort()}`,
    );
    const start = tools.find((t) => t.name === "start_task");
    check(JSON.stringify(start.inputSchema.required) === '["prompt"]', "start_task requires prompt");

    const progress = [];
    let t = await call(a, "start_task", { prompt: "say hello", wait: true }, (p) => progress.push(p.message));
    check(t.state === "completed" && t.answer, `start and wait: ${t.state}`);
    check(progress.some((m) => m?.includes("Bash")), `progress notifications: ${progress.length}`);

    t = await call(a, "start_task", { prompt: "hello slow" });
    let [task, events] = await follow(a, t.id, (t) => ["completed", "failed", "canceled"].includes(t.state));
    check(task.state === "completed" && events.length > 2, `get_task until the end: ${events.length} events`);

    t = await call(a, "start_task", { prompt: "approval please", wait: true });
    check(t.state === "input-required" && t.question?.approvalId === "appr-1", "approval asked");
    const done = await call(a, "reply", { taskId: t.id, decision: "allow" });
    check(done.state === "completed", `approval answered with reply: ${done.state}`);

    t = await call(a, "start_task", { prompt: "grandchild" });
    [, events] = await follow(a, t.id, (_, ev) => grandchildPid(ev) !== null);
    const pid = grandchildPid(events);
    const canceled = await call(a, "cancel_task", { taskId: t.id });
    const deadline = Date.now() + 10000;
    while (alive(pid) && Date.now() < deadline) await sleep(50);
    check(canceled.state === "canceled" && !alive(pid), `cancel_task: grandchild ${pid} gone`);

    const ch = await call(a, "get_changes", { contextId: t.contextId });
    check(ch.changes === false, `get_changes without a workspace change: ${JSON.stringify(ch)}`);

    const mine = await call(a, "list_tasks", {});
    const e = await errorOf(b, "get_task", { taskId: t.id });
    const theirs = await call(b, "list_tasks", {});
    check(e.message.includes(t.id) && theirs.tasks.length === 0 && mine.tasks.length > 0, "two callers see only their own tasks");

    const before = (await call(a, "list_tasks", {})).totalSize;
    const bad = await errorOf(a, "start_task", { prompt: "x", agent: "no-such-agent" });
    const bad2 = await errorOf(a, "start_task", { prompt: "x", promt: "typo" });
    const after = (await call(a, "list_tasks", {})).totalSize;
    check(
      bad.code === -32602 && bad.message.includes("no-such-agent") && bad2.code === -32602 && before === after,
      `bad argument: ${bad.code} ${JSON.stringify(bad.message)}; nothing started (${before} = ${after})`,
    );

    await taskFlows(a, b);
  } finally {
    await a.close();
    await b.close();
  }
}

try {
  await main();
} catch (e) {
  failures++;
  console.log(`FAIL  ${e?.stack ?? e}`);
}
console.log(`js ${transport}: ${failures === 0 ? "PASS" : "FAIL"}`);
process.exit(failures ? 1 : 0);
