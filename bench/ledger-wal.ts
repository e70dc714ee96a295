/**
 * Where the ledger's WAL goes, per fresh job: the library's own statements of a fresh job (the
 * plain insert of a claim, `insertNew`, then the completion with its sealed result, `complete`)
 * for N keys in batches of 200 (as the micro-batcher sends them: a batch's claims, then its
 * completions), and as a worker's write batches run them while its keys are new (`ledger, one
 * statement`: each batch's claims with the completions of the batch before, `insertAndComplete`),
 * on a throw-away schema migrated to the latest migration, against the two floors
 * on their own tables in the same run: the fresh floor (`key text primary key, result jsonb`:
 * the key inserted, then the same sealed result stored) and the write floor (`key text primary
 * key, done boolean`: the key inserted, then the flag set).
 *
 * The WAL is read back with pg_walinspect (`pg_get_wal_records_info` between the LSNs before and
 * after each run): only the records that touch the run's relations (heap, TOAST, indexes) and
 * the records of the transactions that wrote them (their commits), so other sessions' writes on
 * the same server do not count. Bytes are the records' lengths rounded up to 8 (WAL aligns each
 * record), full-page images included and shown apart. Variants alternate within each round; the
 * per-job figures are the medians over the rounds.
 *
 * It also reports, per table, the bytes per row on disk (heap and each index) and the row's
 * size (`pg_column_size`) locked (after the claim) and completed, column by column for the ledger.
 *
 * Run: `npm run bench:ledger-wal` (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test;
 * LEDGER_WAL_KEYS, default 2000; LEDGER_WAL_ROUNDS, default 3). Needs the pg_walinspect extension
 * (created in the database if absent: PostgreSQL 15 or later). The last line of stdout is one JSON
 * object with the medians.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import pg from 'pg';
import { migrate } from '../migrations/migrate.js';
import { fingerprint } from '../src/fingerprint/fingerprint.js';
import { boundedKey, type IdempotencyKey } from '../src/keys/idempotency-key.js';
import type { ClaimParams } from '../src/ledger/sql/claim-input.js';
import { complete } from '../src/ledger/sql/complete.js';
import { insertAndComplete } from '../src/ledger/sql/insert-and-complete.js';
import { insertNew } from '../src/ledger/sql/insert-new.js';
import { tablesOf } from '../src/ledger/sql/statement.js';
import { jobIdFor } from '../src/operation/enqueue.js';
import { defineKeyring } from '../src/sealing/keyring.js';
import { sealResult } from '../src/sealing/sealed-result.js';
import { jsonLine } from './lib/json-line.js';
import { median } from './lib/stats.js';
import { printTable } from './lib/table.js';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const KEYS = Number(process.env.LEDGER_WAL_KEYS ?? 2_000);
const ROUNDS = Number(process.env.LEDGER_WAL_ROUNDS ?? 3);
/** A fillfactor set on the ledger table after the migrations (to measure others than the migrations'). */
const FILLFACTOR = process.env.LEDGER_WAL_FILLFACTOR ? Number(process.env.LEDGER_WAL_FILLFACTOR) : undefined;
/** The micro-batcher's largest batch (PostgresLedger's `batching.maxBatch`). */
const BATCH = 200;
const OPERATION = 'bench.wrapper';
const QUEUE = 'bench-ledger-wal';
const OWNER = `${hostname()}:${process.pid}`;
const LEASE_MS = 10_000;
const RETENTION_MS = 3_600_000;
const KEYRING = defineKeyring({ keys: [{ id: 'bench', secret: randomBytes(32) }] });

type Job = { key: string; claim: ClaimParams; result: string };

/** Job `i` of a round: a worker's claim (owner, job id, queue) and its result sealed as the wrapper seals it. */
function job(round: string, i: number): Job {
  const key: IdempotencyKey = { namespace: 'bench/wrapper', resourceKey: `${round}-${i}`, version: 'v1' };
  const k = boundedKey(key);
  const value = { id: `${round}-${i}`, n: i };
  return {
    key: k,
    claim: {
      key: k,
      namespace: null,
      resourceKey: null,
      version: null,
      operation: OPERATION,
      fingerprint: fingerprint(OPERATION, value),
      leaseMs: LEASE_MS,
      retentionMs: RETENTION_MS,
      downstream: 'idempotent',
      owner: OWNER,
      jobId: jobIdFor(key),
      queue: QUEUE,
      taskId: null,
      stepId: null,
    },
    result: JSON.stringify(sealResult(value, [], KEYRING, { operation: OPERATION, key: k })),
  };
}

