import { RATE_LIMIT_ERROR, UnrecoverableError } from 'bullmq';
import type { IdempotencyError } from '../errors/idempotency-error.js';
import { publicMessageOf, sealedMarker } from './sealed-error.js';

// What of an error reaches BullMQ, and so Redis (failedReason, stacktrace): sealed or built from
// codes here, beside the sealing it relies on; the worker and ctx.confirm() both fail jobs this way.

const SIGNAL_NAMES = new Set(['DelayedError', 'WaitingError', 'WaitingChildrenError']);
/** Errors whose message and stack the library built for BullMQ: already fit for Redis. */
const SEALED_FOR_BULLMQ = new WeakSet<object>();

/** BullMQ's control-flow errors: recognised by class, name or message, so never wrapped. */
export function bullmqSignal(err: unknown): 'unrecoverable' | 'wait' | null {
  if (!(err instanceof Error)) return null;
  if (err instanceof UnrecoverableError || err.name === 'UnrecoverableError') return 'unrecoverable';
  if (SIGNAL_NAMES.has(err.name) || err.message === RATE_LIMIT_ERROR || err.name === 'RateLimitError') return 'wait';
  return null;
}

/**
 * Fails the job now, without retries. The message starts with the stable code so BullMQ's
 * `failedReason` shows it, followed by the error's public message (or the sealed marker for the
 * few library errors whose text quotes application data); `code`, `details` and `cause` stay on
 * the error for programs in this process.
 */
export function unrecoverable(err: IdempotencyError): UnrecoverableError {
  const u = new UnrecoverableError(`${err.code}: ${publicMessageOf(err) ?? sealedMarker(err.message)}`);
  Object.assign(u, { code: err.code, details: err.details, cause: err });
  SEALED_FOR_BULLMQ.add(u);
  return u;
}

/** True for an error {@link unrecoverable} made. */
export function isSealedForBullmq(err: unknown): boolean {
  return typeof err === 'object' && err !== null && SEALED_FOR_BULLMQ.has(err);
}
