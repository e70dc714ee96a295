/**
 * The worker process (`npm start` = jobs/main.ts): spawned for real with its environment, and
 * started in-process through `startWorkerProcess`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT, startWorkerProcess } from '../jobs/main.js';
import { type AuditEvent, eventIdFor } from '../src/audit/audit-event.js';
import { AUDIT_JOB_NAME } from '../src/audit/emitter.js';
import { loadConfig } from '../src/config/env.js';
import { ServiceUnavailableError } from '../src/config/errors.js';
import { bull, settled } from './helpers/bullmq.js';
import { TestContext, waitFor } from './helpers/context.js';
import { type Collected, childEnv, finished, runTs, spawnTs } from './helpers/spawn.js';

const t = new TestContext('worker_process');
const b = bull(t);

const vars = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: t.databaseUrl,
  REDIS_URL: t.redisUrl,
  BQI_SCHEMA: t.schema,
  BQI_PREFIX: t.prefix,
  ...extra,
});

type LogLine = { level: number; msg: string; [k: string]: unknown };

function logs(child: Collected): LogLine[] {
  return child.out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as LogLine);
}

const waitForLog = (child: Collected, msg: string, timeoutMs = 30_000) =>
  waitFor(() => logs(child).find((l) => l.msg === msg), `log line "${msg}"\n${child.out}\n${child.err}`, timeoutMs, 50);

function auditEvent(id: string): AuditEvent {
  return {
    eventId: eventIdFor('worker-process-test', id),
    actorType: 'agent',
    actorId: 'assistant',
    action: 'tool.send_mail',
    resourceType: 'mailbox',
    resourceId: `mb_${id}`,
    decision: 'allow',
    createdAt: new Date().toISOString(),
    phase: 'outcome',
  };
}

const eventCount = async (where: string, values: unknown[] = []) =>
  Number((await t.query(`select count(*) from ${t.schema}.audit_events where ${where}`, values)).rows[0]?.count);

beforeAll(async () => {
  await t.setup();
});
afterAll(async () => {
  await t.teardown();
});

describe('worker process (jobs/main.ts)', () => {
  it('starts, writes audit batches, runs backfill and sweeper; SIGTERM exits 0 within the deadline', async () => {
    const child = spawnTs(
      'jobs/main.ts',
      [],
      childEnv(vars({ BQI_AUDIT_QUEUE: 'audit-main', BQI_SHUTDOWN_TIMEOUT_MS: '5000' })),
    );
    const exit = finished(child, 60_000, 'worker process');
    try {
      const started = await waitForLog(child, 'started');
      expect(started).toMatchObject({ schema: t.schema, prefix: t.prefix, queues: { audit: 'audit-main' } });

      const auditQueue = b.queue('audit-main');
      const event = auditEvent('main');
      await auditQueue.add(AUDIT_JOB_NAME, { events: [event] });
      await waitFor(
        async () => (await eventCount('event_id = $1', [event.eventId])) === 1,
        'the audit batch in Postgres',
      );
      // The sweeper is scheduled, ran at start and its summary went through emitter → queue → writer.
      const sweeperQueue = b.queue('bullmq-idempotency-sweeper');
      expect((await sweeperQueue.getJobSchedulers()).map((s) => s.key)).toContain('ledger-sweeper');
      await waitFor(
        async () => (await eventCount("action = 'idempotency.swept' and actor_id = 'ledger-sweeper'")) >= 1,
        'the sweeper summary event',
      );
      const backfillQueue = b.queue('bullmq-idempotency-backfill');
      const job = await backfillQueue.add('backfill', { name: 'worker-process-test' });
      expect((await settled(backfillQueue, job.id as string)).returnvalue).toMatchObject({ done: true });
      await Promise.all([auditQueue.close(), sweeperQueue.close(), backfillQueue.close()]);

      const sent = Date.now();
      child.kill('SIGTERM');
      const r = await exit;
      expect(r.code, r.stderr).toBe(0);
      expect(Date.now() - sent).toBeLessThan(5_000);
      expect(logs(child).map((l) => l.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('exits 2 on bad configuration (naming the variables) and 3 when Postgres or Redis is unreachable', async () => {
    const [badEnv, noPostgres, noRedis] = await Promise.all([
      runTs('jobs/main.ts', [], childEnv(vars({ BQI_SHUTDOWN_TIMEOUT_MS: 'soon', REDIS_URL: undefined }))),
      runTs('jobs/main.ts', [], childEnv(vars({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' }))),
      runTs('jobs/main.ts', [], childEnv(vars({ REDIS_URL: 'redis://127.0.0.1:1' }))),
    ]);
    expect(badEnv.code).toBe(EXIT.config);
    expect(badEnv.stderr).toContain('BQI_CONFIG: REDIS_URL is required');
    expect(badEnv.stderr).toContain('BQI_CONFIG: BQI_SHUTDOWN_TIMEOUT_MS must be a whole number of milliseconds');
    expect(JSON.parse(badEnv.stdout.trim())).toMatchObject({
      level: 60,
      variables: ['REDIS_URL', 'BQI_SHUTDOWN_TIMEOUT_MS'],
    });
    expect(noPostgres.code).toBe(EXIT.unreachable);
    expect(noPostgres.stderr).toContain('cannot reach Postgres at postgres://postgres@127.0.0.1:1/test');
    expect(noRedis.code).toBe(EXIT.unreachable);
    expect(noRedis.stderr).toContain('cannot reach Redis at redis://127.0.0.1:1');
  });

  it('force-closes after BQI_SHUTDOWN_TIMEOUT_MS when a job does not finish, and exits 1', async () => {
    // Hold a lock on the audit table: the writer's insert blocks, its job stays active.
    const pool = t.pool(1);
    const client = await pool.connect();
    try {
      await client.query('begin');
      await client.query(`lock table ${t.schema}.audit_events in access exclusive mode`);
      const child = spawnTs(
        'jobs/main.ts',
        [],
        childEnv(vars({ BQI_AUDIT_QUEUE: 'audit-deadline', BQI_SHUTDOWN_TIMEOUT_MS: '1000' })),
      );
      const exit = finished(child, 60_000, 'worker process');
      try {
        await waitForLog(child, 'started');
        const auditQueue = b.queue('audit-deadline');
        await auditQueue.add(AUDIT_JOB_NAME, { events: [auditEvent('deadline')] });
        await waitFor(async () => (await auditQueue.getActiveCount()) > 0, 'the audit job to be active');
        await auditQueue.close();
        const sent = Date.now();
        child.kill('SIGTERM');
        const r = await exit;
        expect(r.code, r.stderr).toBe(EXIT.failure);
        expect(Date.now() - sent).toBeLessThan(1_000 + 2_000 + 2_000);
        expect(logs(child).map((l) => l.msg)).toEqual(
          expect.arrayContaining([
            'shutdown deadline reached, force-closing the workers',
            'stopped after force-closing',
          ]),
        );
      } finally {
        child.kill('SIGKILL');
      }
    } finally {
      await client.query('rollback');
      client.release();
      await pool.end();
    }
  });

  it('startWorkerProcess runs in-process and closes cleanly; refuses to start without Redis', async () => {
    expect(loadConfig(vars({})).auditConcurrency).toBe(4);
    expect(() => loadConfig(vars({ BQI_AUDIT_CONCURRENCY: '0' }))).toThrow(
      /BQI_AUDIT_CONCURRENCY must be between 1 and 64/,
    );
    const config = loadConfig(
      vars({ BQI_AUDIT_QUEUE: 'audit-inproc', BQI_AUDIT_CONCURRENCY: '3', LOG_LEVEL: 'silent' }),
    );
    const proc = await startWorkerProcess(config);
    expect(proc.workers.auditWriter.isRunning()).toBe(true);
    expect(proc.workers.auditWriter.concurrency).toBe(3);
    const auditQueue = b.queue('audit-inproc');
    const event = auditEvent('inproc');
    await auditQueue.add(AUDIT_JOB_NAME, { events: [event] });
    await waitFor(async () => (await eventCount('event_id = $1', [event.eventId])) === 1, 'the in-process batch');
    await auditQueue.close();
    expect(await proc.close()).toEqual({ clean: true });
    expect(proc.workers.auditWriter.isRunning()).toBe(false);

    const noRedis = loadConfig(vars({ REDIS_URL: 'redis://127.0.0.1:1', LOG_LEVEL: 'silent' }));
    const err = await startWorkerProcess(noRedis).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect(err).toMatchObject({ service: 'Redis' });
  });
});
