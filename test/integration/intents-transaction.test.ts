/**
 * The transactional outbox: an intent recorded in the caller's own transaction runs only if that
 * transaction commits, and only after the commit. Counted downstream (commits), in the ledger
 * (rows), in the intents table and in BullMQ (the job under the key's id).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kyselyFor } from '../../src/db/connection.js';
import type { Idempotency } from '../../src/runtime/create-idempotency.js';
import { postEffect } from '../../src/testing/client.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/commit-counter.js';
import { chargeOperation } from '../fixtures/operations.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testRuntime } from '../helpers/runtime.js';

const t = new TestContext('intents_tx');
const charge = chargeOperation({ queue: 'tx-charges' });
let idem: Idempotency;
let server: CommitCountingServer;

beforeAll(async () => {
  await t.setup();
  await t.query(`create table ${t.schema}.orders (id text primary key)`);
  server = await startCommitCounter();
  idem = testRuntime(t, {
    // Listens for commits; the poll is slow, so a job added at once after a commit is the listener's.
    intents: { relay: { everyMs: 60_000, recheckAfterMs: 100 } },
  });
  idem.worker(charge, async (input, ctx) => postEffect(server.url, input, ctx.idempotencyKey));
});
afterAll(async () => {
  await idem.close();
  await server.close();
  await t.teardown();
});

/** A promise and its resolve (Node 20 has no Promise.withResolvers). */
function deferred<T>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const intents = async (key: string) =>
  (await t.query(`select count(*)::int as n from ${t.schema}.idempotency_intents where key = $1`, [key])).rows[0]?.n;
const ledgerRow = async (key: string) =>
  (await t.query(`select status from ${t.schema}.idempotency_ledger where key = $1`, [key])).rows[0]?.status;

describe('an intent enqueued in the caller’s transaction', () => {
  it('never runs when the transaction rolls back: no row, no job, no commit', async () => {
    const client = await idem.pool.connect();
    let r: Awaited<ReturnType<Idempotency['enqueue']>>;
    try {
      await client.query('begin');
      await client.query(`insert into ${t.schema}.orders (id) values ('o-rolled-back')`);
      r = await idem.enqueue(charge, { order: 'o-rolled-back', amount: 100 }, { tx: client });
      await client.query('rollback');
    } finally {
      client.release();
    }
    expect(r).toMatchObject({ added: false, deferred: true, intent: 'recorded' });
    // Every relay there is, run again and again: nothing is there to relay.
    for (let i = 0; i < 3; i++) expect((await idem.relayIntents()).relayed).toBe(0);
    await sleep(500);
    expect(server.commits).toBe(0);
    expect(await intents(r.idempotencyKey)).toBe(0);
    expect(await ledgerRow(r.idempotencyKey)).toBeUndefined();
    expect(await idem.queue(charge).getJob(r.jobId)).toBeUndefined();
  });

  it.each(['pg client', 'kysely transaction'] as const)(
    'runs once when it commits (%s), and not before the commit',
    async (how) => {
      const order = `o-${how.replace(' ', '-')}`;
      const before = server.commits;
      const pool = t.pool(2);
      const db: Kysely<unknown> = kyselyFor(pool);
      const committed = deferred<void>();
      const enqueued = deferred<Awaited<ReturnType<Idempotency['enqueue']>>>();
      const txDone =
        how === 'pg client'
          ? (async () => {
              const client = await pool.connect();
              try {
                await client.query('begin');
                await client.query(`insert into ${t.schema}.orders (id) values ($1)`, [order]);
                enqueued.resolve(await idem.enqueue(charge, { order, amount: 100 }, { tx: client }));
                await committed.promise;
                await client.query('commit');
              } finally {
                client.release();
              }
            })()
          : db.transaction().execute(async (trx) => {
              await sql`insert into ${sql.table(`${t.schema}.orders`)} (id) values (${order})`.execute(trx);
              enqueued.resolve(await idem.enqueue(charge, { order, amount: 100 }, { tx: trx }));
              await committed.promise;
            });
      const r = await enqueued.promise;
      // Open transaction: a relay run finds nothing, no job exists, nothing runs.
      expect((await idem.relayIntents()).relayed).toBe(0);
      await sleep(500);
      expect(await idem.queue(charge).getJob(r.jobId)).toBeUndefined();
      expect(server.commits - before).toBe(0);
      committed.resolve(undefined);
      await txDone;
      // The listener hears the commit; the poll is a minute away.
      await waitFor(async () => (await ledgerRow(r.idempotencyKey)) === 'completed', `${order} completed`, 10_000);
      await sleep(300);
      expect(server.commits - before).toBe(1);
      expect(server.effects.filter((e) => e.idempotencyKey === r.idempotencyKey)).toHaveLength(1);
      // Claimed: the next relay run deletes the intent, the ledger holds the truth.
      await waitFor(async () => {
        await idem.relayIntents({ recheckAfterMs: 100 });
        return (await intents(r.idempotencyKey)) === 0;
      }, 'the intent deleted');
      await db.destroy();
      if (!pool.ended) await pool.end();
    },
  );
});
