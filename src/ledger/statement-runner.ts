import { CompiledQuery } from 'kysely';
import type pg from 'pg';
import { retryingDeadlock } from '../db/deadlock-retry.js';
import { runStatement } from '../db/prepared-statements.js';
import { statementName } from '../db/statement-name.js';
import type { LedgerExecutor } from './ledger-options.js';
import {
  LEDGER_STATEMENTS,
  ledgerStatementTexts,
  type ParamsOf,
  type RowOf,
  type StatementName,
  statementValues,
} from './sql/index.js';
import { tablesOf } from './sql/statement.js';

/**
 * Runs the ledger's statements (src/ledger/sql/) for one schema: on the pool as named prepared
 * statements (or unnamed, `preparedStatements: false`), on a client of the pool inside its
 * transaction, or on a kysely transaction of the caller's.
 */
/** Runs of a ledger statement, the first included, before a deadlock is thrown. */
const DEADLOCK_RUNS = 6;

export class StatementRunner {
  private readonly texts: Record<StatementName, string>;
  /** Prepared-statement names; empty when statements run unnamed. */
  private readonly names: Partial<Record<StatementName, string>>;

  constructor(
    private readonly pool: pg.Pool,
    schema: string,
    prepared: boolean,
  ) {
    this.texts = ledgerStatementTexts(tablesOf(schema));
    // Prepared-statement names are per connection; the schema is part of the name so two
    // ledgers on one pool never collide.
    this.names = prepared
      ? Object.fromEntries(Object.keys(LEDGER_STATEMENTS).map((k) => [k, statementName(k, schema)]))
      : {};
  }

  /** Runs statement `name` on the pool, or on `on`: a kysely executor or a client in a transaction. */
  async run<N extends StatementName>(
    name: N,
    params: ParamsOf<N>,
    on?: LedgerExecutor | pg.PoolClient,
  ): Promise<RowOf<N>[]> {
    const text = this.texts[name];
    const values = statementValues(name, params);
    if (on && 'executeQuery' in on) {
      const res = await on.executeQuery(CompiledQuery.raw(text, values));
      return res.rows as RowOf<N>[];
    }
    const res = await runStatement(on ?? this.pool, this.names[name], text, values);
    return res.rows as RowOf<N>[];
  }

  /**
   * Batches lock rows in key order, but a claim batch and a completion batch (or a batch of both) may still meet in
   * opposite orders; Postgres then aborts one statement (40P01) and it is simply run again.
   */
  async runRetryingDeadlock<N extends 'claim' | 'complete' | 'insertNew' | 'insertAndComplete'>(
    name: N,
    params: ParamsOf<N>,
  ): Promise<RowOf<N>[]> {
    return retryingDeadlock(() => this.run(name, params), DEADLOCK_RUNS);
  }
}
