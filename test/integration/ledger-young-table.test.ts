/**
 * A new ledger table grows under named statements whose plans were made while it was nearly
 * empty: once it has grown, the ledger has it analyzed, and its claims, replays and completions
 * read the table by its primary key instead of whole (see src/db/statistics-refresh.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATISTICS_CHECKS_AT } from '../../src/db/statistics-refresh.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import type { IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { rowEstimate, tableScans } from '../helpers/table-stats.js';

const t = new TestContext('ledger_young');
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  // One connection: every statement runs on the session whose cached plans are under test.
  ledger = t.ledger({ poolSize: 1 });
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const keyOf = (i: number): IdempotencyKey => ({ namespace: 'acme/young', resourceKey: `r-${i}`, version: 'v1' });
const fp = fingerprint('young.op', { a: 1 });

const claim = (i: number) =>
  ledger.claim({
    key: keyOf(i),
    operation: 'young.op',
    fingerprint: fp,
    leaseMs: 30_000,
    retentionMs: 3_600_000,
    downstream: 'idempotent',
  });

async function pair(i: number): Promise<void> {
  const c = await claim(i);
  if (c.kind !== 'acquired') throw new Error(`claim ${i}: ${c.kind}`);
  await ledger.complete(c.key, c.epoch, { i });
}

/** Runs `n` operations 50 at a time (the ledger batches them). */
async function many(from: number, n: number, op: (i: number) => Promise<void>): Promise<void> {
  for (let at = from; at < from + n; at += 50) {
    await Promise.all(Array.from({ length: Math.min(50, from + n - at) }, (_, j) => op(at + j)));
  }
}

const scans = () => tableScans(t, ledger.pool, 'idempotency_ledger');

describe('a young ledger table', () => {
  it('once it has grown past the checks, claims, replays and completions no longer read it whole', async () => {
    // Plans made on a nearly empty table: five custom plans, then the cached generic one.
    for (let i = 0; i < 8; i++) await pair(i);
    // Grown past the check at 10,000 rows: the ledger analyzed its table at each check up to it.
    const checks = STATISTICS_CHECKS_AT.filter((at) => at <= 10_000);
    const grown = checks.at(-1)! + 500;
    await many(8, grown, pair);
    await waitFor(
      async () => ledger.metrics.tablesAnalyzed >= checks.length,
      `the ledger analyzed its table at ${checks.join(', ')} rows`,
      30_000,
    );
    expect(await rowEstimate(t, 'idempotency_ledger')).toBeGreaterThanOrEqual(checks.at(-1)!);

    const before = await scans();
    // Replays (the read), fresh claims (the insert) and their completions, in batches.
    await many(0, 500, async (i) => {
      const c = await claim(i);
      if (c.kind !== 'completed') throw new Error(`replay ${i}: ${c.kind}`);
    });
    await many(grown + 8, 500, pair);
    const after = await scans();
    expect(after.idx - before.idx).toBeGreaterThan(0);
    expect(after.seq - before.seq).toBe(0);
  }, 120_000);
});
