import { type Kysely, sql } from 'kysely';

/**
 * The version of each event's digest (`chain_v`, see src/audit/chain-sql.ts): events chained
 * before it was recorded were chained under version 1 and keep it (the column's default, which
 * Postgres stores once for the rows already there rather than rewriting them); the store writes
 * the version it chains under with every event, and `verify` recomputes each event's digest under
 * its own row's version.
 */
export function auditChainVersionMigration(schema: string) {
  const table = sql.table(`${schema}.audit_events`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} add column chain_v smallint not null default 1`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} drop column chain_v`.execute(db);
    },
  };
}
