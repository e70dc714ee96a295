/**
 * The row of a held claim disappears while its processor runs (a restore from backup, an
 * asynchronous standby promoted after the claim was acknowledged: here an SQL DELETE), then the
 * processor completes. A lost record is never "stale": for a `downstream: 'none'` operation the
 * key ends `unknown` with IDEMPOTENCY_RECORD_LOST and nothing runs again (retries, an operator's
 * retry, a duplicate job); for an idempotent downstream the retry goes through the same
 * downstream key, which dedupes it. Counted by a real HTTP downstream, with a real BullMQ worker.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { listRecords } from '../../src/ledger/list-records.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { Downstream } from '../../src/ledger/types.js';
import type { Operation } from '../../src/operation/operation.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { type ChargeInput, chargeOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('lost_record');
const b = bull(t);
let ledger: PostgresLedger;
/** Honours the Idempotency-Key header (a repeat replays); `plain` does not (every request commits). */
let ds: CommitCountingServer;
let plain: CommitCountingServer;
let events: WrapperEvent[] = [];

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  ds = await startCommitCounter();
  plain = await startCommitCounter({ honourIdempotencyKey: false });
});
afterAll(async () => {
  await ds.close();
  await plain.close();
  await ledger.close();
  await t.teardown();
});
afterEach(() => {
  ds.reset();
  plain.reset();
  events = [];
});

/** A worker charging through the counting downstream (the operation key sent as Idempotency-Key). */
function chargeWorker(name: string, downstream: Downstream, to: CommitCountingServer) {
  const op = chargeOperation({ downstream }) as unknown as Operation<never, { effectId: string }>;
  return b.worker(
    name,
    withIdempotency(
      op,
      async (input: ChargeInput, ctx: { idempotencyKey: string; signal: AbortSignal }) => {
        const res = await postEffect<{ id: string }>(
          to.url,
          { order: input.order, amount: input.amount },
          ctx.idempotencyKey,
          ctx.signal,
        );
        return { effectId: res.body.id };
      },
      { ledger, keyring: testKeyring, audit: { emit: (e: WrapperEvent) => void events.push(e) } },
    ),
  );
}

/** Runs one job whose claim's row is deleted while its downstream request is held; returns its key. */
async function runLosingTheRecord(name: string, order: string, to: CommitCountingServer) {
  const q = b.queue(name);
  const gate = to.holdNext();
  const job = await q.add(
    'charge',
    { order, amount: 700 },
    { attempts: 3, backoff: { type: 'fixed', delay: 50 }, removeOnFail: false },
  );
  await gate.reached;
  const deleted = await t.query<{ key: string }>(
    `delete from ${t.schema}.idempotency_ledger where key like $1 and status = 'locked' returning key`,
    [`%${order}%`],
  );
  expect(deleted.rows).toHaveLength(1);
  gate.release();
  return { q, jobId: job.id as string, key: (deleted.rows[0] as { key: string }).key };
}

describe('a held claim whose row is lost', () => {
  it("downstream 'none': one commit; the key ends unknown with IDEMPOTENCY_RECORD_LOST; no retry, operator retry or duplicate job runs it again", async () => {
    const lostBefore = ledger.metrics.lostRecords;
    const w = chargeWorker('none-q', 'none', plain);
    const { q, jobId, key } = await runLosingTheRecord('none-q', 'lost-none', plain);
    const first = await settled(q, jobId);
    expect(first.state).toBe('failed');
    expect(first.failedReason).toContain(ERROR_CODES.recordLost);
    expect(first.job.attemptsMade).toBe(1);
    // Written back: unknown at the epoch the attempt held, the transition in its record.
    const rec = await ledger.get(key);
    expect(rec).toMatchObject({ status: 'unknown', epoch: 1, lastTransition: 'record_lost' });
    expect(rec?.error?.code).toBe(ERROR_CODES.recordLost);
    expect(rec?.transitions?.map((x) => [x.transition, x.epoch])).toEqual([['record_lost', 1]]);
    // An operator's retry of the job and a duplicate job both meet unknown and do not run.
    await first.job.retry('failed');
    await waitFor(async () => (await q.getJob(jobId))?.finishedOn !== first.job.finishedOn, 'the retried job to end');
    expect((await settled(q, jobId)).state).toBe('failed');
    const dup = await q.add('charge', { order: 'lost-none', amount: 700 }, { attempts: 3 });
    const second = await settled(q, dup.id as string);
    expect(second.state).toBe('failed');
    expect(second.failedReason).toContain(ERROR_CODES.unknownOutcome);
    expect(plain.commitsFor({ order: 'lost-none' })).toBe(1);
    // Audited live as the unknown event of epoch 1, counted, and listed with its code.
    // (The later attempts' claims report the unknown they found, under the same event.)
    expect(events.find((e) => e.type === 'unknown' && e.key === key)).toMatchObject({
      decision: 'pending_confirmation',
      reasonCode: ERROR_CODES.recordLost,
      epoch: 1,
      attemptsMade: 0,
    });
    expect(ledger.metrics.lostRecords - lostBefore).toBe(1);
    const listed = await listRecords(ledger.pool, t.schema, { status: 'unknown', limit: 10 });
    expect(listed.filter((r) => r.key === key)).toMatchObject([{ errorCode: ERROR_CODES.recordLost, epoch: 1 }]);
    await w.close();
    await q.close();
  });

  it("downstream 'idempotent': the retry runs again through the same downstream key, which dedupes it: one commit", async () => {
    const lostBefore = ledger.metrics.lostRecords;
    const w = chargeWorker('idem-q', 'idempotent', ds);
    const { q, jobId, key } = await runLosingTheRecord('idem-q', 'lost-idem', ds);
    const done = await settled(q, jobId);
    expect(done.state).toBe('completed');
    expect(done.job.attemptsMade).toBe(2);
    // Two requests with one key, one commit: the retry's result is the first commit's.
    const effects = ds.effectsFor({ order: 'lost-idem' });
    expect(effects).toHaveLength(1);
    expect(ds.requests).toBe(2);
    expect(unseal(done.returnvalue, testKeyring)).toEqual({ effectId: effects[0]?.id });
    expect(await ledger.get(key)).toMatchObject({ status: 'completed', epoch: 1 });
    // Reported as a lost record (not a stale completion of another attempt), and counted.
    expect(events.filter((e) => e.type === 'stale_completion' && e.key === key)).toMatchObject([
      { decision: 'deny', reasonCode: ERROR_CODES.recordLost, epoch: 1 },
    ]);
    expect(ledger.metrics.lostRecords - lostBefore).toBe(1);
    await w.close();
    await q.close();
  });
});
