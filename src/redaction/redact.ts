import type { RedactionPolicy } from './define-policy.js';
import { engineOf } from './policy-engine.js';
import { ReceiptBuilder, type RedactionReceipt } from './receipt.js';
import { Walker } from './walker.js';

/** Options of {@link redact}. */
export type RedactOptions = {
  /**
   * Root of the JSON paths in the receipt, e.g. `$.details` when the value is an event's details.
   * @defaultValue '$'
   */
  rootPath?: string;
};

/** A redacted value and what was done to it. */
export type RedactionResult<T = unknown> = { value: T; receipt: RedactionReceipt };

/**
 * Redacts a value (any JSON, or objects with Dates, Errors, Buffers, Maps...) with a policy:
 * field classes by key name and path, then value scanners over every remaining string.
 * Never throws on JSON input; idempotent (redacting the result again changes nothing); returns
 * the very same object when nothing needed redaction.
 *
 * @example
 * const { value, receipt } = redact({ user: { email: 'jane@example.com' }, apiKey: 'sk_live_…' }, policy);
 * // value: { user: { email: 'j***@example.com' } }
 * // receipt: { policyVersion, rules: ['field.pii', 'field.secret'], paths: ['$.user.email', '$.apiKey'], counts, keyIds }
 */
export function redact(value: unknown, policy: RedactionPolicy, options: RedactOptions = {}): RedactionResult {
  const engine = engineOf(policy);
  const receipt = new ReceiptBuilder(engine.version, options.rootPath ?? '$', engine.limits.maxReceiptPaths);
  const walker = new Walker(engine, receipt);
  const out = walker.walk(value, 0);
  return { value: out, receipt: receipt.build() };
}
