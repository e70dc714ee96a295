import { Worker } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { auditBatchJob } from '../../src/audit/batch-codec.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { isTransientError } from '../../src/audit/transient-error.js';
import { runBackfill } from '../../src/jobs/audit-backfill.js';
import { bull } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';

// The audit writer against a Postgres of this file's own, stopped for longer than the old writer's
// budget (5 attempts, 1 s apart): every batch must land once, none in the failed set.
const t = new TestContext('audit_outage');
const b = bull(t);
let db: PrivatePostgres | undefined;
let pool: pg.Pool;
const schema = 'audit_outage';

beforeAll(async () => {
  db = await PrivatePostgres.start();
  await migrate({ connectionString: db.url(), schema });
  pool = new pg.Pool({ connectionString: db.url(), max: 6, connectionTimeoutMillis: 2_000 });
  pool.on('error', () => {}); // idle clients lose their connection when the database stops
});
afterAll(async () => {
  await pool?.end().catch(() => {});
  await db?.destroy();
  await t.teardown();
});

const passThrough = (e: AuditEvent) => e;
let n = 0;
function event(taskId: string): AuditEvent {
  n++;
  return {
    eventId: eventIdFor('outage', taskId, n),
    actorType: 'system',
    actorId: 'worker:1',
    action: 'idempotency.claimed',
    resourceType: 'idempotency_key',
    resourceId: 'acme:order%3A1:v1',
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'intent',
    taskId,
    seq: n,
  };
}

/** Rows per event id of a task: every id of `ids` exactly once, nothing else. */
async function rowsPerId(taskId: string): Promise<Map<string, number>> {
  const res = await pool.query<{ id: string; n: number }>(
    `select event_id as id, count(*)::int as n from ${schema}.audit_events where task_id = $1 group by event_id`,
    [taskId],
  );
  return new Map(res.rows.map((r) => [r.id, r.n]));
}

async function written(taskId: string): Promise<number> {
  return (await rowsPerId(taskId).catch(() => new Map())).size;
}

describe('audit writer through a Postgres outage', () => {
  it('keeps retrying transient errors: every event lands once, none fails, after a 9 s outage', async () => {
    const queue = b.queue('audit');
    const emitter = new AuditEmitter({ queue, pool, schema, redact: passThrough, maxBatch: 20, maxDelayMs: 20 });
    const writer = b.auditWriter('audit', pool, { schema, transientBackoff: { initialMs: 200, maxMs: 1_500 } });
    const ids: string[] = [];
    const emit = (count: number) => {
      for (let i = 0; i < count; i++) {
        const e = event('task-outage');
        ids.push(e.eventId);
        emitter.record(e);
      }
    };

    emit(40);
    await emitter.flush();
    await waitFor(async () => (await written('task-outage')) === 40, 'events before the outage');

    await db?.stop('fast');
    const outageStarted = Date.now();
    // Events keep coming while the database is away: the emitter needs only Redis.
    while (Date.now() - outageStarted < 9_000) {
      emit(15);
      await emitter.flush();
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(await queue.getFailedCount()).toBe(0);
    await db?.startAgain();

    await waitFor(async () => (await written('task-outage')) === ids.length, 'every event written', 30_000, 100);
    await emitter.close();
    const rows = await rowsPerId('task-outage');
    expect(rows.size).toBe(ids.length);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(rows.get(id)).toBe(1);
    expect(emitter.metrics).toMatchObject({ outboxed: 0, dropped: 0, invalid: 0 });
    expect(await queue.getFailedCount()).toBe(0);
    expect(await queue.getJobCounts('wait', 'active', 'delayed')).toEqual({ wait: 0, active: 0, delayed: 0 });
    await writer.close();
    await queue.close();
  });

  it('re-drives audit batches an older writer left in the failed set (backfill)', async () => {
    const queue = b.queue('audit-legacy');
    const events = Array.from({ length: 30 }, () => event('task-legacy'));
    // What an older writer left: a batch whose five attempts all met an unreachable database.
    const job = await auditBatchJob(events);
    await queue.add(job.name, job.data, { ...job.opts, attempts: 1 });
    const legacy = new Worker(
      'audit-legacy',
      async () => {
        throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
      },
      { connection: { url: t.redisUrl, maxRetriesPerRequest: null }, prefix: t.prefix },
    );
    await waitFor(async () => (await queue.getFailedCount()) === 1, 'the batch in the failed set');
    await legacy.close();
    expect((await queue.getFailed())[0]?.failedReason).toContain('ECONNREFUSED');

    const writer = b.auditWriter('audit-legacy', pool, { schema });
    const progress = await runBackfill({ pool, auditQueue: queue, schema, name: 'legacy' });
    expect(progress.failedBatchesRedriven).toBe(1);
    await waitFor(async () => (await written('task-legacy')) === 30, 'the re-driven batch written');
    const rows = await rowsPerId('task-legacy');
    for (const e of events) expect(rows.get(e.eventId)).toBe(1);
    expect(await queue.getFailedCount()).toBe(0);
    // Safe to repeat: nothing left to re-drive.
    expect((await runBackfill({ pool, auditQueue: queue, schema, name: 'legacy' })).failedBatchesRedriven).toBe(0);
    await writer.close();
    await queue.close();
  });

  it('tells transient errors from data errors', () => {
    const pgError = (code: string, message = 'x') => Object.assign(new Error(message), { code });
    expect(isTransientError(pgError('53300', 'sorry, too many clients already'))).toBe(true);
    expect(isTransientError(pgError('57P01'))).toBe(true);
    expect(isTransientError(pgError('08006'))).toBe(true);
    expect(isTransientError(pgError('40001'))).toBe(true);
    expect(isTransientError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientError(new AggregateError([pgError('ECONNREFUSED')], ''))).toBe(true);
    expect(isTransientError(new Error('wrapped', { cause: pgError('ECONNRESET') }))).toBe(true);
    expect(isTransientError(pgError('22P05', 'unsupported Unicode escape sequence'))).toBe(false);
    expect(isTransientError(pgError('23502'))).toBe(false);
    expect(isTransientError(pgError('42P01', 'relation "x" does not exist'))).toBe(false);
    expect(isTransientError(new Error('boom'))).toBe(false);
  });
});
