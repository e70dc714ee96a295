import type pg from 'pg';
import { checkSchema } from '../db/connection.js';
import { claimingJob } from './recorded-transition.js';
import type { LedgerStatus } from './types.js';

/** The statuses an operator lists: the rows that wait for someone (or for a lease to run out). */
export type ListableStatus = Extract<LedgerStatus, 'unknown' | 'locked' | 'failed'>;

/** One row of a listing: where the record stands, never its result or error text. */
export type ListedRecord = {
  key: string;
  status: LedgerStatus;
  epoch: number;
  operation: string;
  queue: string | null;
  jobId: string | null;
  updatedAt: Date;
  /** The recorded error's code (`TIMEOUT`, `CARD_DECLINED`…); its message and text are left out. */
  errorCode: string | null;
};

export type ListRecordsOptions = {
  /** Only records in this status; every status when a task is given without one. */
  status?: ListableStatus;
  /**
   * Only records of this task: every form its id may be stored in (in clear, or its keyed
   * references: see `identifierForms` of the audit subpath).
   */
  taskIds?: readonly string[];
  /** Only records of this operation (its `name`). */
  operation?: string;
  /** Rows at most. */
  limit: number;
  /** Keyset cursor: only keys after this one (the last key of the previous page). */
  after?: string;
};

/**
 * One page of the records in a status, in key order. Keyset-paged on the primary key (the table
 * has no index on status, by design: see migrations/0001-ledger.ts), so each page is a bounded
 * read that takes no row locks, however many rows the ledger holds. Only the error's `code` is
 * read: messages and sealed text stay in the row.
 *
 * @example
 * const page = await listRecords(pool, 'public', { status: 'unknown', limit: 50 });
 * const next = await listRecords(pool, 'public', { status: 'unknown', limit: 50, after: page.at(-1)?.key });
 */
export async function listRecords(pool: pg.Pool, schema: string, options: ListRecordsOptions): Promise<ListedRecord[]> {
  const table = `${checkSchema(schema)}.idempotency_ledger`;
  const res = await pool.query<{
    key: string;
    status: LedgerStatus;
    epoch: number;
    operation: string;
    queue: string | null;
    job_id: string | null;
    updated_at: Date;
    error_code: string | null;
    transitions: string | null;
  }>(
    `select key, status, epoch, operation, queue, job_id, updated_at, error->>'code' as error_code, transitions from ${table}
where key > $1 and ($2::text is null or status = $2) and ($3::text is null or operation = $3)
  and ($5::text[] is null or task_id = any($5::text[]))
order by key limit $4`,
    [options.after ?? '', options.status ?? null, options.operation ?? null, options.limit, options.taskIds ?? null],
  );
  return res.rows.map((r) => ({
    key: r.key,
    status: r.status,
    epoch: r.epoch,
    operation: r.operation,
    ...claimingJob(r),
    updatedAt: r.updated_at,
    errorCode: r.error_code,
  }));
}
