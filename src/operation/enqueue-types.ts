import type { JobState, JobsOptions } from 'bullmq';
import type { IdempotencyKey } from '../keys/idempotency-key.js';
import type { Keyring } from '../sealing/keyring.js';
import type { WorkerTiming } from './retry-window.js';

// What an operation's `enqueue` takes and returns; the producer (src/producer/enqueue.ts) does the work.

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

/**
 * The state of the job that absorbed an add: a BullMQ state, or `unknown` when the job was gone
 * by the time it was read back (it finished and was removed in between).
 */
export type AbsorbedState = JobState | 'unknown';

export type EnqueueResult = {
  jobId: string;
  key: IdempotencyKey;
  idempotencyKey: string;
  /**
   * True when this add created the job. False when BullMQ absorbed it because a job with the
   * same id (the same key) still exists: nothing new runs. After `invalidate`, re-run that job
   * with `rerun` instead.
   */
  added: boolean;
  /** With `added: false`, the state of the job that absorbed the add (e.g. `completed`). */
  state?: AbsorbedState;
};
