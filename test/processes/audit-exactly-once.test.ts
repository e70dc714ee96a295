import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { eventsForRecord } from '../../src/audit/derive.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { auditEventFromWrapper } from '../../src/audit/from-wrapper.js';
import { AuditEventNotDurableError } from '../../src/audit/not-durable-error.js';
import { auditRedactor } from '../../src/audit/redact-event.js';
import { buildTimeline } from '../../src/audit/timeline.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineRedactionPolicy } from '../../src/redaction/index.js';
import { verifyRef } from '../../src/redaction/refs.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { childEnv, finished, spawnTs } from '../helpers/spawn.js';

const t = new TestContext('audit_once');
const b = bull(t);
let ledger: PostgresLedger;
let store: AuditStore;
const policy = defineRedactionPolicy({
  version: 'once-test',
  hmacKeys: [{ id: 'k1', secret: 'an-exactly-once-test-hmac-key-of-32-bytes' }],
  details: { 'tool.summarise': ['note', 'blob'] },
});

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  store = new AuditStore(ledger.pool, t.schema, policy);
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const rowsOf = async (eventId: string) =>
  Number(
    (await t.query(`select count(*)::int as n from ${t.schema}.audit_events where event_id = $1`, [eventId])).rows[0]
      ?.n,
  );
const passThrough = (e: AuditEvent) => e;

const input = z.object({ order: z.string() });
const op = testOperation({
  name: 'orders.ship',
  input,
  effect: (i) => i,
  resourceKey: (i) => `order:${i.order}`,
  lease: '1s',
  downstream: 'none',
});

/** Claims the key of `order` as another worker would, holding its lease for `leaseMs`. */
async function holdKey(order: string, leaseMs = 5_000) {
  const claim = await ledger.claim({
    key: op.keyFor({ order }),
    operation: op.name,
    fingerprint: op.fingerprintOf({ order }, testKeyring),
    leaseMs,
    retentionMs: 3_600_000,
    downstream: 'none',
  });
  if (claim.kind !== 'acquired') throw new Error(`expected to acquire ${order}, got ${claim.kind}`);
  return claim;
}

/** The wrapper's events of `jobs` jobs of the same intent, each run to its end. */
async function deliveries(queueName: string, order: string, jobs: number): Promise<WrapperEvent[]> {
  const captured: WrapperEvent[] = [];
  const q = b.queue(queueName);
  const w = b.worker(
    queueName,
    withIdempotency(op, async () => ({ shipped: true }), {
      ledger,
      keyring: testKeyring,
      audit: { emit: (e) => captured.push(e) },
      inProgressPollMs: 50,
    }),
  );
  for (let i = 0; i < jobs; i++) {
    const job = await q.add('ship', { order }, { jobId: `${queueName}-${i}` });
    await settled(q, job.id as string);
  }
  await w.close();
  await q.close();
  return captured;
}

/** Writes each event in a batch of its own, as separate deliveries and emitters would. */
async function writeOneByOne(events: WrapperEvent[]): Promise<AuditEvent[]> {
  const out = events.map((e) => auditEventFromWrapper(e, 'worker:test'));
  for (const e of out) await store.writeBatch([e]);
  return out;
}

