import type { Queue, Worker } from 'bullmq';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { RetryableError } from '../../src/errors/processor-errors.js';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { Operation } from '../../src/operation/operation.js';
import { type CommitCountingServer, postEffect, startCommitCounter } from '../../src/testing/index.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { type OrderInput, orderInput, orderOperation } from '../fixtures/operations.js';
import { bull } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { testKeyring } from '../helpers/keyring.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';

/**
 * The database goes away under live workers: a stop longer than the jobs' whole BullMQ backoff
 * budget, and a crash (`immediate`) in the middle of completions. Nothing may burn an attempt or
 * leave a `locked` row behind a job failed for good.
 */
const t = new TestContext('outage');
const b = bull(t);
const schema = 'outage';
let db: PrivatePostgres | undefined;
let ledger: PostgresLedger | undefined;
let admin: pg.Pool | undefined;
let qn = 0;
const opened = { workers: [] as Worker[], queues: [] as Queue[], downstreams: [] as CommitCountingServer[] };

beforeAll(async () => {
  db = await PrivatePostgres.start();
  await migrate({ connectionString: db.url(), schema });
  ledger = new PostgresLedger({ connectionString: db.url(), schema, poolSize: 10 });
  admin = new pg.Pool({ connectionString: db.url(), max: 2 });
  admin.on('error', () => {}); // its idle connections die with each stop
});
afterEach(async () => {
  for (const w of opened.workers.splice(0)) {
    await w.close(true);
    // A forced close returns before the worker's loop has stopped: the leak check waits for it.
    await waitFor(() => !w.isRunning(), 'the worker to stop', 5_000).catch(() => {});
  }
  for (const q of opened.queues.splice(0)) await q.close();
  for (const d of opened.downstreams.splice(0)) await d.close();
});
afterAll(async () => {
  await ledger?.close().catch(() => {});
  await admin?.end().catch(() => {});
  await db?.destroy();
  await t.teardown();
});

const inputSchema = orderInput;
type Input = OrderInput;

function op(downstream: 'idempotent' | 'none', test: string) {
  return orderOperation(`outage.${test}.${downstream}`, { lease: '2s', downstream }) as unknown as Operation<
    typeof inputSchema,
    { effectId: string }
  >;
}

function charge(url: string) {
  return async (input: Input, ctx: { idempotencyKey: string; signal: AbortSignal }) => {
    const res = await postEffect<{ id: string }>(url, { order: input.order }, ctx.idempotencyKey, ctx.signal);
    if (res.status >= 500) throw new RetryableError(`downstream ${res.status}`);
    return { effectId: res.body.id };
  };
}

async function downstream(options: Parameters<typeof startCommitCounter>[0]): Promise<CommitCountingServer> {
  const d = await startCommitCounter(options);
  opened.downstreams.push(d);
  return d;
}

function queueAndWorker(o: ReturnType<typeof op>, url: string, concurrency: number) {
  const name = `outage${++qn}`;
  const q = b.queue(name);
  opened.queues.push(q);
  const w = b.worker(
    name,
    withIdempotency(o, charge(url), { ledger: ledger as PostgresLedger, keyring: testKeyring }),
    {
      concurrency,
    },
  );
  opened.workers.push(w as Worker);
  return { name, q, w };
}

/** Job ids of the intents, never all digits. */
const orders = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);

async function rowsByStatus(operation: string): Promise<Record<string, number>> {
  const r = await (admin as pg.Pool).query<{ status: string; n: number }>(
    `select status, count(*)::int as n from ${schema}.idempotency_ledger where operation = $1 group by status`,
    [operation],
  );
  return Object.fromEntries(r.rows.map((row) => [row.status, row.n]));
}

async function finished(q: Queue, total: number, timeoutMs: number) {
  return waitFor(
    async () => {
      const c = await q.getJobCounts('completed', 'failed');
      return (c.completed ?? 0) + (c.failed ?? 0) >= total ? c : undefined;
    },
    `${total} jobs to finish`,
    timeoutMs,
    100,
  );
}

