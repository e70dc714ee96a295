import type { AuditEvent } from './audit-event.js';
import { CHAIN_DIGEST_VERSION, chainDaySql, GENESIS_SQL, timeOfMicrosSql } from './chain-sql.js';
import { receiptDigestSql } from './receipts-sql.js';

/** Columns of audit_events and the camelCase field each comes from, with its type in a batch. */
export const COLUMNS: [string, keyof AuditEvent, string][] = [
  ['event_id', 'eventId', 'text'],
  ['created_at', 'createdAt', 'timestamptz'],
  ['seq', 'seq', 'int'],
  ['task_id', 'taskId', 'text'],
  ['step_id', 'stepId', 'text'],
  ['operation_id', 'operationId', 'text'],
  ['actor_type', 'actorType', 'text'],
  ['actor_id', 'actorId', 'text'],
  ['action', 'action', 'text'],
  ['resource_type', 'resourceType', 'text'],
  ['resource_id', 'resourceId', 'text'],
  ['decision', 'decision', 'text'],
  ['reason_code', 'reasonCode', 'text'],
  ['before_state_ref', 'beforeStateRef', 'text'],
  ['after_state_ref', 'afterStateRef', 'text'],
  ['operation', 'operation', 'text'],
  ['phase', 'phase', 'text'],
  ['epoch', 'epoch', 'int'],
  ['job_id', 'jobId', 'text'],
  ['queue', 'queue', 'text'],
  ['attempts_made', 'attemptsMade', 'int'],
  ['attempts_started', 'attemptsStarted', 'int'],
  ['stalled_counter', 'stalledCounter', 'int'],
  ['details', 'details', 'jsonb'],
  ['redaction', 'redaction', 'jsonb'],
];

/**
 * The statement that stores a batch of events (`$1`, a JSON array) and chains them on slot `$2`,
 * in one statement: `s` the schema. `$3` holds each event's digest (`eventDigestV4`, 32 bytes
 * each, in the batch's order) and `$4` each event's time as whole microseconds (`eventMicros`,
 * event-digest.ts), the time stored: the writer computes both. The events of a batch are
 * appended to their chain (one per day of the batch) in (created_at, event_id) order, each row
 * keeping its own digest (`chain_digest`); the batch's link, SHA-256 of the chain's head followed
 * by those digests in order, is stored on its last row (`chain_link`) and becomes the head: one
 * hash per batch and chain, none per row (see chain-sql.ts). `mode`: which of the three variants
 * (see below). `chained: false` is the same statement without the chain (`bench:audit` measures what
 * the chain costs against it); the store always chains. `receipts` (with the chain, unless told):
 * each redaction receipt is stored once in audit_receipts, the row holding its id (receipts-sql.ts);
 * the batch's new receipts are stored by the same statement, and a receipt a concurrent writer
 * stored first (invisible to this statement's snapshot) fails it with `audit_receipt_missing()`.
 *
 * One stored row per event id, kept by audit_event_ids (a partitioned table cannot hold a unique
 * index on event_id alone; see migrations/0006). In one statement: `c`, one candidate per id of
 * the batch (its earliest); `k`, what each candidate's id points at, if anything; `fresh`, the ids
 * never seen, inserted; `lost`, ids whose stored row is gone (deleted, or its partition dropped),
 * re-pointed at this candidate so the event is stored again. Ids already stored under any time
 * write nothing. All sub-statements see the same snapshot.
 *
 * `lost` re-points an id only if its row is still the version `k` read (`xmin`): a writer that
 * re-pointed it meanwhile has stored the event (under its own time), and this one then waits for
 * it and skips, instead of storing a second row under another time.
 *
 * Both inserts are plain: `on conflict do nothing` writes every row as a speculative insertion,
 * whose confirm record is 48 B of WAL a row, so only the ids `k` did not find are inserted. A
 * conflict is then a race or a repair: a concurrent writer storing the same new id, or an event
 * row stored that its id did not point to (an id deleted by hand). The statement fails whole
 * (unique violation) and runs again absorbing, the same with `on conflict do nothing`: the unique
 * indexes arbitrate, and stored rows are skipped.
 *
 * Modes: `fresh`, what the store runs first, takes every id of the batch to be new: it looks
 * nothing up (no `k`, no `lost`) and inserts them all, so a batch of new events costs no lookup
 * and the statement names no partition of audit_events (`lost` reads them all, and Postgres plans
 * and locks each one a statement names: 2 ms a batch with 9 partitions, 32 ms with 374). An id
 * already stored fails it whole (unique violation), and the store runs `plain`, the statement
 * above, which skips or re-stores such ids; `absorbing` as above.
 */
