/**
 * Several relays cooperate: two at once, each on its own pool and its own BullMQ connection, in
 * small batches, hand every committed intent to BullMQ once between them, and after Redis lost
 * the jobs (every key under this file's prefix deleted) add each again once between them. Counted
 * as jobs handed to `addBulk` by either relay, and as jobs in the queue.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RelayCounts, relayIntents } from '../../src/ops/intent-relay.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext } from '../helpers/context.js';
import { wipePrefix } from '../helpers/intents.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('intents_two_relays');
const charge = chargeOperation({ queue: 'relay-charges' });
const N = 300;
let idem: Idempotency;

beforeAll(async () => {
  await t.setup();
  idem = testRuntime(t);
});
afterAll(async () => {
  await idem.close();
  await t.teardown();
});

/** A relay with its own pool and queue, counting every job it hands to BullMQ. */
function relay() {
  const pool = t.pool(2);
  const queue = new Queue(idem.queueName(charge), { connection: idem.connection, prefix: idem.prefix });
  let added = 0;
  const addBulk = queue.addBulk.bind(queue);
  queue.addBulk = (jobs) => {
    added += jobs.length;
    return addBulk(jobs);
  };
  return {
    run: (): Promise<RelayCounts> =>
      relayIntents({ pool, schema: t.schema, queue: () => queue, batchSize: 10, recheckAfterMs: 0 }),
    added: () => added,
    close: async () => {
      await queue.close();
      await pool.end();
    },
  };
}

describe('two relays at once', () => {
  it('add each committed intent once, and each vanished job once', async () => {
    const client = await idem.pool.connect();
    try {
      await client.query('begin');
      await idem.enqueueBulk(
        charge,
        Array.from({ length: N }, (_, i) => ({ input: { order: `r-${i}`, amount: 5 }, options: { tx: client } })),
      );
      await client.query('commit');
    } finally {
      client.release();
    }
    const a = relay();
    const b = relay();
    const queue = idem.queue(charge);

    const [ra, rb] = await Promise.all([a.run(), b.run()]);
    expect(ra.relayed + rb.relayed).toBe(N);
    expect(a.added() + b.added()).toBe(N);
    // Both took part: SKIP LOCKED hands each batch to one relay.
    expect(Math.min(ra.relayed, rb.relayed)).toBeGreaterThan(0);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(N);

    await wipePrefix(t);
    const [wa, wb] = await Promise.all([a.run(), b.run()]);
    expect(wa.readded + wb.readded).toBe(N);
    expect(a.added() + b.added()).toBe(2 * N);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(N);
    const readds = await t.query(`select readds, count(*)::int as n from ${t.schema}.idempotency_intents group by 1`);
    expect(readds.rows).toEqual([{ readds: 1, n: N }]);

    await Promise.all([a.close(), b.close()]);
  });
});
