/**
 * The pair on BullMQ's PostgreSQL backend (`createPostgresBackend`, the queues in Postgres): raw
 * BullMQ (a no-op processor) against `withIdempotency`, fresh (every key new) and replay (the
 * same operations again as new jobs, served from the ledger), in the sitting of bench/wrapper.ts,
 * with the two floors of the fresh path on the same backend:
 * - write floor: raw BullMQ whose processor does the least any Postgres-durable claim does, on the
 *   same Postgres: the key inserted into a bare two-column table before the effect and a flag set
 *   after it, both through the library's micro-batcher (bench/lib/floor-batch.ts), committed
 *   synchronously on a pool of the ledger's size. `fresh / write floor` says how close the ledger's
 *   fresh path comes to any durable claim, and `write floor / raw` how close to raw BullMQ any
 *   design with a durable claim and completion per job can come on this backend;
 * - fresh floor: the write floor with what the design carries: the library's own jobs (key in the
 *   job), a processor taking BullMQ's signal, the result sealed as the wrapper seals it and stored.
 * Same method as the Redis pair: each run fills a fresh queue completely, then starts the worker;
 * the clock runs from the worker's start until it has emitted 'completed' for every job. The
 * variants alternate in an order rotated every round; ratios are taken within a round. Each run
 * checks that the side effect ran once per job (none on a replay). CPU per job: this process
 * (BullMQ, the ledger, the floors) and this run's Postgres sessions with the server's auxiliary
 * processes, from /proc; statements per job: those the ledger's or the floors' pool was asked to
 * run (BullMQ's not counted); WAL per job: server-wide.
 */
import { randomBytes } from 'node:crypto';
import type { Job, Processor, Queue } from 'bullmq';
import pg from 'pg';
import { boundedKey } from '../../src/keys/idempotency-key.js';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import { ENVELOPE_FIELD, type JobEnvelope } from '../../src/operation/envelope.js';
import type { Keyring } from '../../src/sealing/keyring.js';
import { sealResult } from '../../src/sealing/sealed-result.js';
import { openQueue, openWorker, postgresQueueConnection } from '../../src/shared/queue-backend.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { startProfile, stopProfile } from './cpu-profile.js';
import { freshFloor, writeFloor } from './floor-batch.js';
import { walPosition, walSince } from './pg-wal.js';
import { type CpuSplit, cpuSnapshot, cpuSplit, perThousand } from './proc-cpu.js';
import { rotated } from './rounds.js';
import { median, perRoundRatios } from './stats.js';
import { printTable } from './table.js';
import { benchOperation } from './wrapper-operation.js';

type Data = { id: string; n: number };
export const PAIR_VARIANTS = ['raw', 'floor', 'fresh_floor', 'fresh', 'replay'] as const;
type PairVariant = (typeof PAIR_VARIANTS)[number];
const JOB_OPTS = { removeOnComplete: true, removeOnFail: true } as const;
const CHUNK = 1000;
const LABELS: Record<PairVariant, string> = {
  raw: 'raw BullMQ',
  floor: 'write floor',
  fresh_floor: 'fresh floor',
  fresh: 'withIdempotency fresh',
  replay: 'withIdempotency replay',
};

export type PostgresPairOptions = {
  databaseUrl: string;
  ledger: PostgresLedger;
  keyring: Keyring;
  /** The floors' pool (the ledger's size); its statements and the ledger's are counted by `statements`. */
  floorPool: pg.Pool;
  /** Statements the ledger's and the floors' pools were asked to run so far. */
  statements: () => number;
  jobs: number;
  rounds: number;
  concurrency: number;
  /** The variants to run (default all); `raw` always runs, ratios are taken against it. */
  only?: readonly PairVariant[];
  log: (line: string) => void;
};

type RunMeasurement = {
  perSec: number;
  cpu: CpuSplit | undefined;
  stmtsPerJob: number;
  /** Every statement this process sent (BullMQ's included), per job. */
  allStmtsPerJob: number;
  walPerJob: number;
};

