import type { Job, Queue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { StaleEpochError } from '../../src/errors/errors.js';
import type { IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { originalError } from '../../src/sealing/original-error.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, type Effect, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { LeaseLostError } from '../../src/worker/lease-keeper.js';
import type { ProcessorContext, WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import {
  CRASH_TIMING,
  type CrashInput,
  type CrashWorker,
  type CrashWorkerConfig,
  chargeProcessor,
  crashOperation,
  spawnCrashWorker,
  txProcessor,
} from '../helpers/crash-worker.js';
import { testKeyring, withOpenedResult } from '../helpers/keyring.js';

const t = new TestContext('crash');
const b = bull(t);
/** Children connect under their own application_name: the file's leak check sees this process only. */
const childTag = `${t.tag}_child`;
const childDatabaseUrl = (() => {
  const u = new URL(inject('databaseUrl'));
  u.searchParams.set('application_name', childTag);
  return u.toString();
})();
const effectsTable = `${t.schema}.effects`;
const { leaseMs, lockDuration, stalledInterval } = CRASH_TIMING;
const workerOpts = { lockDuration, stalledInterval, concurrency: 1 };

let ledger: PostgresLedger;
let ds: CommitCountingServer;
let qn = 0;
const children: CrashWorker[] = [];
/** What a test opened, closed again after it even when it failed half-way (the leak check stays meaningful). */
const opened = { workers: [] as Worker[], queues: [] as Queue[] };

beforeAll(async () => {
  await t.setup();
  await t.query(`create table ${effectsTable} (id serial primary key, ref text not null, amount int not null)`);
  ledger = t.ledger();
  ds = await startCommitCounter();
});
afterAll(async () => {
  await ds.close();
  await ledger.close();
  // pg-pool's end() resolves before its connections are gone on the server side: give them a
  // moment, so that teardown's leak check counts only connections that really stayed open.
  await waitFor(async () => (await connectionsOf(t.tag)) === 0, 'the file’s connections to close', 5_000).catch(
    () => {},
  );
  await t.teardown();
});
afterEach(async () => {
  // No child outlives its test, and a killed child's Postgres backends are gone before the next one.
  for (const c of children.splice(0)) await c.kill();
  for (const w of opened.workers.splice(0)) await w.close(true);
  for (const q of opened.queues.splice(0)) await q.close();
  ds.reset();
  await waitFor(async () => (await connectionsOf(childTag)) === 0, 'the children’s Postgres connections to close');
});

async function connectionsOf(applicationName: string): Promise<number> {
  const r = await t.query<{ n: number }>(
    'select count(*)::int as n from pg_stat_activity where application_name = $1',
    [applicationName],
  );
  return r.rows[0]?.n ?? 0;
}

function names() {
  qn++;
  return `crash${qn}`;
}

function queue(name: string): Queue {
  const q = b.queue(name);
  opened.queues.push(q);
  return q;
}

function worker(...args: Parameters<typeof b.worker>): Worker {
  const w = b.worker(...args);
  opened.workers.push(w as Worker);
  return w as Worker;
}

async function child(queue: string, over: Partial<CrashWorkerConfig>): Promise<CrashWorker> {
  const c = await spawnCrashWorker({
    databaseUrl: childDatabaseUrl,
    redisUrl: t.redisUrl,
    schema: t.schema,
    prefix: t.prefix,
    queue,
    downstreamUrl: ds.url,
    downstream: 'idempotent',
    processor: 'charge',
    blockAt: 'none',
    effectsTable,
    leaseMs,
    lockDuration,
    stalledInterval,
    ...over,
  });
  children.push(c);
  return c;
}

/**
 * How long a test waits for one event of a worker (a commit, a settled job): only a bound on a
 * hang, generous because a loaded machine slows every step; an early failure still fails at once.
 */
const EVENT_MS = 30_000;

/** Rejects if `p` does not settle within `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Timed out after ${ms} ms waiting for ${what}`)), ms);
    }),
  ]);
}

/**
 * The audit events that decide the outcome. An `in_progress` wait (the takeover looked before the
 * dead attempt's lease lapsed, possible on a loaded machine) is legitimate and left out.
 */
function decisive<E extends { type: string }>(events: E[]): E[] {
  return events.filter((e) => e.type !== 'in_progress');
}

function stepKey(key: IdempotencyKey, step: string): IdempotencyKey {
  return { ...key, resourceKey: `${key.resourceKey}#step=${step}` };
}

async function effectRows(ref: string): Promise<{ id: number; ref: string; amount: number }[]> {
  return (
    await t.query<{ id: number; ref: string; amount: number }>(
      `select id, ref, amount from ${effectsTable} where ref = $1 order by id`,
      [ref],
    )
  ).rows;
}

/** An in-process worker that takes over after the child died, collecting the wrapper's audit events. */
function takeoverWorker(
  queue: string,
  processor: (input: CrashInput, ctx: ProcessorContext) => Promise<unknown>,
  downstream: 'idempotent' | 'none',
) {
  const events: WrapperEvent[] = [];
  const w = worker(
    queue,
    withIdempotency(crashOperation(downstream), processor, {
      ledger,
      keyring: testKeyring,
      audit: { emit: (e) => events.push(e) },
      worker: { lockDuration, stalledInterval },
    }),
    workerOpts,
  );
  return { w, events };
}

describe('5. a worker process SIGKILLed mid-job; another worker gets the stalled job', () => {
  it('killed after the downstream commit (idempotent): one commit, the job completes with the original result', async () => {
    const name = names();
    const q = queue(name);
    const o = crashOperation('idempotent');
    const first = await child(name, {});
    const gate = ds.holdNext();
    const { jobId, key, idempotencyKey } = await o.enqueue(q, { order: 'o-commit', amount: 100 });
    const effect = await within(gate.reached, EVENT_MS, 'the downstream commit');
    expect(ds.commits).toBe(1);
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({ status: 'locked', epoch: 1 });
    await first.kill(); // the commit happened, its response is still pending
    gate.release();
    expect(first.child.signalCode).toBe('SIGKILL');

    const { w, events } = takeoverWorker(name, chargeProcessor(ds.url), 'idempotent');
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('completed');
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ effectId: effect.id });
    expect(ds.commits).toBe(1);
    expect(ds.requests).toBe(2); // the takeover's call was answered from the downstream's key store
    expect(ds.commitsFor(idempotencyKey)).toBe(1); // both calls carried the operation key
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 2,
      result: { effectId: effect.id },
      lastTransition: 'completed',
    });
    expect(decisive(events).map((e) => [e.type, e.epoch])).toEqual([
      ['takeover', 2],
      ['completed', 2],
    ]);
    expect(r.job.stalledCounter).toBe(1);
    expect(decisive(first.audit()).map((e) => e.type)).toEqual(['claimed']);
    await w.close();
    await q.close();
  });

  it('killed after the downstream commit (none): the record becomes unknown, the job fails, no second commit', async () => {
    const name = names();
    const q = queue(name);
    const o = crashOperation('none');
    const first = await child(name, { downstream: 'none' });
    const gate = ds.holdNext();
    const { jobId, key } = await o.enqueue(q, { order: 'o-none', amount: 100 });
    await within(gate.reached, EVENT_MS, 'the downstream commit');
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({ status: 'locked', epoch: 1, downstream: 'none' });
    await first.kill();
    gate.release();

    const { w, events } = takeoverWorker(name, chargeProcessor(ds.url), 'none');
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(/^IDEMPOTENCY_UNKNOWN_OUTCOME/);
    expect(r.job.attemptsMade).toBe(1); // unrecoverable: not retried
    expect(ds.commits).toBe(1);
    expect(ds.requests).toBe(1); // the takeover never called
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'unknown',
      epoch: 2,
      lastTransition: 'takeover_unknown',
      error: { code: 'IDEMPOTENCY_LEASE_EXPIRED' },
      result: null,
    });
    expect(decisive(events).map((e) => e.type)).toEqual(['unknown']);
    await w.close();
    await q.close();
  });

  it('killed before the downstream call: after the takeover exactly one commit', async () => {
    const name = names();
    const q = queue(name);
    const o = crashOperation('idempotent');
    const first = await child(name, { blockAt: 'processor-start' });
    const { jobId, key, idempotencyKey } = await o.enqueue(q, { order: 'o-before', amount: 7 });
    const started = await first.waitFor('processing');
    expect(started).toMatchObject({ jobId, epoch: 1, takeover: false });
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({ status: 'locked', epoch: 1 });
    expect(ds.requests).toBe(0);
    await first.kill();

    const { w, events } = takeoverWorker(name, chargeProcessor(ds.url), 'idempotent');
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('completed');
    expect(ds.commits).toBe(1);
    expect(ds.requests).toBe(1);
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ effectId: ds.effects[0]?.id });
    expect(ds.effects[0]?.idempotencyKey).toBe(idempotencyKey);
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 2,
      result: unseal(r.returnvalue, testKeyring),
    });
    expect(decisive(events).map((e) => [e.type, e.epoch])).toEqual([
      ['takeover', 2],
      ['completed', 2],
    ]);
    await w.close();
    await q.close();
  });

  it('killed after the ledger completion, before BullMQ’s acknowledgement: the redelivery replays, one commit, epoch 1', async () => {
    const name = names();
    const q = queue(name);
    const o = crashOperation('idempotent');
    const first = await child(name, { blockAt: 'completed' });
    const { jobId, key } = await o.enqueue(q, { order: 'o-after', amount: 5 });
    const recorded = await first.waitFor('completed-recorded');
    expect(recorded.epoch).toBe(1);
    const row = await ledger.get(key);
    expect(withOpenedResult(row)).toMatchObject({ status: 'completed', epoch: 1, result: { effectId: 'eff_1' } });
    expect(await q.getJobState(jobId)).toBe('active'); // BullMQ was never told
    expect(ds.commits).toBe(1);
    await first.kill();

    const { w, events } = takeoverWorker(name, chargeProcessor(ds.url), 'idempotent');
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('completed');
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ effectId: 'eff_1' });
    expect(ds.commits).toBe(1);
    expect(ds.requests).toBe(1); // the replay never called downstream
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 1,
      result: { effectId: 'eff_1' },
      completedAt: row?.completedAt,
    });
    expect(decisive(events).map((e) => [e.type, e.epoch])).toEqual([['replayed', 1]]);
    await w.close();
    await q.close();
  });
});

