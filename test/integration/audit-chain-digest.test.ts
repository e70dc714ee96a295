import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { auditBatchJob, decodeAuditBatch } from '../../src/audit/batch-codec.js';
import { CHAIN_DIGEST_VERSION, microsTextSql } from '../../src/audit/chain-sql.js';
import { canonicalJson, eventColumnsDigest, eventDigestV4, eventMicros } from '../../src/audit/event-digest.js';
import { COLUMNS } from '../../src/audit/insert-statement.js';
import { createAuditPartitions } from '../../src/audit/partitions.js';
import { verifyAuditChains } from '../../src/audit/verify-chain.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';

/*
 * The digest the store chains (version 4): the writer hashes the columns and the time, which the
 * statement stores as the writer read it, and `verify` recomputes both from the row. Whatever the event holds
 * (JSON values jsonb renders otherwise than JavaScript wrote them, key orders, times with more
 * digits than Postgres keeps, any offset, texts a database stores otherwise), a stored event
 * verifies clean, and any change of a value is found.
 */

const t = new TestContext('audit-chain-digest');
let pool: pg.Pool;
const policy = defineRedactionPolicy({
  version: 'chain-digest-1',
  hmacKeys: [{ id: 'k1', secret: 'an-audit-chain-digest-test-key-of-32-bytes' }],
});

const today = new Date().toISOString().slice(0, 10);
/** Times of today in forms the event schema takes: digits past microseconds (rounded by Postgres), offsets. */
const TIMES = [
  `${today}T12:00:00Z`,
  `${today}T12:00:00.1Z`,
  `${today}T12:00:00.123456Z`,
  `${today}T12:00:00.1234564Z`,
  `${today}T12:00:00.1234565Z`,
  `${today}T12:00:00.999999949Z`,
  `${today}T12:00:00.9999996Z`,
  `${today}T17:30:00.000001+05:30`,
  `${today}T08:00:00.5-04:00`,
];
/** Details whose stored jsonb text differs from what JavaScript wrote, or that JSON.stringify treats specially. */
const DETAILS: Record<string, unknown>[] = [
  { b: 1, a: 2, nested: { z: [3, { y: 1, x: 2 }], w: null } },
  { big: 1e21, small: 1.5e-7, frac: 0.1 + 0.2, neg: -0, int: 2 ** 60, exp: 123e-20 },
  { emoji: '😀 café ß', rtl: 'שלום', nul: 'a\tb\nc"d\\e', empty: '', '': 'empty key' },
  { '10': 'ten', '2': 'two', a: 'letter', é: 'accent', Z: 'upper' },
  { when: new Date(Date.UTC(2026, 0, 2)), gone: undefined, fn: () => 1, nan: Number.NaN, arr: [undefined, Infinity] },
  { deep: { a: { b: { c: { d: { e: [1, [2, [3, [4]]]] } } } } } },
];

const event = (i: number): AuditEvent => ({
  ...sampleAuditEvent('chain-digest', String(i)),
  createdAt: TIMES[i % TIMES.length] as string,
  seq: i % 3 === 0 ? undefined : i,
  taskId: i % 2 ? `task-${i}` : undefined,
  reasonCode: i % 4 === 1 ? 'policy.ok' : undefined,
  epoch: i % 5 === 0 ? undefined : (i % 7) + 1,
  attemptsMade: i % 3,
  details: DETAILS[i % DETAILS.length] as Record<string, unknown>,
});

