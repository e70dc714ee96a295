/**
 * End-to-end throughput of `withIdempotency` in a BullMQ worker, against raw BullMQ, a
 * hand-written Postgres ledger and AWS Powertools' idempotency utility on Redis, in one process
 * and one sitting.
 *
 * Variants (each drains the same number of no-op jobs at the same worker concurrency):
 * - raw: the processor bumps an in-memory side-effect counter and returns a small object;
 * - naive: the ledger users write by hand around the same processor: an unprepared
 *   `insert … on conflict do nothing returning`, then `update … set status = 'completed'`;
 * - floor (the write floor): the least any Postgres-durable claim costs here: the key inserted
 *   into a bare two-column table before the effect and a flag set after it, batched by the
 *   library's own micro-batcher, committed synchronously; no fencing, leases, replay or result.
 *   `fresh / floor` says how close the ledger's fresh path is to that;
 * - read floor: the least any Postgres-backed replay costs here: the floor's operations enqueued
 *   again, each job's key read back (`select … where key = any($1)`) by the same micro-batcher,
 *   the side effect not run. `replay / read floor` says how close the ledger's replay is to that,
 *   and `read floor / raw` how close to raw BullMQ any replay that asks Postgres can come;
 * - fresh floor: the least a fresh job of this design costs: the write floor with what the design
 *   carries and keeps: the library's own jobs (key carried in the job), a processor taking
 *   BullMQ's signal, the key inserted before the effect and the result sealed (as the wrapper
 *   seals it) and stored after it, the sealed result returned; no fingerprint, fencing, lease,
 *   record of transitions or audit. `fresh / fresh floor` says how close the wrapper is to it;
 * - replay floor: the least a replay of this design costs: the library's own replay jobs (the key
 *   made at intent, carried in the job), a processor that takes BullMQ's signal, each key's
 *   stored result read by the same micro-batcher from the ledger the fresh run wrote and
 *   returned as it is (sealed); no fingerprint, status, lease or audit. `replay / replay floor`
 *   says how close the wrapper's replay is to its design's least;
 * - guarded fresh floor (unit `floor`): the fresh floor plus what the ledger's guarantees cost on a
 *   fresh job and nothing else: the input's fingerprint made as the library makes it (keyed HMAC
 *   of the canonical JSON, `fingerprintOf` with the bench keyring) and stored with the key as the
 *   ledger stores it (bytes), the claim answering the row's epoch (1: new) and the completion
 *   fenced by it (`where key = … and epoch = …`), on a bench table (`key, fingerprint bytea,
 *   epoch int, result jsonb`). No lease, status, record of transitions or audit. `fresh / guarded
 *   fresh floor` says how close the wrapper is to the least its guarantees allow, `guarded fresh
 *   floor / floor` what they cost over the write floor;
 * - guarded replay floor (unit `library`): the replay floor plus what a correct replay must do and
 *   nothing else: the input's fingerprint made as above, the stored fingerprint read with the
 *   stored result (one statement per batch, the same micro-batcher), a mismatch refused (the job
 *   fails), and the seal authenticated for the operation and key (`checkResult`, as the wrapper's
 *   replay does); the stored sealed result returned, as the wrapper returns it. No status, lease
 *   or audit. `replay / guarded replay floor` says how close the wrapper's replay is to the least
 *   its guarantees allow, `guarded replay floor / replay floor` what they cost. Every 16th job's
 *   result (by job number) of it and of the wrapper's replay is kept, and after the unit both are
 *   opened and must be equal, each its own job's;
 * - powertools: `makeIdempotent` with its Redis `CachePersistenceLayer` on the same Redis;
 * - powertools replay (informational, not in the JSON line): the same operations again;
 * - powertools durable, powertools durable replay (unit `powertools_durable`, run with
 *   `powertools`): the same two against a Redis the bench starts for itself
 *   (bench/lib/private-redis.ts: loopback, a fresh temporary directory, `--save ''`,
 *   `--appendonly yes --appendfsync always`), so that Powertools' records are as durable as the
 *   ledger's synchronous Postgres commit: every write fsynced to the AOF before Redis replies.
 *   The queue stays on the shared Redis; the Redis commands and CPU per job count both servers.
 *   `fresh / powertools_durable` and `replay / powertools_durable_replay` compare the wrapper
 *   with Powertools at equal durability; the write floor's and the guarded floors' ratios to them
 *   say whether a bare durable write, and any design with the ledger's guarantees, could be ahead
 *   of it on this machine. Without `redis-server` on the PATH (or at BENCH_REDIS_SERVER) the unit
 *   is skipped (a line on stderr says so);
 * - fresh: `withIdempotency`, every key new (claim, run, complete);
 * - replay: `withIdempotency`, every key already completed (the same operations enqueued again
 *   as new jobs): served from the ledger, the side effect never runs.
 * - fresh enqueued / fresh durable (unit `intents`): the fresh path with the fill in the clock
 *   (enqueueBulk, then the drain), without and with durable intents: `fresh durable` records
 *   every intent in Postgres before its job is added (`durable: { pool }`) and, after the drain,
 *   runs the relay until it has deleted every claimed intent. Their WAL, statements and CPU
 *   include the fill (and the relay), so compare them with each other, not with the others.
 *
 * Each run fills a fresh queue completely (addBulk in chunks), then starts the worker; the clock
 * runs from the worker's start until the Worker has emitted 'completed' for every job. Every job
 * uses removeOnComplete/removeOnFail. Each variant checks that the side effect ran exactly once
 * per job (none at all on a replay) and that every job returned its own result: a correctness
 * check. Timings are noisy (Node, Redis and Postgres share 2 cores), so they are reported, never
 * asserted. Variants alternate within each round, in an order rotated every round, and ratios are
 * taken against raw in the same round.
 *
 * Per variant it also reports peak RSS (sampled every 100 ms during the drain; RSS rarely shrinks,
 * so a later variant inherits an earlier one's high-water mark), Postgres statements (calls to
 * pool.query: a batch counts once), WAL bytes and Redis commands per job (server-wide counters,
 * Lua-internal calls included: other users of the same servers inflate them), this process's GC
 * time, and the CPU seconds Node, Postgres (this run's sessions and the server's auxiliary
 * processes) and Redis spent per 1000 jobs, from /proc (Linux only). CPU per job is far less
 * sensitive to other load on the machine than jobs/s: compare variants on it when `other` is high.
 * A variant that writes Postgres (naive, floor, fresh) has its table vacuumed right after its
 * drain, and that vacuum's CPU per 1000 jobs is reported beside the drain's (`vacuum`): the dead
 * row versions a drain leaves are its cost, paid at once instead of by an autovacuum worker
 * during another variant's drain (whose Postgres CPU counts every autovacuum worker).
 *
 * Then, in the same sitting, the pair on BullMQ's PostgreSQL backend (bench/lib/postgres-backend-pair.ts):
 * raw BullMQ vs the wrapper, fresh and replay, BENCH_PG_JOBS jobs per run; `--backends redis` or
 * `--backends postgres` (BENCH_BACKENDS) runs one side only.
 *
 * Run: `npm run bench` (DATABASE_URL, REDIS_URL; BENCH_JOBS, BENCH_ROUNDS, and BENCH_ONLY, a
 * comma list of raw,naive,floor,powertools,powertools_durable,library,intents, to narrow it for
 * profiling (`powertools` includes `powertools_durable`); BENCH_CPU_PROFILE=dir
 * writes a V8 CPU profile of each drain, which `npx tsx bench/profile-summary.ts` summarises;
 * BENCH_HEAP_PROFILE=dir a sample of each drain's allocations, freed ones included, which
 * `npx tsx bench/heap-summary.ts` summarises).
 * Progress goes to stderr; the tables and, as the last line of stdout, one JSON object with the
 * medians (ratios: the median of the per-round ratios) go to stdout.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';
import { type Job, type Processor, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { canonicalJson } from '../src/fingerprint/canonical-json.js';
import { boundedKey } from '../src/keys/idempotency-key.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import { ENVELOPE_FIELD, type JobEnvelope } from '../src/operation/envelope.js';
import type { Operation } from '../src/operation/operation.js';
import { relayIntents } from '../src/ops/intent-relay.js';
import { defineKeyring } from '../src/sealing/keyring.js';
import { type SealedResult, sealResult, unseal } from '../src/sealing/sealed-result.js';
import { withIdempotency } from '../src/worker/with-idempotency.js';
import { startProfile, stopProfile } from './lib/cpu-profile.js';
import {
  batchedStatement,
  freshFloor,
  guardedFreshFloor,
  guardedReplay,
  keyBatch,
  writeFloor,
} from './lib/floor-batch.js';
import { jsonLine } from './lib/json-line.js';
import { walPosition, walSince } from './lib/pg-wal.js';
import { pairVariants, reportPostgresPair, runPostgresPair } from './lib/postgres-backend-pair.js';
import { type PrivateRedis, RedisServerMissing, startPrivateRedis } from './lib/private-redis.js';
import { type CpuSplit, cpuSnapshot, cpuSplit, perThousand } from './lib/proc-cpu.js';
import { alternatingRounds, rotated } from './lib/rounds.js';
import { median, perRoundRatios, round2 } from './lib/stats.js';
import { printTable as table } from './lib/table.js';
import { benchOperation } from './lib/wrapper-operation.js';

const BENCH_KEY = randomBytes(32);
const BENCH_KEYRING = defineKeyring({ keys: [{ id: 'bench', secret: BENCH_KEY }] });

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const JOBS = Number(process.env.BENCH_JOBS ?? 20_000);
/** Jobs per run of the pair on BullMQ's PostgreSQL backend (about a third of Redis's rate). */
const PG_JOBS = Number(process.env.BENCH_PG_JOBS ?? 5_000);

