import type { JobState, Queue } from 'bullmq';
import type { IdempotencyKey } from '../keys/idempotency-key.js';
import { jobIdFor } from './enqueue.js';

export type RerunOptions = {
  /**
   * The job to re-run, when it was not enqueued by `enqueue()` (a job id of your own, as the
   * ledger record's `jobId` shows it).
   * @defaultValue `jobIdFor(key)`
   */
  jobId?: string;
};

/**
 * What {@link rerun} did with the job of a key:
 * - `retried`: the job had finished (`completed` or `failed`) and is back in the wait list with
 *   its attempts reset; a worker runs it once more;
 * - `pending`: the job has not finished (`waiting`, `delayed`, `active`…); it claims the key
 *   when it is processed, nothing was changed;
 * - `gone`: no such job (removed by `removeOnComplete`/`removeOnFail`); the next `enqueue()` of
 *   the key is added and runs.
 */
export type RerunOutcome =
  | { kind: 'retried'; jobId: string; from: 'completed' | 'failed' }
  | { kind: 'pending'; jobId: string; state: Exclude<JobState, 'completed' | 'failed'> }
  | { kind: 'gone'; jobId: string };

/**
 * Makes the job of a key run again, after the key was invalidated (`ledger.invalidate(key)` or
 * `bullmq-idempotency invalidate`). Without it the job id that `enqueue()` derives from the key
 * still names the old finished job, and BullMQ absorbs a new add of it (`added: false`). Call it
 * after the invalidation: a job retried before it replays the recorded result. `key` is the
 * key's parts or its bounded form (`ctx.idempotencyKey`).
 *
 * @example
 * await ledger.invalidate(key);
 * const r = await rerun(queue, key);   // { kind: 'retried', from: 'completed', … }
 * if (r.kind === 'gone') await chargeOrder.enqueue(queue, input);
 */
export async function rerun(
  queue: Queue,
  key: IdempotencyKey | string,
  options: RerunOptions = {},
): Promise<RerunOutcome> {
  const jobId = options.jobId ?? jobIdFor(key);
  const job = await queue.getJob(jobId);
  if (!job) return { kind: 'gone', jobId };
  const state = await job.getState();
  if (state === 'completed' || state === 'failed') {
    await job.retry(state, { resetAttemptsMade: true, resetAttemptsStarted: true });
    return { kind: 'retried', jobId, from: state };
  }
  if (state === 'unknown') return { kind: 'gone', jobId };
  return { kind: 'pending', jobId, state };
}
