import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { type SealedResult, unseal } from '../../src/sealing/sealed-result.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testRuntime } from '../helpers/runtime.js';

/**
 * A result an operator resolves is recorded as the operation's own completion records one: checked
 * by its result schema (a refusal records nothing) and sealed with its `publicResult` fields in
 * clear, so a duplicate job of the resolved key replays exactly what a normal completion's replay
 * returns. Real Postgres, Redis and BullMQ workers.
 */
const t = new TestContext('runtime_resolve_result');
let idem: Idempotency;
/** A runtime for operator actions only: it built no worker, so it knows no operation by itself. */
let bare: Idempotency;

type Charge = { chargeId: string; card: string };
const charge = chargeOperation<Charge, ['chargeId']>({
  downstream: 'none',
  result: z.object({ chargeId: z.string().startsWith('ch_'), card: z.string() }),
  publicResult: ['chargeId'],
});
let runs = 0;

const runtime = () =>
  testRuntime(t, {
    audit: { writer: true },
  });

beforeAll(async () => {
  await t.setup();
  idem = runtime();
  bare = runtime();
  idem.worker(charge, async (input) => {
    runs++;
    // An order starting with `u-` loses its answer: the downstream cannot tell, the key becomes unknown.
    if (input.order.startsWith('u-')) throw new Error('connection reset after the request was sent');
    return { chargeId: `ch_${input.order}`, card: `4242-${input.order}` };
  });
});
afterAll(async () => {
  await bare.close();
  await idem.close();
  await t.teardown();
});

/** A job of `order` that ends with its key unknown. */
async function unknownKey(order: string) {
  const job = await idem.enqueue(charge, { order, amount: 100 });
  await waitFor(async () => (await idem.inspect(job.idempotencyKey))?.status === 'unknown', `${order} unknown`);
  return job;
}

/** Runs a duplicate job of a key whose first job has finished: the old job is removed, the same input enqueued. */
async function duplicate(jobId: string, order: string): Promise<unknown> {
  await (await idem.queue(charge).getJob(jobId))?.remove();
  const again = await idem.enqueue(charge, { order, amount: 100 });
  expect(again.added).toBe(true);
  await idem.result(charge, again.jobId);
  return (await idem.queue(charge).getJob(again.jobId))?.returnvalue;
}

const by = { actor: 'bob', reason: 'found in the provider dashboard' };

describe('idem.resolve with the operation known', () => {
  it('refuses a result its schema refuses, through a registered or a given operation, and records nothing', async () => {
    const job = await unknownKey('u-1');
    const before = await idem.inspect(job.idempotencyKey);
    const bad = { chargeId: 'not-a-charge', card: '4242' };

    const registered = await idem.resolve(job.idempotencyKey, { committed: true, result: bad }, by).catch((e) => e);
    const given = await bare
      .resolve(job.idempotencyKey, { committed: true, result: bad, operation: charge }, by)
      .catch((e) => e);
    const other = await bare
      .resolve(
        job.idempotencyKey,
        { committed: true, result: { chargeId: 'ch_1', card: 'x' }, operation: { ...charge, name: 'payments.refund' } },
        by,
      )
      .catch((e) => e);

    for (const err of [registered, given, other]) expect(err?.code).toBe('IDEMPOTENCY_INVALID_INPUT');
    expect(JSON.stringify(registered.details)).not.toContain('not-a-charge');
    const after = await idem.inspect(job.idempotencyKey);
    expect(after).toEqual(before);
    expect(after?.status).toBe('unknown');
    expect(after?.result ?? null).toBeNull();
  });

  it('a resolved key replays what a normal completion replays: public fields in clear, the rest sealed', async () => {
    const done = await idem.enqueue(charge, { order: 'c-2', amount: 100 });
    expect(await idem.result(charge, done.jobId)).toEqual({ chargeId: 'ch_c-2', card: '4242-c-2' });
    const lost = await unknownKey('u-2');
    const lostByGiven = await unknownKey('u-3');

    await idem.resolve(lost.idempotencyKey, { committed: true, result: { chargeId: 'ch_u-2', card: '4242-u-2' } }, by);
    await bare.resolve(
      lostByGiven.idempotencyKey,
      { committed: true, result: { chargeId: 'ch_u-3', card: '4242-u-3' }, operation: charge },
      by,
    );
    const runsBefore = runs;

    const completed = (await idem.inspect(done.idempotencyKey))?.result as Record<string, unknown>;
    const resolved = (await idem.inspect(lost.idempotencyKey))?.result as Record<string, unknown>;
    const resolvedByGiven = (await idem.inspect(lostByGiven.idempotencyKey))?.result as Record<string, unknown>;
    // The stored shapes are the same: the public field in clear, the whole value sealed.
    expect(Object.keys(completed).sort()).toEqual(['$sealed', 'chargeId']);
    expect(Object.keys(resolved).sort()).toEqual(Object.keys(completed).sort());
    expect(Object.keys(resolvedByGiven).sort()).toEqual(Object.keys(completed).sort());
    expect(resolved.chargeId).toBe('ch_u-2');
    expect(JSON.stringify(resolved)).not.toContain('4242-u-2');

    const replays = {
      completed: await duplicate(done.jobId, 'c-2'),
      resolved: await duplicate(lost.jobId, 'u-2'),
      resolvedByGiven: await duplicate(lostByGiven.jobId, 'u-3'),
    };
    expect(runs).toBe(runsBefore);
    expect(replays.completed).toEqual(completed);
    expect(replays.resolved).toEqual(resolved);
    expect(replays.resolvedByGiven).toEqual(resolvedByGiven);
    const open = (v: unknown, key: string) =>
      unseal(v as SealedResult<Charge, 'chargeId'>, idem.keyring, { operation: charge.name, key });
    expect(open(replays.resolved, lost.idempotencyKey)).toEqual({ chargeId: 'ch_u-2', card: '4242-u-2' });
    expect(open(replays.completed, done.idempotencyKey)).toEqual({ chargeId: 'ch_c-2', card: '4242-c-2' });
    expect((replays.resolved as Record<string, unknown>).chargeId).toBe('ch_u-2');
  });
});
