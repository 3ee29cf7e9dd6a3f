// The Task page: the context's earlier turns, this task's messages and streaming answer,
// approvals and questions, Cancel, and the box for the next message.
import { el, append, clear, badge, clipped, when, textOf, dataOf, stateName } from './dom.js';
import { rpc, follow, newId, stateOf } from './a2a.js';
import { baseOf, loadHeader } from './views.js';

const LIVE = new Set(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING']);

export async function taskPage(view, id, query, isCurrent, navigate, signal) {
  const adapter = query.get('a') || '';
  const base = baseOf(adapter);
  const ui = {
    state: el('span', { id: 'task-state' }),
    meta: el('p', { class: 'meta', id: 'task-meta' }),
    earlier: el('section', { id: 'earlier' }),
    turn: el('section', { id: 'turn' }),
    answer: el('pre', { id: 'answer', class: 'answer', 'data-chunks': '0' }),
    result: el('section', { id: 'result' }),
    usage: el('p', { id: 'usage', class: 'meta' }),
    budget: el('p', { id: 'budget', class: 'meta' }),
    ask: el('section', { id: 'ask' }),
    actions: el('p', { class: 'actions' }),
    next: el('section', { id: 'next' }),
    conn: el('span', { id: 'conn', class: 'meta' }),
  };
  let task = await rpc('GetTask', { id }, base);
  if (!isCurrent()) return;
  let chunks = 0;
  let lastEvent = 0;
  const tools = new Map();

  const cancel = el('button', { type: 'button', id: 'cancel' }, 'Cancel');
  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    try { await rpc('CancelTask', { id }, base); } catch (e) { showError(e); cancel.disabled = false; }
  });
  append(ui.actions, [cancel, ' ', ui.conn]);

  clear(view);
  append(view, [
    el('h1', {}, 'Task ', el('code', {}, id), ' ', ui.state),
    ui.meta, ui.earlier,
    el('h2', {}, 'This turn'), ui.turn, ui.ask,
    el('h3', {}, 'Answer'), ui.answer, ui.result, ui.usage, ui.budget, ui.actions, ui.next,
  ]);

  // Earlier tasks of the same context, collapsed.
  rpc('ListTasks', { contextId: task.contextId, pageSize: 100 }, base).then((r) => {
    if (!isCurrent()) return;
    const others = r.tasks.filter((t) => t.id !== id).reverse();
    if (!others.length) return;
    const d = el('details', { class: 'earlier' }, el('summary', {}, `Earlier in this conversation (${others.length} turns)`));
    for (const t of others) {
      for (const m of t.history || []) {
        const text = textOf(m);
        if (text) d.append(el('div', { class: `msg ${m.role === 'ROLE_USER' ? 'user' : 'agent'}` }, el('pre', {}, text)));
      }
    }
    ui.earlier.append(d);
  }).catch(() => {});

  const setState = (s) => {
    clear(ui.state).append(badge(s));
    task.status = { ...(task.status || {}), state: s };
    cancel.hidden = !(LIVE.has(s) || s === 'TASK_STATE_INPUT_REQUIRED');
    document.title = `${stateName(s)} · agent-host`;
    // The header's running/queued counts change when a task settles or waits.
    if (!LIVE.has(s)) loadHeader().catch(() => {});
  };

  const meta = (m) => {
    if (!m) return;
    if (m.usage) ui.usage.textContent = usageLine(m.usage);
    if (m.budget) ui.budget.textContent = budgetLine(m.budget);
  };

  // One message of the turn: user text, tool use, tool result, thinking, or agent text.
  const message = (m, final) => {
    if (!m) return;
    const md = m.metadata || {};
    const text = textOf(m);
    const data = dataOf(m);
    if (m.role === 'ROLE_USER') {
      const d = data && (data.decision || data.approvalId) ? `answer: ${data.decision || ''} ${data.message || ''}`.trim() : '';
      ui.turn.append(el('div', { class: 'msg user' }, el('span', { class: 'who' }, 'You'), el('pre', {}, text || d)));
      return;
    }
    if (md.thought || (m.parts || []).some((p) => p.metadata?.thought)) {
      ui.turn.append(el('details', { class: 'thinking' }, el('summary', {}, 'Thinking'), el('pre', {}, text)));
      return;
    }
    if (md.toolName) {
      const body = el('div', { class: 'tool-body' }, el('h4', {}, 'Input'), clipped(JSON.stringify(md.toolInput ?? {}, null, 2)));
      const d = el('details', { class: 'tool', open: true, 'data-tool': md.toolUseId || '' },
        el('summary', {}, `Tool: ${md.toolName}`), body);
      tools.set(md.toolUseId, body);
      ui.turn.append(d);
      return;
    }
    if (md.toolUseId && tools.has(md.toolUseId)) {
      const out = text.replace(/^Tool result: /, '');
      append(tools.get(md.toolUseId), [el('h4', { class: md.isError ? 'error' : '' }, md.isError ? 'Error' : 'Result'), clipped(out)]);
      return;
    }
    if (data && data.approvalId) {
      // What was asked stays in the turn; the ask box (while it waits) has the controls.
      ui.turn.append(el('div', { class: 'msg agent asked' }, el('span', { class: 'who' }, 'Asked'), el('pre', {}, text)));
      return;
    }
    if (final) return;
    if (text) ui.turn.append(el('div', { class: 'msg agent' }, el('pre', {}, text)));
  };

  const artifact = (u) => {
    const a = u.artifact || {};
    const text = (a.parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text).join('');
    if (a.artifactId === 'assistant-response') {
      chunks += 1;
      if (u.append) ui.answer.textContent += text;
      else ui.answer.textContent = text;
      ui.answer.dataset.chunks = String(chunks);
    } else if (a.artifactId === 'result') {
      clear(ui.result).append(el('h3', {}, 'Result'), el('pre', { id: 'final-result' }, text));
    } else if (a.artifactId === 'agent-metadata') {
      const d = (a.parts || []).find((p) => p.data)?.data || {};
      ui.meta.textContent = [d.cwd && `in ${d.cwd}`, d.model && `model ${d.model}`].filter(Boolean).join(' · ');
    } else if (text) {
      ui.result.append(el('h3', {}, a.name || a.artifactId), clipped(text));
    }
  };

  let askedFor = null;
  const ask = (status) => {
    const waiting = status?.state === 'TASK_STATE_INPUT_REQUIRED';
    const key = waiting ? (status.message?.messageId || 'asked') : null;
    // The same question again (a replay, a snapshot) keeps the box and what was typed in it.
    if (key && key === askedFor && ui.ask.firstChild) return;
    askedFor = key;
    clear(ui.ask);
    if (!waiting) return;
    ui.ask.append(askBox(status.message, async (parts) => {
      await rpc('SendMessage', { message: { messageId: newId(), role: 'ROLE_USER', taskId: id, contextId: task.contextId, parts }, configuration: { returnImmediately: true } }, base);
      clear(ui.ask);
      stream('SubscribeToTask', { id });
    }));
  };

  // The whole task as GetTask (or a stream's first frame) gives it.
  const snapshot = (t) => {
    task = t;
    clear(ui.turn); clear(ui.result); tools.clear();
    ui.answer.textContent = ''; chunks = 0;
    for (const m of t.history || []) message(m, false);
    for (const a of t.artifacts || []) artifact({ artifact: a });
    meta(t.metadata);
    setState(t.status?.state);
    ask(t.status);
  };

  const onResult = (r, eventId) => {
    if (eventId) lastEvent = eventId;
    if (ui.conn.textContent !== 'live') ui.conn.textContent = 'live';
    if (r.task) {
      // The log's first event (or a stream's opening frame): the task as it was then.
      snapshot(r.task);
    } else if (r.statusUpdate) {
      const s = r.statusUpdate.status || {};
      const final = !LIVE.has(s.state);
      message(s.message, final);
      meta(r.statusUpdate.metadata);
      setState(s.state);
      ask(s);
      if (s.state === 'TASK_STATE_FAILED' || s.state === 'TASK_STATE_REJECTED') {
        const t = textOf(s.message);
        if (t) ui.result.append(el('pre', { class: 'error' }, t));
      }
    } else if (r.artifactUpdate) {
      artifact(r.artifactUpdate);
    }
  };

  let streaming = false;
  const stream = async (method, params) => {
    if (streaming) return;
    streaming = true;
    ui.conn.textContent = 'live';
    try {
      await follow({ method, params, base, onResult, signal, from: lastEvent, replay: true,
        onReconnect: (n) => { ui.conn.textContent = `reconnecting after event ${n}…`; ui.conn.dataset.reconnects = String(Number(ui.conn.dataset.reconnects || 0) + 1); } });
      ui.conn.textContent = '';
    } catch (e) {
      if (signal.aborted) return;
      // A task that ended before we subscribed: show it as it ended.
      try { snapshot(await rpc('GetTask', { id }, base)); } catch { showError(e); }
      ui.conn.textContent = '';
    } finally {
      streaming = false;
    }
  };

  // Next message in this context: a new task, shown on its own page.
  const nextText = el('textarea', { id: 'next-prompt', rows: 3, placeholder: 'Next message in this conversation' });
  const nextBtn = el('button', { type: 'submit', id: 'next-send' }, 'Send');
  const nextForm = el('form', { id: 'next-form' }, nextText, nextBtn);
  nextForm.addEventListener('submit', async (e) => {
    e.preventDefault();
    try {
      const r = await rpc('SendMessage', { message: { messageId: newId(), role: 'ROLE_USER', contextId: task.contextId, parts: [{ text: nextText.value }] }, configuration: { returnImmediately: true } }, base);
      const t = r.task || r;
      navigate(`#/task/${encodeURIComponent(t.id)}${adapter ? '?a=' + encodeURIComponent(adapter) : ''}`);
    } catch (x) { showError(x); }
  });
  ui.next.append(nextForm);

  snapshot(task);
  // The task's whole event log (tool uses, thinking, every answer chunk), then what follows
  // while it runs: SubscribeToTask with Last-Event-ID 0.
  stream('SubscribeToTask', { id });
}

