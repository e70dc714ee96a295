/**
 * Everything on a real 3-master Redis Cluster with a hash-tagged prefix: the wrapper, the audit
 * pipeline, the operations process (`npm start`) and the CLI, which take REDIS_URL as cluster
 * nodes; a prefix without a hash tag is a configuration error.
 */
import { Queue, Worker } from 'bullmq';
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../jobs/main.js';
import { type AuditEvent, eventIdFor } from '../../src/audit/audit-event.js';
import { AuditEmitter } from '../../src/audit/emitter.js';
import { loadCliConfig, loadConfig } from '../../src/config/env.js';
import { ConfigError } from '../../src/config/errors.js';
import { describeRedisUrl, hasHashTag, parseRedisUrl } from '../../src/config/redis-url.js';
import { createAuditWriter } from '../../src/jobs/audit-writer.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { chargeOperation } from '../fixtures/operations.js';
import { settled } from '../helpers/bullmq.js';
import { waitForLog } from '../helpers/child-logs.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { RedisCluster } from '../helpers/redis-cluster.js';
import { childEnv, finished, runTs, spawnTs } from '../helpers/spawn.js';

const t = new TestContext('redis_cluster');
let cluster: RedisCluster | undefined;
let redis: Cluster;
let ledger: PostgresLedger;
let ds: CommitCountingServer;
const closers: (() => Promise<unknown>)[] = [];
let completedJobId = '';

beforeAll(async () => {
  await t.setup();
  ledger = t.ledger();
  ds = await startCommitCounter();
  cluster = await RedisCluster.start();
  redis = new Cluster(
    cluster.ports.map((port) => ({ host: '127.0.0.1', port })),
    { redisOptions: { maxRetriesPerRequest: null } },
  );
  redis.on('error', () => {});
});
afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => {});
  await redis?.quit().catch(() => redis.disconnect());
  await ds?.close();
  await ledger?.close();
  await cluster?.destroy();
  await t.teardown();
});

/** A queue or worker on the test's cluster client, closed in afterAll if a test fails first. */
function onCluster<T extends { close(): Promise<unknown> }>(thing: T): T {
  closers.push(() => thing.close());
  return thing;
}
const queue = (name: string) => onCluster(new Queue(name, { connection: redis, prefix: t.prefix }));

const vars = (extra: Record<string, string | undefined> = {}) => ({
  DATABASE_URL: t.databaseUrl,
  REDIS_URL: cluster?.url(),
  BQI_SCHEMA: t.schema,
  BQI_PREFIX: t.prefix,
  ...extra,
});

const eventCount = async (where: string, values: unknown[] = []) =>
  Number((await t.query(`select count(*) from ${t.schema}.audit_events where ${where}`, values)).rows[0]?.count);

const charge = chargeOperation();

describe('REDIS_URL forms', () => {
  it('a single URL stays as it is; cluster nodes as redis+cluster:// or a comma-separated list', () => {
    expect(parseRedisUrl('redis://127.0.0.1:6379/2')).toEqual({ kind: 'single', url: 'redis://127.0.0.1:6379/2' });
    expect(parseRedisUrl('redis+cluster://u:p%40ss@10.0.0.1:7000,10.0.0.2')).toEqual({
      kind: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7000 },
        { host: '10.0.0.2', port: 6379 },
      ],
      tls: false,
      username: 'u',
      password: 'p@ss',
    });
    expect(parseRedisUrl('rediss://h1:7000, rediss://h2:7001')).toMatchObject({ kind: 'cluster', tls: true });
    expect(parseRedisUrl('redis+cluster://h1:7000')).toMatchObject({ kind: 'cluster', nodes: [{ host: 'h1' }] });
    expect(describeRedisUrl('redis+cluster://u:secret@h1:7000,h2:7001')).toBe('redis+cluster://u@h1:7000,h2:7001');
    expect(() => parseRedisUrl('redis://h1:7000,rediss://h2:7001')).toThrow(/TLS is for every node or none/);
    expect(() => parseRedisUrl('redis+cluster://h1:7000/3')).toThrow(/only database 0/);
    expect(hasHashTag('{bull}')).toBe(true);
    expect(hasHashTag('app:{q}')).toBe(true);
    expect(hasHashTag('{}bull')).toBe(false);
    expect(hasHashTag('bull')).toBe(false);
  });

  it('a cluster without a hash-tagged prefix is a configuration error naming BQI_PREFIX', () => {
    const env = { DATABASE_URL: 'postgres://h/db', REDIS_URL: 'redis://h1:7000,redis://h2:7001' };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig({ ...env, BQI_PREFIX: 'myapp' })).toThrow(/BQI_PREFIX must hold a hash tag/);
    expect(() => loadCliConfig({ ...env, BQI_PREFIX: 'myapp' })).toThrow(/BQI_PREFIX must hold a hash tag/);
    expect(loadConfig({ ...env, BQI_PREFIX: '{myapp}' }).prefix).toBe('{myapp}');
    // A single node keeps any prefix, as before.
    expect(loadConfig({ ...env, REDIS_URL: 'redis://h1:6379' }).prefix).toBe('bull');
    expect(() => loadConfig({ ...env, REDIS_URL: 'http://h1' })).toThrow(/REDIS_URL must be a redis:\/\//);
  });
});

