/**
 * A failover under load, with real replication: a private primary and a streaming standby made by
 * `pg_basebackup -R`, three worker processes running a `downstream: 'none'` operation against the
 * primary through one address (a TCP switch, as a virtual IP), a downstream that commits every
 * request (no idempotency key honoured) and counts commits per intent. Replication is stalled
 * (the primary's WAL sender SIGSTOPped), the primary dies (every process SIGKILLed), the standby
 * is promoted and the address moved to it; BullMQ retries what failed.
 *
 * - Asynchronous standby: the operations process warns IDEMPOTENCY_ASYNC_REPLICA at start;
 *   claims acknowledged during the stall exist only on the primary and are lost; the attempts
 *   holding them find no row and end the key `unknown` (IDEMPOTENCY_RECORD_LOST): no intent is
 *   committed twice.
 * - Synchronous standby with `synchronous_commit = remote_apply`: the same stall blocks commits;
 *   no warning, nothing acknowledged is lost, every intent is committed once and completed.
 */
import { Queue } from 'bullmq';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { loadConfig } from '../../src/config/env.js';
import { ERROR_CODES } from '../../src/errors/idempotency-error.js';
import { startOperationsProcess } from '../../src/ops/operations-process.js';
import { type CommitCountingServer, startCommitCounter } from '../../src/testing/index.js';
import { TestContext, waitFor } from '../helpers/context.js';
import { type CrashWorker, type CrashWorkerConfig, crashOperation, spawnCrashWorker } from '../helpers/crash-worker.js';
import { capturePino } from '../helpers/pino-capture.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';
import { TcpSwitch } from '../helpers/tcp-switch.js';

const t = new TestContext('replication_failover');
const SCHEMA = 'failover';
const INTENTS = 80;
const WORKERS = 3;
const CONCURRENCY = 5;

const QUEUE = 'failover';

/**
 * Shared by both cases (worker processes are slow to start on a loaded machine): the primaries,
 * made up front, the address the workers connect to, the downstream, the workers and the queue.
 */
let primaries: Record<Mode, PrivatePostgres>;
let sw: TcpSwitch;
let ds: CommitCountingServer;
let workers: CrashWorker[] = [];
let queue: Queue;
/** What each case leaves to clean up (its standby), whatever happens. */
const cleanup: (() => Promise<unknown>)[] = [];

const config = (port: number, downstreamUrl: string): CrashWorkerConfig => ({
  databaseUrl: `postgres://postgres@127.0.0.1:${port}/postgres`,
  redisUrl: t.redisUrl,
  schema: SCHEMA,
  prefix: t.prefix,
  queue: QUEUE,
  downstreamUrl,
  downstream: 'none',
  processor: 'charge',
  blockAt: 'none',
  // A lease longer than the failover: the attempts in flight outlive it and record their outcome.
  leaseMs: 10_000,
  lockDuration: 20_000,
  stalledInterval: 2_000,
  concurrency: CONCURRENCY,
  maxStalledCount: 20,
});

beforeAll(async () => {
  // Every request commits: a second run of an intent is a second commit.
  ds = await startCommitCounter({ honourIdempotencyKey: false, delayMs: 150 });
  sw = await TcpSwitch.start(1);
  queue = new Queue(QUEUE, { connection: { url: t.redisUrl }, prefix: t.prefix });
  const made = Promise.allSettled([
    PrivatePostgres.start(),
    PrivatePostgres.start({ settings: { synchronous_commit: 'remote_apply' } }),
  ]);
  const spawned = Promise.allSettled(Array.from({ length: WORKERS }, () => spawnCrashWorker(config(sw.port, ds.url))));
  const [a, s] = await made;
  const w = await spawned;
  workers = w.flatMap((x) => (x.status === 'fulfilled' ? [x.value] : []));
  if (a.status === 'fulfilled' && s.status === 'fulfilled') primaries = { async: a.value, sync: s.value };
  else for (const x of [a, s]) if (x.status === 'fulfilled') await x.value.destroy();
  for (const x of [a, s, ...w]) if (x.status === 'rejected') throw x.reason;
}, 180_000);
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step().catch(() => {});
});
afterAll(async () => {
  for (const w of workers) await w.kill();
  await queue?.close();
  await sw?.close();
  await ds?.close();
  for (const db of Object.values(primaries ?? {})) await db.destroy();
  await t.teardown();
}, 60_000);