beforeAll(async () => {
  await t.setup();
  pool = t.pool(4);
  await createAuditPartitions(
    pool,
    t.schema,
    new Date(Date.now() - 2 * 86_400_000),
    new Date(Date.now() + 2 * 86_400_000),
  );
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

const verify = () => verifyAuditChains(pool, t.schema);

describe('canonical JSON', () => {
  it('has JSON.stringify’s semantics with keys sorted', () => {
    for (const d of DETAILS) {
      const c = canonicalJson(d) as string;
      expect(JSON.parse(c)).toEqual(JSON.parse(JSON.stringify(d)));
      // The same value with its keys in another order: the same text.
      const reversed = Object.fromEntries(Object.entries(JSON.parse(JSON.stringify(d))).reverse());
      expect(canonicalJson(reversed)).toBe(c);
    }
    expect(canonicalJson(undefined)).toBeUndefined();
    expect(canonicalJson({ b: [1, undefined], a: Number.POSITIVE_INFINITY })).toBe('{"a":null,"b":[1,null]}');
  });

  it('an event and the same event read back from JSON have the same inner digest', () => {
    for (let i = 0; i < 24; i++) {
      const e = event(i);
      expect(eventColumnsDigest(JSON.parse(JSON.stringify(e)))).toEqual(eventColumnsDigest(e));
    }
    // A lone surrogate is stored as U+FFFD: the digest hashes what is stored.
    const lone = { ...event(1), taskId: 'task-\ud800-x' };
    expect(eventColumnsDigest(lone)).toEqual(eventColumnsDigest({ ...lone, taskId: 'task-\ufffd-x' }));
  });

  it('toJSON is applied once, as JSON.stringify applies it, whatever the keys it returns', () => {
    const odd: Record<string, unknown>[] = [
      // A toJSON whose result holds a `toJSON` of its own: data, not called again.
      { v: { toJSON: () => ({ toJSON: 5, b: [2, undefined, () => 1], a: 1 }) } },
      { v: { toJSON: () => ({ b: { toJSON: () => 'inner' }, a: new Number(3), s: new String('s') }) } },
      // Index-like keys (JavaScript orders them first, whatever the insertion) beside others, nested.
      { v: [{ b: 1, '07': 2, '7': 3, a: { '1': 1, '0': 0 } }], w: { toJSON: () => ({ '9': 9, '10': 10 }) } },
      { f: () => 1, s: Symbol('s'), u: undefined, n: -0, big: 1e300, t: { toJSON: 'not a function' } },
    ];
    for (const details of odd) {
      const e = { ...event(2), details };
      const read = JSON.parse(JSON.stringify(e));
      expect(eventColumnsDigest(read)).toEqual(eventColumnsDigest(e));
      // And the key order of what is read back (jsonb has its own) does not matter either.
      read.details = JSON.parse(canonicalJson(read.details) as string, (_k, v) =>
        v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).reverse()) : v,
      );
      expect(eventColumnsDigest(read)).toEqual(eventColumnsDigest(e));
    }
  });
});

describe('a __proto__ key', () => {
  it('is hashed as a key under version 4, and left out as version 3 always did', () => {
    const withKey = { ...event(2), details: JSON.parse('{"a":1,"__proto__":{"x":1}}') };
    const changed = { ...event(2), details: JSON.parse('{"a":1,"__proto__":{"x":2}}') };
    const without = { ...event(2), details: { a: 1 } };
    const m = eventMicros(withKey.createdAt) as string;
    expect(eventDigestV4(withKey, m)).not.toEqual(eventDigestV4(changed, m));
    expect(eventDigestV4(withKey, m)).not.toEqual(eventDigestV4(without, m));
    expect(eventColumnsDigest(withKey)).toEqual(eventColumnsDigest(without));
  });
});

