import { listConfirmations } from '../confirm/answer.js';
import { ConfirmationStore } from '../confirm/confirmation-store.js';
import type { Confirmation } from '../confirm/types.js';
import { checkSchema } from '../db/connection.js';
import { type ListedRecord, listRecords } from '../ledger/list-records.js';
import { ledgerStats } from '../ledger/scans.js';
import { findStaleLocks, type StaleLock } from '../ledger/stale-locks.js';
import { mayAnswer, namespaceOfKey, type Operator } from '../shared/operators.js';
import type { ConsoleDeps } from './deps.js';
import { html, type Markup, operationLink, span, time } from './html.js';

/** Rows read per section of the inbox. */
export const INBOX_LIMIT = 200;
/** How far back the inbox looks for conflicts. */
const CONFLICT_WINDOW_HOURS = 24;

type Conflict = { key: string; operation: string | null; jobId: string | null; at: Date };

/** What needs a person: the counts of `stats` (all namespaces) and the rows of the operator's namespaces. */
export type Inbox = {
  readAt: Date;
  counts: { pendingConfirmations: number; unknown: number; expiredLeases: number; failed: number; locked: number };
  confirmations: Confirmation[];
  unknown: ListedRecord[];
  stale: StaleLock[];
  failed: ListedRecord[];
  conflicts: Conflict[];
  /** Rows read but outside the operator's namespaces (not shown). */
  hidden: number;
};

/** Recent conflicts (a changed input refused for a key), newest first, from the audit trail. */
async function recentConflicts(deps: ConsoleDeps): Promise<Conflict[]> {
  const res = await deps.pool.query<{ key: string; operation: string | null; job_id: string | null; at: Date }>(
    `select resource_id as key, operation, job_id, created_at as at from ${checkSchema(deps.schema)}.audit_events
where reason_code = 'IDEMPOTENCY_CONFLICT' and created_at > now() - make_interval(hours => $1)
order by created_at desc limit $2`,
    [CONFLICT_WINDOW_HOURS, INBOX_LIMIT],
  );
  return res.rows.map((r) => ({ key: r.key, operation: r.operation, jobId: r.job_id, at: r.at }));
}

/** Reads the inbox: the counts as `stats` and `/metrics` read them, the rows through the library's scans. */
export async function readInbox(deps: ConsoleDeps, operator: Operator): Promise<Inbox> {
  const { pool, schema } = deps;
  const [stats, pending, confirmations, unknown, stale, failed, conflicts] = await Promise.all([
    ledgerStats(pool, schema),
    new ConfirmationStore(pool, schema).pending(),
    listConfirmations({ pool, schema, pending: true, limit: INBOX_LIMIT }),
    listRecords(pool, schema, { status: 'unknown', limit: INBOX_LIMIT }),
    findStaleLocks(pool, schema, { batchSize: INBOX_LIMIT }),
    listRecords(pool, schema, { status: 'failed', limit: INBOX_LIMIT }),
    recentConflicts(deps),
  ]);
  let hidden = 0;
  const mine = <T>(rows: T[], key: (r: T) => string): T[] =>
    rows.filter((r) => {
      const ok = mayAnswer(operator, key(r));
      if (!ok) hidden++;
      return ok;
    });
  return {
    readAt: stats.at,
    counts: {
      pendingConfirmations: pending.count,
      unknown: stats.unknown,
      expiredLeases: stats.expiredLeases,
      failed: stats.byStatus.failed,
      locked: stats.byStatus.locked,
    },
    confirmations: mine(confirmations, (c) => c.operationKey),
    unknown: mine(unknown, (r) => r.key),
    stale: mine(stale, (r) => r.key),
    failed: mine(failed, (r) => r.key),
    conflicts: mine(conflicts, (r) => r.key),
    hidden,
  };
}

export type InboxOrder = 'oldest' | 'newest';

/** Rows by namespace (in name order), each group ordered by `at`. */
function byNamespace<T>(rows: T[], key: (r: T) => string, at: (r: T) => Date, order: InboxOrder): [string, T[]][] {
  const groups = new Map<string, T[]>();
  for (const r of rows) {
    const ns = namespaceOfKey(key(r)) ?? '(namespace not shown)';
    groups.set(ns, [...(groups.get(ns) ?? []), r]);
  }
  const sign = order === 'oldest' ? 1 : -1;
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([ns, list]) => [ns, list.sort((a, b) => sign * (at(a).getTime() - at(b).getTime()))]);
}

