/**
 * A step is claimed, decided and recorded like its operation: the same claim mapping (waiting as
 * a delayed job for a key held elsewhere, every transition reported), the same recorder (a value
 * that cannot be recorded is unknown, a stale completion is reported), and a terminal processor
 * error is the same class on the first attempt and on a replay.
 */
import type { Job } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RecordedFailureError } from '../../src/errors/errors.js';
import { TerminalError } from '../../src/errors/processor-errors.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { type IdempotencyKey, parseIdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { Operation } from '../../src/operation/operation.js';
import { originalError } from '../../src/sealing/original-error.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('step_path');
const b = bull(t);
let ledger: PostgresLedger;
let qn = 0;
/** Workers and queues of the current test, closed after it (workers first). */
let open: { close(): Promise<void> }[] = [];

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterEach(async () => {
  for (const c of open) await c.close();
  open = [];
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const inputSchema = z.object({ order: z.string() });
type Input = z.output<typeof inputSchema>;

function op() {
  return testOperation({
    name: 'orders.ship',
    input: inputSchema,
    effect: (i: Input) => i,
    resourceKey: (i: Input) => `order:${i.order}`,
    lease: '500ms',
  }) as unknown as Operation<typeof inputSchema, unknown>;
}

/** A new queue, a worker running `processor` wrapped for `o`, and the events it reports. */
function setup(
  o: ReturnType<typeof op>,
  processor: Parameters<typeof withIdempotency<typeof inputSchema, unknown, never>>[1],
  extra: Partial<Parameters<typeof withIdempotency>[2]> = {},
) {
  const name = `q${++qn}`;
  const events: WrapperEvent[] = [];
  const q = b.queue(name);
  const w = b.worker(
    name,
    withIdempotency(o, processor, {
      ledger,
      keyring: testKeyring,
      audit: { emit: (e) => void events.push(e) },
      ...extra,
    }),
  );
  open.push(w, q);
  return { q, w, events };
}

/** The key and fingerprint a step of `o` claims for `input`. */
function stepOf(o: ReturnType<typeof op>, input: Input, name: string): { key: IdempotencyKey; fp: string } {
  const opKey = o.keyFor(input);
  return {
    key: parseIdempotencyKey({ ...opKey, resourceKey: `${opKey.resourceKey}#step=${name}` }),
    fp: fingerprint(`${o.name}#${name}`, o.fingerprintOf(input, testKeyring)),
  };
}

describe('a step path that is the operation path', () => {
  it('a step whose key another attempt holds: the job waits delayed (no attempt used), then takes the step over', async () => {
    const o = op();
    const input = { order: 'held' };
    const step = stepOf(o, input, 'a');
    // A crashed attempt's step lease, live for 6 operation leases: longer than a step may wait in place.
    const held = await ledger.claim({
      key: step.key,
      operation: `${o.name}#a`,
      fingerprint: step.fp,
      leaseMs: 3_000,
      retentionMs: 3_600_000,
      downstream: 'idempotent',
      stepId: 'a',
    });
    expect(held.kind).toBe('acquired');
    let stepRuns = 0;
    const { q, events } = setup(
      o,
      async (_i, ctx) => {
        const a = await ctx.step('a', async () => ++stepRuns);
        return { a };
      },
      { inProgressPollMs: 200 },
    );
    const job = await q.add('ship', input, { attempts: 1 });
    const r = await settled(q, job.id as string, 15_000);
    expect(r.failedReason).toBeUndefined();
    expect(r.state).toBe('completed');
    expect(stepRuns).toBe(1);
    expect(r.job.attemptsMade).toBe(1); // every wait was a delay, not an attempt
    expect(await ledger.get(step.key)).toMatchObject({ status: 'completed', epoch: 2 });
    expect(await ledger.get(o.keyFor(input))).toMatchObject({ status: 'completed' });
    const stepWaits = events.filter((e) => e.type === 'in_progress' && e.stepId === 'a');
    expect(stepWaits.length).toBeGreaterThan(0);
    expect(stepWaits.every((e) => e.parentKey !== undefined && e.reasonCode === 'IDEMPOTENCY_IN_PROGRESS')).toBe(true);
    // Each wait let go of the operation, so the key was never held by a job that only waited.
    expect(events.filter((e) => e.type === 'released' && e.stepId === undefined)).toHaveLength(stepWaits.length);
    expect(events.filter((e) => e.type === 'takeover' && e.stepId === 'a')).toHaveLength(1);
  });

  it('a step value that cannot be recorded: the step and its operation become unknown, the step never runs twice', async () => {
    const o = op();
    const input = { order: 'unsealable' };
    let stepRuns = 0;
    const { q } = setup(o, async (_i, ctx) => {
      await ctx.step('a', async () => {
        stepRuns++;
        return { callback: () => 1 }; // a function cannot be sealed
      });
      return { ok: true };
    });
    const job = await q.add('ship', input, { attempts: 3, backoff: 10 });
    const r = await settled(q, job.id as string, 15_000);
    expect(r.state).toBe('failed');
    expect(r.failedReason).toMatch(/^IDEMPOTENCY_UNKNOWN_OUTCOME/);
    expect(r.job.attemptsMade).toBe(1);
    expect(stepRuns).toBe(1);
    const step = await ledger.get(stepOf(o, input, 'a').key);
    expect(step).toMatchObject({ status: 'unknown', error: { code: 'IDEMPOTENCY_NOT_SERIALIZABLE' } });
    expect(await ledger.get(o.keyFor(input))).toMatchObject({ status: 'unknown' });
  });

  it('a step completion fenced by a later epoch is reported (stale_completion), as an operation’s is', async () => {
    const o = op();
    const input = { order: 'fenced' };
    const { q, events } = setup(o, async (_i, ctx) => {
      await ctx.step('a', async () => {
        await ledger.invalidate(stepOf(o, input, 'a').key); // an operator fences the step meanwhile
        return 'done';
      });
      return { ok: true };
    });
    const job = await q.add('ship', input, { attempts: 1 });
    expect((await settled(q, job.id as string)).state).toBe('failed');
    const stale = events.filter((e) => e.type === 'stale_completion');
    expect(stale).toHaveLength(1);
    expect(stale[0]).toMatchObject({ stepId: 'a', reasonCode: 'IDEMPOTENCY_STALE_EPOCH', epoch: 1 });
  });

  it('a terminal processor error is a RecordedFailureError on the first attempt and on the replay', async () => {
    const o = op();
    let runs = 0;
    const { q, w } = setup(o, async () => {
      runs++;
      throw new TerminalError('CARD_DECLINED', 'card declined');
    });
    const told: Error[] = [];
    w.on('failed', (_job: Job | undefined, err: Error) => told.push(err));
    const first = await q.add('ship', { order: 'declined' });
    expect((await settled(q, first.id as string)).state).toBe('failed');
    const replay = await q.add('ship', { order: 'declined' });
    expect((await settled(q, replay.id as string)).state).toBe('failed');
    expect(runs).toBe(1);
    expect(told).toHaveLength(2);
    for (const err of told) {
      expect(err).toMatchObject({ code: 'IDEMPOTENCY_RECORDED_FAILURE' });
      expect(err.cause).toBeUndefined(); // what listeners log carries no error of the processor's
    }
    // In this process: the processor's own error on the first attempt, the recorded failure on the replay.
    expect(originalError(told[0])).toBeInstanceOf(TerminalError);
    expect(originalError(told[0])).toMatchObject({ code: 'CARD_DECLINED' });
    expect(originalError(told[1])).toBeInstanceOf(RecordedFailureError);
    expect(originalError(told[1])).toMatchObject({
      code: 'IDEMPOTENCY_RECORDED_FAILURE',
      details: { error: { code: 'CARD_DECLINED' } },
    });
  });
});
