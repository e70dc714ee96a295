import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { IdempotencyConfigError } from '../errors/errors.js';
import { type PoolLogger, watchPoolErrors } from './pool-errors.js';

/** Where the ledger lives: an existing pg Pool, or a connection string the library opens itself. */
export type PostgresOptions = {
  /**
   * An existing pool; the library never ends a pool it did not create.
   *
   * When Postgres drops an idle connection (a restart, a failover, `pg_terminate_backend`, a
   * proxy's idle timeout), pg-pool emits `'error'` on the pool, and a pool without an `'error'`
   * listener then ends the process. Give your pool a listener (`pool.on('error', …)`: log the
   * error's `code`, the pool replaces the connection by itself). If it has none when the library
   * receives it, the library attaches its own, which counts and logs the drop (see `logger`).
   */
  pool?: pg.Pool;
  /** Used when no pool is given, e.g. `postgres://user@host:5432/db`. */
  connectionString?: string;
  /** Postgres schema of the library's tables. @defaultValue `'public'` */
  schema?: string;
  /**
   * Receives one warning per dropped idle connection (`{ err: '57P01' }`: the error's code or
   * class, never its message). The library logs nothing when none is given.
   */
  logger?: PoolLogger;
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

/**
 * The given pool, or a new one on `connectionString`; either way with an `'error'` listener (see
 * {@link watchPoolErrors}), so a dropped idle connection never ends the process.
 */
export function openPool(opts: PostgresOptions, poolSize?: number): OwnedPool {
  if (opts.pool) {
    watchPoolErrors(opts.pool, opts.logger);
    return { pool: opts.pool, owned: false };
  }
  if (!opts.connectionString) {
    throw new IdempotencyConfigError('Either pool or connectionString is required', { option: 'connectionString' });
  }
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    ...(poolSize ? { max: poolSize } : {}),
  });
  watchPoolErrors(pool, opts.logger);
  return { pool, owned: true };
}

export function kyselyFor<DB>(pool: pg.Pool): Kysely<DB> {
  return new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
}
