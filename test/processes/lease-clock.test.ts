/**
 * Leases are decided on the database's clock and the worker's monotonic clock, never on the
 * worker's wall clock. Workers run in child processes whose wall clock libfaketime shifts by
 * ±60 s; the database is a private cluster, so that it can be stopped and frozen (SIGSTOP).
 * Leases of 3 s and wide bounds: a loaded 2-core machine must pass this reliably.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { Queue } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { migrate } from '../../migrations/migrate.js';
import { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { leaseMarginMs } from '../../src/worker/lease-keeper.js';
import { type ClockWorker, clockOperation, LIBFAKETIME, spawnClockWorker } from '../helpers/clock-worker.js';
import { waitFor } from '../helpers/context.js';
import { machineHas } from '../helpers/machine.js';
import { PrivatePostgres } from '../helpers/private-postgres.js';

const LEASE_MS = 3_000;
const MARGIN_MS = leaseMarginMs(LEASE_MS);
/** What a loaded machine may add to any deadline here (pipes, timers, pg_ctl). */
const SLACK_MS = 1_500;
const TIMING = { leaseMs: LEASE_MS, lockDuration: 10_000, stalledInterval: 5_000 } as const;
const CHILD_APP = 'lease_clock_child';

const id = randomBytes(4).toString('hex');
const schema = `lease_clock_${id}`;
const prefix = `{lease_clock_${id}}`;
const redisUrl = inject('redisUrl');
const op = clockOperation(LEASE_MS);

let db: PrivatePostgres;
let ledger: PostgresLedger;
let n = 0;
/** True while the test froze the database (SIGSTOP). */
let frozen = false;
const children: ClockWorker[] = [];
const queues: Queue[] = [];

beforeAll(async () => {
  db = await PrivatePostgres.start();
  await migrate({ connectionString: db.url(), schema });
  ledger = new PostgresLedger({ connectionString: db.url(), schema, poolSize: 2 });
});

afterEach(async () => {
  for (const c of children.splice(0)) await c.kill();
  if (frozen) resume();
  if (!(await accepting())) await db.startAgain();
  for (const q of queues.splice(0)) {
    await q.obliterate({ force: true }).catch(() => {});
    await q.close();
  }
  // A killed child's backends are gone before the next test (and none outlives the file).
  await waitFor(async () => (await childConnections()) === 0, 'the children’s connections to close');
});

afterAll(async () => {
  await ledger?.close();
  await db?.destroy();
});

function resume(): void {
  db.resume();
  frozen = false;
}

async function accepting(): Promise<boolean> {
  try {
    await ledger.pool.query('select 1');
    return true;
  } catch {
    return false;
  }
}

async function childConnections(): Promise<number> {
  const r = await ledger.pool.query<{ n: number }>(
    'select count(*)::int as n from pg_stat_activity where application_name = $1',
    [CHILD_APP],
  );
  return r.rows[0]?.n ?? 0;
}

/** A worker child on its own queue, its wall clock `skew` off; checks that the skew took. */
async function start(skew: string | null, runMs: number): Promise<{ w: ClockWorker; q: Queue; run: string }> {
  n++;
  const name = `clock${n}`;
  const before = Date.now();
  const w = await spawnClockWorker(
    {
      databaseUrl: db.url('postgres', CHILD_APP),
      redisUrl,
      schema,
      prefix,
      queue: name,
      runMs,
      ...TIMING,
    },
    skew,
  );
  children.push(w);
  const ready = w.messages.find((m) => m.event === 'ready');
  const offset = (ready?.event === 'ready' ? ready.wallMs : Number.NaN) - before;
  const expected = skew === null ? 0 : Number.parseInt(skew, 10) * 1000;
  // The child's Date.now() really is off (start-up time of the child on top: up to ~20 s).
  expect(offset).toBeGreaterThanOrEqual(expected - 1_000);
  expect(offset).toBeLessThanOrEqual(expected + 20_000);
  const q = new Queue(name, { connection: { url: redisUrl, maxRetriesPerRequest: null }, prefix });
  queues.push(q);
  return { w, q, run: `${name}-${id}` };
}

const CLOCKS = [
  ['the correct clock', null],
  ['a clock 60 s fast', '+60s'],
  ['a clock 60 s slow', '-60s'],
] as const;

const fakeClocks = machineHas(
  'test/processes/lease-clock.test.ts',
  'libfaketime',
  existsSync(LIBFAKETIME),
  'apt-get install faketime',
);

describe.each(CLOCKS.filter(([, skew]) => skew === null || fakeClocks))('a worker with %s', (_label, skew) => {
  it('holds the lease for 2.5 lease periods, renewing it, and completes: no false lease_expired', async () => {
    const { w, q, run } = await start(skew, 2.5 * LEASE_MS);
    await op.enqueue(q, { run });
    const { msg: p } = await w.waitFor('processing');
    const { msg: f } = await w.waitFor('finished', 4 * LEASE_MS + SLACK_MS);
    await w.waitFor('job-completed');

    expect(f.afterMs).toBeGreaterThanOrEqual(2.5 * LEASE_MS - 50);
    expect(w.messages.some((m) => m.event === 'aborted')).toBe(false);
    const rec = await ledger.get(p.key);
    expect(rec).toMatchObject({ status: 'completed', epoch: 1 });
  });

  it('is told lease_expired when its renewals fail (database stopped): after most of the lease, not after it', async () => {
    const { w, q, run } = await start(skew, 4 * LEASE_MS);
    await op.enqueue(q, { run });
    await w.waitFor('processing');
    await db.stop('fast');
    const stoppedAt = performance.now(); // no renewal can land after this

    const { msg: a, receivedAt } = await w.waitFor('aborted', 3 * LEASE_MS);
    expect(a.reason).toBe('lease_expired');
    // Not at the first failed renewal (a clock running fast made that a false expiry) ...
    expect(a.afterMs).toBeGreaterThan(0.6 * LEASE_MS);
    // ... and not never (a slow one did): within a lease of the last renewal that could land.
    expect(receivedAt - stoppedAt).toBeLessThan(LEASE_MS + SLACK_MS);
  });
});

describe('a frozen database (SIGSTOP) while the processor holds the lease', () => {
  it('fires the signal before the lease expires, within the lease of the freeze', async () => {
    const { w, q, run } = await start(null, 4 * LEASE_MS);
    await op.enqueue(q, { run });
    const { msg: p } = await w.waitFor('processing');
    const claimed = (await ledger.get(p.key))?.leaseExpiresAt?.getTime() ?? 0;
    // Freeze just after a renewal landed: the expiry in the row is the one the keeper counts down.
    const expiresAt = await waitFor(
      async () => {
        const e = (await ledger.get(p.key))?.leaseExpiresAt?.getTime() ?? 0;
        return e > claimed ? e : 0;
      },
      'a renewal',
      2 * LEASE_MS,
      10,
    );
    db.pause();
    frozen = true;
    const frozenAt = performance.now();
    try {
      const { msg: a, receivedAt } = await w.waitFor('aborted', 3 * LEASE_MS);
      expect(a.reason).toBe('lease_expired');
      // Before another worker could take over: the database's expiry (same host clock, not skewed).
      expect(a.wallMs).toBeLessThan(expiresAt);
      // A decision although no renewal ever answers: no later than the lease after the freeze ...
      expect(receivedAt - frozenAt).toBeLessThan(LEASE_MS + SLACK_MS);
      // ... and not long before its end either (a renewal had just landed).
      expect(receivedAt - frozenAt).toBeGreaterThan(LEASE_MS - MARGIN_MS - SLACK_MS);
    } finally {
      resume();
    }
  });
});
