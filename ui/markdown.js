// A small Markdown renderer for agents' answers that builds DOM nodes and never parses HTML:
// every piece of text becomes a text node, so `<script>` or `<img onerror>` in an answer is
// shown as the characters it is. Covered: ATX headings, paragraphs, fenced and indented code,
// block quotes, bullet and numbered lists (nested by indentation), horizontal rules, simple
// pipe tables, and inline code, bold, italic, strike-through and links. Links keep only
// http(s) and mailto targets; anything else (javascript:, data:) stays plain text.
import { el } from './dom.js';

const SAFE_URL = /^(https?:|mailto:)/i;

/** Renders `src` into a new `<div class="md">`. */
export function markdown(src) {
  const root = el('div', { class: 'md' });
  blocks(String(src || '').replace(/\r\n?/g, '\n').split('\n'), root);
  return root;
}

const FENCE = /^\s{0,3}(```+|~~~+)\s*([\w+-]*)/;
const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s{0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s{0,3}>\s?/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;

function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }
    const fence = line.match(FENCE);
    if (fence) { i = code(lines, i, fence, parent); continue; }
    const h = line.match(HEADING);
    if (h) { parent.append(inline(el(`h${Math.min(6, h[1].length + 2)}`), h[2])); i += 1; continue; }
    if (RULE.test(line)) { parent.append(el('hr')); i += 1; continue; }
    if (QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && QUOTE.test(lines[i])) inner.push(lines[i++].replace(QUOTE, ''));
      const q = el('blockquote');
      blocks(inner, q);
      parent.append(q);
      continue;
    }
    if (ITEM.test(line)) { i = list(lines, i, parent); continue; }
    if (/^( {4}|\t)/.test(line)) {
      const body = [];
      while (i < lines.length && (/^( {4}|\t)/.test(lines[i]) || !lines[i].trim())) body.push(lines[i++].replace(/^( {4}|\t)/, ''));
      while (body.length && !body[body.length - 1].trim()) body.pop();
      parent.append(el('pre', {}, el('code', {}, body.join('\n'))));
      continue;
    }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1])) { i = table(lines, i, parent); continue; }
    const para = [];
    while (i < lines.length && lines[i].trim() && !startsBlock(lines[i])) para.push(lines[i++].trim());
    if (!para.length) para.push(lines[i++].trim());
    parent.append(inline(el('p'), para.join('\n')));
  }
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || ITEM.test(line);
}

function code(lines, i, fence, parent) {
  const marker = fence[1];
  const body = [];
  i += 1;
  while (i < lines.length && !lines[i].trim().startsWith(marker)) body.push(lines[i++]);
  const c = el('code', fence[2] ? { 'data-lang': fence[2] } : {}, body.join('\n'));
  parent.append(el('pre', { class: 'code' }, c));
  return i + 1;
}

function list(lines, i, parent) {
  const first = lines[i].match(ITEM);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const l = el(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) l.setAttribute('start', String(parseInt(first[2], 10)));
  while (i < lines.length) {
    const m = lines[i].match(ITEM);
    if (!m || m[1].length < indent) break;
    if (m[1].length > indent) { i = list(lines, i, l.lastChild || l); continue; }
    const li = inline(el('li'), m[3]);
    i += 1;
    // Continuation lines (indented, not a new item) belong to this item.
    while (i < lines.length && lines[i].trim() && !ITEM.test(lines[i]) && /^\s+/.test(lines[i])) {
      li.append(document.createTextNode('\n'));
      inline(li, lines[i++].trim());
    }
    l.append(li);
    if (i < lines.length && !lines[i].trim() && i + 1 < lines.length && ITEM.test(lines[i + 1])) i += 1;
  }
  parent.append(l);
  return i;
}

function cells(line) {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
}

function table(lines, i, parent) {
  const head = cells(lines[i]);
  const t = el('table', { class: 'md-table' },
    el('thead', {}, el('tr', {}, ...head.map((c) => inline(el('th'), c)))));
  const body = el('tbody');
  i += 2;
  while (i < lines.length && lines[i].includes('|') && lines[i].trim()) {
    body.append(el('tr', {}, ...cells(lines[i]).map((c) => inline(el('td'), c))));
    i += 1;
  }
  t.append(body);
  parent.append(el('div', { class: 'table-wrap' }, t));
  return i;
}

// Inline spans, earliest match first: code, links, bold, italic, strike-through.
const SPANS = [
  { re: /`([^`\n]+)`/, make: (m) => el('code', {}, m[1]) },
  { re: /\[([^\]\n]+)\]\(([^)\s]+)\)/, make: (m) => link(m[1], m[2]) },
  { re: /<(https?:\/\/[^>\s]+)>/, make: (m) => link(m[1], m[1]) },
  { re: /\*\*([^*\n]+)\*\*|__([^_\n]+)__/, make: (m) => inline(el('strong'), m[1] || m[2]) },
  { re: /\*([^*\n]+)\*|(?<![\w])_([^_\n]+)_(?![\w])/, make: (m) => inline(el('em'), m[1] || m[2]) },
  { re: /~~([^~\n]+)~~/, make: (m) => inline(el('del'), m[1]) },
];

function link(text, href) {
  if (!SAFE_URL.test(href)) return document.createTextNode(`[${text}](${href})`);
  return inline(el('a', { href, rel: 'noopener noreferrer nofollow', target: '_blank' }), text);
}

/** Appends `text` with its inline spans to `node`; returns `node`. */
function inline(node, text) {
  let rest = String(text);
  while (rest) {
    let best = null;
    for (const s of SPANS) {
      const m = rest.match(s.re);
      if (m && (best === null || m.index < best.m.index)) best = { m, s };
    }
    if (!best) { lineBreaks(node, rest); break; }
    if (best.m.index > 0) lineBreaks(node, rest.slice(0, best.m.index));
    node.append(best.s.make(best.m));
    rest = rest.slice(best.m.index + best.m[0].length);
  }
  return node;
}

function lineBreaks(node, text) {
  node.append(document.createTextNode(text));
}
