import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { fingerprint } from '../../src/fingerprint/fingerprint.js';
import { createBackfillWorker, drainOutbox, runBackfill } from '../../src/jobs/audit-backfill.js';
import { sweepLedger } from '../../src/jobs/ledger-sweeper.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { testOperation } from '../fixtures/operations.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { nodeArgs } from '../helpers/spawn.js';

const t = new TestContext('operations');
const b = bull(t);
let ledger: PostgresLedger;

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
});
afterAll(async () => {
  await ledger.close();
  await t.teardown();
});

const passThrough = (e: AuditEvent) => e;
const TRANSITIONS =
  "action in ('idempotency.claimed','idempotency.takeover','idempotency.completed','idempotency.failed','idempotency.released','idempotency.unknown')";

async function eventIds(where = TRANSITIONS): Promise<string[]> {
  return (await t.query(`select event_id from ${t.schema}.audit_events where ${where} order by event_id`)).rows.map(
    (r) => r.event_id,
  );
}

describe('audit backfill', () => {
  it('restores every deleted transition event, exactly once, and drains the outbox', async () => {
    const auditQueue = b.queue('audit');
    const emitter = new AuditEmitter({ queue: auditQueue, pool: ledger.pool, schema: t.schema, redact: passThrough });
    const writer = b.auditWriter('audit', ledger.pool);
    const op = testOperation({
      name: 'mail.send',
      input: z.object({ n: z.number() }),
      effect: (i) => i,
      resourceKey: (i) => `mail:${i.n}`,
    });
    const q = b.queue('mail');
    const w = b.worker(
      'mail',
      withIdempotency(op, async (i) => ({ sent: i.n }), { ledger, keyring: testKeyring, audit: emitter }),
      { concurrency: 20 },
    );
    const jobs = await op.enqueueBulk(
      q,
      Array.from({ length: 60 }, (_, n) => ({ input: { n }, options: { taskId: `task-${n % 5}` } })),
    );
    await Promise.all(jobs.map((j) => settled(q, j.jobId)));
    await emitter.flush();
    await waitFor(async () => (await eventIds()).length === 120, '120 transition events');
    const before = await eventIds();

    // Lose a random third of them.
    const lost = before.filter(() => Math.random() < 1 / 3);
    await t.query(`delete from ${t.schema}.audit_events where event_id = any($1)`, [lost]);
    // And a batch that Redis refused sits in the outbox.
    const dead = new Redis({
      port: 1,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    dead.on('error', () => {});
    const deadQueue = new Queue('audit', { connection: dead, prefix: t.prefix });
    deadQueue.on('error', () => {});
    const offline = new AuditEmitter({ queue: deadQueue, pool: ledger.pool, schema: t.schema, redact: passThrough });
    const outboxEvent: AuditEvent = {
      eventId: eventIdFor('outbox-test'),
      actorType: 'agent',
      actorId: 'assistant',
      action: 'tool.send_mail',
      resourceType: 'mailbox',
      resourceId: 'mb_1',
      decision: 'pending_confirmation',
      createdAt: new Date().toISOString(),
      phase: 'intent',
    };
    offline.record(outboxEvent);
    await offline.close();
    expect(offline.metrics.outboxed).toBe(1);
    await deadQueue.close().catch(() => {});
    dead.disconnect();

    const progress = await runBackfill({ pool: ledger.pool, auditQueue, schema: t.schema, pageSize: 7 });
    expect(progress).toMatchObject({ rowsScanned: 60, eventsEnqueued: 120, outboxBatchesDrained: 1, done: true });
    await waitFor(async () => (await eventIds()).length === 120, 'the lost events to come back');
    expect(await eventIds()).toEqual(before);
    await waitFor(async () => (await eventIds(`event_id = '${outboxEvent.eventId}'`)).length === 1, 'the outbox event');
    expect(Number((await t.query(`select count(*) from ${t.schema}.audit_outbox`)).rows[0]?.count)).toBe(0);

    // Running it again from the start writes nothing new.
    const total = async () => Number((await t.query(`select count(*) from ${t.schema}.audit_events`)).rows[0]?.count);
    const n = await total();
    await runBackfill({ pool: ledger.pool, auditQueue, schema: t.schema, since: new Date(0) });
    await emitter.flush();
    await waitFor(async () => {
      const active = (await auditQueue.getJobCounts('active', 'wait')) as Record<string, number>;
      return (active.active ?? 0) + (active.wait ?? 0) === 0;
    }, 'the audit queue to drain');
    expect(await total()).toBe(n);
    expect(await drainOutbox(ledger.pool, t.schema, auditQueue)).toBe(0);
    await w.close();
    await q.close();
    await writer.close();
    await auditQueue.close();
  });

  it('a backfill whose worker process is SIGKILLed resumes from its checkpoint and finishes, no duplicates', async () => {
    // 300 completed rows written straight through the ledger.
    for (let i = 0; i < 300; i++) {
      const key = { namespace: 'acme/bulk', resourceKey: `r:${i}`, version: 'v1' };
      const c = await ledger.claim({
        key,
        operation: 'bulk',
        fingerprint: fingerprint('bulk', i),
        leaseMs: 5000,
        retentionMs: 3_600_000,
        downstream: 'idempotent',
        taskId: 'task-bulk',
      });
      if (c.kind === 'acquired') await ledger.complete(key, c.epoch, i);
    }
    const auditQueue = b.queue('audit-kill');
    const backfillQueue = b.queue('backfill');
    const child = spawn(
      process.execPath,
      [
        ...nodeArgs(fileURLToPath(new URL('../helpers/backfill-child.ts', import.meta.url))),
        JSON.stringify({
          databaseUrl: t.databaseUrl.replace(/application_name=[^&]*/, 'application_name=backfill_child'),
          redisUrl: t.redisUrl,
          schema: t.schema,
          prefix: t.prefix,
          auditQueue: 'audit-kill',
          backfillQueue: 'backfill',
        }),
      ],
      { stdio: ['pipe', 'pipe', 'inherit'], cwd: fileURLToPath(new URL('../..', import.meta.url)) },
    );
    try {
      const job = await backfillQueue.add('backfill', { name: 'kill-test' });
      // Wait until it has made progress, then kill it mid-walk.
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on('line', (l) => {
          if ((JSON.parse(l) as { rowsScanned: number }).rowsScanned >= 40) resolve();
        });
        child.once('exit', () => reject(new Error('backfill child exited')));
      });
      child.kill('SIGKILL');
      const checkpoint = (
        await t.query(`select rows_scanned from ${t.schema}.audit_backfill_checkpoint where name = 'kill-test'`)
      ).rows[0];
      expect(Number(checkpoint?.rows_scanned)).toBeGreaterThanOrEqual(40);
      expect(Number(checkpoint?.rows_scanned)).toBeLessThan(300);
      // A new worker picks the stalled job up and resumes from the checkpoint.
      const w = createBackfillWorker({
        connection: { url: t.redisUrl },
        prefix: t.prefix,
        queueName: 'backfill',
        pool: ledger.pool,
        schema: t.schema,
        auditQueue,
        workerOptions: { lockDuration: 1000, stalledInterval: 500 },
      });
      t.track(
        'backfill worker',
        () => !w.isRunning(),
        () => w.close(),
      );
      const done = await settled(backfillQueue, job.id as string, 30_000);
      expect(done.state).toBe('completed');
      expect(done.returnvalue).toMatchObject({ done: true });
      expect(done.returnvalue.rowsScanned).toBeGreaterThanOrEqual(300);
      const writer = b.auditWriter('audit-kill', ledger.pool);
      const where = "task_id = 'task-bulk'";
      await waitFor(async () => (await eventIds(where)).length === 600, 'claimed + completed for 300 rows', 20_000);
      const dup = await t.query(
        `select event_id from ${t.schema}.audit_events where ${where} group by event_id having count(*) > 1`,
      );
      expect(dup.rows).toHaveLength(0);
      await w.close();
      await writer.close();
    } finally {
      child.kill('SIGKILL');
      await auditQueue.close();
      await backfillQueue.close();
    }
  });
});

