// The Tasks and New task pages and the header.
import { el, append, clear, badge, firstLine, when, textOf, stateName } from './dom.js';
import { rpc, hostInfo, newId } from './a2a.js';
import { secs, tsOf } from './time.js';

export const host = { info: null };

// Re-reads the Tasks page in place (set while it is shown).
let refresher = null;

/** Refreshes the Tasks page, if it is the one shown. */
export function refreshList() {
  return refresher ? refresher() : Promise.resolve();
}

/** Running plus queued tasks, from the last header data. */
export function busy() {
  return (host.info?.adapters || []).reduce((n, a) => n + a.running + a.queued, 0);
}

/** The endpoint of an adapter id ('' or unknown: the default one). */
export function baseOf(adapter) {
  const a = host.info?.adapters?.find((x) => x.id === adapter);
  return a && !a.default ? a.path : '/';
}

export async function loadHeader() {
  const info = await hostInfo();
  host.info = info;
  renderHeader();
  return info;
}

export function renderHeader() {
  const info = host.info;
  const box = clear(document.getElementById('host-info'));
  if (!info) return;
  const running = info.adapters.reduce((n, a) => n + a.running, 0);
  const queued = info.adapters.reduce((n, a) => n + a.queued, 0);
  const waiting = info.adapters.reduce((n, a) => n + (a.waiting || 0), 0);
  append(box, [
    el('span', { class: 'chip' }, `agent-host ${info.version}`),
    ...info.adapters.map((a) => el('span', { class: 'chip adapter', 'data-adapter': a.id },
      `${a.id}${a.cliVersion ? ' ' + a.cliVersion : ''}`)),
    sandboxChip(info.sandbox),
    el('span', { class: 'chip', id: 'load' }, `${running} running · ${queued} queued`),
    el('span', { class: `chip${waiting ? ' waiting' : ''}`, id: 'waiting-count' }, `${waiting} waiting for input`),
  ]);
}

/** The sandbox of the tasks: `{mode, inForce, missing}` (null: none, process group only). */
function sandboxChip(sb) {
  if (!sb) return el('span', { class: 'chip', id: 'sandbox' }, 'sandbox: off');
  const detail = [`in force: ${(sb.inForce || []).join(', ') || 'nothing'}`];
  if (sb.missing?.length) detail.push(`missing: ${sb.missing.join(', ')}`);
  return el('span', { class: `chip${sb.missing?.length ? ' warn' : ''}`, id: 'sandbox', title: detail.join('; ') },
    `sandbox: ${sb.mode || 'unknown'}${sb.missing?.length ? ' (incomplete)' : ''}`);
}

const STATES = ['', 'TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING', 'TASK_STATE_INPUT_REQUIRED',
  'TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'];

function usageText(u) {
  if (!u) return '';
  const bits = [];
  if (u.inputTokens !== undefined || u.outputTokens !== undefined) bits.push(`${u.inputTokens ?? 0}→${u.outputTokens ?? 0} tok`);
  if (u.costUsd !== undefined) bits.push(`$${Number(u.costUsd).toFixed(4)}`);
  return bits.join(' · ');
}

/** The task's prompt: the text of its first user message. */
export function promptOf(task) {
  const m = (task.history || []).find((h) => h.role === 'ROLE_USER');
  return textOf(m);
}

function cwdOf(task) {
  const a = (task.artifacts || []).find((x) => x.artifactId === 'agent-metadata');
  return a?.parts?.find((p) => p.data)?.data?.cwd || '';
}

const LIVE = new Set(['TASK_STATE_SUBMITTED', 'TASK_STATE_WORKING']);

/** From the task's creation to its last update (to now while it runs). */
function elapsed(task) {
  const start = tsOf(task.metadata?.createdAt);
  if (start === null) return '';
  const end = LIVE.has(task.status?.state) ? Date.now() : tsOf(task.status?.timestamp);
  return end === null ? '' : secs(end - start);
}

