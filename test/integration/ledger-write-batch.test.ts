/**
 * While recent keys were mostly new, a ledger claims insert first, and the claims of new keys go
 * in one statement with the completions of finished attempts: one commit for both. Each key's
 * outcome must be what it would be with a statement each: a claim `acquired` once per key, a
 * completion recorded only at the epoch that holds the key (fenced otherwise), a claim whose key
 * has a row arbitrated by the full claim, and a concurrent insert of one of the batch's keys
 * (unique violation: the statement writes nothing) leaving no completion unrecorded.
 */
import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StaleEpochError } from '../../src/errors/errors.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { ClaimOptions } from '../../src/ledger/types.js';
import { TestContext } from '../helpers/context.js';
import { withHeldInsert } from '../helpers/held-insert.js';
import { acquireClaim, payClaim } from '../helpers/ledger-claims.js';

const t = new TestContext('ledger_write_batch');
let pool: pg.Pool;
let ledger: PostgresLedger;
/** The prepared statements the ledger's pool ran, by name, in order. */
const ran: string[] = [];

beforeAll(async () => {
  await t.setup();
  pool = t.pool(10);
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const config = args[0] as { name?: string } | string;
    ran.push(typeof config === 'string' ? 'unnamed' : (config.name ?? 'unnamed'));
    return query(...args);
  };
  ledger = t.ledger({ pool });
});
/** Ten batches of new keys: the ledger then expects new keys and claims insert first. */
async function warm(): Promise<void> {
  for (let round = 0; round < 10; round++) {
    await Promise.all(Array.from({ length: 4 }, (_, i) => acquireClaim(ledger, claimOf(`warm:${round}:${i}`))));
  }
}
beforeEach(warm);
afterAll(async () => {
  await ledger.close();
  await pool.end();
  await t.teardown();
});

const claimOf = (name: string, over: Partial<ClaimOptions> = {}) => payClaim(`wb:${name}:${Math.random()}`, over);
const keyOf = (c: ClaimOptions) => boundedKey(c.key as never);
/** The names of the prepared statements the ledger ran while `f` ran (each name holds the statement's). */
async function statementsOf(f: () => Promise<unknown>): Promise<string[]> {
  const from = ran.length;
  await f();
  return ran.slice(from);
}

describe('claims of new keys and completions in one statement', () => {
  it('claims and completions submitted together run as one statement, each with its own outcome', async () => {
    const first = Array.from({ length: 8 }, (_, i) => claimOf(`first:${i}`));
    const held = await Promise.all(first.map((c) => acquireClaim(ledger, c)));
    const next = Array.from({ length: 8 }, (_, i) => claimOf(`next:${i}`));
    let outcomes: unknown[] = [];
    const statements = await statementsOf(async () => {
      outcomes = await Promise.all([
        ...held.map((h, i) => ledger.complete(keyOf(first[i] as ClaimOptions), h.epoch, { done: i })),
        ...next.map((c) => ledger.claim(c)),
      ]);
    });
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/^bqi_insertAndComplete_/);
    expect(outcomes.slice(8).map((o) => (o as { kind: string }).kind)).toEqual(Array(8).fill('acquired'));
    for (const [i, c] of first.entries()) {
      const rec = await ledger.get(c.key);
      expect(rec).toMatchObject({ status: 'completed', epoch: 1, result: { done: i } });
      expect(rec?.transitions?.map((x) => x.transition)).toEqual(['claimed', 'completed']);
    }
    for (const c of next) {
      const rec = await ledger.get(c.key);
      expect(rec).toMatchObject({ status: 'locked', epoch: 1, lastTransition: 'claimed' });
    }
  });

  it('in one statement, a completion at a stale epoch is fenced and a claim of a key with a row is arbitrated', async () => {
    const taken = claimOf('taken', { leaseMs: 1 });
    const old = await acquireClaim(ledger, taken);
    await new Promise((r) => setTimeout(r, 20));
    // The lease ran out: a second attempt takes the key over at epoch 2.
    const over = await ledger.claim(taken);
    expect(over).toMatchObject({ kind: 'acquired', epoch: 2, transition: 'takeover' });
    const done = claimOf('done');
    const doneClaim = await acquireClaim(ledger, done);
    const again = claimOf('again');
    await warm();
    let settled: PromiseSettledResult<unknown>[] = [];
    const statements = await statementsOf(async () => {
      settled = await Promise.allSettled([
        ledger.complete(keyOf(taken), old.epoch, { zombie: true }),
        ledger.complete(keyOf(done), doneClaim.epoch, { ok: true }),
        ledger.claim(done),
        ledger.claim(again),
      ]);
    });
    // One statement for both completions and the new key's claim; the claim of a key being completed
    // waits for the next batch (a batch holds one request per key), which finds its row and answers
    // it (by the full claim, or by a read once the keys seen lately had rows); the fenced
    // completion's read says why it was fenced.
    const names = statements.map((name) => name.split('_')[1]);
    expect(names[0]).toBe('insertAndComplete');
    expect(names.filter((n) => n === 'insertAndComplete')).toHaveLength(1);
    expect(names).toContain('current');
    expect(settled[0]).toMatchObject({ status: 'rejected' });
    expect((settled[0] as PromiseRejectedResult).reason).toBeInstanceOf(StaleEpochError);
    expect(settled[1]).toMatchObject({ status: 'fulfilled' });
    // The key claimed in the same moment as its completion: a replay, never a second attempt.
    expect(settled[2]).toMatchObject({ status: 'fulfilled', value: { kind: 'completed', result: { ok: true } } });
    expect(settled[3]).toMatchObject({ status: 'fulfilled', value: { kind: 'acquired', epoch: 1 } });
    expect(await ledger.get(taken.key)).toMatchObject({ status: 'locked', epoch: 2, result: null });
    expect(await ledger.get(done.key)).toMatchObject({ status: 'completed', epoch: 1, result: { ok: true } });
  });

  it('a concurrent insert of one key fails the statement; its completions are recorded all the same', async () => {
    const first = Array.from({ length: 4 }, (_, i) => claimOf(`race:first:${i}`));
    const held = await Promise.all(first.map((c) => acquireClaim(ledger, c)));
    const contested = claimOf('race:contested');
    const fresh = claimOf('race:fresh');
    let from = 0;
    const settled = await withHeldInsert(t, contested, async (commitWhenWaitedOn) => {
      from = ran.length;
      const all = Promise.allSettled([
        ...held.map((h, i) => ledger.complete(keyOf(first[i] as ClaimOptions), h.epoch, { n: i })),
        ledger.claim(contested),
        ledger.claim(fresh),
      ]);
      await commitWhenWaitedOn();
      return all;
    });
    // The batch's statement failed; its completions ran again alone, and its claims went on
    // through the claim batches (no second statement of both).
    const names = ran.slice(from).map((name) => name.split('_')[1]);
    expect(names.slice(0, 2)).toEqual(['insertAndComplete', 'complete']);
    expect(names.slice(2)).not.toContain('insertAndComplete');
    expect(settled.map((s) => s.status)).toEqual(Array(6).fill('fulfilled'));
    const values = settled.map((s) => (s as PromiseFulfilledResult<{ kind?: string }>).value);
    expect(values[4]).toMatchObject({ kind: 'inProgress' });
    expect(values[5]).toMatchObject({ kind: 'acquired', epoch: 1, transition: 'claimed' });
    for (const [i, c] of first.entries()) {
      expect(await ledger.get(c.key)).toMatchObject({ status: 'completed', epoch: 1, result: { n: i } });
    }
  });
});
