/**
 * Ledger throughput: the library's claim/complete against a hand-written "naive" ledger, in one
 * process and one sitting, on the same Postgres.
 *
 * - fresh pairs: claim + complete of a key never seen before (the first attempt of a job);
 * - replay: claim of a key already completed (a retry or duplicate delivery, served from the ledger).
 *
 * The library runs twice: with named prepared statements (the default) and with
 * `preparedStatements: false` (every statement unnamed, as behind pgbouncer in transaction mode),
 * on one table, each round with its own keys.
 *
 * Both variants run with the same pool size and the same number of operations in flight, on
 * their own table in a throw-away schema, alternately over several rounds with new keys each
 * round, each run after a checkpoint and followed by a VACUUM of its table (so that neither
 * lands in another variant's run). Timings are noisy (a 2-core machine shared with Postgres), so
 * only correctness is asserted; the numbers are reported, never checked.
 *
 * Run: `npm run bench:ledger` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test).
 * The last line of stdout is one JSON object with the medians.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { fingerprint } from '../src/fingerprint/fingerprint.js';
import { boundedKey, type IdempotencyKey } from '../src/keys/idempotency-key.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import { drive } from './lib/drive.js';
import { jsonLine } from './lib/json-line.js';
import { rotated } from './lib/rounds.js';
import { median, ratio } from './lib/stats.js';
import { printTable } from './lib/table.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
/**
 * Connections per variant. The same for both so the comparison measures the statements, not the
 * connection count. 20 keeps every connection busy with 50 operations in flight (the client-side
 * queue never runs dry) while staying well below max_connections with both pools open at once;
 * more connections than that only add context switches on a 2-core machine.
 */
const POOL_SIZE = 20;
/** Operations in flight per variant (async loops pulling from a shared counter). */
const CONCURRENCY = 50;
const KEYS_PER_ROUND = 20_000;
const ROUNDS = 3;
/** Keys per variant run once before the rounds, to open connections and warm caches; not measured. */
const WARMUP_KEYS = 1_000;
const OPERATION = 'bench.ledger';
const LEASE_MS = 60_000;
const RETENTION_MS = 86_400_000;

type VariantName = 'library' | 'unnamed' | 'naive';
const VARIANTS: VariantName[] = ['library', 'unnamed', 'naive'];

/** One unit of work: key `i` of a batch, with its fingerprint and the result its attempt records. */
type Item = { key: IdempotencyKey; fp: string; result: { assetId: string } };

type Variant = {
  name: VariantName;
  /** The table it writes: vacuumed after each of its rounds (see main). */
  table: string;
  /** Claims a fresh key and completes it; throws unless the claim acquired it. */
  fresh(item: Item): Promise<void>;
  /** Claims an already-completed key; throws unless it replays the recorded result. */
  replay(item: Item): Promise<void>;
};

type Path = 'pairs' | 'replay';

function item(batch: string, i: number): Item {
  const key = { namespace: 'bench/ledger', resourceKey: `${batch}:${i}`, version: 'v1' };
  return { key, fp: fingerprint(OPERATION, { batch, i }), result: { assetId: `asset-${batch}-${i}` } };
}

function libraryVariant(ledger: PostgresLedger, name: 'library' | 'unnamed', table: string): Variant {
  const claimOf = ({ key, fp }: Item) => ({
    key,
    operation: OPERATION,
    fingerprint: fp,
    leaseMs: LEASE_MS,
    retentionMs: RETENTION_MS,
    downstream: 'idempotent' as const,
  });
  return {
    name,
    table,
    async fresh(it) {
      const claim = await ledger.claim(claimOf(it));
      if (claim.kind !== 'acquired') throw new Error(`${name}: fresh claim of ${boundedKey(it.key)} got ${claim.kind}`);
      await ledger.complete(claim.key, claim.epoch, it.result);
    },
    async replay(it) {
      const claim = await ledger.claim(claimOf(it));
      if (claim.kind !== 'completed') throw new Error(`${name}: replay of ${boundedKey(it.key)} got ${claim.kind}`);
      const assetId = (claim.result as { assetId?: unknown } | null)?.assetId;
      if (assetId !== it.result.assetId) throw new Error(`${name}: replay of ${boundedKey(it.key)} got ${assetId}`);
    },
  };
}

