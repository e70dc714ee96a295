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
