import { RecordedFailureError } from '../errors/errors.js';
import { IdempotencyError } from '../errors/idempotency-error.js';
import type { RecordedError } from '../ledger/types.js';

/**
 * A processor's terminal error as a library error, so BullMQ's failedReason starts with a code:
 * the {@link RecordedFailureError} every later attempt of the key meets too (same class, same
 * code on the first attempt and on a replay). The library's own errors stay as they are.
 */
export function asRecordedFailure(err: unknown, key: string, error: RecordedError): IdempotencyError {
  if (err instanceof IdempotencyError) return err;
  return new RecordedFailureError({ key, error });
}
