/**
 * Every ledger transition is recorded by the statement that makes it (the row's `transitions`),
 * for every epoch, with the time the statement returned; the backfill derives one event per
 * recorded transition, under the id the live event has.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { BACKFILL_MARK, buildTimeline, renderTimeline } from '../../src/audit/timeline.js';
import { storableText } from '../../src/db/storable.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { boundedKey, type IdempotencyKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { parseTransitions } from '../../src/ledger/recorded-transition.js';
import { LEDGER_STATEMENTS } from '../../src/ledger/sql/index.js';
import { tablesOf } from '../../src/ledger/sql/statement.js';
import { TRANSITIONS } from '../../src/ledger/transitions.js';
import type { ClaimOptions, Transition } from '../../src/ledger/types.js';
import { TestContext } from '../helpers/context.js';

const t = new TestContext('ledger_transitions');
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

const newKey = (): IdempotencyKey => ({
  namespace: 'acme/pay',
  resourceKey: `order:${++n}:${Math.random()}`,
  version: 'v1',
});
const claimOf = (key: IdempotencyKey, over: Partial<ClaimOptions> = {}): ClaimOptions => ({
  key,
  operation: 'pay',
  fingerprint: fingerprint('pay', { amount: 1 }),
  leaseMs: 30_000,
  retentionMs: 60_000,
  downstream: 'idempotent',
  owner: 'w1',
  jobId: `job-${n}`,
  queue: 'payments',
  taskId: `task-${n}`,
  ...over,
});

/** A claim with no job, queue or task (its recorded claim carries the owner alone). */
function bare({ jobId: _j, queue: _q, taskId: _k, ...rest }: ClaimOptions): ClaimOptions {
  return rest;
}

async function acquire(l: PostgresLedger, options: ClaimOptions) {
  const c = await l.claim(options);
  if (c.kind !== 'acquired') throw new Error(`expected acquired, got ${c.kind}`);
  return c;
}

