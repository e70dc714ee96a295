import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AuditEvent, auditEventSchema, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditStore } from '../../src/audit/audit-store.js';
import { AUDIT_JOB_NAME, decodeAuditBatch, UndecodableAuditBatchError } from '../../src/audit/batch-codec.js';
import { AuditEmitter, type AuditEmitterOptions } from '../../src/audit/emitter.js';
import { buildTimeline, renderTimeline, timeline } from '../../src/audit/timeline.js';
import { RetryableError } from '../../src/errors/processor-errors.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { defineRedactionPolicy } from '../../src/redaction/index.js';
import { verifyRef } from '../../src/redaction/refs.js';
import type { WrapperEvent } from '../../src/worker/types.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';

const t = new TestContext('audit');
const b = bull(t);
let ledger: PostgresLedger;
let store: AuditStore;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  store = new AuditStore(ledger.pool, t.schema);
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const passThrough = (e: AuditEvent) => e;
const notePolicy = defineRedactionPolicy({
  version: 'audit-test',
  hmacKeys: [{ id: 'k1', secret: 'an-audit-test-hmac-key-of-32-bytes-or-more' }],
  details: { 'idempotency.claimed': ['note'] },
});
/** An emitter on `queue` that keeps events as they are (these tests check the pipeline, not redaction). */
const emitterFor = (queue: Queue, maxBatch: number, more: Partial<AuditEmitterOptions> = {}) =>
  new AuditEmitter({ queue, pool: ledger.pool, schema: t.schema, redact: passThrough, maxBatch, ...more });

function event(over: Partial<AuditEvent> = {}): AuditEvent {
  return {
    eventId: eventIdFor('k', Math.random()),
    actorType: 'system',
    actorId: 'worker:1',
    action: 'idempotency.claimed',
    resourceType: 'idempotency_key',
    resourceId: 'acme:order%3A1:v1',
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'intent',
    taskId: 'task-pipeline',
    ...over,
  };
}

async function count(where = "task_id = 'task-pipeline'"): Promise<number> {
  return Number((await t.query(`select count(*)::int as n from ${t.schema}.audit_events where ${where}`)).rows[0]?.n);
}