/** Statements any `pg` client of this process was asked to run (BullMQ's, the ledger's, the floors'). */
let allStatements = 0;
function countAllStatements(): void {
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; counted?: boolean };
  if (proto.counted) return;
  const original = proto.query;
  proto.query = function (this: unknown, ...args: unknown[]) {
    allStatements++;
    return original.apply(this, args);
  };
  proto.counted = true;
}

export type PostgresPairResult = {
  jobs: number;
  rounds: number;
  runs: Partial<Record<PairVariant, RunMeasurement[]>>;
};

/** Which variants BENCH_PG_ONLY (a comma list of raw,floor,fresh_floor,fresh,replay) names; replay needs fresh. */
export function pairVariants(text: string | undefined): PairVariant[] {
  if (!text) return [...PAIR_VARIANTS];
  const names = text.split(',').map((n) => n.trim());
  const bad = names.filter((n) => !(PAIR_VARIANTS as readonly string[]).includes(n));
  if (bad.length) throw new Error(`BENCH_PG_ONLY takes ${PAIR_VARIANTS.join(',')}, not ${bad.join(',')}`);
  const set = new Set<string>(['raw', ...names]);
  if (set.has('replay')) set.add('fresh');
  return PAIR_VARIANTS.filter((v) => set.has(v));
}

