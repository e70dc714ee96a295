import { CompiledQuery, type Kysely, sql } from 'kysely';
import { createAuditPartitions, type SqlRunner } from '../src/audit/partitions.js';

/** Partitions created ahead of the clock by the migration (the operations process keeps it so). */
const AHEAD_DAYS = 7;

/** Runs partitions.ts's statements on a migration's connection. */
function runner(db: Kysely<unknown>): SqlRunner {
  return {
    async query(text, values = []) {
      const r = await db.executeQuery(CompiledQuery.raw(text, values));
      return {
        rows: r.rows as Record<string, unknown>[],
        rowCount: r.numAffectedRows === undefined ? null : Number(r.numAffectedRows),
      };
    },
  };
}

/**
 * `audit_events` partitioned by time (range on `created_at`, one partition per UTC day), so a
 * retention drops whole partitions (src/audit/partitions.ts) instead of deleting rows. Every event
 * already stored is copied into the partitions (created from the oldest event's day to a week
 * ahead).
 *
 * One stored row per event id (0004) needs an index on event_id alone, and a partitioned table
 * cannot hold one (a unique index must include the partition key), while one event id may arrive
 * with two times (a live event and its backfill, a repeated observation). So the ids move to a
 * slim table of their own, `audit_event_ids` (event_id → the created_at of its stored row),
 * written in the same statement as the events (src/audit/audit-store.ts); its created_at index
 * lets the retention prune it below the oldest partition kept.
 *
 * Indexes of the events: the primary key (created_at, event_id) (time-ordered inserts; finds an
 * id's row in its partition) and the timeline's two (task, operation). Nothing else.
 */
export function auditPartitionsMigration(schema: string) {
  const t = (name: string) => sql.table(`${schema}.${name}`);
  const id = (name: string) => sql.id(name);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`create table ${t('audit_events_next')} (like ${t('audit_events')} including defaults including constraints)
        partition by range (created_at)`.execute(db);
      await sql`create table ${t('audit_event_ids')} (
        event_id text collate "C" primary key,
        created_at timestamptz not null
      )`.execute(db);
      // Partitions of the new table, under their final names (audit_events_pYYYYMMDD): one for
      // each day that holds events, and from today to a week ahead.
      const days = await sql<{ day: Date }>`
        select distinct date_trunc('day', created_at at time zone 'UTC') at time zone 'UTC' as day
        from ${t('audit_events')}`.execute(db);
      const exec = runner(db);
      const now = await sql<{ now: Date }>`select now() as now`.execute(db);
      const today = new Date(now.rows[0]!.now).getTime();
      const ranges: [number, number][] = days.rows.map((r) => [
        new Date(r.day).getTime(),
        new Date(r.day).getTime() + 1,
      ]);
      ranges.push([today, today + (AHEAD_DAYS + 1) * 86_400_000]);
      for (const [from, to] of ranges) {
        await createAuditPartitions(exec, schema, new Date(from), new Date(to), 1, 'audit_events_next');
      }
      await sql`insert into ${t('audit_events_next')} select * from ${t('audit_events')}`.execute(db);
      await sql`insert into ${t('audit_event_ids')} (event_id, created_at)
        select distinct on (event_id) event_id, created_at from ${t('audit_events')}
        order by event_id, created_at`.execute(db);
      await sql`drop table ${t('audit_events')}`.execute(db);
      await sql`alter table ${t('audit_events_next')} rename to ${id('audit_events')}`.execute(db);
      await sql`alter table ${t('audit_events')} add constraint audit_events_pkey primary key (created_at, event_id)`.execute(
        db,
      );
      await sql`create index audit_events_task_idx on ${t('audit_events')} (task_id, created_at) where task_id is not null`.execute(
        db,
      );
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (operation_id, created_at)`.execute(db);
      await sql`create index audit_event_ids_created_idx on ${t('audit_event_ids')} (created_at)`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`create table ${t('audit_events_prev')} (like ${t('audit_events')} including defaults including constraints)`.execute(
        db,
      );
      await sql`insert into ${t('audit_events_prev')} select * from ${t('audit_events')}`.execute(db);
      await sql`drop table ${t('audit_events')}`.execute(db);
      await sql`drop table ${t('audit_event_ids')}`.execute(db);
      await sql`alter table ${t('audit_events_prev')} rename to ${id('audit_events')}`.execute(db);
      await sql`alter table ${t('audit_events')} add constraint audit_events_pkey primary key (created_at, event_id)`.execute(
        db,
      );
      await sql`create unique index audit_events_event_id_key on ${t('audit_events')} (event_id collate "C")`.execute(
        db,
      );
      await sql`create index audit_events_task_idx on ${t('audit_events')} (task_id, created_at) where task_id is not null`.execute(
        db,
      );
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (operation_id, created_at)`.execute(db);
    },
  };
}
