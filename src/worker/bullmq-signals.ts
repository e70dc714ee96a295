import { RATE_LIMIT_ERROR, UnrecoverableError } from 'bullmq';
import type { IdempotencyError } from '../errors/idempotency-error.js';

const SIGNAL_NAMES = new Set(['DelayedError', 'WaitingError', 'WaitingChildrenError']);

/** BullMQ's control-flow errors: recognised by class, name or message, so never wrapped. */
export function bullmqSignal(err: unknown): 'unrecoverable' | 'wait' | null {
  if (!(err instanceof Error)) return null;
  if (err instanceof UnrecoverableError || err.name === 'UnrecoverableError') return 'unrecoverable';
  if (SIGNAL_NAMES.has(err.name) || err.message === RATE_LIMIT_ERROR || err.name === 'RateLimitError') return 'wait';
  return null;
}

/**
 * Fails the job now, without retries. The message starts with the stable code so BullMQ's
 * `failedReason` shows it; `code`, `details` and `cause` stay on the error for programs.
 */
export function unrecoverable(err: IdempotencyError): UnrecoverableError {
  const u = new UnrecoverableError(`${err.code}: ${err.message}`);
  Object.assign(u, { code: err.code, details: err.details, cause: err });
  return u;
}
