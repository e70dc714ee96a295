import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testRuntime } from '../helpers/runtime.js';

/**
 * The runtime's operator actions are the library's own (invalidateKey, resolveKey, rerun,
 * timeline), given the runtime's ledger, store, queues and keyring: an invalidated key re-run
 * through the runtime runs its processor exactly once more, and its story tells the operator's
 * decision; a resolved unknown replays a result sealed with the runtime's keyring.
 */
const t = new TestContext('runtime_operator');
let idem: Idempotency;

beforeAll(async () => {
  await t.setup();
  idem = testRuntime(t, {
    audit: { writer: true },
  });
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

describe('operator actions through the runtime', () => {
  it('invalidate then rerun runs the processor once more; the story tells who and why', async () => {
    const charge = chargeOperation();
    let commits = 0;
    idem.worker(charge, async (input) => {
      commits++;
      return { chargeId: `ch_${input.order}` };
    });
    const job = await idem.enqueue(charge, { order: 'o-9', amount: 300 }, { taskId: 'task-9' });
    await waitFor(async () => (await idem.inspect(job.idempotencyKey))?.status === 'completed', 'the first run');

    const invalidated = await idem.invalidate(job.idempotencyKey, { actor: 'alice', reason: 'refund issued twice' });
    const rerun = await idem.rerun(job.idempotencyKey);

    expect(invalidated).toMatchObject({ previousStatus: 'completed', stored: true });
    expect(rerun).toEqual({ kind: 'retried', jobId: job.jobId, from: 'completed' });
    await waitFor(async () => (await idem.inspect(job.idempotencyKey))?.epoch === 2, 'the second run');
    await waitFor(async () => (await idem.inspect(job.idempotencyKey))?.status === 'completed', 'its completion');
    expect(commits).toBe(2);
    const story = await idem.timeline('task-9');
    const byAlice = story.events.filter((e) => e.actorType === 'user');
    expect(byAlice.map((e) => [e.action, e.actorId])).toEqual([['idempotency.invalidated', 'alice']]);
  });

  it('resolve settles an unknown outcome with a result sealed by the keyring', async () => {
    const key = { namespace: 'acme/payments.charge', resourceKey: 'order:o-10', version: 'v1' };
    const claim = await idem.ledger.claim({
      key,
      operation: 'payments.charge',
      fingerprint: 'fp',
      leaseMs: 5_000,
      retentionMs: 3_600_000,
      downstream: 'none',
    });
    if (claim.kind !== 'acquired') throw new Error(claim.kind);
    await idem.ledger.markUnknown(key, claim.epoch, { code: 'LEASE_EXPIRED', message: 'no answer' });

    await idem.resolve(
      claim.key,
      { committed: true, result: { chargeId: 'ch_10' } },
      { actor: 'bob', reason: 'found it' },
    );

    const record = await idem.inspect(claim.key);
    expect(record?.status).toBe('completed');
    expect(unseal(record?.result as SealedResult<{ chargeId: string }>, idem.keyring)).toEqual({ chargeId: 'ch_10' });
    expect(await idem.confirmations.list({ pending: true })).toEqual([]);
  });
});
