import type pg from 'pg';
import { confirmationEvent, settledEvent } from '../audit/confirmation-event.js';
import { identifierForms } from '../audit/stored-identifier.js';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { ConfirmationNotFoundError } from './errors.js';
import { confirmationStatements } from './statements.js';
import type { Confirmation, ConfirmationStatus, ConfirmationWaiter } from './types.js';

type Row = Record<string, unknown>;

/** What a new request records (the id, the times and the status are the database's). */
export type NewConfirmation = {
  operationKey: string;
  name: string;
  operation: string;
  reason: string;
  /** Sealed details, or undefined. */
  details?: string;
  onTimeout: 'deny' | 'fail';
  timeoutMs: number;
  taskId?: string;
  jobId?: string;
  queue?: string;
  epoch: number;
};

const ID = /^cf-([1-9][0-9]{0,17})$/;

/** The row number behind a `cf-<n>` id; a {@link ConfirmationNotFoundError} for anything else. */
export function confirmationNumber(id: string): string {
  const m = ID.exec(id.trim());
  if (!m) throw new ConfirmationNotFoundError({ id });
  return m[1] as string;
}

/**
 * The confirmation requests in Postgres (`idempotency_confirmations`). Knows nothing of BullMQ or
 * the audit trail; every time decision is the database's.
 */
export class ConfirmationStore {
  private readonly sql: ReturnType<typeof confirmationStatements>;

  constructor(
    readonly pool: pg.Pool,
    readonly schema: string = DEFAULT_SCHEMA,
  ) {
    this.sql = confirmationStatements(`${checkSchema(schema)}.idempotency_confirmations`);
  }

  /** Gets the request of (operation key, name), creating it if there is none. */
  async request(req: NewConfirmation): Promise<Confirmation & { created: boolean }> {
    const values = [
      req.operationKey,
      req.name,
      req.operation,
      req.reason,
      req.details === undefined ? null : JSON.stringify(req.details),
      req.onTimeout,
      req.timeoutMs,
      req.taskId ?? null,
      req.jobId ?? null,
      req.queue ?? null,
      req.epoch,
    ];
    // A concurrent creator's row is invisible to the statement that lost the insert: ask again.
    for (let round = 0; round < 5; round++) {
      const row = (await this.pool.query(this.sql.request, values)).rows[0] as Row | undefined;
      if (row) return { ...toConfirmation(row), created: row.created === true };
    }
    throw new Error(`confirmation ${req.name} of ${req.operationKey} could not be read back`);
  }

  /** The request with this id; {@link ConfirmationNotFoundError} when there is none. */
  async get(id: string): Promise<Confirmation> {
    const row = (await this.pool.query(this.sql.get, [confirmationNumber(id)])).rows[0] as Row | undefined;
    if (!row) throw new ConfirmationNotFoundError({ id });
    return toConfirmation(row);
  }

  /** Records an answer; undefined when the request is no longer pending or its time has run out. */
  async answer(
    id: string,
    status: Extract<ConfirmationStatus, 'approved' | 'denied'>,
    by: string,
    reasonCode: string,
    comment: string | null,
  ): Promise<Confirmation | undefined> {
    const rows = (await this.pool.query(this.sql.answer, [confirmationNumber(id), status, by, reasonCode, comment]))
      .rows as Row[];
    return rows[0] ? toConfirmation(rows[0]) : undefined;
  }

  /** Records the timeout of an overdue pending request; undefined when it is not (or no longer) that. */
  async timeout(id: string, reasonCode: string): Promise<Confirmation | undefined> {
    const rows = (await this.pool.query(this.sql.timeout, [confirmationNumber(id), reasonCode])).rows as Row[];
    return rows[0] ? toConfirmation(rows[0]) : undefined;
  }

  /** Names a parked job for the answer to wake. */
  async addWaiter(id: string, waiter: ConfirmationWaiter): Promise<void> {
    await this.pool.query(this.sql.addWaiter, [confirmationNumber(id), JSON.stringify([waiter])]);
  }

  /** Requests in id order (`pending`: only those waiting for an answer). */
  async list(options: { pending?: boolean; limit?: number; after?: string } = {}): Promise<Confirmation[]> {
    const after = options.after === undefined ? '0' : confirmationNumber(options.after);
    const rows = await this.pool.query(this.sql.list, [options.pending === true, options.limit ?? 100, after]);
    return (rows.rows as Row[]).map(toConfirmation);
  }

