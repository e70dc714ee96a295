import { type Kysely, sql } from 'kysely';

/**
 * One stored row per event id. The primary key (created_at, event_id) only made an event unique
 * together with its time, and events that repeat a fact (another job's poll finding the key still
 * in progress, a delivery finding a recorded failure or an unknown outcome) carry the time of the
 * read that found it: each delivery stored another row under the same id. A unique index on
 * `event_id` alone makes every repeat a conflict, which the writer's `ON CONFLICT DO NOTHING`
 * absorbs (the first row stored is kept). Rows already duplicated are reduced to their earliest.
 *
 * Cost: event ids are hashes, so this index takes inserts at random pages (the primary key keeps
 * the time-ordered right edge). A table partitioned by time cannot hold a unique index without
 * the partition key; it would need the ids in a table of their own.
 */
export function auditEventIdUniqueMigration(schema: string) {
  const table = sql.table(`${schema}.audit_events`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`delete from ${table} a using ${table} b
        where a.event_id = b.event_id and a.created_at > b.created_at`.execute(db);
      // Byte order ("C"): the same equality as the column's collation, cheaper comparisons on every insert.
      await sql`create unique index audit_events_event_id_key on ${table} (event_id collate "C")`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`drop index ${sql.table(`${schema}.audit_events_event_id_key`)}`.execute(db);
    },
  };
}
