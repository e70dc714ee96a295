import { DelayedError, type Job } from 'bullmq';
import type { IdentifierStorer } from '../audit/stored-identifier.js';
import { IdempotencyInProgressError } from '../errors/errors.js';
import type { Logger } from '../shared/logger.js';
import type { AttemptScope } from './attempt-scope.js';
import { type LedgerUnreachableError, ledgerBackoff } from './ledger-unreachable.js';

/**
 * How a job waits without using a BullMQ attempt: it is moved to the delayed set and the
 * processor throws BullMQ's `DelayedError`; its next attempt claims again. A job processed
 * without a token (BullMQ gave none) cannot be moved: it throws the reason instead, and BullMQ
 * retries it as it would any error.
 */
async function delay(job: Job, token: string, waitMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + waitMs, token);
  throw new DelayedError();
}

/**
 * Another attempt holds the lease of `scope`'s key (the operation's, or a step's): wait as a
 * delayed job, soon (the holder usually finishes well within its lease: `pollMs`), never later
 * than the moment its lease would lapse (`retryAfterMs`), with a little jitter.
 */
export function waitForHolder(scope: AttemptScope, retryAfterMs: number, pollMs: number): Promise<never> {
  if (!scope.token) throw new IdempotencyInProgressError({ key: scope.k, retryAfterMs });
  return delay(scope.job, scope.token, Math.max(25, Math.min(retryAfterMs, pollMs)) + Math.floor(Math.random() * 25));
}

/**
 * The ledger could not be asked (a claim, or a write the attempt could not land while it held
 * its lease): the job waits, by the process's backoff, and its next attempt asks the ledger
 * again: it replays, takes over or finds `unknown`, as after a crash.
 */
export function waitForLedger(
  job: Job,
  token: string,
  err: LedgerUnreachableError,
  logger: Logger | undefined,
  ids?: IdentifierStorer,
): Promise<never> {
  const waitMs = ledgerBackoff.next();
  logger?.warn(
    {
      jobId: job.id && ids ? ids('jobId', job.id) : job.id,
      what: err.what,
      code: (err.cause as { code?: unknown } | undefined)?.code,
      waitMs,
      consecutiveFailures: ledgerBackoff.consecutiveFailures,
    },
    'ledger unreachable: job delayed',
  );
  return delay(job, token, waitMs);
}
