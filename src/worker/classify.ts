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
  try {
    return classifyKnown(err) ?? byDownstream(downstream);
  } catch {
    // A Proxy or a prototype that throws when asked what it is: an error like any other.
    return byDownstream(downstream);
  }
}

/** The class an error's own kind decides, or null when the operation's downstream mode does. */
function classifyKnown(err: unknown): ErrorClass | null {
  const signal = bullmqSignal(err);
  if (signal === 'wait') return 'wait';
  if (signal === 'unrecoverable' || err instanceof TerminalError) return 'terminal';
  if (err instanceof IdempotencyConflictError || err instanceof RecordedFailureError) return 'terminal';
  if (err instanceof UnknownOutcomeError) return 'unknown';
  if (err instanceof RetryableError) return 'retryable';
  return null;
}

function byDownstream(downstream: Downstream): ErrorClass {
  if (downstream === 'idempotent') return 'retryable';
  return downstream === 'reconcile' ? 'reconcile' : 'unknown';
}