describe('one stored row per event id', () => {
  it('deliveries that find a recorded failure store one row, whatever the time of each read', async () => {
    const claim = await holdKey('failed-1');
    await ledger.fail(claim.key, claim.epoch, { code: 'CARD_DECLINED', message: 'declined' }, 'terminal');
    const events = (await deliveries('found-failed', 'failed-1', 3)).filter((e) => e.type === 'failed');
    expect(events).toHaveLength(3);
    expect(new Set(events.map((e) => e.at?.getTime())).size).toBe(3); // three reads, three times
    const written = await writeOneByOne(events);
    expect(new Set(written.map((e) => e.eventId)).size).toBe(1);
    expect(await rowsOf(written[0]?.eventId as string)).toBe(1);
  });

  it('deliveries that find an unknown outcome store one row', async () => {
    const claim = await holdKey('unknown-1');
    await ledger.markUnknown(claim.key, claim.epoch, { code: 'DOWNSTREAM_TIMEOUT', message: 'timed out' });
    const events = (await deliveries('found-unknown', 'unknown-1', 3)).filter((e) => e.type === 'unknown');
    expect(events).toHaveLength(3);
    const written = await writeOneByOne(events);
    expect(new Set(written.map((e) => e.eventId)).size).toBe(1);
    expect(await rowsOf(written[0]?.eventId as string)).toBe(1);
  });

  it('a job polling a key in progress stores one row per wait; the timeline has one wait with its span', async () => {
    const key = boundedKey(op.keyFor({ order: 'held-1' }));
    const claim = await holdKey('held-1', 30_000);
    const captured: WrapperEvent[] = [];
    const q = b.queue('held');
    const w = b.worker(
      'held',
      withIdempotency(op, async () => ({ shipped: true }), {
        ledger,
        keyring: testKeyring,
        audit: { emit: (e) => captured.push({ ...e, taskId: 'task-wait' }) },
        inProgressPollMs: 50,
      }),
    );
    const job = await q.add('ship', { order: 'held-1' }, { jobId: 'held-job' });
    await waitFor(() => captured.filter((e) => e.type === 'in_progress').length >= 3, 'three polls');
    const done = await ledger.complete(claim.key, claim.epoch, { shipped: 'by the holder' });
    await settled(q, job.id as string);
    await w.close();
    await q.close();
    const polls = captured.filter((e) => e.type === 'in_progress');
    const written = await writeOneByOne(captured);
    const pollIds = new Set(written.filter((e) => e.action === 'idempotency.in_progress').map((e) => e.eventId));
    expect(pollIds.size).toBe(1);
    expect(await rowsOf([...pollIds][0] as string)).toBe(1);
    const stored = await store.events({ taskId: 'task-wait' });
    expect(stored.map((e) => e.action)).toEqual(['idempotency.in_progress', 'idempotency.replayed']);
    // The same story from the events as emitted (one per poll) as from the store.
    const story = buildTimeline(written, []);
    expect(story.events.map((e) => e.eventId)).toEqual(stored.map((e) => e.eventId));
    expect(story.waits).toEqual([
      {
        operationId: key,
        epoch: 1,
        jobId: 'held-job',
        since: polls[0]?.at?.toISOString(),
        until: stored[1]?.createdAt,
      },
    ]);
    expect(done.epoch).toBe(1);
  });

  it('events sharing an id in one batch, or across batches with other times, store one row', async () => {
    const id = eventIdFor('same', Math.random());
    const at = (ms: number) => new Date(Date.UTC(2024, 0, 1, 0, 0, 0, ms)).toISOString();
    const e = (ms: number): AuditEvent => ({
      eventId: id,
      actorType: 'system',
      actorId: 'worker:1',
      action: 'idempotency.in_progress',
      resourceType: 'idempotency_key',
      resourceId: 'acme:order%3A9:v1',
      decision: 'deny',
      createdAt: at(ms),
      phase: 'outcome',
    });
    expect(await store.writeBatch([e(1), e(2), e(3)])).toEqual({ inserted: 1, duplicates: 2, deadLettered: 0 });
    expect(await store.writeBatch([e(4)])).toEqual({ inserted: 0, duplicates: 1, deadLettered: 0 });
    expect(await rowsOf(id)).toBe(1);
  });
});

