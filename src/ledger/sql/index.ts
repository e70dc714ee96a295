import { encodeArrays } from '../../db/array-literal.js';
import { claim } from './claim.js';
import { complete } from './complete.js';
import { current } from './current.js';
import { finish } from './finish.js';
import { get } from './get.js';
import { heartbeat } from './heartbeat.js';
import { insertAndComplete } from './insert-and-complete.js';
import { insertNew } from './insert-new.js';
import { invalidate } from './invalidate.js';
import { peek } from './peek.js';
import { recordLost } from './record-lost.js';
import { resolve } from './resolve.js';
import type { LedgerTables, Statement } from './statement.js';
import { storedEventIds } from './stored-event-ids.js';
import { sweepCandidates } from './sweep-candidates.js';
import { sweepKeys } from './sweep-keys.js';

/**
 * Every statement of the ledger, by name (the name of its prepared statement). They run as named
 * prepared statements (see PostgresLedger), parsed and planned once per connection: unnamed, as
 * behind a pooler in transaction mode (`preparedStatements: false`), `npm run bench:ledger`
 * measures 0.85–0.91× the rate of fresh pairs and 0.68–0.85× of replays.
 */
export const LEDGER_STATEMENTS = {
  claim,
  peek,
  insertNew,
  insertAndComplete,
  recordLost,
  heartbeat,
  complete,
  finish,
  current,
  get,
  invalidate,
  resolve,
  sweepCandidates,
  storedEventIds,
  sweepKeys,
} as const;

export type StatementName = keyof typeof LEDGER_STATEMENTS;
/** The named parameters of statement `N`. */
export type ParamsOf<N extends StatementName> =
  (typeof LEDGER_STATEMENTS)[N] extends Statement<infer P, unknown> ? P : never;
/** The row statement `N` returns. */
export type RowOf<N extends StatementName> =
  (typeof LEDGER_STATEMENTS)[N] extends Statement<never, infer R> ? R : never;

/** The text of every statement for the given tables, by name. */
export function ledgerStatementTexts(tables: LedgerTables): Record<StatementName, string> {
  const out = {} as Record<StatementName, string>;
  for (const name of Object.keys(LEDGER_STATEMENTS) as StatementName[]) {
    out[name] = LEDGER_STATEMENTS[name].text(tables);
  }
  return out;
}

/** The positional values of statement `name` for `params`, arrays as their text ({@link encodeArrays}). */
export function statementValues<N extends StatementName>(name: N, params: ParamsOf<N>): unknown[] {
  return encodeArrays((LEDGER_STATEMENTS[name] as Statement<ParamsOf<N>, unknown>).values(params));
}
