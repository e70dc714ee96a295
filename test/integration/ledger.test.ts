import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord, transitionEventIds } from '../../src/audit/derive.js';
import { ERROR_CODES, IdempotencyError } from '../../src/errors/idempotency-error.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { boundedKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import { MAX_ERROR_MESSAGE_LENGTH, type PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { ClaimOptions } from '../../src/ledger/types.js';
import { LeaseKeeper, LeaseLostError } from '../../src/worker/lease-keeper.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { machineHas } from '../helpers/machine.js';

const t = new TestContext('ledger');
let ledger: PostgresLedger;
let n = 0;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

function newKey(): IdempotencyKey {
  return { namespace: 'acme/assets.create', resourceKey: `task:${++n}:${Math.random()}`, version: 'v1' };
}
function claimOf(key: IdempotencyKey, over: Partial<ClaimOptions> = {}): ClaimOptions {
  return {
    key,
    operation: 'assets.create',
    fingerprint: fingerprint('assets.create', { asset: 'a' }),
    leaseMs: 30_000,
    retentionMs: 60_000,
    downstream: 'idempotent',
    ...over,
  };
}
// biome-ignore lint/suspicious/noExplicitAny: raw rows are inspected field by field
type Row = Record<string, any>;
async function row(key: IdempotencyKey): Promise<Row> {
  const r = await t.query(`select * from ${t.schema}.idempotency_ledger where key = $1`, [boundedKey(key)]);
  return r.rows[0] as Row;
}