type Variant = {
  name: string;
  /** Tables whose relations (heap, TOAST, indexes) the variant writes. */
  tables: string[];
  /** Claims then completes one batch of jobs. */
  batch(jobs: Job[]): Promise<void>;
  /** After the last batch: writes what the batches left to write. */
  finish?(): Promise<void>;
};

function ledgerVariant(pool: pg.Pool, schema: string): Variant {
  const tables = tablesOf(schema);
  const insertText = insertNew.text(tables);
  const completeText = complete.text(tables);
  return {
    name: 'ledger',
    tables: [tables.ledger],
    async batch(jobs) {
      const inserted = await pool.query({
        name: 'wal_insert_new',
        text: insertText,
        values: insertNew.values({ claims: jobs.map((j) => j.claim), clockOffsetMs: 0 }),
      });
      if (inserted.rowCount !== jobs.length) throw new Error(`ledger: ${inserted.rowCount} of ${jobs.length} claimed`);
      const done = await pool.query({
        name: 'wal_complete',
        text: completeText,
        values: complete.values({
          completions: jobs.map((j) => ({ key: j.key, epoch: 1, text: j.result })),
          clockOffsetMs: 0,
        }),
      });
      if (done.rowCount !== jobs.length) throw new Error(`ledger: ${done.rowCount} of ${jobs.length} completed`);
    },
  };
}

/**
 * The ledger as a worker's write batches run it while its keys are new (`insertAndComplete`):
 * each batch's claims in one statement with the completions of the batch before, the last
 * batch's completions alone after it.
 */
function oneStatementVariant(pool: pg.Pool, schema: string): Variant {
  const tables = tablesOf(schema);
  const text = insertAndComplete.text(tables);
  const completeText = complete.text(tables);
  let pending: Job[] = [];
  const completions = (jobs: Job[]) => jobs.map((j) => ({ key: j.key, epoch: 1, text: j.result }));
  return {
    name: 'ledger, one statement',
    tables: [tables.ledger],
    async batch(jobs) {
      const res = await pool.query({
        name: 'wal_insert_and_complete',
        text,
        values: insertAndComplete.values({
          claims: jobs.map((j) => j.claim),
          completions: completions(pending),
          clockOffsetMs: 0,
        }),
      });
      if (res.rowCount !== jobs.length + pending.length)
        throw new Error(`ledger, one statement: ${res.rowCount} of ${jobs.length + pending.length} written`);
      pending = jobs;
    },
    async finish() {
      const done = await pool.query({
        name: 'wal_complete',
        text: completeText,
        values: complete.values({ completions: completions(pending), clockOffsetMs: 0 }),
      });
      if (done.rowCount !== pending.length) throw new Error(`ledger, one statement: ${done.rowCount} completed`);
      pending = [];
    },
  };
}

/** A floor: the keys inserted into `table`, then `setText` run over the batch's keys ($1) and results ($2). */
function floorVariant(pool: pg.Pool, name: string, table: string, setText: string): Variant {
  return {
    name,
    tables: [table],
    async batch(jobs) {
      const keys = jobs.map((j) => j.key);
      await pool.query({
        name: `wal_${name}_claim`,
        text: `insert into ${table} (key) select k from unnest($1::text[]) k order by k on conflict do nothing returning key`,
        values: [keys],
      });
      await pool.query({ name: `wal_${name}_done`, text: setText, values: [keys, jobs.map((j) => j.result)] });
    },
  };
}

type Relation = { name: string; filenode: string };

/** The relations of `table` (its heap, TOAST heap and index, and indexes) by relfilenode. */
async function relationsOf(pool: pg.Pool, table: string): Promise<Relation[]> {
  const res = await pool.query<{ name: string; filenode: string }>(
    `select c.relname as name, pg_relation_filenode(c.oid)::text as filenode from pg_class c
     where c.oid = $1::regclass or c.oid in (select indexrelid from pg_index where indrelid = $1::regclass)
       or c.oid = (select reltoastrelid from pg_class where oid = $1::regclass)
       or c.oid in (select indexrelid from pg_index where indrelid = (select reltoastrelid from pg_class where oid = $1::regclass))`,
    [table],
  );
  return res.rows.map((r) => ({
    name: r.name.replace(/^pg_toast_\d+/, 'toast').replace(/_index$/, ' index'),
    filenode: r.filenode,
  }));
}

type WalLine = { rm: string; type: string; relation: string; count: number; bytes: number; fpi: number };

/**
 * The WAL records between `from` and `to` that touch `relations`, and every record of the
 * transactions that wrote them (their commits), by resource manager, record type and relation
 * (the first block's). Bytes rounded up to 8, as each record is aligned in the WAL.
 */
