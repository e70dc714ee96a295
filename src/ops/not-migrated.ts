import type pg from 'pg';
import { NotMigratedError } from '../errors/errors.js';

/** The library's tables the operations process needs. */
const TABLES = ['idempotency_ledger', 'audit_events', 'audit_outbox', 'audit_backfill_checkpoint'] as const;

export { NotMigratedError } from '../errors/errors.js';

/** @throws {@link NotMigratedError} naming the missing tables */
export async function assertMigrated(pool: pg.Pool, schema: string): Promise<void> {
  const res = await pool.query<{ name: string; found: string | null }>(
    'select t as name, to_regclass($1 || $2 || t)::text as found from unnest($3::text[]) as t',
    [schema, '.', TABLES],
  );
  const missing = res.rows.filter((r) => r.found === null).map((r) => r.name);
  if (missing.length > 0) throw new NotMigratedError(schema, missing);
}
