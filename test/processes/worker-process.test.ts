/**
 * The operations process (`bullmq-idempotency start`, src/ops): spawned for real through the
 * CLI's entry point with its environment, under `npm start`, and started in-process through
 * `startOperationsProcess`.
 */
import { spawn } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AUDIT_JOB_NAME } from '../../src/audit/emitter.js';
import { loadConfig } from '../../src/config/env.js';
import { ServiceUnavailableError } from '../../src/config/errors.js';
import { DEFAULT_SWEEPER_QUEUE } from '../../src/jobs/ledger-sweeper.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { EXIT } from '../../src/ops/run.js';
import { bull, settled } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC } from '../helpers/keyring.js';
import { type Collected, childEnv, collect, finished, ROOT, runTs, spawnTs } from '../helpers/spawn.js';

/** The CLI's entry point (the package's bin), run from source. */
const CLI = 'src/cli/main.ts';
const start = (env: NodeJS.ProcessEnv, ...flags: string[]) => spawnTs(CLI, ['start', ...flags], env);

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

const waitForLog = (child: Collected, msg: string, timeoutMs = 60_000): Promise<LogLine> =>
  waitFor(
    () => logs(child).find((l) => l.msg === msg),
    `log line "${msg}"\n${child.out}\n${child.err}`,
    timeoutMs,
    50,
  ) as Promise<LogLine>;

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

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const get = async (port: number, path: string) => {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};

