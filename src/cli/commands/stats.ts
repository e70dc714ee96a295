import { type OutboxStats, outboxStats } from '../../audit/outbox.js';
import { ConfirmationStore } from '../../confirm/confirmation-store.js';
import { LEDGER_STATUSES, type LedgerStats, ledgerStats } from '../../ledger/scans.js';
import type { CliContext } from '../context.js';
import { formatDuration, toJson } from '../format.js';

export type Stats = {
  schema: string;
  at: Date;
  ledger: LedgerStats;
  /** Confirmation requests waiting for an answer (`confirmations list --pending`). */
  confirmations: { pending: number; oldestPendingAt: Date | null };
  audit: {
    newestEventAt: Date | null;
    /** now − created_at of the newest audit event; null when there is none. */
    lagMs: number | null;
    outbox: OutboxStats;
    deadLetters: { count: number; newestAt: Date | null };
  };
};

/** Reads the figures an operator watches; every figure comes from Postgres (no Redis needed). */
export async function collectStats(ctx: CliContext): Promise<Stats> {
  const pool = await ctx.pool();
  const s = ctx.schema;
  const [ledger, confirmations, audit, outbox, dead] = await Promise.all([
    ledgerStats(pool, s),
    new ConfirmationStore(pool, s).pending(),
    pool.query(`select max(created_at) as newest, now() as now from ${s}.audit_events`),
    outboxStats(pool, s),
    pool.query(`select count(*)::int8 as n, max(created_at) as newest from ${s}.audit_dead_letter`),
  ]);
  const a = audit.rows[0];
  const newest = (a?.newest as Date | null) ?? null;
  const now = (a?.now as Date | undefined) ?? new Date();
  return {
    schema: s,
    at: now,
    ledger,
    confirmations: { pending: confirmations.count, oldestPendingAt: confirmations.oldestAt },
    audit: {
      newestEventAt: newest,
      lagMs: newest ? Math.max(0, now.getTime() - newest.getTime()) : null,
      outbox,
      deadLetters: { count: Number(dead.rows[0]?.n ?? 0), newestAt: (dead.rows[0]?.newest as Date | null) ?? null },
    },
  };
}

const ago = (d: Date | null, now: Date) => (d ? `${formatDuration(now.getTime() - d.getTime())} ago` : '-');

export function renderStats(st: Stats): string {
  const now = st.at;
  const L = st.ledger;
  const lines = [`ledger (schema ${st.schema})`];
  for (const status of LEDGER_STATUSES) {
    let note = '';
    if (status === 'locked' && L.oldestLease) {
      const exp = L.oldestLease.leaseExpiresAt;
      note = `  oldest lease: ${L.oldestLease.key}, claimed ${ago(L.oldestLease.claimedAt, now)} by ${L.oldestLease.owner ?? '?'}, ${
        exp && exp.getTime() <= now.getTime()
          ? `expired ${ago(exp, now)}`
          : `expires in ${formatDuration((exp?.getTime() ?? 0) - now.getTime())}`
      }; ${L.expiredLeases} expired lease${L.expiredLeases === 1 ? '' : 's'}`;
    }
    if (status === 'unknown' && L.unknown > 0) {
      note = `  oldest ${ago(L.oldestUnknownAt, now)}; needs an operator: \`list --status unknown\` names them, then inspect and resolve`;
    }
    lines.push(`  ${status.padEnd(12)} ${String(L.byStatus[status]).padStart(10)}${note}`);
  }
  lines.push(`  ${'total'.padEnd(12)} ${String(L.total).padStart(10)}`);
  const C = st.confirmations;
  lines.push(
    `confirmations pending ${C.pending}${C.oldestPendingAt ? `, oldest asked ${ago(C.oldestPendingAt, now)}: \`confirmations list --pending\`` : ''}`,
  );
  const A = st.audit;
  lines.push(
    'audit',
    `  newest event  ${A.newestEventAt ? `${A.newestEventAt.toISOString()} (lag ${formatDuration(A.lagMs ?? 0)})` : '- (no events)'}`,
    `  outbox        ${A.outbox.batches} batch${A.outbox.batches === 1 ? '' : 'es'} (${A.outbox.events} events)${
      A.outbox.oldestAt ? `, oldest ${ago(A.outbox.oldestAt, now)}; drained by backfill` : ''
    }`,
    `  dead letters  ${A.deadLetters.count}${A.deadLetters.newestAt ? ` (newest ${ago(A.deadLetters.newestAt, now)})` : ''}`,
  );
  return lines.join('\n');
}

export async function statsCommand(ctx: CliContext, opts: { json?: boolean }): Promise<void> {
  ctx.require('DATABASE_URL');
  const st = await collectStats(ctx);
  ctx.io.out(opts.json ? toJson(st) : renderStats(st));
}
