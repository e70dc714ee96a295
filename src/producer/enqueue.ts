import type { JobsOptions, Queue } from 'bullmq';
import { IdempotencyConfigError } from '../errors/errors.js';
import { sha256 } from '../fingerprint/sha256.js';
import { boundedKey, type IdempotencyKey } from '../keys/idempotency-key.js';
import type { Operation } from '../operation/define-operation.js';
import { ENVELOPE_FIELD, type JobEnvelope } from '../operation/envelope.js';
import { assertRetentionCovers, retryWindowMs, type WorkerTiming } from '../operation/retry-window.js';
import type { Keyring } from '../sealing/keyring.js';
import { sealInput } from '../sealing/sealed-input.js';

export type EnqueueOptions = {
  /** The intended operation's identity, e.g. `task:42`; defaults to the operation's `resourceKey(input)`. */
  resourceKey?: string;
  /** BullMQ job options; `jobId` is derived from the key and may not be set. */
  jobOptions?: Omit<JobsOptions, 'jobId'>;
  /** Task the operation belongs to, for the audit timeline. */
  taskId?: string;
  /** The workers' timing, to check retention against stall redeliveries. @defaultValue BullMQ's defaults */
  worker?: WorkerTiming;
  /** Seals the operation's `sensitiveInput` fields; required when it declares any. */
  keyring?: Keyring;
};

export type EnqueueResult = { jobId: string; key: IdempotencyKey; idempotencyKey: string };

/**
 * The BullMQ job id of a key: `idem_` and the base64url SHA-256 of the bounded key. Stable,
 * never all digits and free of `:`, so duplicate adds are absorbed while the job is kept.
 */
export function jobIdFor(key: IdempotencyKey): string {
  return `idem_${sha256(boundedKey(key), 'base64url')}`;
}

function prepare<I>(op: Operation, queue: Queue, input: I, options: EnqueueOptions = {}) {
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
    input: sealInput(op, parsed, options.keyring),
  };
  const jobId = jobIdFor(key);
  return { key, jobId, envelope, opts: { ...options.jobOptions, jobId } };
}

export async function enqueue<I>(
  op: Operation,
  queue: Queue,
  input: I,
  options?: EnqueueOptions,
): Promise<EnqueueResult> {
  const p = prepare(op, queue, input, options);
  await queue.add(op.name, p.envelope, p.opts);
  return { jobId: p.jobId, key: p.key, idempotencyKey: boundedKey(p.key) };
}

export async function enqueueBulk<I>(
  op: Operation,
  queue: Queue,
  items: { input: I; options?: EnqueueOptions }[],
): Promise<EnqueueResult[]> {
  const prepared = items.map((it) => prepare(op, queue, it.input, it.options));
  await queue.addBulk(prepared.map((p) => ({ name: op.name, data: p.envelope, opts: p.opts })));
  return prepared.map((p) => ({ jobId: p.jobId, key: p.key, idempotencyKey: boundedKey(p.key) }));
}
