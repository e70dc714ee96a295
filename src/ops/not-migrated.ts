import type pg from 'pg';

/** The library's tables the operations process needs. */
const TABLES = ['idempotency_ledger', 'audit_events', 'audit_outbox', 'audit_backfill_checkpoint'] as const;

/** The schema has not been migrated: the writer would fail on every batch. */
export class NotMigratedError extends Error {
  constructor(
    readonly schema: string,
    readonly missing: string[],
  ) {
    super(`schema ${schema} is not migrated (missing ${missing.join(', ')}): run \`bullmq-idempotency migrate\` first`);
    this.name = 'NotMigratedError';
  }
}

/** @throws {@link NotMigratedError} naming the missing tables */
export async function assertMigrated(pool: pg.Pool, schema: string): Promise<void> {
  const res = await pool.query<{ name: string; found: string | null }>(
    'select t as name, to_regclass($1 || $2 || t)::text as found from unnest($3::text[]) as t',
    [schema, '.', TABLES],
  );
  const missing = res.rows.filter((r) => r.found === null).map((r) => r.name);
  if (missing.length > 0) throw new NotMigratedError(schema, missing);
}
