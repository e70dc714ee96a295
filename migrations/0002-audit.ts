import { type Kysely, sql } from 'kysely';

/**
 * The audit trail: append-only `audit_events` (primary key includes `created_at`, so the table
 * can be turned into one partitioned by time), the outbox of batches that could not be enqueued,
 * a dead-letter table for events the writer refused, and the backfill checkpoint.
 */
export function auditMigration(schema: string) {
  const t = (name: string) => sql.table(`${schema}.${name}`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`create table ${t('audit_events')} (
        event_id text not null,
        created_at timestamptz not null,
        seq integer not null default 0,
        task_id text,
        step_id text,
        operation_id text,
        actor_type text not null check (actor_type in ('system','user','agent')),
        actor_id text not null,
        action text not null,
        resource_type text not null,
        resource_id text not null,
        decision text not null check (decision in ('allow','deny','pending_confirmation')),
        reason_code text,
        before_state_ref text,
        after_state_ref text,
        operation text,
        phase text not null check (phase in ('intent','outcome')),
        epoch integer,
        job_id text,
        queue text,
        attempts_made integer,
        attempts_started integer,
        stalled_counter integer,
        details jsonb,
        redaction jsonb,
        received_at timestamptz not null default now(),
        primary key (event_id, created_at)
      )`.execute(db);
      await sql`create index audit_events_task_idx on ${t('audit_events')} (task_id, created_at) where task_id is not null`.execute(
        db,
      );
      await sql`create index audit_events_operation_idx on ${t('audit_events')} (operation_id, created_at)`.execute(db);
      await sql`create table ${t('audit_outbox')} (
        id bigserial primary key,
        events jsonb not null,
        reason text not null,
        created_at timestamptz not null default now()
      )`.execute(db);
      await sql`create table ${t('audit_dead_letter')} (
        id bigserial primary key,
        event jsonb not null,
        reason text not null,
        created_at timestamptz not null default now()
      )`.execute(db);
      await sql`create table ${t('audit_backfill_checkpoint')} (
        name text primary key,
        last_updated_at timestamptz,
        last_key text,
        rows_scanned bigint not null default 0,
        events_enqueued bigint not null default 0,
        updated_at timestamptz not null default now()
      )`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      for (const name of ['audit_backfill_checkpoint', 'audit_dead_letter', 'audit_outbox', 'audit_events']) {
        await db.schema.withSchema(schema).dropTable(name).execute();
      }
    },
  };
}