function section<T>(
  id: string,
  title: string,
  rows: T[],
  order: InboxOrder,
  o: { key: (r: T) => string; at: (r: T) => Date; head: string[]; row: (r: T) => Markup },
): Markup {
  if (rows.length === 0)
    return html`<section aria-labelledby="${id}"><h2 id="${id}">${title} (0)</h2><p class="muted">None.</p></section>`;
  const groups = byNamespace(rows, o.key, o.at, order);
  return html`<section aria-labelledby="${id}"><h2 id="${id}">${title} (${rows.length})</h2>${groups.map(
    ([ns, list]) =>
      html`<h3>Namespace <code>${ns}</code></h3><table><thead><tr>${o.head.map(
        (h) => html`<th scope="col">${h}</th>`,
      )}</tr></thead><tbody>${list.map(o.row)}</tbody></table>`,
  )}</section>`;
}

const cell = (label: string, content: Markup | string | number | null) =>
  html`<td data-label="${label}">${content}</td>`;

/** The inbox page's body. */
export function renderInbox(base: string, inbox: Inbox, order: InboxOrder): Markup {
  const now = inbox.readAt.getTime();
  const c = inbox.counts;
  const other: InboxOrder = order === 'oldest' ? 'newest' : 'oldest';
  return html`<section aria-labelledby="counts"><h2 id="counts">Counts (all namespaces, as <code>stats</code> shows them)</h2>
<ul class="counts">
<li><strong data-count="pending-confirmations">${c.pendingConfirmations}</strong>pending confirmations</li>
<li><strong data-count="unknown">${c.unknown}</strong>unknown operations</li>
<li><strong data-count="expired-leases">${c.expiredLeases}</strong>expired leases</li>
<li><strong data-count="failed">${c.failed}</strong>failed</li>
<li><strong data-count="locked">${c.locked}</strong>locked</li></ul>
<p class="muted">Read at ${time(inbox.readAt)}. ${inbox.hidden > 0 ? `${inbox.hidden} rows outside your namespaces are not shown. ` : ''}Sorted ${order} first: <a href="${base}?order=${other}">show ${other} first</a>.</p></section>
${section('confirmations', 'Pending confirmations', inbox.confirmations, order, {
  key: (r) => r.operationKey,
  at: (r) => r.requestedAt,
  head: ['Request', 'Operation', 'Reason', 'Asked', 'Times out', 'Actions'],
  row: (r) =>
    html`<tr>${cell('Request', html`<code>${r.id}</code> ${r.name}`)}${cell('Operation', operationLink(base, r.operationKey, r.operation))}${cell('Reason', r.reason)}${cell('Asked', time(r.requestedAt))}${cell(
      'Times out',
      html`${time(r.expiresAt)} <span class="muted">(${r.overdue ? 'overdue' : `in ${span(r.expiresAt.getTime() - now)}`}, then ${r.onTimeout})</span>`,
    )}${cell('Actions', operationLink(base, r.operationKey, 'Review and answer'))}</tr>`,
})}
${section('unknown', 'Unknown outcomes', inbox.unknown, order, {
  key: (r) => r.key,
  at: (r) => r.updatedAt,
  head: ['Operation key', 'Operation', 'Epoch', 'Since', 'Error'],
  row: (r) =>
    html`<tr>${cell('Operation key', operationLink(base, r.key))}${cell('Operation', r.operation)}${cell('Epoch', r.epoch)}${cell('Since', time(r.updatedAt))}${cell('Error', r.errorCode)}</tr>`,
})}
${section('stale', 'Stale or abandoned locks', inbox.stale, order, {
  key: (r) => r.key,
  at: (r) => r.leaseExpiresAt,
  head: ['Operation key', 'Epoch', 'Lease expired', 'Job'],
  row: (r) =>
    html`<tr>${cell('Operation key', operationLink(base, r.key))}${cell('Epoch', r.epoch)}${cell('Lease expired', time(r.leaseExpiresAt))}${cell('Job', r.jobId ? `${r.queue ?? '?'} / ${r.jobId}` : '—')}</tr>`,
})}
${section('failed', 'Recorded failures', inbox.failed, order, {
  key: (r) => r.key,
  at: (r) => r.updatedAt,
  head: ['Operation key', 'Operation', 'Error', 'At'],
  row: (r) =>
    html`<tr>${cell('Operation key', operationLink(base, r.key))}${cell('Operation', r.operation)}${cell('Error', r.errorCode)}${cell('At', time(r.updatedAt))}</tr>`,
})}
${section('conflicts', `Conflicts (last ${CONFLICT_WINDOW_HOURS}h)`, inbox.conflicts, order, {
  key: (r) => r.key,
  at: (r) => r.at,
  head: ['Operation key', 'Operation', 'Job', 'At'],
  row: (r) =>
    html`<tr>${cell('Operation key', operationLink(base, r.key))}${cell('Operation', r.operation)}${cell('Job', r.jobId)}${cell('At', time(r.at))}</tr>`,
})}`;
}
