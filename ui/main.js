// The console's entry: asks for a token when the host needs one, then shows the page the
// location hash names (#/ tasks, #/task/ID, #/new).
import { AuthError, setToken, setApiKeyHeader } from './a2a.js';
import { loadHeader, tasksPage, newTaskPage, refreshList, busy } from './views.js';
import { taskPage } from './task.js';
import { clear } from './dom.js';

let generation = 0;
let controller = null;

function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

async function route() {
  const gen = ++generation;
  controller?.abort();
  controller = new AbortController();
  const isCurrent = () => gen === generation;
  const view = document.getElementById('view');
  document.getElementById('status-line').textContent = '';
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, q] = hash.split('?');
  const query = new URLSearchParams(q || '');
  try {
    await loadHeader();
    if (!isCurrent()) return;
    document.getElementById('login').hidden = true;
    if (path.startsWith('/task/')) {
      await taskPage(view, decodeURIComponent(path.slice(6)), query, isCurrent, navigate, controller.signal);
    } else if (path === '/new') {
      newTaskPage(view, query, navigate);
    } else {
      await tasksPage(view, query, isCurrent);
    }
  } catch (e) {
    if (!isCurrent()) return;
    if (e instanceof AuthError) {
      clear(view);
      document.getElementById('login-error').textContent = sessionStorage.getItem('agent-host-token')
        ? 'The host refused this token; enter it again.' : '';
      document.getElementById('login').hidden = false;
      document.getElementById('login-token').focus();
    } else {
      document.getElementById('status-line').textContent = e.message || String(e);
    }
  }
}

document.getElementById('login-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setToken(document.getElementById('login-token').value, document.getElementById('login-apikey').checked);
  document.getElementById('login-token').value = '';
  route();
});

// The live state: the header's counts every few seconds on every page (a task page reloads
// them when its task ends, but the host may count it as running a moment longer), and on
// the Tasks page the list too when tasks run or wait, or just stopped doing so.
let wasBusy = 0;
setInterval(async () => {
  if (!document.getElementById('login').hidden) return;
  const hash = location.hash.replace(/^#/, '') || '/';
  const onList = hash === '/' || hash.startsWith('/?');
  try {
    await loadHeader();
    if (!onList) return;
    const now = busy();
    const waiting = document.querySelectorAll('#waiting tr.task-row').length;
    if (now > 0 || wasBusy > 0 || waiting > 0) await refreshList();
    wasBusy = now;
  } catch { /* the next tick tries again */ }
}, 3000);

// The public card names the API-key header, if the host takes API keys.
fetch('/.well-known/agent-card.json').then((r) => r.json()).then((card) => {
  const schemes = Object.values(card.securitySchemes || {});
  setApiKeyHeader(schemes.map((s) => s.apiKeySecurityScheme?.name).find(Boolean));
}).catch(() => {});
window.addEventListener('hashchange', route);
route();