describe('a database outage', () => {
  it('stopped longer than the backoff budget: every intent finishes once, none failed, none left locked', async () => {
    const ds = await downstream({ delayMs: 100 });
    const o = op('idempotent', 'stop');
    const { q } = queueAndWorker(o, ds.url, 10);
    const ids = orders(100, 'stop');
    await q.addBulk(
      ids.map((order) => ({
        name: 'charge',
        data: { order },
        opts: { jobId: order, attempts: 2, backoff: 100, removeOnComplete: false, removeOnFail: false },
      })),
    );
    // Some committed, some mid-flight, most not yet claimed.
    await waitFor(() => ds.commits >= 15, 'the first commits', 20_000);
    await (db as PrivatePostgres).stop('fast');
    // Longer than attempts × backoff many times over: before, every job would have failed.
    await new Promise((r) => setTimeout(r, 4_000));
    await (db as PrivatePostgres).startAgain();

    const counts = (await finished(q, ids.length, 45_000)) as Record<string, number>;
    expect(counts.failed ?? 0).toBe(0);
    expect(counts.completed).toBe(ids.length);
    for (const order of ids) expect(ds.commitsFor({ order })).toBe(1);
    expect(ds.commits).toBe(ids.length);
    expect(await rowsByStatus(o.name)).toEqual({ completed: ids.length });
  }, 90_000);

  it('restarted immediate during completions: no job failed for good with a locked row', async () => {
    const idem = await downstream({ delayMs: 150 });
    const plain = await downstream({ delayMs: 150, honourIdempotencyKey: false });
    const oi = op('idempotent', 'crash');
    const on = op('none', 'crash');
    const a = queueAndWorker(oi, idem.url, 4);
    const n = queueAndWorker(on, plain.url, 4);
    const idsA = orders(60, 'crash-i');
    const idsN = orders(60, 'crash-n');
    const jobs = (ids: string[]) =>
      ids.map((order) => ({
        name: 'charge',
        data: { order },
        // One attempt: any database error that used it would fail the job for good.
        opts: { jobId: order, attempts: 1, removeOnComplete: false, removeOnFail: false },
      }));
    await Promise.all([a.q.addBulk(jobs(idsA)), n.q.addBulk(jobs(idsN))]);
    await waitFor(() => idem.commits >= 10 && plain.commits >= 10, 'commits under way', 20_000);
    const before = idem.commits + plain.commits;
    await (db as PrivatePostgres).restart('immediate');
    // The crash came in the middle: intents were left to finish after it.
    expect(before).toBeLessThan(idsA.length + idsN.length);

    const [ca] = (await Promise.all([
      finished(a.q, idsA.length, 45_000),
      finished(n.q, idsN.length, 45_000),
    ])) as Record<string, number>[];
    // Idempotent downstream: everything completes, each intent committed once.
    expect(ca?.failed ?? 0).toBe(0);
    for (const order of idsA) expect(idem.commitsFor({ order })).toBe(1);
    expect(await rowsByStatus(oi.name)).toEqual({ completed: idsA.length });

    // No downstream protection: completed, or unknown for an operator; never locked, never twice.
    const rows = await rowsByStatus(on.name);
    expect(rows.locked ?? 0).toBe(0);
    expect((rows.completed ?? 0) + (rows.unknown ?? 0)).toBe(idsN.length);
    for (const order of idsN) expect(plain.commitsFor({ order })).toBeLessThanOrEqual(1);
    for (const order of idsN) {
      const state = await n.q.getJobState(order);
      const rec = await (admin as pg.Pool).query<{ status: string }>(
        `select status from ${schema}.idempotency_ledger where operation = $1 and split_part(key, ':', 2) = $2`,
        [on.name, encodeURIComponent(`order:${order}`)],
      );
      const status = rec.rows[0]?.status;
      expect(state === 'completed' ? 'completed' : 'unknown').toBe(status);
      if (status === 'completed') expect(plain.commitsFor({ order })).toBe(1);
    }
  }, 90_000);
});