describe.sequential('failover under load', () => {
  it('an asynchronous standby: warned at start; the claims it lacked end unknown (record lost), none committed twice', async () => {
    const r = await runFailover('async');
    expect(r.warnings).toHaveLength(1);
    expect(r.warnings[0]?.reasons).toContain('async_standby');
    // Acknowledged during the stall, on the primary only.
    expect(r.rowsOnlyOnPrimary).toBeGreaterThan(0);
    // No intent committed twice; every one committed (none refused without running).
    expect(r.duplicates).toEqual([]);
    expect(r.uncommitted).toEqual([]);
    // The attempts holding lost claims found no row: the keys end unknown with the code, their
    // jobs failed for good, and each of those ran exactly once.
    expect(r.recordLost.length).toBeGreaterThan(0);
    expect(r.failedReasons).toHaveLength(r.recordLost.length);
    for (const reason of r.failedReasons) expect(reason).toContain(ERROR_CODES.recordLost);
    expect(r.statuses.unknown ?? 0).toBe(r.recordLost.length);
  }, 120_000);

  it('a synchronous standby (remote_apply): no warning; the stall blocks commits; every intent committed once and completed', async () => {
    const r = await runFailover('sync');
    expect(r.warnings).toEqual([]);
    expect(r.blockedDuringStall).toBe(true);
    expect(r.rowsOnlyOnPrimary).toBe(0);
    expect(r.duplicates).toEqual([]);
    expect(r.uncommitted).toEqual([]);
    expect(r.recordLost).toEqual([]);
    expect(r.failedReasons).toEqual([]);
    expect(r.statuses).toEqual({ completed: INTENTS });
  }, 120_000);
});

type Outcome = {
  warnings: { reasons: string[] }[];
  rowsOnlyOnPrimary: number;
  blockedDuringStall: boolean;
  duplicates: string[];
  uncommitted: string[];
  recordLost: string[];
  failedReasons: string[];
  statuses: Record<string, number>;
};

async function query<R extends pg.QueryResultRow>(url: string, sql: string): Promise<R[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<R>(sql)).rows;
  } finally {
    await c.end();
  }
}

type Mode = 'async' | 'sync';

