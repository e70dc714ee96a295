import { inspect } from 'node:util';
import type { LedgerRecord } from '../ledger/types.js';
import type { OpenedValues } from '../sealing/open-record.js';
import { formatDuration, formatTime, table } from './format.js';
import { errorLine, resultLine } from './sealed-view.js';

export type { OpenedValues } from '../sealing/open-record.js';

/** True for data JSON gives back unchanged: plain objects, arrays, strings, finite numbers, booleans, null. */
function isPlainJson(value: unknown): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (Array.isArray(value)) return value.every(isPlainJson);
  if (typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return false;
  return Object.values(value).every(isPlainJson);
}

/** An opened value: JSON when JSON holds it exactly (to paste into `resolve --result`), else as Node shows it. */
export function openedText(value: unknown): string {
  return isPlainJson(value) ? JSON.stringify(value) : inspect(value, { depth: 8, breakLength: Infinity });
}

/**
 * The worker that claimed the current epoch: the owner its claim recorded in the row's
 * transitions (the lease owner is cleared when the lease ends), else the live lease's owner.
 */
function claimOwner(r: LedgerRecord): string | null {
  const claim = r.transitions?.findLast((t) => t.epoch === r.epoch && t.transition === r.claimTransition);
  return claim?.owner ?? r.leaseOwner;
}

/** The human form of `inspect`; sealed values are shown as sealed unless `opened` holds them. */
export function renderRecord(r: LedgerRecord, opened: OpenedValues = {}, now = Date.now()): string {
  const rows: [string, string][] = [
    ['key', r.key],
    ['status', `${r.status} (epoch ${r.epoch}, last transition ${r.lastTransition})`],
    ['operation', r.operation],
    ['namespace', r.namespace],
    ['resource key', r.resourceKey],
    ['version', r.version],
    ['downstream', r.downstream],
    ['fingerprint', r.fingerprint],
  ];
  if (r.status === 'locked') {
    rows.push(['lease', `${r.leaseOwner ?? '(no owner)'}, expires ${formatTime(r.leaseExpiresAt, now)}`]);
  }
  if (r.result !== null) rows.push(['result', resultLine(r.result)]);
  if (opened.result) rows.push(['opened result', openedText(opened.result.value)]);
  if (r.error) rows.push(['error', errorLine(r.error)]);
  if (opened.error) {
    const e = opened.error;
    rows.push(['opened error', `${e.name}${e.code ? ` ${e.code}` : ''}: ${e.message}`]);
  }
  if (r.retryable !== null) rows.push(['retryable', String(r.retryable)]);
  if (r.queue || r.jobId) rows.push(['job', `${r.queue ?? '?'} / ${r.jobId ?? '?'}`]);
  if (r.taskId) rows.push(['task', r.taskId]);
  if (r.stepId) rows.push(['step', r.stepId]);
  rows.push(
    ['created', formatTime(r.createdAt, now)],
    ['claimed', `${formatTime(r.claimedAt, now)} by ${claimOwner(r) ?? '(owner not recorded)'} (${r.claimTransition})`],
    ['updated', formatTime(r.updatedAt, now)],
  );
  if (r.completedAt) rows.push(['completed', formatTime(r.completedAt, now)]);
  rows.push(['expires', r.expiresAt ? formatTime(r.expiresAt, now) : '- (kept while not terminal)']);
  rows.push(['retention', formatDuration(r.retentionMs)]);
  let text = table(rows);
  if (opened.error) {
    text += `\n\nopened error text:\n${opened.error.text.replace(/^/gm, '  ')}`;
  }
  if (r.status === 'unknown') {
    text +=
      '\n\nThe outcome of the last attempt is unknown: no attempt runs until an operator settles it.\n' +
      `  bullmq-idempotency resolve '${r.key}' --committed --result '<json>' --reason '<why>'   (needs BQI_KEYRING)\n` +
      `  bullmq-idempotency resolve '${r.key}' --not-committed --reason '<why>'`;
  }
  return text;
}
