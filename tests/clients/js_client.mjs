#!/usr/bin/env node
// Drive agent-host with the official JS A2A SDK (@a2a-js/sdk 1.3.0).
//
// Usage: node js_client.mjs BASE_URL 1.0|0.3 [JSONRPC|HTTP+JSON]
//
// The protocol version and binding are pinned by keeping only the card's
// supportedInterfaces of that version and binding (0.3 goes through the SDK's
// legacy-compat transports). Each step
// prints one line; any deviation exits non-zero with a message saying what was
// expected and what came back. Every request and every stream is bounded by a
// timeout so a misbehaving server cannot hang CI.
import { randomUUID } from 'node:crypto';
import {
  ClientFactory,
  ClientFactoryOptions,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';

const TIMEOUT_MS = 30_000;

class Deviation extends Error {}

const stateName = (s) => TaskState[s] ?? `<unknown state ${s}>`;

function check(cond, what) {
  if (!cond) throw new Deviation(what);
}

// Race a promise against a timer; the timer is cleared so node can exit.
async function bounded(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(
      () => reject(new Deviation(`${what}: no answer within ${TIMEOUT_MS / 1000} s`)),
      TIMEOUT_MS,
    );
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Collect a whole SDK stream, bounded as a whole; the abort signal also tears
// down the underlying HTTP request if the stream stalls.
async function drain(makeStream, what) {
  const ctrl = new AbortController();
  const run = async () => {
    const events = [];
    for await (const ev of makeStream({ signal: ctrl.signal })) events.push(ev);
    return events;
  };
  try {
    return await bounded(run(), what);
  } finally {
    ctrl.abort();
  }
}

// Options for a single request: abort it at the deadline too.
const opts = () => ({ signal: AbortSignal.timeout(TIMEOUT_MS) });

const step = (name, detail) => console.log(`${name.padEnd(10)} ok  ${detail}`);

const message = (text) => ({
  messageId: randomUUID(),
  role: Role.ROLE_USER,
  parts: [{ content: { $case: 'text', value: text } }],
});

const isTask = (res) => res && 'status' in res && 'id' in res;

const artifactText = (task) =>
  (task.artifacts ?? [])
    .flatMap((a) => a.parts ?? [])
    .filter((p) => p.content?.$case === 'text')
    .map((p) => p.content.value)
    .join('');

function describe(ev) {
  const c = ev?.payload?.$case;
  if (c === 'task' || c === 'statusUpdate') return `${c}(${stateName(ev.payload.value.status?.state)})`;
  return c ?? `<no payload: ${JSON.stringify(ev)}>`;
}

function checkStream(events, what, taskId) {
  const kinds = events.map(describe);
  check(events.length > 0, `${what}: the stream ended without any event`);
  check(events[0].payload?.$case === 'task', `${what}: expected the first event to be a task, got ${kinds}`);
  const tid = events[0].payload.value.id;
  check(tid, `${what}: the first task event has an empty id`);
  if (taskId) check(tid === taskId, `${what}: the stream is about task ${tid}, expected ${taskId}`);
  for (const ev of events.slice(1)) {
    const c = ev.payload?.$case;
    check(
      c === 'statusUpdate' || c === 'artifactUpdate',
      `${what}: expected only status/artifact updates after the task, got ${kinds}`,
    );
    check(ev.payload.value.taskId === tid, `${what}: ${c} for task ${ev.payload.value.taskId}, expected ${tid}`);
  }
  const statuses = events.filter((e) => e.payload.$case === 'statusUpdate').map((e) => e.payload.value.status?.state);
  const last = statuses.length ? statuses[statuses.length - 1] : events[0].payload.value.status?.state;
  check(
    last === TaskState.TASK_STATE_COMPLETED,
    `${what}: expected the last status to be TASK_STATE_COMPLETED, got ${stateName(last)} (events ${kinds})`,
  );
  return kinds;
}

async function main(base, version, binding) {
  // 1. card, pinned to one protocol version
  const resp = await bounded(fetch(`${base}/.well-known/agent-card.json`, opts()), 'card');
  check(resp.ok, `card: HTTP ${resp.status}`);
  const raw = await bounded(resp.json(), 'card');
  const all = (raw.supportedInterfaces ?? []).map((i) => `${i.protocolBinding}/${i.protocolVersion}`);
  raw.supportedInterfaces = (raw.supportedInterfaces ?? []).filter(
    (i) => i.protocolVersion === version && i.protocolBinding === binding,
  );
  check(
    raw.supportedInterfaces.length > 0,
    `card: no supportedInterfaces entry with protocolVersion ${version} and binding ${binding} (have ${all})`,
  );

  const legacyCompat = { enabled: true };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports:
        binding === 'JSONRPC'
          ? [new JsonRpcTransportFactory({ legacyCompat })]
          : [new RestTransportFactory({ legacyCompat })],
      preferredTransports: [binding],
    }),
  );
  const client = await bounded(factory.createFromAgentCard(raw), 'client');
  const card = await bounded(client.getAgentCard(opts()), 'card');
  check(card.name, 'card: name is empty');
  check(card.capabilities?.streaming === true, 'card: capabilities.streaming is not true');
  check(
    client.protocolVersion === version,
    `card: the client negotiated protocol version ${client.protocolVersion}, expected ${version}`,
  );
  step('card', `'${card.name}' via ${client.transport.constructor.name} ${client.protocolVersion} ${binding}`);

  // 2. blocking send
  const res = await bounded(client.sendMessage({ message: message('hello') }, opts()), 'send');
  check(isTask(res), `send: expected a task, got ${JSON.stringify(res)}`);
  check(
    res.status.state === TaskState.TASK_STATE_COMPLETED,
    `send: expected TASK_STATE_COMPLETED for a blocking send, got ${stateName(res.status.state)}`,
  );
  check(res.artifacts?.length > 0, 'send: the completed task has no artifacts');
  check(artifactText(res).trim(), 'send: the artifacts have no text');
  step('send', `task ${res.id} ${stateName(res.status.state)}, artifact text '${artifactText(res).slice(0, 40)}'`);

  // 3. get task with historyLength 1
  const got = await bounded(client.getTask({ id: res.id, historyLength: 1 }, opts()), 'get');
  check(got.id === res.id, `get: asked for ${res.id}, got ${got.id}`);
  check(
    got.status.state === TaskState.TASK_STATE_COMPLETED,
    `get: expected TASK_STATE_COMPLETED, got ${stateName(got.status.state)}`,
  );
  const hist = got.history?.length ?? 0;
  check(hist <= 1, `get: historyLength 1 but ${hist} messages came back`);
  step('get', `${stateName(got.status.state)}, history ${hist}`);

  // 4. list tasks (v1.0 only: v0.3 has no tasks/list)
  if (version === '1.0') {
    // Spell out the required fields (per the SDK's typings): with `{}` the SDK
    // serializes the missing enum as status "UNRECOGNIZED", which is not a TaskState.
    const req = { tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '' };
    const listed = await bounded(client.listTasks(req, opts()), 'list');
    const ids = (listed.tasks ?? []).map((t) => t.id);
    check(ids.includes(res.id), `list: task ${res.id} is not among the ${ids.length} listed tasks`);
    step('list', `${ids.length} task(s), ours included`);
  } else {
    console.log(`${'list'.padEnd(10)} --  skipped (no tasks/list in v0.3)`);
  }

  // 5. non-blocking send of a hanging prompt, then cancel it
  const hung = await bounded(
    client.sendMessage({ message: message('please hang'), configuration: { returnImmediately: true } }, opts()),
    'send-nb',
  );
  check(isTask(hung), `send-nb: expected a task, got ${JSON.stringify(hung)}`);
  check(
    [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING].includes(hung.status.state),
    `send-nb: expected SUBMITTED or WORKING right after a non-blocking send, got ${stateName(hung.status.state)}`,
  );
  step('send-nb', `task ${hung.id} ${stateName(hung.status.state)}`);

  const canceled = await bounded(client.cancelTask({ id: hung.id }, opts()), 'cancel');
  check(canceled.id === hung.id, `cancel: asked for ${hung.id}, got ${canceled.id}`);
  check(
    canceled.status.state === TaskState.TASK_STATE_CANCELED,
    `cancel: expected TASK_STATE_CANCELED, got ${stateName(canceled.status.state)}`,
  );
  step('cancel', stateName(canceled.status.state));

  // 6. streaming send
  let events = await drain((o) => client.sendMessageStream({ message: message('hello') }, o), 'stream');
  let kinds = checkStream(events, 'stream');
  check(events.some((e) => e.payload.$case === 'statusUpdate'), `stream: expected at least one status update, got ${kinds}`);
  check(events.some((e) => e.payload.$case === 'artifactUpdate'), `stream: expected at least one artifact update, got ${kinds}`);
  step('stream', `${events.length} events: ${kinds[0]}, ..., ${kinds[kinds.length - 1]}`);

  // 7. non-blocking "slow" send, then resubscribe to it
  const slow = await bounded(
    client.sendMessage({ message: message('slow hello'), configuration: { returnImmediately: true } }, opts()),
    'send-slow',
  );
  check(isTask(slow), `send-slow: expected a task, got ${JSON.stringify(slow)}`);
  check(
    [TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING].includes(slow.status.state),
    `send-slow: expected SUBMITTED or WORKING, got ${stateName(slow.status.state)}`,
  );
  events = await drain((o) => client.resubscribeTask({ id: slow.id }, o), 'subscribe');
  kinds = checkStream(events, 'subscribe', slow.id);
  step('subscribe', `${events.length} events: ${kinds[0]}, ..., ${kinds[kinds.length - 1]}`);
}

const [base, version, binding = 'JSONRPC'] = process.argv.slice(2);
if (!base || !['1.0', '0.3'].includes(version) || !['JSONRPC', 'HTTP+JSON'].includes(binding)) {
  console.error('usage: node js_client.mjs BASE_URL 1.0|0.3 [JSONRPC|HTTP+JSON]');
  process.exit(2);
}
try {
  await main(base.replace(/\/+$/, ''), version, binding);
  console.log(`PASS js ${version} ${binding}`);
  process.exit(0);
} catch (e) {
  const detail = e instanceof Deviation ? e.message : `${e?.constructor?.name ?? 'Error'}: ${e?.message ?? e}`;
  console.error(`FAIL js ${version} ${binding}: ${detail}`);
  process.exit(1);
}
