/**
 * Accepted intents survive a Redis that loses its data. N intents are recorded (the
 * operation-level helper, `{ durable: { pool } }`) and their jobs added, no worker running; then
 * every Redis key under this file's prefix is deleted (never the shared Redis as a whole). After
 * the relay runs, every intent completes exactly once: N commits downstream, N keys completed,
 * the intents table empty once the relay has seen the claims.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { relayIntents } from '../../src/ops/intent-relay.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { postEffect } from '../../src/testing/client.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/commit-counter.js';
import { testOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { wipePrefix } from '../helpers/intents.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('intents_wipe');
/** A charge whose card number is declared sensitive: sealed in the job, and so in the intent. */
const charge = testOperation({
  name: 'wipe.charge',
  queue: 'wipe-charges',
  input: z.object({ order: z.string(), amount: z.number().int().positive(), card: z.string() }),
  effect: (i) => ({ order: i.order, amount: i.amount }),
  resourceKey: (i) => `order:${i.order}`,
  sensitiveInput: ['card'],
});
const CARD = '4242424242424242';
const N = 40;
let idem: Idempotency;
let server: CommitCountingServer;

beforeAll(async () => {
  await t.setup();
  server = await startCommitCounter();
  idem = testRuntime(t);
});
afterAll(async () => {
  await idem.close();
  await server.close();
  await t.teardown();
});

describe('intents accepted, then Redis loses every job', () => {
  it('the relay adds them again and each completes exactly once', async () => {
    const queue = new Queue(idem.queueName(charge), { connection: idem.connection, prefix: idem.prefix });
    let closed = false;
    t.track(
      'queue',
      () => closed,
      () => queue.close(),
    );
    const results = [];
    for (let i = 0; i < N; i++) {
      results.push(
        await charge.enqueue(
          queue,
          { order: `w-${i}`, amount: 10 + i, card: CARD },
          // graceMs 0: the relay may look at once (the producer's own add is done by then here).
          { keyring: idem.keyring, durable: { pool: idem.pool, schema: t.schema, graceMs: 0 } },
        ),
      );
    }
    expect(results.filter((r) => r.added && r.intent === 'recorded')).toHaveLength(N);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(N);
    // The intents hold the envelope as BullMQ carries it: the card sealed, never in clear.
    const stored = await t.query(`select data::text as d from ${t.schema}.idempotency_intents`);
    expect(stored.rows).toHaveLength(N);
    expect(stored.rows.filter((r) => r.d.includes(CARD))).toHaveLength(0);

    expect(await wipePrefix(t)).toBeGreaterThan(N);
    expect((await queue.getJobCounts('waiting')).waiting).toBe(0);

    const relayed = await relayIntents({
      pool: idem.pool,
      schema: t.schema,
      queue: (n) => idem.queue(n),
      recheckAfterMs: 0,
    });
    expect(relayed).toMatchObject({ readded: N, relayed: 0, claimed: 0 });
    expect((await queue.getJobCounts('waiting')).waiting).toBe(N);

    idem.worker(charge, async (input, ctx) => postEffect(server.url, input, ctx.idempotencyKey), { concurrency: 8 });
    const keys = results.map((r) => r.idempotencyKey);
    await waitFor(
      async () =>
        (
          await t.query(
            `select count(*)::int as n from ${t.schema}.idempotency_ledger where key = any($1) and status = 'completed'`,
            [keys],
          )
        ).rows[0]?.n === N,
      `${N} keys completed`,
    );
    expect(server.commits).toBe(N);
    expect(new Set(server.effects.map((e) => e.idempotencyKey)).size).toBe(N);
    // The claims seen, the intents go: the ledger holds the truth now.
    const after = await relayIntents({ pool: idem.pool, schema: t.schema, queue: (n) => idem.queue(n) });
    expect(after.claimed).toBe(N);
    expect((await t.query(`select count(*)::int as n from ${t.schema}.idempotency_intents`)).rows[0]?.n).toBe(0);
    await queue.close();
    closed = true;
  });
});
