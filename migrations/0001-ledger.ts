import { type Kysely, sql } from 'kysely';

/**
 * The idempotency ledger: one row per operation key (and per step key).
 * Every statement the library runs touches one key, so the table can be sharded by `key`.
 */
export function ledgerMigration(schema: string) {
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .withSchema(schema)
        .createTable('idempotency_ledger')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('namespace', 'text', (c) => c.notNull())
        .addColumn('resource_key', 'text', (c) => c.notNull())
        .addColumn('version', 'text', (c) => c.notNull())
        .addColumn('operation', 'text', (c) => c.notNull())
        .addColumn('fingerprint', 'text', (c) => c.notNull())
        .addColumn('status', 'text', (c) =>
          c.notNull().check(sql`status in ('locked','completed','failed','unknown','released','invalidated')`),
        )
        .addColumn('epoch', 'integer', (c) => c.notNull().check(sql`epoch > 0`))
        .addColumn('downstream', 'text', (c) => c.notNull().check(sql`downstream in ('idempotent','reconcile','none')`))
        .addColumn('lease_owner', 'text')
        .addColumn('lease_expires_at', 'timestamptz')
        .addColumn('retention_ms', 'bigint', (c) => c.notNull().check(sql`retention_ms > 0`))
        .addColumn('result', 'jsonb')
        .addColumn('error', 'jsonb')
        .addColumn('retryable', 'boolean')
        .addColumn('last_transition', 'text', (c) => c.notNull())
        .addColumn('job_id', 'text')
        .addColumn('queue', 'text')
        .addColumn('task_id', 'text')
        .addColumn('step_id', 'text')
        .addColumn('created_at', 'timestamptz', (c) => c.notNull())
        // When the current epoch was claimed: the audit backfill derives that event's time from it.
        .addColumn('claimed_at', 'timestamptz', (c) => c.notNull())
        .addColumn('claim_transition', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
        .addColumn('completed_at', 'timestamptz')
        .addColumn('expires_at', 'timestamptz')
        .execute();
      // The sweeper deletes expired terminal rows; a partial index keeps that scan small.
      await sql`create index idempotency_ledger_expires_idx on ${sql.table(`${schema}.idempotency_ledger`)} (expires_at)
        where status in ('completed','failed','released','invalidated')`.execute(db);
      // No index may cover status/lease columns beyond the sweeper's: a partial index whose
      // predicate a fenced write implies (status = 'locked') lures the planner away from the
      // primary key, and every indexed column a completion changes costs an index insert.
      await sql`create index idempotency_ledger_task_idx on ${sql.table(`${schema}.idempotency_ledger`)} (task_id)
        where task_id is not null`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.withSchema(schema).dropTable('idempotency_ledger').execute();
    },
  };
}
