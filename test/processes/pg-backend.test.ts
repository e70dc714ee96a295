import type { ChildProcess } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/env.js';
import { runBackfill } from '../../src/jobs/audit-backfill.js';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { createIdempotency, type Idempotency } from '../../src/runtime/create-idempotency.js';
import { unseal } from '../../src/sealing/sealed-result.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { pgChargeOperation as charge, pgKilledChargeOperation as killed } from '../fixtures/pg-backend.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { TEST_KEYRING_SPEC, testKeyring } from '../helpers/keyring.js';
import type { PgBackendChildConfig } from '../helpers/pg-backend-child.js';
import { type Collected, childEnv, runTs, spawnTs } from '../helpers/spawn.js';

/**
 * The core behaviours with the queues on BullMQ's own PostgreSQL backend: the queue URL is the
 * test database's (`postgres://…`), BullMQ's tables live in the schema the prefix names (this
 * file's own, dropped after), and no Redis is involved at all.
 */
const t = new TestContext('pg_backend');
/** BullMQ's schema: the prefix names it on this backend. */
const queueSchema = `${t.tag}_q`.slice(0, 63);
const TIMING = { lockDuration: 2000, stalledInterval: 500 } as const;

let ds: CommitCountingServer;
let idem: Idempotency;
const children: (ChildProcess & Collected)[] = [];

function runtime(): Idempotency {
  return createIdempotency({
    postgres: t.databaseUrl,
    schema: t.schema,
    redis: t.databaseUrl,
    prefix: queueSchema,
    keyring: TEST_KEYRING_SPEC,
    logger: false,
    audit: { writer: true, maxDelayMs: 10 },
  });
}

/** Charges the downstream with the operation key; the result carries a card token to keep sealed. */
const chargeHandler = async (
  input: { order: string; amount: number },
  ctx: { idempotencyKey: string; signal: AbortSignal },
) => {
  const res = await postEffect<{ id: string }>(ds.url, input, ctx.idempotencyKey, ctx.signal);
  if (res.status >= 300) throw new Error(`downstream answered ${res.status}`);
  return { chargeId: res.body.id, cardToken: `tok_secret_${input.order}` };
};

beforeAll(async () => {
  await t.setup();
  ds = await startCommitCounter();
  idem = runtime();
  await idem.migrate();
  idem.worker(charge, chargeHandler, { concurrency: 20, ...TIMING });
});

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await idem?.close();
  await ds?.close();
  await t.query(`drop schema if exists ${queueSchema} cascade`);
  await t.teardown();
});

const commitsOf = (order: string) =>
  ds.effects.filter((e) => (e.body as { order?: string } | null)?.order === order).length;

