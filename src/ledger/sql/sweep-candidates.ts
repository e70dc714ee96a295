import { expiresAt, now, TERMINAL } from './fragments.js';
import type { LedgerTableRow } from './get.js';
import { type Clock, statement } from './statement.js';

/**
 * The sweep's candidates: expired terminal rows after the cursor (`$3` sweep_after as text,
 * `$4` key), found by the index on `sweep_after` (no row expires before it, see migration
 * 0010) and checked against their real expiry, in index order, locked for the transaction
 * that deletes them, skipping rows another transaction holds.
 * Params: 1 batch size, 2 clock offset, 3 after sweep_after (text), 4 after key.
 */
export const sweepCandidates = statement<
  { batchSize: number; afterAt: string; afterKey: string } & Clock,
  LedgerTableRow & { cursor_at: string }
>({
  text: ({ ledger }) => `select *, sweep_after::text as cursor_at from ${ledger} l
  where sweep_after <= ${now(2)} and (sweep_after > $3::timestamptz or (sweep_after = $3::timestamptz and key > $4::text))
    and status in ${TERMINAL} and ${expiresAt('l')} <= ${now(2)}
  order by sweep_after, key limit $1 for update skip locked`,
  values: (p) => [p.batchSize, p.clockOffsetMs, p.afterAt, p.afterKey],
});
