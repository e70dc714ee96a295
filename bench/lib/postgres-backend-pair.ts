/**
 * The pair on BullMQ's PostgreSQL backend (`createPostgresBackend`, the queues in Postgres): raw
 * BullMQ (a no-op processor) against `withIdempotency`, fresh (every key new) and replay (the
 * same operations again as new jobs, served from the ledger), in the sitting of bench/wrapper.ts.
 * Same method as the Redis pair: each run fills a fresh queue completely, then starts the worker;
 * the clock runs from the worker's start until it has emitted 'completed' for every job. The
 * variants alternate in an order rotated every round; ratios are taken within a round. Each run
 * checks that the side effect ran once per job (none on a replay).
 */
import { randomBytes } from 'node:crypto';
import type { Job, Processor, Queue } from 'bullmq';
import pg from 'pg';
import type { PostgresLedger } from '../../src/ledger/postgres-ledger.js';
import type { Keyring } from '../../src/sealing/keyring.js';
import { openQueue, openWorker, postgresQueueConnection } from '../../src/shared/queue-backend.js';
import { withIdempotency } from '../../src/worker/with-idempotency.js';
import { benchOperation } from './wrapper-operation.js';

type Data = { id: string; n: number };
type PairVariant = 'raw' | 'fresh' | 'replay';
const JOB_OPTS = { removeOnComplete: true, removeOnFail: true } as const;
const CHUNK = 1000;

export type PostgresPairOptions = {
  databaseUrl: string;
  ledger: PostgresLedger;
  keyring: Keyring;
  jobs: number;
  rounds: number;
  concurrency: number;
  log: (line: string) => void;
};

export type PostgresPairResult = {
  jobs: number;
  perSec: Record<PairVariant, number[]>;
  freshVsRaw: number[];
  replayVsRaw: number[];
};

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] as number) : ((s[m - 1] as number) + (s[m] as number)) / 2;
};

/** Runs the pair; BullMQ's tables live in a schema of their own, dropped at the end. */
export async function runPostgresPair(o: PostgresPairOptions): Promise<PostgresPairResult> {
  const prefix = `bench_pgq_${randomBytes(4).toString('hex')}`;
  const connection = postgresQueueConnection(o.databaseUrl, prefix, { max: 10 });
  let effects = 0;
  const processors: Record<PairVariant, () => Processor> = {
    raw: () => async (job: Job) => {
      effects++;
      return { ok: true, id: (job.data as Data).id };
    },
    fresh: () =>
      withIdempotency(
        benchOperation,
        async (input) => {
          effects++;
          return { ok: true, id: input.id };
        },
        { ledger: o.ledger, keyring: o.keyring },
      ) as unknown as Processor,
    replay: () => processors.fresh(),
  };

  async function fill(queue: Queue, variant: PairVariant, items: Data[]) {
    for (let i = 0; i < items.length; i += CHUNK) {
      const chunk = items.slice(i, i + CHUNK);
      if (variant === 'raw') await queue.addBulk(chunk.map((data) => ({ name: 'bench', data, opts: JOB_OPTS })));
      else
        await benchOperation.enqueueBulk(
          queue,
          chunk.map((input) => ({ input, options: { jobOptions: JOB_OPTS } })),
        );
    }
  }

  async function run(variant: PairVariant, tag: string, items: Data[]): Promise<number> {
    const queue = openQueue(`pair-${variant}-${tag}`, { connection, defaultJobOptions: JOB_OPTS });
    await fill(queue, variant, items);
    effects = 0;
    const worker = openWorker(queue.name, processors[variant](), {
      connection,
      concurrency: o.concurrency,
      autorun: false,
    });
    let completed = 0;
    let failed = 0;
    const done = new Promise<void>((resolve) => {
      const check = () => {
        if (completed + failed >= items.length) resolve();
      };
      worker.on('completed', () => {
        completed++;
        check();
      });
      worker.on('failed', () => {
        failed++;
        check();
      });
    });
    worker.on('error', () => {});
    await worker.waitUntilReady();
    const started = performance.now();
    void worker.run();
    await done;
    const seconds = (performance.now() - started) / 1000;
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    const expected = variant === 'replay' ? 0 : items.length;
    if (failed > 0 || effects !== expected) {
      throw new Error(
        `pg pair ${variant} ${tag}: ${failed} failed, side effect ran ${effects}× (expected ${expected})`,
      );
    }
    return items.length / seconds;
  }

  const perSec: PostgresPairResult['perSec'] = { raw: [], fresh: [], replay: [] };
  const freshVsRaw: number[] = [];
  const replayVsRaw: number[] = [];
  try {
    // Warm-up: connections, BullMQ's migrations, JIT; not measured.
    const warm = Array.from({ length: 200 }, (_, n) => ({ id: `${prefix}-w-${n}`, n }));
    await run('raw', 'w', warm);
    await run('fresh', 'w', warm);
    for (let round = 0; round < o.rounds; round++) {
      const items = Array.from({ length: o.jobs }, (_, n) => ({ id: `${prefix}-r${round}-${n}`, n }));
      const got: Partial<Record<PairVariant, number>> = {};
      // The replay follows its fresh run (it replays those keys); raw moves around them.
      const order: PairVariant[][] = round % 2 === 0 ? [['raw'], ['fresh', 'replay']] : [['fresh', 'replay'], ['raw']];
      for (const group of order) {
        for (const v of group) {
          got[v] = await run(v, `r${round + 1}`, items);
          o.log(`  round ${round + 1} pg-backend ${v.padEnd(6)} ${Math.round(got[v] as number)} jobs/s`);
        }
      }
      for (const v of ['raw', 'fresh', 'replay'] as const) perSec[v].push(got[v] as number);
      freshVsRaw.push((got.fresh as number) / (got.raw as number));
      replayVsRaw.push((got.replay as number) / (got.raw as number));
    }
  } finally {
    const admin = new pg.Client({ connectionString: o.databaseUrl });
    await admin.connect();
    await admin.query(`drop schema if exists ${prefix} cascade`).catch(() => {});
    await admin.end();
  }
  return { jobs: o.jobs, perSec, freshVsRaw, replayVsRaw };
}

/** The pair's lines for the report, and its JSON fields. */
export function reportPostgresPair(r: PostgresPairResult): { lines: string[]; json: Record<string, number> } {
  const f = (xs: number[]) => Math.round(median(xs));
  const ratio = (xs: number[]) =>
    `${median(xs).toFixed(2)} (${Math.min(...xs).toFixed(2)}–${Math.max(...xs).toFixed(2)})`;
  return {
    lines: [
      `\nBullMQ's PostgreSQL backend (${r.jobs} jobs per run; medians of ${r.freshVsRaw.length} rounds)`,
      `  raw BullMQ      ${f(r.perSec.raw)} jobs/s`,
      `  fresh           ${f(r.perSec.fresh)} jobs/s   fresh / raw  ${ratio(r.freshVsRaw)}`,
      `  replay          ${f(r.perSec.replay)} jobs/s   replay / raw ${ratio(r.replayVsRaw)}`,
    ],
    json: {
      pg_raw_per_s: f(r.perSec.raw),
      pg_fresh_per_s: f(r.perSec.fresh),
      pg_replay_per_s: f(r.perSec.replay),
      pg_fresh_vs_raw: Number(median(r.freshVsRaw).toFixed(3)),
      pg_replay_vs_raw: Number(median(r.replayVsRaw).toFixed(3)),
    },
  };
}
