/** `1.2s`, `3m 4s`, `2h 5m`, `3d 4h`. */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  if (abs < 1000) return `${Math.round(abs)}ms`;
  const s = Math.floor(abs / 1000);
  if (s < 60) return `${(abs / 1000).toFixed(abs < 10_000 ? 1 : 0)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h ${m % 60}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** `2025-01-01T00:00:00.000Z (3m 4s ago)` or `(in 5s)`. */
export function formatTime(d: Date | null, now = Date.now()): string {
  if (!d) return '-';
  const diff = d.getTime() - now;
  return `${d.toISOString()} (${diff >= 0 ? `in ${formatDuration(diff)}` : `${formatDuration(diff)} ago`})`;
}

/** JSON on one line, cut to `max` characters. */
export function preview(value: unknown, max = 2000): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}

/** `label:   value` lines, aligned. */
export function table(rows: [string, string][]): string {
  const width = Math.max(...rows.map(([l]) => l.length)) + 2;
  return rows.map(([l, v]) => `${`${l}:`.padEnd(width)}${v}`).join('\n');
}

/** Pretty JSON for `--json` (dates become ISO strings). */
export function toJson(value: unknown): string {
  return JSON.stringify(value, null, 2);
}
