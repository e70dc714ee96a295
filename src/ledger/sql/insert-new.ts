import { CLAIM_INPUT, type ClaimBatch, claimValues, insertClaimed } from './claim-input.js';
import { ms } from './fragments.js';
import { type Int8, statement } from './statement.js';

/**
 * The claim of keys the read found absent: a plain insert. A key that has a row returns no row
 * and goes through the full claim; a key a concurrent claimer inserted meanwhile fails the whole
 * statement (unique violation, 23505), whose keys then all go through the full claim. Not
 * `on conflict do nothing`: that writes each row as a speculative insertion, confirmed by a WAL
 * record of its own (48 bytes per row). Params as the claim's.
 * The lease owner, job id and queue are left to the claim's entry in the record (see insertClaimed).
 * Returns only the key and the database time as whole milliseconds (an int8, cheaper to read
 * than a timestamp, and cut as the driver cuts timestamps): the rest of a new row is known.
 */
export const insertNew = statement<ClaimBatch, { key: string; at_ms: Int8 }>({
  text: ({ ledger }) => `${insertClaimed(ledger, false)}
  from ${CLAIM_INPUT}
  where not exists (select 1 from ${ledger} x where x.key = i.key)
  order by i.key
  returning key, ${ms('updated_at')} as at_ms`,
  values: claimValues,
});