describe('nothing dropped silently', () => {
  const base = (over: Partial<AuditEvent> & Record<string, unknown>) =>
    ({
      eventId: eventIdFor('norm', Math.random()),
      actorType: 'system',
      actorId: 'backfill',
      action: 'idempotency.completed',
      resourceType: 'idempotency_key',
      resourceId: 'acme:order%3A1:v1',
      decision: 'allow',
      createdAt: new Date().toISOString(),
      phase: 'outcome',
      taskId: 'task-norm',
      ...over,
    }) as AuditEvent;

  it('the writer normalises a 300-character job id, a fractional counter and a long reason code instead of refusing them', async () => {
    const jobId = `job-${'x'.repeat(296)}`;
    const reasonCode = `E_${'LONG_'.repeat(30)}`;
    const events = [
      base({ jobId }),
      base({ attemptsMade: 1.5, attemptsStarted: -2, stalledCounter: Number.NaN }),
      base({ reasonCode }),
      base({ jobId: 42 as unknown as string }),
    ];
    const result = await store.writeBatch(JSON.parse(JSON.stringify(events)));
    expect(result).toEqual({ inserted: 4, duplicates: 0, deadLettered: 0 });
    const stored = new Map((await store.events({ taskId: 'task-norm' })).map((e) => [e.eventId, e]));
    const [long, counters, code, numeric] = events.map((e) => stored.get(e.eventId));
    expect(verifyRef(long?.jobId as string, jobId, policy)).toBe(true);
    expect(long?.redaction?.rules).toContain('grammar.ref');
    expect(counters).toMatchObject({ attemptsMade: 1, attemptsStarted: 0 });
    expect(counters?.stalledCounter).toBeUndefined();
    expect(counters?.redaction).toMatchObject({
      rules: ['bound.int'],
      paths: ['$.attemptsMade', '$.attemptsStarted', '$.stalledCounter'],
    });
    expect(code?.reasonCode?.length).toBeLessThanOrEqual(100);
    expect(verifyRef(code?.reasonCode as string, reasonCode, policy)).toBe(true);
    expect(numeric?.jobId).toBe('42');
    expect(numeric?.redaction?.rules).toEqual(['bound.text']);
  });

  it("the backfill's events of a record with a 300-character job id are stored, the job id referenced", async () => {
    const jobId = `bf-${'z'.repeat(297)}`;
    const claim = await ledger.claim({
      key: op.keyFor({ order: 'long-job' }),
      operation: op.name,
      fingerprint: op.fingerprintOf({ order: 'long-job' }, testKeyring),
      leaseMs: 5_000,
      retentionMs: 3_600_000,
      downstream: 'none',
      jobId,
      taskId: 'task-long-job',
    });
    if (claim.kind !== 'acquired') throw new Error(claim.kind);
    await ledger.complete(claim.key, claim.epoch, { ok: true });
    const record = await ledger.get(claim.key);
    const derived = eventsForRecord(record as NonNullable<typeof record>);
    expect(await store.writeBatch(JSON.parse(JSON.stringify(derived)))).toEqual({
      inserted: 2,
      duplicates: 0,
      deadLettered: 0,
    });
    const stored = await store.events({ taskId: 'task-long-job' });
    expect(stored.map((e) => e.action)).toEqual(['idempotency.claimed', 'idempotency.completed']);
    for (const e of stored) expect(verifyRef(e.jobId as string, jobId, policy)).toBe(true);
  });

  it('the emitter normalises them too: a wrapper event with a 300-character job id and attemptsMade 1.5 is stored', async () => {
    const queue = b.queue('norm-emit');
    const emitter = new AuditEmitter({ queue, pool: ledger.pool, schema: t.schema, redact: auditRedactor(policy) });
    const writer = b.auditWriter('norm-emit', ledger.pool, { redactionPolicy: policy });
    const jobId = 'j'.repeat(300);
    const wrapper: WrapperEvent = {
      type: 'claimed',
      operation: 'orders.ship',
      key: 'acme:order%3A77:v1',
      epoch: 1,
      decision: 'allow',
      jobId,
      taskId: 'task-norm-emit',
      attemptsMade: 1.5,
      attemptsStarted: 2,
      stalledCounter: 0,
      at: new Date(),
    };
    emitter.emit(wrapper);
    await emitter.flush();
    await waitFor(async () => (await store.events({ taskId: 'task-norm-emit' })).length === 1, 'the event stored');
    const [stored] = await store.events({ taskId: 'task-norm-emit' });
    expect(verifyRef(stored?.jobId as string, jobId, policy)).toBe(true);
    expect(stored?.attemptsMade).toBe(1);
    expect(stored?.redaction?.rules).toEqual(['bound.int', 'grammar.ref']);
    expect(emitter.metrics).toMatchObject({ invalid: 0, dropped: 0, tooLarge: 0 });
    await emitter.close();
    await writer.close();
    await queue.close();
  });

  it('an oversized event among 500 is refused alone and dead-lettered: the 500 land', async () => {
    const queue = b.queue('oversized');
    const emitter = new AuditEmitter({
      queue,
      pool: ledger.pool,
      schema: t.schema,
      redact: passThrough,
      maxBatch: 500,
    });
    const writer = b.auditWriter('oversized', ledger.pool, { redactionPolicy: policy });
    const normal = Array.from({ length: 500 }, (_, i) => base({ taskId: 'task-big', seq: i }));
    const big = base({ taskId: 'task-big', action: 'tool.summarise', details: { blob: 'y'.repeat(300 * 1024) } });
    for (const e of normal.slice(0, 250)) emitter.record(e);
    const refused = emitter.recordDurable(big);
    for (const e of normal.slice(250)) emitter.record(e);
    await expect(refused).rejects.toMatchObject({ code: 'AUDIT_EVENT_TOO_LARGE', details: { limit: 256 * 1024 } });
    await expect(refused).rejects.toBeInstanceOf(AuditEventNotDurableError);
    await emitter.flush();
    await waitFor(async () => (await store.events({ taskId: 'task-big' })).length === 500, '500 events stored');
    const dl = await t.query(`select reason, event from ${t.schema}.audit_dead_letter where event->>'eventId' = $1`, [
      big.eventId,
    ]);
    expect(dl.rows).toHaveLength(1);
    expect(dl.rows[0]?.reason).toMatch(/^AUDIT_EVENT_TOO_LARGE bytes=\d+ limit=262144$/);
    expect(dl.rows[0]?.event).toMatchObject({ eventId: big.eventId, action: 'tool.summarise', tooLarge: {} });
    expect(JSON.stringify(dl.rows[0]?.event).length).toBeLessThan(2_000);
    expect(emitter.metrics).toMatchObject({ tooLarge: 1, deadLettered: 1, enqueued: 500, dropped: 0 });
    await emitter.close();
    await writer.close();
    await queue.close();
  });
});