// A table on a wide screen; on a narrow one the same rows become cards (console.css): the
// prompt on a line of its own, the state, times and context under it.
function row(task, adapter) {
  const href = `#/task/${encodeURIComponent(task.id)}${adapter ? '?a=' + encodeURIComponent(adapter) : ''}`;
  return el('tr', { class: 'task-row', 'data-task': task.id, 'data-state': stateName(task.status?.state) },
    el('td', { class: 'state-cell' }, badge(task.status?.state)),
    el('td', { class: 'prompt' }, el('a', { href }, firstLine(promptOf(task)) || '(no text)')),
    el('td', { class: 'adapter', 'data-label': 'adapter' }, task.metadata?.adapter || adapter || ''),
    el('td', { class: 'cwd', 'data-label': 'in' }, cwdOf(task)),
    el('td', { class: 'updated', 'data-label': 'updated' }, when(task.status?.timestamp)),
    el('td', { class: 'elapsed', 'data-label': 'took' }, elapsed(task)),
    el('td', { class: 'usage', 'data-label': 'usage' }, usageText(task.metadata?.usage)),
    el('td', { class: 'ctx', 'data-label': 'context' }, el('a', { href: `#/?context=${encodeURIComponent(task.contextId)}` }, task.contextId.slice(0, 8))));
}

function table(rows) {
  return el('table', { class: 'tasks' },
    el('thead', {}, el('tr', {}, ...['State', 'Prompt', 'Adapter', 'Working directory', 'Updated', 'Elapsed', 'Usage', 'Context'].map((h) => el('th', {}, h)))),
    el('tbody', {}, rows));
}

/** The Tasks page: waiting tasks on top, then every task a page at a time. */
export async function tasksPage(view, query, isCurrent) {
  const filter = {
    state: query.get('state') || '',
    context: query.get('context') || '',
    adapter: query.get('adapter') || '',
  };
  const base = baseOf(filter.adapter);
  const adapterSelect = el('select', { id: 'filter-adapter' }, el('option', { value: '' }, 'default adapter'),
    ...(host.info?.adapters || []).filter((a) => !a.default).map((a) => el('option', { value: a.id, selected: a.id === filter.adapter }, a.id)));
  const stateSelect = el('select', { id: 'filter-state' },
    ...STATES.map((s) => el('option', { value: s, selected: s === filter.state }, s ? stateName(s) : 'any state')));
  const ctxInput = el('input', { id: 'filter-context', placeholder: 'context id', value: filter.context });
  const form = el('form', { class: 'filters', id: 'filters' }, 'Filter: ', stateSelect, ctxInput,
    (host.info?.adapters?.length || 0) > 1 ? adapterSelect : null,
    el('button', { type: 'submit' }, 'Apply'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    if (stateSelect.value) q.set('state', stateSelect.value);
    if (ctxInput.value.trim()) q.set('context', ctxInput.value.trim());
    if (adapterSelect.value) q.set('adapter', adapterSelect.value);
    location.hash = `#/?${q}`;
  });
  const waiting = el('section', { id: 'waiting' });
  const list = el('section', { id: 'list' });
  clear(view);
  append(view, [el('h1', {}, 'Tasks'), form, waiting, list]);

  const params = { includeArtifacts: true };
  if (filter.context) params.contextId = filter.context;
  // Tasks that wait for a person, on top (and counted in the title).
  const loadWaiting = async () => {
    const w = await rpc('ListTasks', { ...params, status: 'TASK_STATE_INPUT_REQUIRED', pageSize: 100 }, base);
    if (!isCurrent()) return;
    const n = w.totalSize ?? w.tasks.length;
    document.title = n ? `(${n}) agent-host` : 'agent-host';
    clear(waiting);
    if (w.tasks.length) {
      append(waiting, [el('h2', { class: 'waiting' }, `Waiting for input (${n})`), table(w.tasks.map((t) => row(t, filter.adapter)))]);
    }
  };
  await loadWaiting();
  if (!isCurrent()) return;

  const pages = [''];
  let page = 0;
  const show = async () => {
    const p = { ...params, pageSize: 50 };
    if (filter.state) p.status = filter.state;
    if (pages[page]) p.pageToken = pages[page];
    const r = await rpc('ListTasks', p, base);
    if (!isCurrent()) return;
    if (r.nextPageToken) pages[page + 1] = r.nextPageToken;
    const prev = el('button', { type: 'button', id: 'page-prev', disabled: page === 0 }, '← Newer');
    const next = el('button', { type: 'button', id: 'page-next', disabled: !r.nextPageToken }, 'Older →');
    prev.addEventListener('click', () => { page -= 1; show(); });
    next.addEventListener('click', () => { page += 1; show(); });
    clear(list);
    append(list, [
      el('p', { class: 'paging' }, prev, ' ', el('span', { id: 'page-info' }, `page ${page + 1} · ${r.tasks.length} of ${r.totalSize ?? '?'} tasks`), ' ', next),
      r.tasks.length ? table(r.tasks.map((t) => row(t, filter.adapter))) : el('p', { class: 'empty' }, 'No tasks.'),
    ]);
  };
  await show();
  refresher = async () => {
    if (!isCurrent()) { refresher = null; return; }
    await loadWaiting();
    await show();
  };
}