describe('claim', () => {
  const connections = inject('maxConnections');
  const manyConnections = machineHas(
    'test/integration/ledger.test.ts',
    'Postgres max_connections ≥ 300',
    connections === undefined || connections >= 300,
    'alter system set max_connections = 300, then restart Postgres',
  );
  it.runIf(manyConnections)('100 concurrent claims from separate connections: exactly one acquires', async () => {
    const key = newKey();
    const ledgers = Array.from({ length: 100 }, () => t.ledger({ poolSize: 1 }));
    try {
      // Open every connection first so the claims race for real.
      await Promise.all(ledgers.map(async (l) => (await l.pool.connect()).release()));
      const outcomes = await Promise.all(ledgers.map((l) => l.claim(claimOf(key))));
      const kinds = outcomes.map((o) => o.kind);
      expect(kinds.filter((k) => k === 'acquired')).toHaveLength(1);
      expect(kinds.filter((k) => k === 'inProgress')).toHaveLength(99);
      expect((await row(key)).epoch).toBe(1);
    } finally {
      await Promise.all(ledgers.map((l) => l.close()));
    }
  });

  it('coalesced claims keep each key exact: 20 keys claimed 10 times each at once, in one process', async () => {
    const keys = Array.from({ length: 20 }, () => newKey());
    const outcomes = await Promise.all(keys.flatMap((k) => Array.from({ length: 10 }, () => ledger.claim(claimOf(k)))));
    const acquired = outcomes.filter((o) => o.kind === 'acquired');
    expect(acquired).toHaveLength(20);
    expect(new Set(acquired.map((o) => o.key)).size).toBe(20);
    expect(outcomes.filter((o) => o.kind === 'inProgress')).toHaveLength(180);
    // Completions coalesce too, each fenced by its own epoch: one stale write in the batch fails alone.
    const results = await Promise.allSettled([
      ...acquired.map((o) => ledger.complete(o.key, o.epoch, { k: o.key })),
      ledger.complete(acquired[0]?.key as string, 0, 'stale'),
    ]);
    expect(results.slice(0, 20).every((r) => r.status === 'fulfilled')).toBe(true);
    expect(results[20]).toMatchObject({ status: 'rejected', reason: { code: ERROR_CODES.staleEpoch } });
    for (const k of keys) expect((await ledger.claim(claimOf(k))).kind).toBe('completed');
  });

  it('after a run of new keys (insert-first), existing keys still get their exact outcomes', async () => {
    const l = t.ledger();
    try {
      // Many fresh keys teach the ledger to insert before reading.
      for (let round = 0; round < 5; round++) {
        const fresh = await Promise.all(Array.from({ length: 20 }, () => l.claim(claimOf(newKey()))));
        expect(fresh.every((o) => o.kind === 'acquired')).toBe(true);
      }
      const done = newKey();
      const a = await l.claim(claimOf(done));
      if (a.kind !== 'acquired') throw new Error('expected acquired');
      await l.complete(done, a.epoch, 'r');
      const live = newKey();
      await l.claim(claimOf(live));
      const outcomes = await Promise.all([
        l.claim(claimOf(done)),
        l.claim(claimOf(done, { fingerprint: 'changed' })),
        l.claim(claimOf(live)),
        l.claim(claimOf(newKey())),
      ]);
      expect(outcomes.map((o) => o.kind)).toEqual(['completed', 'conflict', 'inProgress', 'acquired']);
    } finally {
      await l.close();
    }
  });

  it('without batching the same contract holds', async () => {
    const single = t.ledger({ batching: false });
    try {
      const key = newKey();
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => single.claim(claimOf(key))));
      expect(outcomes.filter((o) => o.kind === 'acquired')).toHaveLength(1);
      const a = outcomes.find((o) => o.kind === 'acquired');
      if (a?.kind !== 'acquired') throw new Error('expected acquired');
      await single.complete(key, a.epoch, 'done');
      expect(await single.claim(claimOf(key))).toMatchObject({ kind: 'completed', result: 'done' });
    } finally {
      await single.close();
    }
  });

  it('a completed key returns the recorded result with no new epoch and no write', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key));
    expect(a.kind).toBe('acquired');
    if (a.kind !== 'acquired') return;
    const done = await ledger.complete(key, a.epoch, { assetId: 'as_1', n: 2 });
    expect(done.result).toEqual({ assetId: 'as_1', n: 2 });
    const before = await row(key);
    const replay = await ledger.claim(claimOf(key));
    expect(replay).toMatchObject({ kind: 'completed', epoch: 1, result: { assetId: 'as_1', n: 2 } });
    const after = await row(key);
    expect(after.updated_at.getTime()).toBe(before.updated_at.getTime());
    expect(after.epoch).toBe(1);
    // xmin changes on any update and xmax on any row lock: the replay path wrote nothing.
    const xmin = async () =>
      (
        await t.query(
          `select xmin::text || '/' || xmax::text as x from ${t.schema}.idempotency_ledger where key = $1`,
          [boundedKey(key)],
        )
      ).rows[0]?.x;
    const x1 = await xmin();
    await ledger.claim(claimOf(key));
    expect(await xmin()).toBe(x1);
  });

  it('refuses a changed fingerprint whether the row is locked, completed or failed', async () => {
    const other = fingerprint('assets.create', { asset: 'b' });
    const locked = newKey();
    await ledger.claim(claimOf(locked));
    expect((await ledger.claim(claimOf(locked, { fingerprint: other }))).kind).toBe('conflict');

    const completed = newKey();
    const c = await ledger.claim(claimOf(completed));
    if (c.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.complete(completed, c.epoch, 'ok');
    expect(await ledger.claim(claimOf(completed, { fingerprint: other }))).toMatchObject({
      kind: 'conflict',
      status: 'completed',
    });

    const failed = newKey();
    const f = await ledger.claim(claimOf(failed));
    if (f.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.fail(failed, f.epoch, { code: 'E_DECLINED', message: 'card declined' }, 'terminal');
    expect(await ledger.claim(claimOf(failed, { fingerprint: other }))).toMatchObject({
      kind: 'conflict',
      status: 'failed',
    });
    expect(await ledger.claim(claimOf(failed))).toMatchObject({ kind: 'failed', error: { code: 'E_DECLINED' } });
  });

  it('retention boundary: just inside replays, just past is claimable again with epoch + 1', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key, { retentionMs: 60_000 }));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.complete(key, a.epoch, { v: 1 });
    const inside = t.ledger({ clockOffsetMs: 59_000 });
    const past = t.ledger({ clockOffsetMs: 60_001 });
    try {
      expect((await inside.claim(claimOf(key))).kind).toBe('completed');
      const again = await past.claim(claimOf(key));
      expect(again).toMatchObject({ kind: 'acquired', epoch: 2, transition: 'reclaimed_after_expiry' });
      // After expiry the key is a new operation record: even new input is accepted.
      const other = newKey();
      const o = await ledger.claim(claimOf(other));
      if (o.kind !== 'acquired') throw new Error('expected acquired');
      await ledger.complete(other, o.epoch, 1);
      expect(
        await past.claim(claimOf(other, { fingerprint: fingerprint('assets.create', { asset: 'z' }) })),
      ).toMatchObject({ kind: 'acquired', epoch: 2 });
    } finally {
      await inside.close();
      await past.close();
    }
  });

  it('lease expiry: takeover with epoch + 1 (idempotent), old epoch fenced everywhere', async () => {
    const key = newKey();
    const first = await ledger.claim(claimOf(key, { leaseMs: 1_000 }));
    if (first.kind !== 'acquired') throw new Error('expected acquired');
    const live = await ledger.claim(claimOf(key));
    expect(live).toMatchObject({ kind: 'inProgress' });
    if (live.kind === 'inProgress') expect(live.retryAfterMs).toBeGreaterThan(0);
    const later = t.ledger({ clockOffsetMs: 1_500 });
    try {
      const second = await later.claim(claimOf(key, { leaseMs: 30_000 }));
      expect(second).toMatchObject({ kind: 'acquired', epoch: 2, transition: 'takeover' });
      for (const stale of [
        () => ledger.complete(key, 1, 'late'),
        () => ledger.fail(key, 1, { code: 'X', message: 'x' }, 'terminal'),
        () => ledger.heartbeat(key, 1, 1000),
        () => ledger.release(key, 1),
      ]) {
        await expect(stale()).rejects.toMatchObject({ code: ERROR_CODES.staleEpoch, details: { currentEpoch: 2 } });
      }
      const r = await row(key);
      expect(r).toMatchObject({ status: 'locked', epoch: 2, result: null });
      expect(ledger.metrics.staleWrites).toBeGreaterThanOrEqual(4);
      await later.complete(key, 2, 'winner');
      expect((await row(key)).result).toBe('winner');
    } finally {
      await later.close();
    }
  });

  it('lease expiry with downstream none: the record becomes unknown and is never claimed again', async () => {
    const key = newKey();
    const first = await ledger.claim(claimOf(key, { leaseMs: 1_000, downstream: 'none' }));
    if (first.kind !== 'acquired') throw new Error('expected acquired');
    const later = t.ledger({ clockOffsetMs: 1_500 });
    try {
      expect(await later.claim(claimOf(key, { downstream: 'none' }))).toMatchObject({
        kind: 'unknown',
        transitioned: true,
        epoch: 2,
        error: { code: 'IDEMPOTENCY_LEASE_EXPIRED' },
      });
      expect(await later.claim(claimOf(key, { downstream: 'none' }))).toMatchObject({
        kind: 'unknown',
        transitioned: false,
      });
      await expect(ledger.complete(key, 1, 'late')).rejects.toMatchObject({ code: ERROR_CODES.staleEpoch });
      expect((await row(key)).status).toBe('unknown');
    } finally {
      await later.close();
    }
  });

  it('heartbeat extends the lease of the current epoch', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key, { leaseMs: 1_000 }));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    const hb = await ledger.heartbeat(key, a.epoch, 20_000);
    expect(hb.leaseExpiresAt.getTime()).toBeGreaterThan(a.leaseExpiresAt.getTime() + 15_000);
    const later = t.ledger({ clockOffsetMs: 1_500 });
    try {
      expect((await later.claim(claimOf(key))).kind).toBe('inProgress');
    } finally {
      await later.close();
    }
  });
});

