import type { LedgerStatus } from '../types.js';
import { statement } from './statement.js';

/** A key's epoch and status: why a fenced write matched no row. Params: 1 key. */
export const current = statement<{ key: string }, { epoch: number; status: LedgerStatus }>({
  text: ({ ledger }) => `select epoch, status from ${ledger} where key = $1`,
  values: (p) => [p.key],
});
