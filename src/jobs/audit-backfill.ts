import { type ConnectionOptions, type Job, type Queue, Worker, type WorkerOptions } from 'bullmq';
import type pg from 'pg';
import type { AuditEvent } from '../audit/audit-event.js';
import { auditBatchJob } from '../audit/batch-codec.js';
import { eventsForRecord } from '../audit/derive.js';
import { redriveFailedAuditBatches } from '../audit/redrive-failed.js';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { errorLabel } from '../errors/clean-name.js';
import { toRecord } from '../ledger/postgres-ledger.js';
import type { Logger } from '../worker/types.js';

export const DEFAULT_BACKFILL_QUEUE = 'bullmq-idempotency-backfill';

export type BackfillOptions = {
  pool: pg.Pool;
  /** The audit queue the writer consumes. */
  auditQueue: Queue;
  /** @defaultValue `'public'` */
  schema?: string;
  /** Checkpoint name: independent backfills keep independent checkpoints. @defaultValue `'default'` */
  name?: string;
  /** Start again from this time (the checkpoint is reset to it). */
  since?: Date;
  /** Ledger rows read per page (memory stays bounded by it). @defaultValue 1000 */
  pageSize?: number;
  /** Rate limit: at most this many ledger rows per second. @defaultValue unlimited */
  maxRowsPerSecond?: number;
  /** Called after every page. */
  onProgress?: (p: BackfillProgress) => void | Promise<void>;
  signal?: AbortSignal;
  logger?: Logger;
};

export type BackfillProgress = {
  rowsScanned: number;
  eventsEnqueued: number;
  outboxBatchesDrained: number;
  /** Audit batches sent back to the writer from the audit queue's failed set. */
  failedBatchesRedriven: number;
  done: boolean;
};

/**
 * Walks the ledger in keyset pages (updated_at, key) from a checkpoint kept in Postgres,
 * enqueues the audit events every row's state implies (the live events' ids and times, so
 * existing events are not written twice), then drains the outbox of batches that could not be
 * enqueued when Redis was down, and re-drives the audit batches in the audit queue's failed set
 * (see `redriveFailedAuditBatches`). Resumable after a crash at the last finished page; safe to run
 * any time and any number of times.
 */
export async function runBackfill(opts: BackfillOptions): Promise<BackfillProgress> {
  const schema = checkSchema(opts.schema ?? DEFAULT_SCHEMA);
  const name = opts.name ?? 'default';
  const pageSize = opts.pageSize ?? 1000;
  const cp = `${schema}.audit_backfill_checkpoint`;
  if (opts.since) {
    await opts.pool.query(
      `insert into ${cp} (name, last_updated_at, last_key) values ($1, $2, '')
       on conflict (name) do update set last_updated_at = excluded.last_updated_at, last_key = '', updated_at = now()`,
      [name, opts.since],
    );
  } else {
    await opts.pool.query(`insert into ${cp} (name) values ($1) on conflict do nothing`, [name]);
  }
  const start = (
    await opts.pool.query(`select *, last_updated_at::text as cursor_at from ${cp} where name = $1`, [name])
  ).rows[0];
  let cursor: { at: string; key: string } = { at: start.cursor_at ?? '-infinity', key: start.last_key ?? '' };
  const progress: BackfillProgress = {
    rowsScanned: Number(start.rows_scanned),
    eventsEnqueued: Number(start.events_enqueued),
    outboxBatchesDrained: 0,
    failedBatchesRedriven: 0,
    done: false,
  };
  const began = Date.now();
  let scannedHere = 0;
  for (;;) {
    if (opts.signal?.aborted) return progress;
    const page = await opts.pool.query(
      // The cursor travels as text: a JS Date would cut Postgres' microseconds and repeat pages.
      `select *, updated_at::text as cursor_at from ${schema}.idempotency_ledger where (updated_at, key) > ($1::timestamptz, $2)
       order by updated_at, key limit $3`,
      [cursor.at, cursor.key, pageSize],
    );
    if (page.rows.length === 0) break;
    const events: AuditEvent[] = [];
    for (const row of page.rows) events.push(...eventsForRecord(toRecord(row)));
    await enqueueEvents(opts.auditQueue, events);
    const last = page.rows[page.rows.length - 1];
    cursor = { at: last.cursor_at, key: last.key };
    progress.rowsScanned += page.rows.length;
    progress.eventsEnqueued += events.length;
    scannedHere += page.rows.length;
    await opts.pool.query(
      `update ${cp} set last_updated_at = $2, last_key = $3, rows_scanned = $4, events_enqueued = $5, updated_at = now() where name = $1`,
      [name, cursor.at, cursor.key, progress.rowsScanned, progress.eventsEnqueued],
    );
    await opts.onProgress?.(progress);
    if (opts.maxRowsPerSecond) {
      const ahead = (scannedHere / opts.maxRowsPerSecond) * 1000 - (Date.now() - began);
      if (ahead > 0) await new Promise((r) => setTimeout(r, ahead));
    }
  }
  progress.outboxBatchesDrained = await drainOutbox(opts.pool, schema, opts.auditQueue);
  progress.failedBatchesRedriven = await redriveFailedAuditBatches(opts.auditQueue, opts.logger);
  progress.done = true;
  await opts.onProgress?.(progress);
  opts.logger?.info({ ...progress }, 'audit backfill finished');
  return progress;
}