describe('the record of transitions', () => {
  it('holds every transition of every epoch, at the time each statement returned', async () => {
    const key = newKey();
    const k = boundedKey(key);
    const later = t.ledger({ clockOffsetMs: 120_000 }); // past a 30 s lease and a 60 s retention
    const times: [Transition, number, Date][] = [];
    try {
      const c1 = await acquire(ledger, claimOf(key));
      times.push(['claimed', 1, c1.at]);
      times.push(['released', 1, (await ledger.release(k, 1)).at]);
      const c2 = await acquire(ledger, claimOf(key, { owner: 'w2', jobId: 'job-b' }));
      times.push(['reclaimed', 2, c2.at]);
      // The holder of epoch 2 dies: a claim after its lease takes over.
      const c3 = await acquire(later, claimOf(key, { owner: 'w3', jobId: 'job-c' }));
      expect(c3.transition).toBe('takeover');
      times.push(['takeover', 3, c3.at]);
      times.push(['failed_retryable', 3, (await later.fail(k, 3, { code: 'E_NET', message: 'x' }, 'retryable')).at]);
      const c4 = await acquire(later, claimOf(key));
      times.push(['reclaimed', 4, c4.at]);
      times.push(['completed', 4, (await later.complete(k, 4, { ok: true })).at]);
      const inv = await later.invalidate(k, { actorId: 'alice', reason: 'refund issued twice' });
      times.push(['invalidated', 5, inv.at]);
      const c6 = await acquire(later, claimOf(key));
      times.push(['reclaimed_after_invalidation', 6, c6.at]);
      times.push(['marked_unknown', 6, (await later.markUnknown(k, 6, { code: 'E_TIMEOUT', message: 'x' })).at]);
      times.push([
        'resolved_committed',
        7,
        (await later.resolve(k, { committed: true, result: 1 }, { actorId: 'bob' })).at,
      ]);

      const record = await later.get(k);
      expect(record?.transitions?.map((e) => [e.transition, e.epoch, e.at.getTime()])).toEqual(
        times.map(([tr, e, at]) => [tr, e, at.getTime()]),
      );
      const byEpoch = record?.transitions ?? [];
      expect(byEpoch[2]).toMatchObject({ owner: 'w2', jobId: 'job-b', queue: 'payments' });
      expect(byEpoch[4]).toMatchObject({ errorCode: 'E_NET' });
      expect(byEpoch[7]).toMatchObject({
        actorId: 'alice',
        reason: 'refund issued twice',
        previousStatus: 'completed',
      });
      expect(byEpoch[10]).toMatchObject({ actorId: 'bob' });

      // One event per transition, each under the id its live event has, at its database time.
      const events = eventsForRecord(record as NonNullable<typeof record>);
      expect(events).toHaveLength(times.length);
      expect(new Set(events.map((e) => e.eventId)).size).toBe(times.length);
      expect(events.map((e) => [e.eventId, e.createdAt])).toEqual(
        times.map(([tr, epoch, at]) => [eventIdFor(k, epoch, TRANSITIONS[tr].event, undefined), at.toISOString()]),
      );
      expect(events[2]).toMatchObject({ jobId: 'job-b', action: 'idempotency.claimed', epoch: 2 });
      expect(events[4]).toMatchObject({ jobId: 'job-c', reasonCode: 'E_NET', decision: 'allow' });
      expect(events[7]).toMatchObject({
        actorType: 'user',
        actorId: 'alice',
        action: 'idempotency.invalidated',
        beforeStateRef: 'ledger:completed@4',
        afterStateRef: 'ledger:invalidated@5',
        details: { reason: 'refund issued twice', previousStatus: 'completed', via: 'backfill' },
      });
      expect(events[10]).toMatchObject({
        actorType: 'user',
        actorId: 'bob',
        reasonCode: 'OPERATOR_RESOLVED_COMMITTED',
      });
    } finally {
      await later.close();
    }
  });

  it('is stored compactly: [code, epoch, ms] per transition, times after the first as offsets, facts only when present', async () => {
    const key = newKey();
    const k = boundedKey(key);
    const c = await acquire(ledger, bare(claimOf(key, { owner: 'w"1' })));
    const done = await ledger.complete(k, c.epoch, { ok: true });
    const stored = await t.query<{ transitions: string; namespace: string | null; last_transition: string | null }>(
      `select transitions, namespace, last_transition from ${t.schema}.idempotency_ledger where key = $1`,
      [k],
    );
    const row = stored.rows[0];
    expect(row?.transitions).toBe(`[0,1,${c.at.getTime()},{"o":"w\\"1"}],[6,1,${done.at.getTime() - c.at.getTime()}]`);
    // Derivable columns are left out of a new row; the record gives them back.
    expect(row).toMatchObject({ namespace: null, last_transition: null });
    expect(await ledger.get(k)).toMatchObject({
      namespace: key.namespace,
      resourceKey: key.resourceKey,
      version: key.version,
      lastTransition: 'completed',
      claimTransition: 'claimed',
      claimedAt: c.at,
      createdAt: c.at,
      completedAt: done.at,
    });
  });

  it("a claim's facts of any text (quotes, backslashes, unicode, control characters) come back from its record as given", async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 40, unit: 'grapheme' }),
      fc.constantFrom(
        'w"1',
        'a\\b',
        '{"o":1}',
        '], [0,1',
        'line\nbreak\ttab',
        'ünï ✓ 🎉',
        ' ',
        'nul\u0000',
        'lone\ud800',
      ),
    );
    const maybe = fc.option(text, { nil: undefined });
    await fc.assert(
      fc.asyncProperty(fc.record({ owner: maybe, jobId: maybe, queue: maybe, taskId: maybe }), async (facts) => {
        const key = newKey();
        const given = Object.fromEntries(Object.entries(facts).filter(([, v]) => v !== undefined)) as Record<
          string,
          string
        >;
        const { owner: _o, ...ownerless } = bare(claimOf(key));
        const c = await acquire(ledger, { ...ownerless, ...given });
        const row = (
          await t.query<{ transitions: string }>(
            `select transitions from ${t.schema}.idempotency_ledger where key = $1`,
            [boundedKey(key)],
          )
        ).rows[0];
        const [claimed] = parseTransitions(row?.transitions) ?? [];
        expect(claimed).toEqual({
          transition: 'claimed',
          epoch: 1,
          at: c.at,
          // As stored: a NUL or a lone surrogate Postgres text cannot hold is replaced (storableText).
          ...Object.fromEntries(Object.entries(given).map(([f, v]) => [f, storableText(v)])),
        });
      }),
      { numRuns: 60 },
    );
  });

  it('no index of the ledger covers a column a completion changes (so a completion can be a HOT update)', async () => {
    const changed = ['status', 'result', 'error', 'retryable', 'lease_owner', 'lease_expires_at', 'last_transition'];
    changed.push('completed_at', 'expires_at', 'updated_at', 'transitions');
    const indexed = await t.query<{ name: string; def: string }>(
      `select indexrelid::regclass::text as name, pg_get_indexdef(indexrelid) as def from pg_index
       where indrelid = $1::regclass`,
      [`${t.schema}.idempotency_ledger`],
    );
    expect(indexed.rows.length).toBeGreaterThan(0);
    for (const { def } of indexed.rows) {
      for (const column of changed) expect(def).not.toMatch(new RegExp(`\\b${column}\\b`));
    }
  });

  it('the sweep finds expired rows by the index on sweep_after, and never before their retention from the last transition', async () => {
    const sql = LEDGER_STATEMENTS.sweepCandidates.text(tablesOf(t.schema));
    const pool = t.pool(1);
    try {
      await pool.query('set enable_seqscan = off'); // a small table: the plan the index makes possible
      const plan = await pool.query(`explain ${sql}`, [100, 0, '-infinity', '']);
      expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/idempotency_ledger_sweep_idx/);
    } finally {
      await pool.end();
    }
    // Claimed at 0 s, completed at 20 s (a 30 s lease, a 60 s retention): sweep_after is 60 s,
    // the real expiry 80 s.
    const key = newKey();
    const at = (ms: number) => t.ledger({ clockOffsetMs: ms });
    const done = at(20_000);
    const early = at(70_000);
    const late = at(90_000);
    try {
      const c = await acquire(ledger, claimOf(key));
      expect(await done.complete(boundedKey(key), c.epoch, { ok: true })).toMatchObject({ result: { ok: true } });
      const noEvents = () => [];
      // Other tests' rows of this file may go at either sweep; this key's row only at the second.
      await early.sweepExpired(1000, noEvents);
      expect(await early.get(boundedKey(key))).toMatchObject({ status: 'completed' });
      await late.sweepExpired(1000, noEvents);
      expect(await late.get(boundedKey(key))).toBeNull();
    } finally {
      await Promise.all([done.close(), early.close(), late.close()]);
    }
  });

  it('a takeover on a downstream without idempotency records the move to unknown with its reason', async () => {
    const key = newKey();
    const later = t.ledger({ clockOffsetMs: 60_000 });
    try {
      await acquire(ledger, claimOf(key, { downstream: 'none' }));
      const u = await later.claim(claimOf(key, { downstream: 'none', jobId: 'job-late' }));
      expect(u).toMatchObject({ kind: 'unknown', transitioned: true, epoch: 2 });
      const record = await later.get(boundedKey(key));
      expect(record?.transitions?.map((e) => [e.transition, e.epoch, e.errorCode])).toEqual([
        ['claimed', 1, undefined],
        ['takeover_unknown', 2, 'IDEMPOTENCY_LEASE_EXPIRED'],
      ]);
      const events = eventsForRecord(record as NonNullable<typeof record>);
      expect(events.map((e) => [e.action, e.epoch, e.decision, e.reasonCode])).toEqual([
        ['idempotency.claimed', 1, 'allow', undefined],
        ['idempotency.unknown', 2, 'pending_confirmation', 'IDEMPOTENCY_LEASE_EXPIRED'],
      ]);
    } finally {
      await later.close();
    }
  });

  it('claims and completions batched into one statement each record one transition per key', async () => {
    const keys = Array.from({ length: 30 }, () => newKey());
    const claims = await Promise.all(keys.map((key) => acquire(ledger, claimOf(key))));
    const done = await Promise.all(keys.map((key, i) => ledger.complete(boundedKey(key), claims[i]?.epoch ?? 0, i)));
    for (const [i, key] of keys.entries()) {
      const record = await ledger.get(boundedKey(key));
      expect(record?.transitions?.map((e) => [e.transition, e.at.getTime()])).toEqual([
        ['claimed', claims[i]?.at.getTime()],
        ['completed', done[i]?.at.getTime()],
      ]);
    }
  });

  it('a fenced (stale) write records nothing', async () => {
    const key = newKey();
    const k = boundedKey(key);
    const later = t.ledger({ clockOffsetMs: 60_000 });
    try {
      await acquire(ledger, claimOf(key));
      await acquire(later, claimOf(key));
      await expect(ledger.complete(k, 1, 'late')).rejects.toMatchObject({ code: 'IDEMPOTENCY_STALE_EPOCH' });
      await expect(ledger.release(k, 1)).rejects.toMatchObject({ code: 'IDEMPOTENCY_STALE_EPOCH' });
      const record = await later.get(k);
      expect(record?.transitions?.map((e) => e.transition)).toEqual(['claimed', 'takeover']);
    } finally {
      await later.close();
    }
  });

  it('events of an epoch whose holder died before its emitter flushed are derived and stored once', async () => {
    const key = newKey();
    const k = boundedKey(key);
    const later = t.ledger({ clockOffsetMs: 60_000 });
    const pool = t.pool(2);
    try {
      // Epoch 1 claimed and lost (no live event stored), epoch 2 takes over and completes.
      await acquire(ledger, claimOf(key));
      const c2 = await acquire(later, claimOf(key));
      await later.complete(k, c2.epoch, 'done');
      const store = new AuditStore(pool, t.schema);
      const record = await later.get(k);
      const events = eventsForRecord(record as NonNullable<typeof record>);
      // Written twice (a backfill run again): stored once.
      expect((await store.writeBatch(events)).inserted).toBe(3);
      expect((await store.writeBatch(events)).inserted).toBe(0);
      const stored = await t.query(
        `select action, epoch from ${t.schema}.audit_events where event_id = any($1::text[]) order by created_at, epoch, seq`,
        [events.map((e) => e.eventId)],
      );
      expect(stored.rows.map((r) => [r.action, r.epoch])).toEqual([
        ['idempotency.claimed', 1],
        ['idempotency.takeover', 2],
        ['idempotency.completed', 2],
      ]);
      // The timeline tells both epochs: the first attempt lost its lease, the second completed;
      // every line came from the backfill and is marked so.
      const story = buildTimeline(events, [record as NonNullable<typeof record>]);
      expect(story.attempts.map((at) => [at.epoch, at.start, at.end])).toEqual([
        [1, 'claimed', 'lease_lost'],
        [2, 'takeover', 'completed'],
      ]);
      expect(story.takeovers).toBe(1);
      const text = renderTimeline(story);
      expect(text.split('\n').filter((l) => l.endsWith(BACKFILL_MARK))).toHaveLength(3);
      expect(text).toContain(`${BACKFILL_MARK} written by the backfill`);
      expect(text).toContain('completed (epoch 2)');
    } finally {
      await later.close();
      await pool.end();
    }
  });
});
