import { IdempotencyConfigError } from '../errors/errors.js';
import { formatDuration } from './duration.js';

/** The BullMQ job options that decide how late a retry can come. */
export type RetryJobOptions = {
  attempts?: number;
  backoff?: number | { type: string; delay?: number; jitter?: number };
  delay?: number;
};

/** The worker settings that decide stall redeliveries. BullMQ's defaults apply to what is left out. */
export type WorkerTiming = {
  /** @defaultValue 30000 (BullMQ's default) */
  lockDuration?: number;
  /** @defaultValue 30000 (BullMQ's default) */
  stalledInterval?: number;
  /** @defaultValue 1 (BullMQ's default) */
  maxStalledCount?: number;
};

export type RetryWindowOptions = {
  /** Longest delay a custom backoff strategy can return, required when one is used. */
  customBackoffMaxMs?: number;
  /** How long after an attempt an operator may re-run the job (job.retry, queue.retryJobs). */
  operatorReplayMs?: number;
  /** Longest wait for a confirmation (`ctx.confirm`'s timeout): the job may run again that much later. */
  confirmationTimeoutMs?: number;
};

export const BULLMQ_DEFAULTS = { lockDuration: 30_000, stalledInterval: 30_000, maxStalledCount: 1 } as const;

/**
 * The longest time from the first attempt to the last one BullMQ may still start for a job:
 * its initial delay, every backoff (at its maximum: jitter only shortens), every stall
 * redelivery (a lock expiring, then a stalled check), the operator replay window and the longest
 * wait for a confirmation.
 * Retention shorter than this lets a permitted late retry find no record and run again.
 */
export function retryWindowMs(job: RetryJobOptions, worker: WorkerTiming = {}, opts: RetryWindowOptions = {}): number {
  const attempts = Math.max(1, Math.floor(job.attempts ?? 1));
  const lock = worker.lockDuration ?? BULLMQ_DEFAULTS.lockDuration;
  const stalled = worker.stalledInterval ?? BULLMQ_DEFAULTS.stalledInterval;
  const stalls = Math.max(0, worker.maxStalledCount ?? BULLMQ_DEFAULTS.maxStalledCount);
  let total = Math.max(0, job.delay ?? 0);
  const backoff = typeof job.backoff === 'number' ? { type: 'fixed', delay: job.backoff } : job.backoff;
  for (let made = 1; made < attempts && backoff; made++) {
    const delay = backoff.delay ?? 0;
    if (backoff.type === 'fixed') total += delay;
    else if (backoff.type === 'exponential') total += Math.round(2 ** (made - 1) * delay);
    else if (opts.customBackoffMaxMs !== undefined) total += opts.customBackoffMaxMs;
    else {
      throw new IdempotencyConfigError(
        `Backoff strategy '${backoff.type}' is custom: declare its longest delay as customBackoffMaxMs so the retry window can be computed`,
        { option: 'customBackoffMaxMs' },
      );
    }
  }
  // Each stall redelivery waits for the lock to expire and for the next stalled check.
  total += stalls * (lock + stalled);
  total += Math.max(0, opts.operatorReplayMs ?? 0);
  total += Math.max(0, opts.confirmationTimeoutMs ?? 0);
  return total;
}

/** Refuses a retention shorter than the retry window, naming both durations. */
export function assertRetentionCovers(operation: string, retentionMs: number, windowMs: number): void {
  if (retentionMs < windowMs) {
    throw new IdempotencyConfigError(
      `Operation ${operation}: retention ${formatDuration(retentionMs)} (${retentionMs} ms) is shorter than its longest retry path ${formatDuration(windowMs)} (${windowMs} ms); a late retry would find no record and run the side effect again. Raise retention or shorten attempts/backoff/delay`,
      { option: 'retention', retentionMs, retryWindowMs: windowMs },
    );
  }
}
