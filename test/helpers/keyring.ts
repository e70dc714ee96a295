import { defineKeyring } from '../../src/sealing/keyring.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';

/**
 * The tests' keyring. Fixed bytes, so a worker in a child process seals and opens with the same
 * keys as the test that reads its records; generated once from a CSPRNG, used nowhere else.
 */
export const TEST_KEYRING_SPEC = 't1:base64:9mJq1c2xv0yH8cKkQeVbq3yJ1tTzq2m8rVf3a6W7nYc=';

export const testKeyring = defineKeyring({
  keys: [{ id: 't1', secret: 'base64:9mJq1c2xv0yH8cKkQeVbq3yJ1tTzq2m8rVf3a6W7nYc=' }],
});

/** A ledger record with its sealed result opened, for assertions on what was recorded. */
export function withOpenedResult<T extends { result: unknown } | null>(record: T): T {
  if (!record || record.result === null || record.result === undefined) return record;
  return { ...record, result: unseal(record.result as SealedResult<unknown>, testKeyring) };
}
