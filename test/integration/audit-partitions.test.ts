import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allMigrations } from '../../migrations/index.js';
import { migrate } from '../../migrations/migrate.js';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import type { AuditEmitter } from '../../src/audit/emitter.js';
import { listAuditPartitions, maintainAuditPartitions, partitionFor } from '../../src/audit/partitions.js';
import { sweepLedger } from '../../src/jobs/ledger-sweeper.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { TestContext } from '../helpers/context.js';
import { acquireClaim, payClaim } from '../helpers/ledger-claims.js';
import { tableScans } from '../helpers/table-stats.js';

const t = new TestContext('audit_parts');
const DAY = 86_400_000;
let store: AuditStore;
let pool: ReturnType<TestContext['pool']>;

beforeAll(async () => {
  await t.setup();
  pool = t.pool();
  store = new AuditStore(pool, t.schema);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

function event(id: string, at: Date, extra: Partial<AuditEvent> = {}): AuditEvent {
  return {
    eventId: eventIdFor('parts', id),
    actorType: 'system',
    actorId: 'test',
    action: 'tool.search',
    resourceType: 'index',
    resourceId: 'products',
    decision: 'allow',
    createdAt: at.toISOString(),
    phase: 'outcome',
    taskId: 'task-parts',
    ...extra,
  };
}

const rowsOf = async (schema: string, eventId: string) =>
  (await t.query(`select created_at from ${schema}.audit_events where event_id = $1`, [eventId])).rows.map((r) =>
    (r.created_at as Date).toISOString(),
  );

describe('one stored row per event id on a partitioned table', () => {
  it('the same id with another time (live then backfill, across a partition boundary) stores one row', async () => {
    const live = new Date();
    const backfill = new Date(live.getTime() - 2 * DAY); // another day: another partition
    const e = event('boundary', live);
    expect(partitionFor(live).name).not.toBe(partitionFor(backfill).name);
    expect(await store.writeBatch([e])).toMatchObject({ inserted: 1 });
    expect(await store.writeBatch([{ ...e, createdAt: backfill.toISOString() }])).toMatchObject({
      inserted: 0,
      duplicates: 1,
    });
    expect(await rowsOf(t.schema, e.eventId)).toEqual([live.toISOString()]);
  });

  it('one batch holding the id twice, with two times, stores one row (the earliest)', async () => {
    const a = new Date(Date.now() - DAY);
    const b = new Date();
    const e = event('same-batch', b);
    expect(await store.writeBatch([e, { ...e, createdAt: a.toISOString() }])).toMatchObject({ inserted: 1 });
    expect(await rowsOf(t.schema, e.eventId)).toEqual([a.toISOString()]);
  });

  it('concurrent writers of one id with different times store one row', async () => {
    const stores = [0, 1, 2, 3].map(() => new AuditStore(pool, t.schema));
    const ids = Array.from({ length: 20 }, (_, i) => `race-${i}`);
    await Promise.all(
      stores.map((s, w) =>
        s.writeBatch(ids.map((id, i) => event(id, new Date(Date.now() - ((w + i) % 3) * DAY - w * 1000)))),
      ),
    );
    const dup = await t.query(
      `select event_id, count(*)::int as n from ${t.schema}.audit_events where event_id = any($1) group by event_id`,
      [ids.map((id) => eventIdFor('parts', id))],
    );
    expect(dup.rows).toHaveLength(ids.length);
    expect(dup.rows.every((r) => r.n === 1)).toBe(true);
  });

  it('an event whose row was lost is stored again by a later delivery, under that delivery’s time', async () => {
    const first = new Date(Date.now() - DAY);
    const e = event('lost', first);
    await store.writeBatch([e]);
    await t.query(`delete from ${t.schema}.audit_events where event_id = $1`, [e.eventId]);
    const later = new Date();
    expect(await store.writeBatch([{ ...e, createdAt: later.toISOString() }])).toMatchObject({ inserted: 1 });
    expect(await rowsOf(t.schema, e.eventId)).toEqual([later.toISOString()]);
    // And the id now points at that row: another time still writes nothing.
    await store.writeBatch([{ ...e, createdAt: first.toISOString() }]);
    expect(await rowsOf(t.schema, e.eventId)).toEqual([later.toISOString()]);
  });

  it('an event row stored without its id (the id deleted by hand) is met once and absorbed: the batch is written again around it', async () => {
    const at = new Date();
    const kept = event('absorbed-kept', at);
    await store.writeBatch([kept]);
    await t.query(`delete from ${t.schema}.audit_event_ids where event_id = $1`, [kept.eventId]);
    const others = ['absorbed-a', 'absorbed-b', 'absorbed-c'].map((id) => event(id, at));
    const own = new AuditStore(pool, t.schema);
    // The plain insert takes the id as new and fails on the stored row (unique violation, nothing
    // written); the absorbing insert then writes the other three and skips it.
    expect(await own.writeBatch([...others, kept])).toEqual({ inserted: 3, duplicates: 1, deadLettered: 0 });
    expect(own.absorbed).toBe(1);
    for (const e of [...others, kept]) expect(await rowsOf(t.schema, e.eventId)).toEqual([at.toISOString()]);
    // The id is back, pointing at the stored row: the next delivery is an ordinary duplicate.
    expect(await own.writeBatch([kept])).toEqual({ inserted: 0, duplicates: 1, deadLettered: 0 });
    expect(own.absorbed).toBe(1);
  });

  it('concurrent writers re-storing the same lost events store one row each', async () => {
    const at = new Date(Date.now() - DAY);
    const events = Array.from({ length: 20 }, (_, i) => event(`lost-race-${i}`, at));
    await store.writeBatch(events);
    await t.query(`delete from ${t.schema}.audit_events where event_id = any($1)`, [events.map((e) => e.eventId)]);
    const later = new Date();
    const stores = [0, 1, 2, 3].map(() => new AuditStore(pool, t.schema));
    const results = await Promise.all(
      stores.map((s) => s.writeBatch(events.map((e) => ({ ...e, createdAt: later.toISOString() })))),
    );
    expect(results.reduce((n, r) => n + r.inserted, 0)).toBe(events.length);
    for (const e of events) expect(await rowsOf(t.schema, e.eventId)).toEqual([later.toISOString()]);
  });

  it('a writer that Postgres fails to break a deadlock over an id and a chain head runs its batch again, and stores it once', async () => {
    const at = new Date();
    const stored = event('deadlock-lost', at);
    await store.writeBatch([stored]);
    // Its row lost: a batch holding it inserts its row again, then meets its id.
    await t.query(`delete from ${t.schema}.audit_events where event_id = $1`, [stored.eventId]);
    // A store of its own takes chain slot 0 first.
    const own = new AuditStore(pool, t.schema);
    const other = new pg.Client({ connectionString: t.databaseUrl });
    await other.connect();
    try {
      // Another session holds the lost event's id (as a writer re-storing it would) and keeps its
      // own deadlock check late, so that Postgres fails the store's statement, not it.
      await other.query("set deadlock_timeout = '20s'");
      await other.query('begin');
      await other.query(`update ${t.schema}.audit_event_ids set created_at = created_at where event_id = $1`, [
        stored.eventId,
      ]);
      const otherPid = (await other.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid;
      // The store's fresh insert locks its chain head, stores the rows, then waits on the id.
      const batch = own.writeBatch([event('deadlock-new', at), stored]);
      for (let i = 0; ; i++) {
        const waiting = await t.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [
          otherPid,
        ]);
        if (waiting.rows.length > 0) break;
        if (i > 3_000) throw new Error('the store never waited for the id');
        await new Promise((r) => setTimeout(r, 10));
      }
      // The other session now wants that head: a cycle, which Postgres breaks by failing the store's statement.
      await other.query(`select 1 from ${t.schema}.audit_chains where slot = 0 for update`);
      await other.query('rollback');
      expect(await batch).toEqual({ inserted: 2, duplicates: 0, deadLettered: 0 });
      expect(own.deadlocks).toBe(1);
    } finally {
      await other.end();
    }
    for (const id of ['deadlock-new', 'deadlock-lost']) {
      expect(await rowsOf(t.schema, eventIdFor('parts', id))).toEqual([at.toISOString()]);
    }
  });

  it('a lost event re-stored by one writer while another waits on its id is stored once, under the first writer’s time', async () => {
    const at = new Date();
    const e = event('lost-cas', at);
    await store.writeBatch([e]);
    await t.query(`delete from ${t.schema}.audit_events where event_id = $1`, [e.eventId]);
    // Today's partition, which the first write made sure of.
    const first = new Date(at.getTime() + 1);
    const second = new Date(at.getTime() + 2);
    // Writer A re-stores it inside a transaction it holds open: the id row stays locked.
    const a = new pg.Client({ connectionString: t.databaseUrl });
    await a.connect();
    try {
      await a.query('begin');
      const storeA = new AuditStore(a as unknown as pg.Pool, t.schema);
      expect(await storeA.writeBatch([{ ...e, createdAt: first.toISOString() }])).toMatchObject({ inserted: 1 });
      // Writer B read the id before A commits, then waits for A's lock on it.
      const b = store.writeBatch([{ ...e, createdAt: second.toISOString() }]);
      const aPid = (await a.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid;
      for (let i = 0; ; i++) {
        const waiting = await t.query('select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [aPid]);
        if (waiting.rows.length > 0) break;
        if (i > 3_000) throw new Error('writer B never waited for the id');
        await new Promise((r) => setTimeout(r, 10));
      }
      await a.query('commit');
      expect(await b).toMatchObject({ inserted: 0, duplicates: 1 });
    } finally {
      await a.end();
    }
    expect(await rowsOf(t.schema, e.eventId)).toEqual([first.toISOString()]);
  });

  it('a batch of new events touches no partition but its own: one locked (a retention drop, maintenance) does not hold it up', async () => {
    // A store of its own: one that met a stored id lately looks ids up first (see the next test).
    const store = new AuditStore(pool, t.schema);
    const old = event('locked-day', new Date(Date.now() - 20 * DAY));
    await store.writeBatch([old]);
    const partition = (
      await t.query<{ p: string }>(
        `select tableoid::regclass::text as p from ${t.schema}.audit_events where event_id = $1`,
        [old.eventId],
      )
    ).rows[0]?.p as string;
    const holder = new pg.Client({ connectionString: t.databaseUrl });
    await holder.connect();
    const settledWithin = (p: Promise<unknown>, ms: number) =>
      Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);
    let held: Promise<unknown> | undefined;
    try {
      await holder.query('begin');
      await holder.query(`lock table ${partition} in access exclusive mode`);
      const now = new Date();
      const today = Array.from({ length: 5 }, (_, i) => event(`beside-lock-${i}`, now));
      const fresh = store.writeBatch(today);
      expect(await settledWithin(fresh, 5_000)).toBe(true);
      expect(await fresh).toMatchObject({ inserted: 5 });
      // A batch holding an id stored before is looked up, by a statement that reads every
      // partition (a lost row may be in any): it waits for the lock, which shows the lock holds.
      const lookedUp = store.lookedUp;
      held = store.writeBatch([today[0] as AuditEvent, event('beside-lock-again', now)]);
      expect(await settledWithin(held, 500)).toBe(false);
      expect(store.lookedUp).toBe(lookedUp + 1);
    } finally {
      await holder.query('rollback');
      await holder.end();
    }
    expect(await held).toMatchObject({ inserted: 1, duplicates: 1 });
  });

  it('the timeline’s read of a task is planned once on a connection: its generic plan, holding every partition, serves the reads after', async () => {
    // A read by task names no partition key, so its plan holds every partition: planned at each
    // read, that cost 20–70 ms with a year of daily partitions (docs/performance.md).
    const at = new Date();
    const events = ['plan-a', 'plan-b', 'plan-c'].map((id) => event(id, at, { taskId: 'task-plan' }));
    await store.writeBatch([...events, event('plan-other', at, { taskId: 'task-plan-other' })]);
    const client = new pg.Client({ connectionString: t.databaseUrl });
    await client.connect();
    try {
      const own = new AuditStore(client as unknown as pg.Pool, t.schema);
      await client.query(`analyze ${t.schema}.audit_events`);
      for (let i = 0; i < 8; i++) {
        const read = await own.events({ taskId: 'task-plan' });
        expect(read.map((e) => e.eventId).sort()).toEqual(events.map((e) => e.eventId).sort());
      }
      const plans = (
        await client.query<{ generic_plans: string; custom_plans: string }>(
          `select generic_plans, custom_plans from pg_prepared_statements where statement like '%' || $1 || '.audit_events e where%'`,
          [t.schema],
        )
      ).rows;
      // Postgres tries five custom plans, then keeps the generic one: the later reads are not planned.
      expect(plans).toHaveLength(1);
      expect(Number(plans[0]?.custom_plans)).toBe(5);
      expect(Number(plans[0]?.generic_plans)).toBe(3);
      // By operation: a statement of its own, as correct.
      expect(await own.events({ operationKey: 'no-such-operation' })).toEqual([]);
    } finally {
      await client.end();
    }
  });

  it('after a batch met a stored id, the next look their ids up first, until one holds only new events', async () => {
    const own = new AuditStore(pool, t.schema);
    const at = new Date();
    const stored = event('run-stored', at);
    await own.writeBatch([stored]);
    expect(own.lookedUp).toBe(0);
    // A backfill's or a redelivery's run: the first batch is tried fresh, fails whole on the
    // stored id (a statement, and a line of Postgres's error log), and is looked up.
    expect(await own.writeBatch([stored, event('run-1', at)])).toEqual({ inserted: 1, duplicates: 1, deadLettered: 0 });
    expect(own.lookedUp).toBe(1);
    // The batches after it are looked up first: none is tried fresh.
    for (const id of ['run-2', 'run-3', 'run-4']) {
      expect(await own.writeBatch([stored, event(id, at)])).toEqual({ inserted: 1, duplicates: 1, deadLettered: 0 });
    }
    expect(own.lookedUp).toBe(1);
    // A batch of new events only (looked up too): the next is tried fresh again, and falls back.
    expect(await own.writeBatch([event('run-5', at), event('run-6', at)])).toMatchObject({ inserted: 2 });
    expect(own.lookedUp).toBe(1);
    expect(await own.writeBatch([stored, event('run-7', at)])).toMatchObject({ inserted: 1, duplicates: 1 });
    expect(own.lookedUp).toBe(2);
    for (const id of ['run-stored', 'run-1', 'run-2', 'run-3', 'run-4', 'run-5', 'run-6', 'run-7']) {
      expect(await rowsOf(t.schema, eventIdFor('parts', id))).toEqual([at.toISOString()]);
    }
  });

  it('a batch of stored events sent again reads each stored row through the whole key, not every row of its time', async () => {
    // Events of one time (a burst within a millisecond, or a backfill's): 2,000 stored.
    const own = new AuditStore(pool, t.schema);
    const at = new Date(Date.now() - 3 * DAY);
    const events = Array.from({ length: 2_000 }, (_, i) => event(`one-time-${i}`, at));
    for (let i = 0; i < events.length; i += 500) await own.writeBatch(events.slice(i, i + 500));
    const partition = partitionFor(at).name;
    const before = await tableScans(t, pool, partition);
    // Sent again: each id is looked up, and its row probed in audit_events (is it lost?).
    expect(await own.writeBatch(events.slice(0, 500))).toEqual({ inserted: 0, duplicates: 500, deadLettered: 0 });
    const after = await tableScans(t, pool, partition);
    // One row read a probe: the ids' table collates event_id "C", and an id of that collation
    // probed audit_events' key by the time alone, reading all 2,000 rows of that time each time.
    expect(after.rows - before.rows).toBeLessThanOrEqual(2 * 500);
    expect(after.idx - before.idx).toBeGreaterThan(0);
  });

  it('an event far from every partition gets its partition made, and is stored', async () => {
    const far = new Date(Date.now() + 400 * DAY);
    const e = event('far-ahead', far);
    expect((await listAuditPartitions(pool, t.schema)).map((p) => p.name)).not.toContain(partitionFor(far).name);
    expect(await store.writeBatch([e])).toMatchObject({ inserted: 1, deadLettered: 0 });
    expect((await listAuditPartitions(pool, t.schema)).map((p) => p.name)).toContain(partitionFor(far).name);
    expect(await rowsOf(t.schema, e.eventId)).toEqual([far.toISOString()]);
  });
});

describe('retention drops whole partitions', () => {
  it('creates partitions ahead, drops those older than the retention, prunes their ids, keeps the rest', async () => {
    const schema = `${t.schema}_ret`;
    await migrate({ connectionString: t.databaseUrl, schema });
    try {
      const s = new AuditStore(pool, schema);
      const old = Array.from({ length: 30 }, (_, i) => event(`old-${i}`, new Date(Date.now() - 10 * DAY - i * 1000)));
      const recent = Array.from({ length: 30 }, (_, i) => event(`new-${i}`, new Date(Date.now() - i * 1000)));
      await s.writeBatch([...old, ...recent]);
      const oldPartition = partitionFor(new Date(Date.now() - 10 * DAY)).name;
      expect((await listAuditPartitions(pool, schema)).map((p) => p.name)).toContain(oldPartition);

      const result = await maintainAuditPartitions(pool, schema, { retentionMs: 5 * DAY, ahead: 9 });
      expect(result.dropped).toContain(oldPartition);
      expect(result.idsPruned).toBe(old.length);
      const names = (await listAuditPartitions(pool, schema)).map((p) => p.name);
      expect(names).not.toContain(oldPartition);
      expect(names).toContain(partitionFor(new Date(Date.now() + 9 * DAY)).name);
      const count = async (table: string) =>
        Number((await t.query(`select count(*)::int as n from ${schema}.${table}`)).rows[0]?.n);
      expect(await count('audit_events')).toBe(recent.length);
      expect(await count('audit_event_ids')).toBe(recent.length);
      // Idempotent: a second run creates and drops nothing.
      expect(await maintainAuditPartitions(pool, schema, { retentionMs: 5 * DAY, ahead: 9 })).toEqual({
        created: [],
        dropped: [],
        idsPruned: 0,
      });
    } finally {
      await t.query(`drop schema if exists ${schema} cascade`);
    }
  });
});

describe("an audit retention shorter than the ledger's", () => {
  it('the sweeper deletes a row whose events the retention dropped, and sends none of them again; a row whose events are kept still waits for them', async () => {
    const schema = `${t.schema}_sweep`;
    await migrate({ connectionString: t.databaseUrl, schema });
    const ledgers: PostgresLedger[] = [];
    const ledgerAt = (clockOffsetMs: number) => {
      const l = t.ledger({ schema, clockOffsetMs });
      ledgers.push(l);
      return l;
    };
    try {
      // Rows whose transitions the ledger recorded 10 and 2 days ago (the database clock moved
      // back for them), each expired a minute after its completion.
      const done = async (l: PostgresLedger, resourceKey: string) => {
        const c = await acquireClaim(l, payClaim(resourceKey));
        await l.complete(c.key, c.epoch, { ok: true });
        const record = await l.get(c.key);
        if (!record) throw new Error('no record');
        return record;
      };
      const old = await done(ledgerAt(-10 * DAY), 'order:old');
      const recent = await done(ledgerAt(-2 * DAY), 'order:recent');
      const s = new AuditStore(pool, schema);
      expect(await s.writeBatch(eventsForRecord(old))).toMatchObject({ inserted: 2 });
      // The audit trail keeps 5 days: the old row's events go with their partition.
      const kept = await maintainAuditPartitions(pool, schema, { retentionMs: 5 * DAY, ahead: 1 });
      expect(kept.dropped).toContain(partitionFor(new Date(Date.now() - 10 * DAY)).name);
      expect(kept.idsPruned).toBe(2);

      const sent: string[] = [];
      const emitter = { record: (e: { eventId: string }) => sent.push(e.eventId) } as unknown as AuditEmitter;
      const sweeper = ledgerAt(0);
      const auditRetention = { retentionMs: 5 * DAY };
      // Without the retention the sweeper waits for the dropped events, and sends them again.
      expect(await sweepLedger(sweeper)).toMatchObject({ deleted: 0, pending: 2 });
      const first = await sweepLedger(sweeper, { emitter, auditRetention });
      expect(first).toMatchObject({ deleted: 1, pending: 1 });
      expect(await sweeper.get(old.key)).toBeNull();
      // Only the recent row's events are sent again (and the run's summary): none past the retention.
      const recentIds = eventsForRecord(recent).map((e) => e.eventId);
      expect(sent.filter((id) => recentIds.includes(id)).sort()).toEqual([...recentIds].sort());
      expect(sent).toHaveLength(recentIds.length + 1);
      // Once the recent row's events are stored, it goes too.
      await s.writeBatch(eventsForRecord(recent));
      expect(await sweepLedger(sweeper, { auditRetention })).toMatchObject({ deleted: 1, pending: 0 });
    } finally {
      for (const l of ledgers) await l.close();
      await t.query(`drop schema if exists ${schema} cascade`);
    }
  });
});

describe('migration 0006', () => {
  it('converts an existing table: every event stored before is there after, one row per id', async () => {
    const schema = `${t.schema}_mig`;
    const names = Object.keys(allMigrations(schema));
    const after = names.slice(names.indexOf('0006-audit-partitions'));
    await migrate({ connectionString: t.databaseUrl, schema });
    try {
      // Down to 0004: the unpartitioned table with its unique event_id index.
      for (const _ of after) await migrate({ connectionString: t.databaseUrl, schema, to: 'down' });
      // Events on the unpartitioned table of 0004: over 40 days, some of them years old.
      await t.query(
        `insert into ${schema}.audit_events (event_id, created_at, actor_type, actor_id, action, resource_type,
           resource_id, decision, phase, task_id, details)
         select 'ev-' || g, now() - (g % 40) * interval '1 day' - g * interval '1 second'
           - case when g % 97 = 0 then interval '3 years' else interval '0' end,
           'system', 'test', 'tool.search', 'index', 'products', 'allow', 'outcome', 'task-' || (g % 7),
           jsonb_build_object('n', g)
         from generate_series(1, 2000) g`,
      );
      const snapshot = async () =>
        (
          await t.query(
            `select event_id, created_at, task_id, details::text as d from ${schema}.audit_events order by event_id`,
          )
        ).rows.map((r) => `${r.event_id} ${(r.created_at as Date).toISOString()} ${r.task_id} ${r.d}`);
      const before = await snapshot();
      expect(before).toHaveLength(2000);
      await migrate({ connectionString: t.databaseUrl, schema });
      expect(
        (await t.query(`select relkind from pg_class where oid = $1::regclass`, [`${schema}.audit_events`])).rows[0]
          ?.relkind,
      ).toBe('p');
      expect(await snapshot()).toEqual(before);
      const ids = await t.query(`select count(*)::int as n from ${schema}.audit_event_ids`);
      expect(ids.rows[0]?.n).toBe(2000);
      // A stored id delivered again with another time still writes nothing.
      const s = new AuditStore(pool, schema);
      const again = await s.writeBatch([{ ...event('x', new Date()), eventId: 'ev-5' }]);
      expect(again).toMatchObject({ inserted: 0, duplicates: 1 });
    } finally {
      await t.query(`drop schema if exists ${schema} cascade`);
    }
  });
});