function usageLine(u) {
  const bits = [];
  if (u.inputTokens !== undefined) bits.push(`input ${u.inputTokens} tokens`);
  if (u.outputTokens !== undefined) bits.push(`output ${u.outputTokens} tokens`);
  if (u.costUsd !== undefined) bits.push(`cost $${Number(u.costUsd).toFixed(4)}`);
  if (u.durationMs !== undefined) bits.push(`${(u.durationMs / 1000).toFixed(1)} s`);
  return `Usage: ${bits.join(', ')}`;
}

/** Spent against the task's budget (and the conversation's): "Budget: toolCalls 3 of 5, ...". */
function budgetLine(b) {
  const line = (spent, allowed) => Object.keys(allowed || {})
    .map((k) => `${k} ${(spent || {})[k] ?? 0} of ${allowed[k]}`).join(', ');
  const bits = [line(b.spent, b.allowed)];
  if (b.context) bits.push(`conversation: ${line(b.context.spent, b.context.allowed)}`);
  return `Budget: ${bits.filter((x) => x).join('; ')}`;
}

/** What an input-required status asks, in the cross-CLI shape, with its answer controls. */
function askBox(msg, send) {
  const d = dataOf(msg) || {};
  const box = el('div', { class: 'approval', 'data-kind': d.kind || '' });
  const err = el('p', { class: 'error' });
  const go = async (parts) => {
    err.textContent = '';
    for (const b of box.querySelectorAll('button')) b.disabled = true;
    try { await send(parts); } catch (e) {
      err.textContent = e.message;
      for (const b of box.querySelectorAll('button')) b.disabled = false;
    }
  };
  if (d.kind === 'question' || !d.approvalId) {
    const q = el('textarea', { id: 'answer-text', rows: 3 });
    const b = el('button', { type: 'button', id: 'answer-send' }, 'Answer');
    b.addEventListener('click', () => go([{ text: q.value }]));
    append(box, [el('h3', {}, 'The agent asks'), el('pre', { class: 'question' }, d.detail || textOf(msg)), q, b, err]);
    return box;
  }
  const note = el('input', { id: 'approval-message', placeholder: 'optional message to the agent' });
  const dl = el('dl', {},
    ...[['kind', d.kind], ['tool', d.tool], ['target', d.target], ['detail', d.detail]]
      .filter(([, v]) => v).flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, el('pre', {}, String(v)))]));
  if (d.diff) append(dl, [el('dt', {}, 'diff'), el('dd', {}, clipped(String(d.diff)))]);
  const buttons = el('p', { class: 'buttons' });
  const options = d.options?.length ? d.options : [{ id: 'allow', label: 'Allow' }, { id: 'deny', label: 'Deny' }];
  for (const o of options) {
    const decision = o.id === 'allow' || o.id === 'deny' ? o.id : null;
    const b = el('button', { type: 'button', id: `approve-${o.id}`, class: `opt opt-${o.id}` }, o.label || o.id);
    b.addEventListener('click', () => {
      const data = { approvalId: d.approvalId, decision: decision || (/deny|reject|decline|cancel/i.test(o.id) ? 'deny' : 'allow') };
      if (!decision) data.option = o.id;
      if (note.value.trim()) data.message = note.value.trim();
      go([{ data }]);
    });
    buttons.append(b, ' ');
  }
  append(box, [el('h3', {}, 'Approval needed'), dl, note, buttons, err]);
  return box;
}

function showError(e) {
  document.getElementById('status-line').textContent = e.message || String(e);
}