/**
 * `--backends redis,postgres` (or BENCH_BACKENDS): the queue backends to measure: `redis` runs the
 * units above on Redis, `postgres` the pair on BullMQ's PostgreSQL backend (raw vs the wrapper,
 * fresh and replay). @defaultValue both, in one sitting
 */
function queueBackends(): ('redis' | 'postgres')[] {
  const i = process.argv.indexOf('--backends');
  const text = i >= 0 ? (process.argv[i + 1] ?? '') : (process.env.BENCH_BACKENDS ?? 'redis,postgres');
  const names = text.split(',').map((n) => n.trim());
  const bad = names.filter((n) => n !== 'redis' && n !== 'postgres');
  if (bad.length > 0 || names.length === 0) throw new Error(`--backends takes redis,postgres, not ${text}`);
  return names as ('redis' | 'postgres')[];
}
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 50;
const CHUNK = 1000;
/** Jobs per variant drained once before the rounds (JIT, connections, prepared statements); not measured. */
const WARMUP_JOBS = 1000;
/** Connections per Postgres variant: the ledger's default pool size, and pg's. */
const POOL_SIZE = 10;
/** A drain that makes no progress for this long has hung: fail rather than wait forever. */
const STALL_MS = 60_000;
const JOB_OPTS = { removeOnComplete: true, removeOnFail: true } as const;

type JobData = { id: string; n: number };
type Result = { ok: true; id: string };

type UnitName = 'raw' | 'naive' | 'floor' | 'powertools' | 'powertools_durable' | 'library' | 'intents';
type VariantName =
  | 'raw'
  | 'naive'
  | 'floor'
  | 'read_floor'
  | 'fresh_floor'
  | 'guarded_fresh_floor'
  | 'powertools'
  | 'powertools_replay'
  | 'powertools_durable'
  | 'powertools_durable_replay'
  | 'fresh'
  | 'replay'
  | 'replay_floor'
  | 'guarded_replay_floor'
  | 'fresh_enqueued'
  | 'fresh_durable';
const VARIANTS: VariantName[] = [
  'raw',
  'naive',
  'floor',
  'read_floor',
  'fresh_floor',
  'guarded_fresh_floor',
  'powertools',
  'powertools_replay',
  'powertools_durable',
  'powertools_durable_replay',
  'fresh',
  'replay',
  'replay_floor',
  'guarded_replay_floor',
  'fresh_enqueued',
  'fresh_durable',
];

/** One way of processing: how its jobs are enqueued and processed, and what it must do. */
type Variant = {
  name: VariantName;
  /** Jobs of variants in one unit carry the same operations (a replay repeats the one before). */
  unit: UnitName;
  /** 'all': the side effect runs once per job; 'none': never (served from the record). */
  expect: 'all' | 'none';
  enqueue(queue: Queue, items: JobData[]): Promise<void>;
  /** Built per round: Powertools' records are scoped by a per-round key prefix. */
  processor(tag: string): Processor;
  /** The operation id a job carries, to check that its result is its own. */
  idOf(job: Job): string | undefined;
  /** The Postgres tables its drain writes: vacuumed right after it, and that vacuum billed to it. */
  writes?: readonly string[];
  /** The fill is measured with the drain (clock, CPU, WAL, statements): what enqueue costs is compared. */
  timedFill?: boolean;
  /** Measured after the drain (with `timedFill`): the relay's clean-up. */
  afterDrain?(queue: Queue): Promise<void>;
  /** Its drain keeps every 16th job's result (by the job's number), to compare with another variant's (see {@link samePlaintext}). */
  keepSample?: true;
};

type Measurement = {
  perSec: number;
  peakRssMb: number;
  /** Garbage collection in this process, µs per job. */
  gcPerJobUs: number;
  pgPerJob: number;
  walBytesPerJob: number;
  redisPerJob: number;
  /** CPU seconds per 1000 jobs. */
  cpu: CpuSplit | undefined;
  /** CPU seconds per 1000 jobs of the VACUUM of what the drain wrote (dead row versions), run right after it. */
  vacuumCpu: number | undefined;
};

/** How often the side effect ran in the current drain. */
let effects = 0;
/** Statements sent through the instrumented pools (ledger and naive). */
let pgStatements = 0;

function effect(data: JobData): Result {
  effects++;
  return { ok: true, id: data.id };
}

function redisOptions() {
  const url = new URL(REDIS_URL);
  return {
    host: url.hostname,
    port: Number(url.port || 6379),
    db: Number(url.pathname.slice(1) || 0),
    maxRetriesPerRequest: null,
  };
}

/** Counts every query a pool is asked to run (the ledger and the naive variant both call pool.query). */
function countStatements(pool: pg.Pool): void {
  const original = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    pgStatements++;
    return original(...args);
  };
}

/** Peak RSS of this process, sampled every 100 ms. */
class RssSampler {
  private peak = process.memoryUsage().rss;
  private readonly timer = setInterval(() => this.sample(), 100);
  constructor() {
    this.timer.unref();
  }
  private sample(): void {
    this.peak = Math.max(this.peak, process.memoryUsage().rss);
  }
  stop(): number {
    clearInterval(this.timer);
    this.sample();
    return this.peak;
  }
}

/** Time spent in garbage collection (all kinds), from the 'gc' performance entries. */
class GcTimer {
  private ms = 0;
  private readonly observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) this.ms += entry.duration;
  });
  constructor() {
    this.observer.observe({ entryTypes: ['gc'] });
  }
  stop(): number {
    for (const entry of this.observer.takeRecords()) this.ms += entry.duration;
    this.observer.disconnect();
    return this.ms;
  }
}

type Drained = { seconds: number; peakRss: number; gcMs: number };

/** The results a `keepSample` variant's last drain kept, by operation id. */
const samples = new Map<VariantName, Map<string, unknown>>();

/** The value a job returned: a sealed result opened (sealed for the bench operation), anything else as it is. */
function plaintextOf(result: unknown): unknown {
  const sealed = (result as { $sealed?: string } | undefined)?.$sealed;
  return sealed === undefined
    ? result
    : unseal(result as SealedResult<Result>, BENCH_KEYRING, { operation: benchOperation.name });
}

/**
 * After a unit's drains: the jobs `b` kept returned the same value as those `a` kept (the same
 * operations, the same jobs by number), both opened, each its own job's. Throws when they differ.
 */
