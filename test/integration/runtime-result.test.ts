import { afterAll, beforeAll, expect, it } from 'vitest';
import { JobFailedError, ResultTimeoutError } from '../../src/errors/errors.js';
import { TerminalError } from '../../src/errors/processor-errors.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext } from '../helpers/context.js';
import { testRuntime } from '../helpers/runtime.js';

/** `idem.result()`: a program that enqueues gets the processor's own value, or a coded failure. */
const t = new TestContext('runtime_result');
let idem: Idempotency;

beforeAll(async () => {
  idem = testRuntime(t);
  await idem.migrate();
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

it('returns the result exactly as returned (BullMQ holds it sealed); a failed job throws its code', async () => {
  const charge = chargeOperation({ queue: 'result-charges', publicResult: [] });
  const paused = chargeOperation({ queue: 'result-paused' });
  idem.worker(charge, async (input) => {
    if (input.amount > 1000) throw new TerminalError('CARD_DECLINED', 'declined');
    return { chargeId: `ch_${input.order}`, at: new Date(0), receipt: 'r-secret' };
  });
  const ok = await idem.enqueue(charge, { order: 'o-1', amount: 5 });
  const result = await idem.result(charge, ok.jobId);
  expect(result).toEqual({ chargeId: 'ch_o-1', at: new Date(0), receipt: 'r-secret' });
  expect(JSON.stringify((await idem.queue(charge).getJob(ok.jobId))?.returnvalue)).not.toContain('r-secret');

  const declined = await idem.enqueue(charge, { order: 'o-2', amount: 5000 });
  const err = await idem.result(charge, declined.jobId).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(JobFailedError);
  expect(err).toMatchObject({ code: 'IDEMPOTENCY_JOB_FAILED', details: { jobId: declined.jobId } });
  expect((err as JobFailedError).details.reasonCode).toMatch(/^[A-Z_]+$/);

  // No worker on this queue: the job waits, and result() gives up when told.
  const waiting = await idem.enqueue(paused, { order: 'o-3', amount: 5 });
  const late = await idem.result(paused, waiting.jobId, { timeoutMs: 200 }).catch((e: unknown) => e);
  expect(late).toBeInstanceOf(ResultTimeoutError);
  expect(late).toMatchObject({ details: { state: 'waiting', timeoutMs: 200 } });
});
