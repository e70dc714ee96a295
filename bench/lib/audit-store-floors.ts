/**
 * The audit store's floors, for `npm run bench:audit-store` and `bench:audit`'s pipeline floor
 * (`BENCH_AUDIT_PIPELINE=floor`): statements that store a batch (`$1`, the events' JSON array, as
 * the writer receives it) into the library's own tables, with less than the store does.
 */
import { COLUMNS } from '../../src/audit/insert-statement.js';

/** The floors' columns: the rows' own, without the receipt (the floors store none) and the chain's. */
const floorColumns = COLUMNS.filter(([c]) => c !== 'redaction');
const read = floorColumns.map(([, f, t]) => `"${f}" ${t}`).join(', ');
const values = floorColumns.map(([c, f]) => (c === 'seq' ? `coalesce(x."${f}", 0)` : `x."${f}"`)).join(', ');
const names = floorColumns.map(([c]) => c).join(', ');

/** The rows of a batch, in the order of the events' key (as the store inserts them). */
export const floorSql = (s: string) =>
  `insert into ${s}.audit_events (${names})
   select ${values} from jsonb_to_recordset($1::jsonb) as x(${read}) order by x."createdAt", x."eventId"`;

/** The rows of a batch whose ids were never stored: one row per event id, as the store keeps it. */
export const guardedFloorSql = (s: string) =>
  `with x as (select * from jsonb_to_recordset($1::jsonb) as x(${read})),
   fresh as (
     insert into ${s}.audit_event_ids (event_id, created_at)
     select distinct on (x."eventId") x."eventId", x."createdAt" from x order by x."eventId", x."createdAt"
     on conflict (event_id) do nothing
     returning event_id, created_at
   )
   insert into ${s}.audit_events (${names})
   select ${values} from x join fresh f on f.event_id = x."eventId" and f.created_at = x."createdAt"
   order by x."createdAt", x."eventId"`;

/**
 * The rows of a batch taken to be new, one row per event id, as the store's first statement takes
 * them (`auditInsertSql`'s `fresh` mode: no lookup; an id stored before fails it whole), without
 * the chain or the receipts: the pipeline floor's statement (`bench:audit`, floor-store.ts).
 */
export const freshFloorSql = (s: string) =>
  `with x as (select * from jsonb_to_recordset($1::jsonb) as x(${read})),
   c as (select distinct on (x."eventId") * from x order by x."eventId", x."createdAt"),
   fresh as (insert into ${s}.audit_event_ids (event_id, created_at) select x."eventId", x."createdAt" from c x)
   insert into ${s}.audit_events (${names})
   select ${values} from c x order by x."createdAt", x."eventId"`;

/**
 * A store of batches: each batch one row holding its compressed payload (as the emitter sent it),
 * and per event only what finds it again: its id, unique (one stored event per id), with its
 * time and batch, and the batch under each of its tasks and operations (the timeline's lookups).
 * No row per event, so no column of an event can be queried without inflating its batch.
 */
export const batchFloorTablesSql = (s: string) => `
  create table ${s}.audit_batches (
    id bigint generated always as identity primary key,
    created_at timestamptz not null,
    events int not null,
    payload bytea not null
  );
  -- The payload is compressed already.
  alter table ${s}.audit_batches alter column payload set storage external;
  create table ${s}.audit_batch_event_ids (event_id text primary key, created_at timestamptz not null, batch_id bigint not null);
  create table ${s}.audit_batch_tasks (task_id text not null, batch_id bigint not null, primary key (task_id, batch_id));
  create table ${s}.audit_batch_operations (operation_id text not null, batch_id bigint not null, primary key (operation_id, batch_id))`;

/** The tables of {@link batchFloorTablesSql}. */
export const BATCH_FLOOR_TABLES = [
  'audit_batches',
  'audit_batch_event_ids',
  'audit_batch_tasks',
  'audit_batch_operations',
];

/**
 * One batch (`$5`, its payload) with its events' ids and times (`$1`, `$2`), and its distinct
 * tasks and operations (`$3`, `$4`): the ids of {@link batchFloorTablesSql}'s store.
 */
export const batchFloorSql = (s: string) =>
  `with b as (
     insert into ${s}.audit_batches (created_at, events, payload)
     values ((select min(t) from unnest($2::timestamptz[]) t), cardinality($1::text[]), $5::bytea)
     returning id
   ),
   ids as (
     insert into ${s}.audit_batch_event_ids (event_id, created_at, batch_id)
     select u.i, u.t, b.id from unnest($1::text[], $2::timestamptz[]) as u(i, t), b
     on conflict (event_id) do nothing
   ),
   tasks as (
     insert into ${s}.audit_batch_tasks (task_id, batch_id) select x, b.id from unnest($3::text[]) x, b on conflict do nothing
   )
   insert into ${s}.audit_batch_operations (operation_id, batch_id)
   select x, b.id from unnest($4::text[]) x, b on conflict do nothing`;

/** The parameters of {@link batchFloorSql} for a batch: its JSON text, and its payload as the emitter compressed it. */
export function batchFloorValues(json: string, payload: Buffer): unknown[] {
  const events = JSON.parse(json) as { eventId: string; createdAt: string; taskId?: string; operationId?: string }[];
  const tasks = new Set<string>();
  const operations = new Set<string>();
  for (const e of events) {
    if (e.taskId !== undefined) tasks.add(e.taskId);
    if (e.operationId !== undefined) operations.add(e.operationId);
  }
  return [events.map((e) => e.eventId), events.map((e) => e.createdAt), [...tasks], [...operations], payload];
}
