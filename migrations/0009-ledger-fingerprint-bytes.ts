import { type Kysely, sql } from 'kysely';

/**
 * The ledger's fingerprints as bytes: a SHA-256 hex digest (what `fingerprint()` makes) as its 32
 * bytes instead of 64 characters, any other text as its UTF-8 bytes (a NUL byte after a text of
 * exactly 32 bytes, so the length tells the two apart). 32 bytes less per row, in the heap and in
 * the WAL of every insert and non-HOT update. Rewrites the table (see 0008); `down` restores text.
 */
export function ledgerFingerprintBytesMigration(schema: string) {
  const table = sql.table(`${schema}.idempotency_ledger`);
  return {
    async up(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} alter column fingerprint type bytea using
        case when fingerprint ~ '^[0-9a-f]{64}$' then decode(fingerprint, 'hex')
          else convert_to(fingerprint, 'UTF8') || case when octet_length(fingerprint) = 32 then '\\x00'::bytea else ''::bytea end
        end`.execute(db);
    },
    async down(db: Kysely<unknown>): Promise<void> {
      await sql`alter table ${table} alter column fingerprint type text using
        case when length(fingerprint) = 32 then encode(fingerprint, 'hex')
          else convert_from(rtrim(fingerprint, '\\x00'::bytea), 'UTF8') end`.execute(db);
    },
  };
}
