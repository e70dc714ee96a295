import { IdempotencyConflictError, RecordedFailureError, UnknownOutcomeError } from '../errors/errors.js';
import { RetryableError, TerminalError } from '../errors/processor-errors.js';
import type { Downstream } from '../ledger/types.js';
import { bullmqSignal } from '../sealing/bullmq-signals.js';

/**
 * What a processor error means for the ledger:
 * - `wait`: BullMQ's own control flow (delayed, waiting, rate limited): release, rethrow as is;
 * - `terminal`: failed for good, nothing committed: record the failure, fail without retries;
 * - `retryable`: nothing committed, or the downstream dedupes by our key: release, BullMQ retries;
 * - `reconcile`: ask the reconcile hook what happened;
 * - `unknown`: the effect may have committed and cannot be checked: no unattended retry.
 */
export type ErrorClass = 'wait' | 'terminal' | 'retryable' | 'reconcile' | 'unknown';

export function classifyError(err: unknown, downstream: Downstream): ErrorClass {
  const signal = bullmqSignal(err);
  if (signal === 'wait') return 'wait';
  if (signal === 'unrecoverable' || err instanceof TerminalError) return 'terminal';
  if (err instanceof IdempotencyConflictError || err instanceof RecordedFailureError) return 'terminal';
  if (err instanceof UnknownOutcomeError) return 'unknown';
  if (err instanceof RetryableError) return 'retryable';
  if (downstream === 'idempotent') return 'retryable';
  return downstream === 'reconcile' ? 'reconcile' : 'unknown';
}
