import type pg from 'pg';
import { checkSchema } from '../db/connection.js';
import { claimingJob } from './recorded-transition.js';

/** A `locked` row whose lease ran out long ago: its attempt died and nothing has taken it over. */
export type StaleLock = {
  key: string;
  epoch: number;
  /** The BullMQ queue and job id of the attempt that claimed it (null when claimed outside BullMQ). */
  queue: string | null;
  jobId: string | null;
  stepId: string | null;
  leaseExpiresAt: Date;
};

export type StaleLocksOptions = {
  /** Rows per page. */
  batchSize: number;
  /** Keyset cursor: only keys after this one (the last key of the previous page). */
  after?: string;
  /**
   * How long ago the lease must have expired, at least; it must also be more than twice the
   * lease's length as the row knows it (expiry minus the row's last write: the lease plus any
   * renewals, so a long-running attempt is given longer), so a slow takeover is left alone.
   * @defaultValue 60 000
   */
  minAgeMs?: number;
};

export const DEFAULT_STALE_LOCK_AGE_MS = 60_000;

/**
 * One page of stale locks, in key order. Keyset-paged on the primary key (the table has no index
 * on status or lease, by design: see migrations/0001-ledger.ts), each page a short read that
 * takes no row locks: what is done with a row is fenced by its epoch.
 *
 * @example
 * let after: string | undefined;
 * for (;;) {
 *   const page = await findStaleLocks(pool, 'bullmq_idempotency', { batchSize: 500, ...(after ? { after } : {}) });
 *   // look up each row's BullMQ job …
 *   if (page.length < 500) break;
 *   after = page.at(-1)?.key;
 * }
 */
export async function findStaleLocks(pool: pg.Pool, schema: string, options: StaleLocksOptions): Promise<StaleLock[]> {
  const table = `${checkSchema(schema)}.idempotency_ledger`;
  const res = await pool.query<{
    key: string;
    epoch: number;
    queue: string | null;
    job_id: string | null;
    step_id: string | null;
    lease_expires_at: Date;
    transitions: string | null;
  }>(
    `select key, epoch, queue, job_id, step_id, lease_expires_at, transitions from ${table}
where key > $1 and status = 'locked'
  and lease_expires_at < now() - greatest($3::int8 * interval '1 millisecond', 2 * (lease_expires_at - updated_at))
order by key limit $2`,
    [options.after ?? '', options.batchSize, options.minAgeMs ?? DEFAULT_STALE_LOCK_AGE_MS],
  );
  return res.rows.map((r) => ({
    key: r.key,
    epoch: r.epoch,
    ...claimingJob(r),
    stepId: r.step_id,
    leaseExpiresAt: r.lease_expires_at,
  }));
}
