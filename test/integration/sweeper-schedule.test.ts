/**
 * The sweeper's schedule lives only in Redis. When Redis loses it (here: every key of the sweeper
 * queue deleted under a running operations process, in this file's own prefix), `/readyz` names
 * it missing, and the process re-creates it at its next check (every sweep interval), so the
 * sweeper runs again without a restart.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collectStats, renderStats } from '../../src/cli/commands/stats.js';
import { CliContext } from '../../src/cli/context.js';
import { loadCliConfig, loadConfig } from '../../src/config/env.js';
import { DEFAULT_SWEEPER_QUEUE, scheduleLedgerSweeper } from '../../src/jobs/ledger-sweeper.js';
import { healthRoutes } from '../../src/ops/health-routes.js';
import { type OperationsProcess, startOperationsProcess } from '../../src/ops/operations-process.js';
import { bull } from '../helpers/bullmq.js';
import { TestContext, waitFor } from '../helpers/context.js';

const t = new TestContext('sweeper_schedule');
const SWEEP_EVERY_MS = 1_500;

beforeAll(async () => {
  await t.setup();
});
afterAll(async () => {
  await t.teardown();
});

/** Deletes every Redis key of the sweeper queue under this file's prefix; returns how many. */
async function loseSweeperKeys(redis: Redis): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${t.prefix}:${DEFAULT_SWEEPER_QUEUE}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) n += await redis.del(...keys);
  } while (cursor !== '0');
  return n;
}

async function readyz(proc: OperationsProcess) {
  const res = await fetch(`http://127.0.0.1:${proc.http?.address?.port}/readyz`);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('the sweeper schedule under a Redis that lost its data', () => {
  it('readiness names a missing schedule', async () => {
    const pool = t.pool(1);
    const [ready] = healthRoutes({
      pool,
      pingRedis: async () => 1,
      workers: {},
      stopping: () => false,
      schedules: async () => ({ sweeper: false }),
    }).filter((r) => r.path === '/readyz');
    const answer = await ready?.handle({} as never, new URL('http://127.0.0.1/readyz'));
    await pool.end();
    expect(answer).toMatchObject({ status: 503, body: { status: 'not ready', schedules: { missing: ['sweeper'] } } });
  });

  it('the operations process re-creates it within one interval and the sweeper runs again', async () => {
    const proc = await startOperationsProcess(
      loadConfig({
        DATABASE_URL: t.databaseUrl,
        REDIS_URL: t.redisUrl,
        BQI_SCHEMA: t.schema,
        BQI_PREFIX: t.prefix,
        BQI_AUDIT_QUEUE: 'audit-schedule',
        BQI_SWEEP_EVERY_MS: String(SWEEP_EVERY_MS),
        BQI_HTTP_PORT: '0',
        BQI_HTTP_HOST: '127.0.0.1',
        LOG_LEVEL: 'silent',
      }),
      // Each /readyz below checks anew (no answer shared across the probes of a second).
      { readyCacheMs: 0 },
    );
    const redis = new Redis(t.redisUrl);
    try {
      let runs = 0;
      proc.workers.sweeper.on('completed', () => {
        runs++;
      });
      await waitFor(() => runs > 0, 'a first sweep', 10 * SWEEP_EVERY_MS);
      expect(await readyz(proc)).toMatchObject({ status: 200, body: { schedules: 'ok' } });
      // Lost: readiness says so until the next check re-creates it (a check that ran in between
      // re-created it already: lose it again).
      const schedule = proc.schedules.sweeper;
      let seen: Awaited<ReturnType<typeof readyz>> | undefined;
      for (let i = 0; i < 5 && !seen; i++) {
        const before = schedule.recreated;
        expect(await loseSweeperKeys(redis)).toBeGreaterThan(0);
        const r = await readyz(proc);
        if (schedule.recreated === before) seen = r;
      }
      expect(seen).toMatchObject({ status: 503, body: { status: 'not ready', schedules: { missing: ['sweeper'] } } });
      const runsBefore = runs;
      const lostAt = Date.now();
      // Re-created at the next check (within one interval), and the sweeper runs again.
      await waitFor(() => schedule.recreated > 0 && runs > runsBefore, 'the sweeper to run again', 4 * SWEEP_EVERY_MS);
      expect(Date.now() - lostAt).toBeLessThan(3 * SWEEP_EVERY_MS);
      expect(await readyz(proc)).toMatchObject({ status: 200, body: { schedules: 'ok' } });
    } finally {
      await redis.quit();
      expect(await proc.close()).toEqual({ clean: true });
    }
  });

  it('stats shows the schedule, and its absence', async () => {
    const queue = bull(t).queue(DEFAULT_SWEEPER_QUEUE);
    await scheduleLedgerSweeper(queue, 60_000);
    const redis = new Redis(t.redisUrl);
    const stats = async () => {
      const ctx = new CliContext(
        loadCliConfig({
          DATABASE_URL: t.databaseUrl,
          REDIS_URL: t.redisUrl,
          BQI_SCHEMA: t.schema,
          BQI_PREFIX: t.prefix,
        }),
      );
      try {
        return await collectStats(ctx);
      } finally {
        await ctx.close();
      }
    };
    try {
      expect((await stats()).schedules).toMatchObject({ sweeper: true });
      expect(await loseSweeperKeys(redis)).toBeGreaterThan(0);
      const lost = await stats();
      expect(lost.schedules).toMatchObject({ sweeper: false });
      expect(renderStats(lost)).toMatch(/^ {2}sweeper\s+MISSING from Redis/m);
    } finally {
      await redis.quit();
      await queue.close();
    }
  });
});