describe('6. BullMQ lock lost while the first worker still runs', () => {
  // A longer lease (still < lockDuration) so that the redelivered copy deterministically finds the
  // first attempt's lease alive: the lock is deleted right after a heartbeat, so the lease runs
  // ≈1.2 s more, while the stalled checker hands the job over within 2 × stalledInterval.
  const LOST = { leaseMs: 1200, lockDuration: 1500, stalledInterval: 300 };

  type Deferred<T> = { promise: Promise<T>; resolve: (v: T) => void };
  function deferred<T = void>(): Deferred<T> {
    let resolve!: (v: T) => void;
    const promise = new Promise<T>((r) => {
      resolve = r;
    });
    return { promise, resolve };
  }

  /**
   * Two in-process workers on one queue. A commits downstream, reports its context, then keeps
   * running (ignoring its signal) until the test releases it. B is idle until the job stalls.
   */
  function lockLostSetup(name: string) {
    const o = crashOperation('idempotent', LOST.leaseMs);
    const timing = { lockDuration: LOST.lockDuration, stalledInterval: LOST.stalledInterval };
    const eventsA: WrapperEvent[] = [];
    const eventsB: WrapperEvent[] = [];
    const aStarted = deferred<{ ctx: ProcessorContext; effectId: string }>();
    const aRelease = deferred();
    let aOutcome: Promise<{ ok: true; value: unknown } | { ok: false; error: unknown }> | undefined;
    const wrappedA = withIdempotency(
      o,
      async (input, ctx) => {
        // No signal passed: this processor ignores it on purpose.
        const res = await postEffect<{ id: string }>(
          ds.url,
          { order: input.order, amount: input.amount },
          ctx.idempotencyKey,
        );
        aStarted.resolve({ ctx, effectId: res.body.id });
        await aRelease.promise;
        return { effectId: res.body.id, epoch: ctx.epoch };
      },
      { ledger, keyring: testKeyring, audit: { emit: (e) => eventsA.push(e) }, worker: timing },
    );
    const wA = worker(
      name,
      (job: Job, token?: string, signal?: AbortSignal) => {
        const p = wrappedA(job, token, signal);
        aOutcome = p.then(
          (value) => ({ ok: true as const, value }),
          (error: unknown) => ({ ok: false as const, error }),
        );
        return p;
      },
      { ...timing, concurrency: 1 },
    );
    const startB = () =>
      worker(
        name,
        withIdempotency(
          o,
          async (input, ctx) => {
            const res = await postEffect<{ id: string }>(
              ds.url,
              { order: input.order, amount: input.amount },
              ctx.idempotencyKey,
              ctx.signal,
            );
            return { effectId: res.body.id, epoch: ctx.epoch };
          },
          { ledger, keyring: testKeyring, audit: { emit: (e) => eventsB.push(e) }, worker: timing },
        ),
        { ...timing, concurrency: 1 },
      );
    return {
      o,
      wA,
      startB,
      eventsA,
      eventsB,
      aStarted: aStarted.promise,
      releaseA: () => aRelease.resolve(),
      aOutcome: () => aOutcome,
    };
  }

  /** Deletes the job's BullMQ lock right after the ledger lease was renewed. */
  async function loseLockAfterHeartbeat(key: IdempotencyKey, lockKey: string) {
    const redis = t.redis();
    try {
      const before = (await ledger.get(key))?.leaseExpiresAt?.getTime();
      await waitFor(
        async () => {
          const now = (await ledger.get(key))?.leaseExpiresAt?.getTime();
          return now !== undefined && now !== before;
        },
        'a lease heartbeat',
        5_000,
        5,
      );
      expect(await redis.del(lockKey)).toBe(1);
    } finally {
      await redis.quit();
    }
  }

  it('the redelivered copy is delayed while the first attempt’s lease lives (no attempt used); one commit', async () => {
    const name = names();
    const q = queue(name);
    const s = lockLostSetup(name);
    let wB: Worker | undefined;
    try {
      const { jobId, key } = await s.o.enqueue(q, { order: 'o-lost-wait', amount: 3 });
      const a = await within(s.aStarted, EVENT_MS, 'the first attempt');
      wB = s.startB();
      await loseLockAfterHeartbeat(key, `${t.prefix}:${name}:${jobId}:lock`);
      await waitFor(() => s.eventsB.some((e) => e.type === 'in_progress'), 'the second worker to find it in progress');
      expect(withOpenedResult(await ledger.get(key))).toMatchObject({ status: 'locked', epoch: 1 });
      // The first attempt now finishes; it still holds epoch 1, so its completion stands.
      s.releaseA();
      const r = await settled(q, jobId, EVENT_MS);
      expect(r.state).toBe('completed');
      expect(unseal(r.returnvalue, testKeyring)).toEqual({ effectId: a.effectId, epoch: 1 });
      expect(ds.commits).toBe(1);
      expect(ds.requests).toBe(1);
      expect(withOpenedResult(await ledger.get(key))).toMatchObject({
        status: 'completed',
        epoch: 1,
        result: { effectId: a.effectId, epoch: 1 },
      });
      const waits = s.eventsB.filter((e) => e.type === 'in_progress');
      expect(waits.length).toBeGreaterThanOrEqual(1);
      // Waiting (DelayedError after moveToDelayed) used no attempt.
      expect(waits.every((e) => e.attemptsMade === 0 && e.epoch === 1)).toBe(true);
      // Its BullMQ acknowledgement fails (the lock is gone): the redelivered copy replays the recorded
      // result, in whichever worker is free first (A is, once its processor returned).
      const after = [...s.eventsA, ...s.eventsB].filter(
        (e) => !['in_progress', 'claimed', 'completed'].includes(e.type),
      );
      expect(after.map((e) => [e.type, e.epoch])).toEqual([['replayed', 1]]);
      expect(s.eventsA.slice(0, 2).map((e) => [e.type, e.epoch])).toEqual([
        ['claimed', 1],
        ['completed', 1],
      ]);
      expect([...s.eventsA, ...s.eventsB].filter((e) => e.type === 'completed')).toHaveLength(1);
      expect(s.eventsB.some((e) => e.type === 'claimed' || e.type === 'takeover')).toBe(false);
      expect(r.job.attemptsMade).toBe(1);
      expect(r.job.stalledCounter).toBe(1);
    } finally {
      s.releaseA();
      await s.aOutcome();
      await wB?.close();
      await s.wA.close();
      await q.close();
    }
  });

  it('the first worker’s signal fires (lock_lost), the second takes over with epoch 2, the late completion is rejected', async () => {
    const name = names();
    const q = queue(name);
    const s = lockLostSetup(name);
    let wB: Worker | undefined;
    try {
      const { jobId, key } = await s.o.enqueue(q, { order: 'o-lost-stale', amount: 4 });
      const a = await within(s.aStarted, EVENT_MS, 'the first attempt');
      expect(a.ctx.signal.aborted).toBe(false);
      wB = s.startB();
      await loseLockAfterHeartbeat(key, `${t.prefix}:${name}:${jobId}:lock`);
      // The second worker got the stalled job while the first attempt's lease was still alive.
      await waitFor(() => s.eventsB.some((e) => e.type === 'in_progress'), 'the second worker to find it in progress');
      // The first attempt learns that its lock is gone.
      await waitFor(() => a.ctx.signal.aborted, 'the first attempt’s signal to fire', 3_000);
      expect(a.ctx.signal.reason).toBeInstanceOf(LeaseLostError);
      expect((a.ctx.signal.reason as LeaseLostError).reason).toBe('lock_lost');
      // It stops renewing: its lease lapses and the second worker takes over with epoch 2.
      const r = await settled(q, jobId, EVENT_MS);
      expect(r.state).toBe('completed');
      expect(unseal(r.returnvalue, testKeyring)).toEqual({ effectId: a.effectId, epoch: 2 });
      // Now the first attempt returns late: fenced.
      s.releaseA();
      const outcome = await within(s.aOutcome() ?? Promise.reject(new Error('no attempt A')), EVENT_MS, 'attempt A');
      expect(outcome.ok).toBe(false);
      // What BullMQ gets carries the code; the library's error stays in this process.
      expect(outcome.ok ? undefined : outcome.error).toMatchObject({ code: 'IDEMPOTENCY_STALE_EPOCH' });
      expect(originalError(outcome.ok ? undefined : outcome.error)).toBeInstanceOf(StaleEpochError);
      expect(s.eventsA.map((e) => [e.type, e.epoch])).toEqual([
        ['claimed', 1],
        ['stale_completion', 1],
      ]);
      expect(s.eventsB.map((e) => e.type).filter((x) => x !== 'in_progress')).toEqual(['takeover', 'completed']);
      expect(s.eventsB.filter((e) => e.type === 'in_progress').every((e) => e.attemptsMade === 0)).toBe(true);
      expect(s.eventsB.find((e) => e.type === 'takeover')?.epoch).toBe(2);
      expect(withOpenedResult(await ledger.get(key))).toMatchObject({
        status: 'completed',
        epoch: 2,
        result: { effectId: a.effectId, epoch: 2 },
      });
      expect(ds.commits).toBe(1);
      expect(ds.requests).toBe(2);
      const after = await settled(q, jobId);
      expect(after.state).toBe('completed');
      expect(unseal(after.returnvalue, testKeyring)).toEqual({ effectId: a.effectId, epoch: 2 });
      expect(after.job.attemptsMade).toBe(1);
    } finally {
      s.releaseA();
      await s.aOutcome();
      await wB?.close();
      await s.wA.close();
      await q.close();
    }
  });
});

