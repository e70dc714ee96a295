/**
 * A key whose resource part is not an identifier's shape (a number of ten digits, say) is stored
 * in its audit events as its keyed ref, while the ledger keeps the key itself:
 * the task's timeline still names the key's final state, found through the task's ledger rows.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('timeline_key_refs');
let idem: Idempotency;

beforeAll(async () => {
  await t.setup();
  idem = testRuntime(t, { audit: { writer: true } });
  await idem.migrate();
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

describe('the timeline of a task whose keys are stored as refs in its events', () => {
  it('names each key and its final state', async () => {
    const charge = chargeOperation({ queue: 'refs' });
    idem.worker(charge, async (input) => ({ chargeId: `ch_${input.amount}` }));
    const taskId = 'task-refs-1';
    // Ten digits in a row (a phone number's, a national id's shape): not an identifier's.
    const orders = ['4202812707', '5550123456'];
    const jobs = await Promise.all(
      orders.map((order, i) => idem.enqueue(charge, { order, amount: i + 1 }, { taskId })),
    );
    const keys = jobs.map((j) => j.idempotencyKey);
    for (const j of jobs)
      await waitFor(
        async () => (await idem.queue(charge).getJobState(j.jobId)) === 'completed',
        `${j.jobId} completed`,
      );
    // The events are there, about the keys' refs, not the keys.
    await waitFor(async () => {
      const r = await t.query<{ n: number }>(
        `select count(*)::int as n from ${t.schema}.audit_events where action = 'idempotency.completed' and task_id = $1`,
        [taskId],
      );
      return r.rows[0]?.n === keys.length;
    }, 'the completions in the trail');
    const stored = await t.query<{ resource_id: string }>(
      `select distinct resource_id from ${t.schema}.audit_events where task_id = $1 and resource_type = 'idempotency_key'`,
      [taskId],
    );
    for (const k of keys) expect(stored.rows.map((r) => r.resource_id)).not.toContain(k);
    expect(stored.rows.length).toBe(keys.length);

    const story = await idem.timeline(taskId);
    expect(story.finalStates.map((f) => f.key).sort()).toEqual([...keys].sort());
    for (const f of story.finalStates) expect(f.status).toBe('completed');
  });
});
