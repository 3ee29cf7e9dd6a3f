// The official MCP TypeScript SDK (@modelcontextprotocol/sdk) running start_task as an MCP task
// whose approval is answered later than the client's request timeout: callToolStream with a
// 2 s timeout reset by progress notifications (resetTimeoutOnProgress), the approval answered
// with the reply tool after 4 s. The SDK's tasks/result must live until the task ends.
// Run by tests/integration/mcp.rs (the_typescript_sdk_waits_past_its_request_timeout_for_a_reply).
//
// Usage: node mcp_js_long_wait.mjs BASE_URL [TIMEOUT_MS] [ANSWER_AFTER_MS]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [base, timeoutArg, afterArg] = process.argv.slice(2);
const timeout = Number(timeoutArg ?? 2000);
const answerAfter = Number(afterArg ?? 4000);

const client = new Client({ name: "agent-host-long-wait", version: "0.0.0" });
await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp`)));
// tools/list tells the SDK that start_task runs as a task.
await client.listTools();

const t0 = Date.now();
const progress = [];
const seen = [];
let result = null;
let error = null;
let replied = null;
const options = { timeout, resetTimeoutOnProgress: true, onprogress: (p) => progress.push(p.message) };
const stream = client.experimental.tasks.callToolStream(
  { name: "start_task", arguments: { prompt: "approval please" } },
  CallToolResultSchema,
  options,
);
for await (const m of stream) {
  seen.push(m.type === "taskStatus" ? m.task.status : m.type);
  if (m.type === "taskStatus" && m.task.status === "input_required" && !replied) {
    const taskId = m.task.taskId;
    replied = new Promise((resolve) => setTimeout(resolve, answerAfter)).then(() =>
      client.callTool({ name: "reply", arguments: { taskId, decision: "allow", wait: false } }),
    );
  }
  if (m.type === "result") result = m.result;
  if (m.type === "error") error = m.error;
}
const took = Date.now() - t0;
const state = result?.structuredContent?.state;
console.log(
  JSON.stringify({ seen, state, error: error ? `${error.code} ${error.message}` : null, progress: progress.length, took }),
);
await replied;
await client.close();
const ok = !error && state === "completed" && took >= answerAfter && progress.length > 0;
console.log(ok ? "PASS" : "FAIL");
process.exit(ok ? 0 : 1);
