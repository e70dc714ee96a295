import { type Kysely, sql } from 'kysely';

/**
 * Confirmation requests: one row per operation key and confirmation name (`ctx.confirm`), so every
 * retry, redelivery and worker of the operation meets the same request and the same answer. Its id
 * is `cf-<n>`: short, typed by operators, and an identifier the audit grammar keeps in clear. An
 * answer is written once (`status` leaves `pending` once, and only while `expires_at`, set on the
 * database clock, lies ahead); `waiters` names the parked jobs the answer wakes.
 */
export function confirmationsMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_confirmations`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .withSchema(schema)
        .createTable('idempotency_confirmations')
        .addColumn('n', 'bigserial', (c) => c.primaryKey())
        .addColumn('operation_key', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('operation', 'text', (c) => c.notNull())
        .addColumn('reason', 'text', (c) => c.notNull())
        // Sealed with the workers' keyring ({"$sealed": "bqs1...."}), never in clear.
        .addColumn('details', 'jsonb')
        .addColumn('status', 'text', (c) =>
          c.notNull().check(sql`status in ('pending','approved','denied','timed_out')`),
        )
        .addColumn('on_timeout', 'text', (c) => c.notNull().check(sql`on_timeout in ('deny','fail')`))
        .addColumn('timeout_ms', 'bigint', (c) => c.notNull().check(sql`timeout_ms > 0`))
        .addColumn('task_id', 'text')
        .addColumn('job_id', 'text')
        .addColumn('queue', 'text')
        .addColumn('requested_epoch', 'integer', (c) => c.notNull())
        .addColumn('requested_at', 'timestamptz', (c) => c.notNull())
        .addColumn('expires_at', 'timestamptz', (c) => c.notNull())
        .addColumn('answered_at', 'timestamptz')
        .addColumn('answered_by', 'text')
        .addColumn('answered_by_type', 'text', (c) => c.check(sql`answered_by_type in ('user','system')`))
        .addColumn('reason_code', 'text')
        .addColumn('comment', 'text')
        .addColumn('waiters', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
        .addUniqueConstraint('idempotency_confirmations_key_name', ['operation_key', 'name'])
        .execute();
      // `confirmations list --pending` and `stats` read the pending rows, oldest first.
      await sql`create index idempotency_confirmations_pending_idx on ${table} (requested_at)
        where status = 'pending'`.execute(db);
      await sql`create index idempotency_confirmations_task_idx on ${table} (task_id)
        where task_id is not null`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.withSchema(schema).dropTable('idempotency_confirmations').execute();
    },
  };
}