describe('7. resume after a process restart in the middle of a three-step job', () => {
  it('killed while step b is in flight: a is replayed, b and c run, each effect committed once', async () => {
    const name = names();
    const q = queue(name);
    const o = crashOperation('idempotent');
    const first = await child(name, { processor: 'steps' });
    const gateA = ds.holdNext();
    const gateB = ds.holdNext();
    const { jobId, key } = await o.enqueue(q, { order: 'o-steps', amount: 1 });
    const effA = await within(gateA.reached, EVENT_MS, 'step a’s commit');
    gateA.release();
    const effB = await within(gateB.reached, EVENT_MS, 'step b’s commit');
    expect(withOpenedResult(await ledger.get(stepKey(key, 'a')))).toMatchObject({
      status: 'completed',
      epoch: 1,
      result: effA.id,
    });
    expect(withOpenedResult(await ledger.get(stepKey(key, 'b')))).toMatchObject({
      status: 'locked',
      epoch: 1,
      stepId: 'b',
    });
    expect(await ledger.get(stepKey(key, 'c'))).toBeNull();
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({ status: 'locked', epoch: 1 });
    await first.kill(); // step b committed downstream, its response still pending
    gateB.release();

    const second = await child(name, { processor: 'steps' });
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('completed');
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ a: effA.id, b: effB.id, c: 'eff_3' });
    expect(ds.commits).toBe(3);
    for (const step of ['a', 'b', 'c']) expect(ds.commitsFor({ step })).toBe(1);
    expect(new Set(ds.effects.map((e: Effect) => e.idempotencyKey)).size).toBe(3);
    expect(ds.requests).toBe(4); // a, b, b again (answered from the key store), c
    const resumed = decisive(second.audit()).map((e) => [e.type, e.stepId ?? '-', e.epoch]);
    expect(resumed).toEqual([
      ['takeover', '-', 2],
      ['replayed', 'a', 1],
      ['takeover', 'b', 2],
      ['completed', 'b', 2],
      ['claimed', 'c', 1],
      ['completed', 'c', 1],
      ['completed', '-', 2],
    ]);
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 2,
      result: unseal(r.returnvalue, testKeyring),
    });
    expect(withOpenedResult(await ledger.get(stepKey(key, 'a')))).toMatchObject({
      status: 'completed',
      epoch: 1,
      result: effA.id,
    });
    expect(withOpenedResult(await ledger.get(stepKey(key, 'b')))).toMatchObject({
      status: 'completed',
      epoch: 2,
      result: effB.id,
    });
    expect(withOpenedResult(await ledger.get(stepKey(key, 'c')))).toMatchObject({
      status: 'completed',
      epoch: 1,
      result: 'eff_3',
    });
    expect(await second.stop()).toEqual({ code: 0, signal: null });
    await q.close();
  });
});