/** The ledger as users write it by hand: unprepared statements, insert-or-nothing, then a second statement. */
function naiveStatements(table: string) {
  return {
    create: `create table ${table} (key text primary key, fingerprint text, status text, epoch int, result jsonb,
  lease_expires_at timestamptz, updated_at timestamptz)`,
    claim: `insert into ${table} (key, fingerprint, status, epoch, lease_expires_at, updated_at)
values ($1, $2, 'locked', 1, now() + $3 * interval '1 millisecond', now())
on conflict (key) do nothing returning epoch`,
    complete: `update ${table} set status = 'completed', result = $2, lease_expires_at = null, updated_at = now()
where key = $1 and epoch = $3`,
    read: `select status, result, fingerprint from ${table} where key = $1`,
  };
}

function naiveVariant(pool: pg.Pool, sql: ReturnType<typeof naiveStatements>, table: string): Variant {
  return {
    name: 'naive',
    table,
    async fresh(it) {
      const key = boundedKey(it.key);
      const claimed = await pool.query<{ epoch: number }>(sql.claim, [key, it.fp, LEASE_MS]);
      const row = claimed.rows[0];
      if (!row) throw new Error(`naive: fresh claim of ${key} found an existing row`);
      const done = await pool.query(sql.complete, [key, JSON.stringify(it.result), row.epoch]);
      if (done.rowCount !== 1) throw new Error(`naive: completion of ${key} updated ${done.rowCount} rows`);
    },
    async replay(it) {
      const key = boundedKey(it.key);
      const claimed = await pool.query(sql.claim, [key, it.fp, LEASE_MS]);
      if (claimed.rows.length > 0) throw new Error(`naive: replay of ${key} inserted a row`);
      const read = await pool.query<{ status: string; result: { assetId?: unknown } | null; fingerprint: string }>(
        sql.read,
        [key],
      );
      const row = read.rows[0];
      if (row?.status !== 'completed' || row.fingerprint !== it.fp || row.result?.assetId !== it.result.assetId) {
        throw new Error(`naive: replay of ${key} found ${JSON.stringify(row)}`);
      }
    },
  };
}

/** Fresh pairs, then replays of the same keys. Items are built inside the timed loop, alike for both variants. */
async function runVariant(variant: Variant, batch: string, count: number): Promise<Record<Path, number>> {
  const pairs = await drive(count, CONCURRENCY, (i) => variant.fresh(item(batch, i)));
  const replay = await drive(count, CONCURRENCY, (i) => variant.replay(item(batch, i)));
  return { pairs, replay };
}

function report(results: Record<VariantName, Record<Path, number[]>>): void {
  const rounds = Array.from({ length: ROUNDS }, (_, r) => `round ${r + 1}`);
  const header = ['variant', ...rounds, 'median'];
  const rows: string[][] = [];
  for (const path of ['pairs', 'replay'] as const) {
    for (const name of VARIANTS) {
      const series = results[name][path];
      rows.push([`${name} ${path}/s`, ...series.map((v) => String(Math.round(v))), String(Math.round(median(series)))]);
    }
    for (const [a, b] of [
      ['library', 'naive'],
      ['unnamed', 'naive'],
      ['unnamed', 'library'],
    ] as const) {
      const ratios = results[a][path].map((v, r) => ratio(v, results[b][path][r]!));
      const medianRatio = ratio(median(results[a][path]), median(results[b][path]));
      rows.push([`${path} ${a}/${b}`, ...ratios.map((v) => `${v.toFixed(2)}x`), `${medianRatio.toFixed(2)}x`]);
    }
  }
  printTable(header, rows);
}

