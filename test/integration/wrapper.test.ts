import type { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RetryableError, TerminalError } from '../../src/errors/processor-errors.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineOperation } from '../../src/operation/define-operation.js';
import { jobIdFor } from '../../src/operation/enqueue.js';
import type { Operation } from '../../src/operation/operation.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { type ChargeInput, chargeInput, chargeOperation, testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('wrapper');
const b = bull(t);
let ledger: PostgresLedger;
let ds: CommitCountingServer;
let qn = 0;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  ds = await startCommitCounter();
});
afterAll(async () => {
  await ds.close();
  await ledger.close();
  await t.teardown();
});
afterEach(() => ds.reset());

const inputSchema = chargeInput;
type Input = ChargeInput;

function op(downstream: 'idempotent' | 'none' | 'reconcile' = 'idempotent') {
  return chargeOperation({ downstream }) as unknown as Operation<typeof inputSchema, { effectId: string }>;
}

/** The processor under test: one HTTP commit per call, the operation key sent downstream. */
function charge(url: () => string) {
  return async (input: Input, ctx: { idempotencyKey: string; signal: AbortSignal }) => {
    const res = await postEffect<{ id: string }>(
      url(),
      { order: input.order, amount: input.amount },
      ctx.idempotencyKey,
      ctx.signal,
    );
    if (res.status >= 500) throw new RetryableError(`downstream ${res.status}`);
    return { effectId: res.body.id };
  };
}

/** Waits for an operator re-run of a finished job to finish again. */
async function rerun(q: Queue, jobId: string, finishedBefore: number | undefined) {
  await waitFor(async () => {
    const j = await q.getJob(jobId);
    return j?.finishedOn !== undefined && j.finishedOn !== finishedBefore;
  }, 'the re-run to finish');
  return settled(q, jobId);
}

function names() {
  qn++;
  return `q${qn}`;
}

/** A new queue and a worker running `charge` against the shared downstream, wrapped for `o`. */
function chargeWorker(
  o: ReturnType<typeof op>,
  options: Parameters<typeof withIdempotency>[2] = { ledger, keyring: testKeyring },
) {
  const name = names();
  return {
    name,
    q: b.queue(name),
    w: b.worker(
      name,
      withIdempotency(
        o,
        charge(() => ds.url),
        options,
      ),
    ),
  };
}

