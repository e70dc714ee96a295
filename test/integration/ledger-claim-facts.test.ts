/**
 * A claim's job id, task id and step id are read from its options only when a claim statement
 * writes them: a replay (the ledger's read answers it) never reads them, so a caller whose ids
 * cost something to make (the worker's keyed refs) pays only for claims that write.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { ClaimOptions } from '../../src/ledger/types.js';
import { TestContext } from '../helpers/context.js';
import { acquireClaim, payClaim } from '../helpers/ledger-claims.js';

const t = new TestContext('ledger_claim_facts');
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

/** `c` with job, task and step ids that count how often they are read. */
function counted(c: ClaimOptions): { options: ClaimOptions; reads: () => number } {
  let reads = 0;
  const options = { ...c };
  for (const [field, value] of [
    ['jobId', 'job-7'],
    ['taskId', 'task-7'],
    ['stepId', 'step-7'],
  ] as const) {
    Object.defineProperty(options, field, {
      enumerable: true,
      get: () => {
        reads++;
        return value;
      },
    });
  }
  return { options, reads: () => reads };
}

describe("a claim's ids", () => {
  it('are read for a claim that writes its row and stored as given', async () => {
    const { options, reads } = counted(payClaim(`facts:new:${Math.random()}`));
    const c = await acquireClaim(ledger, options);
    expect(reads()).toBeGreaterThan(0);
    const rec = await ledger.get(c.key);
    expect(rec?.taskId).toBe('task-7');
    expect(rec?.stepId).toBe('step-7');
    expect(rec?.transitions?.[0]).toMatchObject({ transition: 'claimed', jobId: 'job-7' });
  });

  it('are never read for a replay, nor for a claim of a key another attempt holds', async () => {
    const done = payClaim(`facts:done:${Math.random()}`);
    const held = await acquireClaim(ledger, done);
    await ledger.complete(held.key, held.epoch, { ok: 1 });
    const replay = counted(done);
    expect(await ledger.claim(replay.options)).toMatchObject({ kind: 'completed', result: { ok: 1 } });
    expect(replay.reads()).toBe(0);
    const busy = payClaim(`facts:busy:${Math.random()}`);
    await acquireClaim(ledger, busy);
    const waiting = counted(busy);
    expect(await ledger.claim(waiting.options)).toMatchObject({ kind: 'inProgress' });
    expect(waiting.reads()).toBe(0);
  });
});
