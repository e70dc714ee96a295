import type { JobState, JobsOptions } from 'bullmq';
import type pg from 'pg';
import type { IntentTx } from '../intents/executor.js';
import type { IdempotencyKey } from '../keys/idempotency-key.js';
import type { Keyring } from '../sealing/keyring.js';
import type { WorkerTiming } from './retry-window.js';

// What an operation's `enqueue` takes and returns; the producer (enqueue.ts, beside it) does the work.

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
  /**
   * Records the intent in Postgres (the library's `idempotency_intents` table) before BullMQ
   * holds a job for it, so that an intent accepted survives a Redis that loses its data: a relay
   * adds its job again until it is claimed (see docs/intents.md).
   * - `{ pool }`: recorded, then the job is added at once (an idempotent add: its id is the key's);
   * - `{ tx }`: recorded only, in the caller's transaction (a `pg` client inside `BEGIN`, or a
   *   kysely `Transaction`): the job is added by a relay after the commit, never before, and
   *   never for a transaction that rolls back.
   *
   * @example
   * await client.query('begin');
   * await client.query('insert into orders …');
   * await chargeOrder.enqueue(queue, input, { durable: { tx: client, schema: 'payments' } });
   * await client.query('commit');   // the relay adds the job now
   */
  durable?: DurableIntentOptions;
};

/** Where {@link EnqueueOptions.durable} records the intent: a pool (add at once) or the caller's transaction. */
export type DurableIntentOptions = ({ pool: pg.Pool; tx?: undefined } | { tx: IntentTx; pool?: undefined }) & {
  /** Schema of the library's tables. @defaultValue `'public'` */
  schema?: string;
  /**
   * With `pool`: how long the relay leaves the intent to this producer's own add before it looks.
   * @defaultValue 30 000
   */
  graceMs?: number;
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
  /**
   * With `durable`: `recorded` when this call recorded the intent, `existing` when the key's
   * intent was recorded already (and not yet claimed).
   */
  intent?: 'recorded' | 'existing';
  /**
   * True when the intent was recorded in the caller's transaction: no job was added (`added` is
   * false); a relay adds it after the commit.
   */
  deferred?: boolean;
};
