/**
 * What a replay costs beside its guarded floor, part by part, without the queue's noise: the
 * wrapper's replay and the guarded replay floor of `npm run bench` (the stored fingerprint read
 * with the stored result, the input's fingerprint compared with it, the seal checked for the
 * operation and key) run the same jobs in one process, 50 at a time, with no worker between them.
 *
 * - Node CPU per replay: the jobs are enqueued once by the producer helper on a queue of their
 *   own and read back from Redis as BullMQ gives them to a processor; the wrapper completes them
 *   once (fresh), then each round runs the wrapper's replay and the floor's over all of them, in
 *   an order that alternates by round. `process.cpuUsage()` over a drain, per job. Both get one
 *   AbortSignal for every job (BullMQ makes one per job for both alike).
 * - Postgres CPU per key: the claim's read (`peek`, as the ledger sends it) and the floor's read,
 *   over every completed key in batches of REPLAY_COST_BATCH, on one connection, the server
 *   process's CPU read from /proc (the server must run on this machine; else this part is skipped
 *   with a line on stderr). Two more forms of the claim's read say where its cost lies: its
 *   columns sent as stored, with nothing computed (`columns as stored`), and its times computed in
 *   double precision rather than numeric (`times in double`). Neither is what the ledger runs.
 *
 * Run: `npm run bench:replay-cost` (DATABASE_URL, REDIS_URL; REPLAY_COST_JOBS, default 20000;
 * REPLAY_COST_ROUNDS, default 5; REPLAY_COST_BATCH, default 50). The last line of stdout is one
 * JSON object with the medians.
 */
import { randomBytes } from 'node:crypto';
import { type Job, Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { boundedKey } from '../src/keys/idempotency-key.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import { peek } from '../src/ledger/sql/peek.js';
import { tablesOf } from '../src/ledger/sql/statement.js';
import { ENVELOPE_FIELD, type JobEnvelope } from '../src/operation/envelope.js';
import { defineKeyring } from '../src/sealing/keyring.js';
import { withIdempotency } from '../src/worker/with-idempotency.js';
import { guardedReplay } from './lib/floor-batch.js';
import { jsonLine } from './lib/json-line.js';
import { CLK_TCK, procTicks } from './lib/proc-cpu.js';
import { alternatingRounds } from './lib/rounds.js';
import { median, perRoundRatios, round2 } from './lib/stats.js';
import { printTable } from './lib/table.js';
import { benchOperation as operation } from './lib/wrapper-operation.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const JOBS = Number(process.env.REPLAY_COST_JOBS ?? 20_000);
const ROUNDS = Number(process.env.REPLAY_COST_ROUNDS ?? 5);
const BATCH = Number(process.env.REPLAY_COST_BATCH ?? 50);
const CONCURRENCY = 50;
const keyring = defineKeyring({ keys: [{ id: 'bench', secret: randomBytes(32) }] });

type Processor = (job: Job, token: string | undefined, signal: AbortSignal) => Promise<unknown>;

/** Runs `processor` over every job, CONCURRENCY at a time: node CPU µs per job and jobs/s. */
async function drain(jobs: readonly Job[], processor: Processor): Promise<{ cpuUs: number; perS: number }> {
  const signal = new AbortController().signal;
  let next = 0;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < jobs.length) {
        const job = jobs[next++] as Job;
        // No worker holds the job, so no lock token: the wrapper then watches no BullMQ lock.
        await processor(job, undefined, signal);
      }
    }),
  );
  const used = process.cpuUsage(cpu);
  return { cpuUs: (used.user + used.system) / jobs.length, perS: jobs.length / ((performance.now() - t0) / 1000) };
}

/** The CPU time (µs) the process `pid` has used, from /proc; undefined when it is not readable here. */
function processCpuUs(pid: number): number | undefined {
  const t = procTicks(pid);
  return t === undefined ? undefined : (t.ticks * 1e6) / CLK_TCK;
}

