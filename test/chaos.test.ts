/**
 * Chaos, sized for CI: three worker processes on a private Postgres, SIGKILLed at random and
 * started again, connections cut, and the database restarted as a crash would, while a few
 * hundred intents run. Counted: downstream commits per intent, rows left locked, jobs failed.
 */
import { randomInt } from 'node:crypto';
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../src/db/migrate.js';
import { type CommitCountingServer, startCommitCounter } from '../src/testing/index.js';
import { TestContext, waitFor } from './helpers/context.js';
import { CRASH_TIMING, type CrashWorker, crashOperation, spawnCrashWorker } from './helpers/crash-worker.js';
import { PrivatePostgres } from './helpers/private-postgres.js';

const t = new TestContext('chaos');
const INTENTS = 300;
const KILLS = 4;
const SCHEMA = 'chaos';
let db: PrivatePostgres;
let ds: CommitCountingServer;

beforeAll(async () => {
  db = await PrivatePostgres.start();
  await migrate({ connectionString: db.url(), schema: SCHEMA });
  // Each commit takes a while, so the chaos lands while work is in flight.
  ds = await startCommitCounter({ delayMs: 300 });
}, 60_000);
afterAll(async () => {
  await ds?.close();
  await db?.destroy();
  await t.teardown();
});

describe('chaos: workers killed at random, connections cut, Postgres restarted', () => {
  it(`${INTENTS} intents: each committed once, none abandoned, none left locked`, async () => {
    const queueName = 'chaos';
    const config = {
      databaseUrl: db.url(),
      redisUrl: t.redisUrl,
      schema: SCHEMA,
      prefix: t.prefix,
      queue: queueName,
      downstreamUrl: ds.url,
      downstream: 'idempotent' as const,
      processor: 'charge' as const,
      blockAt: 'none' as const,
      ...CRASH_TIMING,
      concurrency: 5,
      // A job whose worker is killed twice would otherwise fail for good without its processor.
      maxStalledCount: 20,
    };
    const workers: CrashWorker[] = [];
    const queue = new Queue(queueName, { connection: { url: t.redisUrl }, prefix: t.prefix });
    let kills = 0;
    let stopChaos = false;
    try {
      for (let i = 0; i < 3; i++) workers.push(await spawnCrashWorker(config));
      const op = crashOperation('idempotent');
      await op.enqueueBulk(
        queue,
        Array.from({ length: INTENTS }, (_, i) => ({
          input: { order: `chaos-${i}`, amount: 1 + i },
          options: {
            jobOptions: { attempts: 3, backoff: 50, removeOnComplete: false },
            worker: { lockDuration: config.lockDuration, stalledInterval: config.stalledInterval, maxStalledCount: 20 },
          },
        })),
      );
      // The chaos, paced by progress rather than by the clock (a loaded machine slows the work
      // and the restarts alike): connections cut at a sixth of the intents, Postgres crashed and
      // recovered at a third, and a worker killed and replaced at each of KILLS marks. While a
      // worker is replaced the downstream holds its responses, so the work is still in flight
      // when it dies and cannot run out before the last kill.
      const chaos = (async () => {
        let restarted = false;
        let cut = false;
        for (let k = 0; k < KILLS && !stopChaos; k++) {
          const mark = ((k + 1) * INTENTS) / (KILLS + 2);
          await waitFor(async () => stopChaos || (await queue.getCompletedCount()) >= mark, `${mark} done`, 150_000);
          if (stopChaos) break;
          if (!cut) {
            cut = true;
            await db.terminateConnections();
          } else if (!restarted) {
            restarted = true;
            await db.restart('immediate');
          }
          let resume!: () => void;
          ds.hold = new Promise<void>((r) => {
            resume = r;
          });
          try {
            const i = randomInt(workers.length);
            await (workers[i] as CrashWorker).kill();
            if ((await queue.getCompletedCount()) < INTENTS) kills++;
            workers[i] = await spawnCrashWorker(config);
          } finally {
            ds.hold = undefined;
            resume();
          }
          await new Promise((r) => setTimeout(r, randomInt(400)));
        }
        return { restarted, cut };
      })();
      await waitFor(
        async () => (await queue.getCompletedCount()) + (await queue.getFailedCount()) >= INTENTS,
        'every intent to finish',
        150_000,
        250,
      );
      stopChaos = true;
      const { restarted, cut } = await chaos;

      // Every kill landed while intents were unfinished, and took over work in flight.
      expect(kills).toBe(KILLS);
      expect(restarted).toBe(true);
      expect(cut).toBe(true);
      const failed = await queue.getFailed();
      expect(failed.map((j) => j.failedReason)).toEqual([]);
      expect(await queue.getCompletedCount()).toBe(INTENTS);
      // Each intent committed exactly once downstream (the downstream honours the key).
      const orders = ds.effects.map((e) => (e.body as { order: string }).order);
      expect(orders.length).toBe(INTENTS);
      expect(new Set(orders).size).toBe(INTENTS);
      // Every record ended completed: nothing locked, nothing unknown, nothing missing.
      const admin = new pg.Client({ connectionString: db.url() });
      await admin.connect();
      try {
        const rows = await admin.query(
          `select status, count(*)::int as n from ${SCHEMA}.idempotency_ledger group by status order by status`,
        );
        expect(rows.rows).toEqual([{ status: 'completed', n: INTENTS }]);
        const takenOver = await admin.query(
          `select count(*)::int as n from ${SCHEMA}.idempotency_ledger where epoch > 1`,
        );
        expect(takenOver.rows[0]?.n).toBeGreaterThan(0);
      } finally {
        await admin.end();
      }
      // No worker process died by itself: every exit was one of the kills.
      for (const w of workers) expect(w.alive()).toBe(true);
    } finally {
      stopChaos = true;
      for (const w of workers) await w.kill().catch(() => {});
      await queue.close();
    }
  }, 200_000);
});
