import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { auditRedactor, storeRedactor } from '../../src/audit/redact-event.js';
import { verifyAuditChains } from '../../src/audit/verify-chain.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { benchToolEvent } from '../helpers/audit-sample.js';
import { TestContext } from '../helpers/context.js';

/*
 * What a stored event costs (migrations 0019 and 0020): its redaction receipt is stored once per
 * distinct receipt and referred to, and the timeline's indexes hold a hash of the id. Every event
 * reads back as it was written, through the timeline and `verify`, whether its receipt sits in its
 * row (rows stored before 0019) or in audit_receipts.
 */

const t = new TestContext('audit-compact-rows');
let pool: pg.Pool;
const policy = defineRedactionPolicy({
  version: 'compact-1',
  hmacKeys: [{ id: 'k1', secret: 'an-audit-compact-rows-test-key-of-32-bytes' }],
  details: { 'tool.search': ['query', 'results', 'user'], 'tool.charge': ['amount', 'currency'] },
});
const redact = auditRedactor(policy);
/** What the store keeps of an event (the writer holds every event to the policy again). */
const kept = (e: AuditEvent) => ({ ...storeRedactor(policy)(e), seq: e.seq ?? 0 });

/** The benchmark's event (bench/audit.ts): a tool decision with a PII field redacted, so with a receipt. */
const toolEvent = (source: string, i: number): AuditEvent =>
  redact(benchToolEvent(eventIdFor(source, i), `task-${source}-${i % 10}`, i));

/** Events of every shape the trail stores: each actor type, decision and phase, every optional field, receipts or none. */
function shapes(taskId: string, operationId: string): AuditEvent[] {
  const base = (i: number) => ({
    eventId: eventIdFor('shape', taskId, i),
    createdAt: new Date(Date.now() + i).toISOString(),
  });
  return [
    redact({
      ...base(0),
      taskId,
      operationId,
      actorType: 'system',
      actorId: 'worker-1',
      action: 'idempotency.claimed',
      resourceType: 'idempotency_key',
      resourceId: operationId,
      decision: 'allow',
      reasonCode: 'FRESH',
      beforeStateRef: 'absent',
      afterStateRef: 'in_progress:1',
      operation: 'mail.send',
      phase: 'intent',
      epoch: 1,
      jobId: 'job-1',
      queue: 'mail',
      attemptsMade: 0,
      attemptsStarted: 1,
      stalledCounter: 0,
      seq: 0,
    }),
    redact({
      ...base(1),
      taskId,
      operationId,
      stepId: 'step-2',
      actorType: 'agent',
      actorId: 'assistant-7',
      action: 'tool.charge',
      resourceType: 'payment',
      resourceId: 'pay_1',
      decision: 'pending_confirmation',
      phase: 'intent',
      details: { amount: 12, currency: 'EUR', card: '4111 1111 1111 1111' },
    }),
    redact({
      ...base(2),
      taskId,
      operationId,
      actorType: 'user',
      actorId: 'a person with spaces and a "quote"',
      action: 'tool.search',
      resourceType: 'index',
      resourceId: 'products',
      decision: 'deny',
      reasonCode: 'policy.denied',
      phase: 'outcome',
      details: { query: 'x'.repeat(400), results: 0, user: { email: 'someone@example.com' } },
    }),
    // No receipt at all: an event built without the policy (the backfill's and the CLI's are
    // redacted by the writer; this one has nothing the policy changes).
    {
      ...base(3),
      taskId,
      operationId,
      actorType: 'system',
      actorId: 'worker-1',
      action: 'idempotency.completed',
      resourceType: 'idempotency_key',
      resourceId: operationId,
      decision: 'allow',
      phase: 'outcome',
      epoch: 1,
    },
  ];
}

const receiptRows = async (schema = t.schema) =>
  Number((await pool.query(`select count(*) from ${schema}.audit_receipts`)).rows[0].count);

beforeAll(async () => {
  await t.setup();
  pool = t.pool(6);
});
afterAll(async () => {
  await pool.end();
  await t.teardown();
});