describe('8. ctx.tx: an effect written in the ledger’s transaction is never doubled', () => {
  it('killed between the commit and BullMQ’s acknowledgement: the redelivery replays, one row', async () => {
    const name = names();
    const q = queue(name);
    const o = crashOperation('none');
    const first = await child(name, { processor: 'tx', downstream: 'none', blockAt: 'completed' });
    const { jobId, key } = await o.enqueue(q, { order: 'o-tx', amount: 42 });
    await first.waitFor('completed-recorded');
    const rows = await effectRows('o-tx');
    expect(rows).toHaveLength(1);
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 1,
      result: { rowId: rows[0]?.id },
    });
    expect(await q.getJobState(jobId)).toBe('active');
    await first.kill();

    const { w, events } = takeoverWorker(name, txProcessor(effectsTable), 'none');
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('completed');
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ rowId: rows[0]?.id });
    expect(await effectRows('o-tx')).toEqual(rows);
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 1,
      result: { rowId: rows[0]?.id },
    });
    expect(decisive(events).map((e) => [e.type, e.epoch])).toEqual([['replayed', 1]]);
    expect(ds.commits).toBe(0); // the effect is the row, nothing went downstream
    await w.close();
    await q.close();
  });

  it('killed inside the transaction before it commits: nothing was written, the takeover writes one row', async () => {
    // 'idempotent' here: an attempt that died inside ctx.tx committed nothing (the row and the ledger
    // completion commit together), so a takeover may run it again.
    const name = names();
    const q = queue(name);
    const o = crashOperation('idempotent');
    const first = await child(name, { processor: 'tx', blockAt: 'in-tx' });
    const { jobId, key } = await o.enqueue(q, { order: 'o-in-tx', amount: 9 });
    await first.waitFor('in-tx');
    expect(await effectRows('o-in-tx')).toEqual([]); // inserted, not committed
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({ status: 'locked', epoch: 1 });
    await first.kill();

    const { w, events } = takeoverWorker(name, txProcessor(effectsTable), 'idempotent');
    const r = await settled(q, jobId, EVENT_MS);
    expect(r.state).toBe('completed');
    const rows = await effectRows('o-in-tx');
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ ref: 'o-in-tx', amount: 9 });
    expect(unseal(r.returnvalue, testKeyring)).toEqual({ rowId: rows[0]?.id });
    expect(withOpenedResult(await ledger.get(key))).toMatchObject({
      status: 'completed',
      epoch: 2,
      result: { rowId: rows[0]?.id },
    });
    expect(decisive(events).map((e) => [e.type, e.epoch])).toEqual([
      ['takeover', 2],
      ['completed', 2],
    ]);
    expect(ds.commits).toBe(0);
    await w.close();
    await q.close();
  });
});
