import type pg from 'pg';
import { IdempotencyConfigError } from '../errors/errors.js';

/** Named prepared statements unless told otherwise: they skip the parse and plan of hot statements. */
export const DEFAULT_PREPARED_STATEMENTS = true;

/**
 * SQLSTATEs a transaction-mode pooler causes with named statements: the statement was prepared
 * on another server connection (`26000`, invalid_sql_statement_name: "does not exist"), or this
 * server connection already holds it from another client (`42P05`,
 * duplicate_prepared_statement: "already exists").
 */
const POOLER_CODES = new Set(['26000', '42P05']);

/**
 * Runs one statement on the pool: as the named prepared statement `name`, or unnamed when `name`
 * is undefined. A named statement refused with a pooler's symptoms becomes an
 * {@link IdempotencyConfigError} that names the `preparedStatements` option (the original error is
 * its `cause`): without it, the same failure would surface as a Postgres error about a statement
 * the user never wrote.
 */
export async function runStatement<R extends pg.QueryResultRow = pg.QueryResultRow>(
  pool: pg.Pool | pg.PoolClient,
  name: string | undefined,
  text: string,
  values: unknown[],
): Promise<pg.QueryResult<R>> {
  if (name === undefined) return pool.query<R>(text, values);
  try {
    return await pool.query<R>({ name, text, values });
  } catch (err) {
    throw poolerError(err, name) ?? err;
  }
}

/** The configuration error a pooler's refusal of statement `name` means, or undefined for any other error. */
export function poolerError(err: unknown, name: string): IdempotencyConfigError | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !POOLER_CODES.has(code)) return undefined;
  const error = new IdempotencyConfigError(
    `Postgres refused the prepared statement ${name} (SQLSTATE ${code}): the connection usually goes through a pooler ` +
      'that shares server connections between clients (pgbouncer < 1.21 in transaction mode, RDS Proxy, ' +
      'Supavisor). Set preparedStatements: false on the ledger and the audit store, or connect directly.',
    { option: 'preparedStatements', sqlState: code, statement: name },
  );
  error.cause = err;
  return error;
}
