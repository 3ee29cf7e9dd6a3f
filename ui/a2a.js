// A2A v1.0 over JSON-RPC to the host that served this page: calls, and SSE read with fetch
// streaming, resumed with Last-Event-ID after a dropped connection.

const TOKEN = 'agent-host-token';
const KIND = 'agent-host-token-kind';
const TRACE = 'urn:agent-host:tool-trace:v1';
let apiKeyHeader = 'X-API-Key';
let nextId = 1;

export class AuthError extends Error {}

export class RpcError extends Error {
  constructor(error) {
    super(`${error.message} (${error.code})`);
    this.code = error.code;
  }
}

export function setToken(token, asApiKey) {
  sessionStorage.setItem(TOKEN, token);
  sessionStorage.setItem(KIND, asApiKey ? 'api-key' : 'bearer');
}

export function setApiKeyHeader(name) {
  if (name) apiKeyHeader = name;
}

function headers(extra = {}) {
  const h = { 'Content-Type': 'application/json', 'A2A-Version': '1.0', 'A2A-Extensions': TRACE, ...extra };
  const t = sessionStorage.getItem(TOKEN);
  if (t) {
    if (sessionStorage.getItem(KIND) === 'api-key') h[apiKeyHeader] = t;
    else h.Authorization = `Bearer ${t}`;
  }
  return h;
}

function endpoint(base) {
  return base || '/';
}

async function check(resp) {
  if (resp.status === 401) throw new AuthError('the host refused the token (401)');
  if (!resp.ok && !(resp.headers.get('content-type') || '').includes('json')) {
    throw new Error(`HTTP ${resp.status}`);
  }
}

/** One JSON-RPC call; returns its result or throws RpcError / AuthError. */
export async function rpc(method, params, base) {
  const resp = await fetch(endpoint(base), {
    method: 'POST',
    headers: headers(),
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }),
  });
  await check(resp);
  const body = await resp.json();
  if (body.error) throw new RpcError(body.error);
  if (!resp.ok) throw new Error(body.message || `HTTP ${resp.status}`);
  return body.result;
}

/** The console's own route: adapters, versions, load, workspace roots. */
export async function hostInfo() {
  const resp = await fetch('/ui/api/host', { headers: headers() });
  await check(resp);
  return resp.json();
}

/** Reads the SSE frames of `resp`, calling `frame(id, data)` for each. */
async function readFrames(resp, frame, signal) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let id = null;
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line === '') {
          if (data.length) frame(id, data.join('\n'));
          id = null;
          data = [];
        } else if (line.startsWith(':')) {
          // keep-alive comment
        } else {
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? '' : line.slice(c + 1);
          if (v.startsWith(' ')) v = v.slice(1);
          if (field === 'id') id = v;
          else if (field === 'data') data.push(v);
        }
      }
      if (signal?.aborted) break;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

const FINAL = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED',
  'TASK_STATE_REJECTED', 'TASK_STATE_INPUT_REQUIRED', 'TASK_STATE_AUTH_REQUIRED']);

/** The state a stream result carries, if any. */
export function stateOf(result) {
  return result?.task?.status?.state || result?.statusUpdate?.status?.state;
}

/**
 * Follows a task's stream: starts with `method`/`params` (SendStreamingMessage or
 * SubscribeToTask), hands every result to `onResult(result, eventId)` exactly once (event ids
 * at or below the last seen one are dropped), and after a connection that ends before the
 * task settled or asks for input, resubscribes with `Last-Event-ID`. Resolves when the task
 * settles or asks for input, or `signal` aborts. `from` is the last event id already shown;
 * `replay` sends it even when 0, so the host replays the task's whole event log first.
 */
export async function follow({ method, params, base, onResult, signal, from = 0, replay = false, onReconnect }) {
  let last = from;
  let settled = false;
  let first = true;
  let failures = 0;
  while (!settled && !signal?.aborted) {
    const extra = {};
    let m = method;
    let p = params;
    if (!first) {
      m = 'SubscribeToTask';
      p = { id: params.id || params.taskId };
    }
    if (last > 0 || replay) extra['Last-Event-ID'] = String(last);
    let resp;
    try {
      resp = await fetch(endpoint(base), {
        method: 'POST',
        headers: headers({ ...extra, Accept: 'text/event-stream' }),
        body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: m, params: p }),
        signal,
      });
    } catch (e) {
      if (signal?.aborted) return;
      if (++failures > 20) throw e;
      await sleep(Math.min(2000, 100 * failures));
      continue;
    }
    await check(resp);
    const type = resp.headers.get('content-type') || '';
    if (!type.includes('text/event-stream')) {
      const body = await resp.json();
      if (body.error) {
        // A task that ended while we were away cannot be subscribed to: that is the end.
        if (!first && body.error.code === -32004) return;
        throw new RpcError(body.error);
      }
      onResult(body.result, null);
      return;
    }
    const taskId = () => params.id || params.taskId;
    try {
      await readFrames(resp, (id, data) => {
        let msg;
        try { msg = JSON.parse(data); } catch { return; }
        if (msg.error) throw new RpcError(msg.error);
        const n = id === null ? null : Number(id);
        if (n !== null && n <= last) return;
        if (n !== null) last = n;
        const r = msg.result;
        if (!params.id && !params.taskId) {
          const t = r?.task?.id || r?.statusUpdate?.taskId || r?.artifactUpdate?.taskId;
          if (t) params = { ...params, id: t };
        }
        onResult(r, n);
        // A replay may pass an old input-required; the last state seen decides.
        const st = stateOf(r);
        if (st) settled = FINAL.has(st);
      }, signal);
      failures = 0;
    } catch (e) {
      if (e instanceof RpcError) throw e;
      if (signal?.aborted) return;
      if (++failures > 20) throw e;
    }
    first = false;
    if (!settled && !signal?.aborted && taskId()) {
      onReconnect?.(last);
      await sleep(100);
    } else if (!taskId()) {
      return;
    }
  }
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

export function newId() {
  return crypto.randomUUID ? crypto.randomUUID() : `m-${Date.now()}-${Math.random().toString(16).slice(2)}`;
}