describe('audit pipeline', () => {
  it('emitter → audit queue → writer → Postgres, in batches, never twice, invalid events dead-lettered', async () => {
    const queue = b.queue('audit');
    const emitter = emitterFor(queue, 50);
    const writer = b.auditWriter('audit', ledger.pool);
    const events = Array.from({ length: 120 }, (_, i) => event({ seq: i }));
    for (const e of events) emitter.record(e);
    for (const e of events.slice(0, 10)) emitter.record(e); // re-emitted: same ids
    await emitter.flush();
    await waitFor(async () => (await count()) === 120, '120 events written');
    expect(emitter.metrics).toMatchObject({ emitted: 130, enqueued: 130, invalid: 0, dropped: 0 });
    expect(emitter.metrics.batches).toBe(3);
    // A redelivered batch writes nothing new; a bad event is dead-lettered, the rest still land.
    const bad = { eventId: 'x', contact: 'jane.doe@example.com' };
    const again = await store.writeBatch([...events.slice(0, 5), bad, event({ taskId: 'task-dl' })]);
    expect(again).toEqual({ inserted: 1, duplicates: 5, deadLettered: 1 });
    const dl = await t.query(`select reason, event::text as event from ${t.schema}.audit_dead_letter`);
    // Dead letters are redacted too: they may never have been through an emitter.
    expect(dl.rows[0]?.event).toContain('"eventId": "x"');
    expect(dl.rows[0]?.event).not.toContain('jane.doe');
    expect(dl.rows[0]?.reason).toMatch(/actorType/);
    // The emitter refuses an invalid event up front and counts it.
    emitter.record({ ...event(), decision: 'maybe' } as unknown as AuditEvent);
    expect(emitter.metrics.invalid).toBe(1);
    await emitter.close();
    await writer.close();
    await queue.close();
  });

  it('batches travel deflated; the writer also reads plain batches and dead-letters unreadable ones without stopping', async () => {
    const queue = b.queue('audit-codec');
    const emitter = emitterFor(queue, 200);
    const events = Array.from({ length: 200 }, (_, i) => event({ taskId: 'task-codec', seq: i }));
    for (const e of events) emitter.record(e);
    await emitter.flush();
    const [job] = await queue.getJobs(['wait']);
    expect(job?.name).toBe(AUDIT_JOB_NAME);
    expect(job?.data).toMatchObject({ encoding: 'deflate-raw', count: 200 });
    // What Redis holds is a fraction of the events' JSON, and decodes to exactly those events.
    expect(JSON.stringify(job?.data).length).toBeLessThan(JSON.stringify(events).length / 3);
    expect((await decodeAuditBatch(job?.data)).events).toEqual(events);

    // An unreadable batch and a plain one wait behind it; the writer takes all three.
    await queue.add(AUDIT_JOB_NAME, { encoding: 'deflate-raw', count: 3, payload: 'bm90IGRlZmxhdGU=' });
    await queue.add(AUDIT_JOB_NAME, { events: [event({ taskId: 'task-codec', seq: 500 })] });
    await expect(decodeAuditBatch({ encoding: 'gzip', payload: 'x' })).rejects.toBeInstanceOf(
      UndecodableAuditBatchError,
    );
    const writer = b.auditWriter('audit-codec', ledger.pool);
    await waitFor(async () => (await count("task_id = 'task-codec'")) === 201, '201 events written');
    const dl = await t.query(
      `select event, reason from ${t.schema}.audit_dead_letter where event->>'undecodableBatch' = 'true'`,
    );
    expect(dl.rows).toHaveLength(1);
    expect(dl.rows[0]?.event).toMatchObject({ encoding: 'deflate-raw', count: 3, payloadChars: 16 });
    expect(dl.rows[0]?.reason).toBe('AUDIT_BATCH_UNDECODABLE cause=not_inflatable');
    await waitFor(async () => (await queue.getJobCounts('failed', 'wait', 'active')).wait === 0, 'queue drained');
    expect(await queue.getJobCounts('failed')).toEqual({ failed: 0 });
    await emitter.close();
    await writer.close();
    await queue.close();
  });

  it('an event Postgres cannot store is dead-lettered alone; the rest of its batch lands', async () => {
    const queue = b.queue('audit-refused');
    const emitter = emitterFor(queue, 100);
    const good = Array.from({ length: 40 }, (_, i) => event({ taskId: 'task-refused', seq: i }));
    // Both pass the schema, and neither can be stored: text cannot hold NUL, jsonb no lone surrogate.
    const nul = event({ taskId: 'task-refused', seq: 100, details: { note: 'worker\u0000one' } });
    // A NUL in a clear-text field fails its grammar: the writer stores a ref of it, the event lands.
    const nulActor = event({ taskId: 'task-refused', seq: 102, actorId: 'worker\u0000two' });
    const surrogate = event({ taskId: 'task-refused', seq: 101, details: { note: 'cut \ud83d mid-emoji' } });
    for (const e of [...good.slice(0, 20), nul, nulActor, ...good.slice(20), surrogate]) emitter.record(e);
    await emitter.flush();
    // The dead letter keeps the details the writer's policy allows.
    const writer = b.auditWriter('audit-refused', ledger.pool, { redactionPolicy: notePolicy });
    const refused = () =>
      t.query(
        `select event, reason from ${t.schema}.audit_dead_letter where reason like 'AUDIT_EVENT_REFUSED%' order by event->>'seq'`,
      );
    await waitFor(async () => (await refused()).rows.length === 2, 'the two refused events, dead-lettered');
    expect(await count("task_id = 'task-refused'")).toBe(41);
    const landed = await t.query(
      `select actor_id from ${t.schema}.audit_events where task_id = 'task-refused' and seq = 102`,
    );
    expect(verifyRef(landed.rows[0]?.actor_id, 'worker\u0000two', notePolicy)).toBe(true);
    const dl = await refused();
    expect(dl.rows.map((r) => r.event.seq)).toEqual([100, 101]);
    // Only Postgres's SQLSTATE is kept of its refusal; an actor id that is no identifier is a ref.
    expect(dl.rows.map((r) => r.reason)).toEqual([
      'AUDIT_EVENT_REFUSED sqlstate=22P05',
      'AUDIT_EVENT_REFUSED sqlstate=22P02',
    ]);
    expect(dl.rows[0]?.event.details.note).toBe('worker\uFFFDone');
    expect(dl.rows[1]?.event.details.note).toBe('cut \uFFFD mid-emoji');
    await waitFor(async () => (await queue.getJobCounts('wait', 'active')).wait === 0, 'queue drained');
    expect(await queue.getJobCounts('failed')).toEqual({ failed: 0 });
    await emitter.close();
    await writer.close();
    await queue.close();
  });

  it('an event JSON cannot write is refused alone and dead-lettered as invalid: its batch goes on', async () => {
    const queue = b.queue('audit-unserialisable');
    const emitter = emitterFor(queue, 500);
    const good = Array.from({ length: 9 }, (_, i) => event({ taskId: 'task-unserialisable', seq: i }));
    // Each passes the event's checks (details are a plain record) but not JSON.stringify: a
    // bigint, a toJSON that throws, a getter that throws, nesting deeper than the stack.
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { deep };
    const values: unknown[] = [
      10n,
      {
        toJSON: () => {
          throw new Error('no');
        },
      },
      Object.defineProperty({}, 'secret', {
        enumerable: true,
        get: () => {
          throw new Error('no');
        },
      }),
      deep,
    ];
    for (const e of good.slice(0, 4)) emitter.record(e);
    const bad = values.map((v) => emitter.recordDurable(event({ taskId: 'task-unserialisable', details: { v } })));
    const durable = emitter.recordDurable(good[4] as AuditEvent);
    for (const e of good.slice(5)) emitter.record(e);
    for (const p of bad) await expect(p).rejects.toMatchObject({ code: 'AUDIT_EVENT_INVALID' });
    await expect(durable).resolves.toBeUndefined();
    await emitter.close();
    expect(emitter.metrics).toMatchObject({ emitted: 13, enqueued: 9, invalid: 4, deadLettered: 4, dropped: 0 });
    const dl = await t.query(
      `select reason, event from ${t.schema}.audit_dead_letter where reason like '%not_serialisable%'`,
    );
    expect(dl.rows).toHaveLength(4);
    for (const row of dl.rows) {
      expect(row.reason).toBe('AUDIT_EVENT_INVALID issues=not_serialisable@$');
      expect(row.event).not.toHaveProperty('details');
      expect(row.event.action).toBe('idempotency.claimed');
    }
    const jobs = await queue.getJobs(['wait', 'prioritized']);
    const queued = (await Promise.all(jobs.map(async (j) => (await decodeAuditBatch(j.data)).events))).flat();
    expect(queued).toEqual(JSON.parse(JSON.stringify(good)));
    await queue.obliterate({ force: true });
    await queue.close();
  });

  it('past maxBuffered events go to the outbox and after close() each goes at once, every one checked alike', async () => {
    const queue = b.queue('audit-capacity');
    const emitter = emitterFor(queue, 500, { maxBuffered: 5 });
    const events = Array.from({ length: 10 }, (_, i) => event({ taskId: 'task-capacity', seq: i }));
    // Five fill the buffer; from the sixth on, until a batch is sent, events go to the outbox.
    for (const e of events.slice(0, 8)) emitter.record(e);
    const tooLarge = emitter.recordDurable(event({ taskId: 'task-capacity', details: { note: 'x'.repeat(300_000) } }));
    const unserialisable = emitter.recordDurable(event({ taskId: 'task-capacity', details: { n: 1n } }));
    await expect(tooLarge).rejects.toMatchObject({ code: 'AUDIT_EVENT_TOO_LARGE' });
    await expect(unserialisable).rejects.toMatchObject({ code: 'AUDIT_EVENT_INVALID' });
    await emitter.close();
    // Closed: each event is a batch of its own, sent at once, and checked as before.
    for (const e of events.slice(8)) emitter.record(e);
    const lateBad = emitter.recordDurable(event({ taskId: 'task-capacity', details: { n: 2n } }));
    await expect(lateBad).rejects.toMatchObject({ code: 'AUDIT_EVENT_INVALID' });
    await emitter.flush();
    expect(emitter.metrics).toMatchObject({
      emitted: 13,
      enqueued: 7,
      outboxed: 3,
      tooLarge: 1,
      invalid: 2,
      deadLettered: 3,
      dropped: 0,
      batches: 3,
    });
    const jobs = await queue.getJobs(['wait', 'prioritized']);
    const queued = (await Promise.all(jobs.map(async (j) => (await decodeAuditBatch(j.data)).events))).flat();
    const seqs = (xs: unknown[]) => xs.map((e) => Number((e as { seq: unknown }).seq)).sort((x, y) => x - y);
    expect(seqs(queued)).toEqual([0, 1, 2, 3, 4, 8, 9]);
    const outboxed = await t.query(
      `select e->>'seq' as seq from ${t.schema}.audit_outbox, jsonb_array_elements(events) e where e->>'taskId' = 'task-capacity'`,
    );
    expect(seqs(outboxed.rows)).toEqual([5, 6, 7]);
    await t.query(`delete from ${t.schema}.audit_outbox where events->0->>'taskId' = 'task-capacity'`);
    await queue.obliterate({ force: true });
    await queue.close();
  });

  it('when Redis refuses a batch it goes to the Postgres outbox: nothing lost', async () => {
    const dead = new Redis({
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    dead.on('error', () => {});
    const queue = new Queue('audit-dead', { connection: dead });
    queue.on('error', () => {});
    const emitter = emitterFor(queue, 10);
    // One event with a NUL character: jsonb cannot hold it, and it must not lose its batch.
    for (let i = 0; i < 25; i++)
      emitter.record(event({ taskId: 'task-outbox', seq: i, ...(i === 3 ? { actorId: 'a\u0000b' } : {}) }));
    await emitter.close();
    expect(emitter.metrics).toMatchObject({ emitted: 25, outboxed: 25, dropped: 0 });
    const rows = await t.query(`select jsonb_array_length(events)::int as n, reason from ${t.schema}.audit_outbox`);
    expect(rows.rows.reduce((n, r) => n + r.n, 0)).toBe(25);
    const kept = await t.query(
      `select e->>'actorId' as actor from ${t.schema}.audit_outbox, jsonb_array_elements(events) e where e->>'seq' = '3'`,
    );
    expect(kept.rows[0]?.actor).toBe('a\uFFFDb');
    expect(rows.rows[0]?.reason).toMatch(/enqueue failed/);
    await queue.close().catch(() => {});
    dead.disconnect();
  });
});

describe('failures outside the processor', () => {
  it('a job BullMQ fails without calling the processor (maxStartedAttempts) is audited from the worker', async () => {
    const op = testOperation({
      name: 'mail.send',
      input: z.object({ to: z.string() }),
      effect: (i) => i,
      resourceKey: (i) => `mail:${i.to}`,
      lease: '20s',
    });
    // Another attempt holds the operation, so the job waits (delayed, no attempt used)...
    const key = op.keyFor({ to: 'held' });
    await ledger.claim({
      key,
      operation: 'mail.send',
      fingerprint: op.fingerprintOf({ to: 'held' }, testKeyring),
      leaseMs: 20_000,
      retentionMs: 3_600_000,
      downstream: 'idempotent',
    });
    const captured: WrapperEvent[] = [];
    const q = b.queue('started-limit');
    const w = b.worker(
      'started-limit',
      withIdempotency(op, async () => ({ sent: true }), {
        ledger,
        keyring: testKeyring,
        audit: { emit: (e) => captured.push(e) },
      }),
      {
        maxStartedAttempts: 2,
      },
    );
    const { AuditEmitter: Emitter } = await import('../../src/audit/emitter.js');
    const auditQueue = b.queue('audit-outside');
    const emitter = new Emitter({ queue: auditQueue, pool: ledger.pool, schema: t.schema, redact: passThrough });
    const recorded: AuditEvent[] = [];
    const record = emitter.record.bind(emitter);
    emitter.record = (e: AuditEvent) => {
      recorded.push(e);
      record(e);
    };
    const { auditWorkerFailures } = await import('../../src/audit/worker-failures.js');
    const detach = auditWorkerFailures(w, emitter);
    // ...until BullMQ's own limit on started attempts fails it before the processor runs.
    const job = await q.add('send', { to: 'held' });
    const done = await settled(q, job.id as string);
    expect(done.state).toBe('failed');
    expect(done.failedReason).toMatch(/started more than allowable limit/);
    expect(captured.filter((e) => e.type === 'in_progress').length).toBeGreaterThanOrEqual(1);
    await waitFor(() => recorded.length > 0, 'the failure event');
    expect(recorded[0]).toMatchObject({
      action: 'idempotency.failed',
      decision: 'deny',
      reasonCode: 'BULLMQ_MAX_STARTED_ATTEMPTS',
      jobId: job.id,
    });
    detach();
    await emitter.close();
    await w.close();
    await q.close();
    await auditQueue.close();
  });
});

describe('reconstruction', () => {
  it('a failed attempt, a lost lock and takeover, a denied tool call and a replay reconstruct in order, whatever the write order', async () => {
    const input = z.object({ order: z.string() });
    const op = testOperation({
      name: 'assets.create',
      input,
      effect: (i) => i,
      resourceKey: (i) => `order:${i.order}`,
      lease: '800ms',
    });
    const captured: WrapperEvent[] = [];
    const sink = { emit: (e: WrapperEvent) => captured.push(e) };
    const timing = { lockDuration: 1500, stalledInterval: 300, maxStalledCount: 5 };
    let calls = 0;
    let releaseFirst: () => void = () => {};
    const firstBlocked = new Promise<void>((r) => {
      releaseFirst = r;
    });
    let stuckStarted: () => void = () => {};
    const stuck = new Promise<void>((r) => {
      stuckStarted = r;
    });
    const processor = async (_i: z.output<typeof input>, ctx: Parameters<Parameters<typeof withIdempotency>[1]>[1]) => {
      calls++;
      if (calls === 1) throw new RetryableError('upstream timeout');
      if (calls === 2) {
        ctx.audit({ action: 'tool.delete_bucket', decision: 'deny', reasonCode: 'POLICY_PROTECTED_RESOURCE' });
        stuckStarted();
        await firstBlocked; // ignores its signal, returns late
        return { assetId: 'late' };
      }
      ctx.audit({ action: 'tool.create_asset', decision: 'allow' });
      return { assetId: 'as_1' };
    };
    const q = b.queue('story');
    const w1 = b.worker(
      'story',
      withIdempotency(op, processor, { ledger, keyring: testKeyring, audit: sink, worker: timing }),
      timing,
    );
    const { jobId, key, idempotencyKey } = await op.enqueue(
      q,
      { order: 'o-story' },
      {
        taskId: 'task-story',
        jobOptions: { attempts: 3, backoff: 10 },
        worker: timing,
      },
    );
    await stuck;
    // The first worker loses its lock (as when its event loop stalls): BullMQ hands the job on.
    await w1.pause(true).catch(() => {});
    const lockKey = `${t.prefix}:story:${jobId}:lock`;
    const redis = t.redis();
    await redis.del(lockKey);
    const w2 = b.worker(
      'story',
      withIdempotency(op, processor, { ledger, keyring: testKeyring, audit: sink, worker: timing }),
      timing,
    );
    const done = await settled(q, jobId, 15_000);
    expect(done.state).toBe('completed');
    releaseFirst();
    await waitFor(() => captured.some((e) => e.type === 'stale_completion'), 'the late completion to be refused');
    // A replay: the same intent enqueued again under another job id.
    const again = await q.add('create', { order: 'o-story' }, { jobId: 'again' });
    await settled(q, again.id as string);
    for (const w of [w1, w2]) await w.close();
    await q.close();
    await redis.quit();

    // Write the captured events in a shuffled order, over several batches.
    const store2 = store;
    const { auditEventFromWrapper } = await import('../../src/audit/from-wrapper.js');
    const events = captured.map((e) =>
      auditEventSchema.parse(auditEventFromWrapper({ ...e, taskId: 'task-story' }, 'worker:test')),
    );
    const shuffled = [...events].sort(() => Math.random() - 0.5);
    for (let i = 0; i < shuffled.length; i += 3) await store2.writeBatch(shuffled.slice(i, i + 3));
    await store2.writeBatch(shuffled); // and once more: no duplicates

    const story = await timeline({ taskId: 'task-story' }, { store, ledger });
    const actions = story.events.map((e) => `${e.action}${e.epoch ? `@${e.epoch}` : ''}`);
    // The second worker may find epoch 2's lease still running (in_progress, once per wait) or
    // already lapsed, depending on when BullMQ's stall check hands it the job.
    const waits = actions.indexOf('idempotency.takeover@3') - actions.indexOf('tool.delete_bucket@2') - 1;
    expect(waits).toBeGreaterThanOrEqual(0);
    expect(actions).toEqual([
      'idempotency.claimed@1',
      'idempotency.released@1',
      'idempotency.claimed@2',
      'tool.delete_bucket@2',
      ...Array.from({ length: waits }, () => 'idempotency.in_progress@2'),
      'idempotency.takeover@3',
      'tool.create_asset@3',
      'idempotency.completed@3',
      'idempotency.stale_completion@2',
      'idempotency.replayed@3',
    ]);
    expect(story.takeovers).toBe(1);
    expect(story.replays).toBe(1);
    expect(story.attempts.map((a) => [a.epoch, a.start, a.end])).toEqual([
      [1, 'claimed', 'released'],
      [2, 'claimed', 'stale_completion'],
      [3, 'takeover', 'completed'],
    ]);
    expect(story.attempts[1]?.decisions).toEqual([
      { action: 'tool.delete_bucket', decision: 'deny', reasonCode: 'POLICY_PROTECTED_RESOURCE' },
    ]);
    expect(story.finalStates).toEqual([{ key: idempotencyKey, status: 'completed', epoch: 3, stepId: null }]);
    expect(renderTimeline(story)).toMatch(/idempotency\.takeover .* \(epoch 3, job/);
    expect(buildTimeline(shuffled, []).events.map((e) => e.eventId)).toEqual(story.events.map((e) => e.eventId));
    expect(key.resourceKey).toBe('order:o-story');
  });
});