describe('withIdempotency', () => {
  it('declares three parameters so BullMQ passes its AbortSignal', () => {
    const p = withIdempotency(
      op(),
      charge(() => ds.url),
      { ledger, keyring: testKeyring },
    );
    expect(p.length).toBe(3);
  });

  it('two simultaneous jobs with one key: one commit, both end with the same result', async () => {
    const name = names();
    const q = b.queue(name);
    const slow = await startCommitCounter({ delayMs: 200, honourIdempotencyKey: false });
    try {
      const o = op();
      const w = b.worker(
        name,
        withIdempotency(
          o,
          charge(() => slow.url),
          { ledger, keyring: testKeyring },
        ),
        { concurrency: 2 },
      );
      // Plain adds (not the producer helper): two job ids, one intended operation.
      const [j1, j2] = await Promise.all([
        q.add('charge', { order: 'o-1', amount: 500 }),
        q.add('charge', { order: 'o-1', amount: 500, traceId: 'retry-from-client' }),
      ]);
      const r1 = await settled(q, j1.id as string);
      const r2 = await settled(q, j2.id as string);
      expect(slow.commits).toBe(1);
      expect(r1.state).toBe('completed');
      expect(r2.state).toBe('completed');
      expect(r1.returnvalue).toEqual(r2.returnvalue);
      await w.close();
    } finally {
      await slow.close();
      await q.close();
    }
  });

  it('50 jobs with one key across 3 workers: exactly one commit', async () => {
    const name = names();
    const q = b.queue(name);
    const plain = await startCommitCounter({ honourIdempotencyKey: false, delayMs: 50 });
    try {
      const o = op();
      const workers = [1, 2, 3].map(() =>
        b.worker(
          name,
          withIdempotency(
            o,
            charge(() => plain.url),
            { ledger, keyring: testKeyring },
          ),
          { concurrency: 10 },
        ),
      );
      const jobs = await q.addBulk(
        Array.from({ length: 50 }, (_, i) => ({
          name: 'charge',
          data: { order: 'o-50', amount: 7, traceId: `t${i}` },
        })),
      );
      const results = await Promise.all(jobs.map((j) => settled(q, j.id as string, 30_000)));
      expect(plain.commits).toBe(1);
      expect(results.every((r) => r.state === 'completed')).toBe(true);
      expect(new Set(results.map((r) => JSON.stringify(r.returnvalue))).size).toBe(1);
      await Promise.all(workers.map((w) => w.close()));
    } finally {
      await plain.close();
      await q.close();
    }
  });

  it('lost response after commit: the retry reuses the key and recovers the original result (idempotent)', async () => {
    const events: WrapperEvent[] = [];
    const o = op('idempotent');
    const { q, w } = chargeWorker(o, { ledger, keyring: testKeyring, audit: { emit: (e) => events.push(e) } });
    ds.failNext('commit-then-drop');
    const { jobId } = await o.enqueue(
      q,
      { order: 'o-lost', amount: 100 },
      { jobOptions: { attempts: 3, backoff: 10 } },
    );
    const r = await settled(q, jobId);
    expect(r.state).toBe('completed');
    expect(ds.commits).toBe(1);
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ effectId: ds.effects[0]?.id });
    expect(r.job.attemptsMade).toBe(2); // the lost response, then the success
    expect(events.map((e) => e.type)).toEqual(['claimed', 'released', 'claimed', 'completed']);
    expect(events.filter((e) => e.type === 'claimed').map((e) => e.epoch)).toEqual([1, 2]);
    await w.close();
    await q.close();
  });

  it('lost response with downstream none: the record becomes unknown and nothing is retried', async () => {
    const o = op('none');
    const { q, w } = chargeWorker(o);
    ds.failNext('commit-then-drop');
    const { jobId, key } = await o.enqueue(
      q,
      { order: 'o-none', amount: 100 },
      { jobOptions: { attempts: 3, backoff: 10 } },
    );
    const r = await settled(q, jobId);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(/^IDEMPOTENCY_UNKNOWN_OUTCOME/);
    expect(ds.commits).toBe(1);
    expect((await ledger.get(key))?.status).toBe('unknown');
    // An operator re-run does not run it either.
    await r.job.retry('failed');
    const again = await rerun(q, jobId, r.job.finishedOn);
    expect(again.failedReason).toMatch(/^IDEMPOTENCY_UNKNOWN_OUTCOME/);
    expect(ds.commits).toBe(1);
    await w.close();
    await q.close();
  });

  it('same key with changed input fails before execution: zero commits for it', async () => {
    const o = op();
    const { q, w } = chargeWorker(o);
    const first = await q.add('charge', { order: 'o-chg', amount: 10 });
    expect((await settled(q, first.id as string)).state).toBe('completed');
    const changed = await q.add('charge', { order: 'o-chg', amount: 99 });
    const r = await settled(q, changed.id as string);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(/^IDEMPOTENCY_CONFLICT/);
    expect(r.job.attemptsMade).toBe(1); // unrecoverable: no retries
    expect(ds.commitsFor({ amount: 99 })).toBe(0);
    expect(ds.commits).toBe(1);
    await w.close();
    await q.close();
  });

  it('operator re-run of a completed job replays the recorded result; duplicate adds are absorbed', async () => {
    const o = op();
    const { q, w } = chargeWorker(o);
    const a = await o.enqueue(q, { order: 'o-rr', amount: 1 });
    const dup = await o.enqueue(q, { order: 'o-rr', amount: 1 });
    expect(dup.jobId).toBe(a.jobId);
    expect(a.jobId).toBe(jobIdFor(a.key));
    const r = await settled(q, a.jobId);
    await r.job.retry('completed');
    const again = await rerun(q, a.jobId, r.job.finishedOn);
    expect(again.returnvalue).toEqual(r.returnvalue);
    expect(ds.commits).toBe(1);
    await w.close();
    await q.close();
  });

  it('retention boundary: inside it a new job replays; past it the operation runs again', async () => {
    const o = op();
    const { name, q, w } = chargeWorker(o);
    const opts = { jobOptions: { removeOnComplete: true } };
    const a = await o.enqueue(q, { order: 'o-ret', amount: 3 }, opts);
    await waitFor(async () => (await ledger.get(a.key))?.status === 'completed', 'completion');
    await waitFor(async () => !(await q.getJob(a.jobId)), 'job removal');
    // Inside retention (59 min later): replay, no commit.
    const inside = t.ledger({ clockOffsetMs: 59 * 60_000 });
    const wi = b.worker(
      `${name}-inside`,
      withIdempotency(
        o,
        charge(() => ds.url),
        { ledger: inside, keyring: testKeyring },
      ),
    );
    const qi = b.queue(`${name}-inside`);
    const ri = await o.enqueue(qi, { order: 'o-ret', amount: 3 });
    expect((await settled(qi, ri.jobId)).state).toBe('completed');
    expect(ds.commits).toBe(1);
    // Past retention (61 min later): the record expired; the documented policy re-executes.
    const past = t.ledger({ clockOffsetMs: 61 * 60_000 });
    const wp = b.worker(
      `${name}-past`,
      withIdempotency(
        o,
        charge(() => ds.url),
        { ledger: past, keyring: testKeyring },
      ),
    );
    const qp = b.queue(`${name}-past`);
    const rp = await o.enqueue(qp, { order: 'o-ret', amount: 3 });
    expect((await settled(qp, rp.jobId)).state).toBe('completed');
    expect((await ledger.get(a.key))?.epoch).toBe(2);
    for (const c of [w, wi, wp]) await c.close();
    for (const c of [q, qi, qp]) await c.close();
    await inside.close();
    await past.close();
  });

  it('terminal errors are recorded and replayed; retryable errors release the key', async () => {
    const name = names();
    const q = b.queue(name);
    const o = op('none');
    let calls = 0;
    const w = b.worker(
      name,
      withIdempotency(
        o,
        async (input: Input) => {
          calls++;
          if (input.order === 'declined') throw new TerminalError('CARD_DECLINED', 'card declined');
          if (calls === 2) throw new RetryableError('rate limited before the call');
          return { effectId: 'x' };
        },
        { ledger, keyring: testKeyring },
      ),
    );
    const d = await q.add('charge', { order: 'declined', amount: 1 }, { attempts: 3 });
    const rd = await settled(q, d.id as string);
    // The code in clear, the processor's message sealed (its length only).
    expect(rd.failedReason).toMatch(
      /^IDEMPOTENCY_RECORDED_FAILURE: Operation \S+ failed with CARD_DECLINED: sealed message, 13 bytes; open it with BQI_KEYRING set: npx bullmq-idempotency inspect '\S+' --decrypt --reason '<why>'$/,
    );
    expect(rd.job.attemptsMade).toBe(1);
    const d2 = await q.add('charge', { order: 'declined', amount: 1 });
    expect((await settled(q, d2.id as string)).failedReason).toMatch(/^IDEMPOTENCY_RECORDED_FAILURE/);
    expect(calls).toBe(1);
    const ok = await q.add('charge', { order: 'fine', amount: 1 }, { attempts: 3, backoff: 10 });
    const rok = await settled(q, ok.id as string);
    expect(rok.state).toBe('completed');
    expect(calls).toBe(3);
    await w.close();
    await q.close();
  });
});