describe('on a 3-master Redis Cluster', () => {
  it('the wrapper completes jobs and its events go emitter → audit queue → writer → Postgres', async () => {
    const auditQueue = queue('audit');
    const emitter = new AuditEmitter({
      queue: auditQueue,
      pool: ledger.pool,
      schema: t.schema,
      redact: (e: AuditEvent) => e,
    });
    closers.push(() => emitter.close());
    const writer = onCluster(
      createAuditWriter({
        connection: redis,
        pool: ledger.pool,
        schema: t.schema,
        queueName: 'audit',
        prefix: t.prefix,
      }),
    );
    const q = queue('charges');
    const worker = onCluster(
      new Worker(
        'charges',
        withIdempotency(
          charge,
          async (input, ctx) => {
            const res = await postEffect<{ id: string }>(ds.url, input, ctx.idempotencyKey, ctx.signal);
            return { effectId: res.body.id };
          },
          { ledger, keyring: testKeyring, audit: emitter },
        ),
        { connection: redis, prefix: t.prefix },
      ),
    );
    const orders = ['o-1', 'o-2', 'o-3', 'o-1'];
    const jobs = await Promise.all(orders.map((order) => q.add('charge', { order, amount: 100 })));
    for (const job of jobs) expect((await settled(q, job.id as string)).state).toBe('completed');
    // Through the producer too: the job carries its key, which `inspect --job` reads later.
    const enqueued = await charge.enqueue(q, { order: 'o-4', amount: 100 });
    expect((await settled(q, enqueued.jobId)).state).toBe('completed');
    expect(ds.commits).toBe(4);
    completedJobId = enqueued.jobId;
    await emitter.flush();
    await waitFor(
      async () => (await eventCount("action = 'idempotency.completed'")) >= 4,
      'completion events written',
      20_000,
    );
    expect(await eventCount("action = 'idempotency.claimed'")).toBeGreaterThanOrEqual(4);
    expect(await auditQueue.getFailedCount()).toBe(0);
    await worker.close();
    await emitter.close();
    await writer.close();
  });

  it('npm start writes audit batches and the CLI runs backfill --wait and inspect --job; SIGTERM exits 0', async () => {
    const child = spawnTs(
      'jobs/main.ts',
      [],
      childEnv(vars({ BQI_AUDIT_QUEUE: 'audit-main', BQI_SHUTDOWN_TIMEOUT_MS: '5000' })),
    );
    const exit = finished(child, 90_000, 'worker process');
    try {
      const started = await waitForLog(child, 'started');
      expect(started).toMatchObject({ prefix: t.prefix, redis: cluster?.url() });

      const auditQueue = queue('audit-main');
      const event: AuditEvent = {
        eventId: eventIdFor('redis-cluster-test', 'main'),
        actorType: 'system',
        actorId: 'worker:1',
        action: 'idempotency.claimed',
        resourceType: 'idempotency_key',
        resourceId: 'acme:order%3A9:v1',
        decision: 'allow',
        createdAt: new Date().toISOString(),
        phase: 'intent',
      };
      await auditQueue.add('audit-batch', { events: [event] });
      await waitFor(async () => (await eventCount('event_id = $1', [event.eventId])) === 1, 'the batch in Postgres');
      await waitFor(
        async () => (await eventCount("action = 'idempotency.swept' and actor_id = 'ledger-sweeper'")) >= 1,
        'the sweeper summary event',
        20_000,
      );

      const cli = (...args: string[]) => runTs('src/cli/main.ts', args, childEnv(vars()), 60_000);
      const backfill = await cli('backfill', '--wait', '--name', 'cluster-test');
      expect(backfill.code, backfill.stderr).toBe(0);
      expect(backfill.stdout).toMatch(/outbox batches drained/);

      // The job the wrapper completed in the test before, found on the cluster, and its record.
      const inspected = await cli('inspect', '--job', 'charges', completedJobId, '--json');
      expect(inspected.code, inspected.stderr).toBe(0);
      expect(JSON.parse(inspected.stdout)).toMatchObject({
        job: { queue: 'charges', id: completedJobId, state: 'completed' },
        record: { status: 'completed' },
      });

      child.kill('SIGTERM');
      const r = await exit;
      expect(r.code, r.stderr).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await exit.catch(() => {});
    }
  });

  it('npm start and the CLI refuse a prefix without a hash tag (exit 2 and 3)', async () => {
    const worker = await runTs('jobs/main.ts', [], childEnv(vars({ BQI_PREFIX: 'bull' })));
    expect(worker.code).toBe(EXIT.config);
    expect(worker.stderr).toContain('IDEMPOTENCY_ENV_CONFIG: BQI_PREFIX must hold a hash tag on Redis Cluster');
    const cli = await runTs(
      'src/cli/main.ts',
      ['inspect', '--job', 'charges', 'x'],
      childEnv(vars({ BQI_PREFIX: '' })),
    );
    expect(cli.code).toBe(3);
    expect(cli.stderr).toContain('IDEMPOTENCY_ENV_CONFIG: BQI_PREFIX must hold a hash tag on Redis Cluster');
  });
});
