import { IdempotencyError } from '../errors/idempotency-error.js';
import type { RecordedError } from '../ledger/types.js';
import type { RedactionPolicy } from '../redaction/define-policy.js';
import { redactString } from '../redaction/redact-string.js';
import { bullmqSignal } from './bullmq-signals.js';

/** A processor's terminal error as a library error, so BullMQ's failedReason starts with a code. */
export function asIdempotencyError(err: unknown, error: RecordedError): IdempotencyError {
  if (err instanceof IdempotencyError) return err;
  return new IdempotencyError('IDEMPOTENCY_RECORDED_FAILURE', `${error.code}: ${error.message}`, { error });
}

/** A thrown value as the ledger records it: a code and a scrubbed, bounded message, never a stack. */
export function toRecordedError(err: unknown, policy: RedactionPolicy): RecordedError {
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return {
      code: typeof code === 'string' && code ? code.slice(0, 100) : err.name || 'Error',
      message: redactString(err.message, policy),
      name: err.name,
    };
  }
  return { code: 'NON_ERROR_THROWN', message: redactString(String(err), policy) };
}

/**
 * Scrubs an error's message and stack in place (and its causes'), except BullMQ's control-flow
 * errors, which BullMQ recognises by name or message and which carry no user data.
 */
export function scrubError(err: unknown, policy: RedactionPolicy, depth = 0): unknown {
  if (!(err instanceof Error) || bullmqSignal(err) === 'wait' || depth > 3) return err;
  err.message = redactString(err.message, policy);
  if (err.stack) err.stack = redactString(err.stack, policy);
  if (err.cause !== undefined) scrubError(err.cause, policy, depth + 1);
  return err;
}
