import { type ConnectionOptions, Job, type Queue, type Worker } from 'bullmq';
import { type AuditEvent, eventIdFor } from '../audit/audit-event.js';
import { keptEventsForRecord, transitionEventIds } from '../audit/derive.js';
import type { AuditEmitter } from '../audit/emitter.js';
import {
  type AuditPartitionOptions,
  type AuditPartitionResult,
  auditHorizon,
  maintainAuditPartitions,
} from '../audit/partitions.js';
import { ConfirmationStore } from '../confirm/confirmation-store.js';
import { type ConfirmationSweepResult, sweepConfirmations } from '../confirm/sweep.js';
import { errorLabel } from '../errors/clean-name.js';
import { IllegalTransitionError, StaleEpochError } from '../errors/errors.js';
import { ERROR_CODES } from '../errors/idempotency-error.js';
import type { PostgresLedger, SweepCursor } from '../ledger/postgres-ledger.js';
import { findStaleLocks, type StaleLock } from '../ledger/stale-locks.js';
import { KeptSchedule, type KeptScheduleSpec, upsertKeptSchedule } from '../shared/kept-schedule.js';
import type { Logger } from '../shared/logger.js';
import { openQueue, openWorker } from '../shared/queue-backend.js';

export const DEFAULT_SWEEPER_QUEUE = 'bullmq-idempotency-sweeper';
export const SWEEPER_SCHEDULER_ID = 'ledger-sweeper';

export type SweepOptions = {
  /** Rows deleted per statement (each a short transaction). @defaultValue 1000 */
  batchSize?: number;
  /** Upper bound of statements per run. @defaultValue 1000 */
  maxBatches?: number;
  emitter?: AuditEmitter;
  /** Identifies the run in its summary event. */
  runId?: string;
  /**
   * Where the BullMQ jobs live, to re-drive stale locks (see {@link redriveStaleLocks}); without
   * it a run only deletes expired rows.
   */
  redrive?: RedriveOptions;
  /**
   * The audit trail's retention, as its partitions are dropped (`maintainAuditPartitions`): an
   * event it drops is not waited for nor sent again (see `auditHorizon`), so a row kept longer
   * than its events still goes. Without it every event is waited for: pass it whenever partitions
   * are dropped, or rows whose events are gone would stay, their events sent again every run.
   * `createSweeperWorker` passes its `auditPartitions`.
   */
  auditRetention?: AuditPartitionOptions;
};

export type RedriveOptions = {
  connection: ConnectionOptions;
  prefix?: string;
  /** How long ago a lease must have expired (and more than twice its length). @defaultValue 60 000 */
  minAgeMs?: number;
};

/** What the re-drive step did with each stale lock it found. */
export type RedriveCounts = {
  /** The job had failed: retried (`job.retry('failed')`), its next attempt takes the lease over. */
  retried: number;
  /** No job will reach the row (gone, or completed): marked `unknown` for an operator to resolve. */
  abandoned: number;
  /** A job that will reach the row is still waiting, delayed or active: left to it. */
  left: number;
  /** No queue or job id recorded (claimed outside BullMQ), or the row moved on meanwhile. */
  skipped: number;
};

export type SweepResult = {
  deleted: number;
  batches: number;
  /**
   * Expired rows kept because the audit event of one of their transitions is not stored yet; with
   * an `emitter` their events were sent again, and a later run deletes them.
   */
  pending: number;
  /** The confirmation requests of swept operations (see {@link sweepConfirmations}). */
  confirmations: ConfirmationSweepResult;
  redriven?: RedriveCounts;
  /** What the scheduled run did to the audit trail's partitions (see maintainAuditPartitions). */
  auditPartitions?: AuditPartitionResult;
};

/** Recorded on a row handed to an operator because its job is gone. */
export const ABANDONED_ERROR = {
  code: ERROR_CODES.abandoned,
  message: 'the job that held this lease is gone',
} as const;

/**
 * Deletes expired terminal rows in bounded batches (never locked or unknown rows; rows another
 * transaction holds are skipped) and records one summary audit event per run. A row goes only
 * when every audit event of its transitions is stored (see `PostgresLedger.sweepPage`).
 */
