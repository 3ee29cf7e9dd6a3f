// The baseline of the side-by-side benchmark: an A2A host written the way the Node hosts of
// this kind are, with @a2a-js/sdk 1.3.0 + express. Its AgentExecutor spawns the CLI per task
// (child_process.spawn, the prompt as the last argument), splits stdout into lines, publishes
// an artifact-update (append) per line and a final completed status-update when the CLI exits.
// Tasks live in the SDK's InMemoryTaskStore.
//
// Environment: PORT (required), BENCH_CLI (the program to spawn, required), BENCH_CWD.
// Listens on 127.0.0.1 only.

import { spawn } from "node:child_process";
import express from "express";
import { TaskState, Role } from "@a2a-js/sdk";
import { DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";

const port = Number(process.env.PORT);
const cli = process.env.BENCH_CLI;
if (!port || !cli) {
  console.error("server.mjs: set PORT and BENCH_CLI");
  process.exit(2);
}
const cwd = process.env.BENCH_CWD || process.cwd();
const base = `http://127.0.0.1:${port}`;

const card = {
  name: "baseline",
  description: "Node A2A host (@a2a-js/sdk) running a CLI per task",
  supportedInterfaces: [{ url: `${base}/`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
  version: "0.0.0",
  capabilities: { streaming: true, pushNotifications: false, extensions: [] },
  securitySchemes: {},
  securityRequirements: [],
  defaultInputModes: ["text/plain"],
  defaultOutputModes: ["text/plain"],
  skills: [
    {
      id: "cli",
      name: "CLI",
      description: "Runs the CLI with the message as its prompt",
      tags: ["agent"],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  signatures: [],
};

const now = () => new Date().toISOString();
const textPart = (text) => ({ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" });

function status(ctx, state) {
  return {
    kind: "statusUpdate",
    data: {
      taskId: ctx.taskId,
      contextId: ctx.contextId,
      status: { state, message: undefined, timestamp: now() },
      metadata: undefined,
    },
  };
}

class CliExecutor {
  async execute(ctx, bus) {
    const msg = ctx.userMessage;
    const prompt = msg.parts
      .map((p) => (p.content && p.content.$case === "text" ? p.content.value : ""))
      .join(" ");
    if (!ctx.task) {
      bus.publish({
        kind: "task",
        data: {
          id: ctx.taskId,
          contextId: ctx.contextId,
          status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: now() },
          artifacts: [],
          history: [msg],
          metadata: {},
        },
      });
    }
    bus.publish(status(ctx, TaskState.TASK_STATE_WORKING));
    await new Promise((resolve) => {
      const child = spawn(cli, [prompt], { cwd, stdio: ["ignore", "pipe", "pipe"] });
      let buf = "";
      let first = true;
      const line = (l) => {
        if (!l) return;
        bus.publish({
          kind: "artifactUpdate",
          data: {
            taskId: ctx.taskId,
            contextId: ctx.contextId,
            artifact: {
              artifactId: "output",
              name: "output",
              description: "",
              parts: [textPart(l)],
              metadata: undefined,
              extensions: [],
            },
            append: !first,
            lastChunk: false,
            metadata: undefined,
          },
        });
        first = false;
      };
      child.stdout.setEncoding("utf8");
      child.stdout.on("data", (chunk) => {
        buf += chunk;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          line(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      });
      child.stderr.resume();
      child.on("error", () => resolve(TaskState.TASK_STATE_FAILED));
      child.on("close", (code) => {
        line(buf);
        resolve(code === 0 ? TaskState.TASK_STATE_COMPLETED : TaskState.TASK_STATE_FAILED);
      });
    }).then((state) => bus.publish(status(ctx, state)));
    bus.finished();
  }

  async cancelTask() {}
}

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), new CliExecutor());
const app = express();
app.use("/.well-known/agent-card.json", agentCardHandler({ agentCardProvider: handler }));
app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(port, "127.0.0.1");
server.keepAliveTimeout = 60_000;
process.on("SIGTERM", () => process.exit(0));
void Role;
