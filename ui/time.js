// Times on the console: durations in words a person reads at a glance, clock times, and
// A2A timestamps as milliseconds.

/** `0.4 s`, `12.3 s`, `4 min 05 s`, `2 h 03 min`. */
export function secs(ms) {
  const s = Math.max(0, ms) / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${String(Math.floor(s % 60)).padStart(2, '0')} s`;
  return `${Math.floor(m / 60)} h ${String(m % 60).padStart(2, '0')} min`;
}

/** The local time of day (`14:03:27`), with the date when it is not today. */
export function clock(ms) {
  const d = new Date(ms);
  const t = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' });
  return d.toDateString() === new Date().toDateString() ? t : `${d.toLocaleDateString()} ${t}`;
}

/** An A2A timestamp as milliseconds, or null. */
export function tsOf(ts) {
  if (!ts) return null;
  const n = Date.parse(ts);
  return Number.isNaN(n) ? null : n;
}
