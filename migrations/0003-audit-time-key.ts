import { type Kysely, sql } from 'kysely';

/**
 * `audit_events` keyed by (created_at, event_id) instead of (event_id, created_at): the same
 * uniqueness (a re-emitted event still conflicts), but new events land at the right edge of the
 * index rather than at random pages (event ids are hashes), so an insert touches few, hot pages
 * however large the table grows; and the time column leads, as partitioning by time wants.
 */
export function auditTimeKeyMigration(schema: string) {
  const table = sql.table(`${schema}.audit_events`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} drop constraint audit_events_pkey,
        add constraint audit_events_pkey primary key (created_at, event_id)`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} drop constraint audit_events_pkey,
        add constraint audit_events_pkey primary key (event_id, created_at)`.execute(db);
    },
  };
}