function samePlaintext(a: VariantName, b: VariantName, tag: string): void {
  const ka = samples.get(a);
  const kb = samples.get(b);
  if (!ka || !kb) return;
  if (ka.size === 0 || ka.size !== kb.size)
    throw new Error(`${b} (${tag}): kept ${kb.size} results, ${a} kept ${ka.size}`);
  for (const [id, ra] of ka) {
    if (!kb.has(id)) throw new Error(`${b} (${tag}): no result kept for ${id}`);
    const pa = plaintextOf(ra);
    const pb = plaintextOf(kb.get(id));
    if ((pa as Result | undefined)?.id !== id || canonicalJson(pa) !== canonicalJson(pb))
      throw new Error(`${b} (${tag}): ${id} returned ${canonicalJson(pb)}, ${a} returned ${canonicalJson(pa)}`);
  }
  samples.clear();
}

/**
 * Starts a worker on a full queue and waits for `count` 'completed' events. Throws when a job
 * fails, returns someone else's result, or nothing progresses for STALL_MS.
 */
async function drain(
  queueName: string,
  processor: Processor,
  count: number,
  variant: Variant,
  tag: string,
): Promise<Drained> {
  const worker = new Worker(queueName, processor, {
    connection: redisOptions(),
    concurrency: CONCURRENCY,
    autorun: false,
  });
  let completed = 0;
  let failed = 0;
  let mismatched = 0;
  let firstError: unknown;
  let lastProgress = Date.now();
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const kept = variant.keepSample ? new Map<string, unknown>() : undefined;
  if (kept) samples.set(variant.name, kept);
  worker.on('completed', (job: Job, result: Result | undefined) => {
    completed++;
    lastProgress = Date.now();
    if (kept) {
      const id = variant.idOf(job);
      if (id !== undefined && Number(id.slice(id.lastIndexOf('-') + 1)) % 16 === 0) kept.set(id, result);
    }
    // The library's results are sealed: every 16th is opened and checked (opening each one here
    // would bill the check's cost to the library's drain).
    const sealed = (result as { $sealed?: string } | undefined)?.$sealed;
    if (sealed === undefined) {
      if (result?.id !== variant.idOf(job)) mismatched++;
    } else if (
      completed % 16 === 0 &&
      BENCH_KEYRING.openPlaced<Result>(sealed, 'result').value.id !== variant.idOf(job)
    ) {
      mismatched++;
    }
    if (completed + failed >= count) finish();
  });
  worker.on('failed', (_job, err) => {
    failed++;
    firstError ??= err;
    if (completed + failed >= count) finish();
  });
  worker.on('error', (err) => {
    firstError ??= err;
  });
  const watchdog = setInterval(() => {
    if (Date.now() - lastProgress > STALL_MS) {
      firstError ??= new Error(`${variant.name}: no job completed for ${STALL_MS} ms (${completed}/${count})`);
      finish();
    }
  }, 1000);
  watchdog.unref();
  try {
    await worker.waitUntilReady();
    const profile = await startProfile();
    const rss = new RssSampler();
    const gc = new GcTimer();
    lastProgress = Date.now();
    const started = performance.now();
    const running = worker.run();
    await done;
    const seconds = (performance.now() - started) / 1000;
    const peakRss = rss.stop();
    const gcMs = gc.stop();
    await stopProfile(profile, `${variant.name}-${tag}`);
    await worker.close();
    await running;
    if (failed > 0 || firstError) {
      throw new Error(`${variant.name}: ${failed} of ${count} jobs failed; first error: ${String(firstError)}`, {
        cause: firstError,
      });
    }
    if (completed !== count) throw new Error(`${variant.name}: ${completed} of ${count} jobs completed`);
    if (mismatched > 0) throw new Error(`${variant.name}: ${mismatched} jobs returned a result that is not theirs`);
    return { seconds, peakRss, gcMs };
  } finally {
    clearInterval(watchdog);
    await worker.close(true).catch(() => {});
  }
}

type Context = {
  runId: string;
  schema: string;
  admin: pg.Client;
  /** The admin session's backend, whose CPU the vacuums after the drains are measured by. */
  adminPid: number;
  redis: Redis;
  /** Every Redis server a drain may use (the shared one, and the bench's own when it runs): commands counted on each. */
  redisServers: Redis[];
  /** The bench's own Redis server, whose CPU counts as `redis`. */
  redisPids: ReadonlySet<number>;
  variants: Record<VariantName, Variant>;
};

/**
 * Postgres processes whose CPU counts as this run's: its own sessions (tagged by application_name)
 * and the server's auxiliary processes (WAL writer, checkpointer, autovacuum...), not other
 * sessions sharing the server.
 */
async function postgresPids(admin: pg.Client): Promise<Set<number>> {
  const res = await admin.query<{ pid: number }>(
    `select pid from pg_stat_activity where application_name = current_setting('application_name')
       or backend_type <> 'client backend'`,
  );
  return new Set(res.rows.map((r) => r.pid));
}

/** Commands processed so far, summed over the servers (each count includes the INFO before it, not its own). */
async function redisCommands(servers: readonly Redis[]): Promise<number> {
  let total = 0;
  for (const redis of servers) {
    const info = await redis.info('stats');
    total += Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? 0);
  }
  return total;
}

/** Fills a fresh queue with `count` jobs of the variant, drains it, checks the side effects, deletes the queue. */
async function runVariant(ctx: Context, variant: Variant, tag: string, count: number): Promise<Measurement> {
  const queueName = `bench-wrapper-${ctx.runId}-${variant.name}-${tag}`;
  const queue = new Queue(queueName, { connection: ctx.redis, defaultJobOptions: JOB_OPTS });
  try {
    // The fill-timed pair runs fresh keys each: its own ids, not its unit's.
    const ids = variant.timedFill ? variant.name : variant.unit;
    const items = Array.from({ length: count }, (_, n) => ({ id: `${ctx.runId}-${ids}-${tag}-${n}`, n }));
    const fill = async () => {
      const started = performance.now();
      for (let i = 0; i < items.length; i += CHUNK) await variant.enqueue(queue, items.slice(i, i + CHUNK));
      const waiting = await queue.getWaitingCount();
      if (waiting !== count)
        throw new Error(`${variant.name}: ${waiting} jobs waiting after the fill, expected ${count}`);
      return (performance.now() - started) / 1000;
    };
    let filled = variant.timedFill ? 0 : await fill();

    // Each drain starts with no dirty pages or WAL left by the one before it, so a checkpoint
    // triggered by another variant's writes does not land in this one (needs superuser).
    await ctx.admin.query('checkpoint').catch(() => {});
    const processor = variant.processor(tag);
    effects = 0;
    const statements0 = pgStatements;
    const wal0 = await walPosition(ctx.admin);
    const redis0 = await redisCommands(ctx.redisServers);
    const pids = await postgresPids(ctx.admin);
    const cpu0 = cpuSnapshot(pids, undefined, ctx.redisPids);
    if (variant.timedFill) filled = await fill();
    const drained = await drain(queueName, processor, count, variant, tag);
    const afterStarted = performance.now();
    await variant.afterDrain?.(queue);
    const seconds = drained.seconds + (variant.timedFill ? filled + (performance.now() - afterStarted) / 1000 : 0);
    const { peakRss, gcMs } = drained;
    for (const pid of await postgresPids(ctx.admin)) pids.add(pid);
    const split = cpuSplit(cpu0, cpuSnapshot(pids, undefined, ctx.redisPids));
    const cpu = split && perThousand(split, count);
    // Less the first INFO sent to each server.
    const redisPerJob = ((await redisCommands(ctx.redisServers)) - redis0 - ctx.redisServers.length) / count;
    const walBytes = await walSince(ctx.admin, wal0);

    const expected = variant.expect === 'all' ? count : 0;
    if (effects !== expected) {
      throw new Error(`${variant.name} (${tag}): the side effect ran ${effects} times, expected ${expected}`);
    }
    const vacuumCpu = await vacuumWritten(ctx, variant, count);
    return {
      perSec: count / seconds,
      peakRssMb: peakRss / 2 ** 20,
      gcPerJobUs: (gcMs * 1000) / count,
      pgPerJob: (pgStatements - statements0) / count,
      walBytesPerJob: walBytes / count,
      redisPerJob,
      cpu,
      vacuumCpu,
    };
  } finally {
    await queue.obliterate({ force: true }).catch((error: unknown) => {
      console.error(`bench wrapper: could not obliterate ${queueName}:`, error);
    });
    await queue.close();
  }
}

