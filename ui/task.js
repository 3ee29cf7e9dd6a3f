// The Task page: titled with its prompt; a banner saying why it failed; the turn's steps as a
// timeline (thinking, tool uses with their durations, questions and answers, the changes) with
// the time of each since the task's start; the answer once, rendered as Markdown; the change it
// made (files, diff, the patch to download); approvals and questions; Cancel; the box for the
// next message. While the task runs the page follows the live end, unless the reader scrolled
// up (a button brings it back).
import { el, append, clear, badge, clipped, firstLine, textOf, dataOf, stateName } from './dom.js';
import { rpc, follow, newId } from './a2a.js';
import { baseOf, loadHeader, promptOf } from './views.js';
import { markdown } from './markdown.js';
import { changesView } from './changes.js';
import { secs, clock, tsOf } from './time.js';

const LIVE = new Set(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING']);
const ENDED = new Set(['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED']);

/** Keeps the window at the live end while the reader has not scrolled away from it. */
function stickToEnd(button) {
  // enabled: follow at all (a page opened on a live task); live: the task still runs (the
  // button shows only then; the end's last render is still followed).
  const s = { stick: true, scheduled: false, enabled: true, live: true };
  const atEnd = () => window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
  // Only a move up is the reader leaving the end: a scroll event that arrives after the page
  // grew (ours, a frame late) must not stop the following.
  let lastY = 0;
  s.onScroll = () => {
    const y = window.scrollY;
    if (atEnd()) s.stick = true;
    else if (y < lastY - 4) s.stick = false;
    lastY = y;
    button.hidden = s.stick || !s.enabled || !s.live;
  };
  s.toEnd = () => {
    window.scrollTo(0, document.documentElement.scrollHeight);
    lastY = window.scrollY;
    s.stick = true;
    button.hidden = true;
  };
  s.changed = () => {
    if (!s.stick || !s.enabled || s.scheduled) return;
    s.scheduled = true;
    requestAnimationFrame(() => { s.scheduled = false; if (s.stick) s.toEnd(); });
  };
  button.addEventListener('click', s.toEnd);
  return s;
}

export async function taskPage(view, id, query, isCurrent, navigate, signal) {
  const adapter = query.get('a') || '';
  const base = baseOf(adapter);
  const ui = {
    title: el('h1', { id: 'task-title' }),
    state: el('span', { id: 'task-state' }),
    meta: el('p', { class: 'meta', id: 'task-meta' }),
    banner: el('section', { id: 'banner' }),
    earlier: el('section', { id: 'earlier' }),
    timeline: el('ol', { id: 'timeline', class: 'timeline' }),
    answer: el('div', { id: 'answer', class: 'answer', 'data-chunks': '0' }),
    result: el('section', { id: 'result' }),
    changes: el('section', { id: 'changes', hidden: true }),
    usage: el('p', { id: 'usage', class: 'meta' }),
    budget: el('p', { id: 'budget', class: 'meta' }),
    ask: el('section', { id: 'ask' }),
    actions: el('p', { class: 'actions' }),
    next: el('section', { id: 'next' }),
    conn: el('span', { id: 'conn', class: 'meta' }),
    follow: el('button', { type: 'button', id: 'follow', class: 'follow', hidden: true }, '↓ Follow live'),
    elapsed: el('span', { id: 'task-elapsed' }),
  };
  let task = await rpc('GetTask', { id }, base);
  if (!isCurrent()) return;
  const sticky = stickToEnd(ui.follow);
  // A task that had ended when the page opened is read from the top, not followed.
  const followable = !ENDED.has(task.status?.state);
  sticky.enabled = followable;
  window.addEventListener('scroll', sticky.onScroll, { passive: true });
  signal.addEventListener('abort', () => window.removeEventListener('scroll', sticky.onScroll));

  let chunks = 0;
  let lastEvent = 0;
  let answerText = '';
  let resultText = '';
  let start = null; // ms: when the task was created
  let last = null; // ms: the latest status timestamp
  const tools = new Map();

  const cancel = el('button', { type: 'button', id: 'cancel' }, 'Cancel');
  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    try { await rpc('CancelTask', { id }, base); } catch (e) { showError(e); cancel.disabled = false; }
  });
  append(ui.actions, [cancel, ' ', ui.conn, ' ', ui.follow]);

  clear(view);
  append(view, [
    el('div', { class: 'title-row' }, ui.title, ui.state),
    ui.meta, ui.banner, ui.earlier,
    el('h2', {}, 'Steps'), ui.timeline,
    el('h2', {}, 'Answer'), ui.answer, ui.result,
    ui.changes, ui.ask, ui.usage, ui.budget, ui.actions, ui.next,
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
        if (!text) continue;
        const user = m.role === 'ROLE_USER';
        d.append(el('div', { class: `msg ${user ? 'user' : 'agent'}` }, user ? el('pre', {}, text) : markdown(text)));
      }
    }
    ui.earlier.append(d);
  }).catch(() => {});

  // The title: the prompt's first line; the id stays in the meta line.
  const prompt = firstLine(promptOf(task), 100) || '(no text)';
  ui.title.textContent = prompt;

  const since = (at) => (start !== null && at !== null ? `+${secs(at - start)}` : '');

  const metaLine = () => {
    const d = (task.artifacts || []).find((a) => a.artifactId === 'agent-metadata')?.parts?.find((p) => p.data)?.data || {};
    const bits = [
      el('span', {}, 'task ', el('code', { id: 'task-id' }, id)),
      task.metadata?.adapter && el('span', {}, task.metadata.adapter),
      d.cwd && el('span', { class: 'cwd' }, `in ${d.cwd}`),
      d.model && el('span', {}, `model ${d.model}`),
      start !== null && el('span', { title: new Date(start).toLocaleString() }, `started ${clock(start)}`),
      ui.elapsed,
    ].filter(Boolean);
    clear(ui.meta);
    bits.forEach((b, i) => { if (i) ui.meta.append(' · '); ui.meta.append(b); });
  };

  const tickElapsed = () => {
    if (start === null) { ui.elapsed.textContent = ''; return; }
    const live = LIVE.has(task.status?.state);
    const end = live || last === null ? Date.now() : last;
    const word = live ? 'running for' : task.status?.state === 'TASK_STATE_INPUT_REQUIRED' ? 'waiting since' : 'took';
    const span = task.status?.state === 'TASK_STATE_INPUT_REQUIRED' ? Date.now() - (last ?? start) : end - start;
    ui.elapsed.textContent = `${word} ${secs(span)}`;
  };
  const ticker = setInterval(() => { if (!isCurrent()) clearInterval(ticker); else tickElapsed(); }, 1000);

  // One row of the timeline.
  const step = (kind, label, at, body) => {
    const row = el('li', { class: `step step-${kind}`, 'data-kind': kind },
      el('span', { class: 'icon', 'aria-hidden': 'true' }),
      body ? el('details', { class: 'step-body' }, el('summary', {}, el('span', { class: 'label' }, label)), body)
        : el('span', { class: 'label' }, label),
      el('span', { class: 'dur' }),
      el('time', { class: 'at', title: at !== null ? new Date(at).toLocaleString() : '' }, since(at)));
    ui.timeline.append(row);
    sticky.changed();
    return row;
  };

  const setState = (s) => {
    clear(ui.state).append(badge(s));
    task.status = { ...(task.status || {}), state: s };
    cancel.hidden = !(LIVE.has(s) || s === 'TASK_STATE_INPUT_REQUIRED');
    sticky.live = !ENDED.has(s);
    if (!sticky.live) ui.follow.hidden = true;
    document.title = `${stateName(s)} · ${firstLine(prompt, 60)} · agent-host`;
    tickElapsed();
    // The header's counts change when a task settles or waits.
    if (!LIVE.has(s)) loadHeader().catch(() => {});
  };

  const meta = (m) => {
    if (!m) return;
    if (m.usage) ui.usage.textContent = usageLine(m.usage);
    if (m.budget) ui.budget.textContent = budgetLine(m.budget);
    if (m.createdAt && start === null) { start = tsOf(m.createdAt); metaLine(); }
    if (m.errorKind) task.metadata = { ...(task.metadata || {}), errorKind: m.errorKind };
    if (m.exitCode !== undefined) task.metadata = { ...(task.metadata || {}), exitCode: m.exitCode };
  };

  // Why it failed (or was canceled or rejected), at the top.
  const showBanner = (status) => {
    clear(ui.banner);
    const s = status?.state;
    if (!['TASK_STATE_FAILED', 'TASK_STATE_REJECTED', 'TASK_STATE_CANCELED'].includes(s)) return;
    const kind = task.metadata?.errorKind;
    const why = textOf(status.message);
    const head = { TASK_STATE_FAILED: 'Failed', TASK_STATE_REJECTED: 'Rejected', TASK_STATE_CANCELED: 'Canceled' }[s];
    append(ui.banner, [el('div', { class: `banner banner-${stateName(s)}`, role: 'alert' },
      el('strong', {}, head), kind ? el('span', { class: 'chip kind', id: 'error-kind' }, kind) : null,
      task.metadata?.exitCode !== undefined ? el('span', { class: 'chip' }, `exit code ${task.metadata.exitCode}`) : null,
      why ? el('pre', { id: 'failure-reason' }, why) : null)]);
  };

  let renderQueued = false;
  const renderAnswer = () => {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      clear(ui.answer);
      const text = answerText || resultText;
      if (text) ui.answer.append(markdown(text));
      else ui.answer.append(el('p', { class: 'meta empty' }, ENDED.has(task.status?.state) ? 'No answer.' : 'No answer yet.'));
      // The final result is shown only when it says something the streamed text did not.
      clear(ui.result);
      if (answerText && resultText && !answerText.includes(resultText.trim())) {
        append(ui.result, [el('h3', {}, 'Final result'), el('div', { id: 'final-result' }, markdown(resultText))]);
      }
      sticky.changed();
    });
  };

  // One message of the turn: user text, tool use, tool result, thinking, a question.
  const message = (m, final, at) => {
    if (!m) return;
    const md = m.metadata || {};
    const text = textOf(m);
    const data = dataOf(m);
    if (m.role === 'ROLE_USER') {
      const d = data && (data.decision || data.approvalId) ? `${data.decision || 'answer'}${data.message ? ': ' + data.message : ''}` : '';
      if (m === (task.history || []).find((h) => h.role === 'ROLE_USER')) return; // the title
      step('user', `You: ${firstLine(text || d, 120)}`, at, (text || d).length > 120 ? el('pre', {}, text || d) : null);
      return;
    }
    if (md.thought || (m.parts || []).some((p) => p.metadata?.thought)) {
      step('thinking', `Thinking: ${firstLine(text, 100)}`, at, el('pre', { class: 'out' }, text));
      return;
    }
    if (md.toolName) {
      if (md.toolUseId && tools.has(md.toolUseId)) return;
      const target = toolTarget(md.toolInput);
      const body = el('div', { class: 'tool-body' }, el('h4', {}, 'Input'), clipped(JSON.stringify(md.toolInput ?? {}, null, 2)));
      const row = step('tool', `${md.toolName}${target ? ': ' + target : ''}`, at, body);
      row.dataset.tool = md.toolUseId || '';
      row.dataset.status = 'running';
      tools.set(md.toolUseId, { row, body, at });
      return;
    }
    if (md.toolUseId && tools.has(md.toolUseId)) {
      const t = tools.get(md.toolUseId);
      const out = text.replace(/^Tool result: /, '');
      append(t.body, [el('h4', { class: md.isError ? 'error' : '' }, md.isError ? 'Error' : 'Output'), clipped(out)]);
      t.row.dataset.status = md.isError ? 'failed' : 'done';
      if (t.at !== null && at !== null) t.row.querySelector('.dur').textContent = secs(at - t.at);
      sticky.changed();
      return;
    }
    if (data && data.approvalId) {
      const what = data.tool ? `${data.tool}${data.target ? ': ' + data.target : ''}` : firstLine(text, 100);
      step('asked', `Asked: ${what}`, at, data.detail ? el('pre', {}, data.detail) : null);
      return;
    }
    if (final) return;
    if (text && m.role === 'ROLE_AGENT' && !LIVE.has(task.status?.state)) return;
    if (text && !/^(Using tool|Tool result)/.test(text)) step('note', firstLine(text, 120), at, text.length > 120 ? el('pre', {}, text) : null);
  };

  const artifact = (u, at) => {
    const a = u.artifact || {};
    const text = (a.parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text).join('');
    if (a.artifactId === 'assistant-response') {
      chunks += 1;
      answerText = u.append ? answerText + text : text;
      ui.answer.dataset.chunks = String(chunks);
      renderAnswer();
    } else if (a.artifactId === 'result') {
      resultText = text;
      renderAnswer();
    } else if (a.artifactId === 'agent-metadata') {
      task.artifacts = [...(task.artifacts || []).filter((x) => x.artifactId !== 'agent-metadata'), a];
      metaLine();
    } else if (a.artifactId === 'changes') {
      const v = changesView(a);
      clear(ui.changes).append(...v.nodes);
      ui.changes.hidden = false;
      ui.timeline.querySelector('.step-changes')?.remove();
      step('changes', v.summary, at);
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
    sticky.changed();
  };

  const ended = (s, at) => {
    const word = { TASK_STATE_COMPLETED: 'Completed', TASK_STATE_FAILED: 'Failed', TASK_STATE_CANCELED: 'Canceled', TASK_STATE_REJECTED: 'Rejected' }[s];
    if (!word) return;
    ui.timeline.querySelector('.step-end')?.remove();
    const row = step('end', word, at);
    row.classList.add(`end-${stateName(s)}`);
    if (start !== null && at !== null) row.querySelector('.dur').textContent = secs(at - start);
  };

  // The whole task as GetTask (or a stream's first frame) gives it.
  const snapshot = (t) => {
    task = t;
    clear(ui.timeline); clear(ui.result); clear(ui.changes); tools.clear();
    ui.changes.hidden = true;
    answerText = ''; resultText = ''; chunks = 0;
    start = tsOf(t.metadata?.createdAt);
    const at = tsOf(t.status?.timestamp);
    if (start === null) start = at;
    last = at;
    metaLine();
    step('start', 'Submitted', start);
    for (const m of t.history || []) message(m, false, null);
    for (const a of t.artifacts || []) artifact({ artifact: a }, null);
    meta(t.metadata);
    setState(t.status?.state);
    showBanner(t.status);
    if (ENDED.has(t.status?.state)) ended(t.status.state, at);
    ask(t.status);
    renderAnswer();
  };

  const onResult = (r, eventId) => {
    if (eventId) lastEvent = eventId;
    if (ui.conn.textContent !== 'live') ui.conn.textContent = 'live';
    if (r.task) {
      // The log's first event (or a stream's opening frame): the task as it was then.
      snapshot(r.task);
    } else if (r.statusUpdate) {
      const s = r.statusUpdate.status || {};
      const at = tsOf(s.timestamp) ?? last;
      if (at !== null) last = at;
      meta(r.statusUpdate.metadata);
      const prev = task.status?.state;
      const final = !LIVE.has(s.state);
      if (s.state === 'TASK_STATE_WORKING' && prev === 'TASK_STATE_SUBMITTED' && !s.message) step('working', 'Started working', at);
      message(s.message, final && !(dataOf(s.message)?.approvalId), at);
      setState(s.state);
      showBanner(s);
      if (ENDED.has(s.state)) ended(s.state, at);
      ask(s);
      renderAnswer();
    } else if (r.artifactUpdate) {
      artifact(r.artifactUpdate, last);
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

/** What a tool works on: the usual input fields, else the first string. */
function toolTarget(input) {
  if (!input || typeof input !== 'object') return '';
  for (const k of ['command', 'file_path', 'path', 'pattern', 'url', 'query']) {
    if (typeof input[k] === 'string') return firstLine(input[k], 80);
  }
  const s = Object.values(input).find((v) => typeof v === 'string');
  return s ? firstLine(s, 80) : '';
}

function usageLine(u) {
  const bits = [];
  if (u.inputTokens !== undefined) bits.push(`input ${u.inputTokens} tokens`);
  if (u.outputTokens !== undefined) bits.push(`output ${u.outputTokens} tokens`);
  if (u.costUsd !== undefined) bits.push(`cost $${Number(u.costUsd).toFixed(4)}`);
  if (u.durationMs !== undefined) bits.push(`agent time ${(u.durationMs / 1000).toFixed(1)} s`);
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