describe('release, retryable failure, invalidate, resolve', () => {
  it('release and retryable failure make the key claimable with epoch + 1, same input only', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.fail(key, a.epoch, { code: 'ETIMEDOUT', message: 'timeout' }, 'retryable');
    expect(await row(key)).toMatchObject({ status: 'released', retryable: true, error: { code: 'ETIMEDOUT' } });
    expect((await ledger.claim(claimOf(key, { fingerprint: 'other' }))).kind).toBe('conflict');
    const b = await ledger.claim(claimOf(key));
    expect(b).toMatchObject({ kind: 'acquired', epoch: 2, transition: 'reclaimed' });
    await ledger.release(key, 2);
    expect(await ledger.claim(claimOf(key))).toMatchObject({ kind: 'acquired', epoch: 3 });
  });

  it('invalidate evicts a completed key, fences a holder, and allows new input', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.complete(key, a.epoch, 'first');
    const inv = await ledger.invalidate(key);
    expect(inv).toMatchObject({ previousStatus: 'completed', epoch: 2 });
    const b = await ledger.claim(claimOf(key, { fingerprint: 'new-input' }));
    expect(b).toMatchObject({ kind: 'acquired', epoch: 3, transition: 'reclaimed_after_invalidation' });
    await ledger.invalidate(key);
    await expect(ledger.complete(key, 3, 'late')).rejects.toMatchObject({ code: ERROR_CODES.staleEpoch });
    await expect(ledger.invalidate(newKey())).rejects.toMatchObject({ code: ERROR_CODES.illegalTransition });
  });

  it('resolve settles only unknown records', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key, { downstream: 'none' }));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await expect(ledger.resolve(key, { committed: false })).rejects.toMatchObject({
      code: ERROR_CODES.illegalTransition,
      details: { from: 'locked' },
    });
    await ledger.markUnknown(key, a.epoch, { code: 'ECONNRESET', message: 'socket hang up' });
    await ledger.resolve(key, { committed: true, result: { chargeId: 'ch_1' } });
    expect(await ledger.claim(claimOf(key))).toMatchObject({ kind: 'completed', result: { chargeId: 'ch_1' } });
    await expect(ledger.resolve(key, { committed: false })).rejects.toMatchObject({ details: { from: 'completed' } });

    const k2 = newKey();
    const b = await ledger.claim(claimOf(k2));
    if (b.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.markUnknown(k2, b.epoch, { code: 'E', message: 'e' });
    await ledger.resolve(k2, { committed: false });
    expect(await ledger.claim(claimOf(k2))).toMatchObject({ kind: 'acquired', transition: 'reclaimed' });
  });

  it('a second completion by the same epoch is an illegal transition, not a stale epoch', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.complete(key, a.epoch, 1);
    await expect(ledger.complete(key, a.epoch, 2)).rejects.toMatchObject({ code: ERROR_CODES.illegalTransition });
    expect((await row(key)).result).toBe(1);
  });
});

