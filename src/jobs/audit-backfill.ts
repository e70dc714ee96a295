import type { ConnectionOptions, Job, Queue, Worker, WorkerOptions } from 'bullmq';
import type pg from 'pg';
import type { AuditEvent } from '../audit/audit-event.js';
import { openCheckpoint, saveCheckpoint } from '../audit/backfill-checkpoint.js';
import { auditBatchJob } from '../audit/batch-codec.js';
import { keptEventsForRecord } from '../audit/derive.js';
import { drainOutboxBatches } from '../audit/outbox.js';
import { type AuditPartitionOptions, auditHorizon } from '../audit/partitions.js';
import { redriveFailedAuditBatches } from '../audit/redrive-failed.js';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { errorLabel } from '../errors/clean-name.js';
import { scanLedger } from '../ledger/scans.js';
import type { Logger } from '../shared/logger.js';
import { openWorker } from '../shared/queue-backend.js';

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
  /**
   * The audit trail's retention, when its partitions are dropped (`maintainAuditPartitions`): the
   * events it drops are not sent (see `auditHorizon`). @defaultValue every event is sent
   */
  auditRetention?: AuditPartitionOptions;
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
  const pageSize = opts.pageSize ?? 1000;
  const checkpoint = await openCheckpoint(opts.pool, schema, opts.name ?? 'default', opts.since);
  const progress: BackfillProgress = {
    rowsScanned: checkpoint.rowsScanned,
    eventsEnqueued: checkpoint.eventsEnqueued,
    outboxBatchesDrained: 0,
    failedBatchesRedriven: 0,
    done: false,
  };
  const began = Date.now();
  let scannedHere = 0;
  // Never an event the audit retention drops: it would be stored again, then dropped again.
  const horizon = opts.auditRetention ? await auditHorizon(opts.pool, opts.auditRetention) : undefined;
  for (;;) {
    if (opts.signal?.aborted) return progress;
    const page = await scanLedger(opts.pool, schema, checkpoint.cursor, pageSize);
    if (page.records.length === 0) break;
    const events: AuditEvent[] = [];
    for (const record of page.records) events.push(...keptEventsForRecord(record, horizon));
    await enqueueEvents(opts.auditQueue, events);
    progress.rowsScanned += page.records.length;
    progress.eventsEnqueued += events.length;
    scannedHere += page.records.length;
    checkpoint.cursor = page.next;
    checkpoint.rowsScanned = progress.rowsScanned;
    checkpoint.eventsEnqueued = progress.eventsEnqueued;
    await saveCheckpoint(opts.pool, schema, checkpoint);
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
export function drainOutbox(pool: pg.Pool, schema: string, auditQueue: Queue): Promise<number> {
  return drainOutboxBatches(pool, schema, (events) => enqueueEvents(auditQueue, events));
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
  const worker = openWorker(
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