describe('stored and verified', () => {
  const N = 60;
  beforeAll(async () => {
    const store = new AuditStore(pool, t.schema, policy, { chainSlots: 2 });
    const events = Array.from({ length: N }, (_, i) => event(i));
    // As objects, as JSON text (passed through as it is), and as the writer reads a job: the
    // events parsed from the batch's bytes, and the bytes passed on as jsonb's binary form.
    const third = Math.floor(N / 3);
    const a = await store.writeBatch(events.slice(0, third));
    const middle = events.slice(third, 2 * third);
    const b = await store.writeBatch(JSON.parse(JSON.stringify(middle)), JSON.stringify(middle));
    const decoded = await decodeAuditBatch((await auditBatchJob(events.slice(2 * third))).data);
    expect(Buffer.isBuffer(decoded.json)).toBe(true);
    const c = await store.writeBatch(decoded.events, decoded.json);
    await store.close();
    expect(a.inserted + b.inserted + c.inserted).toBe(N);
  });

  it('every event is chained under the current version and verifies clean', async () => {
    const v = await t.query(`select chain_v, count(*)::int as n from ${t.schema}.audit_events group by 1`);
    expect(v.rows).toEqual([{ chain_v: CHAIN_DIGEST_VERSION, n: N }]);
    expect(CHAIN_DIGEST_VERSION).toBe(4);
    const r = await verify();
    expect(r.problems).toEqual([]);
    expect(r).toMatchObject({ ok: true, events: N });
  });

  it('verifies through a connection it is given (a client checked out of a pool), in the caller’s snapshot', async () => {
    const client = await pool.connect();
    try {
      await client.query('begin isolation level repeatable read read only');
      const r = await verifyAuditChains(client, t.schema);
      await client.query('commit');
      expect(r.problems).toEqual([]);
      expect(r).toMatchObject({ ok: true, events: N });
    } finally {
      client.release();
    }
  });

  it('a change of any value is found, and rewriting a value as itself is not', async () => {
    const row = (
      await t.query(`select event_id from ${t.schema}.audit_events where details ? 'big' order by chain_seq limit 1`)
    ).rows[0] as { event_id: string };
    const id = row.event_id;
    const changes: [string, string][] = [
      ['details', `jsonb_set(details, '{frac}', '0.3')`],
      ['details', `jsonb_set(details, '{big}', '1e21'::jsonb || '0')`],
      ['created_at', `created_at + interval '1 microsecond'`],
      ['seq', 'seq + 1'],
      ['attempts_made', 'coalesce(attempts_made, 0) + 1'],
      ['task_id', `coalesce(task_id, '') || 'x'`],
      ['redaction', `coalesce(redaction, '{}'::jsonb) || '{"policyVersion":"other"}'`],
    ];
    for (const [column, expr] of changes) {
      // The value as text and its type, to write back exactly (a JavaScript Date would drop microseconds).
      const before = (
        await t.query(
          `select ${column}::text as v, pg_typeof(${column})::text as type from ${t.schema}.audit_events where event_id = $1`,
          [id],
        )
      ).rows[0] as { v: string | null; type: string };
      await t.query(`update ${t.schema}.audit_events set ${column} = ${expr} where event_id = $1`, [id]);
      const r = await verify();
      expect(r.ok, column).toBe(false);
      expect(r.problems[0], column).toMatchObject({ kind: 'changed', eventId: id });
      await t.query(`update ${t.schema}.audit_events set ${column} = $2::${before.type} where event_id = $1`, [
        id,
        before.v,
      ]);
      expect((await verify()).problems, column).toEqual([]);
    }
    // The same values written again, in another text (jsonb keeps the value, not its text).
    await t.query(
      `update ${t.schema}.audit_events set details = (details::text)::jsonb, created_at = created_at where event_id = $1`,
      [id],
    );
    expect((await verify()).problems).toEqual([]);
  });
});

describe('a chain longer than a page', () => {
  it('verifies across pages, and a change past the first page is named', async () => {
    const s2 = `${t.schema}`;
    const store = new AuditStore(pool, s2, policy, { chainSlots: 1 });
    const n = 12_000;
    const created = new Date().toISOString();
    const events = Array.from({ length: n }, (_, i) => ({
      ...sampleAuditEvent('chain-digest-pages', String(i)),
      createdAt: created,
      details: { i },
    }));
    for (let i = 0; i < n; i += 3000) expect((await store.writeBatch(events.slice(i, i + 3000))).inserted).toBe(3000);
    await store.close();
    const clean = await verify();
    expect(clean.problems).toEqual([]);
    expect(clean.events).toBeGreaterThanOrEqual(n);
    const late = (
      await t.query(
        `select event_id from ${s2}.audit_events where chain_slot = 0 and details->>'i' is not null order by chain_seq desc limit 1 offset 100`,
      )
    ).rows[0] as { event_id: string };
    const details = (await t.query(`select details from ${s2}.audit_events where event_id = $1`, [late.event_id]))
      .rows[0]?.details;
    await t.query(`update ${s2}.audit_events set details = '{"i": -1}' where event_id = $1`, [late.event_id]);
    const r = await verify();
    expect(r.problems).toHaveLength(1);
    expect(r.problems[0]).toMatchObject({ kind: 'changed', eventId: late.event_id });
    await t.query(`update ${s2}.audit_events set details = $2 where event_id = $1`, [late.event_id, details]);
    expect((await verify()).problems).toEqual([]);
  });
});

