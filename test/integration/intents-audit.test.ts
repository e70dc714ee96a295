/**
 * An intent accepted and an intent re-added are facts of the audit trail: the runtime records
 * `idempotency.intent_accepted` for an intent recorded outside a transaction, the relay records it
 * for one committed in a transaction (never for one rolled back), and `idempotency.intent_readded`
 * when it adds a vanished job again. Read back from the stored trail, by task.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { wipePrefix } from '../helpers/intents.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('intents_audit');
const charge = chargeOperation({ queue: 'audit-charges' });
let idem: Idempotency;

beforeAll(async () => {
  await t.setup();
  idem = testRuntime(t, { audit: { writer: true, maxDelayMs: 10 } });
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

const actions = async (taskId: string) =>
  (await idem.timeline(taskId)).events.filter((e) => e.action.startsWith('idempotency.intent_')).map((e) => e.action);

describe('intent facts in the audit trail', () => {
  it('accepted (at once, or at the relay after a commit), re-added after Redis lost the job; nothing for a rollback', async () => {
    await idem.enqueue(charge, { order: 'a-1', amount: 1 }, { durable: true, taskId: 'task-now' });

    const client = await idem.pool.connect();
    try {
      await client.query('begin');
      await idem.enqueue(charge, { order: 'a-2', amount: 1 }, { tx: client, taskId: 'task-rolled-back' });
      await client.query('rollback');
      await client.query('begin');
      await idem.enqueue(charge, { order: 'a-3', amount: 1 }, { tx: client, taskId: 'task-committed' });
      await client.query('commit');
    } finally {
      client.release();
    }
    expect(await idem.relayIntents({ recheckAfterMs: 0 })).toMatchObject({ relayed: 1 });
    // Written to Postgres before Redis loses everything (the audit queue with it).
    await waitFor(async () => (await actions('task-committed')).length === 1, 'the committed intent accepted');
    await waitFor(async () => (await actions('task-now')).length === 1, 'the intent accepted at once');
    await wipePrefix(t);
    expect(await idem.relayIntents()).toMatchObject({ readded: 1 });

    await waitFor(async () => (await actions('task-committed')).length === 2, 'the committed intent’s two facts');
    expect(await actions('task-now')).toEqual(['idempotency.intent_accepted']);
    expect(await actions('task-committed')).toEqual(['idempotency.intent_accepted', 'idempotency.intent_readded']);
    expect(await actions('task-rolled-back')).toEqual([]);
  });
});
