/**
 * What a dashboard (bull-board, Taskforce, `queue.getJobs(['failed'])`) shows of a failed job is
 * what BullMQ stored: `failedReason` and `stacktrace`, read back here as a dashboard reads them
 * (`Job.toJSON()` of the failed list). Each attempt that failed reads as its code, its class and
 * the public message the processor chose (or the sealed marker), never the error's text.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetryableError, TerminalError } from '../../src/errors/processor-errors.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { testRuntime } from '../helpers/runtime.js';
import { plaintextFound } from '../helpers/stores.js';

const t = new TestContext('failed_view');
let idem: Idempotency;

beforeAll(async () => {
  idem = testRuntime(t);
  await idem.migrate();
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

describe("a failed job as a dashboard shows it (BullMQ's failedReason and stacktrace)", () => {
  it('code and public message readable; the sealed marker for the rest; no plaintext of the errors', async () => {
    const secret = {
      declined: `card 4111-${randomBytes(6).toString('hex')} of jo@example.org`,
      timeout: `token=sk_live_${randomBytes(12).toString('hex')}`,
      plain: `password ${randomBytes(8).toString('hex')}`,
    };
    const charge = chargeOperation({ queue: 'view-charges' });
    idem.worker(charge, async (input) => {
      if (input.order === 'V-1')
        throw new TerminalError('CARD_DECLINED', `declined: ${secret.declined}`, {
          publicMessage: 'the card was declined',
        });
      if (input.order === 'V-2')
        throw new RetryableError(`gateway timeout, ${secret.timeout}`, {
          code: 'GATEWAY_TIMEOUT',
          publicMessage: 'the gateway timed out',
        });
      throw new Error(`unexpected: ${secret.plain}`);
    });
    const q = idem.queue(charge);
    const declined = await idem.enqueue(charge, { order: 'V-1', amount: 5 });
    const timedOut = await idem.enqueue(charge, { order: 'V-2', amount: 5 });
    const plain = await idem.enqueue(charge, { order: 'V-3', amount: 5 });
    // A copy of the declined charge (a producer unaware of keys): it replays the recorded failure.
    const copy = (await q.add('charge', { order: 'V-1', amount: 5 })).id as string;
    const ids = [declined.jobId, timedOut.jobId, plain.jobId, copy];
    for (const id of ids) expect((await settled(q, id, 30_000)).state).toBe('failed');

    // As a dashboard lists them.
    const shown = new Map((await q.getJobs(['failed'])).map((j) => [j.id as string, j.toJSON()]));
    const reason = (id: string) => shown.get(id)?.failedReason ?? '';
    const key = (order: string) => `acme%2Fpayments.charge:order%3A${order}:v1`;
    const open = (order: string) =>
      `; open it with BQI_KEYRING set: npx bullmq-idempotency inspect '${key(order)}' --decrypt --reason '<why>'`;
    // A terminal failure is recorded: the job, and every copy of it, fails with the recorded code.
    const recorded = `IDEMPOTENCY_RECORDED_FAILURE: Operation ${key('V-1')} failed with CARD_DECLINED: the card was declined`;
    expect(reason(declined.jobId)).toBe(recorded + open('V-1'));
    expect(reason(copy)).toBe(recorded + open('V-1'));
    expect(reason(timedOut.jobId)).toBe(`GATEWAY_TIMEOUT (RetryableError): the gateway timed out${open('V-2')}`);
    expect(reason(plain.jobId)).toMatch(/^Error: sealed message, \d+ bytes; open it with /);
    // The code is the text before the first space or colon: what a dashboard's search can match.
    expect(ids.map((id) => /^[A-Za-z_]+/.exec(reason(id))?.[0])).toEqual([
      'IDEMPOTENCY_RECORDED_FAILURE',
      'GATEWAY_TIMEOUT',
      'Error',
      'IDEMPOTENCY_RECORDED_FAILURE',
    ]);
    // Nothing of the errors' text in what the dashboard gets: reasons, stack traces, the whole job.
    expect(plaintextFound(JSON.stringify([...shown.values()]), Object.values(secret))).toEqual([]);
    for (const id of ids) expect(shown.get(id)?.stacktrace?.length, id).toBeGreaterThan(0);
  });
});