describe('operations process (bullmq-idempotency start)', () => {
  it('starts, serves /healthz and /readyz, writes audit batches (one log line each), runs backfill and sweeper; SIGTERM exits 0', async () => {
    const child = start(
      childEnv(
        vars({
          BQI_AUDIT_QUEUE: 'audit-main',
          BQI_SHUTDOWN_TIMEOUT_MS: '5s',
          BQI_SWEEP_EVERY_MS: '1m',
          BQI_HTTP_PORT: '0',
          BQI_HTTP_HOST: '127.0.0.1',
        }),
      ),
    );
    const exit = finished(child, 100_000, 'operations process');
    try {
      const started = await waitForLog(child, 'started');
      expect(started).toMatchObject({
        schema: t.schema,
        prefix: t.prefix,
        queues: { audit: 'audit-main' },
        sweepEveryMs: 60_000,
        http: { host: '127.0.0.1' },
      });
      const port = (started.http as { port: number }).port;
      expect(await get(port, '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
      expect(await get(port, '/readyz')).toEqual({
        status: 200,
        body: { status: 'ready', postgres: 'ok', redis: 'ok', schedules: 'ok' },
      });
      expect((await get(port, '/nothing-here')).status).toBe(404);

      const auditQueue = b.queue('audit-main');
      const event = auditEvent('main');
      await auditQueue.add(AUDIT_JOB_NAME, { events: [event, auditEvent('main-2')] });
      await waitFor(
        async () => (await eventCount('event_id = $1', [event.eventId])) === 1,
        'the audit batch in Postgres',
      );
      // One line per batch, by counts: the sweeper's summary batch and this one.
      const written = await waitFor(
        () => logs(child).find((l) => l.msg === 'audit batch written' && l.inserted === 2),
        `the batch's log line\n${child.out}`,
      );
      expect(written).toMatchObject({ inserted: 2, duplicates: 0, deadLettered: 0 });
      expect(JSON.stringify(written)).not.toContain('mb_main');
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
  }, 120_000);

  it('every start-up failure is one line and a documented exit code: configuration 3, not migrated 3, a taken HTTP port 3, unreachable 4', async () => {
    const run = (env: Record<string, string | undefined>, ...flags: string[]) =>
      runTs(CLI, ['start', ...flags], childEnv(vars(env)), 100_000);
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const takenPort = (taken.address() as AddressInfo).port;
    const [badEnv, badFlag, notMigrated, noPostgres, noRedis, portTaken] = await Promise.all([
      run({ BQI_SHUTDOWN_TIMEOUT_MS: 'soon', REDIS_URL: undefined }),
      run({}, '--database-url', 'mysql://db/x'),
      run({}, '--schema', 'never_migrated_here'),
      run({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test' }),
      run({}, '--redis-url', 'redis://127.0.0.1:1'),
      run({
        BQI_HTTP_PORT: String(takenPort),
        BQI_HTTP_HOST: '127.0.0.1',
        BQI_AUDIT_QUEUE: 'audit-port',
        BQI_PREFIX: `${t.prefix}-port`, // its own: nothing it leaves in Redis is another run's
        BQI_KEYRING: TEST_KEYRING_SPEC, // else its warning is a log line before the fatal one
      }),
    ]).finally(() => new Promise((resolve) => taken.close(resolve)));
    expect(EXIT).toMatchObject({ config: 3, unreachable: 4 });
    expect(badEnv.code).toBe(EXIT.config);
    expect(badEnv.stderr).toBe(
      'IDEMPOTENCY_ENV_CONFIG: REDIS_URL is required (e.g. redis://host:6379)\n' +
        "IDEMPOTENCY_ENV_CONFIG: BQI_SHUTDOWN_TIMEOUT_MS must be a positive duration: milliseconds or a duration such as '500ms', '30s', '5m', '24h', '7d'\n",
    );
    expect(JSON.parse(badEnv.stdout.trim())).toMatchObject({
      level: 60,
      variables: ['REDIS_URL', 'BQI_SHUTDOWN_TIMEOUT_MS'],
    });
    expect(badFlag.code).toBe(EXIT.config);
    expect(badFlag.stderr).toBe('IDEMPOTENCY_ENV_CONFIG: --database-url must be a postgres:// URL\n');
    expect(notMigrated.code).toBe(EXIT.config);
    expect(notMigrated.stderr).toBe(
      'IDEMPOTENCY_NOT_MIGRATED: schema never_migrated_here is not migrated (missing idempotency_ledger, ' +
        'audit_events, audit_outbox, audit_backfill_checkpoint): run ' +
        '`BQI_SCHEMA=never_migrated_here npx bullmq-idempotency migrate` with the same DATABASE_URL\n',
    );
    expect(noPostgres.code).toBe(EXIT.unreachable);
    expect(noPostgres.stderr).toMatch(
      /^IDEMPOTENCY_SERVICE_UNAVAILABLE: cannot reach Postgres at postgres:\/\/postgres@127\.0\.0\.1:1\/test: [^\n]+\n$/,
    );
    expect(noRedis.code).toBe(EXIT.unreachable);
    expect(noRedis.stderr).toMatch(
      /^IDEMPOTENCY_SERVICE_UNAVAILABLE: cannot reach Redis at redis:\/\/127\.0\.0\.1:1: [^\n]+\n$/,
    );
    expect(portTaken.code).toBe(EXIT.config);
    expect(portTaken.stderr).toBe(`IDEMPOTENCY_HTTP_LISTEN: cannot serve HTTP on 127.0.0.1:${takenPort}: EADDRINUSE\n`);
    // A start that fails at its port leaves no sweeper schedule behind in Redis.
    const portQueue = new Queue(DEFAULT_SWEEPER_QUEUE, { connection: { url: t.redisUrl }, prefix: `${t.prefix}-port` });
    try {
      expect(await portQueue.getJobSchedulersCount()).toBe(0);
    } finally {
      await portQueue.close();
    }
    for (const r of [badEnv, badFlag, notMigrated, noPostgres, noRedis, portTaken]) {
      // The fatal line on stdout is the only log line; no stack anywhere.
      expect(r.stdout.trim().split('\n')).toHaveLength(1);
      expect(`${r.stdout}${r.stderr}`).not.toMatch(/\n\s+at /);
    }
  }, 120_000);

  it('SIGTERM to `npm start` stops the process it runs (no orphan), which exits 0', async () => {
    const child = collect(
      spawn('npm', ['start', '--silent'], {
        cwd: ROOT,
        env: childEnv(vars({ BQI_AUDIT_QUEUE: 'audit-npm' })),
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const exit = finished(child, 100_000, 'npm start');
    let program: number | undefined;
    try {
      const started = await waitForLog(child, 'started');
      program = started.pid as number;
      expect(program).not.toBe(child.pid);
      child.kill('SIGTERM'); // to npm only, as a supervisor stopping `npm start` does
      const r = await exit;
      expect(r.code, r.stderr).toBe(0);
      expect(logs(child).map((l) => l.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
      const pid = program;
      await waitFor(() => !isAlive(pid), `process ${pid} to be gone`, 5_000);
    } catch (err) {
      if (program) process.kill(program, 'SIGKILL');
      throw err;
    } finally {
      child.kill('SIGKILL');
    }
  }, 120_000);

  it('force-closes after BQI_SHUTDOWN_TIMEOUT_MS when a job does not finish, and exits 1', async () => {
    // Hold a lock on the audit table: the writer's insert blocks, its job stays active.
    const pool = t.pool(1);
    const client = await pool.connect();
    try {
      await client.query('begin');
      await client.query(`lock table ${t.schema}.audit_events in access exclusive mode`);
      const child = start(childEnv(vars({ BQI_AUDIT_QUEUE: 'audit-deadline', BQI_SHUTDOWN_TIMEOUT_MS: '1000' })));
      const exit = finished(child, 100_000, 'operations process');
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
  }, 120_000);

  it('startOperationsProcess runs in-process and closes cleanly; refuses to start without Redis', async () => {
    expect(loadConfig(vars({})).auditConcurrency).toBe(4);
    expect(() => loadConfig(vars({ BQI_AUDIT_CONCURRENCY: '0' }))).toThrow(
      /BQI_AUDIT_CONCURRENCY must be between 1 and 64/,
    );
    const config = loadConfig(
      vars({ BQI_AUDIT_QUEUE: 'audit-inproc', BQI_AUDIT_CONCURRENCY: '3', LOG_LEVEL: 'silent' }),
    );
    const proc = await startOperationsProcess(config);
    expect(proc.workers.auditWriter.isRunning()).toBe(true);
    expect(proc.workers.auditWriter.concurrency).toBe(3);
    // No BQI_HTTP_PORT: no HTTP server (health, readiness and metrics are opt-in).
    expect(config.httpPort).toBeUndefined();
    expect(proc.http).toBeUndefined();
    const auditQueue = b.queue('audit-inproc');
    const event = auditEvent('inproc');
    await auditQueue.add(AUDIT_JOB_NAME, { events: [event] });
    await waitFor(async () => (await eventCount('event_id = $1', [event.eventId])) === 1, 'the in-process batch');
    await auditQueue.close();
    expect(await proc.close()).toEqual({ clean: true });
    expect(proc.workers.auditWriter.isRunning()).toBe(false);

    const noRedis = loadConfig(vars({ REDIS_URL: 'redis://127.0.0.1:1', LOG_LEVEL: 'silent' }));
    const err = await startOperationsProcess(noRedis).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect(err).toMatchObject({ service: 'Redis' });
  });
});
