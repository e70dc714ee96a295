import { isInfraError } from '../db/unreachable.js';

/**
 * Whether an error of the audit writer is transient, so that the batch is retried without
 * limit: the database could not be asked (`isInfraError`, the ledger's own judgement:
 * unreachable, connection terminated, too many connections, shutting down or starting up), or
 * it asked to be asked again (a serialisation failure, a deadlock, a lock not available, which
 * the batch's insert may simply repeat). Anything else keeps BullMQ's attempts and,
 * for data Postgres refuses, the dead-letter path.
 *
 * @example
 * isTransientError(Object.assign(new Error('sorry, too many clients already'), { code: '53300' })); // true
 */
export function isTransientError(err: unknown): boolean {
  if (isInfraError(err)) return true;
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && RETRY_SQLSTATES.has(code)) return true;
  }
  return false;
}

const RETRY_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available
  '53200', // out_of_memory
]);