export type InsertMode = 'fresh' | 'plain' | 'absorbing';

export function auditInsertSql(s: string, mode: InsertMode, chained = true, receipts = chained): string {
  const absorbing = mode === 'absorbing';
  const table = `${s}.audit_events`;
  const ids = `${s}.audit_event_ids`;
  // With `receipts`, a receipt is stored once in audit_receipts and the row refers to it
  // (`redaction_ref`, see receipts-sql.ts); without, in the row's `redaction` (the schema before
  // migrations/0019).
  const column = (c: string) => (receipts && c === 'redaction' ? 'redaction_ref' : c);
  const cols = COLUMNS.map(([c]) => column(c)).join(', ');
  // Chained, the time is not read from the batch's text: it is the writer's M (`$4`), the time
  // its digest covers (event-digest.ts).
  const read = chained ? COLUMNS.filter(([c]) => c !== 'created_at') : COLUMNS;
  const typed = read.map(([, f, t]) => `"${f}" ${t}`).join(', ');
  const named = COLUMNS.map(([c, f]) =>
    c === 'created_at' && chained
      ? `${timeOfMicrosSql('($4::bigint[])[x.ord_in]')} as ${c}`
      : `${c === 'seq' ? `coalesce(x."${f}", 0)` : `x."${f}"`} as ${c}`,
  ).join(', ');
  // The receipt's id: looked up (or stored) by the statement (`rr`); a receipt it cannot see (a
  // concurrent writer stored it first) fails the statement, and the store runs it again.
  const rid = chained ? 'c.rid' : 'rr.id';
  const picked = COLUMNS.map(([c]) =>
    receipts && c === 'redaction'
      ? `case when c.rd is null then null else coalesce(${rid}, ${s}.audit_receipt_missing()) end`
      : `c.${c}`,
  ).join(', ');
  const onConflict = absorbing ? ' on conflict do nothing' : '';
  const fields = read.map(([, f]) => `"${f}"`).join(', ');
  const rd = receipts ? `, ${receiptDigestSql('x."redaction"')} as rd` : '';
  const head = `with x as (
        select ${named}${rd}, x.ord_in from rows from (jsonb_to_recordset($1::jsonb) as (${typed})) with ordinality as x(${fields}, ord_in)
      ),
      c as (select distinct on (event_id) * from x order by event_id, created_at),${
        mode === 'fresh'
          ? `
      -- Every id taken to be new: one stored before fails the statement (see above).
      fresh as (insert into ${ids} (event_id, created_at) select event_id, created_at from c)`
          : `
      k as (
        select c.event_id, c.created_at, i.created_at as stored_at, i.xmin as stored_version
        from c left join ${ids} i on i.event_id = c.event_id
      ),
      fresh as (
        insert into ${ids} (event_id, created_at) select event_id, created_at from k where stored_at is null${
          absorbing ? ' on conflict (event_id) do nothing' : ''
        }
        returning event_id, created_at
      ),
      lost as (
        update ${ids} i set created_at = k.created_at from k
        where k.stored_at is not null and i.event_id = k.event_id and i.xmin = k.stored_version
          -- The ids' table collates event_id "C", audit_events by the default: only an id of the
          -- default collation probes audit_events' key on both its columns, not on the time alone.
          and not exists (select 1 from ${table} e where e.created_at = i.created_at and e.event_id = i.event_id collate "default")
        returning i.event_id, i.created_at
      )`
      }${
        receipts
          ? `,
      -- The batch's receipts: those stored (rr), and those never seen, stored now (rn).
      rn as (
        insert into ${s}.audit_receipts (digest, receipt)
        select n.rd, n.redaction from (select distinct on (rd) rd, redaction from c where rd is not null) n
        where not exists (select 1 from ${s}.audit_receipts r where r.digest = n.rd)
        on conflict (digest) do nothing
        returning id, digest
      ),
      rr as (
        select r.id, r.digest from ${s}.audit_receipts r where r.digest in (select rd from c)
        union all select id, digest from rn
      )`
          : ''
      }`;
  // The rows to store: all of the batch's (fresh), or those whose ids this statement stored or re-pointed.
  const stored =
    mode === 'fresh'
      ? 'from c'
      : `from c join (select * from fresh union all select * from lost) k using (event_id, created_at)`;
  const withReceipt = receipts ? ' left join rr on rr.digest = c.rd' : '';
  if (!chained)
    return `${head}\n      insert into ${table} (${cols}) select ${picked} ${stored}${withReceipt}${onConflict}`;
  const day = chainDaySql('c.created_at');
  // The chain's order: a batch's events of one day, by time then id.
  const order = `partition by ${day} order by c.created_at, c.event_id`;
  return `${head},
      h as (
        -- The heads of the batch's days (those between its first and last, when it spans more).
        select a.day, a.seq, a.digest from ${s}.audit_chains a, (select min(created_at) as lo, max(created_at) as hi from c) r
        where a.slot = $2 and a.day between ${chainDaySql('r.lo')} and ${chainDaySql('r.hi')} order by a.day for update of a
      ),
      f as (
        select c.*, h.day as head_day, h.seq as head_seq,${receipts ? ' rr.id as rid,' : ''}
          row_number() over w as ord,
          substring($3::bytea from (c.ord_in::int - 1) * 32 + 1 for 32) as d,
          -- The batch's link, on its last event: the batch's digests aggregated once for the whole
          -- of its chain's part (the frame is all of it), hashed once.
          case when row_number() over w = count(*) over w
            then sha256(h.digest || string_agg(substring($3::bytea from (c.ord_in::int - 1) * 32 + 1 for 32), ''::bytea) over w)
          end as link
        ${stored} left join h on h.day = ${day}${withReceipt}${
          // Absorbing, a row may be stored that its id did not point to: it is skipped here, so
          // that the chain counts only what is inserted.
          absorbing
            ? ` where not exists (select 1 from ${table} e where e.created_at = c.created_at and e.event_id = c.event_id)`
            : ''
        }
        -- One window, its frame the whole of the chain's part (row_number ignores the frame).
        window w as (${order} rows between unbounded preceding and unbounded following)
      ),
      ins as (
        insert into ${table} (${cols}, chain_slot, chain_seq, chain_digest, chain_link, chain_v)
        select ${picked}, $2, case when c.head_day is null then ${s}.audit_chain_missing() else c.head_seq + c.ord end,
          c.d, c.link, ${CHAIN_DIGEST_VERSION}
        from f c${onConflict}
        returning created_at, chain_seq, chain_link
      ),
      moved as (
        update ${s}.audit_chains a set seq = i.head_seq + i.ord, digest = i.link
        from ${
          // The head moves to the batch's last place. Plain, every row of f is inserted or the
          // statement fails: the inserted rows say where it is (f is then read once). Absorbing, a
          // row the insert skips must not hold the head back: it moves as f says.
          absorbing ? 'f' : `(select created_at, chain_seq as ord, 0 as head_seq, chain_link as link from ins)`
        } i where i.link is not null and a.day = ${chainDaySql('i.created_at')} and a.slot = $2
      )
      select count(*)::int as inserted from ins`;
}

/** Creates the heads of every slot (`$2` of them) of the days of a batch's times (`$1`, its events' M, event-digest.ts), from a dropped day's anchor when there is one. */
export const chainHeadsSql = (s: string) => `insert into ${s}.audit_chains (day, slot, seq, digest)
      select d.day, g.slot, coalesce(a.seq, 0), coalesce(a.digest, ${GENESIS_SQL})
      from (select distinct ${chainDaySql(timeOfMicrosSql('m'))} as day from unnest($1::bigint[]) as m) d
      cross join generate_series(0, $2::int - 1) as g(slot)
      left join ${s}.audit_chain_anchors a on a.day = d.day and a.slot = g.slot
      on conflict (day, slot) do nothing`;
