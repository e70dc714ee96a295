import { formatDuration } from '../operation/duration.js';

/** The library's one duration formatter, for the commands. */
export { formatDuration };

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