describe('stored size', () => {
  it("keeps a representative event's row under 430 bytes, its receipt stored once", async () => {
    const store = new AuditStore(pool, t.schema, policy);
    const events = Array.from({ length: 200 }, (_, i) => toolEvent('size', i));
    expect(events[0]?.redaction).toBeDefined();
    expect((await store.writeBatch(events)).inserted).toBe(200);
    await store.close();
    const r = await pool.query(
      `select max(pg_column_size(e.*)) as row, count(*) filter (where redaction is not null) as inline
       from ${t.schema}.audit_events e where action = 'tool.search' and task_id like 'task-size-%'`,
    );
    // Before: 554 bytes, of which the receipt 175.
    expect(Number(r.rows[0].row)).toBeLessThanOrEqual(430);
    expect(Number(r.rows[0].inline)).toBe(0);
    expect(await receiptRows()).toBe(1);
  });

  it('takes 16-byte entries in the timeline indexes however long the ids', async () => {
    const store = new AuditStore(pool, t.schema, policy);
    // The timeline indexes of every partition, together (their growth is what the events cost).
    const indexBytes = async () =>
      Number(
        (
          await pool.query(
            `select sum(pg_relation_size(h.inhrelid)) as bytes from pg_inherits h join pg_class p on p.oid = h.inhparent
             join pg_namespace s on s.oid = p.relnamespace
             where s.nspname = $1 and p.relname in ('audit_events_task_idx', 'audit_events_operation_idx')`,
            [t.schema],
          )
        ).rows[0].bytes,
      );
    const before = await indexBytes();
    const n = 5000;
    const long = (i: number) => `acme%2Fmail.send:${'welcome%3Au-'.repeat(8)}${i}:v1`;
    for (let from = 0; from < n; from += 500) {
      const batch = Array.from({ length: 500 }, (_, j) => ({
        ...toolEvent('long', from + j),
        taskId: `01J${String(from + j).padStart(23, '0')}`,
        operationId: long(from + j),
      }));
      expect((await store.writeBatch(batch)).inserted).toBe(500);
    }
    await store.close();
    // Two entries of 16 bytes an event (and their line pointers, and the pages' free space):
    // about 55 bytes; with the ids' text (26 and 120 characters), over 200.
    expect((await indexBytes()) - before).toBeLessThanOrEqual(80 * n);
    // And the lookups find them by the value.
    const byOp = await new AuditStore(pool, t.schema, policy).events({ operationKey: long(1234) });
    expect(byOp.map((e) => e.eventId)).toEqual([eventIdFor('long', 1234)]);
    const byTask = await new AuditStore(pool, t.schema, policy).events({
      taskId: `01J${String(1234).padStart(23, '0')}`,
    });
    expect(byTask.map((e) => e.eventId)).toEqual([eventIdFor('long', 1234)]);
  });
});

describe('round trip', () => {
  it('reads back every shape of event as it was written, by task and by operation, and verifies', async () => {
    const taskId = 'task-round-trip';
    const operationId = `acme%2Fmail.send:k%3A${taskId}:v1`;
    const events = shapes(taskId, operationId);
    // Receipts of two shapes, and events without one.
    expect(new Set(events.map((e) => JSON.stringify(kept(e).redaction ?? null))).size).toBeGreaterThanOrEqual(3);
    const store = new AuditStore(pool, t.schema, policy);
    expect((await store.writeBatch(events)).inserted).toBe(events.length);
    const sorted = (xs: AuditEvent[]) => [...xs].sort((a, b) => a.eventId.localeCompare(b.eventId));
    const expected = sorted(events.map(kept));
    expect(sorted(await store.events({ taskId }))).toEqual(expected);
    expect(sorted(await store.events({ operationKey: operationId }))).toEqual(expected);
    // A redelivered batch stores nothing twice.
    expect((await store.writeBatch(events)).inserted).toBe(0);
    await store.close();
    expect((await verifyAuditChains(pool, t.schema)).problems).toEqual([]);
  });

  it('stores a receipt another writer stored meanwhile under its id, once', async () => {
    const receiptPolicy = defineRedactionPolicy({
      version: `concurrent-${randomBytes(3).toString('hex')}`,
      hmacKeys: [{ id: 'k1', secret: 'an-audit-compact-rows-test-key-of-32-bytes' }],
      details: { 'tool.search': ['query', 'results', 'user'] },
    });
    const event = auditRedactor(receiptPolicy)({ ...toolEvent('concurrent', 1), redaction: undefined });
    expect(event.redaction).toBeDefined();
    const receipt = JSON.stringify(event.redaction);
    const before = await receiptRows();
    // Another writer stores the same receipt in a transaction still open when this one runs.
    const other = new pg.Client({ connectionString: t.databaseUrl });
    await other.connect();
    try {
      await other.query('begin');
      await other.query(
        `insert into ${t.schema}.audit_receipts (digest, receipt) values (sha256(convert_to($1::jsonb::text, 'UTF8')), $1::jsonb)`,
        [receipt],
      );
      const store = new AuditStore(pool, t.schema, receiptPolicy);
      const writing = store.writeBatch([event]);
      await new Promise((r) => setTimeout(r, 300));
      await other.query('commit');
      expect((await writing).inserted).toBe(1);
      await store.close();
    } finally {
      await other.end();
    }
    expect(await receiptRows()).toBe(before + 1);
    const stored = await pool.query(
      `select e.redaction_ref = r.id as same from ${t.schema}.audit_events e, ${t.schema}.audit_receipts r
       where e.event_id = $1 and r.receipt = $2::jsonb`,
      [event.eventId, receipt],
    );
    expect(stored.rows).toEqual([{ same: true }]);
    expect((await verifyAuditChains(pool, t.schema)).problems).toEqual([]);
  });

  it('names every event whose stored receipt was changed', async () => {
    const { id, text } = (
      await pool.query(`select id, receipt::text as text from ${t.schema}.audit_receipts order by id limit 1`)
    ).rows[0];
    const referring = (
      await pool.query(`select event_id from ${t.schema}.audit_events where redaction_ref = $1`, [id])
    ).rows.map((r) => r.event_id as string);
    expect(referring.length).toBeGreaterThan(0);
    await pool.query(
      `update ${t.schema}.audit_receipts set receipt = jsonb_set(receipt, '{paths}', '[]') where id = $1`,
      [id],
    );
    const broken = await verifyAuditChains(pool, t.schema);
    expect(broken.ok).toBe(false);
    const named = new Set(broken.problems.map((p) => p.eventId));
    expect(referring.filter((e) => !named.has(e))).toEqual([]);
    await pool.query(`update ${t.schema}.audit_receipts set receipt = $2::jsonb where id = $1`, [id, text]);
    expect((await verifyAuditChains(pool, t.schema)).problems).toEqual([]);
  });
});