describe('bad input', () => {
  it.each([
    ['empty namespace', { namespace: '', resourceKey: 'r', version: 'v1' }],
    ['oversized resourceKey', { namespace: 'n', resourceKey: 'x'.repeat(513), version: 'v1' }],
    ['non-string version', { namespace: 'n', resourceKey: 'r', version: 2 }],
    ['control character', { namespace: 'n\u0000', resourceKey: 'r', version: 'v1' }],
  ])('%s is refused with a clear error', async (_name, key) => {
    await expect(ledger.claim(claimOf(key as IdempotencyKey))).rejects.toMatchObject({
      code: ERROR_CODES.invalidKey,
      name: 'InvalidIdempotencyKeyError',
    });
  });

  it('non-JSON and oversized results are refused and the row is unchanged', async () => {
    const key = newKey();
    const a = await ledger.claim(claimOf(key));
    if (a.kind !== 'acquired') throw new Error('expected acquired');
    const before = await row(key);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const bad of [undefined, () => 1, 10n, Number.NaN, cyclic, new Map()]) {
      await expect(ledger.complete(key, a.epoch, bad)).rejects.toMatchObject({ code: ERROR_CODES.serialization });
    }
    await expect(ledger.complete(key, a.epoch, { blob: 'x'.repeat(10 * 1024 * 1024) })).rejects.toMatchObject({
      code: ERROR_CODES.tooLarge,
      details: { limit: 1024 * 1024 },
    });
    expect(await row(key)).toEqual(before);
  });

  it('lease and retention must be positive whole milliseconds', async () => {
    await expect(ledger.claim(claimOf(newKey(), { leaseMs: 0 }))).rejects.toMatchObject({ code: ERROR_CODES.config });
    await expect(ledger.claim(claimOf(newKey(), { retentionMs: -1 }))).rejects.toMatchObject({
      code: ERROR_CODES.config,
    });
  });
});

