import { type ConnectionOptions, type Queue, Worker } from 'bullmq';
import { type AuditEvent, eventIdFor } from '../src/audit/audit-event.js';
import type { AuditEmitter } from '../src/audit/emitter.js';
import type { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import type { Logger } from '../src/worker/types.js';

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
};

/**
 * Deletes expired terminal rows in bounded batches (never locked or unknown rows; rows another
 * transaction holds are skipped) and records one summary audit event per run.
 */
export async function sweepLedger(
  ledger: PostgresLedger,
  opts: SweepOptions = {},
): Promise<{ deleted: number; batches: number }> {
  const batchSize = opts.batchSize ?? 1000;
  const maxBatches = opts.maxBatches ?? 1000;
  let deleted = 0;
  let batches = 0;
  while (batches < maxBatches) {
    const n = await ledger.sweepExpired(batchSize);
    batches++;
    deleted += n;
    if (n < batchSize) break;
  }
  opts.emitter?.record(sweepEvent(ledger.schema, opts.runId ?? `${Date.now()}`, { deleted, batches }));
  return { deleted, batches };
}

/** The one summary audit event of a sweep run (by the scheduler, or by an operator through the CLI). */
export function sweepEvent(
  schema: string,
  runId: string,
  counts: { deleted: number; batches: number },
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

/** Schedules the sweeper with a BullMQ job scheduler (upserted: safe to call on every start). */
export async function scheduleLedgerSweeper(queue: Queue, everyMs = 60_000): Promise<void> {
  await queue.upsertJobScheduler(
    SWEEPER_SCHEDULER_ID,
    { every: everyMs },
    { name: 'sweep', opts: { removeOnComplete: 100, removeOnFail: 100 } },
  );
}

export function createSweeperWorker(options: {
  connection: ConnectionOptions;
  ledger: PostgresLedger;
  prefix?: string;
  queueName?: string;
  emitter?: AuditEmitter;
  batchSize?: number;
  logger?: Logger;
}): Worker {
  const worker = new Worker(
    options.queueName ?? DEFAULT_SWEEPER_QUEUE,
    async (job) =>
      sweepLedger(options.ledger, {
        ...(options.batchSize ? { batchSize: options.batchSize } : {}),
        ...(options.emitter ? { emitter: options.emitter } : {}),
        runId: job.id ?? String(job.timestamp),
      }),
    { connection: options.connection, concurrency: 1, ...(options.prefix ? { prefix: options.prefix } : {}) },
  );
  worker.on('error', (err) => options.logger?.error({ err: err.message }, 'sweeper worker error'));
  return worker;
}
