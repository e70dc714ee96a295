import { boundedKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';

/**
 * A record whose last attempt's outcome is unknown (claimed, then marked unknown), for the
 * CLI's `resolve`. Returns the bounded key operators paste.
 */
export async function unknownRecord(ledger: PostgresLedger, key: IdempotencyKey, operation: string): Promise<string> {
  const c = await ledger.claim({
    key,
    operation,
    fingerprint: `fp-${key.resourceKey}`,
    leaseMs: 10_000,
    retentionMs: 3_600_000,
    downstream: 'none',
  });
  if (c.kind !== 'acquired') throw new Error(`seed ${key.resourceKey}: ${c.kind}`);
  await ledger.markUnknown(key, c.epoch, { code: 'TIMEOUT', message: 'no answer from the provider' });
  return boundedKey(key);
}