export async function sweepLedger(ledger: PostgresLedger, opts: SweepOptions = {}): Promise<SweepResult> {
  const batchSize = opts.batchSize ?? 1000;
  const maxBatches = opts.maxBatches ?? 1000;
  let deleted = 0;
  let batches = 0;
  let pending = 0;
  let after: SweepCursor | undefined;
  const horizon = opts.auditRetention ? await auditHorizon(ledger.pool, opts.auditRetention) : undefined;
  while (batches < maxBatches) {
    const page = await ledger.sweepPage(batchSize, after, (r) => transitionEventIds(r, horizon));
    batches++;
    deleted += page.deleted;
    pending += page.pending.length;
    for (const r of page.pending) for (const e of keptEventsForRecord(r, horizon)) opts.emitter?.record(e);
    if (page.scanned < batchSize || !page.next) break;
    after = page.next;
  }
  const confirmations = await sweepConfirmations(new ConfirmationStore(ledger.pool, ledger.schema), {
    batchSize,
    maxBatches,
    ...(opts.emitter ? { emitter: opts.emitter } : {}),
  });
  const runId = opts.runId ?? `${Date.now()}`;
  opts.emitter?.record(sweepEvent(ledger.schema, runId, { deleted, batches, pending }));
  if (!opts.redrive) return { deleted, batches, pending, confirmations };
  const redriven = await redriveStaleLocks(ledger, opts.redrive, {
    batchSize,
    maxBatches,
    ...(opts.emitter ? { emitter: opts.emitter } : {}),
  });
  return { deleted, batches, pending, confirmations, redriven };
}

/**
 * The backstop for an attempt that died holding its lease with no job left to take it over
 * (e.g. its BullMQ attempts ran out while the database was away): each `locked` row whose lease
 * expired long ago is looked up by its recorded queue and job id. A failed job is retried, and
 * its next attempt takes the lease over (replays, re-runs against an idempotent downstream,
 * reconciles, or finds `unknown`), as after any crash; a job that is still waiting, delayed or
 * active is left to it; when the job is gone (or completed without the row), the row is marked
 * `unknown` with {@link ABANDONED_ERROR}, fenced by its epoch, for an operator to resolve. Each
 * re-drive is audited.
 */
export async function redriveStaleLocks(
  ledger: PostgresLedger,
  options: RedriveOptions,
  limits: { batchSize: number; maxBatches: number; emitter?: AuditEmitter },
): Promise<RedriveCounts> {
  const counts: RedriveCounts = { retried: 0, abandoned: 0, left: 0, skipped: 0 };
  const queues = new Map<string, Queue>();
  const queueOf = (name: string) => {
    let q = queues.get(name);
    if (!q) {
      q = openQueue(name, { connection: options.connection, ...(options.prefix ? { prefix: options.prefix } : {}) });
      q.on('error', () => {}); // a lookup that fails throws where it is awaited
      queues.set(name, q);
    }
    return q;
  };
  try {
    let after: string | undefined;
    for (let page = 0; page < limits.maxBatches; page++) {
      const rows = await findStaleLocks(ledger.pool, ledger.schema, {
        batchSize: limits.batchSize,
        ...(after !== undefined ? { after } : {}),
        ...(options.minAgeMs !== undefined ? { minAgeMs: options.minAgeMs } : {}),
      });
      for (const row of rows) {
        const done = await redriveOne(ledger, row, row.queue && row.jobId ? queueOf(row.queue) : undefined);
        counts[done.outcome]++;
        if (done.outcome === 'retried' || done.outcome === 'abandoned') {
          limits.emitter?.record(redriveEvent(row, done.outcome, done.jobState));
        }
      }
      if (rows.length < limits.batchSize) break;
      after = rows.at(-1)?.key;
    }
  } finally {
    await Promise.allSettled([...queues.values()].map((q) => q.close()));
  }
  return counts;
}

async function redriveOne(
  ledger: PostgresLedger,
  row: StaleLock,
  queue: Queue | undefined,
): Promise<{ outcome: keyof RedriveCounts; jobState?: string }> {
  if (!queue || !row.jobId) return { outcome: 'skipped' };
  const state = await queue.getJobState(row.jobId);
  if (state === 'failed') {
    const job = await Job.fromId(queue, row.jobId);
    if (!job) return { outcome: 'skipped', jobState: state };
    try {
      await job.retry('failed');
    } catch {
      return { outcome: 'skipped', jobState: state }; // retried or removed meanwhile: the next run looks again
    }
    return { outcome: 'retried', jobState: state };
  }
  if (state !== 'unknown' && state !== 'completed') return { outcome: 'left', jobState: state };
  try {
    await ledger.markUnknown(row.key, row.epoch, ABANDONED_ERROR);
  } catch (err) {
    // Taken over or finished since the page was read: nothing is abandoned.
    if (err instanceof StaleEpochError || err instanceof IllegalTransitionError) {
      return { outcome: 'skipped', jobState: state };
    }
    throw err;
  }
  return { outcome: 'abandoned', jobState: state === 'unknown' ? 'gone' : state };
}

