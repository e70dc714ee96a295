/**
 * `npm run bench:scale`: what the ledger costs as it fills. At each size (completed rows already
 * in `idempotency_ledger`, default 0, 1 M and 10 M) it measures, through the real ledger
 * (PostgresLedger, named prepared statements, micro-batching, pool of 10, 50 operations in flight;
 * each claim with an owner, a job id and a queue, as a worker's):
 * - pairs/s: claim + complete of new keys (the first attempt of a job);
 * - replay/s: claims of those keys again (served from the ledger);
 * - sweep/s: expired rows the sweeper (sweepLedger) deletes per second while a claim load runs
 *   beside it (its pairs/s is reported too);
 * - bytes per row on disk (heap, TOAST and indexes: pg_total_relation_size / rows);
 * - WAL bytes per fresh operation (pg_current_wal_lsn before and after the pairs), measured right
 *   after a checkpoint: every page's first change then writes a full-page image, which on a table
 *   much larger than shared_buffers is nearly every change: the cost at the start of each
 *   checkpoint cycle.
 *
 * Beside each figure, the fresh floor's (bench/lib/floor-batch.ts: a table `key text primary key,
 * result jsonb`, the key inserted before the effect and its result stored after, by the same
 * micro-batcher with the ledger's batching defaults, on a pool of its own as large as the
 * ledger's): the least a record of a key before its effect and of its result after can cost, on
 * as many rows. Its table (`fresh_floor`, in the bench's schema, Postgres's default fillfactor
 * 100) is prefilled with the ledger's keys and results (the same expressions, the same index
 * rebuild) to the ledger's row count at each size; within a size its rounds alternate with the
 * ledger's (the order turning every round; the same keys, PAIRS and concurrency), after the same
 * checkpoint. Printed: floor pairs/s, the ledger's pairs/s over the floor's (median of the rounds'
 * ratios), floor bytes per row and floor WAL bytes per op.
 *
 * Beside both, the guarded fresh floor's (`guardedFreshFloor`: a table `key text primary key,
 * fingerprint bytea not null, epoch int not null, result jsonb`, the fingerprint stored with the key
 * as the ledger stores it, the completion fenced by the epoch the claim answered): the least the
 * ledger's guarantees can cost. Its table (`guarded_fresh_floor`, fillfactor 100) is prefilled as
 * the floor's, with the fingerprints of the ledger's fill, and its rounds alternate with the others.
 * Printed, and in the JSON line as `guarded_*`: its pairs/s, bytes per row, WAL bytes per op.
 *
 * Per variant and round it also reads the CPU time of this process, of the server's processes and
 * of everything else (/proc, bench/lib/proc-cpu.ts: µs per pair; `other` is the rest of
 * the machine, other work on it included), the disk's bytes read and written, and, when the server
 * preloads pg_stat_statements (e.g. SCALE_PG_SETTINGS=shared_preload_libraries=pg_stat_statements),
 * each statement's mean time, rows, shared buffers hit, read, dirtied and written, WAL bytes and
 * full-page images per row. Each rate at a size over the same variant's at the first size is
 * printed too (`pairs_vs_first_size`; measured at another time, so under another load); at every
 * size above 0 the same variants also run on empty tables of their own (schema
 * `bench_scale_empty`), in the same alternating rounds, so that a variant's rate on the full table
 * over its rate on an empty one is measured under the same load (`*_vs_empty_beside`, the median of
 * the rounds' ratios; SCALE_BESIDE_EMPTY=0 leaves them out). SCALE_CANDIDATES (comma list, each a
 * `+` list of the rewrites in bench/lib/ledger-variant.ts, e.g. `onconflict,onconflict+lean`) adds
 * candidate ledgers: the ledger with its fresh-claim insert rewritten, on the ledger's table (keys
 * of their own), in the same rounds (`candidates` in the JSON line).
 *
 * The rows are prefilled in SQL (generate_series, not through the library): copies of one row the
 * ledger itself claimed and completed, with new random keys (hashes: claims land on random index
 * pages, as real keys do), completed during the last 24 h with a 24 h retention; the oldest
 * SCALE_EXPIRED of them (default 100,000, at most a tenth) already expired, for the sweeper
 * (without a record of transitions: the sweeper's check that their audit events are stored is not
 * part of its rate here). For
 * a fill of more than 100,000 rows the indexes are dropped and rebuilt afterwards (minutes instead
 * of an hour), then VACUUM ANALYZE: rebuilt indexes are packed (fillfactor 90), so bytes per row at
 * the prefilled sizes are a little below a table grown by random inserts; the size-0 figure is of
 * rows the ledger wrote itself.
 *
 * By default the bench starts a Postgres of its own (initdb in a temporary folder, fsync and
 * full-page writes on, autovacuum on, shared_buffers 128 MB as the shared server) and removes it
 * afterwards; SCALE_DATABASE_URL runs it against another server instead (autovacuum is switched on
 * for the bench's table only; the schema is dropped at the end). Timings on a shared 2-core machine
 * are noisy: reported, never asserted; within a size the pairs and replays alternate over rounds
 * (median). Env: SCALE_ROWS (comma list, e.g. `0,100000`), SCALE_PAIRS (keys per round, 10,000),
 * SCALE_ROUNDS (3), SCALE_EXPIRED, SCALE_FILLFACTOR (the ledger table's fillfactor for the run, set
 * after migrating: the migrations' 35 (0016) when unset), SCALE_PG_SETTINGS (the private server's
 * settings over those defaults, e.g. `shared_buffers=2GB,wal_compression=lz4`; ignored with
 * SCALE_DATABASE_URL). It also reports the share of completions that were HOT updates
 * (`pg_stat_user_tables`: new version on the same page, no index entries).
 * Ends with one JSON line per size, `{"bench":"scale",...}` (the floor's figures as `floor_*`).
 */

import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { hostname, tmpdir } from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { fingerprint } from '../src/fingerprint/fingerprint.js';
import { sweepLedger } from '../src/jobs/ledger-sweeper.js';
import { boundedKey, type IdempotencyKey } from '../src/keys/idempotency-key.js';
import { PostgresLedger } from '../src/ledger/postgres-ledger.js';
import { jobIdFor } from '../src/operation/enqueue.js';
import { PrivatePostgres } from '../test/helpers/private-postgres.js';
import { diskReading, diskSince } from './lib/disk-reads.js';
import { drive } from './lib/drive.js';
import { freshFloor, guardedFreshFloor, narrowGuardedFreshFloor, narrowKey } from './lib/floor-batch.js';
import { jsonLine } from './lib/json-line.js';
import { useInsertVariant } from './lib/ledger-variant.js';
import { storedBytes } from './lib/pg-size.js';
import { addTotals, type StatementTotals, statementLabel, statementStats } from './lib/pg-statements.js';
import { walPosition, walSince } from './lib/pg-wal.js';
import { cpuSnapshot, cpuSplit, perThousand } from './lib/proc-cpu.js';
import { alternatingRounds } from './lib/rounds.js';
import { median, perRoundRatios, round2 } from './lib/stats.js';
import { printTable } from './lib/table.js';

