/**
 * A batched claim whose plain insert of new keys meets a unique violation (another claimer
 * inserted one of them first) sends its keys through the full claim statement, which inserts the
 * keys still absent. Every key claimed that way must come back as a readable outcome: exactly one
 * `acquired` per key, with its transition, and a row whose last transition the record tells.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { ClaimOutcome } from '../../src/ledger/types.js';
import { TestContext } from '../helpers/context.js';
import { withHeldInsert } from '../helpers/held-insert.js';
import { payClaim } from '../helpers/ledger-claims.js';

const t = new TestContext('ledger_claim_race');
let a: PostgresLedger;
let b: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  a = t.ledger();
  b = t.ledger();
});
afterAll(async () => {
  await a.close();
  await b.close();
  await t.teardown();
});

/** What a claim settled as: its kind and transition, or the class and message it threw. */
async function settle(p: Promise<ClaimOutcome>): Promise<string> {
  try {
    const c = await p;
    return c.kind === 'acquired' ? `acquired:${c.transition}` : c.kind;
  } catch (err) {
    return `threw:${(err as Error).name}: ${(err as Error).message}`;
  }
}

describe('batched claims of new keys that meet a concurrent insert', () => {
  it('a batch whose insert hits a unique violation claims its other new keys through the full claim, readably', async () => {
    const held = payClaim(`race:held:${Math.random()}`, { downstream: 'none' });
    const fresh = payClaim(`race:fresh:${Math.random()}`);
    // Another claimer's insert of one key, not yet committed: the batch's read sees neither key.
    await withHeldInsert(t, held, async (commitWhenWaitedOn) => {
      // Both keys in one batch (submitted in the same tick); its insert waits on the held key.
      const both = [settle(a.claim(fresh)), settle(a.claim(held))];
      await commitWhenWaitedOn();
      // The insert failed (23505) and the full claim took both keys: one new, one held elsewhere.
      expect(await Promise.all(both)).toEqual(['acquired:claimed', 'inProgress']);
    });
    const rec = await a.get(fresh.key);
    expect(rec).toMatchObject({ status: 'locked', epoch: 1, lastTransition: 'claimed' });
    expect(rec?.transitions?.map((x) => x.transition)).toEqual(['claimed']);
  });

  it('two ledgers claiming overlapping batches of new keys: each key acquired exactly once, nothing thrown', async () => {
    const rounds = 30;
    const perBatch = 12;
    const thrown: string[] = [];
    let acquiredTotal = 0;
    let keysTotal = 0;
    for (let round = 0; round < rounds; round++) {
      const keys = Array.from({ length: perBatch + perBatch / 2 }, (_, i) =>
        payClaim(`race:${round}:${i}:${Math.random()}`, { downstream: 'none' }),
      );
      // Overlapping halves: the middle keys are claimed by both ledgers in the same moment.
      const fromA = keys.slice(0, perBatch).map((c) => settle(a.claim(c)));
      const fromB = keys.slice(perBatch / 2).map((c) => settle(b.claim(c)));
      const outcomes = [...(await Promise.all(fromA)), ...(await Promise.all(fromB))];
      thrown.push(...outcomes.filter((o) => o.startsWith('threw:')));
      acquiredTotal += outcomes.filter((o) => o.startsWith('acquired:')).length;
      keysTotal += keys.length;
      const rows = await t.query<{ key: string; status: string; epoch: number }>(
        `select key, status, epoch from ${t.schema}.idempotency_ledger where key = any($1::text[])`,
        [keys.map((c) => boundedKey(c.key as never))],
      );
      expect(rows.rows.every((r) => r.status === 'locked' && r.epoch === 1)).toBe(true);
      expect(rows.rows).toHaveLength(keys.length);
    }
    expect(thrown).toEqual([]);
    expect(acquiredTotal).toBe(keysTotal);
  });
});
