import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { IdempotencyConfigError } from '../errors/errors.js';

/** Where the ledger lives: an existing pg Pool, or a connection string the library opens itself. */
export type PostgresOptions = {
  /** An existing pool; the library never ends a pool it did not create. */
  pool?: pg.Pool;
  /** Used when no pool is given, e.g. `postgres://user@host:5432/db`. */
  connectionString?: string;
  /** Postgres schema of the library's tables. @defaultValue `'public'` */
  schema?: string;
};

export const DEFAULT_SCHEMA = 'public';

const IDENT = /^[a-z_][a-z0-9_]{0,62}$/;

/** Schema names are interpolated into SQL text, so only plain identifiers are accepted. */
export function checkSchema(schema: string): string {
  if (!IDENT.test(schema)) {
    throw new IdempotencyConfigError(`Schema name ${JSON.stringify(schema)} must match ${IDENT}`, {
      option: 'schema',
    });
  }
  return schema;
}

export type OwnedPool = { pool: pg.Pool; owned: boolean };

export function openPool(opts: PostgresOptions, poolSize?: number): OwnedPool {
  if (opts.pool) return { pool: opts.pool, owned: false };
  if (!opts.connectionString) {
    throw new IdempotencyConfigError('Either pool or connectionString is required', { option: 'connectionString' });
  }
  return {
    pool: new pg.Pool({
      connectionString: opts.connectionString,
      ...(poolSize ? { max: poolSize } : {}),
    }),
    owned: true,
  };
}

export function kyselyFor<DB>(pool: pg.Pool): Kysely<DB> {
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
}
