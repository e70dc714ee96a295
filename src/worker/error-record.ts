import { IdempotencyError } from '../errors/idempotency-error.js';
import type { RecordedError } from '../ledger/types.js';

/** A processor's terminal error as a library error, so BullMQ's failedReason starts with a code. */
export function asIdempotencyError(err: unknown, error: RecordedError): IdempotencyError {
  if (err instanceof IdempotencyError) return err;
  return new IdempotencyError('IDEMPOTENCY_RECORDED_FAILURE', `${error.code}: ${error.message}`, { error });
}
