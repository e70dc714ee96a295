import type { Worker } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { AuditStore } from '../../src/audit/audit-store.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { maintainAuditPartitions } from '../../src/audit/partitions.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { exportChainHeads, verifyAuditChains } from '../../src/audit/verify-chain.js';
import { runBackfill } from '../../src/jobs/audit-backfill.js';
import { createAuditWriter } from '../../src/jobs/audit-writer.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineRedactionPolicy } from '../../src/redaction/define-policy.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { sampleAuditEvent } from '../helpers/audit-sample.js';
import { bull, settled } from '../helpers/bullmq.js';
import { cliEnv } from '../helpers/cli-env.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { runTs } from '../helpers/spawn.js';

const t = new TestContext('audit-chain-verify');
const b = bull(t);
let ledger: PostgresLedger;
let writer: Worker;
const policy = defineRedactionPolicy({
  version: 'chain-1',
  hmacKeys: [{ id: 'k1', secret: 'an-audit-chain-test-hmac-key-of-32-bytes!' }],
});
const op = testOperation({
  name: 'orders.ship',
  input: z.object({ order: z.string() }),
  effect: (i) => i,
  resourceKey: (i) => `order:${i.order}`,
  downstream: 'none',
});

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  writer = createAuditWriter({
    connection: { url: t.redisUrl, maxRetriesPerRequest: null },
    pool: ledger.pool,
    schema: t.schema,
    prefix: t.prefix,
    queueName: 'audit',
    redactionPolicy: policy,
    concurrency: 4,
  });
});
afterAll(async () => {
  await writer.close();
  await ledger.close();
  await t.teardown();
});

const count = async () => Number((await t.query(`select count(*)::int as n from ${t.schema}.audit_events`)).rows[0]?.n);
const verify = () => verifyAuditChains(ledger.pool, t.schema);
const cli = (args: string[]) => runTs('src/cli/main.ts', args, cliEnv(t));

/** Runs `n` jobs through the wrapper; with `audit` their events go to the writer, else only the ledger records them. */
async function runJobs(name: string, n: number, audit: boolean): Promise<void> {
  const q = b.queue(name);
  const auditQueue = b.queue('audit');
  const emitter = audit
    ? new AuditEmitter({ queue: auditQueue, pool: ledger.pool, schema: t.schema, redact: auditRedactor(policy) })
    : undefined;
  const w = b.worker(
    name,
    withIdempotency(
      op,
      async (_input, ctx) => {
        await ctx.audit({ action: 'tool.ship', decision: 'allow', resourceType: 'parcel', resourceId: 'parcel-1' });
        return { shipped: true };
      },
      { ledger, keyring: testKeyring, ...(emitter ? { audit: emitter } : {}) },
    ),
    { concurrency: 8 },
  );
  const jobs = await q.addBulk(
    Array.from({ length: n }, (_, i) => ({ name: 'ship', data: { order: `${name}-${i}` } })),
  );
  for (const j of jobs) await settled(q, j.id as string);
  await w.close();
  await emitter?.close();
  await q.close();
  await auditQueue.close();
}

it('verify is clean after real jobs, concurrent writers on shared chains and a backfill that stores events again', async () => {
  await runJobs('shipped', 30, true);
  await waitFor(async () => (await count()) >= 90, 'the jobs’ events stored');
  // Two stores of one slot each write at once: they share the chain, its head's lock orders them.
  const stores = [0, 1].map(() => new AuditStore(ledger.pool, t.schema, policy, { chainSlots: 1 }));
  await Promise.all(
    Array.from({ length: 12 }, (_, i) =>
      (stores[i % 2] as AuditStore).writeBatch(
        Array.from({ length: 20 }, (_, j) => sampleAuditEvent('concurrent', `${i}-${j}`)),
      ),
    ),
  );
  await Promise.all(stores.map((s) => s.close()));
  const before = await count();
  // Jobs whose events were never emitted: the backfill derives them from the ledger.
  await runJobs('unaudited', 10, false);
  const auditQueue = b.queue('audit');
  await runBackfill({ pool: ledger.pool, auditQueue, schema: t.schema, since: new Date(0) });
  await auditQueue.close();
  await waitFor(async () => (await count()) > before, 'the backfilled events stored');
  const r = await verify();
  expect(r.problems).toEqual([]);
  expect(r.ok).toBe(true);
  expect(r.events).toBe(await count());
  const heads = await exportChainHeads(ledger.pool, t.schema);
  expect(heads.reduce((n, h) => n + h.seq, 0)).toBe(await count());
  const shown = await cli(['verify']);
  expect(shown.code, shown.stderr).toBe(0);
  expect(shown.stdout).toContain(`ok: ${r.events} events`);
});

