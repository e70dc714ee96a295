import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import type { IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { ClaimOptions, ClaimOutcome } from '../../src/ledger/types.js';

/** The claim of `resourceKey` under `acme/pay` (a 30 s lease, a minute's retention), its input `input`. */
export function payClaim(resourceKey: string, over: Partial<ClaimOptions> = {}, input: unknown = 1): ClaimOptions {
  const key: IdempotencyKey = { namespace: 'acme/pay', resourceKey, version: 'v1' };
  return {
    key,
    operation: 'pay',
    fingerprint: fingerprint('pay', { input }),
    leaseMs: 30_000,
    retentionMs: 60_000,
    downstream: 'idempotent',
    ...over,
  };
}

/** Claims, and fails unless the claim acquired the lease. */
export async function acquireClaim(
  ledger: PostgresLedger,
  options: ClaimOptions,
): Promise<Extract<ClaimOutcome, { kind: 'acquired' }>> {
  const c = await ledger.claim(options);
  if (c.kind !== 'acquired') throw new Error(`expected acquired, got ${c.kind}`);
  return c;
}