/** Runs the pair; BullMQ's tables live in a schema of their own, dropped at the end. */
export async function runPostgresPair(o: PostgresPairOptions): Promise<PostgresPairResult> {
  const prefix = `bench_pgq_${randomBytes(4).toString('hex')}`;
  const connection = postgresQueueConnection(o.databaseUrl, prefix, { max: 10 });
  const variants = o.only ?? PAIR_VARIANTS;
  countAllStatements();
  const admin = new pg.Client({ connectionString: o.databaseUrl });
  await admin.connect();
  const floorTable = `${o.ledger.schema}.pg_floor_ledger`;
  const freshFloorTable = `${o.ledger.schema}.pg_fresh_floor_ledger`;
  await admin.query(`create table ${floorTable} (key text primary key, done boolean not null default false)`);
  await admin.query(`create table ${freshFloorTable} (key text primary key, result jsonb)`);
  // Statement names of their own: the floors of the Redis side share the pool, with other tables.
  const floor = writeFloor(o.floorPool, floorTable, 'bench_pg_floor');
  const fresh = freshFloor(o.floorPool, freshFloorTable, 'bench_pg_fresh_floor');
  const writes: Partial<Record<PairVariant, string>> = {
    floor: floorTable,
    fresh_floor: freshFloorTable,
    fresh: `${o.ledger.schema}.idempotency_ledger`,
  };

  let effects = 0;
  const wrapped = () =>
    withIdempotency(
      benchOperation,
      async (input) => {
        effects++;
        return { ok: true, id: input.id };
      },
      { ledger: o.ledger, keyring: o.keyring },
    ) as unknown as Processor;
  const processors: Record<PairVariant, (tag: string) => Processor> = {
    raw: () => async (job: Job) => {
      effects++;
      return { ok: true, id: (job.data as Data).id };
    },
    floor: (tag) => async (job: Job) => {
      const data = job.data as Data;
      const key = `${tag}:${data.id}`;
      if (!(await floor.claim.submit({ key }))) throw new Error(`floor: ${key} was claimed twice`);
      effects++;
      const result = { ok: true, id: data.id };
      if (!(await floor.done.submit({ key }))) throw new Error(`floor: ${key} lost its row`);
      return result;
    },
    fresh_floor: () => async (job: Job, _token?: string, _signal?: AbortSignal) => {
      const data = job.data as JobEnvelope;
      const key = boundedKey(data[ENVELOPE_FIELD].key);
      if (!(await fresh.claim.submit({ key }))) throw new Error(`fresh floor: ${key} was claimed twice`);
      effects++;
      const value = { ok: true, id: (data.input as Data).id };
      const sealed = sealResult(value, [], o.keyring, { operation: job.name, key });
      if (!(await fresh.done.submit({ key, result: JSON.stringify(sealed) })))
        throw new Error(`fresh floor: ${key} lost its row`);
      return sealed;
    },
    fresh: wrapped,
    replay: wrapped,
  };

  async function fill(queue: Queue, variant: PairVariant, items: Data[]) {
    for (let i = 0; i < items.length; i += CHUNK) {
      const chunk = items.slice(i, i + CHUNK);
      if (variant === 'raw' || variant === 'floor')
        await queue.addBulk(chunk.map((data) => ({ name: 'bench', data, opts: JOB_OPTS })));
      else
        await benchOperation.enqueueBulk(
          queue,
          chunk.map((input) => ({ input, options: { jobOptions: JOB_OPTS } })),
        );
    }
  }

  /** This run's Postgres processes: its sessions (by application_name) and the server's own. */
  async function postgresPids(): Promise<Set<number>> {
    const res = await admin.query<{ pid: number }>(
      `select pid from pg_stat_activity where application_name = current_setting('application_name')
         or backend_type <> 'client backend'`,
    );
    return new Set(res.rows.map((r) => r.pid));
  }

  async function run(variant: PairVariant, tag: string, items: Data[]): Promise<RunMeasurement> {
    const queue = openQueue(`pair-${variant}-${tag}`, { connection, defaultJobOptions: JOB_OPTS });
    await fill(queue, variant, items);
    effects = 0;
    const worker = openWorker(queue.name, processors[variant](tag), {
      connection,
      concurrency: o.concurrency,
      autorun: false,
    });
    let completed = 0;
    let failed = 0;
    let firstError: unknown;
    const done = new Promise<void>((resolve) => {
      const check = () => {
        if (completed + failed >= items.length) resolve();
      };
      worker.on('completed', () => {
        completed++;
        check();
      });
      worker.on('failed', (_job, err) => {
        failed++;
        firstError ??= err;
        check();
      });
    });
    worker.on('error', () => {});
    await worker.waitUntilReady();
    await admin.query('checkpoint').catch(() => {});
    const pids = await postgresPids();
    const wal0 = await walPosition(admin);
    const statements0 = o.statements();
    const all0 = allStatements;
    const cpu0 = cpuSnapshot(pids);
    const profile = await startProfile();
    const started = performance.now();
    void worker.run();
    await done;
    const seconds = (performance.now() - started) / 1000;
    await stopProfile(profile, `pg-${variant}-${tag}`);
    for (const pid of await postgresPids()) pids.add(pid);
    const split = cpuSplit(cpu0, cpuSnapshot(pids));
    const stmtsPerJob = (o.statements() - statements0) / items.length;
    const allStmtsPerJob = (allStatements - all0) / items.length;
    const walPerJob = (await walSince(admin, wal0)) / items.length;
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    // What the drain left dead is vacuumed now, not by an autovacuum during another variant's drain.
    const written = writes[variant];
    if (written) await admin.query(`vacuum ${written}`);
    const expected = variant === 'replay' ? 0 : items.length;
    if (failed > 0 || effects !== expected) {
      throw new Error(
        `pg pair ${variant} ${tag}: ${failed} failed (first: ${String(firstError)}), side effect ran ${effects}× (expected ${expected})`,
      );
    }
    return {
      perSec: items.length / seconds,
      cpu: split && perThousand(split, items.length),
      stmtsPerJob,
      allStmtsPerJob,
      walPerJob,
    };
  }

  const runs: PostgresPairResult['runs'] = {};
  // Each group runs together: the replay follows its fresh run (it replays those keys).
  const groups: PairVariant[][] = [['raw'], ['floor'], ['fresh_floor'], ['fresh', 'replay']]
    .map((g) => g.filter((v) => variants.includes(v as PairVariant)) as PairVariant[])
    .filter((g) => g.length > 0);
  try {
    // Warm-up: connections, BullMQ's migrations, prepared statements, JIT; not measured.
    const warm = Array.from({ length: 300 }, (_, n) => ({ id: `${prefix}-w-${n}`, n }));
    for (const group of groups) for (const v of group) await run(v, 'w', warm);
    for (let round = 0; round < o.rounds; round++) {
      const items = Array.from({ length: o.jobs }, (_, n) => ({ id: `${prefix}-r${round}-${n}`, n }));
      for (const group of rotated(groups, round)) {
        for (const v of group) {
          const m = await run(v, `r${round + 1}`, items);
          const series = runs[v] ?? [];
          series[round] = m;
          runs[v] = series;
          const cpu = m.cpu ? `, CPU s/1000 jobs node ${m.cpu.node.toFixed(2)} pg ${m.cpu.postgres.toFixed(2)}` : '';
          o.log(`  round ${round + 1} pg-backend ${v.padEnd(11)} ${Math.round(m.perSec)} jobs/s${cpu}`);
        }
      }
    }
  } finally {
    await admin.query(`drop schema if exists ${prefix} cascade`).catch(() => {});
    await admin.query(`drop table if exists ${floorTable}, ${freshFloorTable}`).catch(() => {});
    await admin.end();
  }
  return { jobs: o.jobs, rounds: o.rounds, runs };
}

