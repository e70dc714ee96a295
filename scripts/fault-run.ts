/**
 * The fault run at scale (`npm run faults`): for each downstream mode, three supervised worker
 * processes run N intents on a private Postgres while SIGKILL monkeys kill one at random (and
 * start it again) at marks paced by progress; then every worker is killed once more (losing
 * the audit events it buffered), the stale locks are re-driven (the sweeper's backstop), the
 * library's audit backfill runs, and everything is counted:
 *
 * - commits, requests and duplicates per intent, by a real HTTP downstream: for `none` it commits
 *   every request (a second run is a second commit), for `idempotent` it honours the key (what
 *   the world sees) and `requests` shows the re-sent ones;
 * - the ledger's final states: unknown, `record_lost`, abandoned (handed to an operator by the
 *   re-drive), locked left; BullMQ's completed and failed jobs;
 * - per transition: recorded in the ledger, audit events stored, stored twice.
 *
 * Prints a table per mode and, last, one JSON line. Not part of the test run.
 *
 * Env: FAULT_INTENTS (1000), FAULT_MODES (`none,idempotent`), FAULT_KILLS (8),
 * FAULT_DELAY_MS (downstream delay per commit, 100), FAULT_LEASE_MS (the operation's lease, 2000;
 * BullMQ's lock is 2.5 times it and its stalled check half of it), REDIS_URL (redis://127.0.0.1:6379).
 */
import { randomBytes } from 'node:crypto';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { jsonLine } from '../bench/lib/json-line.js';
import { printTable } from '../bench/lib/table.js';
import { migrate } from '../migrations/migrate.js';
import { eventsForRecord } from '../src/audit/derive.js';
import { auditPolicyFor } from '../src/config/audit-policy.js';
import { ERROR_CODES } from '../src/errors/idempotency-error.js';
import { runBackfill } from '../src/jobs/audit-backfill.js';
import { createAuditWriter } from '../src/jobs/audit-writer.js';
import { redriveStaleLocks } from '../src/jobs/ledger-sweeper.js';
import { toRecord } from '../src/ledger/ledger-record.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import { startCommitCounter } from '../src/testing/index.js';
import { waitFor } from '../test/helpers/context.js';
import {
  type CrashWorker,
  type CrashWorkerConfig,
  crashOperation,
  spawnCrashWorker,
} from '../test/helpers/crash-worker.js';
import { testKeyring } from '../test/helpers/keyring.js';
import { killAtMarks } from '../test/helpers/kill-chaos.js';
import { PrivatePostgres } from '../test/helpers/private-postgres.js';

type Mode = 'none' | 'idempotent';
const INTENTS = Number(process.env.FAULT_INTENTS ?? 1000);
const MODES = (process.env.FAULT_MODES ?? 'none,idempotent').split(',').map((m) => m.trim()) as Mode[];
const KILLS = Number(process.env.FAULT_KILLS ?? 8);
const DELAY_MS = Number(process.env.FAULT_DELAY_MS ?? 100);
const LEASE_MS = Number(process.env.FAULT_LEASE_MS ?? 2000);
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `{faults-${randomBytes(4).toString('hex')}}`;

type ModeFigures = {
  mode: Mode;
  intents: number;
  kills: number;
  commits: number;
  requests: number;
  duplicates: number;
  uncommitted: number;
  completedJobs: number;
  failedJobs: number;
  statuses: Record<string, number>;
  unknown: number;
  recordLost: number;
  abandoned: number;
  lockedLeft: number;
  /** Per transition: recorded in the ledger, audit events stored, ids stored twice. */
  transitions: Record<string, { recorded: number; stored: number; twice: number }>;
  seconds: number;
};

async function drained(queue: Queue): Promise<void> {
  await waitFor(
    async () => {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'wait');
      return Object.values(c).every((n) => n === 0);
    },
    'the audit queue to drain',
    300_000,
    200,
  );
}

