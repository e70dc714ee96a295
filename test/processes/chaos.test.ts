/**
 * Chaos, sized for CI: three worker processes on a private Postgres, SIGKILLed at random and
 * started again, connections cut, and the database restarted as a crash would, while a few
 * hundred intents run. Counted: downstream commits per intent, rows left locked, jobs failed.
 */
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/index.js';
import { TestContext } from '../helpers/context.js';
import type { CrashWorker } from '../helpers/crash-worker.js';
import { chaosWorkerConfig, runKillChaos } from '../helpers/kill-chaos.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';

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
    const config = chaosWorkerConfig({
      databaseUrl: db.url(),
      redisUrl: t.redisUrl,
      schema: SCHEMA,
      prefix: t.prefix,
      queue: queueName,
      downstreamUrl: ds.url,
    });
    const workers: CrashWorker[] = [];
    const queue = new Queue(queueName, { connection: { url: t.redisUrl }, prefix: t.prefix });
    try {
      // Connections cut at the first mark, Postgres crashed and recovered at the second, and a
      // worker killed and replaced at each mark.
      let restarted = false;
      let cut = false;
      const kills = await runKillChaos({
        config,
        queue,
        name: 'chaos',
        intents: INTENTS,
        kills: KILLS,
        ds,
        workers,
        atMark: async () => {
          if (!cut) {
            cut = true;
            await db.terminateConnections();
          } else if (!restarted) {
            restarted = true;
            await db.restart('immediate');
          }
        },
      });

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
      for (const w of workers) await w.kill().catch(() => {});
      await queue.close();
    }
  }, 200_000);
});