describe('the time the writer reads', () => {
  it('is the time Postgres reads from the same text, to the microsecond, over 2,000 random times of any year', async () => {
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed % n;
    };
    const pad = (n: number, w: number) => String(n).padStart(w, '0');
    const times = Array.from({ length: 2000 }, () => {
      const year = 1 + rnd(9999);
      const month = 1 + rnd(12);
      const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
      const day = 1 + rnd([31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1] as number);
      const fraction = ['', `.${pad(rnd(10), 1)}`, `.${pad(rnd(1000), 3)}`, `.${pad(rnd(1_000_000), 6)}`][rnd(4)];
      // Postgres reads offsets up to 15:59 (the schema takes up to 23:59: the writer reads those too).
      const offset = rnd(3) === 0 ? 'Z' : `${rnd(2) ? '+' : '-'}${pad(rnd(16), 2)}:${pad(rnd(60), 2)}`;
      return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T${pad(rnd(24), 2)}:${pad(rnd(60), 2)}:${pad(rnd(60), 2)}${fraction}${offset}`;
    });
    const read = (
      await pool.query(
        `select t, (extract(epoch from t::timestamptz) * 1000000)::bigint::text as m from unnest($1::text[]) as t`,
        [times],
      )
    ).rows as { t: string; m: string }[];
    const differ = read.filter((r) => eventMicros(r.t) !== r.m);
    expect(differ).toEqual([]);
    expect(eventMicros('2026-12-03 09:00:00Z')).toBeUndefined();
    expect(eventMicros('1970-01-02T00:00:00+23:59')).toBe(String(60_000_000));
  });

  it('is the time stored, whatever digits past the microsecond or offset the event has', async () => {
    const store = new AuditStore(pool, t.schema, policy, { chainSlots: 1 });
    const events = TIMES.map((createdAt, i) => ({ ...sampleAuditEvent('chain-digest-times', String(i)), createdAt }));
    expect((await store.writeBatch(events)).inserted).toBe(TIMES.length);
    await store.close();
    const stored = await t.query(
      `select event_id, ${microsTextSql('e')} as m from ${t.schema}.audit_events e where event_id = any($1)`,
      [events.map((e) => e.eventId)],
    );
    expect(new Map(stored.rows.map((r) => [r.event_id, r.m]))).toEqual(
      new Map(events.map((e) => [e.eventId, eventMicros(e.createdAt)])),
    );
    expect((await verify()).problems).toEqual([]);
  });
});

describe('events linked by batch', () => {
  type Row = { event_id: string; name: string; seq: number; ends: boolean };
  /** The digest an event's row would have if it had been written as it now stands. */
  const digestOfRow = async (eventId: string) => {
    const fields = COLUMNS.filter(([c]) => c !== 'created_at')
      .map(([c, f]) => `e.${c} as "${f}"`)
      .join(', ');
    const r = (
      await t.query(
        `select ${fields}, ${microsTextSql('e')} as "micros" from ${t.schema}.audit_events e where event_id = $1`,
        [eventId],
      )
    ).rows[0] as Record<string, unknown> & { micros: string };
    return eventDigestV4(r, r.micros);
  };
  const rows = async () =>
    (
      await t.query(
        `select event_id, (details->>'b') || '-' || (details->>'i') as name, chain_seq::int as seq, chain_link is not null as ends
         from ${t.schema}.audit_events where details->>'batch' = 'linked' order by chain_slot, chain_seq`,
      )
    ).rows as Row[];

  beforeAll(async () => {
    const store = new AuditStore(pool, t.schema, policy, { chainSlots: 1 });
    const created = new Date().toISOString();
    for (let b = 0; b < 3; b++) {
      const events = Array.from({ length: 10 }, (_, i) => ({
        ...sampleAuditEvent('chain-digest-batches', `${b}-${i}`),
        createdAt: created,
        details: { batch: 'linked', b, i },
      }));
      expect((await store.writeBatch(events)).inserted).toBe(10);
    }
    await store.close();
  });

  it('each batch carries one link, on its last event, and the chain head is the last link', async () => {
    const r = await rows();
    // Batch by batch in the chain; in a batch, events of one time in their ids' order.
    expect(r.map((x) => x.name.slice(0, 1)).join('')).toBe('000000000011111111112222222222');
    expect(r.map((x) => x.ends)).toEqual(r.map((_, i) => i % 10 === 9));
    const head = await t.query(
      `select (select digest from ${t.schema}.audit_chains c where c.slot = e.chain_slot and c.seq = e.chain_seq) = e.chain_link as same
       from ${t.schema}.audit_events e where e.event_id = $1`,
      [(r.at(-1) as { event_id: string }).event_id],
    );
    expect(head.rows[0]?.same).toBe(true);
    expect((await verify()).problems).toEqual([]);
  });

  it('an event rewritten together with its digest is found by its batch', async () => {
    const r = await rows();
    const [first, target, last] = [r[10], r[14], r[19]] as [Row, Row, Row];
    const before = await t.query(`select reason_code, chain_digest from ${t.schema}.audit_events where event_id = $1`, [
      target.event_id,
    ]);
    await t.query(`update ${t.schema}.audit_events set reason_code = 'policy.rewritten' where event_id = $1`, [
      target.event_id,
    ]);
    await t.query(`update ${t.schema}.audit_events set chain_digest = $2 where event_id = $1`, [
      target.event_id,
      await digestOfRow(target.event_id),
    ]);
    const found = await verify();
    expect(found.problems).toHaveLength(1);
    expect(found.problems[0]).toMatchObject({ kind: 'changed', eventId: first.event_id, seq: first.seq });
    expect(found.problems[0]?.message).toContain(`places ${first.seq}..${last.seq}`);
    await t.query(`update ${t.schema}.audit_events set reason_code = $2, chain_digest = $3 where event_id = $1`, [
      target.event_id,
      before.rows[0]?.reason_code,
      before.rows[0]?.chain_digest,
    ]);
    expect((await verify()).problems).toEqual([]);
  });

  it('a batch written again over an event stored that its id no longer names skips it and stays chained', async () => {
    const store = new AuditStore(pool, t.schema, policy, { chainSlots: 1 });
    const created = new Date().toISOString();
    const events = Array.from({ length: 8 }, (_, i) => ({
      ...sampleAuditEvent('chain-digest-absorbing', String(i)),
      createdAt: created,
      details: { batch: 'absorbing', i },
    }));
    expect((await store.writeBatch(events.slice(0, 4))).inserted).toBe(4);
    // The id of a stored event removed by hand: the plain insert meets its row and fails, the
    // absorbing one skips it.
    await t.query(`delete from ${t.schema}.audit_event_ids where event_id = $1`, [events[3]?.eventId]);
    expect((await store.writeBatch(events.slice(3))).inserted).toBe(4);
    expect(store.absorbed).toBe(1);
    await store.close();
    expect((await verify()).problems).toEqual([]);
  });

  it("a batch's link taken away, or moved to another event, is found", async () => {
    const r = await rows();
    const [first, inside, end] = [r[0], r[8], r[9]] as [Row, Row, Row];
    const link = (await t.query(`select chain_link from ${t.schema}.audit_events where event_id = $1`, [end.event_id]))
      .rows[0]?.chain_link as Buffer;
    await t.query(`update ${t.schema}.audit_events set chain_link = null where event_id = $1`, [end.event_id]);
    let found = await verify();
    expect(found.ok).toBe(false);
    expect(found.problems[0]).toMatchObject({ kind: 'changed', eventId: first.event_id });
    await t.query(`update ${t.schema}.audit_events set chain_link = $2 where event_id = $1`, [inside.event_id, link]);
    found = await verify();
    expect(found.ok).toBe(false);
    expect(found.problems[0]).toMatchObject({ kind: 'changed', eventId: first.event_id });
    await t.query(`update ${t.schema}.audit_events set chain_link = null where event_id = $1`, [inside.event_id]);
    await t.query(`update ${t.schema}.audit_events set chain_link = $2 where event_id = $1`, [end.event_id, link]);
    expect((await verify()).problems).toEqual([]);
  });
});