describe("BullMQ's PostgreSQL backend", () => {
  it('keeps its jobs in Postgres, in the schema the prefix names, and none in Redis', async () => {
    const { jobId } = await idem.enqueue(charge, { order: 'pg-0', amount: 100 });
    await idem.result(charge, jobId);
    const rows = await t.query<{ n: string }>(`select count(*) as n from ${queueSchema}.job where id = $1`, [jobId]);
    expect(Number(rows.rows[0]?.n)).toBe(1);
    const redis = new Redis(t.redisUrl);
    try {
      expect(await redis.keys(`*${jobId}*`)).toEqual([]);
    } finally {
      await redis.quit();
    }
  });

  it('commits once among 50 concurrent jobs of one key, and answers a repeated enqueue as absorbed', async () => {
    const first = await idem.enqueue(charge, { order: 'pg-50', amount: 700 });
    const again = await idem.enqueue(charge, { order: 'pg-50', amount: 700 });
    expect(first.added).toBe(true);
    expect(again.added).toBe(false);
    expect(again.jobId).toBe(first.jobId);
    expect(again.state).toBeDefined();
    // 49 more jobs of the same envelope under their own ids: all find one key.
    const queue = idem.queue(charge);
    const job = await queue.getJob(first.jobId);
    const copies = await queue.addBulk(Array.from({ length: 49 }, () => ({ name: charge.name, data: job?.data })));
    const ids = [first.jobId, ...copies.map((c) => c.id as string)];
    const results = await Promise.all(ids.map((id) => idem.result(charge, id, { timeoutMs: 60_000 })));
    expect(commitsOf('pg-50')).toBe(1);
    expect(new Set(results.map((r) => r.chargeId)).size).toBe(1);
    expect((await idem.inspect(first.key))?.status).toBe('completed');
  });

  it('recovers a lost response: the retry carries the same key and the downstream replays', async () => {
    ds.failNext('commit-then-drop');
    const { jobId, key } = await idem.enqueue(
      charge,
      { order: 'pg-lost', amount: 300 },
      { jobOptions: { attempts: 3, backoff: { type: 'fixed', delay: 50 } } },
    );
    const result = await idem.result(charge, jobId, { timeoutMs: 30_000 });
    expect(commitsOf('pg-lost')).toBe(1);
    expect(result.chargeId).toBe(ds.effects.find((e) => (e.body as { order: string }).order === 'pg-lost')?.id);
    expect((await idem.inspect(key))?.epoch).toBe(2);
  });

  it('refuses changed input under the same key before it runs', async () => {
    const original = await idem.enqueue(charge, { order: 'pg-conflict', amount: 700 });
    await idem.result(charge, original.jobId);
    // The same key (order) with another amount: a job of its own id, refused at the claim.
    const queue = idem.queue(charge);
    const job = await queue.getJob(original.jobId);
    const data = job?.data as { input: { amount: number } };
    const changed = await queue.add(charge.name, { ...data, input: { ...data.input, amount: 70_000 } });
    await expect(idem.result(charge, changed.id as string)).rejects.toMatchObject({
      details: { reasonCode: 'IDEMPOTENCY_CONFLICT' },
    });
    expect(commitsOf('pg-conflict')).toBe(1);
  });

  it('takes over from a worker SIGKILLed after the downstream committed: no second commit', async () => {
    const config: PgBackendChildConfig = {
      databaseUrl: t.databaseUrl.replace(t.tag, `${t.tag}_child`),
      queueUrl: t.databaseUrl.replace(t.tag, `${t.tag}_child`),
      schema: t.schema,
      prefix: queueSchema,
      downstreamUrl: ds.url,
      ...TIMING,
    };
    // The child's operation has a queue of its own: only the child can take the job.
    const child = spawnTs('test/helpers/pg-backend-child.ts', [JSON.stringify(config)], childEnv({}));
    children.push(child);
    await waitFor(() => child.out.includes('"ready"'), 'the child worker to start', 60_000);
    const { jobId, key } = await idem.enqueue(killed, { order: 'pg-killed', amount: 500 });
    await waitFor(() => child.out.includes('"committed"'), 'the child to commit', 30_000);
    child.kill('SIGKILL');
    // A worker of this process takes the stalled job over.
    idem.worker(killed, chargeHandler, { concurrency: 1, ...TIMING });
    const result = await idem.result(killed, jobId, { timeoutMs: 60_000 });
    expect(commitsOf('pg-killed')).toBe(1);
    expect(result.chargeId).toBe(ds.effects.find((e) => (e.body as { order: string }).order === 'pg-killed')?.id);
    const record = await idem.inspect(key);
    expect(record?.status).toBe('completed');
    expect(record?.epoch).toBeGreaterThanOrEqual(2);
  });

  it('keeps sealed results sealed in BullMQ’s own tables: no plaintext of the result there', async () => {
    const { jobId } = await idem.enqueue(charge, { order: 'pg-sealed', amount: 900 });
    const result = await idem.result(charge, jobId);
    expect(result.cardToken).toBe('tok_secret_pg-sealed');
    const job = await idem.queue(charge).getJob(jobId);
    expect(unseal(job?.returnvalue, testKeyring)).toEqual(result);
    const dump = await t.query<{ text: string }>(
      `select string_agg(j::text, ' ') as text from ${queueSchema}.job j where queue = $1`,
      [idem.queueName(charge)],
    );
    const events = await t.query<{ text: string }>(
      `select string_agg(e::text, ' ') as text from ${queueSchema}.event e`,
    );
    expect(dump.rows[0]?.text).toContain('$sealed');
    expect(dump.rows[0]?.text).not.toContain('tok_secret_pg-sealed');
    expect(events.rows[0]?.text ?? '').not.toContain('tok_secret_pg-sealed');
  });

  it('writes the audit trail through its queue on this backend, complete again after the backfill', async () => {
    const { jobId } = await idem.enqueue(charge, { order: 'pg-audit', amount: 400 }, { taskId: 'pg-task' });
    await idem.result(charge, jobId);
    await idem.flush();
    const completed = async () =>
      (await idem.timeline('pg-task')).events.filter((e) => e.action === 'idempotency.completed').length;
    await waitFor(async () => (await completed()) === 1, 'the completed event in the trail');
    const deleted = await t.query(
      `delete from ${t.schema}.audit_events where action = 'idempotency.completed' returning event_id`,
    );
    expect(deleted.rowCount).toBeGreaterThan(0);
    expect(await completed()).toBe(0);
    const progress = await runBackfill({
      pool: idem.pool,
      schema: t.schema,
      auditQueue: idem.queue('bullmq-idempotency-audit'),
    });
    expect(progress.rowsScanned).toBeGreaterThan(0);
    await waitFor(async () => (await completed()) === 1, 'the backfill to restore the completed event');
    const restored = await t.query<{ n: string }>(
      `select count(*) as n from ${t.schema}.audit_events where action = 'idempotency.completed'`,
    );
    expect(Number(restored.rows[0]?.n)).toBe(deleted.rowCount);
  });

  it('re-runs an invalidated key’s finished job on this backend (rerun), the downstream replaying it', async () => {
    const { jobId, key } = await idem.enqueue(charge, { order: 'pg-rerun', amount: 800 });
    await idem.result(charge, jobId);
    const before = (await idem.inspect(key))?.epoch ?? 0;
    await idem.invalidate(key, { actor: 'ops-test', reason: 'resend' });
    const outcome = await idem.rerun(key);
    expect(outcome).toMatchObject({ kind: 'retried', from: 'completed', jobId });
    // Claimed again by the re-run job (a later epoch), completed.
    await waitFor(async () => {
      const r = await idem.inspect(key);
      return r?.status === 'completed' && r.epoch > before;
    }, 'the re-run to complete');
    await waitFor(
      async () => (await idem.queue(charge).getJobState(jobId)) === 'completed',
      'the job to complete again',
    );
    expect(commitsOf('pg-rerun')).toBe(1);
  });
});

