import type { Job } from 'bullmq';
import { IdempotencyConfigError } from '../errors/errors.js';
import { unrecoverable } from '../sealing/bullmq-errors.js';
import type { Logger } from '../shared/logger.js';

/** What the refusal says: a code a program matches, and how to pass the token on. */
function refusal(operation: string, jobId: string | undefined): IdempotencyConfigError {
  return new IdempotencyConfigError(
    `${operation}: the processor was called without the token BullMQ gives each job. A Worker calls it ` +
      'with (job, token, signal); a NestJS WorkerHost must pass all three on: assign it ' +
      '(this.process = idem.processor(...)) or write process(job, token, signal) { return this.charge(job, token, signal); }',
    { option: 'token', operation, ...(jobId === undefined ? {} : { jobId }) },
  );
}

/**
 * `processor` refusing a call without BullMQ's token, before anything runs. Without it, a job
 * whose operation runs elsewhere cannot wait (it is moved with the token), so duplicates would
 * fail with `IDEMPOTENCY_IN_PROGRESS`, and the lease could not watch the job's lock: a
 * `process(job)` that passes on the job alone fails its first job at once with
 * `IDEMPOTENCY_CONFIG` (option `token`), not retried. Three declared parameters, as
 * `processor`'s: BullMQ passes its signal to a processor of three. The first refusal is logged
 * at `error`.
 */
export function tokenRequired<R>(
  operation: string,
  processor: (job: Job, token?: string, signal?: AbortSignal) => Promise<R>,
  logger?: Logger,
): (job: Job, token?: string, signal?: AbortSignal) => Promise<R> {
  let told = false;
  return function idempotentProcessor(job: Job, token?: string, signal?: AbortSignal): Promise<R> {
    if (typeof token === 'string' && token !== '') return processor(job, token, signal);
    const err = refusal(operation, job?.id);
    if (!told) {
      told = true;
      try {
        logger?.error({ code: err.code, option: 'token', operation, jobId: job?.id }, err.message);
      } catch {
        // a logger that throws must not change the refusal
      }
    }
    return Promise.reject(unrecoverable(err));
  };
}
