import { type Kysely, sql } from 'kysely';

/**
 * Accepted intents, saved with the durable run state: one row per operation key, written by
 * `enqueue` (inside the caller's transaction when given one) before BullMQ holds a job for it.
 * The row carries what the relay needs to add the job again: its queue, job id and name, the
 * envelope as BullMQ carries it (declared sensitive input already sealed by the producer, never
 * in clear) and the job options. Once the key has a ledger row, the ledger holds the truth and
 * the relay deletes the intent, so the table holds only intents not yet claimed.
 *
 * `relay_after` is when the relay next looks at the row (the database clock): at once for an
 * intent recorded in a transaction, after a grace for one the producer adds itself. The relay
 * reads the index from the oldest `relay_after`, in bounded batches.
 */
export function intentsMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_intents`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await db.schema
        .withSchema(schema)
        .createTable('idempotency_intents')
        .addColumn('key', 'text', (c) => c.primaryKey())
        .addColumn('operation', 'text', (c) => c.notNull())
        .addColumn('queue', 'text', (c) => c.notNull())
        .addColumn('job_id', 'text', (c) => c.notNull())
        .addColumn('job_name', 'text', (c) => c.notNull())
        // The job's data: the envelope, its sensitive fields sealed ({"$sealed": "bqs1…"}).
        .addColumn('data', 'jsonb', (c) => c.notNull())
        .addColumn('opts', 'jsonb', (c) => c.notNull())
        .addColumn('task_id', 'text')
        .addColumn('accepted_at', 'timestamptz', (c) => c.notNull())
        // When BullMQ was first handed the job (by the producer, or by the relay after a commit).
        .addColumn('relayed_at', 'timestamptz')
        .addColumn('relay_after', 'timestamptz', (c) => c.notNull())
        .addColumn('readds', 'integer', (c) => c.notNull().defaultTo(0))
        .execute();
      await sql`create index idempotency_intents_relay_idx on ${table} (relay_after)`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await db.schema.withSchema(schema).dropTable('idempotency_intents').execute();
    },
  };
}