describe('sweep', () => {
  it('deletes expired terminal rows in bounded batches and never locked or unknown rows', async () => {
    const keys = Array.from({ length: 5 }, () => newKey());
    for (const k of keys) {
      const a = await ledger.claim(claimOf(k, { retentionMs: 1_000 }));
      if (a.kind !== 'acquired') throw new Error('expected acquired');
      await ledger.complete(k, a.epoch, 'x');
    }
    const locked = newKey();
    await ledger.claim(claimOf(locked, { leaseMs: 1_000 }));
    const unknown = newKey();
    const u = await ledger.claim(claimOf(unknown));
    if (u.kind !== 'acquired') throw new Error('expected acquired');
    await ledger.markUnknown(unknown, u.epoch, { code: 'E', message: 'e' });
    const future = t.ledger({ clockOffsetMs: 10 * 24 * 3600_000 });
    const pool = t.pool(2);
    try {
      // Their transitions' audit events are not stored yet: the rows (and their record of
      // transitions) stay, each reported pending.
      const before = await future.sweepPage(100, undefined, transitionEventIds);
      expect(before.deleted).toBe(0);
      expect(before.pending.map((r) => r.key)).toEqual(expect.arrayContaining(keys.map(boundedKey)));
      for (const k of keys) expect(await row(k)).toBeDefined();
      // Once every event of a row is stored, the row goes.
      const store = new AuditStore(pool, t.schema);
      await store.writeBatch(before.pending.flatMap((r) => eventsForRecord(r)));
      let total = 0;
      for (;;) {
        const n = await future.sweepExpired(2, transitionEventIds);
        expect(n).toBeLessThanOrEqual(2);
        total += n;
        if (n === 0) break;
      }
      expect(total).toBeGreaterThanOrEqual(5);
      for (const k of keys) expect(await row(k)).toBeUndefined();
      expect((await row(locked)).status).toBe('locked');
      expect((await row(unknown)).status).toBe('unknown');
    } finally {
      await future.close();
      await pool.end();
    }
  });
});

describe('stored fingerprints', () => {
  it('a digest is kept as its 32 bytes, any other text as itself; each replays, and a conflict names the one stored', async () => {
    const digest = fingerprint('assets.create', { asset: 'b' });
    // Around the digest test (64 bytes, none outside [0-9a-f]): case, length, one other
    // character, multibyte text of 64 and of 32 bytes, a trailing line break.
    const texts = [
      digest,
      'x'.repeat(32),
      'x'.repeat(31),
      'kfp1:k1:é',
      'f',
      digest.toUpperCase(),
      digest.slice(1),
      `${digest}a`,
      `g${digest.slice(1)}`,
      'é'.repeat(32),
      'é'.repeat(16),
      `${digest.slice(1)}\n`,
    ];
    for (const fp of texts) {
      const key = newKey();
      const c = await ledger.claim(claimOf(key, { fingerprint: fp }));
      if (c.kind !== 'acquired') throw new Error(c.kind);
      await ledger.complete(key, c.epoch, { fp });
      expect(await ledger.claim(claimOf(key, { fingerprint: fp }))).toMatchObject({ kind: 'completed' });
      expect((await ledger.get(key))?.fingerprint).toBe(fp);
      const other = await ledger.claim(claimOf(key, { fingerprint: `${fp}0` }));
      expect(other).toMatchObject({ kind: 'conflict', storedFingerprint: fp, fingerprint: `${fp}0` });
      const bytes = await t.query<{ n: number }>(
        `select octet_length(fingerprint) as n from ${t.schema}.idempotency_ledger where key = $1`,
        [boundedKey(key)],
      );
      const utf8 = Buffer.byteLength(fp);
      expect(bytes.rows[0]?.n, fp).toBe(fp === digest ? 32 : utf8 + (utf8 === 32 ? 1 : 0));
    }
  });
});