async function main(): Promise<void> {
  const schema = `bench_replay_cost_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  await migrate({ connectionString: DATABASE_URL, schema });
  const ledger = new PostgresLedger({ connectionString: DATABASE_URL, schema });
  const floorPool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
  const queue = new Queue(`bench-replay-cost-${randomBytes(4).toString('hex')}`, { connection: redis });
  try {
    const tag = randomBytes(4).toString('hex');
    const inputs = Array.from({ length: JOBS }, (_, n) => ({ id: `${tag}-${n}`, n }));
    for (let i = 0; i < inputs.length; i += 1000) {
      await operation.enqueueBulk(
        queue,
        inputs.slice(i, i + 1000).map((input) => ({ input })),
      );
    }
    // The jobs as BullMQ reads them from Redis for a worker.
    const jobs = (await queue.getJobs(['waiting'], 0, JOBS)) as Job[];
    if (jobs.length !== JOBS) throw new Error(`replay cost: ${jobs.length} jobs read back of ${JOBS}`);

    const wrapper = withIdempotency(operation, async (input) => ({ ok: true, id: input.id }), {
      ledger,
      keyring,
    }) as Processor;
    const floor = guardedReplay(floorPool, `${schema}.idempotency_ledger`, operation, keyring);
    const fresh = await drain(jobs, wrapper);
    console.error(`  fresh (once)  ${fresh.cpuUs.toFixed(1)} µs node CPU a job, ${Math.round(fresh.perS)} jobs/s`);

    const variants = { replay: wrapper, 'guarded replay floor': floor } as const;
    type Name = keyof typeof variants;
    const node = await alternatingRounds(Object.keys(variants) as Name[], ROUNDS, async (name, round) => {
      const m = await drain(jobs, variants[name]);
      console.error(`  round ${round + 1} ${name.padEnd(22)} ${m.cpuUs.toFixed(1)} µs, ${Math.round(m.perS)} jobs/s`);
      return m;
    });
    const cpuOf = (name: Name) => (node.get(name) ?? []).map((m) => m.cpuUs);
    const rateOf = (name: Name) => (node.get(name) ?? []).map((m) => m.perS);
    console.log(`\nNode CPU a replay, in one process (${JOBS} jobs, ${CONCURRENCY} at a time, ${ROUNDS} rounds)`);
    printTable(
      ['variant', ...Array.from({ length: ROUNDS }, (_, r) => `round ${r + 1}`), 'median'],
      [
        ...(Object.keys(variants) as Name[]).map((name) => [
          `${name}, µs`,
          ...cpuOf(name).map((v) => v.toFixed(1)),
          median(cpuOf(name)).toFixed(1),
        ]),
        ...(Object.keys(variants) as Name[]).map((name) => [
          `${name}, jobs/s`,
          ...rateOf(name).map((v) => String(Math.round(v))),
          String(Math.round(median(rateOf(name)))),
        ]),
        [
          'replay / floor, jobs/s',
          ...perRoundRatios(rateOf('replay'), rateOf('guarded replay floor')).map((r) => `${r.toFixed(2)}x`),
          `${median(perRoundRatios(rateOf('replay'), rateOf('guarded replay floor'))).toFixed(2)}x`,
        ],
      ],
    );

    const server = await postgresCostPerKey(admin, schema, jobs);
    jsonLine('replay-cost', {
      jobs: JOBS,
      rounds: ROUNDS,
      replay_node_cpu_us: round2(median(cpuOf('replay'))),
      floor_node_cpu_us: round2(median(cpuOf('guarded replay floor'))),
      replay_vs_floor_per_s: round2(median(perRoundRatios(rateOf('replay'), rateOf('guarded replay floor')))),
      postgres_cpu_us_per_key: server,
    });
  } finally {
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    redis.disconnect();
    await ledger.close();
    await floorPool.end();
    await admin.query(`drop schema if exists ${schema} cascade`);
    await admin.end();
  }
}

/** Postgres CPU per key of the claim's read, its two other forms and the floor's read (medians). */
async function postgresCostPerKey(
  admin: pg.Pool,
  schema: string,
  jobs: readonly Job[],
): Promise<Record<string, number> | null> {
  const client = await admin.connect();
  try {
    const pid = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]?.pid ?? 0;
    if (processCpuUs(pid) === undefined) {
      console.error(
        'replay cost: the Postgres server runs elsewhere (no /proc entry): its CPU per key is not measured',
      );
      return null;
    }
    const table = tablesOf(schema).ledger;
    // Each key with the fingerprint its job's claim sends, as the wrapper makes it.
    const sent = new Map(
      jobs.map((job) => {
        const data = job.data as JobEnvelope;
        return [
          boundedKey(data[ENVELOPE_FIELD].key),
          operation.fingerprintOf(data.input as { id: string; n: number }, keyring),
        ];
      }),
    );
    const keys = (await client.query<{ key: string }>(`select key from ${table} order by key`)).rows;
    if (keys.length !== jobs.length) throw new Error(`replay cost: ${keys.length} rows for ${jobs.length} jobs`);
    const rows = keys.map(({ key }) => ({ key, fp: sent.get(key) as string }));
    if (rows.some((r) => r.fp === undefined)) throw new Error('replay cost: a row of no job');
    const claimRead = peek.text(tablesOf(schema));
    const inDouble = claimRead
      .replaceAll('floor(extract(epoch from', "floor(date_part('epoch',")
      .replaceAll('ceil(extract(epoch from', "ceil(date_part('epoch',");
    const forms: Record<string, (keys: string[], fps: string[]) => pg.QueryConfig> = {
      "the claim's read": (keys, fps) => ({ name: 'rc_peek', text: claimRead, values: [keys, fps, 0] }),
      'columns as stored': (keys, fps) => ({
        name: 'rc_stored',
        text: `select l.key, l.status, l.epoch, l.fingerprint, l.lease_expires_at, l.result, l.error, l.completed_at,
  l.expires_at, l.updated_at, l.retention_ms, $3::int8 as offset_ms
from unnest($1::text[], $2::text[]) as i(key, want) join ${table} l on l.key = i.key`,
        values: [keys, fps, 0],
      }),
      'times in double': (keys, fps) => ({ name: 'rc_double', text: inDouble, values: [keys, fps, 0] }),
      "the floor's read": (keys) => ({
        name: 'rc_floor',
        text: `select key, fingerprint, result from ${table} where key = any($1::text[])`,
        values: [keys],
      }),
    };
    const names = Object.keys(forms);
    const measured = await alternatingRounds(names, ROUNDS, async (name) => {
      const form = forms[name] as (keys: string[], fps: string[]) => pg.QueryConfig;
      const before = processCpuUs(pid) ?? 0;
      for (let i = 0; i < rows.length; i += BATCH) {
        const batch = rows.slice(i, i + BATCH);
        const answer = await client.query(
          form(
            batch.map((r) => r.key),
            batch.map((r) => r.fp),
          ),
        );
        if (answer.rowCount !== batch.length) throw new Error(`replay cost: ${name} answered ${answer.rowCount} rows`);
      }
      return ((processCpuUs(pid) ?? 0) - before) / rows.length;
    });
    console.log(
      `\nPostgres CPU a key (µs; ${rows.length} completed keys in batches of ${BATCH}, the server's clock ticks of 10 ms)`,
    );
    printTable(
      ['read', ...Array.from({ length: ROUNDS }, (_, r) => `round ${r + 1}`), 'median'],
      names.map((name) => {
        const values = measured.get(name) ?? [];
        return [name, ...values.map((v) => v.toFixed(1)), median(values).toFixed(1)];
      }),
    );
    // The JSON line's field of each form: `claim_read`, `columns_as_stored`, `times_in_double`, `floor_read`.
    const field = (name: string) => name.replace(/^the |'s/g, '').replaceAll(' ', '_');
    return Object.fromEntries(names.map((name) => [field(name), round2(median(measured.get(name) ?? []))]));
  } finally {
    client.release();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
