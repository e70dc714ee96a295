import type { RedactionPolicy } from './define-policy.js';
import type { RedactErrorOptions, RedactedError } from './error-shape.js';
import { engineOf } from './policy-engine.js';
import { ReceiptBuilder } from './receipt.js';
import { Walker } from './walker.js';

/**
 * The scrubbed form of anything thrown: `{ name, code?, message, stack?, cause? }`, with the
 * message, stack and causes run through the value scanners. A thrown non-error object goes
 * through the field classes first. The result is plain JSON, fit for the ledger's error column,
 * BullMQ's `failedReason` and logs.
 *
 * @example
 * redactError(new Error('connect postgres://app:hunter2@db/prod failed'), policy).message
 * // 'connect postgres://app:[redacted:url_credentials]@db/prod failed'
 */
export function redactError(err: unknown, policy: RedactionPolicy, options: RedactErrorOptions = {}): RedactedError {
  const engine = engineOf(policy);
  const walker = new Walker(engine, new ReceiptBuilder(engine.version, '$', 0));
  return walker.error(err, options);
}