describe('job id and queue of a completed row', () => {
  it('are cleared from the columns by the completion and read back from the claim in the record', async () => {
    const key = newKey();
    const c = await ledger.claim(claimOf(key, { jobId: 'idem_job-1', queue: 'charges', owner: 'w1' }));
    if (c.kind !== 'acquired') throw new Error(c.kind);
    // A fresh claim leaves the columns null (migration 0016): while the key is held, the claim's
    // entry in the record names the job (the stale-lock redrive reads it there).
    expect(await row(key)).toMatchObject({ job_id: null, queue: null });
    expect(await ledger.get(key)).toMatchObject({ jobId: 'idem_job-1', queue: 'charges', status: 'locked' });
    await ledger.complete(key, c.epoch, { ok: true });
    expect(await row(key)).toMatchObject({ job_id: null, queue: null });
    expect(await ledger.get(key)).toMatchObject({ jobId: 'idem_job-1', queue: 'charges', status: 'completed' });
    // Invalidated, then claimed by another job: the record names the newest claim's job.
    await ledger.invalidate(key, { actorId: 'ops', reason: 'test' });
    const again = await ledger.claim(claimOf(key, { jobId: 'idem_job-2', queue: 'refunds' }));
    if (again.kind !== 'acquired') throw new Error(again.kind);
    await ledger.complete(key, again.epoch, { ok: 2 });
    expect(await ledger.get(key)).toMatchObject({ jobId: 'idem_job-2', queue: 'refunds', epoch: again.epoch });
  });

  it('a row completed with no record of transitions before (written before the record) keeps its columns', async () => {
    const key = newKey();
    const c = await ledger.claim(claimOf(key, { jobId: 'idem_old', queue: 'legacy' }));
    if (c.kind !== 'acquired') throw new Error(c.kind);
    // As such a row was stored: the job in the columns, no record.
    await t.query(
      `update ${t.schema}.idempotency_ledger set transitions = null, job_id = 'idem_old', queue = 'legacy' where key = $1`,
      [boundedKey(key)],
    );
    await ledger.complete(key, c.epoch, { ok: true });
    expect(await row(key)).toMatchObject({ job_id: 'idem_old', queue: 'legacy' });
    expect(await ledger.get(key)).toMatchObject({ jobId: 'idem_old', queue: 'legacy' });
  });
});

describe('database times', () => {
  it("a fresh claim's and a completion's times are the row's, to the millisecond, as the audit backfill reads them", async () => {
    const keys = Array.from({ length: 20 }, () => newKey());
    // Claimed together, so they travel in one multi-row insert.
    const claims = await Promise.all(keys.map((k) => ledger.claim(claimOf(k, { leaseMs: 12_345 }))));
    for (const [i, key] of keys.entries()) {
      const c = claims[i];
      if (c?.kind !== 'acquired') throw new Error(String(c?.kind));
      const r = await row(key);
      // A new row stores one time, its last write's (the claim's time is its record's).
      expect(c.at.getTime()).toBe((r.updated_at as Date).getTime());
      expect(c.at.getTime()).toBe((await ledger.get(key))?.claimedAt.getTime());
      expect(c.leaseExpiresAt.getTime()).toBe((r.lease_expires_at as Date).getTime());
      expect(c).toMatchObject({ epoch: 1, transition: 'claimed' });
      const done = await ledger.complete(key, c.epoch, { i });
      expect(done.at.getTime()).toBe(((await row(key)).updated_at as Date).getTime());
    }
  });

  it("a replay's and an in-progress answer's times are the row's, to the millisecond", async () => {
    const done = newKey();
    const c = await ledger.claim(claimOf(done));
    if (c.kind !== 'acquired') throw new Error(c.kind);
    await ledger.complete(done, c.epoch, { ok: true });
    const replay = await ledger.claim(claimOf(done));
    if (replay.kind !== 'completed') throw new Error(replay.kind);
    const r = await row(done);
    // Both derived from the completion's time, which the row stores as its last write's.
    expect(replay.completedAt.getTime()).toBe((r.updated_at as Date).getTime());
    expect(replay.expiresAt.getTime()).toBe((r.updated_at as Date).getTime() + 60_000);
    expect(replay.result).toEqual({ ok: true });

    const held = newKey();
    await ledger.claim(claimOf(held));
    const busy = await ledger.claim(claimOf(held));
    if (busy.kind !== 'inProgress') throw new Error(busy.kind);
    expect(busy.leaseExpiresAt.getTime()).toBe(((await row(held)).lease_expires_at as Date).getTime());
    expect(busy.at.getTime()).toBeGreaterThanOrEqual(((await row(held)).updated_at as Date).getTime());
  });
});

