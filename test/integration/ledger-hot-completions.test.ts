/**
 * A batch of fresh claims completed right after (as a batch of fast jobs does): the completions
 * are HOT updates, their new versions on the claimed rows' pages (migration 0016), and the claim
 * stores the lease owner, job id and queue once, in its entry of the record of transitions, a job id derived
 * from the key as a marker, read back whole.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { boundedKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import { listRecords } from '../../src/ledger/list-records.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { findStaleLocks } from '../../src/ledger/stale-locks.js';
import { jobIdFor } from '../../src/operation/enqueue.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('ledger_hot');
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const OPERATION = 'hot.op';
const keyOf = (i: number): IdempotencyKey => ({ namespace: 'acme/hot', resourceKey: `r-${i}`, version: 'v1' });

/** A worker's claim of key `i`: owner, the job id the library's jobs carry, queue. */
const claim = (i: number, jobId = jobIdFor(keyOf(i)), leaseMs = 60_000) =>
  ledger.claim({
    key: keyOf(i),
    operation: OPERATION,
    fingerprint: fingerprint(OPERATION, { i }),
    leaseMs,
    retentionMs: 3_600_000,
    downstream: 'idempotent',
    owner: 'host-1:4242',
    jobId,
    queue: 'hot-queue',
  });

/** The table's update counters, once every connection of the ledger's pool has reported them. */
async function updates(): Promise<{ upd: number; hot: number }> {
  const pool = ledger.pool;
  const clients = await Promise.all(Array.from({ length: Math.max(1, pool.totalCount) }, () => pool.connect()));
  try {
    await Promise.all(clients.map((c) => c.query('select pg_stat_force_next_flush()')));
  } finally {
    for (const c of clients) c.release();
  }
  const res = await t.query<{ upd: string; hot: string }>(
    `select n_tup_upd as upd, n_tup_hot_upd as hot from pg_stat_user_tables where schemaname = $1 and relname = 'idempotency_ledger'`,
    [t.schema],
  );
  return { upd: Number(res.rows[0]?.upd), hot: Number(res.rows[0]?.hot) };
}

describe('fresh jobs in the ledger', () => {
  it('completions of a batch of fresh claims are HOT updates', async () => {
    const n = 400;
    const before = await updates();
    const claims = await Promise.all(Array.from({ length: n }, (_, i) => claim(i)));
    expect(claims.every((c) => c.kind === 'acquired')).toBe(true);
    // A result of a sealed result's size (about 200 B stored).
    await Promise.all(
      claims.map((c, i) =>
        c.kind === 'acquired' ? ledger.complete(c.key, c.epoch, { $sealed: `bqs1.k1.${'x'.repeat(160)}${i}` }) : null,
      ),
    );
    const after = await updates();
    expect(after.upd - before.upd).toBe(n);
    // At fillfactor 90 about one in ten was.
    expect(after.hot - before.hot).toBeGreaterThanOrEqual(0.95 * n);
  });

  it('a fresh claim stores its lease owner, job id and queue once, read back whole', async () => {
    const derived = 1_000;
    const other = 1_001;
    await claim(derived, undefined, 1);
    await claim(other, 'job-7', 1);
    const rows = await t.query<{
      key: string;
      lease_owner: string | null;
      job_id: string | null;
      queue: string | null;
      transitions: string;
    }>(
      `select key, lease_owner, job_id, queue, transitions from ${t.schema}.idempotency_ledger where key = any($1) order by key`,
      [[boundedKey(keyOf(derived)), boundedKey(keyOf(other))]],
    );
    for (const r of rows.rows) {
      expect(r.lease_owner).toBeNull();
      expect(r.job_id).toBeNull();
      expect(r.queue).toBeNull();
    }
    const stored = new Map(rows.rows.map((r) => [r.key, r.transitions]));
    expect(stored.get(boundedKey(keyOf(derived)))).toMatch(/"j":1,/);
    expect(stored.get(boundedKey(keyOf(derived)))).not.toContain(jobIdFor(keyOf(derived)));
    expect(stored.get(boundedKey(keyOf(other)))).toMatch(/"j":"job-7",/);

    const record = await ledger.get(keyOf(derived));
    expect(record?.jobId).toBe(jobIdFor(keyOf(derived)));
    expect(record?.queue).toBe('hot-queue');
    expect(record?.leaseOwner).toBe('host-1:4242');
    expect(record?.transitions?.[0]?.jobId).toBe(jobIdFor(keyOf(derived)));
    expect((await ledger.get(keyOf(other)))?.jobId).toBe('job-7');

    const listed = await listRecords(ledger.pool, t.schema, { status: 'locked', limit: 10 });
    const byKey = new Map(listed.map((r) => [r.key, r]));
    expect(byKey.get(boundedKey(keyOf(derived)))).toMatchObject({
      jobId: jobIdFor(keyOf(derived)),
      queue: 'hot-queue',
    });
    expect(byKey.get(boundedKey(keyOf(other)))).toMatchObject({ jobId: 'job-7', queue: 'hot-queue' });

    // Leases of 1 ms, expired long enough ago for the finder (minAgeMs 0: only twice the lease).
    await new Promise((r) => setTimeout(r, 50));
    const stale = await findStaleLocks(ledger.pool, t.schema, { batchSize: 10, minAgeMs: 0 });
    const staleByKey = new Map(stale.map((r) => [r.key, r]));
    expect(staleByKey.get(boundedKey(keyOf(derived)))).toMatchObject({
      jobId: jobIdFor(keyOf(derived)),
      queue: 'hot-queue',
    });
    expect(staleByKey.get(boundedKey(keyOf(other)))).toMatchObject({ jobId: 'job-7', queue: 'hot-queue' });
  });
});
