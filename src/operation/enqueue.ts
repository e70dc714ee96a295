import type { Queue } from 'bullmq';
import { checkSchema, DEFAULT_SCHEMA } from '../db/connection.js';
import { IdempotencyConfigError } from '../errors/errors.js';
import { intentExecutor } from '../intents/executor.js';
import { type IntentRow, recordIntents } from '../intents/intent-store.js';
import { boundedKey, type IdempotencyKey } from '../keys/idempotency-key.js';
import { jobIdOfKey } from '../keys/job-id.js';
import { sealInput } from '../sealing/sealed-input.js';
import { queueRedis } from '../shared/bullmq.js';
import type { AbsorbedState, DurableIntentOptions, EnqueueOptions, EnqueueResult } from './enqueue-types.js';
import { ENVELOPE_FIELD, type JobEnvelope } from './envelope.js';
import { assertRetentionCovers, type RetryWindowOptions, retryWindowMs } from './retry-window.js';

/**
 * What the producer needs of an operation (a defined `Operation` is one): its name, how to
 * validate input and make its key, its retention and retry window, and the fields it seals.
 */
export type EnqueueableOperation = {
  readonly name: string;
  readonly sensitiveInput: readonly string[];
  readonly retentionMs: number;
  readonly retryWindow: RetryWindowOptions;
  parseInput(raw: unknown): unknown;
  keyFor(input: unknown, resourceKey?: string): IdempotencyKey;
};

/**
 * The BullMQ job id of a key (its parts, or its bounded form as `ctx.idempotencyKey` and the
 * ledger show it): `idem_` and the base64url SHA-256 of the bounded key. Stable,
 * never all digits and free of `:`, so duplicate adds are absorbed while the job is kept.
 */
export function jobIdFor(key: IdempotencyKey | string): string {
  return jobIdOfKey(typeof key === 'string' ? key : boundedKey(key));
}

function prepare<I>(op: EnqueueableOperation, queue: Queue, input: I, options: EnqueueOptions = {}) {
  if (options.jobOptions && 'jobId' in options.jobOptions) {
    throw new IdempotencyConfigError('jobId is derived from the idempotency key; do not set it', { option: 'jobId' });
  }
  const parsed = op.parseInput(input);
  const key = op.keyFor(parsed, options.resourceKey);
  const jobOptions = { ...queue.defaultJobOptions, ...options.jobOptions };
  assertRetentionCovers(op.name, op.retentionMs, retryWindowMs(jobOptions, options.worker, op.retryWindow));
  const envelope: JobEnvelope = {
    [ENVELOPE_FIELD]: { v: 1, operation: op.name, key, ...(options.taskId ? { taskId: options.taskId } : {}) },
    // The validated input is what travels: every attempt sees exactly what was accepted, and
    // declared sensitive fields travel sealed.
    input: sealInput(op, parsed, options.keyring, boundedKey(key)),
  };
  const jobId = jobIdFor(key);
  return { key, jobId, envelope, opts: { ...options.jobOptions, jobId }, taskId: options.taskId };
}

type Prepared = ReturnType<typeof prepare>;

/** The default grace before a relay looks at an intent whose producer adds the job itself. */
const DEFAULT_GRACE_MS = 30_000;

/**
 * Records the intents of `prepared` where `durable` says (one statement), before any job is
 * added; returns the keys this call recorded. The rows carry the envelope exactly as the job
 * will: sealed fields sealed.
 */
async function recordDurable(
  op: EnqueueableOperation,
  queue: Queue,
  prepared: Prepared[],
  durable: DurableIntentOptions,
): Promise<Set<string>> {
  const target = durable.tx ?? durable.pool;
  if (!target || (durable.tx && durable.pool)) {
    throw new IdempotencyConfigError('durable: give either { pool } or { tx }', { option: 'durable' });
  }
  const schema = checkSchema(durable.schema ?? DEFAULT_SCHEMA);
  const rows: IntentRow[] = prepared.map((p) => ({
    key: boundedKey(p.key),
    operation: op.name,
    queue: queue.name,
    jobId: p.jobId,
    jobName: op.name,
    data: p.envelope,
    opts: p.opts,
    taskId: p.taskId,
  }));
  return recordIntents(
    intentExecutor(target, durable.tx ? 'durable.tx' : 'durable.pool'),
    schema,
    rows,
    durable.tx ? { addNow: false } : { addNow: true, graceMs: durable.graceMs ?? DEFAULT_GRACE_MS },
  );
}

/** The result of an intent recorded in the caller's transaction: no job yet. */
function deferredResult(p: Prepared, recorded: Set<string>): EnqueueResult {
  const idempotencyKey = boundedKey(p.key);
  return {
    jobId: p.jobId,
    key: p.key,
    idempotencyKey,
    added: false,
    intent: recorded.has(idempotencyKey) ? 'recorded' : 'existing',
    deferred: true,
  };
}

/** What a backend without a Redis client answers for one job: its stored form, or undefined. */
type JobReader = { getJobData(jobId: string): Promise<{ timestamp?: number | string } | undefined> };