const SIZES = (process.env.SCALE_ROWS ?? '0,1000000,10000000').split(',').map((s) => Number(s.trim()));
const PAIRS = Number(process.env.SCALE_PAIRS ?? 10_000);
const ROUNDS = Number(process.env.SCALE_ROUNDS ?? 3);
const EXPIRED = Number(process.env.SCALE_EXPIRED ?? 100_000);
const FILLFACTOR = process.env.SCALE_FILLFACTOR ? Number(process.env.SCALE_FILLFACTOR) : undefined;
/** Server settings over the defaults below, `name=value` comma list (e.g. `shared_buffers=2GB,wal_compression=lz4`). */
const PG_SETTINGS = parseSettings(process.env.SCALE_PG_SETTINGS ?? '');
/** Candidate ledgers measured beside the ledger: comma list, each a `+` list of insert variants (bench/lib/ledger-variant.ts). */
/**
 * Beside the prefilled tables, the same variants on empty tables of their own (schema
 * `bench_scale_empty`), in the same alternating rounds: each variant's rate on the full table over
 * its rate on an empty one, measured under the same load (SCALE_BESIDE_EMPTY=0: not measured).
 */
const BESIDE_EMPTY = process.env.SCALE_BESIDE_EMPTY !== '0';
/**
 * SCALE_NARROW_FLOOR=1: the guarded floor with a narrow key too (`narrowGuardedFreshFloor`: the
 * key a 16-byte digest, table `narrow_guarded_fresh_floor`), prefilled and measured as the others.
 */
const NARROW = process.env.SCALE_NARROW_FLOOR === '1';
const CANDIDATES = (process.env.SCALE_CANDIDATES ?? '')
  .split(',')
  .map((c) => c.trim())
  .filter(Boolean);
const CONCURRENCY = 50;
const POOL_SIZE = 10;
const OPERATION = 'bench.scale';
const NAMESPACE = 'bench/scale';
const LEASE_MS = 60_000;
const DAY_MS = 86_400_000;
/** Rows per INSERT … SELECT of the fill (each one transaction). */
const FILL_CHUNK = 1_000_000;
const SCHEMA = 'bench_scale';
const TABLE = `${SCHEMA}.idempotency_ledger`;
const FLOOR_TABLE = `${SCHEMA}.fresh_floor`;
const GUARDED_TABLE = `${SCHEMA}.guarded_fresh_floor`;
const NARROW_TABLE = `${SCHEMA}.narrow_guarded_fresh_floor`;
/** The empty tables' schema (see BESIDE_EMPTY), and the suffix of their variants' names. */
const EMPTY_SCHEMA = 'bench_scale_empty';
const EMPTY = '@empty';
const log = (s: string) => process.stderr.write(`${s}\n`);
const run = randomBytes(3).toString('hex');
const hex = (s: string) => createHash('md5').update(s).digest('hex');

if (SIZES.some((n) => !Number.isSafeInteger(n) || n < 0)) throw new Error(`SCALE_ROWS: ${process.env.SCALE_ROWS}`);
if (FILLFACTOR !== undefined && !(Number.isInteger(FILLFACTOR) && FILLFACTOR >= 10 && FILLFACTOR <= 100)) {
  throw new Error(`SCALE_FILLFACTOR must be an integer from 10 to 100: ${process.env.SCALE_FILLFACTOR}`);
}
if ([...SIZES].sort((a, b) => a - b).join() !== SIZES.join()) throw new Error('SCALE_ROWS must be ascending');

function parseSettings(list: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of list
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const m = /^([a-z_]+)=([A-Za-z0-9_.]+)$/.exec(part);
    if (!m) throw new Error(`SCALE_PG_SETTINGS: expected name=value items, got ${JSON.stringify(part)}`);
    out[m[1]!] = m[2]!;
  }
  return out;
}

type Item = { key: IdempotencyKey; fp: string; result: { assetId: string } };

/** Key `i` of a batch: a hash as resource key, like the prefilled rows. */
function item(batch: string, i: number): Item {
  const resourceKey = hex(`${run}:${batch}:${i}`);
  return {
    key: { namespace: NAMESPACE, resourceKey, version: 'v1' },
    fp: fingerprint(OPERATION, { resourceKey }),
    result: { assetId: `asset-${resourceKey.slice(0, 12)}` },
  };
}

/** What a worker's claim carries besides the key, as withIdempotency's do: owner, job id, queue. */
const OWNER = `${hostname()}:${process.pid}`;
const QUEUE = 'bench-scale';

const claimOf = (it: Item) => ({
  key: it.key,
  operation: OPERATION,
  fingerprint: it.fp,
  leaseMs: LEASE_MS,
  retentionMs: DAY_MS,
  downstream: 'idempotent' as const,
  owner: OWNER,
  jobId: jobIdFor(it.key),
  queue: QUEUE,
});

async function fresh(ledger: PostgresLedger, it: Item): Promise<void> {
  const claim = await ledger.claim(claimOf(it));
  if (claim.kind !== 'acquired') throw new Error(`fresh claim of ${it.key.resourceKey} got ${claim.kind}`);
  await ledger.complete(claim.key, claim.epoch, it.result);
}

async function replay(ledger: PostgresLedger, it: Item): Promise<void> {
  const claim = await ledger.claim(claimOf(it));
  const assetId = claim.kind === 'completed' ? (claim.result as { assetId?: unknown } | null)?.assetId : undefined;
  if (assetId !== it.result.assetId) throw new Error(`replay of ${it.key.resourceKey} got ${claim.kind} ${assetId}`);
}

type Floor = ReturnType<typeof freshFloor>;

type Guarded = ReturnType<typeof guardedFreshFloor>;

/**
 * The guarded floor's fresh pair: the key inserted with its fingerprint (answering epoch 1), then
 * the same result stored where the key still holds that epoch.
 */
async function guardedFresh(floor: Guarded, it: Item): Promise<void> {
  const key = boundedKey(it.key);
  const epoch = await floor.claim.submit({ key, fingerprint: it.fp });
  if (epoch !== 1) throw new Error(`guarded floor claim of ${key}: got ${epoch}`);
  if (!(await floor.done.submit({ key, epoch, result: JSON.stringify(it.result) })))
    throw new Error(`guarded floor: ${key} lost its row`);
}

