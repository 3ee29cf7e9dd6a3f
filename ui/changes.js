// The change a task made (its `changes` artifact): the changed files with their added and
// removed line counts, the diff with added and removed lines marked, and the patch to
// download. Every piece of the patch is shown as text (textContent), never parsed as HTML.
import { el } from './dom.js';

/** Most diff lines drawn at once; the rest behind a button. */
const MAX_LINES = 4000;

const STATUS = { added: 'A', modified: 'M', deleted: 'D', renamed: 'R' };

/** The view of a `changes` artifact: `{ nodes, summary }`. */
export function changesView(artifact) {
  const parts = artifact.parts || [];
  const data = parts.find((p) => p.data && typeof p.data === 'object')?.data || {};
  const files = Array.isArray(data.files) ? data.files : [];
  const patchPart = parts.find((p) => typeof p.raw === 'string' || typeof p.text === 'string' && p.mediaType === 'text/x-diff');
  const patch = patchPart ? decode(patchPart) : '';
  const adds = files.reduce((n, f) => n + (f.additions || 0), 0);
  const dels = files.reduce((n, f) => n + (f.deletions || 0), 0);
  const summary = files.length
    ? `Changes: ${files.length} file${files.length === 1 ? '' : 's'} (+${adds} −${dels})`
    : 'Changes: none';
  const head = el('div', { class: 'changes-head' },
    el('h2', {}, 'Changes'),
    el('span', { class: 'meta', id: 'changes-summary' }, files.length
      ? `${files.length} file${files.length === 1 ? '' : 's'} changed, ${adds} insertion${adds === 1 ? '' : 's'}(+), ${dels} deletion${dels === 1 ? '' : 's'}(−)`
      : 'This turn changed no file.'),
    data.branch ? el('span', { class: 'meta' }, ` · branch ${data.branch}${data.committed ? ' @ ' + String(data.committed).slice(0, 10) : ''}`) : null,
    patch ? download(patch, patchPart.filename || 'changes.patch') : null);
  const nodes = [head];
  if (data.truncated) nodes.push(el('p', { class: 'error' }, 'The patch was cut at the host\'s size limit: it is not the whole change.'));
  if (files.length) {
    nodes.push(el('ul', { id: 'changes-files', class: 'files' }, ...files.map((f) => el('li', { 'data-status': f.status || '' },
      el('span', { class: `fstatus fstatus-${f.status || 'modified'}`, title: f.status || '' }, STATUS[f.status] || '?'),
      el('code', { class: 'path' }, f.oldPath ? `${f.oldPath} → ${f.path}` : f.path),
      f.binary ? el('span', { class: 'meta' }, 'binary')
        : el('span', { class: 'counts' }, el('span', { class: 'adds' }, `+${f.additions || 0}`), ' ', el('span', { class: 'dels' }, `−${f.deletions || 0}`))))));
  }
  if (patch) nodes.push(diff(patch));
  return { nodes, summary };
}

function decode(part) {
  if (typeof part.text === 'string') return part.text;
  try {
    const bin = atob(part.raw);
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    return new TextDecoder('utf-8').decode(bytes);
  } catch {
    return '';
  }
}

function download(patch, name) {
  const url = URL.createObjectURL(new Blob([patch], { type: 'text/x-diff' }));
  return el('a', { href: url, download: name, id: 'patch-download', class: 'button' }, `Download ${name}`);
}

/** The diff, one row per line, classed by what the line is. */
function diff(patch) {
  const lines = patch.split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  const box = el('div', { id: 'diff', class: 'diff', role: 'region', 'aria-label': 'diff' });
  const draw = (from, to) => {
    for (let i = from; i < to; i += 1) box.append(row(lines[i]));
  };
  draw(0, Math.min(lines.length, MAX_LINES));
  if (lines.length > MAX_LINES) {
    const more = el('button', { type: 'button', class: 'show-all' }, `show the other ${lines.length - MAX_LINES} lines`);
    more.addEventListener('click', () => { more.remove(); draw(MAX_LINES, lines.length); });
    return el('div', {}, box, more);
  }
  return box;
}

function row(line) {
  let kind = 'ctx';
  if (line.startsWith('diff --git')) kind = 'file';
  else if (/^(index |--- |\+\+\+ |new file|deleted file|similarity|rename |old mode|new mode|GIT binary patch|Binary files)/.test(line)) kind = 'head';
  else if (line.startsWith('@@')) kind = 'hunk';
  else if (line.startsWith('+')) kind = 'add';
  else if (line.startsWith('-')) kind = 'del';
  return el('div', { class: `dl dl-${kind}` }, line || ' ');
}
