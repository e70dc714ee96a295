import { type Kysely, sql } from 'kysely';

/**
 * Slimmer indexes for the audit trail: every event pays an entry (its bytes, and a WAL record on
 * every insert) in each of them.
 *
 * - The timeline's two (`task_id`, `operation_id`) lose their `created_at`: the lookups are by
 *   equality (`= any(…)`, src/audit/audit-store.ts) and sort the task's few events themselves, so
 *   the time only made each entry 8 bytes longer and every entry distinct. Without it a task's or
 *   a key's entries share one key and B-tree deduplication keeps them as one posting list (about
 *   6 bytes an event instead of a whole entry). `operation_id`'s becomes partial, as `task_id`'s:
 *   events without one (sweeper summaries, operator actions) take no entry.
 * - `audit_event_ids.created_at` only serves the retention's prune (ids below the oldest partition
 *   kept) and `verify`'s search for removed ids in a day: range scans over a column that grows
 *   with the insert order. A BRIN index answers them from a summary per block range, and costs an
 *   insert nothing (a B-tree took a 40-byte entry and a WAL record per event).
 */
export function auditSlimIndexesMigration(schema: string) {
  const t = (name: string) => sql.table(`${schema}.${name}`);
  const drop = (db: Kysely<unknown>, name: string) => sql`drop index ${t(name)}`.execute(db);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await drop(db, 'audit_events_task_idx');
      await sql`create index audit_events_task_idx on ${t('audit_events')} (task_id) where task_id is not null`.execute(
        db,
      );
      await drop(db, 'audit_events_operation_idx');
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (operation_id) where operation_id is not null`.execute(
        db,
      );
      await drop(db, 'audit_event_ids_created_idx');
      await sql`create index audit_event_ids_created_idx on ${t('audit_event_ids')} using brin (created_at)`.execute(
        db,
      );
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await drop(db, 'audit_event_ids_created_idx');
      await sql`create index audit_event_ids_created_idx on ${t('audit_event_ids')} (created_at)`.execute(db);
      await drop(db, 'audit_events_operation_idx');
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (operation_id, created_at)`.execute(db);
      await drop(db, 'audit_events_task_idx');
      await sql`create index audit_events_task_idx on ${t('audit_events')} (task_id, created_at) where task_id is not null`.execute(
        db,
      );
    },
  };
}