/** The audit event of one re-drive: a failed job retried, or a row handed to an operator. */
export function redriveEvent(row: StaleLock, outcome: 'retried' | 'abandoned', jobState = 'gone'): AuditEvent {
  const event: AuditEvent = {
    eventId: eventIdFor(row.key, row.epoch, 'stale_lock', outcome),
    actorType: 'system',
    actorId: 'ledger-sweeper',
    action: outcome === 'retried' ? 'idempotency.redriven' : 'idempotency.abandoned',
    resourceType: 'idempotency_key',
    resourceId: row.key,
    decision: outcome === 'retried' ? 'allow' : 'pending_confirmation',
    reasonCode: outcome === 'retried' ? ERROR_CODES.staleLock : ABANDONED_ERROR.code,
    createdAt: new Date().toISOString(),
    phase: 'outcome',
    epoch: row.epoch,
    details: { jobState, leaseExpiredAt: row.leaseExpiresAt.toISOString() },
  };
  if (row.queue) event.queue = row.queue;
  if (row.jobId) event.jobId = row.jobId;
  if (row.stepId) event.stepId = row.stepId;
  return event;
}

/** The one summary audit event of a sweep run (by the scheduler, or by an operator through the CLI). */
export function sweepEvent(
  schema: string,
  runId: string,
  counts: { deleted: number; batches: number; pending?: number },
  actor: { actorType: AuditEvent['actorType']; actorId: string } = { actorType: 'system', actorId: 'ledger-sweeper' },
): AuditEvent {
  return {
    eventId: eventIdFor('sweep', schema, runId),
    ...actor,
    action: 'idempotency.swept',
    resourceType: 'ledger',
    resourceId: schema,
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'outcome',
    details: { ...counts },
  };
}

/** The sweeper's job scheduler: one sweep every `everyMs`. */
export const sweeperSchedule = (everyMs = 60_000): KeptScheduleSpec => ({
  id: SWEEPER_SCHEDULER_ID,
  jobName: 'sweep',
  everyMs,
});

/** Schedules the sweeper with a BullMQ job scheduler (upserted: safe to call on every start). */
export async function scheduleLedgerSweeper(queue: Queue, everyMs = 60_000): Promise<void> {
  await upsertKeptSchedule(queue, sweeperSchedule(everyMs));
}

/** Whether the sweeper's job scheduler exists (it lives only in Redis: a Redis that lost its data has none). */
export async function sweeperScheduled(queue: Queue): Promise<boolean> {
  return new KeptSchedule(queue, sweeperSchedule()).exists();
}

export function createSweeperWorker(options: {
  connection: ConnectionOptions;
  ledger: PostgresLedger;
  prefix?: string;
  queueName?: string;
  emitter?: AuditEmitter;
  batchSize?: number;
  logger?: Logger;
  /**
   * Each run also keeps the audit trail's time partitions in the ledger's schema: created ahead,
   * and with `retentionMs` the old ones dropped (see {@link maintainAuditPartitions}). `false`:
   * not by this worker. @defaultValue `{}` (partitions created ahead; events kept for ever)
   */
  auditPartitions?: AuditPartitionOptions | false;
}): Worker {
  const partitions = options.auditPartitions ?? {};
  const worker = openWorker(
    options.queueName ?? DEFAULT_SWEEPER_QUEUE,
    async (job) => {
      const result = await sweepLedger(options.ledger, {
        ...(options.batchSize ? { batchSize: options.batchSize } : {}),
        ...(options.emitter ? { emitter: options.emitter } : {}),
        runId: job.id ?? String(job.timestamp),
        // Events these partitions' retention drops are not waited for.
        ...(partitions !== false && partitions.retentionMs !== undefined ? { auditRetention: partitions } : {}),
        // The jobs whose stale locks it re-drives live under the same connection and prefix.
        redrive: { connection: options.connection, ...(options.prefix ? { prefix: options.prefix } : {}) },
      });
      if (partitions === false) return result;
      return {
        ...result,
        auditPartitions: await maintainAuditPartitions(options.ledger.pool, options.ledger.schema, partitions),
      };
    },
    { connection: options.connection, concurrency: 1, ...(options.prefix ? { prefix: options.prefix } : {}) },
  );
  worker.on('error', (err) => options.logger?.error({ err: errorLabel(err) }, 'sweeper worker error'));
  return worker;
}
