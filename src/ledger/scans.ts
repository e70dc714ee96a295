import type pg from 'pg';
import { checkSchema } from '../db/connection.js';
import { toRecord } from './ledger-record.js';
import { leaseHolder } from './recorded-transition.js';
import type { LedgerRecord, LedgerStatus } from './types.js';

/**
 * A keyset position in the ledger's (updated_at, key) order. `at` travels as Postgres text: a JS
 * Date would cut Postgres' microseconds and repeat rows.
 */
export type LedgerCursor = { at: string; key: string };

/** Before the first row: a scan from here reads the whole ledger. */
export const LEDGER_START: LedgerCursor = { at: '-infinity', key: '' };

export type LedgerScanPage = {
  records: LedgerRecord[];
  /** Where the next page starts; the given cursor when the page is empty. */
  next: LedgerCursor;
};

const ledgerTable = (schema: string) => `${checkSchema(schema)}.idempotency_ledger`;

/**
 * One page of the ledger after `after`, in (updated_at, key) order: a bounded read that takes
 * no row locks, resumable from `next` however many rows change meanwhile.
 *
 * @example
 * let cursor = LEDGER_START;
 * for (let p = await scanLedger(pool, 'public', cursor, 1000); p.records.length > 0; p = await scanLedger(pool, 'public', p.next, 1000)) {}
 */
export async function scanLedger(
  pool: pg.Pool,
  schema: string,
  after: LedgerCursor,
  limit: number,
): Promise<LedgerScanPage> {
  const res = await pool.query(
    `select *, updated_at::text as cursor_at from ${ledgerTable(schema)} where (updated_at, key) > ($1::timestamptz, $2)
     order by updated_at, key limit $3`,
    [after.at, after.key, limit],
  );
  const last = res.rows[res.rows.length - 1];
  return {
    records: res.rows.map(toRecord),
    next: last ? { at: last.cursor_at as string, key: last.key as string } : after,
  };
}

/** How many ledger rows a scan from `after` has ahead of it. */
export async function countLedgerAfter(pool: pg.Pool, schema: string, after: LedgerCursor): Promise<number> {
  const res = await pool.query<{ n: string }>(
    `select count(*)::int8 as n from ${ledgerTable(schema)} where (updated_at, key) > ($1::timestamptz, $2)`,
    [after.at, after.key],
  );
  return Number(res.rows[0]?.n ?? 0);
}

export const LEDGER_STATUSES: readonly LedgerStatus[] = [
  'locked',
  'completed',
  'failed',
  'unknown',
  'released',
  'invalidated',
];

/** The figures an operator watches in the ledger, all read from Postgres on its clock. */
export type LedgerStats = {
  /** The database's clock when the figures were read: ages are measured from it. */
  at: Date;
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

/**
 * Counts by status, the oldest lease, expired leases and the oldest unknown row: one scan of the
 * ledger for the counts (no index covers status, on purpose: see migration 0001) and one for the
 * oldest locked row. `stats` and the operations process's `/metrics` both read these.
 */
export async function ledgerStats(pool: pg.Pool, schema: string): Promise<LedgerStats> {
  const t = ledgerTable(schema);
  const [groups, lease] = await Promise.all([
    pool.query(
      `select status, count(*)::int8 as n, count(*) filter (where lease_expires_at <= now())::int8 as expired,
         min(updated_at) as oldest_update
       from ${t} group by status`,
    ),
    pool.query(
      // A locked row's last write is its claim (a heartbeat moves only the lease): updated_at.
      `select now() as now, o.* from (select 1) one left join lateral (
         select key, status, lease_owner, updated_at as claimed_at, lease_expires_at, transitions from ${t}
         where status = 'locked' order by updated_at limit 1) o on true`,
    ),
  ]);
  const counts = Object.fromEntries(LEDGER_STATUSES.map((st) => [st, 0])) as Record<LedgerStatus, number>;
  let expiredLeases = 0;
  let oldestUnknownAt: Date | null = null;
  for (const r of groups.rows) {
    counts[r.status as LedgerStatus] = Number(r.n);
    if (r.status === 'locked') expiredLeases = Number(r.expired);
    if (r.status === 'unknown') oldestUnknownAt = (r.oldest_update as Date | null) ?? null;
  }
  const l = lease.rows[0];
  return {
    at: (l?.now as Date | undefined) ?? new Date(),
    total: Object.values(counts).reduce((x, y) => x + y, 0),
    byStatus: counts,
    oldestLease: l?.key
      ? {
          key: l.key,
          owner: leaseHolder(l as Parameters<typeof leaseHolder>[0]),
          claimedAt: l.claimed_at,
          leaseExpiresAt: l.lease_expires_at ?? null,
        }
      : null,
    expiredLeases,
    unknown: counts.unknown,
    oldestUnknownAt,
  };
}