async function runMode(db: PrivatePostgres, mode: Mode): Promise<ModeFigures> {
  const began = Date.now();
  const schema = `faults_${mode}`;
  await migrate({ connectionString: db.url(), schema });
  const pool = new pg.Pool({ connectionString: db.url(), max: 6 });
  const ledger = new PostgresLedger({ connectionString: db.url(), schema, poolSize: 2 });
  const ds = await startCommitCounter({ delayMs: DELAY_MS, honourIdempotencyKey: mode !== 'none' });
  const connection = { url: REDIS_URL, maxRetriesPerRequest: null };
  const auditQueueName = `faults-audit-${mode}`;
  const auditQueue = new Queue(auditQueueName, { connection, prefix: PREFIX });
  const writer = createAuditWriter({
    connection,
    pool,
    schema,
    prefix: PREFIX,
    queueName: auditQueueName,
    redactionPolicy: auditPolicyFor(testKeyring),
  });
  const config: CrashWorkerConfig = {
    databaseUrl: db.url(),
    redisUrl: REDIS_URL,
    schema,
    prefix: PREFIX,
    queue: `faults-${mode}`,
    downstreamUrl: ds.url,
    downstream: mode,
    processor: 'charge',
    blockAt: 'none',
    leaseMs: LEASE_MS,
    lockDuration: Math.round(2.5 * LEASE_MS),
    stalledInterval: Math.round(LEASE_MS / 2),
    concurrency: 5,
    maxStalledCount: 20,
    audit: { queue: auditQueueName, maxDelayMs: 1_000 },
  };
  const queue = new Queue(config.queue, { connection, prefix: PREFIX });
  const workers: CrashWorker[] = [];
  try {
    for (let i = 0; i < 3; i++) workers.push(await spawnCrashWorker(config));
    const op = crashOperation(mode, config.leaseMs);
    for (let from = 0; from < INTENTS; from += 500) {
      await op.enqueueBulk(
        queue,
        Array.from({ length: Math.min(500, INTENTS - from) }, (_, j) => ({
          input: { order: `${mode}-${from + j}`, amount: 1 + from + j },
          options: {
            jobOptions: { attempts: 3, backoff: 50, removeOnComplete: false, removeOnFail: false },
            worker: { lockDuration: config.lockDuration, stalledInterval: config.stalledInterval, maxStalledCount: 20 },
          },
        })),
      );
    }
    let stopped = false;
    const chaos = killAtMarks({
      queue,
      intents: INTENTS,
      kills: KILLS,
      ds,
      workers,
      spawn: () => spawnCrashWorker(config),
      stopped: () => stopped,
    });
    try {
      await waitFor(
        async () => (await queue.getCompletedCount()) + (await queue.getFailedCount()) >= INTENTS,
        'every intent to finish',
        1_800_000,
        250,
      );
    } finally {
      stopped = true;
    }
    const kills = await chaos;
    // The last events each worker buffered die with it too.
    for (const w of workers) await w.kill();

    // The sweeper's backstop: stale locks whose job will never come back go to an operator.
    await new Promise((r) => setTimeout(r, 3 * config.leaseMs + 500));
    await redriveStaleLocks(
      ledger,
      { connection, prefix: PREFIX, minAgeMs: 2 * config.leaseMs },
      { batchSize: 1000, maxBatches: 100 },
    );

    await drained(auditQueue);
    await runBackfill({ pool, auditQueue, schema });
    await drained(auditQueue);

    const orders = Array.from({ length: INTENTS }, (_, i) => `${mode}-${i}`);
    const perOrder = new Map<string, number>();
    for (const e of ds.effects) {
      const o = (e.body as { order: string }).order;
      perOrder.set(o, (perOrder.get(o) ?? 0) + 1);
    }
    const rows = (await pool.query(`select * from ${schema}.idempotency_ledger`)).rows.map(toRecord);
    const statuses: Record<string, number> = {};
    for (const r of rows) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
    const idsByTransition = new Map<string, string[]>();
    for (const r of rows) {
      const events = eventsForRecord(r);
      (r.transitions ?? []).forEach((x, i) => {
        const id = events[i]?.eventId;
        if (!id) return;
        const list = idsByTransition.get(x.transition) ?? [];
        list.push(id);
        idsByTransition.set(x.transition, list);
      });
    }
    const transitions: ModeFigures['transitions'] = {};
    for (const [name, ids] of idsByTransition) {
      const stored = await pool.query<{ n: number }>(
        `select count(*)::int as n from ${schema}.audit_events where event_id = any($1) group by event_id`,
        [ids],
      );
      transitions[name] = {
        recorded: ids.length,
        stored: stored.rows.length,
        twice: stored.rows.filter((x) => x.n > 1).length,
      };
    }
    return {
      mode,
      intents: INTENTS,
      kills,
      commits: ds.commits,
      requests: ds.requests,
      duplicates: orders.filter((o) => (perOrder.get(o) ?? 0) > 1).length,
      uncommitted: orders.filter((o) => (perOrder.get(o) ?? 0) === 0).length,
      completedJobs: await queue.getCompletedCount(),
      failedJobs: await queue.getFailedCount(),
      statuses,
      unknown: statuses.unknown ?? 0,
      recordLost: rows.filter((r) => r.error?.code === ERROR_CODES.recordLost).length,
      abandoned: rows.filter((r) => r.error?.code === ERROR_CODES.abandoned).length,
      lockedLeft: statuses.locked ?? 0,
      transitions,
      seconds: Math.round((Date.now() - began) / 1000),
    };
  } finally {
    for (const w of workers) await w.kill().catch(() => {});
    await writer.close();
    await queue.close();
    await auditQueue.close();
    await ds.close();
    await ledger.close();
    await pool.end();
  }
}

async function main(): Promise<void> {
  const db = await PrivatePostgres.start();
  const figures: ModeFigures[] = [];
  try {
    for (const mode of MODES) {
      const f = await runMode(db, mode);
      figures.push(f);
      console.log(`\n${mode}: ${f.intents} intents, ${f.kills} kills, lease ${LEASE_MS} ms, ${f.seconds} s`);
      printTable(
        ['transition', 'recorded', 'audit events stored', 'stored twice'],
        Object.entries(f.transitions).map(([name, x]) => [name, `${x.recorded}`, `${x.stored}`, `${x.twice}`]),
      );
    }
  } finally {
    await db.destroy();
    const redis = new Redis(REDIS_URL);
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await redis.del(...keys);
    } while (cursor !== '0');
    await redis.quit();
  }
  console.log('');
  printTable(
    [
      'mode',
      'intents',
      'kills',
      'commits',
      'requests',
      'duplicates',
      'never committed',
      'jobs completed',
      'jobs failed',
      'unknown',
      'record_lost',
      'abandoned',
      'locked left',
    ],
    figures.map((f) =>
      [
        f.mode,
        f.intents,
        f.kills,
        f.commits,
        f.requests,
        f.duplicates,
        f.uncommitted,
        f.completedJobs,
        f.failedJobs,
        f.unknown,
        f.recordLost,
        f.abandoned,
        f.lockedLeft,
      ].map(String),
    ),
  );
  jsonLine('faults', { leaseMs: LEASE_MS, delayMs: DELAY_MS, modes: figures });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