/**
 * Vacuums the tables a drain wrote, right after it, and returns that vacuum's CPU (the admin
 * session's backend) per 1000 jobs. The dead row versions a drain leaves are its cost too, paid
 * later by autovacuum; here they are paid at once and billed to it, and autovacuum, whose
 * workers count as any drain's Postgres CPU, has nothing left of it to do during the next
 * variant's drain.
 */
async function vacuumWritten(ctx: Context, variant: Variant, count: number): Promise<number | undefined> {
  if (!variant.writes?.length) return undefined;
  const self = new Set([ctx.adminPid]);
  const before = cpuSnapshot(self);
  for (const table of variant.writes) await ctx.admin.query(`vacuum ${table}`);
  const split = cpuSplit(before, cpuSnapshot(self));
  return split && perThousand(split, count).postgres;
}

/** After a library fresh run: every key of the round is completed in the ledger. */
async function checkLedger(ctx: Context, ids: string, tag: string, count: number): Promise<void> {
  const res = await ctx.admin.query<{ n: string }>(
    `select count(*) as n from ${ctx.schema}.idempotency_ledger where status = 'completed' and split_part(key, ':', 2) like $1`,
    [`${ctx.runId}-${ids}-${tag}-%`],
  );
  if (Number(res.rows[0]!.n) !== count) {
    throw new Error(`fresh (${tag}): ${res.rows[0]!.n} completed ledger rows, expected ${count}`);
  }
}

const UNITS: Record<UnitName, VariantName[]> = {
  raw: ['raw'],
  naive: ['naive'],
  floor: ['floor', 'read_floor', 'fresh_floor', 'guarded_fresh_floor'],
  powertools: ['powertools', 'powertools_replay'],
  powertools_durable: ['powertools_durable', 'powertools_durable_replay'],
  library: ['fresh', 'replay', 'replay_floor', 'guarded_replay_floor'],
  intents: ['fresh_enqueued', 'fresh_durable'],
};

async function runUnit(
  ctx: Context,
  unit: UnitName,
  tag: string,
  count: number,
): Promise<Map<VariantName, Measurement>> {
  const out = new Map<VariantName, Measurement>();
  for (const name of UNITS[unit]) {
    out.set(name, await runVariant(ctx, ctx.variants[name], tag, count));
    if (name === 'fresh' || name === 'fresh_durable') {
      await checkLedger(ctx, name === 'fresh' ? 'library' : name, tag, count);
    }
  }
  if (unit === 'library') samePlaintext('replay', 'guarded_replay_floor', tag);
  return out;
}

/** Worker processes of the many-workers run (BENCH_WORKERS, a comma list; empty: no such run). */
const WORKER_COUNTS = (process.env.BENCH_WORKERS ?? '1,2,4')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map(Number);

type WorkersMeasurement = { perSec: number; cpu: CpuSplit | undefined };

type Child = { proc: ChildProcess & { stdin: NodeJS.WritableStream }; lines: AsyncIterator<string> };

async function nextLine(child: Child, what: string): Promise<string> {
  const next = await child.lines.next();
  if (next.done) throw new Error(`a worker process exited before ${what}`);
  return next.value;
}

/**
 * The fresh path with `n` worker processes on one queue, the same total concurrency (and ledger
 * connections) split between them. The queue is filled first; the clock runs from 'go' until the
 * queue is empty (polled every 20 ms). CPU: the worker processes (as `node`), this run's Postgres
 * sessions and Redis, per 1000 jobs. Each process reports its side-effect count: they must add up
 * to one per job.
 */
