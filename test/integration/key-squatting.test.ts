import { afterAll, beforeAll, expect, it } from 'vitest';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { jobIdFor } from '../../src/operation/enqueue.js';
import { ENVELOPE_FIELD } from '../../src/operation/envelope.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { orderOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

/**
 * A job names its operation and carries its key. A job of operation X that carries a key of
 * operation Y's namespace (or another policy version) would claim and complete Y's key, and Y's
 * own first job would then be refused as a conflict: the key must belong to the operation.
 */
const t = new TestContext('key-squatting');
const b = bull(t);
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

it("a job of one operation carrying another operation's key is refused before any claim", async () => {
  const payments = orderOperation('payments.refund', { namespace: 'acme/payments.refund' });
  const squatter = orderOperation('notes.add', { namespace: 'acme/notes.add' });
  const q = b.queue('squat');
  const runs: string[] = [];
  const w = b.worker(
    'squat',
    async (job, token, signal) => {
      const op = job.name === payments.name ? payments : squatter;
      return withIdempotency(
        op,
        async (input) => {
          runs.push(`${op.name}:${input.order}`);
          return { ok: true };
        },
        { ledger, keyring: testKeyring },
      )(job, token, signal);
    },
    { concurrency: 1 },
  );

  // The squatter's job names its own operation but carries the refund's key (and, second, the
  // right namespace with another version).
  const victimKey = payments.keyFor({ order: 'o-1' });
  const envelope = (key: object) => ({
    [ENVELOPE_FIELD]: { v: 1, operation: squatter.name, key },
    input: { order: 'o-1' },
  });
  await q.add(squatter.name, envelope(victimKey), { jobId: 'squat-1' });
  await q.add(squatter.name, envelope({ ...squatter.keyFor({ order: 'o-1' }), version: 'v0' }), { jobId: 'squat-2' });
  for (const id of ['squat-1', 'squat-2']) {
    const s = await settled(q, id);
    expect(s.state).toBe('failed');
    expect(s.failedReason).toMatch(/^IDEMPOTENCY_INVALID_INPUT.*key/);
  }
  expect(await ledger.get(victimKey)).toBeNull();

  // The refund's own job then runs, once, as the first claim of its key.
  const r = await payments.enqueue(q, { order: 'o-1' });
  expect((await settled(q, jobIdFor(r.key))).state).toBe('completed');
  expect(runs).toEqual(['payments.refund:o-1']);
  expect((await ledger.get(victimKey))?.status).toBe('completed');
  await w.close();
  await q.close();
});