type Narrow = ReturnType<typeof narrowGuardedFreshFloor>;

/** The narrow-key guarded floor's fresh pair: as the guarded floor's, the key as its digest. */
async function narrowFresh(floor: Narrow, it: Item): Promise<void> {
  const key = narrowKey(boundedKey(it.key));
  const epoch = await floor.claim.submit({ key, fingerprint: it.fp });
  if (epoch !== 1) throw new Error(`narrow floor claim of ${key}: got ${epoch}`);
  if (!(await floor.done.submit({ key, epoch, result: JSON.stringify(it.result) })))
    throw new Error(`narrow floor: ${key} lost its row`);
}

/** The floor's fresh pair: the key (the ledger's primary key for it) inserted, then the same result stored. */
async function floorFresh(floor: Floor, it: Item): Promise<void> {
  const key = boundedKey(it.key);
  if (!(await floor.claim.submit({ key }))) throw new Error(`floor claim of ${key}: already there`);
  if (!(await floor.done.submit({ key, result: JSON.stringify(it.result) })))
    throw new Error(`floor: ${key} lost its row`);
}

const rowCount = async (db: pg.Pool, table = TABLE) =>
  Number((await db.query(`select count(*) as n from ${table}`)).rows[0].n);

/** A floor's figures at a size: its rows after the rounds, its rounds' pairs/s, WAL per op and bytes per row. */
type FloorFigures = {
  rows: number;
  pairs: number[];
  walPerOp: number;
  walAfterCheckpoint: number;
  bytesPerRow: number;
};

/** A floor's figures for the JSON line, each key prefixed with the floor's name (`floor_rows`, ...). */
function floorJson(name: string, f: FloorFigures): Record<string, number> {
  return {
    [`${name}_rows`]: f.rows,
    [`${name}_pairs_per_s`]: Math.round(median(f.pairs)),
    [`${name}_bytes_per_row`]: Math.round(f.bytesPerRow),
    [`${name}_wal_per_op`]: Math.round(f.walPerOp),
    [`${name}_wal_per_op_after_checkpoint`]: Math.round(f.walAfterCheckpoint),
  };
}

/**
 * The figures of the floor on `table` after its rounds, which must have added one row a pair to
 * the `before` it held (a lost or doubled claim fails the run).
 */
async function floorFigures(
  db: pg.Pool,
  table: string,
  before: number,
  rounds: readonly { rate: number; wal: number }[],
): Promise<FloorFigures> {
  const rows = await rowCount(db, table);
  if (rows !== before + ROUNDS * PAIRS)
    throw new Error(`${rows} rows in ${table} after the rounds, expected ${before + ROUNDS * PAIRS}`);
  const [schema, name] = table.split('.') as [string, string];
  const wal = rounds.map((m) => m.wal);
  return {
    rows,
    pairs: rounds.map((m) => m.rate),
    walPerOp: median(wal),
    walAfterCheckpoint: wal[0]!,
    bytesPerRow: (await storedBytes(db, schema, [name])).total / rows,
  };
}

/**
 * The prefill's expressions for the columns it changes; every other column is copied from the
 * template row, so a column added to the ledger later is filled too. `g` is the row number, `a.h`
 * its hash (the resource key), `a.at` when it completed (`__age` ago).
 */
function fillExpressions(expiredUpTo: number): Record<string, string> {
  const age = `(case when g <= ${expiredUpTo} then interval '1 day' + (${expiredUpTo} - g) * interval '1 millisecond'
    else random() * interval '1 day' end)`;
  // A column the template leaves null (the ledger derives it) stays null in the copies.
  const ifSet = (column: string, value: string) => `case when t.${column} is null then null else ${value} end`;
  return {
    // The key's middle part is the resource key (not hashed: the row stores no parts).
    key: `regexp_replace(t.key, ':[^:]*:', ':' || a.h || ':')`,
    resource_key: ifSet('resource_key', 'a.h'),
    // A SHA-256 digest's 32 bytes, as the ledger stores `fingerprint()`'s.
    fingerprint: `decode(md5('fp' || a.h) || a.h, 'hex')`,
    result: `jsonb_build_object('assetId', 'asset-' || left(a.h, 12))`,
    created_at: ifSet('created_at', 'a.at'),
    claimed_at: ifSet('claimed_at', 'a.at'),
    updated_at: 'a.at',
    completed_at: ifSet('completed_at', 'a.at'),
    expires_at: ifSet('expires_at', `a.at + interval '1 day'`),
    // No row expires before it (migration 0010): its last write plus its retention.
    sweep_after: `a.at + t.retention_ms * interval '1 millisecond'`,
    // The template's record of transitions (its bytes) on every live row; none on the expired
    // ones, which the sweeper then deletes as rows from before transitions were recorded (with a
    // record it deletes a row only once its events are in audit_events, which this bench does not
    // write).
    transitions: `case when g <= ${expiredUpTo} then null else t.transitions end`,
    __age: age,
  };
}

/** Indexes of `table` (in the bench's schema), and the constraint each one backs (the primary key). */
async function indexes(
  db: pg.Pool,
  table: string,
): Promise<{ name: string; def: string; constraint: string | null }[]> {
  const res = await db.query(
    `select (select relname from pg_class where oid = i.indexrelid) as name, pg_get_indexdef(i.indexrelid) as def, c.conname as constraint
     from pg_index i left join pg_constraint c on c.conindid = i.indexrelid and c.conrelid = i.indrelid
     where i.indrelid = $1::regclass`,
    [table],
  );
  return res.rows;
}

/**
 * What a fill writes: into `table`'s `columns`, the `select` expressions over the template row `t`
 * (of the ledger table), the row number `g` and `a` (`a.h` the row's hash, `a.at` when it
 * completed, `age` ago).
 */
type FillTarget = { table: string; columns: string[]; select: string[]; age: string };

/** The ledger's rows (see the header); the first `expired` of them already expired. */
async function ledgerFill(db: pg.Pool, expired: number): Promise<FillTarget> {
  const columns = (
    await db.query(
      `select column_name from information_schema.columns where table_schema = $1 and table_name = 'idempotency_ledger'
       order by ordinal_position`,
      [SCHEMA],
    )
  ).rows.map((r) => r.column_name as string);
  const ex = fillExpressions(expired);
  return { table: TABLE, columns, select: columns.map((c) => ex[c] ?? `t.${c}`), age: ex.__age! };
}

