import { type Kysely, sql } from 'kysely';

/**
 * Every transition of a ledger row, recorded by the statement that makes it: `transitions` is a
 * JSON array on the row, appended to by the same INSERT or UPDATE that changes the row (one
 * object per transition: name, epoch, database time in milliseconds, and the facts of the
 * attempt or operator that made it). The audit backfill derives the event of every transition of
 * every epoch from it; it is deleted with the row, which the sweeper deletes only once every one
 * of those events is stored in `audit_events`.
 *
 * Why a column rather than a table of its own: the row is rewritten by each transition anyway,
 * so the entry costs its bytes only (no second tuple, no second index, no later delete); it is
 * atomic with the transition by construction, for the batched statements too.
 *
 * Rows from before this migration keep `null`: the backfill derives their events from the row's
 * current state, as before; their next transition starts the array.
 */
export function ledgerTransitionsMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_ledger`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} add column transitions jsonb`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} drop column transitions`.execute(db);
    },
  };
}
