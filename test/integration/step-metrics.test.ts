import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { createIdempotencyMetrics } from '../../src/observability/metrics.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

/**
 * Metric labels are bounded: the operation's declared name, never a step's name (one step per
 * recipient would be one series per recipient, and the recipients' content in the exposition).
 */
const t = new TestContext('step-metrics');
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

it('steps named after their data add no series: 40 recipients, one operation label', async () => {
  const registry = new Registry();
  const notify = testOperation({
    name: 'notify.all',
    input: z.object({ batch: z.string(), to: z.array(z.string()) }),
    effect: (i) => i,
    resourceKey: (i) => `batch:${i.batch}`,
  });
  const to = Array.from({ length: 40 }, (_, i) => `person${i}@example.com`);
  const queue = b.queue('step-metrics');
  const worker = b.worker(
    'step-metrics',
    withIdempotency(
      notify,
      async (input, ctx) => {
        for (const r of input.to) await ctx.step(`send:${r}`, async () => ({ sent: true }));
        return { sent: input.to.length };
      },
      { ledger, keyring: testKeyring, observer: createIdempotencyMetrics({ registry }) },
    ),
  );
  const { jobId } = await notify.enqueue(queue, { batch: 'b1', to });
  expect((await settled(queue, jobId)).state).toBe('completed');
  await worker.close();
  await queue.close();

  const exposition = await registry.metrics();
  expect(exposition).not.toContain('@example.com');
  expect(exposition).not.toContain('send:');
  const operations = new Set([...exposition.matchAll(/operation="([^"]*)"/g)].map((m) => m[1]));
  expect([...operations]).toEqual(['notify.all']);
  // The steps are still counted, under their operation: 40 step claims and the operation's.
  expect(exposition).toMatch(/bullmq_idempotency_claims_total\{operation="notify\.all",outcome="acquired"\} 41/);
});