/** The pair's tables for the report, and its JSON fields (ratios: medians of per-round ratios). */
export function reportPostgresPair(r: PostgresPairResult): { json: Record<string, number> } {
  const present = PAIR_VARIANTS.filter((v) => r.runs[v]?.length);
  const perSec = (v: PairVariant) => (r.runs[v] ?? []).map((m) => m.perSec);
  const rounds = Array.from({ length: r.rounds }, (_, i) => `round ${i + 1}`);
  const rows: string[][] = present.map((v) => [
    `${LABELS[v]} jobs/s`,
    ...perSec(v).map((x) => String(Math.round(x))),
    String(Math.round(median(perSec(v)))),
  ]);
  const ratioRows: [string, PairVariant, PairVariant][] = [
    ['write floor / raw', 'floor', 'raw'],
    ['fresh floor / raw', 'fresh_floor', 'raw'],
    ['fresh / raw', 'fresh', 'raw'],
    ['replay / raw', 'replay', 'raw'],
    ['fresh / write floor', 'fresh', 'floor'],
    ['fresh / fresh floor', 'fresh', 'fresh_floor'],
  ];
  const json: Record<string, number> = {};
  for (const v of present) json[`pg_${v}_per_s`] = Math.round(median(perSec(v)));
  for (const [label, a, b] of ratioRows) {
    const rs = perRoundRatios(perSec(a), perSec(b));
    if (!rs.length) continue;
    rows.push([label, ...rs.map((x) => `${x.toFixed(2)}x`), `${median(rs).toFixed(2)}x`]);
    json[`pg_${a}_vs_${b}`] = Number(median(rs).toFixed(3));
  }
  console.log(
    `\nBullMQ's PostgreSQL backend: ${r.jobs} jobs per drain (ratio median = median of per-round ratios, taken within each round)`,
  );
  printTable(['variant', ...rounds, 'median'], rows);
  const cost = present.map((v) => {
    const ms = r.runs[v] ?? [];
    const med = (f: (m: RunMeasurement) => number) => median(ms.map(f));
    const cpu = (f: (c: CpuSplit) => number) => (ms[0]?.cpu ? med((m) => f(m.cpu!)).toFixed(2) : '-');
    if (ms[0]?.cpu) json[`pg_${v}_cpu_s_per_1000`] = Number(med((m) => m.cpu!.node + m.cpu!.postgres).toFixed(2));
    return [
      LABELS[v],
      med((m) => m.stmtsPerJob).toFixed(2),
      med((m) => m.allStmtsPerJob).toFixed(2),
      med((m) => m.walPerJob).toFixed(0),
      cpu((c) => c.node),
      cpu((c) => c.postgres),
      cpu((c) => c.node + c.postgres),
      cpu((c) => c.other),
    ];
  });
  console.log(
    '\nCost per job on the PostgreSQL backend (medians; CPU: seconds per 1000 jobs, from /proc; stmts: the ledger' +
      "'s or the floors' statements; all stmts: with BullMQ's; WAL: server-wide; other: any other process)",
  );
  printTable(['variant', 'stmts/job', 'all stmts/job', 'WAL B/job', 'node', 'postgres', 'node+pg', 'other'], cost);
  return { json };
}