async function runFailover(mode: Mode): Promise<Outcome> {
  const primary = primaries[mode];
  await migrate({ connectionString: primary.url(), schema: SCHEMA });
  const standby = await primary.standby();
  cleanup.push(() => standby.destroy());
  if (mode === 'sync') {
    await query(primary.url(), `alter system set synchronous_standby_names = '*'`);
    await query(primary.url(), 'select pg_reload_conf()');
  }
  await waitFor(
    async () =>
      (
        await query<{ n: number }>(
          primary.url(),
          `select count(*)::int as n from pg_stat_replication where state = 'streaming' and sync_state = '${mode}'`,
        )
      )[0]?.n === 1,
    `the standby streaming (${mode})`,
  );

  // The operations process checks the replication at start.
  const { logger, lines } = capturePino({ level: 'info' });
  const ops = await startOperationsProcess(
    loadConfig({
      DATABASE_URL: primary.url(),
      REDIS_URL: t.redisUrl,
      BQI_SCHEMA: SCHEMA,
      BQI_PREFIX: t.prefix,
      BQI_AUDIT_QUEUE: `audit-${mode}`,
    }),
    { logger },
  );
  await ops.close();
  const warnings = lines()
    .split('\n')
    .filter((l) => l.includes(ERROR_CODES.asyncReplica))
    .map((l) => JSON.parse(l) as { reasons: string[] });

  sw.cut(primary.port);
  ds.reset();
  await queue.clean(0, 0, 'completed');
  await queue.clean(0, 0, 'failed');
  const { leaseMs, lockDuration, stalledInterval } = config(sw.port, ds.url);
  await crashOperation('none', leaseMs).enqueueBulk(
    queue,
    Array.from({ length: INTENTS }, (_, i) => ({
      input: { order: `${mode}-${i}`, amount: 1 + i },
      options: {
        jobOptions: { attempts: 40, backoff: 250, removeOnComplete: false, removeOnFail: false },
        worker: { lockDuration, stalledInterval, maxStalledCount: 20 },
      },
    })),
  );
  const started = () => workers.reduce((n, w) => n + w.messages.filter((m) => m.event === 'processing').length, 0);
  await waitFor(async () => (await queue.getCompletedCount()) >= INTENTS / 4, 'a quarter of the intents done', 60_000);

  // Downstream requests are held (after their commit) while the stall is set up.
  let held = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  cleanup.push(async () => release());
  let blockedDuringStall = false;
  if (mode === 'sync') {
    // Every worker slot waits on the downstream, so no claim is in flight when replication stops.
    ds.hold = () => {
      held++;
      return gate;
    };
    await waitFor(() => held >= WORKERS * CONCURRENCY, 'every slot at the downstream', 30_000);
    stallReplication(primary);
    ds.hold = undefined;
    release();
    // The completions (and the next claims) wait for the standby that does not answer.
    const completedAtStall = await queue.getCompletedCount();
    await waitFor(
      async () =>
        ((
          await query<{ n: number }>(
            primary.url(),
            `select count(*)::int as n from pg_stat_activity where wait_event = 'SyncRep'`,
          )
        )[0]?.n ?? 0) > 0,
      'completions waiting for the standby',
      30_000,
    );
    await new Promise((r) => setTimeout(r, 500));
    blockedDuringStall = (await queue.getCompletedCount()) === completedAtStall;
  } else {
    stallReplication(primary);
    // Claims acknowledged by the primary alone; those still running when it dies are held.
    const before = started();
    await waitFor(() => started() >= before + 2 * WORKERS * CONCURRENCY, 'claims made during the stall', 30_000);
    ds.hold = () => {
      held++;
      return gate;
    };
    await waitFor(() => held >= WORKERS * CONCURRENCY, 'every slot at the downstream', 30_000);
  }
  const count = `select count(*)::int as n from ${SCHEMA}.idempotency_ledger`;
  const onPrimary = (await query<{ n: number }>(primary.url(), count))[0]?.n ?? 0;
  const onStandby = (await query<{ n: number }>(standby.url(), count))[0]?.n ?? 0;

  // The primary is lost; the standby is promoted and the address moved to it.
  primary.kill();
  sw.cut(undefined);
  await standby.promote();
  sw.cut(standby.port);
  ds.hold = undefined;
  release();

  await waitFor(
    async () => (await queue.getCompletedCount()) + (await queue.getFailedCount()) >= INTENTS,
    'every intent to finish',
    90_000,
    100,
  );
  for (const w of workers) expect(w.alive(), w.stderr()).toBe(true);
  const orders = Array.from({ length: INTENTS }, (_, i) => `${mode}-${i}`);
  const rows = await query<{ resource_key: string; status: string; code: string | null }>(
    standby.url(),
    `select resource_key, status, error->>'code' as code from ${SCHEMA}.idempotency_ledger`,
  );
  const statuses: Record<string, number> = {};
  for (const row of rows) statuses[row.status] = (statuses[row.status] ?? 0) + 1;
  console.info(
    `failover (${mode}): ${onPrimary - onStandby} rows only on the primary at its death, ${ds.commits} commits for ${INTENTS} intents, ledger ${JSON.stringify(statuses)}`,
  );
  return {
    warnings,
    rowsOnlyOnPrimary: onPrimary - onStandby,
    blockedDuringStall,
    duplicates: orders.filter((o) => ds.commitsFor({ order: o }) > 1),
    uncommitted: orders.filter((o) => ds.commitsFor({ order: o }) === 0),
    recordLost: rows.filter((row) => row.code === ERROR_CODES.recordLost).map((row) => row.resource_key),
    failedReasons: (await queue.getFailed()).map((j) => j.failedReason),
    statuses,
  };
}

/** Replication stops: the primary's WAL senders are frozen (SIGSTOP); they never run again. */
function stallReplication(primary: PrivatePostgres): void {
  const senders = primary.walSenders();
  expect(senders.length).toBe(1);
  for (const pid of senders) process.kill(pid, 'SIGSTOP');
}