/** The New task page. */
export function newTaskPage(view, query, navigate) {
  const info = host.info || { adapters: [], workspaceRoots: [] };
  const prompt = el('textarea', { id: 'new-prompt', rows: 6, required: true, placeholder: 'What should the agent do?' });
  const cwd = el('input', { id: 'new-cwd', list: 'roots', placeholder: info.workspaceRoots[0] || '' });
  const roots = el('datalist', { id: 'roots' }, ...info.workspaceRoots.map((r) => el('option', { value: r })));
  const picker = el('select', { id: 'new-root' }, el('option', { value: '' }, 'default directory'),
    ...info.workspaceRoots.map((r) => el('option', { value: r }, r)));
  picker.addEventListener('change', () => { cwd.value = picker.value; });
  const adapter = el('select', { id: 'new-adapter' }, ...info.adapters.map((a) => el('option', { value: a.default ? '' : a.id }, `${a.id} (${a.name})`)));
  const files = el('input', { id: 'new-files', type: 'file', multiple: true });
  const err = el('p', { class: 'error', id: 'new-error' });
  const submit = el('button', { type: 'submit', id: 'new-submit' }, 'Start');
  const form = el('form', { id: 'new-form', class: 'new' },
    el('label', {}, 'Prompt', prompt),
    el('label', {}, 'Working directory (inside the workspace roots) ', picker, cwd, roots),
    info.adapters.length > 1 ? el('label', {}, 'Adapter ', adapter) : null,
    el('label', {}, 'Attachments ', files),
    submit, err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    err.textContent = '';
    submit.disabled = true;
    try {
      const parts = [{ text: prompt.value }];
      for (const f of files.files) {
        parts.push({ raw: await base64(f), filename: f.name, mediaType: f.type || 'application/octet-stream' });
      }
      const message = { messageId: newId(), role: 'ROLE_USER', parts };
      if (cwd.value.trim()) message.metadata = { cwd: cwd.value.trim() };
      const a = info.adapters.length > 1 ? adapter.value : '';
      const r = await rpc('SendMessage', { message, configuration: { returnImmediately: true } }, baseOf(a));
      const task = r.task || r;
      navigate(`#/task/${encodeURIComponent(task.id)}${a ? '?a=' + encodeURIComponent(a) : ''}`);
    } catch (x) {
      err.textContent = x.message;
      submit.disabled = false;
    }
  });
  clear(view);
  append(view, [el('h1', {}, 'New task'), form]);
  prompt.focus();
}

function base64(file) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(String(r.result).replace(/^data:[^,]*,/, ''));
    r.onerror = () => reject(r.error);
    r.readAsDataURL(file);
  });
}
