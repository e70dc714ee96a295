import { type Kysely, sql } from 'kysely';

/**
 * The sweeper's index without costing the completions their HOT update: `sweep_after`, a time
 * no row expires before (its last claim plus its retention), written by the claim and by no
 * later transition, indexed. A completion changes no indexed column and can stay a HOT update
 * (see 0008); the sweep reads the index from the oldest `sweep_after` up to now and checks each
 * row's real expiry, instead of reading the whole heap every run. Existing rows take their last
 * update plus their retention (their expiry when terminal, earlier than it otherwise). The
 * update writes every row once and the index is built under a lock that holds off writes: on a
 * large ledger, run it when the ledger may pause, as 0008.
 */
export function ledgerSweepIndexMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_ledger`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} add column sweep_after timestamptz`.execute(db);
      await sql`update ${table} set sweep_after = coalesce(expires_at, updated_at + retention_ms * interval '1 millisecond')`.execute(
        db,
      );
      await sql`alter table ${table} alter column sweep_after set not null`.execute(db);
      await sql`create index idempotency_ledger_sweep_idx on ${table} (sweep_after)`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} drop column sweep_after`.execute(db);
    },
  };
}