/** The floor's rows: the ledger's keys and results, as the ledger's fill makes them. */
function floorFill(): FillTarget {
  const ex = fillExpressions(0);
  return { table: FLOOR_TABLE, columns: ['key', 'result'], select: [ex.key!, ex.result!], age: ex.__age! };
}

/** The narrow floor's rows: the guarded floor's, the key as its 16-byte digest. */
function narrowFill(): FillTarget {
  const ex = fillExpressions(0);
  return {
    table: NARROW_TABLE,
    columns: ['key', 'fingerprint', 'epoch', 'result'],
    select: [`decode(md5(${ex.key!}), 'hex')`, ex.fingerprint!, '1', ex.result!],
    age: ex.__age!,
  };
}

/** The guarded floor's rows: the ledger's keys, fingerprints and results, at epoch 1. */
function guardedFill(): FillTarget {
  const ex = fillExpressions(0);
  return {
    table: GUARDED_TABLE,
    columns: ['key', 'fingerprint', 'epoch', 'result'],
    select: [ex.key!, ex.fingerprint!, '1', ex.result!],
    age: ex.__age!,
  };
}

/** Adds `add` rows to `into.table` in SQL, copies of the template row (see the header). */
async function fill(db: pg.Pool, into: FillTarget, templateKey: string, add: number): Promise<void> {
  if (add <= 0) return;
  const rebuild = add > 100_000 ? await indexes(db, into.table) : [];
  for (const ix of rebuild) {
    await db.query(
      ix.constraint ? `alter table ${into.table} drop constraint ${ix.constraint}` : `drop index ${SCHEMA}.${ix.name}`,
    );
  }
  const started = performance.now();
  for (let from = 1; from <= add; from += FILL_CHUNK) {
    const to = Math.min(add, from + FILL_CHUNK - 1);
    // Each fill hashes its own seed: keys never repeat a previous fill's.
    const offset = `${run}-${Date.now()}`;
    await db.query(
      `insert into ${into.table} (${into.columns.join(', ')})
       select ${into.select.join(', ')}
       from ${TABLE} t, generate_series($2::int8, $3::int8) g,
         lateral (select md5('${offset}:' || g) as h, now() - ${into.age} as at) a
       where t.key = $1`,
      [templateKey, from, to],
    );
    log(
      `  filled ${to.toLocaleString('en-US')} / ${add.toLocaleString('en-US')} rows of ${into.table} (${((performance.now() - started) / 1000).toFixed(0)} s)`,
    );
  }
  for (const ix of rebuild) {
    const t0 = performance.now();
    await db.query(ix.def);
    if (ix.constraint) {
      await db.query(`alter table ${into.table} add constraint ${ix.constraint} primary key using index ${ix.name}`);
    }
    log(`  rebuilt ${ix.name} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
  }
  await db.query(`vacuum analyze ${into.table}`);
}

/**
 * Analyzes the floors' tables that are still small (below a million rows by their statistics, or
 * never analyzed). Their statements are named, so each connection plans them once for good: a
 * plan made while the table was young (a few thousand rows: a hash join over a sequential scan)
 * would stay as the rounds grow it, each completion reading the whole table. The ledger refreshes
 * its own statistics (StatisticsRefresh); the floors have this instead, run between rounds.
 */
async function analyzeYoungFloors(db: pg.Pool): Promise<void> {
  const tables = [FLOOR_TABLE, GUARDED_TABLE, ...(NARROW ? [NARROW_TABLE] : [])];
  for (const table of [...tables, ...tables.map((t) => t.replace(`${SCHEMA}.`, `${EMPTY_SCHEMA}.`))]) {
    const res = await db.query('select reltuples::float8 as n from pg_class where oid = to_regclass($1)', [table]);
    if (res.rows.length > 0 && Number(res.rows[0].n) < 1_000_000) await db.query(`analyze ${table}`);
  }
}

/** Updates of the ledger table so far, and how many of them were HOT (the statistics lag: read after a pause). */
async function updates(db: pg.Pool): Promise<{ all: number; hot: number }> {
  await new Promise((r) => setTimeout(r, 700));
  const res = await db.query(
    `select n_tup_upd as all, n_tup_hot_upd as hot from pg_stat_user_tables where schemaname = $1 and relname = 'idempotency_ledger'`,
    [SCHEMA],
  );
  return { all: Number(res.rows[0]?.all ?? 0), hot: Number(res.rows[0]?.hot ?? 0) };
}

/** CPU seconds per 1,000 fresh pairs (bench/lib/proc-cpu.ts), wall seconds per 1,000 pairs, disk bytes per pair. */
type Cost = {
  node: number;
  nodeSys: number;
  postgres: number;
  other: number;
  /** The part of `other` in interrupts and softirqs (the loopback network's work, mostly). */
  irq: number;
  idle: number;
  wall: number;
  diskRead: number | null;
  diskWritten: number | null;
};

/** One variant's fresh pairs at a size: per round, and its statements' totals over the rounds. */
type VariantRounds = { pairs: number[]; wal: number[]; costs: Cost[]; statements: StatementTotals[] };

type SizeResult = {
  rows: number;
  pairs: number[];
  replays: number[];
  walPerOp: number;
  walAfterCheckpoint: number;
  /** Share of the rounds' updates (their completions) that were HOT. */
  hotShare: number;
  bytesPerRow: number;
  sweepPerSec: number | null;
  pairsDuringSweep: number | null;
  deadTuples: number;
  /** The fresh floor's figures, from rounds alternating with the ledger's, on as many rows. */
  floor: FloorFigures;
  /** The guarded fresh floor's, likewise. */
  guarded: FloorFigures;
  /** Every variant's rounds (the ledger, the candidates, `floor`, `guarded`, `narrow`). */
  variants: Map<string, VariantRounds>;
  /** The narrow floor's bytes on disk per row (SCALE_NARROW_FLOOR). */
  narrowBytesPerRow: number | null;
};

type Stats = Awaited<ReturnType<typeof statementStats>>;

/** The variants measured at every size: the ledger, each candidate ledger, the fresh floor, the guarded one. */
const VARIANTS = ['ledger', ...CANDIDATES, 'floor', 'guarded', ...(NARROW ? ['narrow'] : [])];
/** The same on the empty tables (BESIDE_EMPTY), measured beside them at the sizes above 0. */
const VARIANTS_EMPTY = VARIANTS.map((v) => `${v}${EMPTY}`);

async function measure(
  db: pg.Pool,
  ledgers: Map<string, PostgresLedger>,
  freshPair: Map<string, (it: Item) => Promise<void>>,
  stats: Stats,
  size: number,
): Promise<SizeResult> {
  const ledger = ledgers.get('ledger')!;
  const names = BESIDE_EMPTY && size > 0 ? [...VARIANTS, ...VARIANTS_EMPTY] : VARIANTS;
  const rows = await rowCount(db);
  const floorRows = await rowCount(db, FLOOR_TABLE);
  const guardedRows = await rowCount(db, GUARDED_TABLE);
  const replays: number[] = [];
  const statements = new Map<string, Map<string, StatementTotals>>(names.map((v) => [v, new Map()]));
  // One checkpoint per size: round 1 starts a checkpoint cycle (full-page images of every page it
  // touches first), later rounds run on as the cycle goes (another checkpoint may come meanwhile).
  // The ledger and the floors share no pages, so in each round each pays its own first changes
  // (the candidate ledgers share the ledger's table, and its pages).
  await db.query('checkpoint');
  const updatesBefore = await updates(db);
  // The same keys for the ledger and the floors (in their own tables), keys of their own for the
  // candidates (in the ledger's); the order turns every round.
  const rounds = await alternatingRounds(names, ROUNDS, async (variant, r) => {
    const batch = ledgers.has(variant) && variant !== 'ledger' ? `s${size}-r${r}-${variant}` : `s${size}-r${r}`;
    // The server's processes (its backends and auxiliary processes): those before the round, and
    // any a pool opened during it (a pool closes idle connections, and opens them again).
    await analyzeYoungFloors(db);
    const serverPids = async () =>
      (await db.query('select pid from pg_stat_activity')).rows.map((row) => Number(row.pid)) as number[];
    const pids = new Set(await serverPids());
    await stats?.reset();
    const before = await walPosition(db);
    const cpu0 = cpuSnapshot(pids);
    const disk0 = diskReading();
    const t0 = performance.now();
    const pair = freshPair.get(variant)!;
    const rate = await drive(PAIRS, CONCURRENCY, (i) => pair(item(batch, i)));
    const wall = (performance.now() - t0) / 1000;
    for (const pid of await serverPids()) pids.add(pid);
    const split = cpuSplit(cpu0, cpuSnapshot(pids));
    const disk = diskSince(disk0, diskReading());
    const wal = (await walSince(db, before)) / PAIRS;
    if (stats) addTotals(statements.get(variant)!, await stats.read());
    const per = split && perThousand(split, PAIRS);
    const cost: Cost = {
      node: per?.node ?? Number.NaN,
      nodeSys: per?.nodeSys ?? Number.NaN,
      postgres: per?.postgres ?? Number.NaN,
      other: per?.other ?? Number.NaN,
      irq: per?.irq ?? Number.NaN,
      idle: per?.idle ?? Number.NaN,
      wall: (wall * 1000) / PAIRS,
      diskRead: disk ? disk.read / PAIRS : null,
      diskWritten: disk ? disk.written / PAIRS : null,
    };
    if (variant === 'ledger') replays.push(await drive(PAIRS, CONCURRENCY, (i) => replay(ledger, item(batch, i))));
    const replayed = variant === 'ledger' ? `, replay ${Math.round(replays[r]!)}/s` : '';
    log(
      `  round ${r + 1} ${variant}: pairs ${Math.round(rate)}/s${replayed}, WAL ${Math.round(wal)} B/op, CPU µs/pair node ${Math.round(cost.node * 1000)} pg ${Math.round(cost.postgres * 1000)} other ${Math.round(cost.other * 1000)} (irq ${Math.round(cost.irq * 1000)}; ${(per?.others ?? []).map(([c, x]) => `${c} ${Math.round(x * 1000)}`).join(', ')}) idle ${Math.round(cost.idle * 1000)}`,
    );
    return { rate, wal, cost };
  });
  const variants = new Map<string, VariantRounds>(
    names.map((v) => [
      v,
      {
        pairs: rounds.get(v)!.map((m) => m.rate),
        wal: rounds.get(v)!.map((m) => m.wal),
        costs: rounds.get(v)!.map((m) => m.cost),
        statements: [...statements.get(v)!.values()].sort((x, y) => y.ms - x.ms),
      },
    ]),
  );
  const pairs = rounds.get('ledger')!.map((m) => m.rate);
  const wal = rounds.get('ledger')!.map((m) => m.wal);
  const updatesAfter = await updates(db);
  const hotShare = (updatesAfter.hot - updatesBefore.hot) / Math.max(1, updatesAfter.all - updatesBefore.all);
  log(`  HOT updates: ${(hotShare * 100).toFixed(0)} % of ${updatesAfter.all - updatesBefore.all}`);
  const after = await rowCount(db);
  const ledgerPairs = ROUNDS * PAIRS * [...ledgers.keys()].filter((name) => !name.endsWith(EMPTY)).length;
  if (after !== rows + ledgerPairs) throw new Error(`${after} rows after the rounds, expected ${rows + ledgerPairs}`);
  const stored = await storedBytes(db, SCHEMA, ['idempotency_ledger']);
  const floor = await floorFigures(db, FLOOR_TABLE, floorRows, rounds.get('floor')!);
  const guarded = await floorFigures(db, GUARDED_TABLE, guardedRows, rounds.get('guarded')!);
  const narrowBytesPerRow = NARROW
    ? (await storedBytes(db, SCHEMA, ['narrow_guarded_fresh_floor'])).total / (await rowCount(db, NARROW_TABLE))
    : null;
  const split = (
    await db.query(`select pg_table_size($1::regclass) as heap, pg_indexes_size($1::regclass) as idx`, [TABLE])
  ).rows[0];
  const perIndex = await db.query(
    `select indexrelname as name, pg_relation_size(indexrelid) as bytes from pg_stat_user_indexes
     where schemaname = $1 and relname = 'idempotency_ledger' order by indexrelname`,
    [SCHEMA],
  );
  log(
    `  on disk: heap ${Math.round(split.heap / after)} B/row, indexes ${Math.round(split.idx / after)} B/row (${perIndex.rows.map((r) => `${r.name} ${Math.round(r.bytes / after)}`).join(', ')}); the floor ${Math.round(floor.bytesPerRow)} B/row, the guarded floor ${Math.round(guarded.bytesPerRow)} B/row${narrowBytesPerRow === null ? '' : `, the narrow one ${Math.round(narrowBytesPerRow)} B/row`}`,
  );

  // The sweeper against the expired rows, a claim load beside it.
  const expired = Number(
    (
      await db.query(
        `select count(*) as n from ${TABLE}
         where coalesce(expires_at, updated_at + retention_ms * interval '1 millisecond') <= now() and status = 'completed'`,
      )
    ).rows[0].n,
  );
  let sweepPerSec: number | null = null;
  let pairsDuringSweep: number | null = null;
  if (expired > 0) {
    let sweeping = true;
    const load = drive(
      Number.POSITIVE_INFINITY,
      CONCURRENCY,
      (i) => fresh(ledger, item(`s${size}-sweep`, i)),
      () => !sweeping,
    );
    const t0 = performance.now();
    const swept = await sweepLedger(ledger, { batchSize: 1000, maxBatches: 1_000_000 }).finally(() => {
      sweeping = false;
    });
    const seconds = (performance.now() - t0) / 1000;
    pairsDuringSweep = await load;
    // Rows keep expiring while it runs (the oldest of the last 24 h): at least those counted before.
    // Rows with a record of transitions whose events are not stored stay, counted as pending.
    const pending = (swept as { pending?: number }).pending ?? 0;
    if (swept.deleted + pending < expired) {
      throw new Error(`the sweeper deleted ${swept.deleted} (pending ${pending}) of ${expired} expired rows`);
    }
    sweepPerSec = swept.deleted / seconds;
    log(`  sweep: ${swept.deleted} rows in ${seconds.toFixed(1)} s, pairs beside it ${Math.round(pairsDuringSweep)}/s`);
  }
  const dead = await db.query(
    `select n_dead_tup as n from pg_stat_user_tables where schemaname = $1 and relname = 'idempotency_ledger'`,
    [SCHEMA],
  );
  return {
    rows: after,
    pairs,
    replays,
    walPerOp: median(wal),
    walAfterCheckpoint: wal[0]!,
    hotShare,
    bytesPerRow: stored.total / after,
    sweepPerSec,
    pairsDuringSweep,
    deadTuples: Number(dead.rows[0]?.n ?? 0),
    floor,
    guarded,
    variants,
    narrowBytesPerRow,
  };
}

function freeDisk(): string {
  try {
    return execFileSync('df', ['-h', '--output=avail', tmpdir()], { encoding: 'utf8' }).trim().split('\n').pop() ?? '?';
  } catch {
    return '?';
  }
}

async function main(): Promise<void> {
  const external = process.env.SCALE_DATABASE_URL;
  log(`bench scale: sizes ${SIZES.join(', ')}; ${PAIRS} keys x ${ROUNDS} rounds; free disk ${freeDisk()}`);
  const server = external
    ? undefined
    : await PrivatePostgres.start({
        settings: {
          fsync: 'on',
          full_page_writes: 'on',
          autovacuum: 'on',
          shared_buffers: '128MB',
          max_wal_size: '1GB',
          ...PG_SETTINGS,
        },
      });
  const url = external ?? server!.url();
  const db = new pg.Pool({ connectionString: url, max: 2 });
  // The floor's own pool, as large as the ledger's.
  const floorPool = new pg.Pool({ connectionString: url, max: POOL_SIZE });
  const guardedPool = new pg.Pool({ connectionString: url, max: POOL_SIZE });
  let ledger: PostgresLedger | undefined;
  const ledgers = new Map<string, PostgresLedger>();
  try {
    if (external) await db.query(`drop schema if exists ${SCHEMA} cascade`);
    await migrate({ connectionString: url, schema: SCHEMA });
    await db.query(`alter table ${TABLE} set (autovacuum_enabled = true)`);
    await db.query(`create table ${FLOOR_TABLE} (key text primary key, result jsonb) with (autovacuum_enabled = true)`);
    await db.query(
      `create table ${GUARDED_TABLE} (key text primary key, fingerprint bytea not null, epoch int not null, result jsonb)
       with (autovacuum_enabled = true)`,
    );
    if (NARROW) {
      await db.query(
        `create table ${NARROW_TABLE} (key bytea primary key, fingerprint bytea not null, epoch int not null, result jsonb)
         with (autovacuum_enabled = true)`,
      );
    }
    if (FILLFACTOR !== undefined) await db.query(`alter table ${TABLE} set (fillfactor = ${FILLFACTOR})`);
    const fillfactor = (
      await db.query(
        `select coalesce((select split_part(o, '=', 2) from unnest(reloptions) o where o like 'fillfactor=%'), '100') as f
           from pg_class where oid = $1::regclass`,
        [TABLE],
      )
    ).rows[0].f;
    log(`  ledger fillfactor: ${fillfactor}`);
    const settings = (
      await db.query(
        `select string_agg(name || '=' || setting, ', ' order by name) as s from pg_settings
         where name in ('autovacuum','fsync','full_page_writes','shared_buffers','synchronous_commit','max_wal_size',
                        'wal_compression','checkpoint_timeout')`,
      )
    ).rows[0].s;
    log(`  server: ${settings}`);
    ledger = new PostgresLedger({ connectionString: url, schema: SCHEMA, poolSize: POOL_SIZE });
    ledgers.set('ledger', ledger);
    // Each candidate: a ledger of its own (its own pool, as large) on the same table.
    for (const c of CANDIDATES) {
      const candidate = new PostgresLedger({ connectionString: url, schema: SCHEMA, poolSize: POOL_SIZE });
      useInsertVariant(candidate, c.split('+'));
      ledgers.set(c, candidate);
    }
    if (BESIDE_EMPTY && SIZES.some((n) => n > 0)) {
      // The empty tables: the ledger's (migrated, the same fillfactor) and the floors'.
      if (external) await db.query(`drop schema if exists ${EMPTY_SCHEMA} cascade`);
      await migrate({ connectionString: url, schema: EMPTY_SCHEMA });
      if (FILLFACTOR !== undefined)
        await db.query(`alter table ${EMPTY_SCHEMA}.idempotency_ledger set (fillfactor = ${FILLFACTOR})`);
      await db.query(`alter table ${EMPTY_SCHEMA}.idempotency_ledger set (autovacuum_enabled = true)`);
      await db.query(`create table ${EMPTY_SCHEMA}.fresh_floor (like ${FLOOR_TABLE} including all)`);
      await db.query(`create table ${EMPTY_SCHEMA}.guarded_fresh_floor (like ${GUARDED_TABLE} including all)`);
      if (NARROW) {
        await db.query(`create table ${EMPTY_SCHEMA}.narrow_guarded_fresh_floor (like ${NARROW_TABLE} including all)`);
      }
      for (const c of ['ledger', ...CANDIDATES]) {
        const l = new PostgresLedger({ connectionString: url, schema: EMPTY_SCHEMA, poolSize: POOL_SIZE });
        if (c !== 'ledger') useInsertVariant(l, c.split('+'));
        ledgers.set(`${c}${EMPTY}`, l);
      }
    }
    const stats = await statementStats(db);
    log(`  pg_stat_statements: ${stats ? 'read per round' : 'not available'}`);
    // The template: one row as the ledger writes it.
    const tpl = item('template', 0);
    await fresh(ledger, tpl);
    const templateKey = (await db.query(`select key from ${TABLE} limit 1`)).rows[0].key as string;
    // Each variant's fresh pair, by name.
    const freshPair = new Map<string, (it: Item) => Promise<void>>();
    for (const [name, l] of ledgers) freshPair.set(name, (it) => fresh(l, it));
    const floor = freshFloor(floorPool, FLOOR_TABLE, 'bench_scale_floor');
    freshPair.set('floor', (it) => floorFresh(floor, it));
    const guarded = guardedFreshFloor(guardedPool, GUARDED_TABLE, 'bench_scale_guarded');
    freshPair.set('guarded', (it) => guardedFresh(guarded, it));
    if (NARROW) {
      const narrow = narrowGuardedFreshFloor(guardedPool, NARROW_TABLE, 'bench_scale_narrow');
      freshPair.set('narrow', (it) => narrowFresh(narrow, it));
      if (ledgers.has(`ledger${EMPTY}`)) {
        const emptyNarrow = narrowGuardedFreshFloor(
          guardedPool,
          `${EMPTY_SCHEMA}.narrow_guarded_fresh_floor`,
          'bench_scale_narrow_empty',
        );
        freshPair.set(`narrow${EMPTY}`, (it) => narrowFresh(emptyNarrow, it));
      }
    }
    if (ledgers.has(`ledger${EMPTY}`)) {
      const emptyFloor = freshFloor(floorPool, `${EMPTY_SCHEMA}.fresh_floor`, 'bench_scale_floor_empty');
      freshPair.set(`floor${EMPTY}`, (it) => floorFresh(emptyFloor, it));
      const emptyGuarded = guardedFreshFloor(
        guardedPool,
        `${EMPTY_SCHEMA}.guarded_fresh_floor`,
        'bench_scale_guarded_empty',
      );
      freshPair.set(`guarded${EMPTY}`, (it) => guardedFresh(emptyGuarded, it));
    }
    // Warm-up (connections, prepared statements); its rows stay, as the template does.
    for (const [name, pair] of freshPair) await drive(1000, CONCURRENCY, (i) => pair(item(`warmup-${name}`, i)));
    const results: SizeResult[] = [];
    for (const size of SIZES) {
      const have = await rowCount(db);
      const add = size - have;
      log(`size ${size.toLocaleString('en-US')}: filling ${Math.max(0, add).toLocaleString('en-US')} rows...`);
      await fill(db, await ledgerFill(db, Math.min(EXPIRED, Math.floor(add / 10))), templateKey, add);
      // The floor to as many rows as the ledger has now (the sweeps before deleted some of its).
      await fill(db, floorFill(), templateKey, (await rowCount(db)) - (await rowCount(db, FLOOR_TABLE)));
      await fill(db, guardedFill(), templateKey, (await rowCount(db)) - (await rowCount(db, GUARDED_TABLE)));
      if (NARROW) await fill(db, narrowFill(), templateKey, (await rowCount(db)) - (await rowCount(db, NARROW_TABLE)));
      const res = await measure(db, ledgers, freshPair, stats, size);
      results.push(res);
      log(
        `  ${res.rows} rows: ${Math.round(res.bytesPerRow)} B/row, WAL ${Math.round(res.walPerOp)} B/op, ${res.deadTuples} dead tuples; the floor ${Math.round(res.floor.bytesPerRow)} B/row, WAL ${Math.round(res.floor.walPerOp)} B/op; the guarded floor ${Math.round(res.guarded.bytesPerRow)} B/row, WAL ${Math.round(res.guarded.walPerOp)} B/op; free disk ${freeDisk()}`,
      );
    }
    const fmt = (x: number | null) => (x === null ? '-' : String(Math.round(x)));
    const rates = (xs: number[]) => `${xs.map((x) => Math.round(x)).join(' / ')} (${fmt(median(xs))})`;
    printTable(
      [
        'rows',
        'pairs/s',
        'floor pairs/s',
        'ledger/floor',
        'replay/s',
        'bytes/row',
        'floor bytes/row',
        'WAL B/op',
        'floor WAL B/op',
        '(round 1)',
        'HOT %',
        'sweep rows/s',
        'pairs/s beside sweep',
      ],
      results.map((r) => [
        r.rows.toLocaleString('en-US'),
        rates(r.pairs),
        rates(r.floor.pairs),
        median(perRoundRatios(r.pairs, r.floor.pairs)).toFixed(2),
        rates(r.replays),
        fmt(r.bytesPerRow),
        fmt(r.floor.bytesPerRow),
        fmt(r.walPerOp),
        fmt(r.floor.walPerOp),
        fmt(r.walAfterCheckpoint),
        fmt(r.hotShare * 100),
        fmt(r.sweepPerSec),
        fmt(r.pairsDuringSweep),
      ]),
    );
    // Each variant's rate at a size over its rate at the first size (medians; different runs of the rounds).
    const first = results[0]!;
    const vsFirst = (r: SizeResult, v: string) =>
      median(r.variants.get(v)!.pairs) / median(first.variants.get(v)!.pairs);
    const cost = (r: SizeResult, v: string, k: keyof Cost) => {
      const xs = r.variants
        .get(v)!
        .costs.map((c) => c[k])
        .filter((x): x is number => x !== null && !Number.isNaN(x));
      return xs.length ? median(xs) : null;
    };
    const f2 = (x: number | null) => (x === null ? '-' : x.toFixed(2));
    // Seconds per 1,000 pairs as µs per pair.
    const us = (x: number | null) => (x === null ? '-' : String(Math.round(x * 1000)));
    // Per-round ratios within a size: over the ledger's rounds (an empty table's variant: over the
    // ledger's on its empty table), over the same variant's on the empty table.
    const vsLedger = (r: SizeResult, v: string) =>
      median(
        perRoundRatios(
          r.variants.get(v)!.pairs,
          r.variants.get(v.endsWith(EMPTY) ? `ledger${EMPTY}` : 'ledger')!.pairs,
        ),
      );
    const vsEmpty = (r: SizeResult, v: string, of = v) => {
      const empty = r.variants.get(`${of}${EMPTY}`);
      return v.endsWith(EMPTY) || !empty ? null : median(perRoundRatios(r.variants.get(v)!.pairs, empty.pairs));
    };
    console.log('');
    printTable(
      [
        'rows',
        'variant',
        'pairs/s',
        `vs ${first.rows.toLocaleString('en-US')} rows`,
        'vs ledger',
        'vs empty (same rounds)',
        'WAL B/op',
        'CPU µs/pair node',
        '(sys)',
        'postgres',
        'other',
        '(irq)',
        'idle',
        'wall µs/pair',
        'disk read B/pair',
        'disk written B/pair',
      ],
      results.flatMap((r) =>
        [...r.variants.keys()].map((v) => [
          r.rows.toLocaleString('en-US'),
          v,
          rates(r.variants.get(v)!.pairs),
          r === first || v.endsWith(EMPTY) ? '-' : vsFirst(r, v).toFixed(2),
          v === 'ledger' ? '-' : vsLedger(r, v).toFixed(2),
          f2(vsEmpty(r, v)),
          fmt(median(r.variants.get(v)!.wal)),
          us(cost(r, v, 'node')),
          us(cost(r, v, 'nodeSys')),
          us(cost(r, v, 'postgres')),
          us(cost(r, v, 'other')),
          us(cost(r, v, 'irq')),
          us(cost(r, v, 'idle')),
          us(cost(r, v, 'wall')),
          fmt(cost(r, v, 'diskRead')),
          fmt(cost(r, v, 'diskWritten')),
        ]),
      ),
    );
    if (results.some((r) => [...r.variants.values()].some((v) => v.statements.length > 0))) {
      console.log('');
      const per = (x: number, n: number) => (n > 0 ? x / n : 0);
      printTable(
        [
          'rows',
          'variant',
          'statement',
          'calls',
          'mean ms',
          'rows/call',
          'µs/row',
          'hit/row',
          'read/row',
          'dirtied/row',
          'written/row',
          'WAL B/row',
          'FPI/row',
        ],
        results.flatMap((r) =>
          [...r.variants.keys()].flatMap((v) =>
            r.variants
              .get(v)!
              .statements.filter((st) => st.rows > 0 || st.ms > 1)
              .slice(0, 4)
              .map((st) => [
                r.rows.toLocaleString('en-US'),
                v,
                statementLabel(st.query),
                String(st.calls),
                per(st.ms, st.calls).toFixed(3),
                per(st.rows, st.calls).toFixed(1),
                (per(st.ms, st.rows) * 1000).toFixed(1),
                per(st.hit, st.rows).toFixed(2),
                per(st.read, st.rows).toFixed(2),
                per(st.dirtied, st.rows).toFixed(2),
                per(st.written, st.rows).toFixed(2),
                fmt(per(st.walBytes, st.rows)),
                per(st.walFpi, st.rows).toFixed(2),
              ]),
          ),
        ),
      );
    }
    const nullable = (x: number | null) => (x === null ? null : round2(x));
    // CPU seconds per 1,000 pairs, as µs per pair (whole).
    const usJson = (x: number | null) => (x === null ? null : Math.round(x * 1000));
    const costJson = (r: SizeResult, v: string) => ({
      node_us_per_pair: usJson(cost(r, v, 'node')),
      postgres_us_per_pair: usJson(cost(r, v, 'postgres')),
      other_us_per_pair: usJson(cost(r, v, 'other')),
      idle_us_per_pair: usJson(cost(r, v, 'idle')),
      wall_us_per_pair: usJson(cost(r, v, 'wall')),
    });
    for (const r of results) {
      jsonLine('scale', {
        rows: r.rows,
        pairs_per_s: Math.round(median(r.pairs)),
        replay_per_s: Math.round(median(r.replays)),
        bytes_per_row: Math.round(r.bytesPerRow),
        wal_per_op: Math.round(r.walPerOp),
        wal_per_op_after_checkpoint: Math.round(r.walAfterCheckpoint),
        hot_share: Math.round(r.hotShare * 100) / 100,
        fillfactor: FILLFACTOR ?? null,
        pg_settings: Object.keys(PG_SETTINGS).length > 0 ? PG_SETTINGS : null,
        sweep_per_s: r.sweepPerSec === null ? null : Math.round(r.sweepPerSec),
        pairs_beside_sweep_per_s: r.pairsDuringSweep === null ? null : Math.round(r.pairsDuringSweep),
        ...floorJson('floor', r.floor),
        pairs_vs_floor: round2(median(perRoundRatios(r.pairs, r.floor.pairs))),
        ...floorJson('guarded', r.guarded),
        pairs_vs_guarded: round2(median(perRoundRatios(r.pairs, r.guarded.pairs))),
        // Each rate over the same variant's at the first size (null at the first size).
        pairs_vs_first_size: r === first ? null : round2(vsFirst(r, 'ledger')),
        floor_pairs_vs_first_size: r === first ? null : round2(vsFirst(r, 'floor')),
        guarded_pairs_vs_first_size: r === first ? null : round2(vsFirst(r, 'guarded')),
        // Each rate over the same variant's on an empty table, in the same rounds (null when not measured).
        pairs_vs_empty_beside: nullable(vsEmpty(r, 'ledger')),
        floor_pairs_vs_empty_beside: nullable(vsEmpty(r, 'floor')),
        guarded_pairs_vs_empty_beside: nullable(vsEmpty(r, 'guarded')),
        cpu: costJson(r, 'ledger'),
        floor_cpu: costJson(r, 'floor'),
        guarded_cpu: costJson(r, 'guarded'),
        narrow: NARROW
          ? {
              pairs_per_s: Math.round(median(r.variants.get('narrow')!.pairs)),
              wal_per_op: Math.round(median(r.variants.get('narrow')!.wal)),
              vs_first_size: r === first ? null : round2(vsFirst(r, 'narrow')),
              vs_empty_beside: nullable(vsEmpty(r, 'narrow')),
              bytes_per_row: Math.round(r.narrowBytesPerRow ?? Number.NaN),
            }
          : null,
        candidates:
          CANDIDATES.length === 0
            ? null
            : Object.fromEntries(
                CANDIDATES.map((c) => [
                  c,
                  {
                    pairs_per_s: Math.round(median(r.variants.get(c)!.pairs)),
                    vs_ledger: round2(vsLedger(r, c)),
                    vs_empty_beside: nullable(vsEmpty(r, c)),
                    vs_ledger_empty_beside: nullable(vsEmpty(r, c, 'ledger')),
                    wal_per_op: Math.round(median(r.variants.get(c)!.wal)),
                    cpu: costJson(r, c),
                  },
                ]),
              ),
      });
    }
  } finally {
    for (const l of ledgers.values()) await l.close().catch(() => {});
    if (ledgers.size === 0) await ledger?.close().catch(() => {});
    if (external) await db.query(`drop schema if exists ${SCHEMA} cascade`).catch((e) => log(String(e)));
    if (external) await db.query(`drop schema if exists ${EMPTY_SCHEMA} cascade`).catch((e) => log(String(e)));
    await floorPool.end();
    await guardedPool.end();
    await db.end();
    await server?.destroy();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
