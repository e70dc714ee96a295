import type { Queue } from 'bullmq';
import type pg from 'pg';
import type { z } from 'zod';
import type { AuditEmitter } from '../audit/emitter.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { intentEvent } from '../intents/intent-events.js';
import type { EnqueueOptions, EnqueueResult } from '../operation/enqueue-types.js';
import type { Operation } from '../operation/operation.js';
import type { WorkerTiming } from '../operation/retry-window.js';
import type { Keyring } from '../sealing/keyring.js';
import type { RuntimeEnqueueOptions } from './runtime-types.js';

/**
 * `idem.enqueue` and `idem.enqueueBulk` past the runtime's own checks: the producer's options made
 * from the runtime's (its keyring, its worker's lock settings for the queue, where the intent is
 * recorded), and the acceptance of an intent recorded now sent to the trail. Apart from the
 * runtime because the producer's options are the one thing enqueueing adds to it.
 */

/** What enqueueing uses of the runtime. */
export type EnqueueParts = {
  pool: pg.Pool;
  schema: string;
  keyring: Keyring;
  durableByDefault: boolean;
  /** The lock and stall settings of the runtime's worker on a queue, when it built one. */
  timing(queue: string): WorkerTiming | undefined;
  /** The runtime's emitter, made on first use; undefined without a trail. */
  emitter(): AuditEmitter | undefined;
  actorId: string;
};

/** One job of `operation` on `queue`; its intent's acceptance audited when recorded now. */
export async function enqueueOne<S extends z.ZodType, R, P extends string>(
  parts: EnqueueParts,
  operation: Operation<S, R, P>,
  queue: Queue,
  input: z.input<S>,
  options: RuntimeEnqueueOptions,
): Promise<EnqueueResult> {
  const result = await operation.enqueue(queue, input, enqueueOptions(parts, queue.name, options));
  auditAccepted(parts, operation.name, queue.name, [result], [options.taskId]);
  return result;
}

/** Many jobs of `operation` in one `addBulk`; every item must record its intent in the same place. */
export async function enqueueMany<S extends z.ZodType, R, P extends string>(
  parts: EnqueueParts,
  operation: Operation<S, R, P>,
  queue: Queue,
  items: { input: z.input<S>; options?: RuntimeEnqueueOptions }[],
): Promise<EnqueueResult[]> {
  // One durable object for the whole batch: the producer records every intent in one statement.
  const where = items.map((it) => durableOf(parts, it.options ?? {}));
  const shared = where[0];
  if (where.some((d) => d?.tx !== shared?.tx || (d === undefined) !== (shared === undefined))) {
    throw new IdempotencyConfigError('enqueueBulk: every item must have the same `durable` and `tx`', {
      option: 'durable',
    });
  }
  const results = await operation.enqueueBulk(
    queue,
    items.map((it) => {
      const own = enqueueOptions(parts, queue.name, it.options ?? {});
      return { input: it.input, options: shared ? { ...own, durable: shared } : own };
    }),
  );
  auditAccepted(
    parts,
    operation.name,
    queue.name,
    results,
    items.map((it) => it.options?.taskId),
  );
  return results;
}

function enqueueOptions(parts: EnqueueParts, queue: string, options: RuntimeEnqueueOptions): EnqueueOptions {
  const timing = parts.timing(queue);
  const { durable: _durable, tx: _tx, ...rest } = options;
  const durable = durableOf(parts, options);
  return { ...(timing ? { worker: timing } : {}), ...rest, keyring: parts.keyring, ...(durable ? { durable } : {}) };
}

/** Where an enqueue records its intent: the caller's transaction, the runtime's pool, or nowhere. */
function durableOf(parts: EnqueueParts, options: RuntimeEnqueueOptions): EnqueueOptions['durable'] {
  if (options.tx) return { tx: options.tx, schema: parts.schema };
  if (options.durable ?? parts.durableByDefault) return { pool: parts.pool, schema: parts.schema };
  return undefined;
}

/** An intent recorded outside a transaction is durable now: its acceptance goes to the trail. */
function auditAccepted(
  parts: EnqueueParts,
  operation: string,
  queue: string,
  results: EnqueueResult[],
  taskIds: (string | undefined)[],
): void {
  const emitter = results.some((r) => r.intent === 'recorded' && !r.deferred) ? parts.emitter() : undefined;
  if (!emitter) return;
  results.forEach((r, i) => {
    if (r.intent !== 'recorded' || r.deferred) return;
    const row = { key: r.idempotencyKey, operation, queue, jobId: r.jobId, jobName: operation, taskId: taskIds[i] };
    emitter.record(intentEvent({ ...row, data: null, opts: {} }, { kind: 'accepted', deferred: false }, parts.actorId));
  });
}