/** Moves outbox batches to the audit queue; a batch leaves the outbox only once it is enqueued. */
export async function drainOutbox(pool: pg.Pool, schema: string, auditQueue: Queue): Promise<number> {
  const table = `${checkSchema(schema)}.audit_outbox`;
  let drained = 0;
  for (;;) {
    const client = await pool.connect();
    try {
      await client.query('begin');
      const rows = await client.query(`select id, events from ${table} order by id limit 50 for update skip locked`);
      if (rows.rows.length === 0) {
        await client.query('commit');
        return drained;
      }
      for (const r of rows.rows) await enqueueEvents(auditQueue, r.events as AuditEvent[]);
      await client.query(`delete from ${table} where id = any($1::bigint[])`, [rows.rows.map((r) => r.id)]);
      await client.query('commit');
      drained += rows.rows.length;
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }
}

async function enqueueEvents(queue: Queue, events: AuditEvent[]): Promise<void> {
  const jobs = [];
  for (let i = 0; i < events.length; i += 500) jobs.push(await auditBatchJob(events.slice(i, i + 500)));
  if (jobs.length > 0) await queue.addBulk(jobs);
}

export type BackfillWorkerOptions = Omit<BackfillOptions, 'onProgress' | 'signal' | 'since' | 'name'> & {
  connection: ConnectionOptions;
  prefix?: string;
  /** @defaultValue `'bullmq-idempotency-backfill'` */
  queueName?: string;
  /** Extra BullMQ worker options (lockDuration, stalledInterval...). */
  workerOptions?: Partial<WorkerOptions>;
};

/**
 * The backfill as a BullMQ worker: each job (data `{ name?, since? }`) runs one backfill,
 * reporting progress through `job.updateProgress`. A killed worker's job is redelivered and
 * resumes from the checkpoint.
 */
export function createBackfillWorker(options: BackfillWorkerOptions): Worker {
  const worker = new Worker(
    options.queueName ?? DEFAULT_BACKFILL_QUEUE,
    async (job: Job, _token?: string, signal?: AbortSignal) => {
      const data = (job.data ?? {}) as { name?: string; since?: string };
      return runBackfill({
        ...options,
        ...(data.name ? { name: data.name } : {}),
        ...(data.since ? { since: new Date(data.since) } : {}),
        ...(signal ? { signal } : {}),
        onProgress: (p) => job.updateProgress({ ...p }),
      });
    },
    {
      ...options.workerOptions,
      connection: options.connection,
      ...(options.prefix ? { prefix: options.prefix } : {}),
      concurrency: 1,
    },
  );
  worker.on('error', (err) => options.logger?.error({ err: errorLabel(err) }, 'backfill worker error'));
  return worker;
}
