import { Kysely, type MigrationResultSet, Migrator, NO_MIGRATIONS } from 'kysely';
import pg from 'pg';
import { checkSchema, DEFAULT_SCHEMA, openPool, type PostgresOptions } from '../src/db/connection.js';
import { watchClientErrors } from '../src/db/pool-errors.js';
import { SchemaScopedPostgresDialect } from '../src/db/schema-introspector.js';
import { allMigrations } from './index.js';

/** The library keeps its own migration bookkeeping so it never mixes with the application's. */
export const MIGRATION_TABLE = 'bullmq_idempotency_migration';
export const MIGRATION_LOCK_TABLE = 'bullmq_idempotency_migration_lock';

export type MigrateOptions = PostgresOptions & {
  /** `'latest'` applies every pending migration; `'down'` reverts the last one; `'none'` reverts all. @defaultValue `'latest'` */
  to?: 'latest' | 'down' | 'none';
};

/**
 * Creates or upgrades the library's tables. Safe to run from many processes at once:
 * a Postgres advisory lock serialises them, and the second one finds nothing to do.
 *
 * The lock is held by a session, so connect directly to Postgres (or through a pooler in session
 * mode), not through a pooler in transaction mode. Migrations use no named prepared statements.
 *
 * @example
 * await migrate({ connectionString: process.env.DATABASE_URL });
 */
export async function migrate(options: MigrateOptions): Promise<MigrationResultSet> {
  const schema = checkSchema(options.schema ?? DEFAULT_SCHEMA);
  const { pool, owned } = openPool(options, 2);
  // Its introspection reads this schema only: DDL elsewhere in the database cannot fail it.
  const db = new Kysely<unknown>({ dialect: new SchemaScopedPostgresDialect({ pool }, schema) });
  // The lock lives on its own connection, outside the pool, so a pool of size 1 still works.
  const lockClient = new pg.Client(pool.options);
  watchClientErrors(lockClient, options.logger);
  try {
    await lockClient.connect();
    // One lock for the whole schema covers the creation of the schema and of kysely's own
    // bookkeeping tables, which race when two processes start on an empty database.
    await lockClient.query('select pg_advisory_lock(hashtext($1))', [`bullmq-idempotency:${schema}`]);
    await lockClient.query(`create schema if not exists ${schema}`);
    const migrator = new Migrator({
      db,
      provider: { getMigrations: async () => allMigrations(schema) },
      migrationTableName: MIGRATION_TABLE,
      migrationLockTableName: MIGRATION_LOCK_TABLE,
      migrationTableSchema: schema,
    });
    const to = options.to ?? 'latest';
    const result: MigrationResultSet = await (to === 'latest'
      ? migrator.migrateToLatest()
      : to === 'down'
        ? migrator.migrateDown()
        : migrator.migrateTo(NO_MIGRATIONS));
    if (result.error) throw result.error;
    return result;
  } finally {
    // Ending the session releases the advisory lock.
    await lockClient.end().catch(() => {});
    if (owned) await db.destroy();
  }
}
