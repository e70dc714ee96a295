/**
 * `npm run bench:audit-store`: the audit store's own cost in Postgres, beside two floors, in one
 * sitting. The same batches (`bench:audit`'s events, redacted by its policy, 500 to a batch, as
 * the writer receives them) are stored, in alternating rounds, each variant on a schema of its own
 * made afresh (the library's migrations, so the same tables, partitions and indexes). Each first
 * stores as many other events, not measured (so that the store's checks of a young table's
 * statistics, at 1,000 to 30,000 ids, fall outside the measure, as they do in a writer that has run
 * a while), then the measured ones after a checkpoint:
 * - store: `AuditStore.writeBatch`, as the writer calls it for a batch whose tag holds (one stored
 *   row per event id, the hash chain, receipts stored once);
 * - guarded floor: the rows, and one row per event id (`audit_event_ids`, `on conflict do
 *   nothing`): the store's one guarantee of storage, and nothing else (no chain, no receipt);
 * - floor: the rows alone, into the same table with the same indexes (its key and the task's and
 *   operation's lookups);
 * - batch floor: no row per event: each batch one row holding its payload as the emitter
 *   compressed it, its events' ids (unique) and the batch under each of its tasks and operations
 *   (tables of its own, bench/lib/audit-store-floors.ts): what a store of batches would cost at
 *   least, one stored event per id and the timeline's lookups kept.
 * Per variant: events/s, Postgres CPU per event (every postgres process: the backends, the WAL
 *   writer, the checkpointer), this process's CPU per event, WAL per event (the server's, so run it
 *   on a quiet server), bytes stored per event (heap and indexes, per table). Each variant's rows are
 *   counted after its run: a variant that did not store every event fails the bench.
 * Timings on a shared 2-core machine are noisy: medians of the rounds and per-round ratios, never
 * assertions. The last line of stdout is one JSON object. Env: BENCH_STORE_EVENTS (default
 * 40,000), BENCH_ROUNDS (default 3), BENCH_STORE_CONCURRENCY (default 2, inserts in flight).
 */
import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import pg from 'pg';
import { eventIdFor } from '../src/audit/audit-event.js';
import { AuditStore } from '../src/audit/audit-store.js';
import { auditRedactor } from '../src/audit/redact-event.js';
import { migrate } from '../src/entries/ledger.js';
import { defineKeyring } from '../src/index.js';
import { benchToolEvent } from '../test/helpers/audit-sample.js';
import {
  BATCH_FLOOR_TABLES,
  batchFloorSql,
  batchFloorTablesSql,
  batchFloorValues,
  floorSql,
  guardedFloorSql,
} from './lib/audit-store-floors.js';
import { benchPolicy } from './lib/bench-policy.js';
import { jsonLine } from './lib/json-line.js';
import { storedBytes } from './lib/pg-size.js';
import { walPosition, walSince } from './lib/pg-wal.js';
import { cpuSnapshot, cpuSplit } from './lib/proc-cpu.js';
import { alternatingRounds } from './lib/rounds.js';
import { median, perRoundRatios } from './lib/stats.js';
import { printTable } from './lib/table.js';

const EVENTS = Number(process.env.BENCH_STORE_EVENTS ?? 40_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_STORE_CONCURRENCY ?? 2);
const BATCH = 500;
const databaseUrl = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const TABLES = ['audit_events', 'audit_event_ids', 'audit_receipts', 'audit_chains', ...BATCH_FLOOR_TABLES];

const VARIANTS = ['store', 'guarded floor', 'floor', 'batch floor'] as const;
type Variant = (typeof VARIANTS)[number];

const policy = benchPolicy(defineKeyring({ keys: [{ id: 'k1', secret: randomBytes(32) }] }));
const redact = auditRedactor(policy);
const run = randomBytes(4).toString('hex');

/** The JSON texts of `EVENTS` events in batches, as emitted (redacted, in the emitter's field order). */
function batchesOf(part: string): string[] {
  const out: string[] = [];
  for (let b = 0; b * BATCH < EVENTS; b++) {
    const events = [];
    for (let i = b * BATCH; i < Math.min(EVENTS, (b + 1) * BATCH); i++) {
      events.push(redact(benchToolEvent(eventIdFor('bench', run, part, i), `task-${i % 1000}`, i)));
    }
    out.push(JSON.stringify(events));
  }
  return out;
}
const warmUp = batchesOf('warm-up');
const batches = batchesOf('measured');
/** Each batch's payload as the emitter compresses it (batch-codec.ts, level 1): what the writer receives. */
const payloads = new Map([...warmUp, ...batches].map((json) => [json, deflateRawSync(json, { level: 1 })]));

type Measure = { perSecond: number; pgUs: number; nodeUs: number; wal: number; bytes: number; parts: string };

const pool = new pg.Pool({ connectionString: databaseUrl, max: CONCURRENCY + 1 });

