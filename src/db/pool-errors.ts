import type pg from 'pg';
import { errorLabel } from '../errors/clean-name.js';

/** Where a lost connection is reported: any pino-compatible logger. */
export type PoolLogger = { warn(obj: object, msg?: string): void };

/** What the listener knows of a pool: how many idle connections it lost. */
type Watched = { errors: number };

const watched = new WeakMap<pg.Pool, Watched>();

/** Its message (which may quote a value) never reaches a log line: only its code or class. */
export const LOST_CONNECTION_MESSAGE = 'idle Postgres connection lost; the pool replaces it';

/**
 * Keeps a dropped idle connection (a Postgres restart or failover, `pg_terminate_backend`, a
 * proxy's idle timeout) from ending the process. pg-pool emits `'error'` on the pool when an idle
 * client loses its connection, and an EventEmitter without an `'error'` listener throws: without
 * this, every such drop kills the worker. The pool has already removed the client, and opens a
 * new one on demand; the listener counts the drop and logs it once, by code only.
 *
 * A client checked out of the pool (a kysely transaction between two statements) emits on
 * itself instead; each new client gets a listener that swallows that event: the client is then
 * not queryable, its next query fails, and the pool discards it on release.
 *
 * A pool the caller owns is left alone when it already has an `'error'` listener (the caller
 * then decides what a drop means), and a pool is never watched twice (a ledger and an audit
 * store sharing one pool log each drop once).
 */
export function watchPoolErrors(pool: pg.Pool, logger?: PoolLogger): void {
  if (watched.has(pool)) return;
  if (pool.listenerCount('error') > 0) return;
  const state: Watched = { errors: 0 };
  watched.set(pool, state);
  pool.on('error', (err) => {
    state.errors++;
    logger?.warn({ err: errorLabel(err), lost: state.errors }, LOST_CONNECTION_MESSAGE);
  });
  pool.on('connect', (client) => {
    client.on('error', ignoreCheckedOutError);
  });
}

/** Idle connections a watched pool has lost so far; 0 for a pool not watched by the library. */
export function poolErrorCount(pool: pg.Pool): number {
  return watched.get(pool)?.errors ?? 0;
}

/**
 * A lone client (the migration lock's) that loses its connection while idle: the error is logged
 * once by code; the next query on it fails and says why.
 */
export function watchClientErrors(client: pg.Client, logger?: PoolLogger): void {
  client.on('error', (err) => logger?.warn({ err: errorLabel(err) }, 'Postgres connection lost'));
}

// The failing query (or the release that follows it) reports this drop; the event itself is noise.
function ignoreCheckedOutError(): void {}