async function runWorkers(ctx: Context, databaseUrl: string, n: number, tag: string, count: number) {
  const queueName = `bench-wrapper-${ctx.runId}-workers${n}-${tag}`;
  const queue = new Queue(queueName, { connection: ctx.redis, defaultJobOptions: JOB_OPTS });
  const children: Child[] = [];
  try {
    const items = Array.from({ length: count }, (_, i) => ({ id: `${ctx.runId}-workers${n}-${tag}-${i}`, n: i }));
    for (let i = 0; i < items.length; i += CHUNK) {
      await benchOperation.enqueueBulk(
        queue,
        items.slice(i, i + CHUNK).map((input) => ({ input, options: { jobOptions: JOB_OPTS } })),
      );
    }
    for (let i = 0; i < n; i++) {
      const proc = spawn(
        process.execPath,
        ['--import', 'tsx', fileURLToPath(new URL('./lib/worker-child.ts', import.meta.url))],
        {
          env: {
            ...process.env,
            DATABASE_URL: databaseUrl,
            REDIS_URL,
            BENCH_SCHEMA: ctx.schema,
            BENCH_QUEUE: queueName,
            // Split as evenly as whole numbers allow: 50 = 50, 25 + 25, 13 + 13 + 12 + 12.
            BENCH_CONCURRENCY: String(Math.floor(CONCURRENCY / n) + (i < CONCURRENCY % n ? 1 : 0)),
            BENCH_POOL: String(Math.max(1, Math.round(POOL_SIZE / n))),
            BENCH_KEY: BENCH_KEY.toString('hex'),
          },
          stdio: ['pipe', 'pipe', 'inherit'],
        },
      );
      children.push({ proc, lines: createInterface({ input: proc.stdout })[Symbol.asyncIterator]() });
    }
    for (const child of children) {
      const line = await nextLine(child, 'ready');
      if (line !== 'ready') throw new Error(`a worker process said ${line}`);
    }
    await ctx.admin.query('checkpoint').catch(() => {});
    const pids = await postgresPids(ctx.admin);
    const nodePids = new Set(children.map((c) => c.proc.pid!));
    const cpu0 = cpuSnapshot(pids, nodePids);
    const started = performance.now();
    for (const child of children) child.proc.stdin.write('go\n');
    let last = Date.now();
    let left = count;
    for (;;) {
      const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'failed');
      if (c.failed) throw new Error(`workers ${n}: ${c.failed} jobs failed`);
      const now = (c.waiting ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0);
      if (now === 0) break;
      if (now < left) last = Date.now();
      left = now;
      if (Date.now() - last > STALL_MS) throw new Error(`workers ${n}: no progress for ${STALL_MS} ms (${left} left)`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const seconds = (performance.now() - started) / 1000;
    for (const pid of await postgresPids(ctx.admin)) pids.add(pid);
    const split = cpuSplit(cpu0, cpuSnapshot(pids, nodePids));
    let effectsSeen = 0;
    for (const child of children) {
      child.proc.stdin.write('stop\n');
      effectsSeen += (JSON.parse(await nextLine(child, 'its count')) as { effects: number }).effects;
    }
    if (effectsSeen !== count)
      throw new Error(`workers ${n}: the side effect ran ${effectsSeen} times for ${count} jobs`);
    return { perSec: count / seconds, cpu: split && perThousand(split, count) };
  } finally {
    for (const child of children) if (child.proc.exitCode === null) child.proc.kill('SIGTERM');
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
  }
}

function reportWorkers(results: Map<number, WorkersMeasurement[]>): void {
  const rows = [...results].map(([n, ms]) => {
    const med = (f: (m: WorkersMeasurement) => number) => median(ms.map(f));
    const cpu = (f: (c: CpuSplit) => number) => (ms[0]?.cpu ? med((m) => f(m.cpu!)).toFixed(2) : '-');
    return [
      `${n} worker process${n > 1 ? 'es' : ''}`,
      ...ms.map((m) => String(Math.round(m.perSec))),
      String(Math.round(med((m) => m.perSec))),
      cpu((c) => c.node),
      cpu((c) => c.postgres),
      cpu((c) => c.redis),
      cpu((c) => c.node + c.postgres + c.redis),
      cpu((c) => c.other),
    ];
  });
  const rounds = [...(results.values().next().value ?? [])].map((_, r) => `round ${r + 1}`);
  console.log(
    `\nwithIdempotency fresh, worker processes on one queue (total concurrency ${CONCURRENCY}, ledger connections ${POOL_SIZE}); CPU s per 1000 jobs`,
  );
  table(['workers', ...rounds, 'median jobs/s', 'workers CPU', 'postgres', 'redis', 'w+pg+r', 'other'], rows);
}

function workersSummary(results: Map<number, WorkersMeasurement[]>): Record<string, unknown> {
  const perSec: Record<string, number> = {};
  const cpuMs: Record<string, number | null> = {};
  for (const [n, ms] of results) {
    perSec[n] = Math.round(median(ms.map((m) => m.perSec)));
    cpuMs[n] = ms[0]?.cpu ? round2(median(ms.map((m) => m.cpu!.node + m.cpu!.postgres + m.cpu!.redis))) : null;
  }
  return { workers_per_s: perSec, workers_cpu_ms_per_job: cpuMs };
}

/**
 * The connected @redis/client client Powertools' CachePersistenceLayer requires. Its connection
 * errors are written to stderr (unheard, they would end the process; a command they make fail
 * fails its job, and so the drain).
 */
const connectRedisClient = (url: string) =>
  createClient({ url })
    .on('error', (error: unknown) => console.error(`bench wrapper: Powertools' Redis client (${url}):`, String(error)))
    .connect();

function buildVariants(
  ledger: PostgresLedger,
  naivePool: pg.Pool,
  naiveTable: string,
  floorTable: string,
  freshFloorTable: string,
  guardedFreshFloorTable: string,
  runId: string,
) {
  const plainEnqueue = async (queue: Queue, items: JobData[]) => {
    await queue.addBulk(items.map((data) => ({ name: 'bench', data, opts: JOB_OPTS })));
  };
  const plainId = (job: Job) => (job.data as JobData).id;

  const operation = benchOperation;
  const library = (name: 'fresh' | 'replay'): Variant => ({
    name,
    unit: 'library',
    expect: name === 'fresh' ? 'all' : 'none',
    ...(name === 'fresh' ? { writes: [`${ledger.schema}.idempotency_ledger`] } : {}),
    // The producer helper: key made at enqueue. Each run uses a new queue, so the jobIds derived
    // from the key are new there, and the replay's jobs are not absorbed as duplicates.
    enqueue: async (queue, items) => {
      await operation.enqueueBulk(
        queue,
        items.map((input) => ({ input, options: { jobOptions: JOB_OPTS } })),
      );
    },
    processor: () =>
      withIdempotency(operation, async (input) => effect(input), {
        ledger,
        keyring: BENCH_KEYRING,
      }) as unknown as Processor,
    idOf: (job) => (job.data as { input?: JobData }).input?.id,
  });

  const sql = {
    claim: `insert into ${naiveTable} (key, status) values ($1, 'locked') on conflict (key) do nothing returning key`,
    read: `select status, result from ${naiveTable} where key = $1`,
    complete: `update ${naiveTable} set status = 'completed', result = $2, updated_at = now() where key = $1`,
  };

  // Powertools is built for Lambda: without a context it cannot expire in-progress records. A
  // worker's equivalent of the remaining time is its lock duration (BullMQ's default, 30 s).
  const lambdaContext = { getRemainingTimeInMillis: () => 30_000 };
  type PtClient = Awaited<ReturnType<typeof connectRedisClient>>;
  // Powertools' records: on the shared Redis, and on the bench's own durable Redis.
  const ptClients: { shared?: PtClient; durable?: PtClient } = {};
  const powertools = (
    name: 'powertools' | 'powertools_replay' | 'powertools_durable' | 'powertools_durable_replay',
  ): Variant => {
    const store = name === 'powertools' || name === 'powertools_replay' ? 'shared' : 'durable';
    return {
      name,
      unit: store === 'shared' ? 'powertools' : 'powertools_durable',
      expect: name === 'powertools' || name === 'powertools_durable' ? 'all' : 'none',
      enqueue: plainEnqueue,
      processor: (tag) => {
        const ptClient = ptClients[store];
        if (!ptClient) throw new Error(`the Powertools Redis client (${store}) is not connected`);
        const config = new IdempotencyConfig({ eventKeyJmesPath: 'id', expiresAfterSeconds: 3600 });
        config.registerLambdaContext(lambdaContext as Parameters<IdempotencyConfig['registerLambdaContext']>[0]);
        const idempotent = makeIdempotent(async (data: JobData) => effect(data), {
          persistenceStore: new CachePersistenceLayer({ client: ptClient }),
          config,
          keyPrefix: `${runId}:${store === 'shared' ? 'pt' : 'ptd'}:${tag}`,
        });
        return (job: Job) => idempotent(job.data as JobData);
      },
      idOf: plainId,
    };
  };

  // The least a Postgres-durable claim can cost: before the effect, the key inserted into a bare
  // two-column table; after it, one boolean set; both coalesced into multi-row statements by the
  // library's micro-batcher (so batched exactly as the ledger is), committed synchronously. No
  // fingerprint, lease, epoch, replay or result: a floor for the fresh path, not a ledger.
  const { claim: floorClaim, done: floorDone } = writeFloor(naivePool, floorTable);
  // The read floor: a replay's least, the key read back with nothing else (no fingerprint, no result).
  const floorRead = keyBatch(
    naivePool,
    'bench_floor_read',
    `select key from ${floorTable} where key = any($1::text[]) and done`,
  );

  // The fresh floor: the job's key inserted before the effect, its sealed result stored after it.
  const { claim: freshFloorClaim, done: freshFloorDone } = freshFloor(naivePool, freshFloorTable);
  // The replay floor: the stored result of the key the job carries, read with nothing else.
  const storedResult = batchedStatement<{ key: string }, unknown>(
    naivePool,
    'bench_replay_floor',
    `select key, result from ${ledger.schema}.idempotency_ledger where key = any($1::text[])`,
    (sorted) => [sorted.map((r) => r.key)],
    (row) => row.result,
  );
  // The guarded fresh floor: the fresh floor with the input's fingerprint stored with the key and
  // the completion fenced by the epoch the claim answered.
  const { claim: guardedClaim, done: guardedDone } = guardedFreshFloor(naivePool, guardedFreshFloorTable);
  // The guarded replay floor: the stored fingerprint read with the stored result, in one statement
  // per batch, compared with the input's, and the seal checked.
  const guardedReplayProcessor = guardedReplay(
    naivePool,
    `${ledger.schema}.idempotency_ledger`,
    operation as unknown as Operation,
    BENCH_KEYRING,
  );
  const variants: Record<VariantName, Variant> = {
    raw: {
      name: 'raw',
      unit: 'raw',
      expect: 'all',
      enqueue: plainEnqueue,
      processor: () => async (job: Job) => effect(job.data as JobData),
      idOf: plainId,
    },
    naive: {
      name: 'naive',
      unit: 'naive',
      expect: 'all',
      writes: [naiveTable],
      enqueue: plainEnqueue,
      processor: () => async (job: Job) => {
        const data = job.data as JobData;
        const claimed = await naivePool.query(sql.claim, [data.id]);
        if (claimed.rowCount === 0) {
          const row = (await naivePool.query<{ status: string; result: Result }>(sql.read, [data.id])).rows[0];
          if (row?.status === 'completed') return row.result;
          throw new Error(`naive: ${data.id} is in progress elsewhere`);
        }
        const result = effect(data);
        await naivePool.query(sql.complete, [data.id, JSON.stringify(result)]);
        return result;
      },
      idOf: plainId,
    },
    floor: {
      name: 'floor',
      unit: 'floor',
      expect: 'all',
      writes: [floorTable],
      enqueue: plainEnqueue,
      processor: (tag) => async (job: Job) => {
        const data = job.data as JobData;
        const key = `${tag}:${data.id}`;
        if (!(await floorClaim.submit({ key }))) throw new Error(`floor: ${key} was claimed twice`);
        const result = effect(data);
        if (!(await floorDone.submit({ key }))) throw new Error(`floor: ${key} lost its row`);
        return result;
      },
      idOf: plainId,
    },
    read_floor: {
      name: 'read_floor',
      unit: 'floor',
      expect: 'none',
      enqueue: plainEnqueue,
      processor: (tag) => async (job: Job) => {
        const data = job.data as JobData;
        const key = `${tag}:${data.id}`;
        if (!(await floorRead.submit({ key }))) throw new Error(`read floor: ${key} has no finished row`);
        return { ok: true, id: data.id } satisfies Result;
      },
      idOf: plainId,
    },
    fresh_floor: {
      ...library('fresh'),
      name: 'fresh_floor',
      unit: 'floor',
      writes: [freshFloorTable],
      processor: () => async (job: Job, _token?: string, _signal?: AbortSignal) => {
        const data = job.data as JobEnvelope;
        const key = boundedKey(data[ENVELOPE_FIELD].key);
        if (!(await freshFloorClaim.submit({ key }))) throw new Error(`fresh floor: ${key} was claimed twice`);
        const sealed = sealResult(effect(data.input as JobData), [], BENCH_KEYRING, { operation: job.name, key });
        if (!(await freshFloorDone.submit({ key, result: JSON.stringify(sealed) })))
          throw new Error(`fresh floor: ${key} lost its row`);
        return sealed;
      },
    },
    guarded_fresh_floor: {
      ...library('fresh'),
      name: 'guarded_fresh_floor',
      unit: 'floor',
      writes: [guardedFreshFloorTable],
      processor: () => async (job: Job, _token?: string, _signal?: AbortSignal) => {
        const data = job.data as JobEnvelope;
        const key = boundedKey(data[ENVELOPE_FIELD].key);
        const input = data.input as JobData;
        const fingerprint = operation.fingerprintOf(input, BENCH_KEYRING);
        const epoch = await guardedClaim.submit({ key, fingerprint });
        if (epoch !== 1) throw new Error(`guarded fresh floor: ${key} was claimed twice`);
        const sealed = sealResult(effect(input), [], BENCH_KEYRING, { operation: job.name, key });
        if (!(await guardedDone.submit({ key, epoch, result: JSON.stringify(sealed) })))
          throw new Error(`guarded fresh floor: ${key} lost its row or epoch ${epoch}`);
        return sealed;
      },
    },
    powertools: powertools('powertools'),
    powertools_replay: powertools('powertools_replay'),
    powertools_durable: powertools('powertools_durable'),
    powertools_durable_replay: powertools('powertools_durable_replay'),
    fresh: library('fresh'),
    replay: { ...library('replay'), keepSample: true },
    fresh_enqueued: { ...library('fresh'), name: 'fresh_enqueued', unit: 'intents', timedFill: true },
    fresh_durable: {
      ...library('fresh'),
      name: 'fresh_durable',
      unit: 'intents',
      timedFill: true,
      writes: [`${ledger.schema}.idempotency_ledger`, `${ledger.schema}.idempotency_intents`],
      // Recorded in Postgres first (one statement per chunk), then added; no grace, so the relay
      // after the drain sees every intent and deletes the claimed ones.
      enqueue: async (queue, items) => {
        const durable = { pool: ledger.pool, schema: ledger.schema, graceMs: 0 };
        await operation.enqueueBulk(
          queue,
          items.map((input) => ({ input, options: { jobOptions: JOB_OPTS, durable } })),
        );
      },
      afterDrain: async (queue) => {
        let claimed = 0;
        for (;;) {
          const c = await relayIntents({
            pool: ledger.pool,
            schema: ledger.schema,
            queue: () => queue,
            batchSize: 1000,
          });
          claimed += c.claimed;
          if (c.relayed + c.readded > 0)
            throw new Error(`fresh durable: the relay added ${c.relayed + c.readded} jobs`);
          if (c.claimed === 0) break;
        }
        const left = await ledger.pool.query<{ n: number }>(
          `select count(*)::int as n from ${ledger.schema}.idempotency_intents`,
        );
        if (left.rows[0]?.n !== 0)
          throw new Error(`fresh durable: ${left.rows[0]?.n} intents left after the relay (${claimed} deleted)`);
      },
    },
    replay_floor: {
      ...library('replay'),
      name: 'replay_floor',
      // Three parameters, as the wrapper declares: BullMQ makes the job's AbortSignal for it.
      processor: () => async (job: Job, _token?: string, _signal?: AbortSignal) => {
        const key = boundedKey((job.data as JobEnvelope)[ENVELOPE_FIELD].key);
        const result = await storedResult.submit({ key });
        if (result === undefined || result === null) throw new Error(`replay floor: ${key} has no result`);
        return result;
      },
    },
    guarded_replay_floor: {
      ...library('replay'),
      name: 'guarded_replay_floor',
      keepSample: true,
      // What a correct replay adds to the replay floor (bench/lib/floor-batch.ts, guardedReplay).
      processor: () => guardedReplayProcessor,
    },
  };
  return {
    variants,
    /** `durableUrl`: the bench's own Redis, when the durable pair runs. */
    connectPowertools: async (durableUrl: string | undefined) => {
      ptClients.shared = await connectRedisClient(REDIS_URL);
      if (durableUrl) ptClients.durable = await connectRedisClient(durableUrl);
    },
    closePowertools: async () => {
      await ptClients.shared?.close();
      await ptClients.durable?.close();
    },
  };
}

const LABELS: Record<VariantName, string> = {
  raw: 'raw BullMQ',
  naive: 'naive ledger',
  floor: 'write floor',
  read_floor: 'read floor',
  fresh_floor: 'fresh floor',
  guarded_fresh_floor: 'guarded fresh floor',
  powertools: 'Powertools (Redis)',
  powertools_replay: 'Powertools replay',
  powertools_durable: 'Powertools (durable Redis)',
  powertools_durable_replay: 'Powertools durable replay',
  fresh: 'withIdempotency fresh',
  replay: 'withIdempotency replay',
  replay_floor: 'replay floor',
  guarded_replay_floor: 'guarded replay floor',
  fresh_enqueued: 'fresh, fill timed',
  fresh_durable: 'fresh durable, fill timed',
};

type Results = Map<VariantName, Measurement[]>;

/** Per-round ratio a/b, or undefined when either side did not run that round. */
function ratios(results: Results, a: VariantName, b: VariantName): number[] {
  const perSec = (v: VariantName) => (results.get(v) ?? []).map((m) => m.perSec);
  return perRoundRatios(perSec(a), perSec(b));
}

function report(results: Results): void {
  const present = VARIANTS.filter((v) => results.has(v));
  const rounds = Array.from({ length: ROUNDS }, (_, r) => `round ${r + 1}`);
  const rows: string[][] = [];
  for (const v of present) {
    const series = results.get(v)!.map((m) => m.perSec);
    rows.push([`${LABELS[v]} jobs/s`, ...series.map((x) => String(Math.round(x))), String(Math.round(median(series)))]);
  }
  const ratioRow = (label: string, a: VariantName, b: VariantName) => {
    const rs = ratios(results, a, b);
    if (rs.length) rows.push([label, ...rs.map((x) => `${x.toFixed(2)}x`), `${median(rs).toFixed(2)}x`]);
  };
  for (const v of present) if (v !== 'raw') ratioRow(`${v} / raw`, v, 'raw');
  ratioRow('fresh / powertools', 'fresh', 'powertools');
  ratioRow('fresh / floor', 'fresh', 'floor');
  ratioRow('fresh / fresh floor', 'fresh', 'fresh_floor');
  ratioRow('fresh / guarded fresh floor', 'fresh', 'guarded_fresh_floor');
  ratioRow('guarded fresh floor / floor', 'guarded_fresh_floor', 'floor');
  ratioRow('replay / read floor', 'replay', 'read_floor');
  ratioRow('replay / replay floor', 'replay', 'replay_floor');
  ratioRow('replay / guarded replay floor', 'replay', 'guarded_replay_floor');
  ratioRow('guarded replay floor / replay floor', 'guarded_replay_floor', 'replay_floor');
  ratioRow('replay / powertools_replay', 'replay', 'powertools_replay');
  ratioRow('fresh / powertools_durable', 'fresh', 'powertools_durable');
  ratioRow('replay / powertools_durable_replay', 'replay', 'powertools_durable_replay');
  ratioRow('floor / powertools_durable', 'floor', 'powertools_durable');
  ratioRow('guarded fresh floor / powertools_durable', 'guarded_fresh_floor', 'powertools_durable');
  ratioRow('guarded replay floor / powertools_durable_replay', 'guarded_replay_floor', 'powertools_durable_replay');
  ratioRow('fresh durable / fresh (fill timed)', 'fresh_durable', 'fresh_enqueued');
  console.log(
    `\nThroughput: ${JOBS} jobs per drain, concurrency ${CONCURRENCY} (ratio median = median of per-round ratios)`,
  );
  table(['variant', ...rounds, 'median'], rows);

  const cost: string[][] = present.map((v) => {
    const ms = results.get(v)!;
    const med = (f: (m: Measurement) => number) => median(ms.map(f));
    const cpu = (k: 'node' | 'nodeSys' | 'postgres' | 'redis' | 'other' | 'idle') =>
      ms[0]?.cpu ? med((m) => m.cpu![k]).toFixed(2) : '-';
    const ours = ms[0]?.cpu ? med((m) => m.cpu!.node + m.cpu!.postgres + m.cpu!.redis).toFixed(2) : '-';
    const vacuum = ms[0]?.vacuumCpu === undefined ? '-' : med((m) => m.vacuumCpu ?? 0).toFixed(3);
    return [
      LABELS[v],
      Math.max(...ms.map((m) => m.peakRssMb)).toFixed(0),
      med((m) => m.pgPerJob).toFixed(2),
      med((m) => m.walBytesPerJob).toFixed(0),
      med((m) => m.redisPerJob).toFixed(1),
      cpu('node'),
      cpu('nodeSys'),
      med((m) => m.gcPerJobUs / 1000).toFixed(2),
      cpu('postgres'),
      cpu('redis'),
      ours,
      vacuum,
      cpu('other'),
      cpu('idle'),
    ];
  });
  console.log(
    '\nCost per job (medians; peak RSS: max over rounds; CPU: seconds per 1000 jobs, from /proc; (sys): kernel' +
      ' part of node; (gc): node GC time; vacuum: Postgres CPU of the VACUUM of what the drain wrote, run right' +
      ' after it, not in n+pg+r; other: any other process, irq and softirq time)',
  );
  table(
    [
      'variant',
      'peak RSS MB',
      'pg stmts/job',
      'WAL B/job',
      'redis cmds/job',
      'node',
      '(sys)',
      '(gc)',
      'postgres',
      'redis',
      'n+pg+r',
      'vacuum',
      'other',
      'idle',
    ],
    cost,
  );
}

/** WAL bytes and CPU (n+pg+r, s per 1000 jobs) per job of the two fill-timed variants, medians. */
function intentsCost(results: Results): Record<string, { wal_b_per_job: number; cpu_s_per_1000: number | null }> {
  const out: Record<string, { wal_b_per_job: number; cpu_s_per_1000: number | null }> = {};
  for (const v of ['fresh_enqueued', 'fresh_durable'] as const) {
    const ms = results.get(v);
    if (!ms) continue;
    out[v] = {
      wal_b_per_job: Math.round(median(ms.map((m) => m.walBytesPerJob))),
      cpu_s_per_1000: ms[0]?.cpu ? round2(median(ms.map((m) => m.cpu!.node + m.cpu!.postgres + m.cpu!.redis))) : null,
    };
  }
  return out;
}

function summary(results: Results): Record<string, unknown> {
  const perSec = (v: VariantName) => {
    const ms = results.get(v);
    return ms ? Math.round(median(ms.map((m) => m.perSec))) : null;
  };
  const ratio = (a: VariantName, b: VariantName) => {
    const rs = ratios(results, a, b);
    return rs.length ? round2(median(rs)) : null;
  };
  const peak: Record<string, number> = {};
  for (const [v, ms] of results) peak[v] = Math.round(Math.max(...ms.map((m) => m.peakRssMb)));
  const vacuum: Record<string, number> = {};
  for (const [v, ms] of results) {
    if (ms[0]?.vacuumCpu !== undefined) vacuum[v] = Math.round(median(ms.map((m) => m.vacuumCpu ?? 0)) * 1000) / 1000;
  }
  return {
    raw_per_s: perSec('raw'),
    naive_per_s: perSec('naive'),
    powertools_per_s: perSec('powertools'),
    fresh_per_s: perSec('fresh'),
    replay_per_s: perSec('replay'),
    fresh_vs_raw: ratio('fresh', 'raw'),
    replay_vs_raw: ratio('replay', 'raw'),
    fresh_vs_powertools: ratio('fresh', 'powertools'),
    powertools_durable_per_s: perSec('powertools_durable'),
    powertools_durable_replay_per_s: perSec('powertools_durable_replay'),
    fresh_vs_powertools_durable: ratio('fresh', 'powertools_durable'),
    replay_vs_powertools_durable_replay: ratio('replay', 'powertools_durable_replay'),
    floor_vs_powertools_durable: ratio('floor', 'powertools_durable'),
    guarded_fresh_floor_vs_powertools_durable: ratio('guarded_fresh_floor', 'powertools_durable'),
    guarded_replay_floor_vs_powertools_durable_replay: ratio('guarded_replay_floor', 'powertools_durable_replay'),
    floor_per_s: perSec('floor'),
    fresh_vs_floor: ratio('fresh', 'floor'),
    fresh_floor_per_s: perSec('fresh_floor'),
    fresh_floor_vs_floor: ratio('fresh_floor', 'floor'),
    fresh_vs_fresh_floor: ratio('fresh', 'fresh_floor'),
    guarded_fresh_floor_per_s: perSec('guarded_fresh_floor'),
    guarded_fresh_floor_vs_floor: ratio('guarded_fresh_floor', 'floor'),
    fresh_vs_guarded_fresh_floor: ratio('fresh', 'guarded_fresh_floor'),
    read_floor_per_s: perSec('read_floor'),
    read_floor_vs_raw: ratio('read_floor', 'raw'),
    replay_vs_read_floor: ratio('replay', 'read_floor'),
    replay_floor_per_s: perSec('replay_floor'),
    replay_floor_vs_raw: ratio('replay_floor', 'raw'),
    replay_vs_replay_floor: ratio('replay', 'replay_floor'),
    guarded_replay_floor_per_s: perSec('guarded_replay_floor'),
    guarded_replay_floor_vs_replay_floor: ratio('guarded_replay_floor', 'replay_floor'),
    replay_vs_guarded_replay_floor: ratio('replay', 'guarded_replay_floor'),
    fresh_enqueued_per_s: perSec('fresh_enqueued'),
    fresh_durable_per_s: perSec('fresh_durable'),
    fresh_durable_vs_enqueued: ratio('fresh_durable', 'fresh_enqueued'),
    intents_cost: intentsCost(results),
    peak_rss_mb: peak,
    vacuum_cpu_ms_per_job: vacuum,
  };
}

async function main(): Promise<void> {
  const runId = randomBytes(4).toString('hex');
  const schema = `bench_wrapper_${runId}`;
  const only = (process.env.BENCH_ONLY ?? 'raw,naive,floor,powertools,library,intents').split(',').map((s) => s.trim());
  // `powertools` names both Powertools units: on the shared Redis and on the bench's own durable one.
  let units = (
    ['raw', 'naive', 'floor', 'powertools', 'powertools_durable', 'library', 'intents'] as const satisfies UnitName[]
  ).filter((u) => only.includes(u) || (u === 'powertools_durable' && only.includes('powertools')));
  if (units.length === 0) throw new Error(`BENCH_ONLY names no unit: ${process.env.BENCH_ONLY}`);
  const backends = queueBackends();

  // Every connection of this run carries the run's application_name (see postgresPids).
  const url = new URL(DATABASE_URL);
  url.searchParams.set('application_name', schema);
  const databaseUrl = url.toString();
  const admin = new pg.Client({ connectionString: databaseUrl });
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  let ledger: PostgresLedger | undefined;
  let naivePool: pg.Pool | undefined;
  let closePowertools: (() => Promise<void>) | undefined;
  let ownRedis: PrivateRedis | undefined;
  let ownRedisClient: Redis | undefined;
  let failed = false;
  try {
    if (backends.includes('redis') && units.includes('powertools_durable')) {
      try {
        ownRedis = await startPrivateRedis(process.env.BENCH_REDIS_SERVER || 'redis-server');
        ownRedisClient = new Redis(ownRedis.url, { maxRetriesPerRequest: null });
        console.error(
          `bench wrapper: own Redis for powertools_durable at ${ownRedis.url} (pid ${ownRedis.pid}, appendfsync always, dir ${ownRedis.dir})`,
        );
      } catch (error) {
        units = units.filter((u) => u !== 'powertools_durable');
        console.error(
          error instanceof RedisServerMissing
            ? `bench wrapper: powertools_durable skipped: ${error.message}`
            : `bench wrapper: powertools_durable skipped: could not start its Redis: ${String(error)}`,
        );
      }
    }
    await admin.connect();
    await migrate({ connectionString: databaseUrl, schema });
    const naiveTable = `${schema}.naive_ledger`;
    await admin.query(`create table ${naiveTable} (key text primary key, status text not null, result jsonb,
      created_at timestamptz not null default now(), updated_at timestamptz not null default now())`);
    const floorTable = `${schema}.floor_ledger`;
    await admin.query(`create table ${floorTable} (key text primary key, done boolean not null default false)`);
    ledger = new PostgresLedger({ connectionString: databaseUrl, schema, poolSize: POOL_SIZE });
    naivePool = new pg.Pool({ connectionString: databaseUrl, max: POOL_SIZE });
    countStatements(ledger.pool);
    countStatements(naivePool);
    const freshFloorTable = `${schema}.fresh_floor_ledger`;
    await admin.query(`create table ${freshFloorTable} (key text primary key, result jsonb)`);
    const guardedFreshFloorTable = `${schema}.guarded_fresh_floor_ledger`;
    await admin.query(`create table ${guardedFreshFloorTable} (key text primary key, fingerprint bytea not null,
      epoch int not null, result jsonb)`);
    const built = buildVariants(
      ledger,
      naivePool,
      naiveTable,
      floorTable,
      freshFloorTable,
      guardedFreshFloorTable,
      runId,
    );
    closePowertools = built.closePowertools;
    await built.connectPowertools(ownRedis?.url);
    const adminPid = (await admin.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    const ctx: Context = {
      runId,
      schema,
      admin,
      adminPid,
      variants: built.variants,
      redis,
      redisServers: ownRedisClient ? [redis, ownRedisClient] : [redis],
      redisPids: new Set(ownRedis ? [ownRedis.pid] : []),
    };

    console.error(
      `bench wrapper: run ${runId}, ${JOBS} jobs x ${ROUNDS} rounds, concurrency ${CONCURRENCY}, pg pools ${POOL_SIZE}, units ${units.join(',')}, ${sourceVersion()}`,
    );
    const results: Results = new Map();
    let workers = new Map<number, WorkersMeasurement[]>();
    if (backends.includes('redis')) {
      for (const unit of units) await runUnit(ctx, unit, 'w', WARMUP_JOBS);

      for (let round = 0; round < ROUNDS; round++) {
        // Rotate the order each round, so no variant always runs first (or last) in a round.
        for (const unit of rotated(units, round)) {
          const measured = await runUnit(ctx, unit, `r${round + 1}`, JOBS);
          for (const [name, m] of measured) {
            const series = results.get(name) ?? [];
            series[round] = m;
            results.set(name, series);
            const others = m.cpu?.others.map(([comm, sec]) => `${comm} ${sec.toFixed(2)}`).join(', ');
            console.error(
              `  round ${round + 1} ${name.padEnd(25)} ${String(Math.round(m.perSec)).padStart(6)} jobs/s, peak RSS ${m.peakRssMb.toFixed(0)} MB` +
                (m.cpu ? `; other CPU s/1000 jobs: irq ${m.cpu.irq.toFixed(2)}, ${others || '-'}` : ''),
            );
          }
        }
      }
      report(results);
      if (WORKER_COUNTS.length) {
        console.error(`bench wrapper: worker processes ${WORKER_COUNTS.join(', ')} on one queue`);
        for (const n of WORKER_COUNTS) await runWorkers(ctx, databaseUrl, n, 'w', WARMUP_JOBS);
        workers = await alternatingRounds<number, WorkersMeasurement>(WORKER_COUNTS, ROUNDS, async (n, round) => {
          const m = await runWorkers(ctx, databaseUrl, n, `r${round + 1}`, JOBS);
          console.error(`  round ${round + 1} ${n} worker process(es) ${Math.round(m.perSec)} jobs/s`);
          return m;
        });
        reportWorkers(workers);
      }
    }
    let pair: Record<string, number> = {};
    if (backends.includes('postgres')) {
      console.error(
        `bench wrapper: BullMQ's PostgreSQL backend, raw vs withIdempotency, ${PG_JOBS} jobs x ${ROUNDS} rounds`,
      );
      const measured = await runPostgresPair({
        databaseUrl,
        ledger,
        keyring: BENCH_KEYRING,
        floorPool: naivePool,
        statements: () => pgStatements,
        jobs: PG_JOBS,
        rounds: ROUNDS,
        concurrency: CONCURRENCY,
        only: pairVariants(process.env.BENCH_PG_ONLY),
        log: (line) => console.error(line),
      });
      const reported = reportPostgresPair(measured);
      pair = reported.json;
    }
    jsonLine('wrapper', {
      ...(results.size ? summary(results) : {}),
      ...(workers.size ? workersSummary(workers) : {}),
      ...pair,
    });
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    // Each step runs even when an earlier one fails: the schema and the keys must go whatever happened.
    const steps: [string, () => Promise<unknown> | undefined][] = [
      ['close the Powertools client', () => closePowertools?.()],
      ['delete the Powertools records', () => deleteKeys(redis, `${runId}:pt:*`)],
      ['delete leftover queue keys', () => deleteKeys(redis, `bull:bench-wrapper-${runId}-*`)],
      ['close the ledger', () => ledger?.close()],
      ['end the naive pool', () => naivePool?.end()],
      [`drop schema ${schema}`, () => admin.query(`drop schema if exists ${schema} cascade`)],
      ['end the admin connection', () => admin.end()],
      ['close the Redis connection', () => redis.quit()],
      ['close the connection to its own Redis', () => ownRedisClient?.quit()],
      ['stop its own Redis and remove its directory', () => ownRedis?.stop()],
    ];
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (error) {
        console.error(`bench wrapper: could not ${what}:`, error);
        if (!failed) process.exitCode = 1;
      }
    }
  }
}

/**
 * Short hash and newest modification time of the library source the run measured (src/ changes
 * while others work on it; this ties printed figures to one version of it).
 */
function sourceVersion(): string {
  const root = new URL('../src/', import.meta.url);
  const files = (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts')).sort();
  const hash = createHash('sha256');
  let newest = 0;
  for (const f of files) {
    const file = new URL(f, root);
    hash.update(f).update(readFileSync(file));
    newest = Math.max(newest, statSync(file).mtimeMs);
  }
  return `src ${hash.digest('hex').slice(0, 12)} (newest file ${new Date(newest).toISOString()})`;
}

async function deleteKeys(redis: Redis, pattern: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.unlink(...keys);
  } while (cursor !== '0');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
