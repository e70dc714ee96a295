import { CompiledQuery, type Kysely } from 'kysely';
import type pg from 'pg';
import { IdempotencyConfigError } from '../errors/errors.js';

/**
 * Where an intent is recorded: a `pg.Pool` (one statement, committed at once), a `pg` client
 * (`PoolClient`, or `Client`) of the caller, usually inside its `BEGIN`, or a kysely
 * `Transaction` (`db.transaction().execute(async (trx) => …)`). With a client or a transaction
 * the intent commits, or rolls back, with the caller's own writes: the transactional outbox.
 */
// biome-ignore lint/suspicious/noExplicitAny: a transaction of any database type
export type IntentTx = pg.PoolClient | pg.Client | Kysely<any>;

/** Runs one parameterised statement; the rows it returns. */
export type IntentExecutor = <R>(text: string, values: unknown[]) => Promise<R[]>;

type Queryable = { query(text: string, values: unknown[]): Promise<{ rows: unknown[] }> };
type KyselyLike = { executeQuery(q: CompiledQuery): Promise<{ rows: unknown[] }>; isTransaction?: boolean };

const isKysely = (x: unknown): x is KyselyLike =>
  typeof x === 'object' && x !== null && typeof (x as KyselyLike).executeQuery === 'function';
const isQueryable = (x: unknown): x is Queryable =>
  typeof x === 'object' && x !== null && typeof (x as Queryable).query === 'function';

/**
 * The executor of a pool, a `pg` client or a kysely transaction. A kysely instance that is not a
 * transaction is refused (`IDEMPOTENCY_CONFIG`, option `tx`): its statement would commit on its
 * own, which is what a pool is for, and a reader of the call would believe otherwise.
 */
export function intentExecutor(target: IntentTx | pg.Pool, option = 'tx'): IntentExecutor {
  if (isKysely(target)) {
    if (target.isTransaction !== true) {
      throw new IdempotencyConfigError(
        `${option}: a kysely instance must be a transaction (db.transaction().execute(async (trx) => …))`,
        { option },
      );
    }
    return async <R>(text: string, values: unknown[]) =>
      (await target.executeQuery(CompiledQuery.raw(text, values))).rows as R[];
  }
  if (isQueryable(target)) {
    return async <R>(text: string, values: unknown[]) => (await target.query(text, values)).rows as R[];
  }
  throw new IdempotencyConfigError(
    `${option}: expected a pg client (inside BEGIN), a pg.Pool or a kysely transaction`,
    {
      option,
    },
  );
}
