import { statement } from './statement.js';

/** The sweep's delete. Params: 1 keys (locked by sweepCandidates in the same transaction). */
export const sweepKeys = statement<{ keys: readonly string[] }, never>({
  text: ({ ledger }) => `delete from ${ledger} where key = any($1::text[])`,
  values: (p) => [p.keys],
});
