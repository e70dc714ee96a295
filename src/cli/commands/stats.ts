import type { LedgerStatus } from '../../ledger/types.js';
import type { CliContext } from '../context.js';
import { formatDuration, toJson } from '../format.js';

const STATUSES: LedgerStatus[] = ['locked', 'completed', 'failed', 'unknown', 'released', 'invalidated'];

export type Stats = {
  schema: string;
  at: Date;
  ledger: {
    total: number;
    byStatus: Record<LedgerStatus, number>;
    /** The locked row claimed longest ago. */
    oldestLease: { key: string; owner: string | null; claimedAt: Date; leaseExpiresAt: Date | null } | null;
    /** Locked rows whose lease has run out (the next claim takes over, or moves them to unknown). */
    expiredLeases: number;
    /** Rows waiting for an operator (`resolve`). */
    unknown: number;
    oldestUnknownAt: Date | null;
  };
  audit: {
    newestEventAt: Date | null;
    /** now − created_at of the newest audit event; null when there is none. */
    lagMs: number | null;
    outbox: { batches: number; events: number; oldestAt: Date | null };
    deadLetters: { count: number; newestAt: Date | null };
  };
};

/** Reads the figures an operator watches; every figure comes from Postgres (no Redis needed). */
export async function collectStats(ctx: CliContext): Promise<Stats> {
  const pool = await ctx.pool();
  const s = ctx.schema;
  const [byStatus, lease, unknown, audit, outbox, dead] = await Promise.all([
    pool.query(`select status, count(*)::int8 as n from ${s}.idempotency_ledger group by status`),
    pool.query(
      `select key, lease_owner, claimed_at, lease_expires_at, now() as now,
         (select count(*)::int8 from ${s}.idempotency_ledger where status = 'locked' and lease_expires_at <= now()) as expired
       from ${s}.idempotency_ledger where status = 'locked' order by claimed_at limit 1`,
    ),
    pool.query(`select min(updated_at) as oldest from ${s}.idempotency_ledger where status = 'unknown'`),
    pool.query(`select max(created_at) as newest, now() as now from ${s}.audit_events`),
    pool.query(
      `select count(*)::int8 as batches, coalesce(sum(jsonb_array_length(events)), 0)::int8 as events,
         min(created_at) as oldest from ${s}.audit_outbox`,
    ),
    pool.query(`select count(*)::int8 as n, max(created_at) as newest from ${s}.audit_dead_letter`),
  ]);
  const counts = Object.fromEntries(STATUSES.map((st) => [st, 0])) as Record<LedgerStatus, number>;
  for (const r of byStatus.rows) counts[r.status as LedgerStatus] = Number(r.n);
  const l = lease.rows[0];
  const a = audit.rows[0];
  const newest = (a?.newest as Date | null) ?? null;
  const now = (a?.now as Date | undefined) ?? new Date();
  return {
    schema: s,
    at: now,
    ledger: {
      total: Object.values(counts).reduce((x, y) => x + y, 0),
      byStatus: counts,
      oldestLease: l
        ? {
            key: l.key,
            owner: l.lease_owner ?? null,
            claimedAt: l.claimed_at,
            leaseExpiresAt: l.lease_expires_at ?? null,
          }
        : null,
      expiredLeases: Number(l?.expired ?? 0),
      unknown: counts.unknown,
      oldestUnknownAt: (unknown.rows[0]?.oldest as Date | null) ?? null,
    },
    audit: {
      newestEventAt: newest,
      lagMs: newest ? Math.max(0, now.getTime() - newest.getTime()) : null,
      outbox: {
        batches: Number(outbox.rows[0]?.batches ?? 0),
        events: Number(outbox.rows[0]?.events ?? 0),
        oldestAt: (outbox.rows[0]?.oldest as Date | null) ?? null,
      },
      deadLetters: { count: Number(dead.rows[0]?.n ?? 0), newestAt: (dead.rows[0]?.newest as Date | null) ?? null },
    },
  };
}

const ago = (d: Date | null, now: Date) => (d ? `${formatDuration(now.getTime() - d.getTime())} ago` : '-');

export function renderStats(st: Stats): string {
  const now = st.at;
  const L = st.ledger;
  const lines = [`ledger (schema ${st.schema})`];
  for (const status of STATUSES) {
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