async function walOf(pool: pg.Pool, from: string, to: string, relations: Relation[]): Promise<WalLine[]> {
  const pattern = `rel \\d+/\\d+/(${relations.map((r) => r.filenode).join('|')}) `;
  const res = await pool.query<{
    rm: string;
    type: string;
    filenode: string | null;
    n: string;
    bytes: string;
    fpi: string;
  }>(
    `with r as (
       select start_lsn, xid, resource_manager as rm, record_type as type, record_length as len, fpi_length as fpi,
         coalesce(block_ref, '') as block_ref
       from pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn)),
     mine as (select * from r where block_ref ~ $3),
     xids as (select distinct xid from mine where xid::text <> '0')
     select rm, type, substring(block_ref from 'rel \\d+/\\d+/(\\d+) ') as filenode, count(*)::int8 as n,
       sum((len + 7) / 8 * 8)::int8 as bytes, sum(fpi)::int8 as fpi
     from r where block_ref ~ $3 or xid in (select xid from xids)
     group by 1, 2, 3 order by 1, 2, 3`,
    [from, to, pattern],
  );
  const nameOf = new Map(relations.map((r) => [r.filenode, r.name]));
  return res.rows.map((r) => ({
    rm: r.rm,
    type: r.type,
    relation: r.filenode === null ? '' : (nameOf.get(r.filenode) ?? r.filenode),
    count: Number(r.n),
    bytes: Number(r.bytes),
    fpi: Number(r.fpi),
  }));
}

async function lsn(pool: pg.Pool): Promise<string> {
  return (await pool.query<{ l: string }>('select pg_current_wal_flush_lsn()::text as l')).rows[0]!.l;
}

/** One run of `variant` over `jobs`: the WAL it wrote, by line. */
async function run(pool: pg.Pool, variant: Variant, jobs: Job[]): Promise<WalLine[]> {
  const relations = (await Promise.all(variant.tables.map((t) => relationsOf(pool, t)))).flat();
  const from = await lsn(pool);
  for (let at = 0; at < jobs.length; at += BATCH) await variant.batch(jobs.slice(at, at + BATCH));
  await variant.finish?.();
  const to = await lsn(pool);
  // A relation rewritten meanwhile would have another filenode: read them again.
  const after = (await Promise.all(variant.tables.map((t) => relationsOf(pool, t)))).flat();
  if (after.some((r, i) => r.filenode !== relations[i]?.filenode))
    throw new Error(`${variant.name}: relations rewritten`);
  return walOf(pool, from, to, relations);
}

const lineKey = (l: WalLine) => `${l.rm}\t${l.type}\t${l.relation}`;

/** Bytes on disk per row of `table`: heap (with TOAST) and each index. */
async function storage(pool: pg.Pool, table: string): Promise<[string, number][]> {
  const rows = Number((await pool.query<{ n: string }>(`select count(*) as n from ${table}`)).rows[0]!.n);
  const res = await pool.query<{ name: string; bytes: string }>(
    `select 'heap' as name, (pg_table_size($1::regclass))::int8 as bytes
     union all
     select c.relname, pg_relation_size(c.oid)::int8 from pg_index i join pg_class c on c.oid = i.indexrelid
     where i.indrelid = $1::regclass`,
    [table],
  );
  return res.rows.map((r) => [r.name, Number(r.bytes) / rows]);
}

/** Average stored size of the rows of `table` in `status` (or all), whole row and per column. */
async function rowSizes(pool: pg.Pool, table: string, where: string): Promise<[string, number][]> {
  const [schema, name] = table.split('.') as [string, string];
  const cols = (
    await pool.query<{ c: string }>(
      `select attname as c from pg_attribute a join pg_class t on t.oid = a.attrelid
       join pg_namespace n on n.oid = t.relnamespace
       where n.nspname = $1 and t.relname = $2 and a.attnum > 0 and not a.attisdropped order by a.attnum`,
      [schema, name],
    )
  ).rows.map((r) => r.c);
  const exprs = [
    'avg(pg_column_size(t.*))::float8 as "(row)"',
    ...cols.map((c) => `coalesce(avg(pg_column_size(t.${c}))::float8, 0) as "${c}"`),
  ];
  const res = await pool.query(`select ${exprs.join(', ')} from ${table} t where ${where}`);
  return Object.entries(res.rows[0] as Record<string, number>).map(([c, v]) => [c, Number(v)]);
}