  /**
   * The requests of a task or of one operation key, in id order. A task id is looked up in every
   * form it may be stored in (in clear, or its reference under each key of `policy`, the
   * emitters' policy: see `identifierAsStored`).
   */
  async of(query: { taskId: string; policy?: RedactionPolicy } | { operationKey: string }): Promise<Confirmation[]> {
    const rows =
      'taskId' in query
        ? await this.pool.query(this.sql.byTask, [
            query.policy ? identifierForms(query.taskId, query.policy) : [query.taskId],
          ])
        : await this.pool.query(this.sql.byOperation, [query.operationKey]);
    return (rows.rows as Row[]).map(toConfirmation);
  }

  /**
   * One page of the sweep, after `after` (a row number, `'0'` for the first page): deletes the
   * answered and timed-out requests whose operation has left the ledger, once the audit events of
   * the request and of its answer are stored (the rule the ledger's rows follow); the others are
   * returned as `pending` (store their events, and a later sweep deletes them). A pending request
   * is never deleted. `next` is where the next page starts (undefined: no candidates were left).
   */
  async sweepPage(
    batchSize: number,
    after = '0',
  ): Promise<{ deleted: number; scanned: number; pending: Confirmation[]; next: string | undefined }> {
    const client = await this.pool.connect();
    try {
      await client.query('begin');
      const rows = (await client.query(this.sql.sweepCandidates, [batchSize, after])).rows as Row[];
      const found = rows.map(toConfirmation);
      const ids = found.map(confirmationEventIds);
      const all = ids.flat();
      const stored = new Set(
        all.length === 0
          ? []
          : (await client.query(this.sql.storedEventIds, [all])).rows.map((r) => (r as Row).event_id as string),
      );
      const done: string[] = [];
      const pending: Confirmation[] = [];
      found.forEach((c, i) => {
        if ((ids[i] as string[]).every((id) => stored.has(id))) done.push(String(rows[i]?.n));
        else pending.push(c);
      });
      if (done.length > 0) await client.query(this.sql.sweepRows, [done]);
      await client.query('commit');
      const last = rows.at(-1);
      return { deleted: done.length, scanned: rows.length, pending, next: last ? String(last.n) : undefined };
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  /** How many requests wait for an answer, and since when the oldest. */
  async pending(): Promise<{ count: number; oldestAt: Date | null; readAt: Date }> {
    const row = (await this.pool.query(this.sql.pending)).rows[0] as Row;
    return { count: Number(row.n), oldestAt: (row.oldest as Date | null) ?? null, readAt: row.read_at as Date };
  }
}

/** The ids of a settled request's audit events: its request and its answer (or timeout). */
function confirmationEventIds(c: Confirmation): string[] {
  const settled = settledEvent(c);
  return [confirmationEvent('requested', c).eventId, ...(settled ? [settled.eventId] : [])];
}

function toConfirmation(r: Row): Confirmation {
  return {
    id: `cf-${r.n}`,
    operationKey: r.operation_key as string,
    name: r.name as string,
    operation: r.operation as string,
    reason: r.reason as string,
    details: (r.details as string | null) ?? null,
    status: r.status as ConfirmationStatus,
    onTimeout: r.on_timeout as 'deny' | 'fail',
    timeoutMs: Number(r.timeout_ms),
    taskId: (r.task_id as string | null) ?? null,
    jobId: (r.job_id as string | null) ?? null,
    queue: (r.queue as string | null) ?? null,
    requestedEpoch: r.requested_epoch as number,
    requestedAt: r.requested_at as Date,
    expiresAt: r.expires_at as Date,
    answeredAt: (r.answered_at as Date | null) ?? null,
    answeredBy: (r.answered_by as string | null) ?? null,
    answeredByType: (r.answered_by_type as 'user' | 'system' | null) ?? null,
    reasonCode: (r.reason_code as string | null) ?? null,
    comment: (r.comment as string | null) ?? null,
    waiters: (r.waiters as ConfirmationWaiter[] | null) ?? [],
    readAt: r.read_at as Date,
    overdue: r.overdue === true,
  };
}