describe('await ctx.audit() means durable', () => {
  it('resolves once the batch is in Redis: a worker SIGKILLed right after keeps the decision', async () => {
    const queueName = 'durable';
    const auditQueue = 'durable-audit';
    const q = b.queue(queueName);
    const child = spawnTs(
      'test/helpers/audit-durable-child.ts',
      [
        JSON.stringify({
          databaseUrl: t.databaseUrl,
          redisUrl: t.redisUrl,
          schema: t.schema,
          prefix: t.prefix,
          queue: queueName,
          auditQueue,
          maxDelayMs: 1_000,
        }),
      ],
      childEnv({}),
    );
    const exited = finished(child, 30_000, 'durable child');
    try {
      await waitFor(() => child.out.includes('"ready"'), 'the child worker', 15_000);
      await q.add('delete', { order: 'bucket-1' }, { jobId: 'durable-1' });
      await waitFor(() => child.out.includes('"audited"'), 'the awaited decision', 15_000);
      child.kill('SIGKILL');
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    const writer = b.auditWriter(auditQueue, ledger.pool, { redactionPolicy: policy });
    const decisions = () =>
      t.query(`select action, decision, reason_code from ${t.schema}.audit_events where job_id = 'durable-1'`);
    await waitFor(async () => (await decisions()).rows.some((r) => r.action === 'tool.delete_bucket'), 'the decision');
    expect((await decisions()).rows.find((r) => r.action === 'tool.delete_bucket')).toEqual({
      action: 'tool.delete_bucket',
      decision: 'deny',
      reason_code: 'POLICY_PROTECTED_RESOURCE',
    });
    await writer.close();
    await q.obliterate({ force: true });
    await q.close();
  });

  it('without an audit sink it resolves at once', async () => {
    const q = b.queue('no-sink');
    let resolved = false;
    const w = b.worker(
      'no-sink',
      withIdempotency(
        op,
        async (_i, ctx) => {
          await ctx.audit({ action: 'tool.ship', decision: 'allow' });
          resolved = true;
          return { shipped: true };
        },
        { ledger, keyring: testKeyring },
      ),
    );
    const job = await q.add('ship', { order: 'no-sink-1' });
    expect((await settled(q, job.id as string)).state).toBe('completed');
    expect(resolved).toBe(true);
    await w.close();
    await q.close();
  });
});