async function main(): Promise<void> {
  const schema = `bench_wal_${randomBytes(4).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  try {
    await pool.query('create extension if not exists pg_walinspect');
    await migrate({ connectionString: DATABASE_URL, schema });
    if (FILLFACTOR !== undefined) {
      await pool.query(`alter table ${tablesOf(schema).ledger} set (fillfactor = ${Math.trunc(FILLFACTOR)})`);
    }
    await pool.query(`create table ${schema}.fresh_floor (key text primary key, result jsonb)`);
    await pool.query(`create table ${schema}.write_floor (key text primary key, done boolean not null default false)`);
    const ledger = ledgerVariant(pool, schema);
    const variants: Variant[] = [
      ledger,
      oneStatementVariant(pool, schema),
      floorVariant(
        pool,
        'fresh floor',
        `${schema}.fresh_floor`,
        `update ${schema}.fresh_floor t set result = u.r::jsonb from unnest($1::text[], $2::text[]) u(k, r) where t.key = u.k`,
      ),
      floorVariant(
        pool,
        'write floor',
        `${schema}.write_floor`,
        `update ${schema}.write_floor t set done = true from unnest($1::text[]) k where t.key = k and $2::text[] is not null`,
      ),
    ];
    // Warm-up: plans, catalogs, the first pages of every relation.
    for (const v of variants)
      await run(
        pool,
        v,
        Array.from({ length: BATCH }, (_, i) => job(`warm-v${variants.indexOf(v)}`, i)),
      );

    const perJob = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    const fpiPerJob = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    const ledgerLines: WalLine[][] = [];
    for (let r = 0; r < ROUNDS; r++) {
      // Order rotated every round.
      const order = variants.map((_, i) => variants[(i + r) % variants.length]!);
      for (const v of order) {
        const jobs = Array.from({ length: KEYS }, (_, i) => job(`r${r}-v${variants.indexOf(v)}`, i));
        const lines = await run(pool, v, jobs);
        const total = lines.reduce((n, l) => n + l.bytes, 0);
        const fpi = lines.reduce((n, l) => n + l.fpi, 0);
        perJob.get(v.name)!.push(total / KEYS);
        fpiPerJob.get(v.name)!.push(fpi / KEYS);
        if (v === ledger) ledgerLines.push(lines);
        process.stderr.write(
          `round ${r + 1} ${v.name}: ${Math.round(total / KEYS)} B/job (FPI ${Math.round(fpi / KEYS)})\n`,
        );
      }
    }

    // The ledger's WAL by record type and relation: per job, the median over the rounds.
    const keys = [...new Set(ledgerLines.flat().map(lineKey))].sort();
    const med = (k: string, f: (l: WalLine) => number) =>
      median(ledgerLines.map((lines) => lines.filter((l) => lineKey(l) === k).reduce((n, l) => n + f(l), 0) / KEYS));
    console.log(
      `\nLedger WAL per fresh job by record (${KEYS} keys in batches of ${BATCH}, median of ${ROUNDS} rounds)`,
    );
    printTable(
      ['resource manager / record', 'relation', 'records/job', 'B/job', 'of which FPI'],
      keys.map((k) => {
        const [rm, type, relation] = k.split('\t') as [string, string, string];
        return [
          `${rm} ${type}`,
          relation,
          med(k, (l) => l.count).toFixed(2),
          med(k, (l) => l.bytes).toFixed(0),
          med(k, (l) => l.fpi).toFixed(0),
        ];
      }),
    );
    const updates = median(
      ledgerLines.map((ls) =>
        ls.filter((l) => l.rm === 'Heap' && /^UPDATE/.test(l.type)).reduce((n, l) => n + l.count, 0),
      ),
    );
    const hot = median(
      ledgerLines.map((ls) =>
        ls.filter((l) => l.rm === 'Heap' && /^HOT_UPDATE/.test(l.type)).reduce((n, l) => n + l.count, 0),
      ),
    );
    const hotShare = hot / Math.max(1, hot + updates);
    console.log(`HOT completions: ${(hotShare * 100).toFixed(1)} %`);

    console.log('\nWAL per fresh job (B, median; full-page images in it)');
    printTable(
      ['variant', 'WAL B/job', 'FPI B/job', 'WAL without FPI', 'rounds'],
      variants.map((v) => {
        const w = perJob.get(v.name)!;
        const f = fpiPerJob.get(v.name)!;
        return [
          v.name,
          median(w).toFixed(0),
          median(f).toFixed(0),
          median(w.map((x, i) => x - f[i]!)).toFixed(0),
          w.map((x) => x.toFixed(0)).join(' / '),
        ];
      }),
    );

    const ledgerTable = tablesOf(schema).ledger;
    console.log('\nBytes per row on disk');
    const disk = new Map<string, [string, number][]>();
    for (const [name, table] of [
      ['ledger', ledgerTable],
      ['fresh floor', `${schema}.fresh_floor`],
      ['write floor', `${schema}.write_floor`],
    ] as const) {
      disk.set(name, await storage(pool, table));
    }
    printTable(
      ['table', 'relation', 'B/row'],
      [...disk].flatMap(([name, parts]) => parts.map(([rel, b]) => [name, rel, b.toFixed(0)])),
    );

    // A locked row's size: claim one more batch without completing it.
    const locked = Array.from({ length: BATCH }, (_, i) => job('locked', i));
    await pool.query(
      insertNew.text(tablesOf(schema)),
      insertNew.values({ claims: locked.map((j) => j.claim), clockOffsetMs: 0 }),
    );
    const lockedSizes = await rowSizes(pool, ledgerTable, `status = 'locked'`);
    const completedSizes = new Map(await rowSizes(pool, ledgerTable, `status = 'completed'`));
    console.log('\nLedger row size (pg_column_size, average B): locked (after the claim), completed');
    printTable(
      ['column', 'locked', 'completed'],
      lockedSizes
        .filter(
          ([c]) => c === '(row)' || lockedSizes.find(([k]) => k === c)![1] > 0 || (completedSizes.get(c) ?? 0) > 0,
        )
        .map(([c, v]) => [c, v.toFixed(1), (completedSizes.get(c) ?? 0).toFixed(1)]),
    );

    // The sealed result (`{"$sealed": "bqs2.<key id>.<place>.<bytes>"}`) as jsonb, against the
    // parts of its text: the place (operation and key, which the row holds already) and the
    // sealed bytes, and those bytes as bytea (base64url is 4 characters per 3 bytes).
    const sealed = (
      await pool.query<Record<string, number>>(
        `select avg(pg_column_size(result))::float8 as jsonb, avg(octet_length(s))::float8 as text,
           avg(octet_length(split_part(s, '.', 3)))::float8 as place, avg(octet_length(split_part(s, '.', 4)))::float8 as body,
           avg(floor(octet_length(split_part(s, '.', 4)) * 3 / 4.0))::float8 as body_bytes
         from ${ledgerTable}, lateral (select result->>'$sealed' as s) x where status = 'completed'`,
      )
    ).rows[0]!;
    console.log('\nSealed result (average B)');
    printTable(
      ['form', 'B'],
      [
        ['jsonb column', sealed.jsonb!.toFixed(1)],
        ['sealed text', sealed.text!.toFixed(1)],
        ['  of which place (base64url)', sealed.place!.toFixed(1)],
        ['  of which sealed bytes (base64url)', sealed.body!.toFixed(1)],
        ['sealed bytes as bytea', sealed.body_bytes!.toFixed(1)],
      ],
    );

    const wal = (name: string) => Math.round(median(perJob.get(name)!));
    const fpi = (name: string) => Math.round(median(fpiPerJob.get(name)!));
    jsonLine('ledger-wal', {
      keys: KEYS,
      rounds: ROUNDS,
      fillfactor: Number(
        (
          await pool.query<{ f: string | null }>(
            `select substring(array_to_string(reloptions, ',') from 'fillfactor=(\\d+)') as f from pg_class where oid = $1::regclass`,
            [ledgerTable],
          )
        ).rows[0]?.f ?? 100,
      ),
      wal_per_job: wal('ledger'),
      wal_per_job_fpi: fpi('ledger'),
      fresh_floor_wal_per_job: wal('fresh floor'),
      write_floor_wal_per_job: wal('write floor'),
      hot_completions: Math.round(hotShare * 1000) / 1000,
      ledger_bytes_per_row: Math.round((disk.get('ledger') ?? []).reduce((n, [, b]) => n + b, 0)),
      row_bytes_locked: Math.round(lockedSizes[0]![1]),
      row_bytes_completed: Math.round(completedSizes.get('(row)') ?? 0),
      wal_by_record: Object.fromEntries(
        keys.map((k) => [k.replace(/\t/g, ' ').trim(), Math.round(med(k, (l) => l.bytes))]).filter(([, b]) => b !== 0),
      ),
      result_jsonb_bytes: Math.round(sealed.jsonb!),
      result_place_chars: Math.round(sealed.place!),
    });
  } finally {
    await pool.query(`drop schema if exists ${schema} cascade`).catch(() => {});
    await pool.end();
  }
}

await main();