describe('rows stored before the receipts table', () => {
  const old = new TestContext('audit-compact-old');
  let oldPool: pg.Pool;
  beforeAll(async () => {
    await old.setup();
    oldPool = old.pool(4);
  });
  afterAll(async () => {
    await oldPool.end();
    await old.teardown();
  });

  it('stay readable and verifiable, beside new rows on the same chains, down and up again', async () => {
    const taskId = 'task-old-rows';
    const operationId = 'acme%2Fmail.send:k%3Aold:v1';
    const first = shapes(taskId, operationId);
    const store = new AuditStore(oldPool, old.schema, policy, { chainSlots: 1 });
    expect((await store.writeBatch(first)).inserted).toBe(first.length);
    await store.close();
    // Back to before 0019: the receipts go back into their rows, as rows stored then hold them.
    const columns = async () =>
      (
        await oldPool.query(
          `select column_name from information_schema.columns where table_schema = $1 and table_name = 'audit_events'`,
          [old.schema],
        )
      ).rows.map((r) => r.column_name as string);
    for (let i = 0; i < 5 && (await columns()).includes('redaction_ref'); i++) {
      await migrate({ connectionString: old.databaseUrl, schema: old.schema, to: 'down' });
    }
    expect(await columns()).toContain('chain_link');
    const inline = await oldPool.query(
      `select count(*) filter (where redaction is not null) as n from ${old.schema}.audit_events`,
    );
    expect(Number(inline.rows[0].n)).toBe(first.map(kept).filter((e) => e.redaction).length);
    // Then upgraded again: the old rows keep their receipts inline, new rows refer to theirs.
    await migrate({ connectionString: old.databaseUrl, schema: old.schema });
    const second = shapes(taskId, operationId).map((e, i) => ({
      ...e,
      eventId: eventIdFor('second', i),
      createdAt: new Date(Date.now() + 1000 + i).toISOString(),
    }));
    const again = new AuditStore(oldPool, old.schema, policy, { chainSlots: 1 });
    expect((await again.writeBatch(second)).inserted).toBe(second.length);
    const sorted = (xs: AuditEvent[]) => [...xs].sort((a, b) => a.eventId.localeCompare(b.eventId));
    expect(sorted(await again.events({ taskId }))).toEqual(sorted([...first, ...second].map(kept)));
    await again.close();
    const forms = await oldPool.query(
      `select count(*) filter (where redaction is not null) as inline, count(*) filter (where redaction_ref is not null) as referred
       from ${old.schema}.audit_events`,
    );
    const withReceipt = first.map(kept).filter((e) => e.redaction !== undefined).length;
    expect(withReceipt).toBeGreaterThan(0);
    expect(forms.rows[0]).toEqual({ inline: String(withReceipt), referred: String(withReceipt) });
    const verified = await verifyAuditChains(oldPool, old.schema);
    expect(verified.problems).toEqual([]);
    expect(verified.events).toBe(first.length + second.length);
  });
});