describe('ledger sweeper', () => {
  it('sweeps 200,000 expired rows in bounded batches while claims continue; live rows untouched', async () => {
    const table = `${t.schema}.idempotency_ledger`;
    await t.query(
      `insert into ${table} (key, namespace, resource_key, version, operation, fingerprint, status, epoch, downstream,
        retention_ms, last_transition, created_at, updated_at, claimed_at, claim_transition, completed_at, expires_at, result,
        sweep_after)
       select 'old:' || g, 'old', 'r' || g, 'v1', 'old', 'fp', 'completed', 1, 'idempotent', 1000, 'completed',
         now() - interval '2 days', now() - interval '2 days', now() - interval '2 days', 'claimed', now() - interval '2 days',
         now() - interval '1 day', '1'::jsonb, now() - interval '2 days' + interval '1 second'
       from generate_series(1, 200000) g`,
    );
    const live = { namespace: 'acme/live', resourceKey: 'locked', version: 'v1' };
    await ledger.claim({
      key: live,
      operation: 'live',
      fingerprint: 'f',
      leaseMs: 1,
      retentionMs: 1,
      downstream: 'none',
    });
    const unknown = { namespace: 'acme/live', resourceKey: 'unknown', version: 'v1' };
    const u = await ledger.claim({
      key: unknown,
      operation: 'live',
      fingerprint: 'f',
      leaseMs: 5000,
      retentionMs: 1,
      downstream: 'none',
    });
    if (u.kind === 'acquired') await ledger.markUnknown(unknown, u.epoch, { code: 'E', message: 'e' });
    const kept = { namespace: 'acme/live', resourceKey: 'kept', version: 'v1' };
    const k = await ledger.claim({
      key: kept,
      operation: 'live',
      fingerprint: 'f',
      leaseMs: 5000,
      retentionMs: 3_600_000,
      downstream: 'none',
    });
    if (k.kind === 'acquired') await ledger.complete(kept, k.epoch, 'kept');

    let stop = false;
    let claims = 0;
    const claimLoop = (async () => {
      while (!stop) {
        const key = { namespace: 'acme/during', resourceKey: `d:${claims}`, version: 'v1' };
        const c = await ledger.claim({
          key,
          operation: 'during',
          fingerprint: 'f',
          leaseMs: 5000,
          retentionMs: 3_600_000,
          downstream: 'idempotent',
        });
        expect(c.kind).toBe('acquired');
        if (c.kind === 'acquired') await ledger.complete(key, c.epoch, claims);
        claims++;
      }
    })();
    const swept = await sweepLedger(ledger, { batchSize: 5000 });
    stop = true;
    await claimLoop;
    expect(swept.deleted).toBe(200_000);
    expect(swept.batches).toBe(41);
    expect(claims).toBeGreaterThan(0);
    const left = await t.query(`select count(*)::int as n from ${table} where namespace = 'old'`);
    expect(left.rows[0]?.n).toBe(0);
    expect((await ledger.get(live))?.status).toBe('locked');
    expect((await ledger.get(unknown))?.status).toBe('unknown');
    expect((await ledger.get(kept))?.status).toBe('completed');
    const during = await t.query(
      `select count(*)::int as n from ${table} where key like 'acme%2Fduring:%' and status = 'completed'`,
    );
    expect(during.rows[0]?.n).toBe(claims);
  });
});
