import { type Kysely, sql } from 'kysely';

/**
 * The timeline's two indexes (`task_id`, `operation_id`) hold a 64-bit hash of the value
 * (`hashtextextended(…, 0)`, src/audit/lookup-sql.ts) instead of the text: an entry is 16 bytes
 * whatever the id's length (a ULID task id took 40, an operation key 40 to 300), so each event's
 * index insert writes less WAL and a page holds more entries (fewer splits). The lookups ask for
 * the hashes of the values and recheck the values themselves on the rows found, so a hash shared
 * by two ids costs a row read, never a wrong answer. `hashtextextended` is the function hash
 * partitioning relies on: its values do not change across Postgres versions. Events without the
 * id take no entry, as before.
 */
export function auditHashedLookupsMigration(schema: string) {
  const t = (name: string) => sql.table(`${schema}.${name}`);
  const drop = (db: Kysely<unknown>, name: string) => sql`drop index ${t(name)}`.execute(db);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await drop(db, 'audit_events_task_idx');
      await sql`create index audit_events_task_idx on ${t('audit_events')} (hashtextextended(task_id, 0))
        where task_id is not null`.execute(db);
      await drop(db, 'audit_events_operation_idx');
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (hashtextextended(operation_id, 0))
        where operation_id is not null`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await drop(db, 'audit_events_operation_idx');
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (operation_id) where operation_id is not null`.execute(
        db,
      );
      await drop(db, 'audit_events_task_idx');
      await sql`create index audit_events_task_idx on ${t('audit_events')} (task_id) where task_id is not null`.execute(
        db,
      );
    },
  };
}
