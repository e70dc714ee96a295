import { type Kysely, sql } from 'kysely';

/**
 * Batch links for the audit chain (digest version 4, src/audit/chain-sql.ts): `chain_link` holds
 * the link of the batch an event ended, on the batch's last row, null on the others. Adding a
 * nullable column without a default rewrites no row; the rows already chained keep their links in
 * `chain_digest`, under the version they record.
 */
export function auditChainBatchLinkMigration(schema: string) {
  const table = sql.table(`${schema}.audit_events`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} add column chain_link bytea`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} drop column chain_link`.execute(db);
    },
  };
}
