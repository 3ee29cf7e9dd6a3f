// Tiny DOM helpers. Every string from the host or an agent goes through textContent (via
// `el`'s string children), never through HTML parsing.

/** Creates an element; `attrs` sets attributes (`on*` functions become listeners); string children become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  append(e, children);
  return e;
}

export function append(e, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export function clear(e) {
  while (e.firstChild) e.removeChild(e.firstChild);
  return e;
}

/** Short state name and CSS class for a v1.0 task state. */
export function stateName(s) {
  return String(s || 'unknown').replace(/^TASK_STATE_/, '').toLowerCase().replace(/_/g, '-');
}

export function badge(state) {
  const n = stateName(state);
  return el('span', { class: `state state-${n}`, 'data-state': n }, n);
}

/** Text longer than `max` characters is clipped, with a "show all" button. */
export function clipped(text, max = 2000) {
  const pre = el('pre', { class: 'out' });
  if (text.length <= max) {
    pre.textContent = text;
    return pre;
  }
  pre.textContent = text.slice(0, max) + '\n…';
  const btn = el('button', { type: 'button', class: 'show-all' }, `show all (${text.length} characters)`);
  btn.addEventListener('click', () => { pre.textContent = text; btn.remove(); });
  return el('div', {}, pre, btn);
}

export function firstLine(text, max = 120) {
  const line = String(text || '').split('\n')[0];
  return line.length > max ? line.slice(0, max) + '…' : line;
}

export function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return isNaN(d) ? String(ts) : d.toLocaleString();
}

/** The text of a message's text parts, joined. */
export function textOf(msg) {
  return (msg?.parts || []).filter((p) => typeof p.text === 'string').map((p) => p.text).join('');
}

export function dataOf(msg) {
  return (msg?.parts || []).find((p) => p.data && typeof p.data === 'object')?.data;
}