async function main(): Promise<void> {
  const schema = `bench_ledger_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DATABASE_URL });
  await admin.connect();
  let ledger: PostgresLedger | undefined;
  let unnamedLedger: PostgresLedger | undefined;
  let naivePool: pg.Pool | undefined;
  try {
    await migrate({ connectionString: DATABASE_URL, schema });
    const naiveTable = `${schema}.naive_ledger`;
    const sql = naiveStatements(naiveTable);
    await admin.query(sql.create);
    ledger = new PostgresLedger({ connectionString: DATABASE_URL, schema, poolSize: POOL_SIZE });
    unnamedLedger = new PostgresLedger({
      connectionString: DATABASE_URL,
      schema,
      poolSize: POOL_SIZE,
      preparedStatements: false,
    });
    naivePool = new pg.Pool({ connectionString: DATABASE_URL, max: POOL_SIZE });
    const variants: Record<VariantName, Variant> = {
      library: libraryVariant(ledger, 'library', `${schema}.idempotency_ledger`),
      unnamed: libraryVariant(unnamedLedger, 'unnamed', `${schema}.idempotency_ledger`),
      naive: naiveVariant(naivePool, sql, naiveTable),
    };
    console.error(
      `bench ledger: schema ${schema}, ${KEYS_PER_ROUND} keys x ${ROUNDS} rounds, pool ${POOL_SIZE}, ${CONCURRENCY} in flight`,
    );
    for (const variant of Object.values(variants)) await runVariant(variant, `warmup-${variant.name}`, WARMUP_KEYS);

    const results: Record<VariantName, Record<Path, number[]>> = {
      library: { pairs: [], replay: [] },
      unnamed: { pairs: [], replay: [] },
      naive: { pairs: [], replay: [] },
    };
    for (let round = 0; round < ROUNDS; round++) {
      // Rotate which variant goes first, so none always runs on the warmer (or fuller) table.
      for (const name of rotated(VARIANTS, round)) {
        // Each run starts with no dirty pages and no dead rows left by the one before it: a
        // checkpoint or an autovacuum of another variant's writes does not land in this one.
        await admin.query('checkpoint').catch(() => {});
        // The two library variants share a table: each round and variant has its own keys.
        const { pairs, replay } = await runVariant(variants[name], `r${round + 1}-${name}`, KEYS_PER_ROUND);
        await admin.query(`vacuum ${variants[name].table}`);
        results[name].pairs.push(pairs);
        results[name].replay.push(replay);
        console.error(
          `  round ${round + 1} ${name.padEnd(7)} pairs ${Math.round(pairs)}/s, replay ${Math.round(replay)}/s`,
        );
      }
    }

    report(results);
    const m = (name: VariantName, path: Path) => median(results[name][path]);
    jsonLine('ledger', {
      pairs_per_s: Math.round(m('library', 'pairs')),
      replay_per_s: Math.round(m('library', 'replay')),
      naive_pairs_per_s: Math.round(m('naive', 'pairs')),
      naive_replay_per_s: Math.round(m('naive', 'replay')),
      pairs_vs_naive: ratio(m('library', 'pairs'), m('naive', 'pairs')),
      replay_vs_naive: ratio(m('library', 'replay'), m('naive', 'replay')),
      unnamed_pairs_per_s: Math.round(m('unnamed', 'pairs')),
      unnamed_replay_per_s: Math.round(m('unnamed', 'replay')),
      unnamed_vs_named_pairs: ratio(m('unnamed', 'pairs'), m('library', 'pairs')),
      unnamed_vs_named_replay: ratio(m('unnamed', 'replay'), m('library', 'replay')),
    });
  } finally {
    // Each step runs even when an earlier one fails: the schema must go whatever happened.
    const steps: [string, () => Promise<unknown> | undefined][] = [
      ['close the ledger', () => ledger?.close()],
      ['close the unnamed ledger', () => unnamedLedger?.close()],
      ['end the naive pool', () => naivePool?.end()],
      [`drop schema ${schema}`, () => admin.query(`drop schema if exists ${schema} cascade`)],
      ['end the admin connection', () => admin.end()],
    ];
    for (const [what, step] of steps) {
      try {
        await step();
      } catch (error) {
        console.error(`bench ledger: could not ${what}:`, error);
        process.exitCode = 1;
      }
    }
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