describe('text Postgres cannot store', () => {
  it('a result with a NUL character is refused alone; the completions batched with it land', async () => {
    const keys = Array.from({ length: 6 }, () => newKey());
    const claims = await Promise.all(keys.map((k) => ledger.claim(claimOf(k))));
    const epochs = claims.map((c) => (c.kind === 'acquired' ? c.epoch : Number.NaN));
    // Completed in one turn of the event loop, so they would share one statement.
    const done = await Promise.allSettled(
      keys.map((k, i) => ledger.complete(k, epochs[i] as number, i === 2 ? { note: 'a\u0000b' } : { i })),
    );
    expect(done.map((d) => d.status)).toEqual([
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
      'fulfilled',
      'fulfilled',
    ]);
    expect((done[2] as PromiseRejectedResult).reason).toMatchObject({ code: ERROR_CODES.serialization });
    for (const [i, k] of keys.entries()) expect((await row(k)).status).toBe(i === 2 ? 'locked' : 'completed');
    // A literal backslash followed by "u0000" is ordinary text.
    const c = await ledger.claim(claimOf(newKey()));
    if (c.kind !== 'acquired') throw new Error(c.kind);
    await expect(ledger.complete(c.key, c.epoch, { note: '\\u0000' })).resolves.toMatchObject({
      result: { note: '\\u0000' },
    });
  });

  it('NUL and lone surrogates in free text (job id, error message cut mid-emoji) are stored as U+FFFD', async () => {
    const key = newKey();
    const c = await ledger.claim(claimOf(key, { jobId: 'job\u0000one', queue: 'q\ud800' }));
    if (c.kind !== 'acquired') throw new Error(c.kind);
    // 1999 characters and an emoji: the 2000-character cut leaves half of it.
    const message = `${'x'.repeat(MAX_ERROR_MESSAGE_LENGTH - 1)}\u{1F600}`;
    await ledger.fail(key, c.epoch, { code: 'E\u0000', message }, 'terminal');
    const r = await row(key);
    // Stored in the claim's entry of the record (a fresh claim leaves the columns null).
    expect(await ledger.get(key)).toMatchObject({ jobId: 'job\uFFFDone', queue: 'q\uFFFD' });
    expect(r.error.code).toBe('E\uFFFD');
    expect(r.error.message).toBe(`${'x'.repeat(MAX_ERROR_MESSAGE_LENGTH - 1)}\uFFFD`);
  });
});

describe('lease keeper', () => {
  /** A keeper on a freshly claimed key, following `outer` (BullMQ's signal) when given. */
  async function keeperOn(key: IdempotencyKey, leaseMs: number, outer?: AbortSignal): Promise<LeaseKeeper> {
    const claim = await ledger.claim(claimOf(key, { leaseMs }));
    if (claim.kind !== 'acquired') throw new Error(claim.kind);
    return new LeaseKeeper({
      ledger,
      key: boundedKey(key),
      epoch: claim.epoch,
      leaseMs,
      granted: claim.leaseExpiresAt,
      outer,
    });
  }

  it('makes its signal on first read: a lease lost before that read is already aborted', async () => {
    const key = newKey();
    const keeper = await keeperOn(key, 300);
    try {
      await ledger.invalidate(key); // fences epoch 1: the next renewal finds it stale
      await waitFor(() => keeper.lost !== undefined, 'the renewal to find the lease taken over', 3_000);
      expect(keeper.signal.aborted).toBe(true);
      expect(keeper.signal.reason).toBeInstanceOf(LeaseLostError);
      expect((keeper.signal.reason as LeaseLostError).reason).toBe('lease_taken_over');
      expect(keeper.signal.reason).toBeInstanceOf(IdempotencyError);
      expect(keeper.signal.reason).toMatchObject({ code: 'IDEMPOTENCY_LEASE_LOST', details: { epoch: 1 } });
    } finally {
      keeper.stop();
    }
  });

  it("follows BullMQ's signal, whether it aborted before or after the first read", async () => {
    const before = new AbortController();
    before.abort(new Error('cancelled early'));
    const early = await keeperOn(newKey(), 30_000, before.signal);
    expect(early.signal.aborted).toBe(true);
    expect((early.signal.reason as Error).message).toBe('cancelled early');
    early.stop();

    const after = new AbortController();
    const late = await keeperOn(newKey(), 30_000, after.signal);
    const signal = late.signal;
    expect(signal.aborted).toBe(false);
    after.abort(new Error('cancelled late'));
    expect(signal.aborted).toBe(true);
    expect(late.lost).toBeUndefined(); // a cancellation is not a lost lease
    late.stop();
  });
});