describe("the operations process and the CLI on BullMQ's PostgreSQL backend (REDIS_URL=postgres://…)", () => {
  const env = {
    DATABASE_URL: t.databaseUrl,
    REDIS_URL: t.databaseUrl,
    BQI_SCHEMA: t.schema,
    BQI_PREFIX: queueSchema,
    BQI_HTTP_PORT: '0',
    BQI_KEYRING: TEST_KEYRING_SPEC,
    LOG_LEVEL: 'silent',
  };

  it('serves /readyz and /metrics, keeps its schedules (a deleted one is re-created)', async () => {
    const ops = await startOperationsProcess(loadConfig(env));
    try {
      const base = `http://127.0.0.1:${ops.http?.address?.port}`;
      const ready = await fetch(`${base}/readyz`);
      expect(ready.status, await ready.clone().text()).toBe(200);
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toContain('bullmq_idempotency_figures_up 1');
      const sweeper = ops.schedules.sweeper;
      expect(await sweeper.exists()).toBe(true);
      const queue = idem.queue('bullmq-idempotency-sweeper');
      const schedulers = await queue.getJobSchedulers();
      for (const s of schedulers) await queue.removeJobScheduler(s.key);
      expect(await sweeper.exists()).toBe(false);
      expect(await sweeper.check()).toBe('scheduled');
      expect(sweeper.recreated).toBe(1);
      expect(await sweeper.exists()).toBe(true);
    } finally {
      await ops.close();
    }
  });

  it('the CLI inspects a key with the queues on Postgres', async () => {
    const { jobId, key } = await idem.enqueue(charge, { order: 'pg-cli', amount: 100 });
    await idem.result(charge, jobId);
    const out = await runTs('src/cli/main.ts', ['inspect', boundedKey(key), '--json'], childEnv(env));
    expect(out.code, out.stderr).toBe(0);
    expect(out.stdout).toContain('completed');
    expect(out.stdout).toContain(jobId);
  });
});