describe('bad input', () => {
  it('missing key, malformed data, schema failure and results that cannot be sealed fail unrecoverably; the worker keeps serving', async () => {
    const name = names();
    const q = b.queue(name);
    const events: WrapperEvent[] = [];
    const noKey = testOperation({
      name: 'payments.charge',
      input: inputSchema,
      effect: (i) => ({ order: i.order, amount: i.amount }),
    });
    let calls = 0;
    const w = b.worker(
      name,
      withIdempotency(
        noKey,
        async (input) => {
          calls++;
          if (input.order === 'fn') return { n: () => 1 } as unknown as { effectId: string };
          return { effectId: `ok-${input.order}` };
        },
        { ledger, keyring: testKeyring, audit: { emit: (e) => events.push(e) } },
      ),
    );
    const missing = await q.add('charge', { order: 'a', amount: 1 });
    const malformed = await q.add('charge', { __idempotency: { v: 2 }, input: {} });
    const invalid = await q.add('charge', { order: 'a', amount: -5 });
    const good = await noKey.enqueue(q, { order: 'good', amount: 1 }, { resourceKey: 'order:good' });
    const fn = await noKey.enqueue(q, { order: 'fn', amount: 1 }, { resourceKey: 'order:fn' });
    const rm = await settled(q, missing.id as string);
    expect(rm.failedReason).toMatch(/^IDEMPOTENCY_MISSING_KEY/);
    expect((await settled(q, malformed.id as string)).failedReason).toMatch(/^IDEMPOTENCY_INVALID_INPUT/);
    expect((await settled(q, invalid.id as string)).failedReason).toMatch(/^IDEMPOTENCY_INVALID_INPUT: .*amount/);
    expect(unseal((await settled(q, good.jobId)).returnvalue, testKeyring)).toEqual({ effectId: 'ok-good' });
    const rb = await settled(q, fn.jobId);
    expect(rb.failedReason).toMatch(/^IDEMPOTENCY_NOT_SERIALIZABLE/);
    expect(rb.job.attemptsMade).toBe(1);
    // The effect ran once and its result could not be recorded: never re-run unattended.
    expect((await ledger.get(fn.key))?.status).toBe('unknown');
    expect(calls).toBe(2); // only 'good' and 'fn' reached the processor
    expect(events.filter((e) => e.type === 'missing_key')).toHaveLength(1);
    expect(events.filter((e) => e.type === 'invalid_input')).toHaveLength(2);
    await w.close();
    await q.close();
  });

  it('refuses a retention shorter than the retry window, naming both durations', async () => {
    const short = defineOperation({
      name: 'x',
      namespace: 'acme/x',
      version: 'v1',
      input: inputSchema,
      effect: (i) => i.order,
      resourceKey: (i) => i.order,
      retention: '1m',
      lease: '5s',
      downstream: 'idempotent',
    });
    const q = b.queue(names());
    await expect(
      short.enqueue(
        q,
        { order: 'a', amount: 1 },
        { jobOptions: { attempts: 5, backoff: { type: 'exponential', delay: 10_000 } } },
      ),
    ).rejects.toThrow(/retention 1m \(60000 ms\) is shorter than its longest retry path 3m 30s \(210000 ms\)/);
    expect(() =>
      withIdempotency(short, async () => 1, { ledger, keyring: testKeyring, worker: { lockDuration: 4_000 } }),
    ).toThrow(/lease 5000 ms must be shorter than the worker's lockDuration 4000 ms/);
    await q.close();
  });
});