/**
 * The creation time of each job as stored, or null when there is none: one pipelined round trip
 * on Redis; on another backend, one read per job through BullMQ's backend interface.
 */
async function storedTimestamps(queue: Queue, jobIds: string[]): Promise<(number | null)[]> {
  const redis = await queueRedis(queue);
  if (!redis) {
    const backend = queue.backend as unknown as JobReader;
    return Promise.all(
      jobIds.map(async (id) => {
        const stored = await backend.getJobData(id);
        return stored?.timestamp === undefined ? null : Number(stored.timestamp);
      }),
    );
  }
  const pipeline = redis.pipeline();
  for (const id of jobIds) pipeline.hget(queue.toKey(id), 'timestamp');
  const replies = (await pipeline.exec()) ?? [];
  return jobIds.map((_, i) => {
    const [err, stored] = replies[i] ?? [null, null];
    if (err) throw err;
    return stored === null || stored === undefined ? null : Number(stored);
  });
}

/**
 * Whether each add created its job. BullMQ 6.7 answers a duplicate id with the id alone (`add`
 * returns a fresh `Job` holding the caller's data), so each stored job's creation time is read
 * back — one field, in one pipelined round trip for the whole batch on Redis, the job's stored
 * form on BullMQ's PostgreSQL backend: the job is this add's when that time is the one this add
 * stamped. Only an absorbed add reads its job's state. Two producers adding one key in the same
 * millisecond may both read `added: true`; nothing runs twice either way.
 */
async function outcomes(
  queue: Queue,
  added: { jobId: string; stampedAt: number }[],
): Promise<Pick<EnqueueResult, 'added' | 'state'>[]> {
  const stamps = await storedTimestamps(
    queue,
    added.map((a) => a.jobId),
  );
  return Promise.all(
    added.map(async (a, i): Promise<Pick<EnqueueResult, 'added' | 'state'>> => {
      const stored = stamps[i] ?? null;
      if (stored === null) return { added: false, state: 'unknown' };
      if (stored === a.stampedAt) return { added: true };
      return { added: false, state: (await queue.getJobState(a.jobId)) as AbsorbedState };
    }),
  );
}

/**
 * Enqueues one intended operation under the job id of its key. A repeat while the job exists is
 * absorbed (`added: false`, with the existing job's `state`).
 *
 * @example
 * const r = await chargeOrder.enqueue(queue, { orderId: 'o-42', amount: 1200 });
 * if (!r.added) console.log(`already enqueued: job ${r.jobId} is ${r.state}`);
 */
export async function enqueue<I>(
  op: EnqueueableOperation,
  queue: Queue,
  input: I,
  options?: EnqueueOptions,
): Promise<EnqueueResult> {
  const p = prepare(op, queue, input, options);
  const recorded = options?.durable ? await recordDurable(op, queue, [p], options.durable) : undefined;
  if (recorded && options?.durable?.tx) return deferredResult(p, recorded);
  const job = await queue.add(op.name, p.envelope, p.opts);
  const [o = { added: false, state: 'unknown' as const }] = await outcomes(queue, [
    { jobId: p.jobId, stampedAt: job.timestamp },
  ]);
  const idempotencyKey = boundedKey(p.key);
  return {
    jobId: p.jobId,
    key: p.key,
    idempotencyKey,
    ...o,
    ...(recorded ? { intent: recorded.has(idempotencyKey) ? 'recorded' : 'existing' } : {}),
  };
}

/** {@link enqueue} for many operations in one atomic `addBulk`; one result per item, in order. */
export async function enqueueBulk<I>(
  op: EnqueueableOperation,
  queue: Queue,
  items: { input: I; options?: EnqueueOptions }[],
): Promise<EnqueueResult[]> {
  const prepared = items.map((it) => prepare(op, queue, it.input, it.options));
  const durable = items[0]?.options?.durable;
  if (items.some((it) => it.options?.durable !== durable)) {
    throw new IdempotencyConfigError('enqueueBulk: every item must have the same `durable` (or none)', {
      option: 'durable',
    });
  }
  const recorded = durable ? await recordDurable(op, queue, prepared, durable) : undefined;
  if (recorded && durable?.tx) return prepared.map((p) => deferredResult(p, recorded));
  const jobs = await queue.addBulk(prepared.map((p) => ({ name: op.name, data: p.envelope, opts: p.opts })));
  const found = await outcomes(
    queue,
    prepared.map((p, i) => ({ jobId: p.jobId, stampedAt: jobs[i]?.timestamp ?? -1 })),
  );
  return prepared.map((p, i) => {
    const idempotencyKey = boundedKey(p.key);
    return {
      jobId: p.jobId,
      key: p.key,
      idempotencyKey,
      ...(found[i] ?? { added: false, state: 'unknown' as const }),
      ...(recorded ? { intent: recorded.has(idempotencyKey) ? ('recorded' as const) : ('existing' as const) } : {}),
    };
  });
}