it('verify names an UPDATE, a DELETE and an out-of-order INSERT on audit_events, and the CLI exits non-zero', async () => {
  const pick = async (offset: number) =>
    (
      await t.query(
        `select event_id, created_at from ${t.schema}.audit_events order by created_at, event_id offset $1 limit 1`,
        [offset],
      )
    ).rows[0] as { event_id: string; created_at: Date };

  // UPDATE: one column of one event.
  const updated = await pick(5);
  const original = (
    await t.query(`select resource_id from ${t.schema}.audit_events where event_id = $1`, [updated.event_id])
  ).rows[0]?.resource_id as string;
  await t.query(`update ${t.schema}.audit_events set resource_id = 'parcel-2' where event_id = $1`, [updated.event_id]);
  let r = await verify();
  expect(r.ok).toBe(false);
  expect(r.problems[0]).toMatchObject({ kind: 'changed', eventId: updated.event_id });
  let shown = await cli(['verify']);
  expect(shown.code).toBe(1);
  expect(shown.stderr).toContain(updated.event_id);
  expect(shown.stderr).toContain('changed');
  await t.query(`update ${t.schema}.audit_events set resource_id = $2 where event_id = $1`, [
    updated.event_id,
    original,
  ]);
  expect((await verify()).problems).toEqual([]);

  // DELETE: one event, kept aside and put back.
  const removed = await pick(7);
  const saved = await t.query(`select * from ${t.schema}.audit_events where event_id = $1`, [removed.event_id]);
  await t.query(`delete from ${t.schema}.audit_events where event_id = $1`, [removed.event_id]);
  r = await verify();
  expect(r.problems[0]).toMatchObject({ kind: 'removed', eventId: removed.event_id });
  shown = await cli(['verify']);
  expect(shown.code).toBe(1);
  expect(shown.stderr).toContain(removed.event_id);
  await t.query(
    `insert into ${t.schema}.audit_events select * from jsonb_populate_recordset(null::${t.schema}.audit_events, $1::jsonb)`,
    [
      JSON.stringify(
        saved.rows.map((row) => ({
          ...row,
          chain_digest: `\\x${row.chain_digest.toString('hex')}`,
          chain_link: row.chain_link && `\\x${row.chain_link.toString('hex')}`,
        })),
      ),
    ],
  );
  expect((await verify()).problems).toEqual([]);

  // INSERT out of order: a copy of a stored event under a new id, at a place already taken.
  const copied = await pick(3);
  await t.query(
    `insert into ${t.schema}.audit_events
     select (jsonb_populate_record(e, jsonb_build_object('event_id', 'forged-event-0001'))).* from ${t.schema}.audit_events e
     where e.event_id = $1`,
    [copied.event_id],
  );
  r = await verify();
  expect(r.problems).toHaveLength(1);
  expect(r.problems[0]).toMatchObject({ kind: 'inserted', eventId: 'forged-event-0001' });
  shown = await cli(['verify', '--json']);
  expect(shown.code).toBe(1);
  expect(JSON.parse(shown.stdout).problems[0].eventId).toBe('forged-event-0001');
  await t.query(`delete from ${t.schema}.audit_events where event_id = 'forged-event-0001'`);
  expect((await verify()).problems).toEqual([]);
});

it('retention drops a partition: its heads become anchors, verify stays clean, and a day written again continues from its anchor', async () => {
  const store = new AuditStore(ledger.pool, t.schema, policy, { chainSlots: 2 });
  const old = new Date(Date.now() - 10 * 86_400_000);
  const at = (d: Date, i: number) => ({
    ...sampleAuditEvent('retention', `${d.getTime()}-${i}`),
    createdAt: d.toISOString(),
  });
  await store.writeBatch(Array.from({ length: 5 }, (_, i) => at(old, i)));
  const day = old.toISOString().slice(0, 10);
  const headsBefore = (await exportChainHeads(ledger.pool, t.schema)).filter((h) => h.chain.startsWith(day));
  expect(headsBefore.reduce((n, h) => n + h.seq, 0)).toBe(5);
  const { dropped } = await maintainAuditPartitions(ledger.pool, t.schema, { retentionMs: 5 * 86_400_000 });
  expect(dropped).toContain(`audit_events_p${day.replaceAll('-', '')}`);
  const anchors = await t.query(
    `select slot, seq, encode(digest, 'hex') as digest from ${t.schema}.audit_chain_anchors where day = $1::date and seq > 0 order by slot`,
    [day],
  );
  expect(anchors.rows.map((r) => `${day}/${r.slot}`)).toEqual(headsBefore.map((h) => h.chain));
  expect((await verify()).problems).toEqual([]);
  // The same day written again (an event of that time arriving late): its chain goes on from the anchor.
  await store.writeBatch([at(old, 99)]);
  expect((await verify()).problems).toEqual([]);
  const again = (await exportChainHeads(ledger.pool, t.schema)).filter((h) => h.chain.startsWith(day));
  expect(again.reduce((n, h) => n + h.seq, 0)).toBe(6);
  await store.close();
});
