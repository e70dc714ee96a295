import { boundedKey, MAX_BOUNDED_KEY_LENGTH, parseCanonicalKey } from '../keys/idempotency-key.js';
import { usageError } from './errors.js';

/**
 * A key as operators paste it: the bounded key (the ledger's primary key, `ctx.idempotencyKey`).
 * A canonical key longer than the bounded form is bounded here, so either can be pasted.
 */
export function normalizeKey(text: string): string {
  const key = text.trim();
  if (key.length === 0) throw usageError('the key must not be empty');
  if (key.length <= MAX_BOUNDED_KEY_LENGTH) return key;
  try {
    return boundedKey(parseCanonicalKey(key));
  } catch (err) {
    throw usageError(
      `a key longer than ${MAX_BOUNDED_KEY_LENGTH} characters must be a canonical key (${(err as Error).message})`,
    );
  }
}