async function measure(variant: Variant, round: number): Promise<Measure> {
  const schema = `bench_store_${round}_${VARIANTS.indexOf(variant)}`;
  await pool.query(`drop schema if exists ${schema} cascade`);
  await migrate({ pool, schema });
  const store = new AuditStore(pool, schema, policy);
  if (variant === 'batch floor') await pool.query(batchFloorTablesSql(schema));
  const statement =
    variant === 'floor'
      ? floorSql(schema)
      : variant === 'batch floor'
        ? batchFloorSql(schema)
        : guardedFloorSql(schema);
  const name = `bench_${schema}`;
  const storeAll = async (texts: string[]) => {
    let next = 0;
    const lane = async () => {
      while (next < texts.length) {
        const json = texts[next++] as string;
        if (variant === 'store') await store.writeBatch(JSON.parse(json) as unknown[], json, true);
        else if (variant === 'batch floor')
          await pool.query({ name, text: statement, values: batchFloorValues(json, payloads.get(json) as Buffer) });
        else await pool.query({ name, text: statement, values: [json] });
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  };
  await storeAll(warmUp);
  await store.close(); // the statistics check the warm-up started, if any
  const size0 = await storedBytes(pool, schema, TABLES);
  await pool.query('checkpoint');
  const wal0 = await walPosition(pool);
  const cpu0 = cpuSnapshot();
  const node0 = process.cpuUsage();
  const t0 = performance.now();
  await storeAll(batches);
  const seconds = (performance.now() - t0) / 1000;
  const node = process.cpuUsage(node0);
  const split = cpuSplit(cpu0, cpuSnapshot());
  const wal = await walSince(pool, wal0);
  const counted = variant === 'batch floor' ? 'audit_batch_event_ids' : 'audit_events';
  const rows = Number((await pool.query(`select count(*) as n from ${schema}.${counted}`)).rows[0].n);
  if (rows !== 2 * EVENTS) throw new Error(`${variant} stored ${rows} rows of ${2 * EVENTS} events`);
  const size = await storedBytes(pool, schema, TABLES);
  // What the measured events added, per table.
  for (const part of size.parts) part[1] -= size0.parts.find(([t]) => t === part[0])?.[1] ?? 0;
  size.total -= size0.total;
  await store.close();
  await pool.query(`drop schema ${schema} cascade`);
  return {
    perSecond: EVENTS / seconds,
    pgUs: ((split?.postgres ?? Number.NaN) * 1e6) / EVENTS,
    nodeUs: ((node.user + node.system) / EVENTS) as number,
    wal: wal / EVENTS,
    bytes: size.total / EVENTS,
    parts: size.parts
      .filter(([, b]) => b > 0)
      .map(([t, b]) => `${t.replace('audit_', '')} ${Math.round(b / EVENTS)}`)
      .join(', '),
  };
}

console.error(`audit store: ${EVENTS} events in batches of ${BATCH}, ${ROUNDS} rounds of ${VARIANTS.join(', ')}...`);
const results = await alternatingRounds(VARIANTS, ROUNDS, async (v, r) => {
  const m = await measure(v, r);
  console.error(
    `round ${r + 1} ${v}: ${Math.round(m.perSecond)} events/s, Postgres ${m.pgUs.toFixed(1)} µs, node ${m.nodeUs.toFixed(1)} µs, WAL ${Math.round(m.wal)} B, stored ${Math.round(m.bytes)} B an event (${m.parts})`,
  );
  return m;
});
await pool.end();

const of = (v: Variant, k: keyof Omit<Measure, 'parts'>) => (results.get(v) as Measure[]).map((m) => m[k]);
const med = (v: Variant, k: keyof Omit<Measure, 'parts'>) => median(of(v, k));
const rounds = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(', ');
printTable(
  [
    'variant (median of rounds)',
    'events/s',
    'Postgres CPU µs/event',
    'node CPU µs/event',
    'WAL B/event',
    'stored B/event',
    'stored, per table',
  ],
  VARIANTS.map((v) => [
    v,
    String(Math.round(med(v, 'perSecond'))),
    med(v, 'pgUs').toFixed(1),
    med(v, 'nodeUs').toFixed(1),
    String(Math.round(med(v, 'wal'))),
    String(Math.round(med(v, 'bytes'))),
    (results.get(v) as Measure[])[0]?.parts ?? '',
  ]),
);
console.log('');
printTable(
  ['per-round ratio', 'rounds'],
  [
    ['store / guarded floor, Postgres CPU', rounds(perRoundRatios(of('store', 'pgUs'), of('guarded floor', 'pgUs')))],
    ['store / floor, Postgres CPU', rounds(perRoundRatios(of('store', 'pgUs'), of('floor', 'pgUs')))],
    ['store / guarded floor, WAL', rounds(perRoundRatios(of('store', 'wal'), of('guarded floor', 'wal')))],
    ['store / floor, WAL', rounds(perRoundRatios(of('store', 'wal'), of('floor', 'wal')))],
    ['batch floor / store, WAL', rounds(perRoundRatios(of('batch floor', 'wal'), of('store', 'wal')))],
    ['batch floor / store, bytes', rounds(perRoundRatios(of('batch floor', 'bytes'), of('store', 'bytes')))],
  ],
);
const figures: Record<string, number> = {};
for (const v of VARIANTS) {
  const key = v.replaceAll(' ', '_');
  figures[`${key}_per_s`] = Math.round(med(v, 'perSecond'));
  figures[`${key}_postgres_cpu_us_per_event`] = Math.round(med(v, 'pgUs') * 10) / 10;
  figures[`${key}_node_cpu_us_per_event`] = Math.round(med(v, 'nodeUs') * 10) / 10;
  figures[`${key}_wal_per_event`] = Math.round(med(v, 'wal'));
  figures[`${key}_bytes_per_event`] = Math.round(med(v, 'bytes'));
}
jsonLine('audit-store', { events: EVENTS, rounds: ROUNDS, ...figures });
